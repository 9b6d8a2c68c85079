"""Compiled kernels of balanced spherical 2-means (the label tree's node splits).

The algorithm and the speed notes are in :mod:`skxmc._kmeans`, which holds their Python
callers (``split_level``, ``split_node_threaded``).
"""

from __future__ import annotations

import numpy as np

from .jit import jit

__all__ = [
    "_add_rows",
    "_combine",
    "_move_rows",
    "_partition",
    "_reset",
    "_scores",
    "_split_nodes",
    "_touched_features",
]


@jit(nogil=True)
def _touched_features(indptr, indices, is_dense, n_features, seg, mark, touched):
    """List in ``touched`` the features used by rows ``seg``; return how many.

    Nodes with more non-zeros than features (the top of the tree) list every feature:
    cheaper than a pass over their rows.
    """
    dense_list = is_dense
    if not is_dense:
        nnz = 0
        for p in range(seg.shape[0]):
            nnz += indptr[seg[p] + 1] - indptr[seg[p]]
        dense_list = nnz >= n_features
    if dense_list:
        for j in range(n_features):
            touched[j] = j
        return n_features
    u = 0
    for p in range(seg.shape[0]):
        i = seg[p]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if not mark[j]:
                mark[j] = True
                touched[u] = j
                u += 1
    for q in range(u):
        mark[touched[q]] = False
    return u


@jit(nogil=True)
def _add_rows(indptr, indices, data, dense, is_dense, rows, lo, hi, sign, s):
    """``s += sign * sum(x_i for i in rows[lo:hi])``."""
    for p in range(lo, hi):
        i = rows[p]
        if is_dense:
            for j in range(dense.shape[1]):
                s[j] += sign * dense[i, j]
        else:
            for k in range(indptr[i], indptr[i + 1]):
                s[indices[k]] += sign * data[k]


@jit(nogil=True)
def _reset(s_r, s_l, touched, u):
    for q in range(u):
        j = touched[q]
        s_r[j] = 0.0
        s_l[j] = 0.0


@jit(nogil=True)
def _combine(s_r, s_l, touched, u, normalise, c):
    """``c = s_r / |s_r| - s_l / |s_l|`` on the touched features (raw difference if not
    ``normalise``; a zero sum stays zero, as in PECOS)."""
    inv_r = 1.0
    inv_l = 1.0
    if normalise:
        nr = 0.0
        nl = 0.0
        for q in range(u):
            j = touched[q]
            nr += s_r[j] * s_r[j]
            nl += s_l[j] * s_l[j]
        if nr > 0.0:
            inv_r = 1.0 / np.sqrt(nr)
        if nl > 0.0:
            inv_l = 1.0 / np.sqrt(nl)
    for q in range(u):
        j = touched[q]
        c[j] = s_r[j] * inv_r - s_l[j] * inv_l


