"""The package's floors ([tool.importlinter] in pyproject.toml): an import from a lower
floor to a higher one, a kernel that imports an estimator, or a module that imports the
command line fails this test (and `make lint`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason="pip install import-linter (the test extra)")
    # A fresh process started in the checkout, so that grimp reads this checkout's skxmc
    # (not another installed copy); no cache, so that the result is always today's.
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(no_cache=True, no_logo=True))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
