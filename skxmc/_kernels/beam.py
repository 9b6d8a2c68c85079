"""Compiled beam-search kernels of XR-Linear: the chunked weight layout,
its checks, candidate scoring (sparse and dense layers), top-k per row and child expansion.
The Python side (``ChunkedWeights``, ``beam_search``) is :mod:`skxmc.linear._beam`.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .jit import jit
from .ranking import insert_ranked
from .sparse import radix_sort

__all__ = [
    "_check_blocks_kernel",
    "_chunk_layout_kernel",
    "_expand_kernel",
    "_keep_topk_kernel",
    "_score_chunks_kernel",
    "_score_dense_kernel",
]


@jit(nogil=True)
def _chunk_layout_kernel(
    w_indptr,
    w_indices,
    w_data,
    p_indptr,
    p_indices,
    count,
    touched,
    tmp,
    radix_counts,
    n_bits,
    sizes_only,
    feat_count,
    block_start,
    blocks,
    values,
):  # pragma: no cover - compiled
    """Fill the :class:`ChunkedWeights` arrays from CSC weights in O(nnz): per parent, a
    counting sort of its children's entries by feature (``count``: zeros of n_rows, left
    zeroed), stable in child order. With ``sizes_only``, only ``feat_count[p]`` and the
    block size (in ``block_start[p + 1]``) of every parent."""
    for p in range(len(p_indptr) - 1):
        n_touched = np.int64(0)  # int64 from the start, as radix_sort's other callers
        n_entries = np.int64(0)
        for j in range(p_indptr[p], p_indptr[p + 1]):
            c = p_indices[j]
            for q in range(w_indptr[c], w_indptr[c + 1]):
                f = w_indices[q]
                if count[f] == 0:
                    touched[n_touched] = f
                    n_touched += 1
                count[f] += 1
            n_entries += w_indptr[c + 1] - w_indptr[c]
        if sizes_only:
            feat_count[p] = n_touched
            block_start[p + 1] = 2 * n_touched + 1 + 2 * n_entries
        else:
            radix_sort(touched, n_touched, tmp, radix_counts, n_bits)
            b = block_start[p]
            off = b + n_touched
            ent = off + n_touched + 1
            pos = np.int64(0)
            for k in range(n_touched):
                f = touched[k]
                blocks[b + k] = f
                blocks[off + k] = pos
                n_f = count[f]
                count[f] = pos  # now the write position of feature f
                pos += n_f
            blocks[off + n_touched] = pos
            for j in range(p_indptr[p], p_indptr[p + 1]):
                c = p_indices[j]
                for q in range(w_indptr[c], w_indptr[c + 1]):
                    r = count[w_indices[q]]
                    blocks[ent + 2 * r] = j - p_indptr[p]
                    values[ent + 2 * r + 1] = w_data[q]
                    count[w_indices[q]] = r + 1
        for k in range(n_touched):
            count[touched[k]] = 0


@jit(nogil=True)
def _check_blocks_kernel(
    block_start, feat_count, blocks, values, n_rows, children_count
):  # pragma: no cover - compiled
    """0 if every block is well formed, else the code of the first fault: 1 a feature id
    outside ``[0, n_rows)``, 2 features not increasing, 3 offsets not increasing from 0
    to the block's entry count, 4 a child position outside the parent's children, 5 a
    NaN or infinite weight."""
    for p in range(len(feat_count)):
        b = block_start[p]
        n = feat_count[p]
        for k in range(b, b + n):
            if blocks[k] < 0 or blocks[k] >= n_rows:
                return 1
            if k > b and blocks[k] <= blocks[k - 1]:
                return 2
        off = b + n
        m = (block_start[p + 1] - off - n - 1) // 2
        if blocks[off] != 0 or blocks[off + n] != m:
            return 3
        for k in range(off, off + n):
            if blocks[k + 1] <= blocks[k]:
                return 3
        ent = off + n + 1
        for r in range(m):
            if blocks[ent + 2 * r] < 0 or blocks[ent + 2 * r] >= children_count[p]:
                return 4
            if not np.isfinite(values[ent + 2 * r + 1]):
                return 5
    return 0


@jit(nogil=True, inline="always")
def _combine(raw, parent, code):  # pragma: no cover - compiled
    """A node's path score from its linear score ``raw`` and its parent's path score
    (``code``: see ``_POST_CODES``), in float32."""
    if code == 1:
        v = np.float32(1.0) - raw
        if v < np.float32(0.0):
            v = np.float32(0.0)
        return np.float32(np.exp(-(v * v * v))) * parent
    if code == 2:
        return parent / (np.float32(1.0) + np.float32(np.exp(-raw)))
    return raw


@jit(nogil=True, inline="always")
def _score_entry(
    i,
    p,
    base,
    x_indptr,
    x_indices,
    x_data,
    bias,
    n_features,
    block_start,
    feat_count,
    blocks,
    values,
    out,
):  # pragma: no cover - compiled
    lo = block_start[p]
    hi = lo + feat_count[p]
    ent = hi + feat_count[p] + 1  # the block's first entry word
    # Features of x and of the block are both sorted: merge with a galloping search, so
    # that each probe stays near the previous match.
    for q in range(x_indptr[i], x_indptr[i + 1] + 1):
        if lo >= hi:
            break
        if q < x_indptr[i + 1]:
            f = x_indices[q]
            v = x_data[q]
        else:
            f = n_features  # the bias feature
            v = bias
        a = lo
        step = 1
        while a + step < hi and blocks[a + step] < f:
            a += step
            step *= 2
        b = min(a + step + 1, hi)
        while a < b:
            mid = (a + b) >> 1
            if blocks[mid] < f:
                a = mid + 1
            else:
                b = mid
        lo = a
        if a < hi and blocks[a] == f:
            k = a + feat_count[p]  # its offset word
            for r in range(blocks[k], blocks[k + 1]):
                e = ent + 2 * r
                out[base + blocks[e]] += values[e + 1] * v


@jit(parallel=True)
def _score_chunks_kernel(
    x_indptr,
    x_indices,
    x_data,
    bias,
    n_features,
    entry_order,
    entry_row,
    entry_parent,
    cand_start,
    block,
    block_start,
    feat_count,
    blocks,
    values,
    entry_score,
    children_count,
    code,
    out,
):  # pragma: no cover - compiled
    n_entries = len(entry_order)
    n_blocks = (n_entries + block - 1) // block
    # Beam entries are visited grouped by parent: consecutive entries share a chunk, which
    # then stays in cache (the per-active-cluster products of PECOS). Blocks of entries
    # run in parallel; each entry writes its own slice of ``out``.
    for b in prange(n_blocks):
        for k in range(b * block, min((b + 1) * block, n_entries)):
            e = entry_order[k]
            _score_entry(
                entry_row[e],
                entry_parent[e],
                cand_start[e],
                x_indptr,
                x_indices,
                x_data,
                bias,
                n_features,
                block_start,
                feat_count,
                blocks,
                values,
                out,
            )
            if code != 0:
                base = cand_start[e]
                parent_score = entry_score[e]
                for c in range(base, base + children_count[entry_parent[e]]):
                    out[c] = _combine(out[c], parent_score, code)


@jit(parallel=True)
def _score_dense_kernel(
    x_indptr,
    x_indices,
    x_data,
    bias,
    n_features,
    w_indptr,
    w_indices,
    w_data,
    n_nodes,
    c_indptr,
    c_indices,
    c_data,
    code,
    n_blocks,
    out,
):  # pragma: no cover - compiled
    n_rows = len(x_indptr) - 1
    block = (n_rows + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        acc = np.zeros(n_nodes, dtype=np.float32)
        for i in range(b * block, min((b + 1) * block, n_rows)):
            for q in range(x_indptr[i], x_indptr[i + 1]):
                f = x_indices[q]
                v = x_data[q]
                for r in range(w_indptr[f], w_indptr[f + 1]):
                    acc[w_indices[r]] += w_data[r] * v
            for r in range(w_indptr[n_features], w_indptr[n_features + 1]):
                acc[w_indices[r]] += w_data[r] * bias
            for q in range(c_indptr[i], c_indptr[i + 1]):
                out[q] = _combine(acc[c_indices[q]], c_data[q], code)
            acc[:] = 0.0


@jit(parallel=True)
def _keep_topk_kernel(
    indptr, indices, data, out_indptr, out_indices, out_data, n_blocks
):  # pragma: no cover - compiled
    # Row blocks in parallel; each row's best entries are kept by insertion into the row's
    # own output slice, which holds min(k, row's entries) of them (ties: lower column).
    n_rows = len(indptr) - 1
    block = (n_rows + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        for i in range(b * block, min((b + 1) * block, n_rows)):
            o = out_indptr[i]
            cap = out_indptr[i + 1] - o
            filled = 0
            for p in range(indptr[i], indptr[i + 1]):
                filled = insert_ranked(indices[p], data[p], out_indices, out_data, o, cap, filled)


@jit(nogil=True)
def _expand_kernel(
    path_indptr, path_indices, path_data, p_indptr, p_indices, out_indptr, out_indices, out_data
):  # pragma: no cover - compiled
    k = 0
    out_indptr[0] = 0
    for i in range(len(path_indptr) - 1):
        for e in range(path_indptr[i], path_indptr[i + 1]):
            parent = path_indices[e]
            for c in range(p_indptr[parent], p_indptr[parent + 1]):
                out_indices[k] = p_indices[c]
                out_data[k] = path_data[e]
                k += 1
        out_indptr[i + 1] = k