@jit(nogil=True)
def _dot_row(indptr, indices, data, dense, is_dense, i, c):
    """``<x_i, c>`` with four partial sums: a single running sum would make the loop
    wait on the latency of every addition (and the fixed order keeps results exact
    across machines, unlike ``fastmath``)."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    if is_dense:
        hi = dense.shape[1]
        k = 0
        while k + 4 <= hi:
            a0 += dense[i, k] * c[k]
            a1 += dense[i, k + 1] * c[k + 1]
            a2 += dense[i, k + 2] * c[k + 2]
            a3 += dense[i, k + 3] * c[k + 3]
            k += 4
        while k < hi:
            a0 += dense[i, k] * c[k]
            k += 1
    else:
        hi = indptr[i + 1]
        k = indptr[i]
        while k + 4 <= hi:
            a0 += data[k] * c[indices[k]]
            a1 += data[k + 1] * c[indices[k + 1]]
            a2 += data[k + 2] * c[indices[k + 2]]
            a3 += data[k + 3] * c[indices[k + 3]]
            k += 4
        while k < hi:
            a0 += data[k] * c[indices[k]]
            k += 1
    return (a0 + a1) + (a2 + a3)


@jit(nogil=True)
def _scores(indptr, indices, data, dense, is_dense, seg, lo, hi, c, scores):
    """``scores[p] = <x_{seg[p]}, c>`` for ``lo <= p < hi``."""
    for p in range(lo, hi):
        scores[p] = _dot_row(indptr, indices, data, dense, is_dense, seg[p], c)


@jit(nogil=True)
def _less(a, b):
    """``a < b`` with NaN above every number (numpy's sort order)."""
    return a < b or (b != b and a == a)


@jit(nogil=True)
def _select(a, n, k):
    """The ``k``-th smallest of ``a[:n]`` (0-based), reordering ``a[:n]`` in place.

    Hoare's selection with a median-of-three pivot, in place of ``np.partition``: the
    value is the same (the k-th order statistic is unique), and numba's ``np.partition``
    costs about 10 s of compilation (it pulls in ``np.unique``, a quicksort and string
    formatting for its error messages) against well under one for this loop.
    """
    lo = 0
    hi = n - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        # median of a[lo], a[mid], a[hi] as the pivot: a value inside the range, which
        # stops both scans below
        x = a[mid]
        if _less(x, a[lo]):
            x = a[lo]
            if _less(a[hi], x):
                x = a[hi] if _less(a[mid], a[hi]) else a[mid]
        elif _less(a[hi], x):
            x = a[hi] if _less(a[lo], a[hi]) else a[lo]
        i = lo
        j = hi
        while i <= j:
            while _less(a[i], x):
                i += 1
            while _less(x, a[j]):
                j -= 1
            if i <= j:
                tmp = a[i]
                a[i] = a[j]
                a[j] = tmp
                i += 1
                j -= 1
        # a[lo:j + 1] <= x <= a[i:hi + 1] and a[j + 1:i] == x
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


@jit(nogil=True)
def _partition(seg, scores, half, prev, ids, sc):
    """Cut ``seg`` at ``half`` by ``(score, id)``; keep the old left half in ``prev``.

    Returns whether the left half changed. Ties (identical or all-zero embeddings) are
    broken by label id, as PECOS does, so the result does not depend on the order left
    by the previous iteration. O(n): both halves of ``seg`` are sorted by id on entry,
    so a merge gives the id order; a selection finds the cut score ``t``; one pass in
    id order sends ``score < t`` left, ``score > t`` right and the lowest ids of
    ``score == t`` left until the left half is full, which leaves both halves sorted.
    ``scores`` is used as the selection's work buffer (its values are lost).
    """
    n = seg.shape[0]
    # Merge the two sorted halves into id order, carrying the scores along.
    a = 0
    b = half
    for p in range(n):
        if b == n or (a < half and seg[a] < seg[b]):
            ids[p] = seg[a]
            sc[p] = scores[a]
            a += 1
        else:
            ids[p] = seg[b]
            sc[p] = scores[b]
            b += 1
    # Element loops, not slice assignments (``prev[:half] = seg[:half]``): numba compiles
    # those with a shape check whose error message pulls in seconds of string formatting.
    for p in range(half):
        prev[p] = seg[p]
    for p in range(n):
        scores[p] = sc[p]
    t = _select(scores, n, half)
    n_tied_left = half
    for p in range(n):
        if sc[p] < t:
            n_tied_left -= 1
    left = 0
    right = half
    for p in range(n):
        v = sc[p]
        if v < t or (v == t and n_tied_left > 0):
            if v == t:
                n_tied_left -= 1
            seg[left] = ids[p]
            left += 1
        else:
            seg[right] = ids[p]
            right += 1
    for p in range(half):
        if seg[p] != prev[p]:
            return True
    return False


@jit(nogil=True)
def _moved(seg, prev, half, to_left, to_right):
    """Labels that changed side (both halves are sorted): return the two counts."""
    a = 0
    b = 0
    n_left = 0
    n_right = 0
    # Merge the new and the old left halves: new-only ids moved left, old-only moved right.
    while a < half or b < half:
        if b == half or (a < half and seg[a] < prev[b]):
            to_left[n_left] = seg[a]
            n_left += 1
            a += 1
        elif a == half or prev[b] < seg[a]:
            to_right[n_right] = prev[b]
            n_right += 1
            b += 1
        else:
            a += 1
            b += 1
    return n_left, n_right


@jit(nogil=True)
def _move_rows(
    indptr, indices, data, dense, is_dense, seg, prev, half, to_left, to_right, s_r, s_l
):
    """After an iteration that changed the halves: True when the node is cheaper to re-sum
    (many rows changed side); else move the rows that changed side from one centre sum to
    the other, and False."""
    n_left, n_right = _moved(seg, prev, half, to_left, to_right)
    # Moving a row costs two row updates; re-summing the node costs one per row.
    if 4 * (n_left + n_right) >= seg.shape[0]:
        return True
    zero = np.int64(0)  # a literal 0 would compile _add_rows once more (see _split_node)
    _add_rows(indptr, indices, data, dense, is_dense, to_left, zero, n_left, 1.0, s_l)
    _add_rows(indptr, indices, data, dense, is_dense, to_left, zero, n_left, -1.0, s_r)
    _add_rows(indptr, indices, data, dense, is_dense, to_right, zero, n_right, 1.0, s_r)
    _add_rows(indptr, indices, data, dense, is_dense, to_right, zero, n_right, -1.0, s_l)
    return False


@jit(nogil=True)
def _split_node(x, seg, pick_r, pick_l, max_iter, feature_buffers, node_buffers):
    """Balanced spherical 2-means on one node, in place on ``seg`` (one thread).

    ``x`` is ``(indptr, indices, data, dense, is_dense)`` (``_as_kernel_args`` of
    :mod:`skxmc._kmeans`); the buffers are the tuples of its ``_feature_buffers`` and
    ``_node_buffers``: tuples, so that the work arrays are named once, not in every
    signature and call that passes them on.
    """
    indptr, indices, data, dense, is_dense = x
    s_r, s_l, c, mark, touched = feature_buffers
    scores, prev, to_left, to_right, ids, sc = node_buffers
    n = seg.shape[0]
    half = n // 2
    u = _touched_features(indptr, indices, is_dense, c.shape[0], seg, mark, touched)
    # Integer constants passed to another kernel are typed as literals and would compile
    # it once per distinct constant: int64 variables keep one signature per kernel.
    zero = np.int64(0)
    full = True
    for it in range(max_iter):
        if it == 0:
            _reset(s_r, s_l, touched, u)
            _add_rows(indptr, indices, data, dense, is_dense, seg, pick_r, pick_r + 1, 1.0, s_r)
            _add_rows(indptr, indices, data, dense, is_dense, seg, pick_l, pick_l + 1, 1.0, s_l)
        elif full:
            _reset(s_r, s_l, touched, u)
            _add_rows(indptr, indices, data, dense, is_dense, seg, half, n, 1.0, s_r)
            _add_rows(indptr, indices, data, dense, is_dense, seg, zero, half, 1.0, s_l)
        _combine(s_r, s_l, touched, u, it > 0, c)
        _scores(indptr, indices, data, dense, is_dense, seg, zero, n, c, scores)
        if not _partition(seg, scores, half, prev, ids, sc):
            break
        if it > 0:
            full = _move_rows(*x, seg, prev, half, to_left, to_right, s_r, s_l)


@jit(nogil=True)
def _split_nodes(
    x, elements, starts, ends, picks_r, picks_l, node_ids, max_iter, feature_buffers, node_buffers
):
    """Split the listed nodes of one level one after the other (one worker thread)."""
    for q in range(node_ids.shape[0]):
        v = node_ids[q]
        seg = elements[starts[v] : ends[v]]
        _split_node(x, seg, picks_r[v], picks_l[v], max_iter, feature_buffers, node_buffers)
