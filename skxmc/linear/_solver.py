"""Per-layer binary linear solvers of XR-Linear (liblinear's dual coordinate descent).

XR-Linear (PECOS) trains, for every layer of a label tree, one binary linear model per
node. All children of one parent node share the same training rows: the instances that
are positive for the parent ("teacher-forcing negatives") plus, optionally, the instances
whose previous-layer beam reached the parent ("matcher-aware negatives"). A child's binary
problem labels those rows +1 where the instance is positive for the child, -1 elsewhere.
The cost of a layer is therefore ``sum_g |R_g| * n_children(g) * nnz per row``, never
``n * L``.

This module holds

* two numba-compiled dual coordinate descent solvers, ports of liblinear's
  ``solve_l2r_l1l2_svc`` (L2-loss, i.e. squared hinge, with shrinking) and
  ``solve_l2r_lr_dual`` (logistic loss, inner Newton per coordinate), as used by
  PECOS's ``core/xmc/linear_solver.hpp``;
* :class:`LayerGroups`, the description of which rows and which label columns belong to
  every parent group of a layer;
* :func:`fit_layer`, which trains all binary models of one layer in parallel threads and
  returns them as one sparse ``(d + 1, L_t)`` CSC matrix (PECOS's layout);
* :func:`fit_binary`, the single-problem entry point (reference / tests).

Problem solved for one label (liblinear's primal, bias as a regularised feature)::

    min_w  0.5 * ||w_aug||^2 + sum_i C_i * loss(y_i * w_aug . x_aug_i)

with ``x_aug = [x, bias]``, ``w_aug = [w, b]``, ``C_i = Cp * r_i`` for positives
(``r_i`` the relevance if ``use_relevance`` else 1) and ``C_i = Cn`` for negatives,
``loss(z) = max(0, 1 - z)^2`` (``"squared_hinge"``) or ``log(1 + exp(-z))``
(``"logistic"``). The decision value is ``x . w + bias * b``; ``bias = 0`` means no
bias term (``b`` stays 0).

Determinism: the coordinate order of every label is drawn from a private xorshift64*
stream seeded by :func:`label_seeds` (``random_state`` and the label's column index), so
results do not depend on ``n_jobs`` or on how labels are batched, and
``fit_binary(X[rows], y, seed=label_seeds(random_state, L)[c])`` reproduces column ``c``
of :func:`fit_layer` exactly.

Differences from PECOS, on purpose: PECOS seeds every label's solver with 0, here each
label has its own stream (same distribution of results); exact zeros are never stored
(PECOS keeps them when ``threshold=0``); the output always has the bias row ``d``, empty
when ``bias=0`` (PECOS drops the row). As in PECOS, relevance scales both the upper bound
and the diagonal term ``D_ii = 1 / (2 C_i)``, the weight threshold also applies to the
bias weight, and the logistic dual has no shrinking (neither has liblinear's).
"""

from __future__ import annotations

import itertools
import numbers
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.utils import check_random_state

from .._numba import interruptible, jit, prefetch
from .._sparse_product import radix_sort

__all__ = [
    "LayerGroups",
    "fit_binary",
    "fit_layer",
    "label_seeds",
    "row_squared_norms",
    "solver_view",
]

Loss = Literal["squared_hinge", "logistic"]
# The kernels' ``logistic`` argument: None for the squared hinge, True for the logistic
# loss. numba drops the branch ``if logistic is None`` cannot take before it compiles, so
# a squared-hinge fit never compiles the logistic solver (a seventh of the first fit's
# compile time, benchmarks/first_run.py); an int code would compile both.
_LOSS_CODES = {"squared_hinge": None, "logistic": True}

# xorshift64* constants (Vigna 2016); module-level so numba freezes them as uint64.
_XS_A = np.uint64(12)
_XS_B = np.uint64(25)
_XS_C = np.uint64(27)
_XS_MULT = np.uint64(0x2545F4914F6CDD1D)
_XS_FALLBACK = np.uint64(0x9E3779B97F4A7C15)  # xorshift's state must never be 0

# unsigned loop constants: uint64 mixed with int64 literals would promote to float64
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U4 = np.uint64(4)
_U32 = np.uint64(32)

# A group is copied into a renumbered local CSR when its rows hold at most this fraction
# of X's nonzeros (see _fit_items). Measured on TF-IDF tibkat, one thread: the copy is
# 10-35% faster up to half of the rows and break-even at all rows, while it costs
# 8 bytes per copied nonzero and thread, hence the cap.
_COMPACT_MAX_NNZ_FRACTION = 0.5

# Work chunks per thread in a layer (_make_items): more chunks even out the threads' loads
# at the end of a layer, each costs one more scan of its group's rows.
_CHUNKS_PER_THREAD = 8

# Feature ids are renumbered by frequency (solver_view) in blocks of this many nonzeros,
# so that the int64 temporaries of numpy's bincount / take stay small.
_RANK_BLOCK = 1 << 20

# Prefetch distances of the solvers, in steps of the shuffled row order. Each level needs
# the one before it in cache: the row id and its dual state first, then the row's offsets,
# then its entries (chosen in a scratch study, see _prefetch_ahead; benchmarks/prefetch.py
# measures the effect on whole fits).
_PF_ROW = 24
_PF_PTR = 16
_PF_NNZ = 8
# Below this many bytes of row entries a problem stays in the L2 cache once visited (and
# sibling problems share their rows), so prefetching would only add instructions: small
# leaf-layer problems ran slower with it (benchmarks/results/prefetch.md).
_PF_MIN_BYTES = 1 << 19

