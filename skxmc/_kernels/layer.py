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

__all__ = ["_fit_items"]

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
    row_weight,
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
    ``row_weight`` holds one float64 weight per row of X (sample weights: every cost of
    the row is multiplied by it, liblinear's instance weights), or nothing (empty array:
    unweighted, the costs are ``cp`` / ``cn`` as they are). Rows of weight 0 must not be
    in any group (liblinear drops them too: a zero cost has no dual).

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

    An item runs in three steps, marked in the loop: (1) the group's rows and touched
    features (:func:`_scan_group`, :func:`_read_out_order`); (2) the rows the solver reads
    (:func:`_copy_rows` or X itself); (3) per label, the targets (:func:`_set_targets`),
    the dual coordinate descent (:func:`~skxmc._kernels.dcd._solve`) and the pruning of
    its weights into the output (:func:`_prune`). The buffers are allocated once per call
    and grown, never per item or label. The kernel stays one function above 100 lines:
    numba passes no structs cheaply, and splitting the allocation or the two ``_solve``
    calls would pass a dozen buffers around for no clarity.

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
    pos = _int_buffer(n_rows, -1)  # row of X -> position in the current group
    fmap = _int_buffer(n_features, -1)  # feature -> local id (-1: untouched)
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
    # int64, not a literal 0: _prune and _grow would also compile for Literal[int](0)
    used = np.int64(0)
    j = 0

    for t in range(n_items):
        # 1. the item's group: its rows, their touched features, the read-out order
        g = item_group[t]
        r0 = g_row_indptr[g]
        m = g_row_indptr[g + 1] - r0
        grows = g_row_indices[r0 : r0 + m]
        nnz = 0
        for k in range(m):
            r = grows[k]
            nnz += x_indptr[r + 1] - x_indptr[r]
        if feats.shape[0] < min(nnz, n_features):
            feats = np.empty(min(nnz, n_features), np.int64)
            feats_tmp = np.empty(feats.shape[0], np.int64)
            out_keys = np.empty(feats.shape[0], np.int64)
        nf = _scan_group(grows, x_indptr, x_indices, sqnorms, pos, sqn, fmap, feats)
        if compact_mode < 0:
            compact = nnz <= _COMPACT_MAX_NNZ_FRACTION * x_indptr[n_rows]
        else:
            compact = compact_mode > 0
        if compact:
            # local ids in rank order: the most frequent features share cache lines
            radix_sort(feats, nf, feats_tmp, counts, feat_bits)
        pos_bits = _read_out_order(feats, nf, feature_of, out_keys, feats_tmp, counts, feat_bits)
        pos_mask = (np.int64(1) << pos_bits) - 1
        # 2. the rows the solver reads: a local copy (compact) or X through the row ids
        if compact:
            if w_loc.shape[0] < nf:
                w_loc = np.empty(nf, np.float64)
                for q in range(nf):
                    w_loc[q] = 0.0
            if loc_indices.shape[0] < nnz:
                loc_indices = np.empty(nnz, np.uint32)
                loc_data = np.empty(nnz, np.float32)
            _copy_rows(
                grows,
                x_indptr,
                x_indices,
                x_data,
                feats,
                nf,
                fmap,
                loc_indptr,
                loc_indices,
                loc_data,
            )
            w = w_loc
        else:
            if w_full.shape[0] == 0:
                w_full = np.empty(n_features, np.float64)
                for f in range(n_features):
                    w_full[f] = 0.0
            w = w_full
        for q in range(nf):
            fmap[feats[q]] = -1

        # 3. every label of the item: targets, solve, prune into the output
        for li in range(item_start[t], item_stop[t]):
            c = g_label_indices[li]
            _set_targets(c, m, y_indptr, y_indices, y_data, pos, y, cost, cp, cn, use_relevance)
            if row_weight.shape[0] > 0:
                _weigh_costs(grows, row_weight, cost)
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
            if used + nf + 1 > out_rows.shape[0]:
                out_rows, out_vals = _grow(out_rows, out_vals, used, used + nf + 1)
            start = used
            used = _prune(
                w,
                b,
                out_keys,
                nf,
                pos_bits,
                pos_mask,
                compact,
                feats,
                threshold,
                n_features,
                out_rows,
                out_vals,
                used,
            )
            out_labels[j] = c
            out_counts[j] = used - start
            j += 1
        for k in range(m):
            pos[grows[k]] = -1
    return out_labels, out_counts, out_rows[:used], out_vals[:used]


@jit(nogil=True)
def _int_buffer(n, value):  # pragma: no cover - compiled
    """``np.full(n, value, np.int64)`` with np.empty and a loop (see _fit_items)."""
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = value
    return out


