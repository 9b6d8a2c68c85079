"""Shared fixtures: the reference datasets folder and small real data slices."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from skxmc.datasets import get_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``$SKXMC_DATA`` or ``../shared/data``; tests using it skip when it is absent."""
    found = get_data_dir()
    if found is None:
        pytest.skip(
            "reference datasets not found: set SKXMC_DATA to the shared data folder "
            f"(SKXMC_DATA={os.environ.get('SKXMC_DATA')!r}, cwd={Path.cwd()})"
        )
    return found


def dataset_path(data_dir: Path, *parts: str) -> Path:
    path = data_dir.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"dataset file {path} is missing")
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
