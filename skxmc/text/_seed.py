"""Seeding Python, numpy and torch from a scikit-learn ``random_state``."""

from __future__ import annotations

import random

import numpy as np
import torch
from sklearn.utils import check_random_state

__all__ = ["seed_everything"]


def seed_everything(random_state: int | np.random.RandomState | None = None) -> int:
    """Seed Python's ``random``, numpy's global generator and torch (CPU and CUDA).

    Torch draws dropout masks and initial weights from its global generator, so fixing it
    is what makes two ``fit`` calls with the same ``random_state`` give the same model.
    Code of our own should still draw from a local ``np.random.default_rng(seed)``.

    Parameters
    ----------
    random_state : int, numpy.random.RandomState or None, default=None
        As in scikit-learn. An int is used as the seed; a ``RandomState`` (or None, which
        means numpy's global one) supplies a fresh seed, so that the run can still be
        repeated from the returned value.

    Returns
    -------
    seed : int
        The seed applied, in ``[0, 2**31 - 1)``.

    Notes
    -----
    Bitwise reproducibility on GPU also needs deterministic kernels
    (``torch.use_deterministic_algorithms(True)``), which this function leaves alone
    because they are slower.

    Examples
    --------
    >>> import torch
    >>> from skxmc.text._seed import seed_everything
    >>> seed_everything(0)
    0
    >>> a = torch.rand(2)
    >>> _ = seed_everything(0)
    >>> bool((torch.rand(2) == a).all())
    True
    """
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if not 0 <= int(random_state) < 2**32:
            raise ValueError(f"random_state must be in [0, 2**32), got {random_state}.")
        seed = int(random_state)
    else:
        seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the global generator is the point here
    torch.manual_seed(seed)  # also seeds every CUDA device
    return seed
