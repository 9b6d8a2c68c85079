"""numba's on-disk cache of skxmc's kernels: where it goes, what compiles, the notice.

The subprocess tests start from an empty cache, so each pays one compilation of the
kernels (tens of seconds on a small machine); everything else is quick.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import skxmc
from skxmc._kernels import jit as _numba

from .._helpers import as_unprivileged_user, read_only

# A tiny fit and prediction that prints how many skxmc kernel signatures it compiled;
# argv[1], when given, is the folder skxmc must be imported from.
FIT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import scipy.sparse as sp
    from numba.core import event
    import skxmc
    from skxmc import _warmup

    if sys.argv[1:]:
        assert skxmc.__file__.startswith(sys.argv[1]), skxmc.__file__
    X = sp.random(80, 30, density=0.3, format="csr", random_state=0, dtype=np.float32)
    y = [[int(i % 7), int(i % 3) + 7] for i in range(80)]
    counter = _warmup._CompileCounter()
    event.register("numba:compile", counter)
    clf = skxmc.XRLinearClassifier(n_jobs=2).fit(X, y)
    clf.predict_topk(X, k=3)
    print(json.dumps({"compiled": counter.compiled}))
    """
)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")
    }
    env.update(extra)
    return env


@pytest.mark.slow  # subprocesses compiling into an empty cache: 10-16 s on 2 busy cores
def test_read_only_install_caches_in_the_user_wide_folder():
    """A read-only package folder with a writable HOME: the first process compiles into
    ``~/.cache/numba`` (and says so once), the second loads from there and compiles
    nothing."""
    prefix = as_unprivileged_user()
    base = Path(tempfile.mkdtemp(prefix="skxmc-ro-cache-"))
    try:
        base.chmod(0o755)
        root = base / "site"
        shutil.copytree(
            Path(skxmc.__file__).parent,
            root / "skxmc",
            ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"),
        )
        read_only(root)
        home = base / "home"
        home.mkdir()
        home.chmod(0o777)  # writable by the unprivileged user
        env = _clean_env(HOME=str(home), PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
        runs = []
        for _ in range(2):
            proc = subprocess.run(
                [*prefix, sys.executable, "-c", FIT, str(root)],
                cwd=base,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
            runs.append((json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr))
        (first, first_err), (second, second_err) = runs
        assert first["compiled"] > 0
        assert first_err.count(_numba.COMPILE_MESSAGE) == 1, first_err[-3000:]
        assert "NumbaCacheWarning" not in first_err
        assert second["compiled"] == 0, second
        assert _numba.COMPILE_MESSAGE not in second_err
        assert not list(root.rglob("*.nbi"))  # nothing written next to the sources
        assert list((home / ".cache" / "numba").rglob("*.nbi"))
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


WARMUP = textwrap.dedent(
    """
    import json
    from skxmc import _warmup
    from skxmc._kernels import jit

    report = _warmup.warmup()
    report["signatures"] = {
        k.py_func.__name__: len(k.signatures)
        for k in jit._KERNELS
        if not k.targetoptions.get("inline") == "always"
    }
    print(json.dumps(report))
    """
)


@pytest.mark.slow  # compiles every kernel into an empty cache: 20-31 s on 2 busy cores
def test_warmup_compiles_each_kernel_once_and_covers_a_fit(tmp_path):
    """warmup() on an empty cache compiles every kernel for one signature only; a later
    process's fit, prediction and metrics then compile nothing."""
    env = _clean_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-c", WARMUP], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["compiled"] > 0 and report["loaded"] == 0
    assert proc.stderr.count(_numba.COMPILE_MESSAGE) == 1
    # one dtype set: each kernel compiled for exactly one signature, none left out; the
    # layer solver once per loss (squared-hinge fits never compile the logistic solver)
    per_loss = {"_fit_items", "_solve"}
    signatures = report["signatures"]
    assert signatures and all(signatures[k] == 2 for k in per_loss), report
    assert {v for k, v in signatures.items() if k not in per_loss} == {1}, report

    script = FIT.replace('print(json.dumps({"compiled": counter.compiled}))', "") + textwrap.dedent(
        """
        from skxmc.metrics import evaluate, inverse_propensity
        labels, scores = clf.predict_topk(X, k=3)
        evaluate(y, (labels, scores), ks=(1, 3), classes=clf.classes_,
                 inv_propensity=inverse_propensity(y), normalize=True)
        print(json.dumps({"compiled": counter.compiled}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"compiled": 0}
    assert _numba.COMPILE_MESSAGE not in proc.stderr


def _event(module: str) -> SimpleNamespace:
    func = SimpleNamespace(__module__=module, __name__="kernel")
    return SimpleNamespace(data={"dispatcher": SimpleNamespace(py_func=func)})


def test_compile_notice_once_per_process_and_only_for_skxmc(monkeypatch, capsys):
    monkeypatch.setattr(_numba, "_noticed", False)
    notice = _numba._CompileNotice()
    notice.on_start(_event("numba.np.arrayobj"))  # numba's own helpers: no notice
    notice.on_start(_event("otherlib.kernels"))
    assert capsys.readouterr().err == ""
    notice.on_start(_event("skxmc.linear._solver"))
    notice.on_start(_event("skxmc._kmeans"))
    err = capsys.readouterr().err
    assert err == _numba.COMPILE_MESSAGE + "\n"


def test_jit_registers_every_kernel():
    from skxmc._kernels import layer

    assert layer._fit_items in _numba._KERNELS
    assert all(hasattr(k, "py_func") for k in _numba._KERNELS)


def test_prefetch_is_a_hint_that_changes_no_value():
    import numba
    import numpy as np
    import pytest

    @numba.njit
    def total(a, ahead):
        out = 0.0
        for i in range(a.shape[0]):
            _numba.prefetch(a, i + ahead)  # past the end when ahead > 0: must not fault
            out += a[i]
        return out

    a = np.arange(1000, dtype=np.float32)
    assert total(a, 0) == total(a, 64) == total(a, 10**9) == float(a.sum())
    ints = np.arange(10, dtype=np.int64)
    assert total(ints, 3) == 45.0

    @numba.njit
    def on_a_matrix(m):
        _numba.prefetch(m, 0)

    with pytest.raises(numba.core.errors.TypingError):
        on_a_matrix(np.zeros((2, 2)))
