"""Top-k ranking of score matrices and hit detection (the compiled kernels are in
:mod:`skxmc._kernels.ranking`).

Shared by the metrics (ranking predictions) and the estimators (turning beam scores into
top-k label arrays). Ties are broken deterministically: equal scores rank the lower
column index first.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._kernels.jit import interruptible
from ._kernels.ranking import _csr_topk_kernel, _hits_kernel

__all__ = [
    "top_truth_weights",
    "topk_from_dense",
    "topk_from_pairs",
    "topk_from_sparse",
    "topk_to_csr",
    "truth_hits",
]


@interruptible()
def topk_from_sparse(
    Y_score: sp.spmatrix, k: int, *, canonical: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Rank the stored entries of each row of a sparse score matrix.

    Returns ``(indices, scores)`` of shape ``(n, k)``; rows with fewer than ``k`` stored
    entries are padded with index ``-1`` and score ``-inf``. ``canonical=True`` is for
    internal callers whose CSR has no duplicate entries and only finite scores (skips the
    checks, which cost a sort).
    """
    S = sp.csr_matrix(Y_score)
    if not canonical:
        S.sum_duplicates()
    data = np.asarray(S.data, dtype=np.float64)
    if not canonical and not np.all(np.isfinite(data) | np.isneginf(data)):
        raise ValueError("Y_score contains NaN or +inf scores.")
    out_idx = np.full((S.shape[0], k), -1, dtype=np.int64)
    out_score = np.full((S.shape[0], k), -np.inf, dtype=np.float64)
    _csr_topk_kernel(
        S.indptr.astype(np.int64), S.indices.astype(np.int64), data, k, out_idx, out_score
    )
    return out_idx, out_score


def topk_to_csr(indices: np.ndarray, scores: np.ndarray, n_columns: int) -> sp.csr_matrix:
    """``(indices, scores)`` top-k arrays, shape ``(n, k)``, as a CSR ``(n, n_columns)``
    float32 score matrix with sorted indices; negative indices (empty slots) are left out.
    The inverse of :func:`topk_from_sparse`."""
    idx = np.asarray(indices, dtype=np.int64)
    keep = idx >= 0
    rows = np.repeat(np.arange(idx.shape[0]), keep.sum(axis=1))
    values = np.asarray(scores, dtype=np.float32)[keep]
    out = sp.csr_matrix((values, (rows, idx[keep])), shape=(idx.shape[0], n_columns))
    out.sort_indices()
    return out


