"""Hierarchical label tree: recursive balanced spherical 2-means over label embeddings.

The tree is the one of PECOS's ``HierarchicalKMeans`` indexer (and of XR-Linear,
XR-Transformer and MatchXML): labels are split recursively into two halves of equal size
(they differ by at most one label) by spherical 2-means until every leaf cluster holds at
most ``max_leaf_size`` labels; the binary levels are then grouped into layers of
``branching_factor`` children per node.

Public API: :class:`HierarchicalLabelTree`, the scikit-learn estimator (``fit(X, Y)``
builds the tree from PIFA embeddings, label2vec embeddings, both concatenated,
precomputed embeddings or an embedding estimator); :func:`pifa_embeddings`, Positive
Instance Feature Aggregation label embeddings (sparse when ``X`` is sparse);
:func:`build_label_tree`, the clustering alone (label embeddings in, cluster chain and
leaf assignment out).

Cluster chain convention (identical to PECOS's ``ClusterChain``, except that the matrices
are CSR instead of CSC): ``cluster_chain[t]`` for ``t = 0, ..., D - 1`` is a 0/1 float32
matrix of shape ``(K_{t+1}, K_t)`` whose entry ``(i, j)`` is 1 when node ``i`` of layer
``t + 1`` is a child of node ``j`` of layer ``t``; ``K_0 = 1`` is the root and
``K_D = n_labels``. So the first matrix is the all-ones ``(K_1, 1)`` root matrix and the
last one, ``(n_labels, K_{D-1})``, maps labels to leaf clusters. A tree whose labels all
fit in one leaf is the single matrix ``ones((n_labels, 1))``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, clone
from sklearn.preprocessing import normalize
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted

from skxmc._compat import (
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
    _num_samples,
    validate_data,
    validate_params,
)
from skxmc._kmeans import split_level, split_node_threaded
from skxmc._logging import progress
from skxmc._optional import require
from skxmc._sample_weight import check_sample_weight
from skxmc._sparse_product import sorted_product
from skxmc.io import PersistenceMixin, persistent
from skxmc.labels import LabelSpace, encode_labels

__all__ = ["HierarchicalLabelTree", "build_label_tree", "pifa_embeddings"]

logger = logging.getLogger(__name__)

#: ``label_embedding`` strings that build embeddings inside ``fit``.
EMBEDDING_METHODS = ("pifa", "label2vec", "pifa+label2vec")


# --------------------------------------------------------------------------------------
# PIFA
# --------------------------------------------------------------------------------------
def pifa_embeddings(
    X: Any, Y: Any, *, instance_norm: str | None = "l2", sample_weight: Any = None
) -> sp.csr_matrix | np.ndarray:
    """Positive Instance Feature Aggregation (PIFA) label embeddings.

    Each label's embedding is the (weighted) sum of the feature vectors of the samples
    where it is positive, L2-normalised: ``normalize(normalize(Y, instance_norm).T @ X)``.
    The product is sparse when ``X`` is sparse: no dense ``(n_labels, n_features)``
    matrix is ever built.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Sample features (e.g. TF-IDF); converted to float32, non-finite values raise.
    Y : sparse matrix, ndarray or sequence of label collections
        Labels in any format skxmc accepts (label sets or collections, or a 0/1
        indicator matrix; see the Labels page of the user guide). The rows of the
        result follow the sorted label identifiers (``arange(n_labels)`` for matrices).
    instance_norm : {"l1", "l2"} or None, default="l2"
        How each sample's label row is normalised before aggregation. ``"l2"`` (default,
        as PECOS's ``LabelEmbeddingFactory.pifa``): a sample with ``k`` labels gives each
        weight ``1 / sqrt(k)``; ``"l1"``: weight ``1 / k`` (its weight sums to 1);
        ``None``: plain sums. Keep ``"l2"``, PECOS's default.
    sample_weight : array-like of shape (n_samples,), default=None
        Per-sample weights (finite, non-negative): each sample's normalised label row is
        multiplied by its weight before aggregation, so a sample of weight ``w`` adds
        what ``w`` copies of it would, and a sample of weight 0 adds nothing.

    Returns
    -------
    embeddings : csr_matrix of shape (n_labels, n_features), or ndarray if X is dense
        float32, rows of unit L2 norm; labels without positive samples get a zero row.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.tree import pifa_embeddings
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    >>> pifa_embeddings(X, [["a"], ["a", "b"], []])  # a: [1, 0] + [0, 2] / sqrt(2)
    array([[0.57735026, 0.8164966 ],
           [0.        , 1.        ]], dtype=float32)
    """
    if instance_norm not in ("l1", "l2", None):
        raise ValueError(f"instance_norm must be 'l1', 'l2' or None, got {instance_norm!r}.")
    X = check_array(X, accept_sparse="csr", dtype=np.float32)
    Y_csr, _ = encode_labels(Y, name="Y", n_samples=X.shape[0])
    weights = check_sample_weight(sample_weight, X.shape[0])
    return _pifa(X, Y_csr, instance_norm, sample_weight=weights)


def _pifa(
    X: sp.csr_matrix | np.ndarray,
    Y: sp.csr_matrix,
    instance_norm: str | None,
    n_jobs: int = 1,
    sample_weight: np.ndarray | None = None,
) -> Any:
    """PIFA on validated float32 ``X`` and CSR float32 ``Y``, the rows of ``Y`` weighted by
    the checked ``sample_weight`` (None: unweighted)."""
    if instance_norm is not None:
        Y = normalize(Y, norm=instance_norm)  # zero rows (unlabelled samples) stay zero
    if sample_weight is not None:
        Y = _weigh_rows(Y, sample_weight)
    # CSR (L, n) @ (n, d): one row per label, sorted (what the tree's kernels read)
    if sp.issparse(X):
        E = sorted_product(sp.csr_matrix(Y.T), X, n_jobs=n_jobs)
    else:
        E = np.ascontiguousarray(sp.csr_matrix(Y.T) @ X, dtype=np.float32)
    return normalize(E, norm="l2", copy=False)


def _weigh_rows(Y: sp.csr_matrix, sample_weight: np.ndarray) -> sp.csr_matrix:
    """A copy of ``Y`` with row ``i`` multiplied by ``sample_weight[i]``, the rows of weight
    0 left empty (no stored zeros): weight ``w`` is ``w`` copies of the row, 0 no row."""
    Y = sp.csr_matrix(Y, copy=True)
    Y.data *= np.repeat(sample_weight, np.diff(Y.indptr)).astype(Y.dtype)
    Y.eliminate_zeros()
    return Y


def _positive_rows(Y: sp.csr_matrix, sample_weight: Any) -> sp.csr_matrix:
    """The rows of ``Y`` whose sample weight is positive (all rows without weights): what
    embedders without per-sample weights are fitted on, so that weight 0 drops a row."""
    weights = check_sample_weight(sample_weight, Y.shape[0])
    return Y if weights is None else Y[weights > 0]


# --------------------------------------------------------------------------------------
# Tree construction
# --------------------------------------------------------------------------------------
def _binary_depth(n_labels: int, max_leaf_size: int) -> int:
    """Fewest binary levels whose balanced leaves hold at most ``max_leaf_size`` labels.

    Equals ``ceil(log2(n_labels / max_leaf_size))`` (computed in integers) when
    ``n_labels > max_leaf_size``, and 0 (a one-layer tree) otherwise.
    """
    depth = 0
    while -(-n_labels // (1 << depth)) > max_leaf_size:
        depth += 1
    return depth


def _level_bounds(n_labels: int, depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(starts, ends)`` of the nodes of every binary level, in heap order.

    Node ``j`` of level ``k`` covers ``elements[starts[j]:ends[j]]``; its children are
    nodes ``2j`` (left, ``floor(n / 2)`` labels) and ``2j + 1`` of level ``k + 1``, so the
    leaf index is the node's path read as a binary number, which is what grouping leaves
    by ``// branching_factor`` relies on.
    """
    starts = np.zeros(1, dtype=np.int64)
    ends = np.full(1, n_labels, dtype=np.int64)
    levels = [(starts, ends)]
    for _ in range(depth):
        mid = (starts + ends) // 2
        starts = np.stack([starts, mid], axis=1).ravel()
        ends = np.stack([mid, ends], axis=1).ravel()
        levels.append((starts, ends))
    return levels