@jit(nogil=True)
def _scan_group(grows, x_indptr, x_indices, sqnorms, pos, sqn, fmap, feats):  # pragma: no cover
    """Enter the group's rows ``grows`` in ``pos`` (row of X -> position in the group) and
    their squared norms in ``sqn``; list the features they touch in ``feats`` (marking them
    0 in ``fmap``, which holds -1 for untouched features). Returns how many there are."""
    # int64 from the start: a literal 0 here would also compile radix_sort for it
    nf = np.int64(0)
    for k in range(grows.shape[0]):
        r = grows[k]
        pos[r] = k
        sqn[k] = sqnorms[r]
        for p in range(x_indptr[r], x_indptr[r + 1]):
            f = x_indices[p]
            if fmap[f] < 0:
                fmap[f] = 0
                feats[nf] = f
                nf += 1
    return nf


@jit(nogil=True)
def _read_out_order(feats, nf, feature_of, out_keys, tmp, counts, feat_bits):  # pragma: no cover
    """Sort the touched features by original feature id, so that each output column comes
    out sorted: ``out_keys[q]`` holds the id in its high bits and the feature's position in
    ``feats`` in its ``pos_bits`` low bits. Returns ``pos_bits``."""
    pos_bits = 1
    while (1 << pos_bits) < nf:
        pos_bits += 1
    for q in range(nf):
        out_keys[q] = (feature_of[feats[q]] << pos_bits) | q
    radix_sort(out_keys, nf, tmp, counts, feat_bits + pos_bits)
    return pos_bits


@jit(nogil=True)
def _copy_rows(
    grows, x_indptr, x_indices, x_data, feats, nf, fmap, loc_indptr, loc_indices, loc_data
):  # pragma: no cover - compiled
    """Copy the group's rows into the local CSR ``loc_*``, feature ``feats[q]`` renumbered
    ``q`` (``fmap`` is left holding the local ids)."""
    for q in range(nf):
        fmap[feats[q]] = q
    nz = 0
    for k in range(grows.shape[0]):
        r = grows[k]
        for p in range(x_indptr[r], x_indptr[r + 1]):
            loc_indices[nz] = fmap[x_indices[p]]
            loc_data[nz] = x_data[p]
            nz += 1
        loc_indptr[k + 1] = nz


@jit(nogil=True)
def _set_targets(
    c, m, y_indptr, y_indices, y_data, pos, y, cost, cp, cn, use_relevance
):  # pragma: no cover - compiled
    """Targets and costs of label ``c`` on the group's ``m`` rows: +1 and ``cp`` (times the
    relevance with ``use_relevance``) where ``Y[:, c]`` is stored, -1 and ``cn`` elsewhere."""
    for k in range(m):
        y[k] = -1.0
        cost[k] = cn
    for p in range(y_indptr[c], y_indptr[c + 1]):
        k = pos[y_indices[p]]
        if k >= 0:
            y[k] = 1.0
            cost[k] = cp * y_data[p] if use_relevance else cp


@jit(nogil=True)
def _weigh_costs(grows, row_weight, cost):  # pragma: no cover - compiled
    """Multiply the cost of each of the group's rows by its sample weight (liblinear's
    ``C_i = W_i * Cp`` or ``W_i * Cn``): the dual's upper bound (logistic) or diagonal term
    ``1 / (2 C_i)`` (squared hinge) follow from the weighted cost."""
    for k in range(grows.shape[0]):
        cost[k] *= row_weight[grows[k]]


@jit(nogil=True)
def _grow(out_rows, out_vals, used, need):  # pragma: no cover - compiled
    """The output buffers, doubled (at least to ``need``), their ``used`` entries kept."""
    cap = max(2 * out_rows.shape[0], need)
    new_rows = np.empty(cap, np.int32)
    new_vals = np.empty(cap, np.float32)
    for q in range(used):  # a loop: see radix_sort
        new_rows[q] = out_rows[q]
        new_vals[q] = out_vals[q]
    return new_rows, new_vals


@jit(nogil=True)
def _prune(
    w,
    b,
    out_keys,
    nf,
    pos_bits,
    pos_mask,
    compact,
    feats,
    threshold,
    n_features,
    out_rows,
    out_vals,
    used,
):  # pragma: no cover - compiled
    """Append the label's weights with ``|w| >= threshold`` (exact zeros never) to
    ``out_rows`` / ``out_vals`` in read-out order, then its bias weight ``b`` as row
    ``n_features``; reset the weight buffer on the way, touching only the group's
    features (never O(d) per label). Returns the new ``used``."""
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
    return used
