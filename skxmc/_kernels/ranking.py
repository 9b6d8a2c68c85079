"""Compiled top-k ranking and hit detection (callers: :mod:`skxmc._ranking`).

Ties are broken deterministically: equal scores rank the lower column index first.
"""

from __future__ import annotations

from .jit import jit

__all__ = ["_csr_topk_kernel", "_hits_kernel", "insert_ranked"]


@jit(nogil=True, inline="always")
def insert_ranked(col, s, idx, score, start, cap, filled):  # pragma: no cover - numba
    """Insert ``(s, col)`` into the ranked buffer ``score[start:start + cap]`` /
    ``idx[...]`` that holds ``filled`` entries, higher score first, then lower col (an
    entry that ranks below a full buffer is dropped). Returns the new fill."""
    pos = filled
    while pos > 0:
        prev_s = score[start + pos - 1]
        if s > prev_s or (s == prev_s and col < idx[start + pos - 1]):
            pos -= 1
        else:
            break
    if pos >= cap:
        return filled
    last = filled if filled < cap else cap - 1
    for q in range(last, pos, -1):
        score[start + q] = score[start + q - 1]
        idx[start + q] = idx[start + q - 1]
    score[start + pos] = s
    idx[start + pos] = col
    return filled + 1 if filled < cap else filled


@jit(nogil=True)
def _csr_topk_kernel(indptr, indices, data, k, out_idx, out_score):  # pragma: no cover - numba
    for i in range(len(indptr) - 1):
        row_idx, row_score = out_idx[i], out_score[i]  # one view per row, not per entry
        filled = 0
        for p in range(indptr[i], indptr[i + 1]):
            filled = insert_ranked(indices[p], data[p], row_idx, row_score, 0, k, filled)


@jit(nogil=True)
def _hits_kernel(top_idx, indptr, indices, out):  # pragma: no cover - numba
    n, k = top_idx.shape
    for i in range(n):
        lo0 = indptr[i]
        hi0 = indptr[i + 1]
        for j in range(k):
            c = top_idx[i, j]
            if c < 0:
                continue
            lo = lo0
            hi = hi0
            while lo < hi:  # binary search in the sorted truth row
                mid = (lo + hi) >> 1
                if indices[mid] < c:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < hi0 and indices[lo] == c:
                out[i, j] = 1
