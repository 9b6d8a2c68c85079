"""``verbose > 0`` prints progress to standard output; the same lines are logged at DEBUG."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import skxmc
from skxmc import HierarchicalLabelTree
from skxmc._logging import progress

PACKAGE = Path(skxmc.__file__).resolve().parent

# Modules that still name their logger with a literal instead of __name__ (issue 17,
# point 11); empty this set as they are converted (a stale entry makes
# test_literal_logger_exceptions_are_still_needed skip with a reminder).
LITERAL_LOGGER_EXCEPTIONS: set[str] = set()


def _toy_problem(n_samples: int = 120, n_labels: int = 40, n_features: int = 30):
    rng = np.random.RandomState(0)
    X = sp.random(n_samples, n_features, density=0.2, format="csr", random_state=rng)
    Y = sp.random(n_samples, n_labels, density=0.05, format="csr", random_state=rng)
    Y.data[:] = 1
    return X, Y


@pytest.mark.parametrize("verbose", [1, 2, True])
def test_progress_prints_when_verbose(verbose, capsys, caplog):
    logger = logging.getLogger("skxmc.test_logging")
    with caplog.at_level(logging.DEBUG, logger="skxmc"):
        progress(logger, verbose, "step %d of %d: %s", 3, 7, "ok")
    assert capsys.readouterr().out == "step 3 of 7: ok\n"
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG and record.name == "skxmc.test_logging"
    assert record.getMessage() == "step 3 of 7: ok"
    # The record points at the caller, not at the helper.
    assert record.funcName == "test_progress_prints_when_verbose"


@pytest.mark.parametrize("verbose", [0, False, None])
def test_progress_is_silent_but_logged_when_not_verbose(verbose, capsys, caplog):
    with caplog.at_level(logging.DEBUG, logger="skxmc"):
        progress(logging.getLogger("skxmc.test_logging"), verbose, "100% done")
    assert capsys.readouterr().out == ""
    assert [r.getMessage() for r in caplog.records] == ["100% done"]


def test_label_tree_verbose_prints_progress(capsys, caplog):
    X, Y = _toy_problem()
    with caplog.at_level(logging.DEBUG, logger="skxmc.tree"):
        HierarchicalLabelTree(max_leaf_size=10, verbose=1).fit(X, Y)
    out = capsys.readouterr().out
    assert "label tree: 40 labels" in out
    assert "label tree: 40 labels" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="skxmc.tree"):
        HierarchicalLabelTree(max_leaf_size=10, verbose=0).fit(X, Y)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # no line, no progress bar
    assert "label tree: 40 labels" in caplog.text  # still there for logging users


def _literal_logger_names(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("skxmc")
        ):
            names.append(f"{node.lineno}: getLogger({node.args[0].value!r})")
    return names


def _literal_logger_modules() -> dict[str, list[str]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if found := _literal_logger_names(path):
            out[path.relative_to(PACKAGE).as_posix()] = found
    return out


def test_modules_log_on_getlogger_name():
    offenders = {
        k: v for k, v in _literal_logger_modules().items() if k not in LITERAL_LOGGER_EXCEPTIONS
    }
    assert not offenders, f"use logging.getLogger(__name__) in {offenders}"


def test_literal_logger_exceptions_are_still_needed():
    stale = sorted(LITERAL_LOGGER_EXCEPTIONS - set(_literal_logger_modules()))
    if stale:
        pytest.skip(f"{stale} use getLogger(__name__) now: remove them from the exceptions")


@pytest.mark.parametrize("verbose, shown", [(0, False), (1, False), (2, True)])
def test_transformers_bars_show_only_at_verbose_2(verbose, shown, tiny_bert_dir, capfd):
    # verbose=1 is skxmc's progress in one style: transformers' "Loading weights" bar
    # would mix a second one into it (sklearn-api review, P10).
    from transformers.utils import logging as hf_logging

    from skxmc.text import load_encoder

    hf_logging.enable_progress_bar()
    try:
        load_encoder(tiny_bert_dir, verbose=verbose)
    finally:
        hf_logging.disable_progress_bar()
    assert ("Loading weights" in capfd.readouterr().err) is shown
