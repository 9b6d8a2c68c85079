"""Solving XR-Linear's per-layer binary linear models (liblinear's dual coordinate descent).

The problems are set up in :mod:`skxmc.linear._problem`; this module runs them:

* :func:`fit_layer` trains all binary models of one layer in parallel threads (or on a
  Dask cluster, :mod:`skxmc.linear._distributed`) and returns them as one sparse
  ``(d + 1, L_t)`` CSC matrix (PECOS's layout);
* :func:`fit_binary` is the single-problem entry point (reference / tests).

The compiled solvers are ports of liblinear's ``solve_l2r_l1l2_svc`` (L2-loss, i.e.
squared hinge, with shrinking) and ``solve_l2r_lr_dual`` (logistic loss, inner Newton per
coordinate), as used by PECOS's ``core/xmc/linear_solver.hpp``
(:mod:`skxmc._kernels.dcd`); a work item's problems are set up, solved and pruned to
``|w| >= weight_threshold`` by :func:`skxmc._kernels.layer._fit_items`.

Problem solved for one label (liblinear's primal, bias as a regularised feature)::

    min_w  0.5 * ||w_aug||^2 + sum_i C_i * loss(y_i * w_aug . x_aug_i)

with ``x_aug = [x, bias]``, ``w_aug = [w, b]``, ``C_i = Cp * r_i`` for positives
(``r_i`` the relevance if ``use_relevance`` else 1) and ``C_i = Cn`` for negatives,
``loss(z) = max(0, 1 - z)^2`` (``"squared_hinge"``) or ``log(1 + exp(-z))``
(``"logistic"``). The decision value is ``x . w + bias * b``; ``bias = 0`` means no
bias term (``b`` stays 0).

Sample weights are liblinear's instance weights (its ``-W`` file, scikit-learn's
``sample_weight``): row ``i`` of weight ``s_i`` has cost ``s_i * C_i`` in every problem it
is part of, so the squared hinge's dual has the diagonal term ``D_ii = 1 / (2 s_i C_i)``
(no upper bound) and the logistic dual the upper bound ``s_i C_i`` (liblinear's hinge,
``-s 3``, which skxmc does not offer, would take it as its upper bound with ``D_ii = 0``).
Rows of weight 0 are left out of every problem, as liblinear's ``remove_zero_weight``
does: a row of weight ``s`` is then the same primal problem as ``s`` copies of the row
(weight 0: no row), and an unweighted fit runs the very same code as before.

Differences from PECOS, on purpose: PECOS seeds every label's solver with 0, here each
label has its own stream (same distribution of results, see :func:`label_seeds`); exact
zeros are never stored (PECOS keeps them when ``threshold=0``); the output always has the
bias row ``d``, empty when ``bias=0`` (PECOS drops the row). As in PECOS, relevance scales
both the upper bound and the diagonal term ``D_ii = 1 / (2 C_i)``, the weight threshold
also applies to the bias weight, and the logistic dual has no shrinking (neither has
liblinear's).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs

from .._kernels.dcd import _row_sqnorms, _solve
from .._kernels.jit import interruptible
from .._kernels.layer import _fit_items
from .._sample_weight import check_sample_weight
from ._problem import (
    LayerGroups,
    LayerTask,
    Loss,
    _check_params,
    _check_X,
    _make_items,
    label_seeds,
    row_squared_norms,
    solver_view,
)

# LayerGroups, label_seeds, row_squared_norms and solver_view are set up in ._problem and
# named here too: the solver's callers (and its tests) find the whole API in one place.
__all__ = [
    "LayerGroups",
    "LayerTask",
    "fit_binary",
    "fit_layer",
    "label_seeds",
    "row_squared_norms",
    "run_chunk",
    "solver_view",
]


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
    sample_weight: np.ndarray | None = None,
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
    sample_weight : array-like of shape (n,), default=None
        Instance weights (liblinear's): ``C_i`` is multiplied by ``sample_weight[i]``;
        rows of weight 0 are left out of the problem. None: all 1.

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
    rows = np.arange(n, dtype=np.int32)
    sqnorms = _row_sqnorms(indptr, data)
    signs = np.where(pos, 1.0, -1.0)
    weights = check_sample_weight(sample_weight, n)
    if weights is not None:
        # problem row k is X's row rows[k]; its norm, sign and cost sit at k
        rows = np.flatnonzero(weights > 0).astype(np.int32)
        sqnorms, signs, cost = sqnorms[rows], signs[rows], cost[rows] * weights[rows]
    w = np.zeros(d, np.float64)
    b, n_iter = _solve(
        loss_code,
        indptr,
        indices,
        data,
        rows,
        sqnorms,
        signs,
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
        task.row_weight,
        *task.params,
    )


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
    sample_weight: np.ndarray | None = None,
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
    sample_weight : array-like of shape (n,), default=None
        Instance weights of the rows of ``X``: every problem a row is part of multiplies
        its cost by its weight (liblinear's instance weights), and rows of weight 0 are
        left out of every group. None: unweighted (the same computation as before weights
        existed).

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
    # _compact (private, for tests and benchmarks): None lets _fit_items decide per group,
    # True / False force the copied local CSR or the indexing through X
    compact_mode = -1 if _compact is None else int(bool(_compact))
    params = (loss_code, float(Cp), float(Cn), float(tol), int(max_iter), float(bias))
    params += (float(weight_threshold), bool(use_relevance), compact_mode)
    weights = check_sample_weight(sample_weight, n)
    if weights is None:
        weights = np.empty(0, np.float64)  # the kernel's unweighted path
    else:
        groups = groups.keep_rows(weights > 0)
    task = _layer_task(Y, groups, n, params, random_state, weights)
    results = _run_layer(task, groups, x_indptr, _view, n_jobs, _executor)
    return _assemble(results, d + 1, Y.shape[1])


def _run_layer(
    task: Any, groups: LayerGroups, x_indptr: np.ndarray, view: Any, n_jobs: Any, executor: Any
) -> list:
    """Run a layer's task in chunks balanced by cost, on threads or on a cluster."""
    # cost of one label of group g ~ nnz of the group's rows
    row_nnz = np.diff(x_indptr)
    cum = np.concatenate(([0], np.cumsum(row_nnz[groups.row_indices])))
    group_cost = cum[groups.row_indptr[1:]] - cum[groups.row_indptr[:-1]]
    if executor is not None:
        # a cluster (skxmc.linear._distributed): X is on its workers already, the task
        # travels once per layer, the chunks as small index arrays
        chunks = _make_items(groups, group_cost, max(1, int(executor.n_threads)))
        return executor.run_layer(task, chunks)
    n_threads = max(1, int(effective_n_jobs(n_jobs)))
    chunks = _make_items(groups, group_cost, n_threads)
    return _run_threads(view, task, chunks, n_threads)


