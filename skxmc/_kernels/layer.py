"""Compiled training of one XR-Linear layer: every binary problem of a work item is set up,
solved by dual coordinate descent (:mod:`.dcd`) and pruned to its kept weights.

The Python side (groups, work items, threads, the output matrix) is
:mod:`skxmc.linear._solver`; the problem and the solvers are described in
:mod:`skxmc.linear._problem` and :mod:`.dcd`.
"""

from __future__ import annotations

import numpy as np

from .dcd import _solve
from .jit import jit
from .sparse import radix_sort

# A group is copied into a renumbered local CSR when its rows hold at most this fraction
# of X's nonzeros (see _fit_items). Measured on TF-IDF tibkat, one thread: the copy is
# 10-35% faster up to half of the rows and break-even at all rows, while it costs
# 8 bytes per copied nonzero and thread, hence the cap.
_COMPACT_MAX_NNZ_FRACTION = 0.5


@jit(nogil=True)
def _fit_items(
    x_indptr,
    x_indices,
    x_data,
    sqnorms,
    n_features,
    feature_of,
    g_row_indptr,
    g_row_indices,
    g_label_indices,
    y_indptr,
    y_indices,
    y_data,
    item_group,
    item_start,
    item_stop,
    seeds,
    logistic,
    cp,
    cn,
    eps,
    max_iter,
    bias,
    threshold,
    use_relevance,
    compact_mode,
):  # pragma: no cover - compiled
    """Train the labels ``g_label_indices[item_start[t]:item_stop[t]]`` of group
    ``item_group[t]``, for every work item ``t``. ``x_indices`` must be ``uint32`` feature
    ranks (:func:`solver_view`) and ``feature_of[rank]`` the original feature id.

    Per item the group's rows are scanned once for their touched features. If the rows
    hold at most
    ``_COMPACT_MAX_NNZ_FRACTION`` of X's nonzeros (``compact_mode`` -1; 1 forces, 0
    disables), they are copied into a contiguous local CSR with features renumbered
    ``0..n_touched-1`` in rank order: the copy is amortised over all labels and passes of
    the item, the rows sit together in memory and the dense weight buffer shrinks to the
    group's vocabulary (cache-resident for small groups) instead of ``d`` doubles.
    Otherwise the solver indexes ``X`` through the group's row ids. Both paths do the same
    arithmetic in the same order, so they give identical weights. The weights are read out
    in the order of the original feature ids, so each output column comes out sorted.

    Returns ``(labels, counts, rows, vals)``: for the j-th trained label ``labels[j]``,
    ``counts[j]`` consecutive entries of ``rows`` / ``vals`` (sorted by row; row
    ``n_features`` is the bias weight).
    """
    n_rows = x_indptr.shape[0] - 1
    n_items = item_group.shape[0]
    max_m = 0
    n_out_labels = 0
    for t in range(n_items):
        g = item_group[t]
        max_m = max(max_m, g_row_indptr[g + 1] - g_row_indptr[g])
        n_out_labels += item_stop[t] - item_start[t]

    # np.empty and loops only: every other array constructor (np.full, np.zeros, arange,
    # astype) is one more numba implementation to compile in the first fit
    pos = np.empty(n_rows, np.int64)  # row of X -> position in the current group
    for i in range(n_rows):
        pos[i] = -1
    fmap = np.empty(n_features, np.int64)  # feature -> local id (-1: untouched)
    for f in range(n_features):
        fmap[f] = -1
    feats = np.empty(0, np.int64)
    feats_tmp = np.empty(0, np.int64)
    out_keys = np.empty(0, np.int64)  # (original id, position in feats), sorted
    counts = np.empty(2049, np.int64)
    feat_bits = 1
    while (1 << feat_bits) < n_features:
        feat_bits += 1
    w_full = np.empty(0, np.float64)  # allocated on first non-compact item
    w_loc = np.empty(0, np.float64)
    loc_indptr = np.empty(max_m + 1, np.int64)
    loc_indptr[0] = 0
    loc_indices = np.empty(0, np.uint32)
    loc_data = np.empty(0, np.float32)
    loc_rows = np.empty(max_m, np.int32)
    for k in range(max_m):
        loc_rows[k] = k
    sqn = np.empty(max_m, np.float64)
    y = np.empty(max_m, np.float64)
    cost = np.empty(max_m, np.float64)
    qd = np.empty(max_m, np.float64)
    alpha = np.empty(4 * max_m, np.float64)  # the squared hinge's per-row state
    index = np.empty(max_m, np.int64)

    out_labels = np.empty(n_out_labels, np.int64)
    out_counts = np.empty(n_out_labels, np.int64)
    out_rows = np.empty(max(1024, 64 * n_out_labels), np.int32)
    out_vals = np.empty(out_rows.shape[0], np.float32)
    used = 0
    j = 0

    for t in range(n_items):
        g = item_group[t]
        r0 = g_row_indptr[g]
        m = g_row_indptr[g + 1] - r0
        grows = g_row_indices[r0 : r0 + m]
        # touched features of the group, and row -> local position
        nnz = 0
        for k in range(m):
            r = grows[k]
            nnz += x_indptr[r + 1] - x_indptr[r]
        if feats.shape[0] < min(nnz, n_features):
            feats = np.empty(min(nnz, n_features), np.int64)
            feats_tmp = np.empty(feats.shape[0], np.int64)
            out_keys = np.empty(feats.shape[0], np.int64)
        # int64 from the start: a literal 0 here would also compile radix_sort for it
        nf = np.int64(0)
        for k in range(m):
            r = grows[k]
            pos[r] = k
            sqn[k] = sqnorms[r]
            for p in range(x_indptr[r], x_indptr[r + 1]):
                f = x_indices[p]
                if fmap[f] < 0:
                    fmap[f] = 0
                    feats[nf] = f
                    nf += 1
        if compact_mode < 0:
            compact = nnz <= _COMPACT_MAX_NNZ_FRACTION * x_indptr[n_rows]
        else:
            compact = compact_mode > 0
        if compact:
            # local ids in rank order: the most frequent features share cache lines
            radix_sort(feats, nf, feats_tmp, counts, feat_bits)
        # read-out order: by original feature id, so that each output column comes out
        # sorted; a key's low bits hold the feature's position in feats
        pos_bits = 1
        while (1 << pos_bits) < nf:
            pos_bits += 1
        pos_mask = (np.int64(1) << pos_bits) - 1
        for q in range(nf):
            out_keys[q] = (feature_of[feats[q]] << pos_bits) | q
        radix_sort(out_keys, nf, feats_tmp, counts, feat_bits + pos_bits)
        if compact:
            if w_loc.shape[0] < nf:
                w_loc = np.empty(nf, np.float64)
                for q in range(nf):
                    w_loc[q] = 0.0
            if loc_indices.shape[0] < nnz:
                loc_indices = np.empty(nnz, np.uint32)
                loc_data = np.empty(nnz, np.float32)
            for q in range(nf):
                fmap[feats[q]] = q
            nz = 0
            for k in range(m):
                r = grows[k]
                for p in range(x_indptr[r], x_indptr[r + 1]):
                    loc_indices[nz] = fmap[x_indices[p]]
                    loc_data[nz] = x_data[p]
                    nz += 1
                loc_indptr[k + 1] = nz
            w = w_loc
        else:
            if w_full.shape[0] == 0:
                w_full = np.empty(n_features, np.float64)
                for f in range(n_features):
                    w_full[f] = 0.0
            w = w_full
        for q in range(nf):
            fmap[feats[q]] = -1

        for li in range(item_start[t], item_stop[t]):
            c = g_label_indices[li]
            for k in range(m):
                y[k] = -1.0
                cost[k] = cn
            for p in range(y_indptr[c], y_indptr[c + 1]):
                k = pos[y_indices[p]]
                if k >= 0:
                    y[k] = 1.0
                    cost[k] = cp * y_data[p] if use_relevance else cp
            if compact:
                b, _ = _solve(
                    logistic,
                    loc_indptr,
                    loc_indices,
                    loc_data,
                    loc_rows[:m],
                    sqn[:m],
                    y,
                    cost,
                    bias,
                    eps,
                    max_iter,
                    seeds[c],
                    w,
                    qd,
                    alpha,
                    index,
                )
            else:
                b, _ = _solve(
                    logistic,
                    x_indptr,
                    x_indices,
                    x_data,
                    grows,
                    sqn[:m],
                    y,
                    cost,
                    bias,
                    eps,
                    max_iter,
                    seeds[c],
                    w,
                    qd,
                    alpha,
                    index,
                )
            # keep |w| >= threshold (exact zeros never); reset the buffer on the way,
            # touching only the group's features (never O(d) per label)
            if used + nf + 1 > out_rows.shape[0]:
                cap = max(2 * out_rows.shape[0], used + nf + 1)
                new_rows = np.empty(cap, np.int32)
                new_vals = np.empty(cap, np.float32)
                for q in range(used):  # a loop: see radix_sort
                    new_rows[q] = out_rows[q]
                    new_vals[q] = out_vals[q]
                out_rows = new_rows
                out_vals = new_vals
            start = used
            for i in range(nf):
                key = out_keys[i]
                q = key & pos_mask
                wi = q if compact else feats[q]
                v = w[wi]
                w[wi] = 0.0
                if v != 0.0 and abs(v) >= threshold:
                    out_rows[used] = key >> pos_bits
                    out_vals[used] = v
                    used += 1
            if b != 0.0 and abs(b) >= threshold:
                out_rows[used] = n_features
                out_vals[used] = b
                used += 1
            out_labels[j] = c
            out_counts[j] = used - start
            j += 1
        for k in range(m):
            pos[grows[k]] = -1
    return out_labels, out_counts, out_rows[:used], out_vals[:used]
