"""Compiled dual coordinate descent for one binary linear problem of XR-Linear.

Ports of liblinear's ``solve_l2r_l1l2_svc`` (L2-loss, i.e. squared hinge, with shrinking)
and ``solve_l2r_lr_dual`` (logistic loss, inner Newton per coordinate), as used by
PECOS's ``core/xmc/linear_solver.hpp``. The problem they solve, and how the Python side
sets it up, is documented in :mod:`skxmc.linear._solver`.
"""

from __future__ import annotations

import numpy as np

from .jit import jit, prefetch

__all__ = ["_row_sqnorms", "_solve"]

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