# Projected gradients below this are treated as 0 (liblinear's constant).
_PG_ZERO = 1.0e-12
# Inner Newton of the logistic dual: liblinear's constants.
_LR_MAX_INNER = 100
_LR_ETA = 0.1


# --------------------------------------------------------------------------------------
# compiled kernels
# --------------------------------------------------------------------------------------


@jit(nogil=True)
def _row_sqnorms(indptr, data):  # pragma: no cover - compiled
    n = indptr.shape[0] - 1
    out = np.empty(n, np.float64)
    for i in range(n):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])
            s += v * v
        out[i] = s
    return out


@jit(nogil=True, inline="always")
def _shuffle(index, n, state):  # pragma: no cover - compiled
    """Fisher-Yates shuffle of ``index[:n]`` (liblinear's per-iteration permutation)."""
    for s in range(n):
        state ^= state >> _XS_A
        state ^= state << _XS_B
        state ^= state >> _XS_C
        # Lemire's multiply-shift maps the top 32 random bits to [0, n - s) without a
        # division (n < 2**32 rows per problem)
        j = s + np.int64((((state * _XS_MULT) >> _U32) * np.uint64(n - s)) >> _U32)
        tmp = index[s]
        index[s] = index[j]
        index[j] = tmp
    return state


@jit(nogil=True, inline="always")
def _sparse_dot(w, indices, data, p0, p1):  # pragma: no cover - compiled
    """``w . x`` over ``x``'s stored entries ``p0:p1``.

    Speed notes (together 2.2x faster on a TF-IDF layer, measured): four partial sums
    break the floating-point add dependency chain (one running sum costs an add latency
    per entry); unsigned positions and unsigned (``uint32``) feature ids spare numba's
    negative-index wraparound test on every access. The summation order is fixed, so
    results stay deterministic without fastmath.
    """
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    p = np.uint64(p0)
    e = np.uint64(p1)
    end4 = p + ((e - p) // _U4) * _U4
    while p < end4:
        s0 += w[indices[p]] * data[p]
        s1 += w[indices[p + _U1]] * data[p + _U1]
        s2 += w[indices[p + _U2]] * data[p + _U2]
        s3 += w[indices[p + _U3]] * data[p + _U3]
        p += _U4
    while p < e:
        s0 += w[indices[p]] * data[p]
        p += _U1
    return (s0 + s1) + (s2 + s3)


@jit(nogil=True, inline="always")
def _axpy(a, w, indices, data, p0, p1):  # pragma: no cover - compiled
    """``w += a * x`` over ``x``'s stored entries ``p0:p1`` (unsigned, see _sparse_dot)."""
    p = np.uint64(p0)
    e = np.uint64(p1)
    while p < e:
        w[indices[p]] += a * data[p]
        p += _U1


@jit(nogil=True, inline="always")
def _prefetch_ahead(s, n, index, rows, indptr, indices, data, state, width):  # pragma: no cover
    """Prefetch what step ``s + d`` of the shuffled order ``index[:n]`` will read.

    The solvers visit rows at random; once a problem's rows outgrow the L2 cache, each
    visit would wait for memory three times over (the row id, its offsets, its
    entries), and for its dual state in ``state[width * k]``. Asking for them at three
    distances ahead overlaps those waits with the arithmetic of the current rows. Values
    and their order are untouched: the weights are bit-identical with or without it.
    """
    if s + _PF_ROW < n:
        k = index[s + _PF_ROW]
        prefetch(rows, k)
        prefetch(state, width * k)
    if s + _PF_PTR < n:
        prefetch(indptr, rows[index[s + _PF_PTR]])
    if s + _PF_NNZ < n:
        r = rows[index[s + _PF_NNZ]]
        start = indptr[r]
        e = indptr[r + 1]
        # one request per 64-byte line of 4-byte ids and values, and the row's last line
        p = start
        while p < e:
            prefetch(indices, p)
            prefetch(data, p)
            p += 16
        if e > start:
            prefetch(indices, e - 1)
            prefetch(data, e - 1)


@jit(nogil=True)
def _dcd_squared_hinge(
    indptr, indices, data, rows, sqn, y, cost, bias, eps, max_iter, seed, w, qd, alpha, index
):  # pragma: no cover - compiled
    """liblinear ``solve_l2r_l1l2_svc`` for the L2 loss (D_ii = 1 / (2 C_i), no upper bound).

    Row ``k`` of the problem is row ``rows[k]`` of the CSR arrays; ``sqn[k]`` is its squared
    norm, ``y[k]`` its +-1 target and ``cost[k]`` its ``C_i``. ``w`` (zero on entry) receives
    the weights; the bias weight is returned. ``index`` is a work buffer of length
    >= ``len(rows)``, ``alpha`` one of length >= ``4 * len(rows)``; ``qd`` is not used.

    Row ``k``'s dual variable, ``Q_kk``, target and diagonal ``1 / (2 C_k)`` sit together
    in ``alpha[4k:4k+4]``: the shuffled order visits rows at random, and one cache line per
    row instead of four matters where rows are short (bag-of-words sets like delicious).
    """
    m = rows.shape[0]
    bias2 = bias * bias
    b = 0.0
    nnz = 0
    for k in range(m):
        diag = 0.5 / cost[k]
        alpha[4 * k] = 0.0
        alpha[4 * k + 1] = sqn[k] + bias2 + diag
        alpha[4 * k + 2] = y[k]
        alpha[4 * k + 3] = diag
        index[k] = k
        nnz += indptr[rows[k] + 1] - indptr[rows[k]]
    ahead = 8 * nnz >= _PF_MIN_BYTES
    state = np.uint64(seed)
    if state == 0:
        state = _XS_FALLBACK
    pgmax_old = np.inf
    pgmin_old = -np.inf
    active = m
    it = 0
    while it < max_iter:
        pgmax_new = -np.inf
        pgmin_new = np.inf
        state = _shuffle(index, active, state)
        s = 0
        while s < active:
            if ahead:
                _prefetch_ahead(s, active, index, rows, indptr, indices, data, alpha, 4)
            k = index[s]
            r = rows[k]
            p0 = indptr[r]
            p1 = indptr[r + 1]
            dot = _sparse_dot(w, indices, data, p0, p1) + b * bias
            yk = alpha[4 * k + 2]
            a_old = alpha[4 * k]
            g = yk * dot - 1.0 + a_old * alpha[4 * k + 3]
            pg = 0.0
            if a_old == 0.0:
                if g > pgmax_old:
                    # shrink: this alpha sits at its bound and is likely to stay there
                    active -= 1
                    index[s] = index[active]
                    index[active] = k
                    continue
                if g < 0.0:
                    pg = g
            else:
                pg = g
            if pg > pgmax_new:
                pgmax_new = pg
            if pg < pgmin_new:
                pgmin_new = pg
            if abs(pg) > _PG_ZERO:
                a_new = a_old - g / alpha[4 * k + 1]
                if a_new < 0.0:
                    a_new = 0.0
                alpha[4 * k] = a_new
                delta = (a_new - a_old) * yk
                _axpy(delta, w, indices, data, p0, p1)
                b += delta * bias
            s += 1
        it += 1
        if pgmax_new - pgmin_new <= eps:
            if active == m:
                break
            # converged on the shrunk set: re-check every coordinate once more
            active = m
            pgmax_old = np.inf
            pgmin_old = -np.inf
            continue
        pgmax_old = pgmax_new
        pgmin_old = pgmin_new
        if pgmax_old <= 0.0:
            pgmax_old = np.inf
        if pgmin_old >= 0.0:
            pgmin_old = -np.inf
    return b, it


@jit(nogil=True)
def _dcd_logistic(
    indptr, indices, data, rows, sqn, y, cost, bias, eps, max_iter, seed, w, qd, alpha, index
):  # pragma: no cover - compiled
    """liblinear ``solve_l2r_lr_dual`` (Yu et al. 2011); same interface as the SVM kernel.

    ``alpha`` must have length >= ``2 * len(rows)``: it stores ``alpha_i`` and
    ``C_i - alpha_i`` side by side so that neither loses precision near a bound.
    """
    m = rows.shape[0]
    bias2 = bias * bias
    b = 0.0
    innereps = 1.0e-2
    innereps_min = min(1.0e-8, eps)
    nnz = 0
    for k in range(m):
        c = cost[k]
        a0 = min(0.001 * c, 1.0e-8)
        alpha[2 * k] = a0
        alpha[2 * k + 1] = c - a0
        qd[k] = sqn[k] + bias2
        index[k] = k
        r = rows[k]
        coef = y[k] * a0
        _axpy(coef, w, indices, data, indptr[r], indptr[r + 1])
        b += coef * bias
        nnz += indptr[r + 1] - indptr[r]
    ahead = 8 * nnz >= _PF_MIN_BYTES
    state = np.uint64(seed)
    if state == 0:
        state = _XS_FALLBACK
    it = 0
    while it < max_iter:
        state = _shuffle(index, m, state)
        newton_iter = 0
        gmax = 0.0
        for s in range(m):
            if ahead:
                _prefetch_ahead(s, m, index, rows, indptr, indices, data, alpha, 2)
            k = index[s]
            r = rows[k]
            p0 = indptr[r]
            p1 = indptr[r + 1]
            dot = _sparse_dot(w, indices, data, p0, p1) + b * bias
            yk = y[k]
            c = cost[k]
            qa = qd[k]
            qb = yk * dot
            # minimise over alpha_i or over C_i - alpha_i, whichever is the better-
            # conditioned variable (liblinear's g_1 / g_2 choice)
            ind1 = 2 * k
            ind2 = 2 * k + 1
            sign = 1.0
            if 0.5 * qa * (alpha[ind2] - alpha[ind1]) + qb < 0.0:
                ind1 = 2 * k + 1
                ind2 = 2 * k
                sign = -1.0
            a_old = alpha[ind1]
            z = a_old
            if c - z < 0.5 * c:
                z = 0.1 * z
            gp = qa * (z - a_old) + sign * qb + np.log(z / (c - z))
            if abs(gp) > gmax:
                gmax = abs(gp)
            inner = 0
            while inner <= _LR_MAX_INNER:
                if abs(gp) < innereps:
                    break
                gpp = qa + c / (c - z) / z
                tmpz = z - gp / gpp
                if tmpz <= 0.0:
                    z *= _LR_ETA
                else:
                    z = tmpz
                gp = qa * (z - a_old) + sign * qb + np.log(z / (c - z))
                newton_iter += 1
                inner += 1
            if inner > 0:
                alpha[ind1] = z
                alpha[ind2] = c - z
                delta = sign * (z - a_old) * yk
                _axpy(delta, w, indices, data, p0, p1)
                b += delta * bias
        it += 1
        if gmax < eps:
            break
        if newton_iter <= m // 10:
            innereps = max(innereps_min, 0.1 * innereps)
    return b, it


@jit(nogil=True)
def _solve(
    logistic,
    indptr,
    indices,
    data,
    rows,
    sqn,
    y,
    cost,
    bias,
    eps,
    max_iter,
    seed,
    w,
    qd,
    alpha,
    index,
):  # pragma: no cover - compiled
    if logistic is None:
        return _dcd_squared_hinge(
            indptr,
            indices,
            data,
            rows,
            sqn,
            y,
            cost,
            bias,
            eps,
            max_iter,
            seed,
            w,
            qd,
            alpha,
            index,
        )
    return _dcd_logistic(
        indptr, indices, data, rows, sqn, y, cost, bias, eps, max_iter, seed, w, qd, alpha, index
    )


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


# --------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------


def _splitmix64(x: np.ndarray) -> np.ndarray:
    # uint64 array arithmetic wraps silently (scalars would warn), hence arrays only
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def label_seeds(random_state: int | np.random.RandomState | None, n_labels: int) -> np.ndarray:
    """Seeds of the coordinate-order streams of labels ``0..n_labels-1``.

    Parameters
    ----------
    random_state : int, RandomState instance or None
        An int gives reproducible seeds (the same int always gives the same seeds);
        a RandomState or None draws a base seed from it (or from numpy's global state).
    n_labels : int
        Number of label columns.

    Returns
    -------
    seeds : ndarray of shape (n_labels,), dtype uint64
        ``seeds[c]`` is the solver seed :func:`fit_layer` uses for column ``c``; pass it as
        ``seed`` to :func:`fit_binary` to reproduce that label's model exactly.
    """
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        base = int(random_state) & 0xFFFFFFFFFFFFFFFF
    else:
        base = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    cols = _splitmix64(np.arange(n_labels, dtype=np.uint64))
    return _splitmix64(cols ^ np.array([base], dtype=np.uint64))


def row_squared_norms(X: sp.csr_matrix) -> np.ndarray:
    """Squared L2 norm of every row of a CSR matrix, accumulated in float64.

    Computed once per feature matrix and reusable across layers (pass it as
    ``row_sqnorms`` to :func:`fit_layer`); the bias term is added by the solver.
    """
    indptr, _, data, _ = _check_X(X)
    return _row_sqnorms(indptr, data)


def _check_X(X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """``(indptr int64, indices uint32, data float32, shape)`` of X as canonical CSR
    (sorted indices, duplicate entries summed).

    Copies only when needed (the int64 ``indptr`` is a copy of n + 1 entries when scipy
    stored int32). Fixed dtypes give the compiled kernels a single type signature; the
    feature ids are a ``uint32`` view of scipy's non-negative int32 (see _sparse_dot).
    """
    if not sp.issparse(X):
        # dense input: the solvers are written for CSR; a dense (n, d) float32 matrix
        # becomes CSR once here (callers with large dense inputs should expect the copy)
        X = sp.csr_matrix(np.asarray(X, dtype=np.float32))
    if X.format != "csr":
        X = X.tocsr()
    if X.ndim != 2:
        raise ValueError("X must be 2-D.")
    if X.shape[1] >= np.iinfo(np.int32).max:
        raise ValueError("X has too many features for int32 feature ids.")
    copied = False
    if X.dtype != np.float32:
        X = X.astype(np.float32)
        copied = True
    if not X.has_canonical_format:
        # unsorted indices make the gathers of the solver about 2x slower, and duplicate
        # entries would give wrong row norms (the sum of the squares of the stored values)
        if not copied:
            X = X.copy()
            copied = True
        X.sum_duplicates()
    indices = X.indices.astype(np.int32, copy=False).view(np.uint32)
    return X.indptr.astype(np.int64, copy=False), indices, X.data, X.shape


def _check_params(
    loss: str, Cp: float, Cn: float, tol: float, max_iter: int, bias: float
) -> bool | None:
    if loss not in _LOSS_CODES:
        raise ValueError(f"loss must be one of {sorted(_LOSS_CODES)}, got {loss!r}.")
    if not (Cp > 0 and Cn > 0):
        raise ValueError(f"Cp and Cn must be > 0, got Cp={Cp!r}, Cn={Cn!r}.")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}.")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}.")
    if not bias >= 0:
        raise ValueError(f"bias must be >= 0 (0 disables the bias term), got {bias!r}.")
    return _LOSS_CODES[loss]