def topk_from_dense(
    Y_score: np.ndarray, k: int, *, chunk_entries: int = 1 << 23
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k columns of each row of a dense score matrix (chunked over rows).

    Returns ``(indices, scores)`` of shape ``(n, k)``, padded with ``-1`` / ``-inf`` when
    the matrix has fewer than ``k`` columns.
    """
    S = np.asarray(Y_score, dtype=np.float64)
    if np.isnan(S).any() or np.isposinf(S).any():
        raise ValueError("Y_score contains NaN or +inf scores.")
    n, n_cols = S.shape
    kk = min(k, n_cols)
    out_idx = np.full((n, k), -1, dtype=np.int64)
    out_score = np.full((n, k), -np.inf, dtype=np.float64)
    if kk == 0 or n == 0:
        return out_idx, out_score
    step = max(1, chunk_entries // max(n_cols, 1))
    cols = np.arange(n_cols)
    for start in range(0, n, step):
        block = S[start : start + step]
        if kk < n_cols:
            kth = -np.partition(-block, kk - 1, axis=1)[:, kk - 1 : kk]
            greater = block > kth
            equal = block == kth
            room = kk - greater.sum(axis=1, keepdims=True)
            # Among scores tied with the k-th value keep the lowest column indices.
            selected = greater | (equal & (np.cumsum(equal, axis=1) <= room))
            cand = np.nonzero(selected)[1].reshape(len(block), kk)
        else:
            cand = np.broadcast_to(cols, block.shape)
        cand_scores = np.take_along_axis(block, cand, axis=1)
        order = np.lexsort((cand, -cand_scores), axis=1)
        out_idx[start : start + len(block), :kk] = np.take_along_axis(cand, order, axis=1)
        out_score[start : start + len(block), :kk] = np.take_along_axis(cand_scores, order, axis=1)
    return out_idx, out_score


def topk_from_pairs(
    indices: np.ndarray, scores: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Re-rank given ``(indices, scores)`` candidate arrays and keep ``k`` per row.

    Negative indices and ``-inf`` scores mark empty slots: ``predict_topk`` gives empty
    slots a ``-inf`` score, so they are recognised whatever their label. Duplicate
    indices within a row raise an error (they would count a hit twice).
    """
    idx = np.asarray(indices)
    sc = np.asarray(scores, dtype=np.float64)
    if idx.ndim == 1:
        idx, sc = idx[:, None], sc[:, None] if sc.ndim == 1 else sc
    if idx.ndim != 2 or idx.shape != sc.shape:
        raise ValueError(
            "Y_score given as (indices, scores) needs two arrays of the same 2-D shape "
            f"(n_samples, k); got shapes {np.shape(indices)} and {np.shape(scores)}."
        )
    if np.isnan(sc).any() or np.isposinf(sc).any():
        raise ValueError("Y_score contains NaN or +inf scores.")
    idx = idx.astype(np.int64, copy=False)
    empty = (idx < 0) | np.isneginf(sc)
    sorted_idx = np.sort(np.where(empty, -1 - np.arange(idx.shape[1]), idx), axis=1)
    if idx.shape[1] > 1 and np.any((np.diff(sorted_idx, axis=1) == 0) & (sorted_idx[:, 1:] >= 0)):
        raise ValueError("Y_score (indices, scores) lists the same label twice in a row.")
    sc = np.where(empty, -np.inf, sc)
    key_idx = np.where(empty, np.iinfo(np.int64).max, idx)
    order = np.lexsort((key_idx, -sc), axis=1)[:, :k]
    out_idx = np.take_along_axis(np.where(empty, -1, idx), order, axis=1)
    out_score = np.take_along_axis(sc, order, axis=1)
    if out_idx.shape[1] < k:
        pad = k - out_idx.shape[1]
        out_idx = np.pad(out_idx, ((0, 0), (0, pad)), constant_values=-1)
        out_score = np.pad(out_score, ((0, 0), (0, pad)), constant_values=-np.inf)
    return out_idx, out_score


@interruptible()
def truth_hits(top_idx: np.ndarray, Y_true: sp.csr_matrix) -> np.ndarray:
    """``hits[i, j] = 1`` when the j-th ranked label of row i is relevant (sorted CSR truth)."""
    out = np.zeros(top_idx.shape, dtype=np.uint8)
    _hits_kernel(
        np.ascontiguousarray(top_idx, dtype=np.int64),
        Y_true.indptr.astype(np.int64, copy=False),
        Y_true.indices.astype(np.int64, copy=False),
        out,
    )
    return out


def top_truth_weights(Y_true: sp.csr_matrix, weights: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest weights among each row's relevant labels, zero padded: the best
    achievable propensity-scored ranking."""
    # numpy, not a numba kernel: its sort would cost seconds of compilation for an
    # O(nnz log nnz) step that numpy does as fast
    n = Y_true.shape[0]
    out = np.zeros((n, k), dtype=np.float64)
    indptr = Y_true.indptr.astype(np.int64, copy=False)
    w = np.asarray(weights, dtype=np.float64)[Y_true.indices]
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    order = np.lexsort((-w, row))  # by row, then by decreasing weight
    rank = np.arange(len(order), dtype=np.int64) - indptr[row]
    keep = rank < k
    out[row[keep], rank[keep]] = w[order][keep]
    return out
