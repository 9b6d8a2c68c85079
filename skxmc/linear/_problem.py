"""Problem set-up of XR-Linear's per-layer binary linear models.

XR-Linear (PECOS) trains, for every layer of a label tree, one binary linear model per
node. All children of one parent node share the same training rows: the instances that
are positive for the parent ("teacher-forcing negatives") plus, optionally, the instances
whose previous-layer beam reached the parent ("matcher-aware negatives"). A child's binary
problem labels those rows +1 where the instance is positive for the child, -1 elsewhere.
The cost of a layer is therefore ``sum_g |R_g| * n_children(g) * nnz per row``, never
``n * L``.

This module sets the problems up: :class:`LayerGroups` (which rows and which label columns
belong to every parent group of a layer), :class:`LayerTask` (what a layer's work items
read), :func:`solver_view` (X as the solver reads it), the per-label seeds
(:func:`label_seeds`) and the split of a layer into work chunks. Solving them is
:mod:`skxmc.linear._solver` (threads, assembly) over the compiled kernels
:mod:`skxmc._kernels.dcd` (dual coordinate descent) and :mod:`skxmc._kernels.layer`
(a work item's problems, solved and pruned).

Determinism: the coordinate order of every label is drawn from a private xorshift64*
stream seeded by :func:`label_seeds` (``random_state`` and the label's column index), so
results do not depend on ``n_jobs`` or on how labels are batched, and
``fit_binary(X[rows], y, seed=label_seeds(random_state, L)[c])`` reproduces column ``c``
of :func:`~skxmc.linear._solver.fit_layer` exactly.
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._kernels.dcd import _row_sqnorms

__all__ = [
    "LayerGroups",
    "LayerTask",
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

    def keep_rows(self, keep: np.ndarray) -> LayerGroups:
        """The same groups with only the rows ``i`` where ``keep[i]`` is True (row ids
        unchanged, order kept): how rows of sample weight 0 leave every sub-problem, as
        liblinear drops zero-weight instances before it trains."""
        kept = np.asarray(keep, dtype=bool)[self.row_indices]
        # kept rows before each group boundary = the new boundaries
        before = np.concatenate(([0], np.cumsum(kept, dtype=np.int64)))
        return LayerGroups(
            before[self.row_indptr], self.row_indices[kept], self.label_indptr, self.label_indices
        )

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
    (CSC arrays), the per-label seeds, the sample weights of X's rows (float64, empty when
    unweighted) and the solver settings (the scalar arguments of ``_fit_items`` after the
    weights). One object, so that a cluster ships it once per layer to each worker
    (``skxmc.linear._distributed``) and a thread pool shares it."""

    groups: LayerGroups
    y_indptr: np.ndarray
    y_indices: np.ndarray
    y_data: np.ndarray
    seeds: np.ndarray
    row_weight: np.ndarray
    params: tuple

    @property
    def nbytes(self) -> int:
        g = self.groups
        arrays = (g.row_indptr, g.row_indices, g.label_indptr, g.label_indices)
        arrays += (self.y_indptr, self.y_indices, self.y_data, self.seeds, self.row_weight)
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


def _relevance_targets(Y: sp.csr_matrix, chain: list[sp.csr_matrix]) -> list[sp.csr_matrix]:
    """Cluster-level targets weighted by relevance: the number of a sample's labels under
    each cluster, divided by the sample's largest count (PECOS's induced relevance with
    max normalisation). Leaf-layer targets stay 0/1."""
    layers = [Y]
    Y_t = Y
    for C in chain[:0:-1]:
        Y_t = sp.csr_matrix(Y_t @ C, dtype=np.float32)
        Y_t.sort_indices()
        layers.append(Y_t)
    for M in layers:
        nonempty = np.diff(M.indptr) > 0
        if M.nnz:
            row_max = np.maximum.reduceat(M.data, M.indptr[:-1][nonempty])
            M.data /= np.repeat(row_max, np.diff(M.indptr)[nonempty])
    return layers[::-1]