def fit_binary(
    X: Any,
    y: np.ndarray,
    *,
    loss: Loss = "squared_hinge",
    Cp: float = 1.0,
    Cn: float = 1.0,
    tol: float = 0.1,
    max_iter: int = 100,
    bias: float = 1.0,
    relevance: np.ndarray | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, float, int]:
    """Train one binary model on all rows of ``X`` with the dual coordinate descent solver.

    This is the single-problem counterpart of :func:`fit_layer` (same compiled kernels);
    it is meant for tests, references and small problems.

    Parameters
    ----------
    X : sparse matrix or ndarray of shape (n, d)
        Features; converted to CSR float32 with sorted indices if needed.
    y : array-like of shape (n,)
        Targets; values > 0 are positives, all others negatives.
    loss : {"squared_hinge", "logistic"}, default="squared_hinge"
        L2-regularised squared hinge (liblinear ``-s 1``) or logistic loss (``-s 7``).
    Cp, Cn : float, default=1.0
        Costs of positive / negative instances (liblinear's weighted C).
    tol : float, default=0.1
        liblinear's ``eps``: stop when the projected-gradient gap (squared hinge) or the
        largest gradient (logistic) falls below it.
    max_iter : int, default=100
        Maximum number of passes over the (active) rows.
    bias : float, default=1.0
        Value of the extra constant feature; its weight is regularised like the others
        (liblinear's and PECOS's convention). ``0`` disables the bias.
    relevance : array-like of shape (n,), default=None
        Per-instance cost multipliers for positives: ``C_i = Cp * relevance[i]``
        (must be > 0 on positives). Ignored for negatives.
    seed : int, default=0
        Seed of the coordinate-order stream (see :func:`label_seeds`).

    Returns
    -------
    coef : ndarray of shape (d,), dtype float64
        The weights ``w``.
    bias_coef : float
        The weight ``b`` of the bias feature; the decision value is ``X @ coef + bias * b``.
    n_iter : int
        Number of passes run.
    """
    loss_code = _check_params(loss, Cp, Cn, tol, max_iter, bias)
    indptr, indices, data, (n, d) = _check_X(X)
    y = np.asarray(y).ravel()
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} entries, X has {n} rows.")
    pos = y > 0
    cost = np.where(pos, float(Cp), float(Cn))
    if relevance is not None:
        relevance = np.asarray(relevance, dtype=np.float64).ravel()
        if relevance.shape[0] != n:
            raise ValueError(f"relevance has {relevance.shape[0]} entries, X has {n} rows.")
        if np.any(relevance[pos] <= 0):
            raise ValueError("relevance must be > 0 on positives.")
        cost[pos] *= relevance[pos]
    w = np.zeros(d, np.float64)
    b, n_iter = _solve(
        loss_code,
        indptr,
        indices,
        data,
        np.arange(n, dtype=np.int32),
        _row_sqnorms(indptr, data),
        np.where(pos, 1.0, -1.0),
        cost,
        float(bias),
        float(tol),
        int(max_iter),
        np.uint64(seed),
        w,
        np.empty(n),
        np.empty(4 * n),
        np.empty(n, np.int64),
    )
    return w, float(b), int(n_iter)