def _assignment_matrix(codes: np.ndarray, n_clusters: int) -> sp.csr_matrix:
    """CSR 0/1 float32 ``(len(codes), n_clusters)`` with a one at ``(i, codes[i])``."""
    n = len(codes)
    return sp.csr_matrix(
        (np.ones(n, dtype=np.float32), codes.astype(np.int32), np.arange(n + 1)),
        shape=(n, n_clusters),
    )


def _chain_from_codes(codes: np.ndarray, depth: int, branching_factor: int) -> list[sp.csr_matrix]:
    """Group ``2**depth`` binary leaves into layers, as PECOS's ``from_partial_chain``."""
    n_clusters = 1 << depth
    chain = [_assignment_matrix(codes, n_clusters)]
    while n_clusters > branching_factor:
        parents = np.arange(n_clusters) // branching_factor
        n_clusters //= branching_factor
        chain.insert(0, _assignment_matrix(parents, n_clusters))
    if n_clusters > 1:
        chain.insert(0, _assignment_matrix(np.zeros(n_clusters, dtype=np.int64), 1))
    return chain


def _node_picks(
    levels: list[tuple[np.ndarray, np.ndarray]], rng: np.random.RandomState
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Initial (right, left) positions of every internal node, drawn up front.

    Drawing them before any clustering, in heap order, makes the tree independent of the
    order in which threads process nodes. Two distinct positions, as in PECOS.
    """
    picks = []
    for starts, ends in levels[:-1]:
        sizes = ends - starts  # >= 2: a node is split only when it exceeds max_leaf_size
        right = rng.randint(0, sizes).astype(np.int64)
        left = (right + rng.randint(1, sizes)) % sizes
        picks.append((right, left.astype(np.int64)))
    return picks


def _build(
    E: sp.csr_matrix | np.ndarray,
    *,
    branching_factor: int,
    max_leaf_size: int,
    max_iter: int,
    random_state: Any,
    n_jobs: int | None,
    verbose: int = 0,
) -> tuple[list[sp.csr_matrix], np.ndarray]:
    """Cluster validated embeddings; return ``(cluster_chain, leaf_assignment)``."""
    n_labels = E.shape[0]
    rng = check_random_state(random_state)
    depth = _binary_depth(n_labels, max_leaf_size)
    levels = _level_bounds(n_labels, depth)
    picks = _node_picks(levels, rng)
    elements = np.arange(n_labels, dtype=np.int64)
    n_threads = max(1, min(effective_n_jobs(n_jobs), n_labels))

    pool = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 and depth else None
    map_fn: Callable = pool.map if pool is not None else map
    bar = None
    if verbose and depth:
        from tqdm.auto import tqdm

        bar = tqdm(total=depth, desc="label tree levels", unit="level")
    try:
        for level in range(depth):
            starts, ends = levels[level]
            picks_r, picks_l = picks[level]
            if len(starts) < n_threads:
                # Fewer nodes than threads (top of the tree): each node uses all threads.
                for v in range(len(starts)):
                    seg = elements[starts[v] : ends[v]]
                    split_node_threaded(
                        E, seg, int(picks_r[v]), int(picks_l[v]), max_iter, n_threads, map_fn
                    )
            else:
                split_level(
                    E, elements, starts, ends, picks_r, picks_l, max_iter, n_threads, map_fn
                )
            if bar is not None:
                bar.update()
    finally:
        if pool is not None:
            pool.shutdown()
        if bar is not None:
            bar.close()

    starts, ends = levels[-1]
    codes = np.empty(n_labels, dtype=np.int64)
    codes[elements] = np.repeat(np.arange(len(starts)), ends - starts)
    return _chain_from_codes(codes, depth, branching_factor), codes


def _check_embeddings(E: Any, name: str) -> sp.csr_matrix | np.ndarray:
    """Validate label embeddings: 2-D, finite, float32, CSR (sorted) or C-contiguous."""
    E = check_array(E, accept_sparse="csr", dtype=np.float32, input_name=name)
    if sp.issparse(E):
        if not E.has_sorted_indices:
            E = E.copy()  # never modify the caller's matrix
            E.sort_indices()
        return E
    return np.ascontiguousarray(E)


def _check_branching_factor(branching_factor: int) -> None:
    if branching_factor & (branching_factor - 1):
        raise ValueError(
            f"branching_factor must be a power of 2 (each layer groups "
            f"log2(branching_factor) binary splits), got {branching_factor}."
        )


@validate_params(
    {
        "embeddings": ["array-like", "sparse matrix"],
        "branching_factor": [Interval(Integral, 2, None, closed="left")],
        "max_leaf_size": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def build_label_tree(
    embeddings: Any,
    *,
    branching_factor: int = 16,
    max_leaf_size: int = 100,
    max_iter: int = 20,
    random_state: Any = 0,
    n_jobs: int | None = None,
) -> tuple[list[sp.csr_matrix], np.ndarray]:
    """Cluster label embeddings into a balanced label tree (PECOS's hierarchical k-means).

    Parameters
    ----------
    embeddings : {array-like, sparse matrix} of shape (n_labels, n_dims)
        One row per label, used as given (L2-normalise rows for cosine clustering; PIFA
        rows already are).
    branching_factor : int, default=16
        Children per internal node (PECOS's ``nr_splits``); a power of 2.
    max_leaf_size : int, default=100
        Most labels per leaf cluster; at least 2 so that no leaf is empty.
    max_iter : int, default=20
        Most iterations of each 2-means split.
    random_state : int, RandomState instance or None, default=0
        Seed of the initial centres.
    n_jobs : int, default=None
        Threads; ``None`` means 1, ``-1`` all processors. The tree is the same for every
        value.

    Returns
    -------
    cluster_chain : list of csr_matrix
        See :class:`HierarchicalLabelTree` (``cluster_chain_``) for the convention.
    leaf_assignment : ndarray of shape (n_labels,)
        Leaf cluster of each label (column of ``cluster_chain[-1]``).

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.tree import build_label_tree
    >>> E = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]])
    >>> chain, leaves = build_label_tree(E, max_leaf_size=2)
    >>> [C.shape for C in chain]
    [(2, 1), (4, 2)]
    >>> leaves
    array([1, 1, 0, 0])
    """
    _check_branching_factor(branching_factor)
    E = _check_embeddings(embeddings, "embeddings")
    return _build(
        E,
        branching_factor=branching_factor,
        max_leaf_size=max_leaf_size,
        max_iter=max_iter,
        random_state=random_state,
        n_jobs=n_jobs,
    )


# --------------------------------------------------------------------------------------
# Estimator
# --------------------------------------------------------------------------------------
@persistent
class HierarchicalLabelTree(PersistenceMixin, BaseEstimator):
    """Hierarchical label tree by recursive balanced spherical 2-means.

    The tree of PECOS's ``HierarchicalKMeans`` indexer, used by XR-Linear and MatchXML:
    labels, represented by embeddings (PIFA by default), are split recursively into two
    halves whose sizes differ by at most one, by spherical 2-means: start from two random
    distinct labels, score every label by ``<c_right - c_left, x>``, cut the sorted
    scores at the middle (ties broken by label index), recompute each centre as the
    normalised sum of its half, and repeat until the halves are stable or ``max_iter``
    iterations ran. The number of binary levels is the smallest ``b`` with
    ``ceil(n_labels / 2**b) <= max_leaf_size``, i.e.
    ``ceil(log2(n_labels / max_leaf_size))``; when every label fits in one leaf
    (``n_labels <= max_leaf_size``) the tree has one layer, root -> labels (PECOS would
    still split once). The binary levels are grouped into layers of ``branching_factor``
    children per node (``log2(branching_factor)`` levels each, counted from the leaves,
    so the top layer may have fewer children), below the root.

    Parameters
    ----------
    label_embedding : {"pifa", "label2vec", "pifa+label2vec"}, array-like, sparse \
