"""Compiled sparse kernels: the LSD radix sort every kernel uses instead of
``np.sort``, and the row kernel of the threaded sorted product (:mod:`skxmc._sparse_product`).
"""

from __future__ import annotations

import numpy as np

from .jit import jit

__all__ = ["_product_rows", "radix_sort"]


@jit(nogil=True)
def radix_sort(a, n, tmp, counts, n_bits):  # pragma: no cover - compiled
    """Sort ``a[:n]`` (non-negative ints below ``2**n_bits``) in place; LSD radix sort.

    O(n) per 11-bit digit; used instead of ``np.sort``, whose compiled quicksort costs
    ~1.5 s of compile time. ``tmp`` has length >= n, ``counts`` length 2049.
    """
    src = a
    dst = tmp
    shift = np.int64(0)
    n_pass = 0
    while shift < n_bits:
        counts[:] = 0
        for i in range(n):
            counts[((src[i] >> shift) & 2047) + 1] += 1
        for k in range(2048):
            counts[k + 1] += counts[k]
        for i in range(n):
            key = (src[i] >> shift) & 2047
            dst[counts[key]] = src[i]
            counts[key] += 1
        src, dst = dst, src
        shift += 11
        n_pass += 1
    if n_pass % 2 == 1:
        # a loop, not ``a[:n] = tmp[:n]``: numba's slice assignment checks shapes with an
        # error message whose string formatting costs seconds of compilation
        for i in range(n):
            a[i] = tmp[i]


@jit(nogil=True)
def _product_rows(
    a_indptr,
    a_indices,
    a_data,
    b_indptr,
    b_indices,
    b_data,
    lo,
    hi,
    out_indptr,
    fill,
    mark,
    acc,
    touched,
    tmp,
    radix_counts,
    n_bits,
    out_indices,
    out_data,
    counts,
):  # pragma: no cover - compiled
    """Rows ``lo:hi`` of ``A @ B``: their sizes into ``counts`` (``fill`` False), or their
    sorted columns and values from ``out_indptr`` on (``fill`` True). ``mark`` holds, per
    column, the last row that reached it (+1 when counting, negated when filling), so it
    is never reset."""
    for r in range(lo, hi):
        tag = -(r + 1) if fill else r + 1
        n = np.int64(0)  # int64 from the start, as radix_sort's other callers
        for p in range(a_indptr[r], a_indptr[r + 1]):
            i = a_indices[p]
            v = a_data[p]
            for q in range(b_indptr[i], b_indptr[i + 1]):
                j = b_indices[q]
                if mark[j] != tag:
                    mark[j] = tag
                    touched[n] = j
                    n += 1
                    if fill:
                        acc[j] = 0.0
                if fill:
                    acc[j] += v * b_data[q]
        if not fill:
            counts[r] = n
            continue
        base = out_indptr[r]
        if n * np.log2(n + 1) > len(mark):
            # a dense row: scanning every column is cheaper than sorting the touched ones
            k = base
            for j in range(len(mark)):
                if mark[j] == tag:
                    out_indices[k] = j
                    out_data[k] = acc[j]
                    k += 1
        else:
            radix_sort(touched, n, tmp, radix_counts, n_bits)
            for k in range(n):
                out_indices[base + k] = touched[k]
                out_data[base + k] = acc[touched[k]]