@dataclass(frozen=True)
class LayerGroups:
    """Rows and label columns of every parent group of one layer (two CSR-like lists).

    Group ``g`` (a parent node of the layer, i.e. a column of PECOS's cluster matrix
    ``C_t``) owns

    * the training rows ``row_indices[row_indptr[g]:row_indptr[g + 1]]`` (row ids of ``X``,
      strictly increasing within a group): its positives plus its negatives (teacher
      forcing and / or matcher-aware). Every child trains on exactly these rows;
    * the label columns ``label_indices[label_indptr[g]:label_indptr[g + 1]]`` (column ids of
      the layer's target matrix ``Y_t``): the children whose models it trains.

    Equivalently: ``row_*`` is the CSC structure of the instance-to-parent matrix
    ``M_t`` (n, K) and ``label_*`` the CSC structure of ``C_t`` (L_t, K). A label column may
    belong to at most one group; columns in no group get an all-zero model. Positives of
    a child that are not among its group's rows are ignored, so include them
    (:meth:`from_matrices` does).

    Attributes
    ----------
    row_indptr : ndarray of shape (n_groups + 1,), dtype int64
    row_indices : ndarray of shape (row_indptr[-1],), dtype int32
    label_indptr : ndarray of shape (n_groups + 1,), dtype int64
    label_indices : ndarray of shape (label_indptr[-1],), dtype int32
    """

    row_indptr: np.ndarray
    row_indices: np.ndarray
    label_indptr: np.ndarray
    label_indices: np.ndarray

    def __post_init__(self) -> None:
        # normalise dtypes once so the compiled code sees a single type signature
        for name, dtype in (
            ("row_indptr", np.int64),
            ("row_indices", np.int32),
            ("label_indptr", np.int64),
            ("label_indices", np.int32),
        ):
            arr = np.ascontiguousarray(getattr(self, name))
            if arr.ndim != 1:
                raise ValueError(f"{name} must be 1-D.")
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(f"{name} must hold integers, got {arr.dtype}.")
            object.__setattr__(self, name, arr.astype(dtype, copy=False))
        for ptr, idx in (("row_indptr", "row_indices"), ("label_indptr", "label_indices")):
            p = getattr(self, ptr)
            if p.shape[0] < 1 or p[0] != 0 or np.any(np.diff(p) < 0):
                raise ValueError(f"{ptr} must start at 0 and be non-decreasing.")
            if p[-1] != getattr(self, idx).shape[0]:
                raise ValueError(f"{ptr}[-1] must equal len({idx}).")
        if self.row_indptr.shape[0] != self.label_indptr.shape[0]:
            raise ValueError("row_indptr and label_indptr must describe the same groups.")
        # rows strictly increasing inside each group (no duplicates: a duplicated row
        # would silently count twice)
        steps = np.diff(self.row_indices.astype(np.int64))
        inner = np.ones(steps.shape[0], bool)
        cuts = self.row_indptr[1:-1]
        inner[cuts[(cuts > 0) & (cuts < self.row_indices.shape[0])] - 1] = False
        if np.any(steps[inner] <= 0):
            raise ValueError("row_indices must be strictly increasing within each group.")

    @property
    def n_groups(self) -> int:
        """Number of parent groups."""
        return self.row_indptr.shape[0] - 1

    def check(self, n_rows: int, n_labels: int) -> None:
        """Raise ``ValueError`` unless the groups fit ``n_rows`` rows and ``n_labels`` columns."""
        if self.row_indices.size and (
            self.row_indices.min() < 0 or self.row_indices.max() >= n_rows
        ):
            raise ValueError(f"row_indices must lie in [0, {n_rows}).")
        if self.label_indices.size:
            if self.label_indices.min() < 0 or self.label_indices.max() >= n_labels:
                raise ValueError(f"label_indices must lie in [0, {n_labels}).")
            if np.bincount(self.label_indices, minlength=n_labels).max() > 1:
                raise ValueError("A label column belongs to more than one group.")

    @classmethod
    def from_matrices(cls, Y: Any, C: Any, M: Any = None) -> LayerGroups:
        """Groups of PECOS's ``(Y_t, C_t, M_t)`` formulation.

        Parameters
        ----------
        Y : sparse matrix of shape (n, L_t)
            Targets of the layer; stored entries are positives.
        C : sparse matrix of shape (L_t, K) or int array of shape (L_t,)
            Label-to-parent assignment: ``C[c, g] != 0`` (or ``C[c] == g``) puts column
            ``c`` in group ``g``. A negative entry in the array form leaves ``c`` out.
        M : sparse matrix of shape (n, K), default=None
            Extra (matcher-aware) rows per group, e.g. the previous layer's beam.

        Returns
        -------
        LayerGroups
            Group ``g`` gets the rows positive for any of its labels (teacher forcing,
            ``Y C``) plus the stored rows of ``M[:, g]``, and the labels of ``C[:, g]``.
        """
        Y = sp.csr_matrix(Y)
        n, n_labels = Y.shape
        if not sp.issparse(C):
            parent = np.asarray(C).ravel()
            if parent.shape[0] != n_labels:
                raise ValueError(f"C has {parent.shape[0]} entries, Y has {n_labels} columns.")
            keep = parent >= 0
            n_groups = int(parent.max()) + 1 if keep.any() else 0
            C = sp.csr_matrix(
                (np.ones(int(keep.sum())), (np.flatnonzero(keep), parent[keep])),
                shape=(n_labels, n_groups),
            )
        C = sp.csc_matrix(C)
        if C.shape[0] != n_labels:
            raise ValueError(f"C has {C.shape[0]} rows, Y has {n_labels} columns.")
        C.eliminate_zeros()
        C.sum_duplicates()  # also sorts indices
        ones = sp.csr_matrix(
            (np.ones(Y.indices.shape[0], np.float32), Y.indices, Y.indptr), shape=Y.shape
        )
        C1 = sp.csc_matrix((np.ones(C.indices.shape[0], np.float32), C.indices, C.indptr), C.shape)
        A = ones @ C1
        if M is not None:
            M = sp.csr_matrix(M)
            if M.shape != (n, C.shape[1]):
                raise ValueError(f"M must have shape {(n, C.shape[1])}, got {M.shape}.")
            M1 = sp.csr_matrix(
                (np.ones(M.indices.shape[0], np.float32), M.indices, M.indptr), M.shape
            )
            A = A + M1
        A = sp.csc_matrix(A)
        A.sum_duplicates()
        return cls(A.indptr, A.indices, C.indptr, C.indices)


