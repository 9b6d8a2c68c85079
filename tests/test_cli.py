"""The ``skxmc`` command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skxmc import __version__
from skxmc.cli import main


def test_demo_prints_metrics(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for name in ("| P |", "| nDCG |", "| PSP |", "fit ", "predict "):
        assert name in out
    p_at_1 = float(out.split("| P |")[1].split("|")[0])
    assert 10 < p_at_1 <= 100  # a real model on real data, in percent


def test_python_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "skxmc", "--version"], capture_output=True, text=True, check=True
    )
    assert __version__ in out.stdout


def test_bad_arguments_exit_nonzero():
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert main(["demo", "--neighbors", "0"]) == 2