def _layer_task(
    Y: Any,
    groups: LayerGroups,
    n: int,
    params: tuple,
    random_state: Any,
    row_weight: np.ndarray,
) -> LayerTask:
    """The :class:`LayerTask` of a layer with targets ``Y`` (checked against ``n`` rows and
    the groups), the rows' sample weights (empty: unweighted) and the solver settings
    ``params`` (``_fit_items``'s scalar arguments)."""
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
    use_relevance = params[7]
    if use_relevance and np.any(Yc.data <= 0):
        raise ValueError("use_relevance=True needs relevance values > 0 in Y.")
    return LayerTask(
        groups,
        Yc.indptr.astype(np.int64, copy=False),
        Yc.indices.astype(np.int32, copy=False),
        Yc.data,
        label_seeds(random_state, n_labels),
        row_weight,
        params,
    )


def _run_threads(
    x: tuple, task: LayerTask, chunks: list, n_threads: int
) -> list[tuple[np.ndarray, ...]]:
    """:func:`run_chunk` over ``chunks`` on ``n_threads`` threads (the kernels release the
    GIL, so plain threads run them in parallel and share X, Y and the groups without
    copies); the results in the order of ``chunks``."""

    def run(chunk: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
        return run_chunk(x, task, chunk)

    if n_threads == 1 or len(chunks) == 1:
        return [run(ch) for ch in chunks]
    with ThreadPoolExecutor(max_workers=min(n_threads, len(chunks))) as pool:
        return list(pool.map(run, chunks))


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