@dataclass(frozen=True)
class LayerTask:
    """What the work items of one layer read besides X: the groups, the layer's targets
    (CSC arrays), the per-label seeds and the solver settings (the scalar arguments of
    ``_fit_items`` after the seeds). One object, so that a cluster ships it once per layer
    to each worker (``skxmc.linear._distributed``) and a thread pool shares it."""

    groups: LayerGroups
    y_indptr: np.ndarray
    y_indices: np.ndarray
    y_data: np.ndarray
    seeds: np.ndarray
    params: tuple

    @property
    def nbytes(self) -> int:
        g = self.groups
        arrays = (g.row_indptr, g.row_indices, g.label_indptr, g.label_indices)
        arrays += (self.y_indptr, self.y_indices, self.y_data, self.seeds)
        return int(sum(a.nbytes for a in arrays))


def solver_view(X: Any, row_sqnorms: np.ndarray | None = None) -> tuple:
    """X as the layer solver reads it: ``(indptr int64, feature ranks uint32, data float32,
    row squared norms, n_features, feature_of int64)``.

    Feature ids are renumbered by decreasing frequency (rank 0 is the feature stored in
    most rows; ``feature_of[rank]`` gives the original id back). The entries keep their
    order, so every dot product sums the same terms in the same order and the weights do
    not change; but the solver's dense weight buffer is read at random through the ids,
    and with the frequent features together its busy part stays in the fastest cache.
    Costs one copy of the feature ids (4 bytes per nonzero); compute it once per fit.
    """
    indptr, indices, data, (n, d) = _check_X(X)
    if row_sqnorms is None:
        row_sqnorms = _row_sqnorms(indptr, data)
    else:
        row_sqnorms = np.ascontiguousarray(row_sqnorms, dtype=np.float64)
        if row_sqnorms.shape != (n,):
            raise ValueError(f"row_sqnorms must have shape ({n},).")
    counts = np.zeros(d, np.int64)
    blocks = range(0, indices.shape[0], _RANK_BLOCK)
    for a in blocks:
        counts += np.bincount(indices[a : a + _RANK_BLOCK], minlength=d)
    feature_of = np.argsort(-counts, kind="stable")
    rank = np.empty(d, np.uint32)
    rank[feature_of] = np.arange(d, dtype=np.uint32)
    ranked = np.empty_like(indices)
    for a in blocks:
        np.take(rank, indices[a : a + _RANK_BLOCK], out=ranked[a : a + _RANK_BLOCK])
    return indptr, ranked, data, row_sqnorms, d, feature_of.astype(np.int64, copy=False)


