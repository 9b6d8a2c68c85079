"""scikit-learn's private API reaches skxmc only through ``skxmc._compat``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import skxmc
from skxmc import _compat

PACKAGE = Path(skxmc.__file__).resolve().parent
ROOT = PACKAGE.parent

# Public in the scikit-learn versions we claim, but new or moved recently enough (a function
# only since 1.6) that it goes through _compat too.
ROUTED_PUBLIC = {"validate_data"}

# Modules that still import private scikit-learn names directly, to be rerouted through
# skxmc._compat (issue 17, point 15); empty this set as they are. An entry that is no longer
# needed makes test_known_exceptions_are_still_needed skip with a reminder.
KNOWN_EXCEPTIONS: set[str] = set()


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def _private_sklearn_imports(path: Path) -> list[str]:
    """``"line: statement"`` for each private (or routed) scikit-learn import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "sklearn":
                continue
            for alias in node.names:
                if (
                    _is_private(node.module)
                    or _is_private(alias.name)
                    or alias.name in ROUTED_PUBLIC
                ):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "sklearn" and _is_private(alias.name):
                    found.append(f"{node.lineno}: import {alias.name}")
    return found


def _offenders() -> dict[str, list[str]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel != "_compat.py" and (found := _private_sklearn_imports(path)):
            out[rel] = found
    return out


def test_private_sklearn_names_go_through_compat():
    offenders = {k: v for k, v in _offenders().items() if k not in KNOWN_EXCEPTIONS}
    assert not offenders, (
        "import these from skxmc._compat (add them there if missing): "
        + "; ".join(f"skxmc/{k}: {', '.join(v)}" for k, v in offenders.items())
    )


def test_known_exceptions_are_still_needed():
    stale = sorted(KNOWN_EXCEPTIONS - set(_offenders()))
    if stale:
        pytest.skip(f"no private sklearn import left in {stale}: remove them from KNOWN_EXCEPTIONS")


def test_detector_sees_private_imports(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(
        "from sklearn.base import BaseEstimator, _fit_context\n"
        "from sklearn.utils._param_validation import Interval\n"
        "from sklearn.utils.validation import check_is_fitted, validate_data\n"
        "import sklearn.utils._testing\n"
        "from sklearn.preprocessing import normalize\n"
        "from skxmc._compat import _fit_context\n"
    )
    assert _private_sklearn_imports(path) == [
        "1: from sklearn.base import _fit_context",
        "2: from sklearn.utils._param_validation import Interval",
        "3: from sklearn.utils.validation import validate_data",
        "4: import sklearn.utils._testing",
    ]


def test_compat_exports_every_name():
    for name in _compat.__all__:
        assert getattr(_compat, name) is not None, name


def _claimed_minimum() -> tuple[int, int]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'"scikit-learn>=(\d+)\.(\d+)', text)
    assert match, "pyproject.toml declares no scikit-learn>= lower bound"
    return int(match[1]), int(match[2])


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="not a source checkout")
def test_installed_sklearn_is_in_the_claimed_range():
    assert _compat.SKLEARN_VERSION >= _claimed_minimum()


@pytest.mark.skipif(not (ROOT / "Makefile").exists(), reason="not a source checkout")
def test_oldest_sklearn_job_tests_the_claimed_minimum():
    # `make test-oldest` must pin the lower bound of pyproject.toml, or the CI job tests a
    # version we do not claim (or misses the one we do).
    match = re.search(
        r"^SKLEARN_OLDEST \?= (\d+)\.(\d+)\.\d+$", (ROOT / "Makefile").read_text(), re.M
    )
    assert match, "Makefile has no SKLEARN_OLDEST ?= X.Y.Z"
    assert (int(match[1]), int(match[2])) == _claimed_minimum()


def test_exceptions_have_one_home_and_import_no_torch():
    import subprocess
    import sys

    import skxmc.exceptions as exc
    from skxmc import _memory
    from skxmc._kernels import jit as _numba
    from skxmc.exceptions import CheckpointMismatchWarning, TrainingInterruptedWarning

    assert _memory.InsufficientMemoryError is exc.InsufficientMemoryError
    assert _numba.NumbaCacheWarning is exc.NumbaCacheWarning
    assert TrainingInterruptedWarning is exc.TrainingInterruptedWarning
    assert CheckpointMismatchWarning is exc.CheckpointMismatchWarning
    assert issubclass(exc.InsufficientMemoryError, (MemoryError, ValueError))
    code = "import sys, skxmc.exceptions; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
