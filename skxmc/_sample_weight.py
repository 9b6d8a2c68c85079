"""Validation of ``sample_weight``, shared by the estimators' ``fit`` and ``score``.

A sample weight is a per-instance cost, as in liblinear and scikit-learn: a row of weight
``w`` counts as ``w`` copies of itself, a row of weight 0 as no row at all. One checker
gives every estimator the same rules and the same messages, each naming ``sample_weight``.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np

__all__ = ["check_sample_weight"]


def check_sample_weight(
    sample_weight: Any, n_samples: int, *, allow_all_zero: bool = False
) -> np.ndarray | None:
    """``sample_weight`` as a float64 array of ``n_samples`` finite, non-negative weights.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), float or None
        Per-sample weights; a single number gives every sample that weight.
    n_samples : int
        Number of samples (rows of X) the weights must match.
    allow_all_zero : bool, default=False
        Accept weights that are all 0. A fit cannot learn from no sample, and a weighted
        mean over no sample is undefined, so both ``fit`` and ``score`` keep the default.

    Returns
    -------
    ndarray of shape (n_samples,), dtype float64, or None
        None when ``sample_weight`` is None (the unweighted path).

    Raises
    ------
    ValueError
        On a shape other than ``(n_samples,)``, a non-numeric, NaN, infinite or negative
        weight, or (unless ``allow_all_zero``) weights that sum to 0.
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real) and not isinstance(sample_weight, bool):
        sample_weight = np.full(n_samples, float(sample_weight))
    try:
        weights = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"sample_weight must hold numbers, got {type(sample_weight).__name__} that "
            f"cannot be converted to float."
        ) from None
    if weights.ndim != 1 or weights.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight must have shape ({n_samples},) (one weight per sample of X), "
            f"got shape {weights.shape}."
        )
    if not np.all(np.isfinite(weights)):
        bad = np.flatnonzero(~np.isfinite(weights))
        raise ValueError(
            f"sample_weight must be finite; it holds {weights[bad[0]]} at index {bad[0]} "
            f"({bad.size} non-finite value(s))."
        )
    if np.any(weights < 0):
        bad = np.flatnonzero(weights < 0)
        raise ValueError(
            f"sample_weight must be non-negative (0 drops a sample); it holds "
            f"{weights[bad[0]]} at index {bad[0]} ({bad.size} negative value(s))."
        )
    if not allow_all_zero and n_samples and not np.any(weights > 0):
        raise ValueError(
            "sample_weight is zero for every sample: there is no sample to learn from."
        )
    return weights
