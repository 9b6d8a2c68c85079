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

from .._kernels.dcd import _row_sqnorms, _solve
from .._kernels.jit import interruptible
from .._kernels.layer import _fit_items

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


# Work chunks per thread in a layer (_make_items): more chunks even out the threads' loads
# at the end of a layer, each costs one more scan of its group's rows.
_CHUNKS_PER_THREAD = 8

# Feature ids are renumbered by frequency (solver_view) in blocks of this many nonzeros,
# so that the int64 temporaries of numpy's bincount / take stay small.
_RANK_BLOCK = 1 << 20


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
