"""Every docstring example of the package runs (issue 16: examples that are wrong fail CI).

Modules whose optional dependencies are missing are skipped, so the core-only wheel check
runs what it can.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import skxmc


def _modules() -> list[str]:
    names = ["skxmc"]
    for info in pkgutil.walk_packages(skxmc.__path__, prefix="skxmc."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed
        pytest.skip(f"{name}: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}"