matrix or estimator, default="pifa"
        How labels are represented (the strings are listed in ``EMBEDDING_METHODS``):

        - ``"pifa"``: PIFA embeddings from ``X`` and ``Y`` (:func:`pifa_embeddings`,
          ``instance_norm="l2"``, as PECOS).
        - ``"label2vec"``: dense label vectors learned from the co-occurrence of labels in
          ``Y`` by :class:`~skxmc.Label2VecTransformer` with its defaults (the
          MatchXML paper's), seeded with ``random_state`` and one worker thread (so the
          tree is reproducible); ``X`` is not used and may be ``None``. For other
          settings pass a ``Label2VecTransformer`` instance instead.
        - ``"pifa+label2vec"``: each label's PIFA row (unit norm) concatenated with its
          label2vec row (unit norm), the result L2-normalised, so that both count
          equally: the embedding of MatchXML's refined tree. Sparse when ``X`` is
          sparse; needs ``X``.
        - array-like or sparse matrix of shape (n_labels, n_dims): precomputed
          embeddings, one row per label in the column order of ``Y`` (sorted label
          identifiers); used as given, so L2-normalise rows for cosine clustering. ``X``
          may then be ``None`` (and ``Y`` too: labels are ``arange(n_labels)``).
        - an estimator with ``fit(Y)`` exposing ``embeddings_`` of shape
          (n_labels, n_dims) after fitting (e.g. a label2vec model): a clone is fitted on
          the CSR float32 label matrix (columns = ``classes_``). ``X`` may be ``None``.
    branching_factor : int, default=16
        Children per internal node (PECOS's ``nr_splits``); a power of 2, at least 2.
    max_leaf_size : int, default=100
        Most labels per leaf cluster; at least 2 (with 1, balanced halving would leave
        empty leaves).
    max_iter : int, default=20
        Most iterations of each 2-means split.
    random_state : int, RandomState instance or None, default=0
        Seed of the initial centres. The same seed gives the same tree, whatever
        ``n_jobs``.
    n_jobs : int, default=None
        Threads for clustering (nodes of a level in parallel; the top nodes split their
        work). ``None`` means 1 unless in a :func:`joblib.parallel_config` context; ``-1``
        means all processors.
    verbose : int, default=0
        ``>= 1``: a progress bar over binary levels (standard error) and a summary line
        printed to standard output. The summary is also logged at DEBUG on the
        ``skxmc.tree`` logger, whatever ``verbose``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Label identifiers (column order of ``Y``).
    n_labels_ : int
        Number of labels.
    cluster_chain_ : list of csr_matrix
        PECOS's cluster-chain convention (CSR here, CSC in PECOS), with ``D = n_layers_``:
        ``cluster_chain_[t]`` (``t = 0, ..., D - 1``) is a 0/1 float32 matrix of shape
        ``(K_{t+1}, K_t)``, one 1 per row at (child, parent), where ``K_t`` is the number
        of nodes of layer ``t``, ``K_0 = 1`` (the root) and ``K_D = n_labels``. The first
        matrix is all ones, ``(K_1, 1)``; the last, ``(n_labels, K_{D-1})``, maps each
        label to its leaf cluster. ``Y @ cluster_chain_[-1]`` (binarised) are the
        leaf-cluster labels (eq. 3 of the MatchXML paper), see
        :meth:`cluster_label_matrices`. One leaf only: ``[ones((n_labels, 1))]``.
    n_layers_ : int
        ``len(cluster_chain_)``, the number of ranking layers (XR-Linear trains one model
        per matrix).
    depth_ : int
        Number of binary splitting levels (0 for a one-layer tree).
    leaf_assignment_ : ndarray of shape (n_labels,)
        Leaf cluster of each label: the column of its one in ``cluster_chain_[-1]``.
    n_features_in_ : int
        Number of features of ``X`` (only when PIFA embeddings were computed from it).
    label_embedder_ : estimator or None
        The fitted clone when ``label_embedding`` is an estimator, the fitted
        :class:`~skxmc.Label2VecTransformer` for ``"label2vec"`` and
        ``"pifa+label2vec"`` (its ``embeddings_`` are the label2vec vectors), else None.
        It is fitted on the label matrix, so its ``classes_`` are column indices: its
        rows follow the tree's ``classes_``. Absent from the ``tree_`` of a predict-only
        :class:`~skxmc.XRLinearClassifier` (:meth:`~skxmc.XRLinearClassifier.compact`).

    Notes
    -----
    The embeddings are not kept (the PIFA matrix can be as large as the training data);
    use :func:`pifa_embeddings` to get them. A fitted tree round-trips through
    ``pickle`` and through ``tree.save(directory)`` / :func:`skxmc.load` (no pickle).

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.tree import HierarchicalLabelTree
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> Y = [["a", "b"], ["a"], ["c", "d"], ["d"]]
    >>> tree = HierarchicalLabelTree(max_leaf_size=2).fit(X, Y)
    >>> [C.shape for C in tree.cluster_chain_]
    [(2, 1), (4, 2)]
    >>> tree.classes_
    array(['a', 'b', 'c', 'd'], dtype=object)
    >>> tree.leaf_assignment_
    array([1, 1, 0, 0])
    >>> Y_top, Y_labels = tree.cluster_label_matrices(Y)
    >>> Y_top.toarray()
    array([[0., 1.],
           [0., 1.],
           [1., 0.],
           [1., 0.]], dtype=float32)
    """

    _parameter_constraints: ClassVar[dict] = {
        "label_embedding": [
            StrOptions(set(EMBEDDING_METHODS)),
            "array-like",
            "sparse matrix",
            HasMethods(["fit"]),
        ],
        "branching_factor": [Interval(Integral, 2, None, closed="left")],
        "max_leaf_size": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        label_embedding: Any = "pifa",
        branching_factor: int = 16,
        max_leaf_size: int = 100,
        max_iter: int = 20,
        random_state: Any = 0,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.label_embedding = label_embedding
        self.branching_factor = branching_factor
        self.max_leaf_size = max_leaf_size
        self.max_iter = max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, Y: Any = None, sample_weight: Any = None) -> HierarchicalLabelTree:
        """Build the label tree.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or None
            Sample features (CSR or dense, converted to float32). Needed for
            ``label_embedding="pifa"`` and ``"pifa+label2vec"``; may be ``None`` with
            ``"label2vec"``, precomputed embeddings or an embedding estimator.
        Y : sparse matrix, ndarray or sequence of label collections, default=None
            Labels of the samples, in any format skxmc accepts (see ``fit``). May be
            ``None`` only with precomputed embeddings (labels are then
            ``arange(n_labels)``).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights (finite, non-negative), read as repetitions: a sample of
            weight ``w`` counts as ``w`` copies of itself, 0 as no sample. PIFA sums the
            samples' features times their weights (see :func:`pifa_embeddings`); label2vec
            and embedding estimators, which have no per-sample weights, are fitted on the
            samples of positive weight; precomputed embeddings ignore it.

        Returns
        -------
        self : HierarchicalLabelTree
            Fitted tree.
        """
        _check_branching_factor(self.branching_factor)
        emb = self.label_embedding
        t0 = time.perf_counter()
        self.label_embedder_ = None
        if isinstance(emb, str):  # one of EMBEDDING_METHODS
            E, classes = self._string_embeddings(emb, X, Y, sample_weight)
        elif hasattr(emb, "fit") and not sp.issparse(emb):
            if Y is None:
                raise ValueError(
                    "Y is required when label_embedding is an estimator: it is fitted "
                    "on the label matrix."
                )
            n_samples = None if X is None else _num_samples(X)
            Y_csr, classes = encode_labels(Y, name="Y", n_samples=n_samples)
            self._check_n_labels(len(classes))
            self.label_embedder_ = clone(emb).fit(_positive_rows(Y_csr, sample_weight))
            E = getattr(self.label_embedder_, "embeddings_", None)
            if E is None:
                raise ValueError(
                    f"label_embedding estimator {type(emb).__name__} has no "
                    f"'embeddings_' attribute after fit(Y)."
                )
            E = _check_embeddings(E, "label_embedding.embeddings_")
            if E.shape[0] != len(classes):
                raise ValueError(
                    f"label_embedding estimator {type(emb).__name__} produced "
                    f"{E.shape[0]} embeddings for {len(classes)} labels."
                )
        else:
            E = _check_embeddings(emb, "label_embedding")
            if Y is None:
                classes = np.arange(E.shape[0])
            else:
                n_samples = None if X is None else _num_samples(X)
                Y_csr, classes = encode_labels(Y, name="Y", n_samples=n_samples)
                check_sample_weight(sample_weight, Y_csr.shape[0])  # checked, not used
                if len(classes) != E.shape[0]:
                    raise ValueError(
                        f"label_embedding has {E.shape[0]} rows but Y has "
                        f"{len(classes)} labels; pass one embedding per label, in the "
                        f"order of the sorted label identifiers."
                    )
            self._check_n_labels(len(classes))
        t1 = time.perf_counter()

        self.cluster_chain_, self.leaf_assignment_ = _build(
            E,
            branching_factor=self.branching_factor,
            max_leaf_size=self.max_leaf_size,
            max_iter=self.max_iter,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        self.classes_ = classes
        self.n_labels_ = len(classes)
        self.n_layers_ = len(self.cluster_chain_)
        self.depth_ = _binary_depth(self.n_labels_, self.max_leaf_size)
        progress(
            logger,
            self.verbose,
            "label tree: %d labels, %d binary levels, layers %s; embeddings %.2fs, "
            "clustering %.2fs",
            self.n_labels_,
            self.depth_,
            [C.shape[0] for C in self.cluster_chain_],
            t1 - t0,
            time.perf_counter() - t1,
        )
        return self

    def _string_embeddings(
        self, method: str, X: Any, Y: Any, sample_weight: Any = None
    ) -> tuple[sp.csr_matrix | np.ndarray, np.ndarray]:
        """Embeddings of ``label_embedding="pifa" | "label2vec" | "pifa+label2vec"``."""
        uses_pifa = method != "label2vec"
        if Y is None:
            # The wording sklearn's estimator checks look for, with the reason.
            reason = (
                "PIFA aggregates the features of each label's positive samples"
                if uses_pifa
                else "label2vec learns from the labels that occur together"
            )
            raise ValueError(
                f"HierarchicalLabelTree with label_embedding={method!r} requires y to be "
                f"passed, but the target y is None: {reason}."
            )
        if uses_pifa:
            if X is None:
                raise ValueError(
                    f"label_embedding={method!r} needs X: PIFA aggregates the features of "
                    f"each label's positive samples. Pass precomputed embeddings, or use "
                    f"label_embedding='label2vec', to build a tree without X."
                )
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float32)
            n_samples = X.shape[0]
        else:
            n_samples = None if X is None else _num_samples(X)
        Y_csr, classes = encode_labels(Y, name="Y", n_samples=n_samples)
        self._check_n_labels(len(classes))
        if method != "pifa":  # without gensim, fail before PIFA (minutes on large data)
            require("gensim", "label2vec", f"HierarchicalLabelTree(label_embedding={method!r})")
        weights = check_sample_weight(sample_weight, Y_csr.shape[0])
        E = _pifa(X, Y_csr, "l2", effective_n_jobs(self.n_jobs), weights) if uses_pifa else None
        if method == "pifa":
            return E, classes

        from skxmc.label2vec import Label2VecTransformer

        # One worker: gensim is reproducible only single-threaded, and the tree promises
        # the same result for a seed whatever n_jobs.
        self.label_embedder_ = Label2VecTransformer(
            n_jobs=1, random_state=self.random_state, verbose=self.verbose
        ).fit(_positive_rows(Y_csr, weights))
        V = self.label_embedder_.embeddings_
        if method == "label2vec":
            return V, classes
        # "pifa+label2vec": both parts have unit rows; normalising the concatenation
        # gives them equal weight (a label missing from one part keeps the other).
        if sp.issparse(E):
            E = sp.hstack([E, sp.csr_matrix(V)], format="csr", dtype=np.float32)
        else:
            E = np.hstack([E, V]).astype(np.float32, copy=False)
        return _check_embeddings(normalize(E, norm="l2", copy=False), "embeddings"), classes

    @staticmethod
    def _check_n_labels(n_labels: int) -> None:
        if n_labels == 0:
            raise ValueError("Y has no labels: a label tree needs at least one label.")

    def cluster_label_matrices(self, Y: Any) -> list[sp.csr_matrix]:
        """Cluster-level label matrices of every layer (eq. 3 of the MatchXML paper).

        ``Y_layers[-1] = Y`` and ``Y_layers[t] = binarize(Y_layers[t + 1] @
        cluster_chain_[t + 1])``: a sample is positive for a cluster when one of its
        labels is below it. In the paper's 1-based notation, ``C^(t) =
        cluster_chain_[t - 1]`` and ``Y^(t) = Y_layers[t - 1]``, so this is
        ``Y^(t) = binarize(Y^(t+1) C^(t+1))`` with ``Y^(D) = Y``.

        Parameters
        ----------
        Y : sparse matrix, ndarray or sequence of label collections
            Labels over ``classes_`` (labels not in ``classes_`` are ignored).

        Returns
        -------
        Y_layers : list of csr_matrix of float32
            ``n_layers_`` matrices aligned with ``cluster_chain_``: ``Y_layers[t]`` has
            shape ``(n_samples, cluster_chain_[t].shape[0])`` (the targets of layer
            ``t``); the last one is ``Y`` itself as CSR 0/1.
        """
        check_is_fitted(self)
        Y_t = LabelSpace(self.classes_).transform(Y, name="Y").Y
        layers = [Y_t]
        for C in self.cluster_chain_[:0:-1]:
            Y_t = sp.csr_matrix(Y_t @ C, dtype=np.float32)
            Y_t.eliminate_zeros()
            Y_t.data[:] = 1.0
            Y_t.sort_indices()
            layers.append(Y_t)
        return layers[::-1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        # Y: label collections, a 0/1 indicator, or a 1-D target (one label per sample)
        tags.target_tags.multi_output = True
        return tags