@interruptible()
def run_chunk(
    x: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int],
    task: LayerTask,
    chunk: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, ...]:
    """Train the work items ``chunk = (groups, label starts, label stops)`` of ``task``
    on ``x``, a :func:`solver_view` of X. Returns ``(labels, counts, rows, values)`` for
    :func:`_assemble`."""
    x_indptr, x_indices, x_data, sqnorms, d, feature_of = x
    g = task.groups
    item_group, item_start, item_stop = chunk
    return _fit_items(
        x_indptr,
        x_indices,
        x_data,
        sqnorms,
        d,
        feature_of,
        g.row_indptr,
        g.row_indices,
        g.label_indices,
        task.y_indptr,
        task.y_indices,
        task.y_data,
        item_group,
        item_start,
        item_stop,
        task.seeds,
        *task.params,
    )


def _make_items(
    groups: LayerGroups, group_cost: np.ndarray, n_threads: int
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Split the layer into work chunks (one compiled call each) of similar cost.

    One thread gets everything in a single call. Otherwise a group whose labels cost more
    than ``target`` is cut into label ranges (the root layer has one huge group and few
    children: PECOS schedules per label for the same reason), items are sorted by
    decreasing cost (longest first) and packed into chunks of about ``target``; the pool
    hands chunks out dynamically.
    """
    n_lab = np.diff(groups.label_indptr)
    per_label = group_cost.astype(np.float64)
    total = float(np.sum(per_label * n_lab))
    gs = np.flatnonzero(n_lab > 0)
    if n_threads == 1 or total == 0.0:
        return [(gs, groups.label_indptr[gs], groups.label_indptr[gs + 1])]
    target = max(total / (_CHUNKS_PER_THREAD * n_threads), 1.0)
    starts = groups.label_indptr[gs]
    stops = groups.label_indptr[gs + 1]
    per = np.maximum(per_label[gs], 1e-9)
    n_pieces = np.minimum(stops - starts, np.maximum(1, np.ceil(per * (stops - starts) / target)))
    n_pieces = n_pieces.astype(np.int64)
    # most groups stay whole; only the expensive few are cut into label ranges
    split = np.flatnonzero(n_pieces > 1)
    keep = np.ones(gs.shape[0], bool)
    keep[split] = False
    g_arr, a_arr, b_arr = [gs[keep]], [starts[keep]], [stops[keep]]
    for i in split:
        cuts = np.linspace(starts[i], stops[i], n_pieces[i] + 1).round().astype(np.int64)
        g_arr.append(np.full(n_pieces[i], gs[i]))
        a_arr.append(cuts[:-1])
        b_arr.append(cuts[1:])
    g_arr, a_arr, b_arr = (np.concatenate(v).astype(np.int64) for v in (g_arr, a_arr, b_arr))
    cost = per_label[g_arr] * (b_arr - a_arr)
    order = np.argsort(-cost, kind="stable")  # longest first
    g_arr, a_arr, b_arr, cost = g_arr[order], a_arr[order], b_arr[order], cost[order]
    # consecutive items whose cumulative cost falls in the same multiple of target
    chunk_id = np.floor((np.cumsum(cost) - cost) / target).astype(np.int64)
    bounds = np.r_[0, np.flatnonzero(np.diff(chunk_id)) + 1, g_arr.shape[0]]
    return [
        (g_arr[lo:hi], a_arr[lo:hi], b_arr[lo:hi])
        for lo, hi in itertools.pairwise(bounds)
        if hi > lo
    ]


def fit_layer(
    X: Any,
    Y: Any,
    groups: LayerGroups,
    *,
    loss: Loss = "squared_hinge",
    Cp: float = 1.0,
    Cn: float = 1.0,
    tol: float = 0.1,
    max_iter: int = 100,
    bias: float = 1.0,
    weight_threshold: float = 0.1,
    use_relevance: bool = False,
    random_state: int | np.random.RandomState | None = 0,
    n_jobs: int | None = None,
    row_sqnorms: np.ndarray | None = None,
    _compact: bool | None = None,
    _executor: Any = None,
    _view: tuple | None = None,
) -> sp.csc_matrix:
    """Train the binary models of all label columns of one layer.

    Label column ``c`` of group ``g`` is trained on the rows of ``g``
    (:class:`LayerGroups`), with target +1 where ``Y[i, c]`` is stored and -1 elsewhere.
    Work is proportional to ``sum_g |rows(g)| * n_labels(g) * nnz per row``.

    Parameters
    ----------
    X : sparse matrix of shape (n, d)
        Features, ideally CSR float32 with sorted indices (otherwise converted once, which
        copies). A dense array is accepted and converted to CSR.
    Y : sparse matrix of shape (n, L_t)
        Layer targets; stored entries are positives, their values the relevance (used only
        with ``use_relevance``). Explicit zeros count as positives, so drop them first.
    groups : LayerGroups
        Rows and label columns of every parent group.
    loss : {"squared_hinge", "logistic"}, default="squared_hinge"
        See :func:`fit_binary`.
    Cp, Cn : float, default=1.0
        Costs of positives / negatives (PECOS defaults).
    tol : float, default=0.1
        liblinear's stopping tolerance ``eps`` (PECOS default 0.1).
    max_iter : int, default=100
        Maximum passes per binary problem (PECOS default 100).
    bias : float, default=1.0
        Value of the regularised bias feature; 0 disables it.
    weight_threshold : float, default=0.1
        Weights (the bias weight included, as in PECOS) with ``|w| < weight_threshold``
        are dropped; exact zeros are never stored.
    use_relevance : bool, default=False
        Relevance-weighted positives: ``C_i = Cp * Y[i, c]`` (values must be > 0).
    random_state : int, RandomState instance or None, default=0
        Seeds the per-label coordinate orders (:func:`label_seeds`).
    n_jobs : int or None, default=None
        Number of threads (joblib semantics: None means 1, -1 all cores). Results do not
        depend on it.
    row_sqnorms : ndarray of shape (n,), default=None
        Precomputed :func:`row_squared_norms` of ``X`` (computed here if None); pass it to
        share the work between the layers of a tree.

    Returns
    -------
    W : scipy.sparse.csc_matrix of shape (d + 1, L_t), dtype float32
        Column ``c`` holds label ``c``'s weights, sorted by row; row ``d`` is the bias
        weight ``b`` (PECOS's layout), so the decision values are
        ``hstack([X, full((n, 1), bias)]) @ W``. With ``bias=0`` row ``d`` is empty.
        Columns of labels in no group are empty.
    """
    loss_code = _check_params(loss, Cp, Cn, tol, max_iter, bias)
    if not weight_threshold >= 0:
        raise ValueError(f"weight_threshold must be >= 0, got {weight_threshold!r}.")
    # _view (private): solver_view(X) computed once by the caller for all layers; a cluster
    # (_executor) holds its own on the workers
    if _view is None and _executor is None:
        _view = solver_view(X, row_sqnorms)
    if _view is None:
        x_indptr, _, _, (n, d) = _check_X(X)
    else:
        x_indptr, d = _view[0], _view[4]
        n = x_indptr.shape[0] - 1
    if not sp.issparse(Y):
        raise ValueError("Y must be a scipy sparse matrix.")
    if Y.shape[0] != n:
        raise ValueError(f"Y has {Y.shape[0]} rows, X has {n}.")
    n_labels = Y.shape[1]
    groups.check(n, n_labels)
    Yc = sp.csc_matrix(Y, dtype=np.float64)
    if not Yc.has_sorted_indices:
        Yc = Yc.copy()
        Yc.sort_indices()
    if use_relevance and np.any(Yc.data <= 0):
        raise ValueError("use_relevance=True needs relevance values > 0 in Y.")
    seeds = label_seeds(random_state, n_labels)

    # cost of one label of group g ~ nnz of the group's rows
    row_nnz = np.diff(x_indptr)
    cum = np.concatenate(([0], np.cumsum(row_nnz[groups.row_indices])))
    group_cost = cum[groups.row_indptr[1:]] - cum[groups.row_indptr[:-1]]
    n_threads = max(1, int(effective_n_jobs(n_jobs)))

    # _compact (private, for tests and benchmarks): None lets _fit_items decide per group,
    # True / False force the copied local CSR or the indexing through X
    compact_mode = -1 if _compact is None else int(bool(_compact))
    task = LayerTask(
        groups,
        Yc.indptr.astype(np.int64, copy=False),
        Yc.indices.astype(np.int32, copy=False),
        Yc.data,
        seeds,
        (
            loss_code,
            float(Cp),
            float(Cn),
            float(tol),
            int(max_iter),
            float(bias),
            float(weight_threshold),
            bool(use_relevance),
            compact_mode,
        ),
    )
    if _executor is not None:
        # a cluster (skxmc.linear._distributed): X is on its workers already, the task
        # travels once per layer, the chunks as small index arrays
        chunks = _make_items(groups, group_cost, max(1, int(_executor.n_threads)))
        results = _executor.run_layer(task, chunks)
        return _assemble(results, d + 1, n_labels)
    chunks = _make_items(groups, group_cost, n_threads)
    x = _view

    def run(chunk: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
        return run_chunk(x, task, chunk)

    if n_threads == 1 or len(chunks) == 1:
        results = [run(ch) for ch in chunks]
    else:
        # the kernels release the GIL (nogil=True), so plain threads run them in parallel
        # and share X, Y and the groups without copies
        with ThreadPoolExecutor(max_workers=min(n_threads, len(chunks))) as pool:
            results = list(pool.map(run, chunks))
    return _assemble(results, d + 1, n_labels)


def _assemble(results: list[tuple[np.ndarray, ...]], n_rows: int, n_labels: int) -> sp.csc_matrix:
    """Scatter the per-chunk (labels, counts, rows, vals) into one CSC matrix, O(nnz)."""
    counts = np.zeros(n_labels, np.int64)
    for labels, cnt, _, _ in results:
        counts[labels] = cnt
    indptr = np.zeros(n_labels + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    indices = np.empty(nnz, np.int32)
    data = np.empty(nnz, np.float32)
    for labels, cnt, rows, vals in results:
        if rows.shape[0] == 0:
            continue
        local_start = np.concatenate(([0], np.cumsum(cnt)[:-1]))
        dest = np.repeat(indptr[labels] - local_start, cnt) + np.arange(rows.shape[0])
        indices[dest] = rows
        data[dest] = vals
    W = sp.csc_matrix((data, indices, indptr), shape=(n_rows, n_labels))
    W.has_sorted_indices = True
    return W
