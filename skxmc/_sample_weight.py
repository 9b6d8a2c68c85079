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


def drop_zero_weight_rows(
    sample_weight: Any, n_samples: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Checked weights of the rows kept by a neural ``fit``, and those rows.

    Returns ``(weights, rows)``: ``weights`` from :func:`check_sample_weight` cut to the
    rows of positive weight, ``rows`` their positions (None when every row is kept). A row
    of weight 0 is dropped before anything else reads the data (classes, label trees,
    validation split), so that it is exactly as if it were not there.
    """
    weights = check_sample_weight(sample_weight, n_samples)
    if weights is None or np.all(weights > 0):
        return weights, None
    rows = np.flatnonzero(weights > 0)
    return weights[rows], rows


def drop_zero_weight_samples(sample_weight: Any, n_samples: int, *data: Any) -> tuple[Any, ...]:
    """:func:`drop_zero_weight_rows` applied: ``(weights, *data)`` with each of ``data``
    (texts, targets, features: anything :func:`take_rows` reads; None stays None) cut to
    the rows of positive weight."""
    weights, kept = drop_zero_weight_rows(sample_weight, n_samples)
    if kept is None:
        return (weights, *data)
    return (weights, *(None if d is None else take_rows(d, kept, n_samples) for d in data))


def loss_weights(weights: np.ndarray | None) -> np.ndarray | None:
    """Per-row loss multipliers of a neural ``fit``: ``weights`` divided by their mean over
    the training rows, or None (the unweighted loss) when they are all equal.

    A batch's loss is the mean over its rows of ``weight_i * loss_i`` with weights of mean
    1. Batches are drawn uniformly from the training rows, so the expected loss of a step
    is ``sum_i w_i loss_i / sum_i w_i``: that of uniform batches from the data set in which
    row ``i`` is repeated ``w_i`` times (an integer weight is a repeated row in
    expectation). Equal weights (all 2) give exactly the unweighted fit.
    """
    if weights is None or np.all(weights == weights[0]):
        return None
    return weights / weights.mean()


def take_rows(data: Any, rows: np.ndarray, n_samples: int) -> Any:
    """Rows ``rows`` of ``data`` (list, array, sparse matrix, pandas object), or ``data``
    itself when it does not hold ``n_samples`` rows (the caller's own check then names
    the mismatch)."""
    from ._compat import _num_samples, _safe_indexing

    try:
        if _num_samples(data) != n_samples:
            return data
    except TypeError:
        return data
    return _safe_indexing(data, rows)
