"""XRLinearClassifier: the hierarchical linear ranker of PECOS (XR-Linear) as an estimator."""

from __future__ import annotations

import logging
import time
import warnings
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from .._base import THRESHOLD_CONSTRAINT, MultiLabelRankerMixin, check_not_raw_text
from .._compat import HasMethods, Interval, StrOptions, _fit_context, validate_data
from .._logging import progress
from .._ranking import topk_from_sparse
from .._sample_weight import check_sample_weight
from ..io import PersistenceMixin, persistent
from ..labels import LabelSpace, encode_target
from ..tree import HierarchicalLabelTree
from ._add_labels import encode_new_labels, merge_label_columns, route_new_labels
from ._beam import (
    POST_PROCESSORS,
    ChunkedWeights,
    beam_search,
    keep_topk,
)
from ._explain import LabelExplanation, check_explain_args, explain_rows
from ._model_state import _check_model_state, _chunked_from_layout, _is_block_layout, _layout_arrays
from ._problem import LayerGroups, row_squared_norms, solver_view
from ._select import selected_search
from ._solver import fit_layer

logger = logging.getLogger(__name__)

__all__ = ["XRLinearClassifier"]


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


def _as_sorted_csr(X: Any) -> sp.csr_matrix:
    """Canonical CSR float32 (sorted indices, no duplicate entries), copying only when the
    input is not already so.

    The solver and the beam search run about twice as fast on sorted indices, and
    ``TfidfVectorizer`` emits unsorted ones. Duplicate entries would give wrong row norms
    in the solver (it sums the squares of the stored entries), hence a different model.
    The caller's matrix is never modified.
    """
    X = sp.csr_matrix(X, dtype=np.float32) if not sp.isspmatrix_csr(X) else X
    if X.dtype != np.float32:
        X = X.astype(np.float32)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # also sorts the indices
    return X


# Median row norms of X outside this range make ``weight_threshold`` (and the
# regularisation) act on another scale than the L2-normalised rows it is meant for; on the
# demo data P@1 drops by 12-15% at its ends (TF-IDF x 0.5 or x 10), to 0 at TF-IDF x 100.
_ROW_NORM_RANGE = (0.5, 5.0)
# A layer in which more than this share of the nodes with positives keeps no feature weight
# is (nearly) empty: its nodes score every sample alike.
_EMPTY_NODE_SHARE = 0.5
_MAX_BIAS = 1e3


class _SearchCache(NamedTuple):
    """What a beam search reads, derived from ``tree_`` / ``weights_`` and kept with the
    ``classes_`` of the same fit, so that a predict never mixes two fits."""

    parents: list
    chunks: list
    classes: np.ndarray


def _search_structures(tree: HierarchicalLabelTree, weights: list, classes: Any) -> _SearchCache:
    """Parent maps and parent-grouped weights of the beam search."""
    parents = []
    for C in tree.cluster_chain_:
        P = C.T.tocsr()
        P.sort_indices()
        parents.append(P)
    chunks = [ChunkedWeights(W, P) for W, P in zip(weights, parents)]
    return _SearchCache(parents, chunks, classes)


def _empty_node_share(W: sp.csc_matrix, Y_t: sp.csr_matrix) -> float:
    """Share of the nodes with at least one positive whose feature weights were all pruned
    (the bias row ``W[-1]`` does not count: a bias alone ranks every sample alike)."""
    has_positive = Y_t.getnnz(axis=0) > 0
    if not has_positive.any():
        return 0.0
    nnz_per_node = np.diff(W.indptr)
    node_of_entry = np.repeat(np.arange(W.shape[1]), nnz_per_node)
    bias_entries = np.bincount(node_of_entry[W.indices == W.shape[0] - 1], minlength=W.shape[1])
    feature_weights = nnz_per_node - bias_entries
    return float(np.mean(feature_weights[has_positive] == 0))


def _row_norm_summary(sqnorms: np.ndarray) -> tuple[float, float, str]:
    """Median and maximum L2 norm of the non-empty rows, and a phrase for messages."""
    norms = np.sqrt(sqnorms[sqnorms > 0])
    if norms.size == 0:
        return 0.0, 0.0, "every row of X is empty"
    median, largest = float(np.median(norms)), float(norms.max())
    return median, largest, f"the rows of X have L2 norms of median {median:.3g}, max {largest:.3g}"


# Rows per local beam search: the candidate arrays of a search grow with its rows (about 40
# bytes per candidate: a beam entry's child), so a prediction on any number of rows is
# searched in blocks of at most _PREDICT_BLOCK_CANDIDATES candidates (about 80 MB of
# temporaries), and of at most _PREDICT_BLOCK_ROWS rows; the output stays top_k per row.
_PREDICT_BLOCK_ROWS = 65536
_PREDICT_BLOCK_CANDIDATES = 1 << 21


def _block_rows(parents: list, beam_size: int) -> int:
    """Rows per search block: the widest layer expansion stays within the candidate
    budget (at least one row)."""
    widest = max((int(np.diff(P.indptr).max(initial=1)) for P in parents), default=1)
    return max(1, min(_PREDICT_BLOCK_ROWS, _PREDICT_BLOCK_CANDIDATES // (beam_size * widest)))


def _blockwise(X: sp.csr_matrix, search: Any, rows: int) -> sp.csr_matrix:
    """``search(X)`` computed on blocks of ``rows`` rows and stacked (the search treats
    rows independently, so the result is the same)."""
    n = X.shape[0]
    if n <= rows:
        return search(X)
    return sp.vstack([search(X[lo : lo + rows]) for lo in range(0, n, rows)], format="csr")


# Label drift (share of the labels added since the last full fit) above which a full fit
# is due; see the XR-Linear page of the docs for the measurement behind it.
_REFIT_DRIFT = 0.1
# add_labels: a new label's negatives are the rows whose best _NEGATIVE_CLUSTERS leaf
# clusters hold it, and it is placed by the top _ROUTING_CLUSTERS clusters of its rows'
# beams. Chosen on tibkat_gnd_en's dev split (seed 0, 5% of the labels added): 1 / 3 / 10
# negative clusters gave recall@5 of the new labels 38.8 / 34.1 (2) / 28.4.
_NEGATIVE_CLUSTERS = 1
_ROUTING_CLUSTERS = 10
# add_labels trains the new labels with a positive cost of Cp times this: the leaf
# cluster's node was not trained on their rows, so their path scores start from a lower
# cluster score than an old label's; a larger own score makes up for it. Chosen on the
# same dev split (seed 0, 5%): Cp x 2 raised their recall@5 from 38.8 to 43.7 with the
# overall P@5 unchanged (21.11 vs 21.15).
_NEW_LABEL_CP = 2.0


def _pad_columns(M: sp.csr_matrix, n_columns: int) -> sp.csr_matrix:
    """``M`` with ``n_columns`` columns (a beam search's output has the layer's width)."""
    M = sp.csr_matrix(M)
    if M.shape[1] == n_columns:
        return M
    return sp.csr_matrix((M.data, M.indices, M.indptr), shape=(M.shape[0], n_columns))


def _cluster_session(label: str) -> Any:
    """A :class:`~skxmc.linear._distributed.ClusterSession` on the client of an active
    ``joblib.parallel_config(backend="dask")`` context, else None (dask stays unimported)."""
    from ._distributed import ClusterSession, active_client

    client = active_client()
    return None if client is None else ClusterSession(client, label)


# What compact() drops: (name, what it is and what needs it), for the docs and the error a
# predict-only model raises when one of them is asked for.
_TRAINING_ONLY = {
    "weights_": "the node weight matrices (the beam search reads the same weights from its "
    "own layout); explain, to_pecos and inspecting the node models need them",
    "fit_time_per_layer_": "training diagnostics",
    "fit_bytes_per_layer_": "training diagnostics",
}


def _check_negatives(negatives: Any, Y: sp.csr_matrix, classes: np.ndarray) -> sp.csr_matrix | None:
    """``fit``'s ``negatives`` as a CSR 0/1 matrix over ``classes`` without the entries
    that are positives of ``Y`` (a positive stays a positive); None for None."""
    if negatives is None:
        return None
    n_samples, n_labels = Y.shape
    is_matrix = sp.issparse(negatives) or (
        isinstance(negatives, np.ndarray) and negatives.ndim == 2 and negatives.dtype.kind in "biuf"
    )
    if is_matrix and negatives.shape != (n_samples, n_labels):
        raise ValueError(
            f"negatives must have shape (n_samples, n_labels) = {(n_samples, n_labels)} "
            f"(columns: classes_), got {negatives.shape}."
        )
    encoded = LabelSpace(classes).transform(negatives, name="negatives", n_samples=n_samples)
    unknown = np.flatnonzero(encoded.n_unknown)
    if unknown.size:
        raise ValueError(
            f"negatives holds {int(encoded.n_unknown.sum())} label(s) that are not in "
            f"classes_ (first in row {int(unknown[0])}); user negatives must be labels of "
            f"Y (or of the classes parameter), as the tree has no node for others."
        )
    N = encoded.Y
    N = sp.csr_matrix(N - N.multiply(Y > 0), dtype=np.float32)
    N.eliminate_zeros()
    N.sort_indices()
    return N


@persistent
class XRLinearClassifier(MultiLabelRankerMixin, PersistenceMixin, ClassifierMixin, BaseEstimator):
    """Hierarchical linear ranker for extreme multi-label classification (XR-Linear).

    A label tree (:class:`~skxmc.HierarchicalLabelTree`, PIFA embeddings by default)
    splits the labels into clusters, layer by layer. Each tree node gets a binary linear
    model trained only on the candidate rows of its parent: the parent's positive
    instances (teacher-forcing negatives, ``"tfn"``) and, with ``"tfn+man"``, the instances
    whose beam at the previous layer reached the parent (matcher-aware negatives). The
    binary problems are L2-regularised squared-hinge (or logistic) SVMs solved by dual
    coordinate descent in compiled code, so training costs grow with cluster sizes, never
    with ``n_samples x n_labels``. Prediction is a beam search from the root.

    Parameters
    ----------
    tree : HierarchicalLabelTree or None, default=None
        Label tree template (cloned and fitted on ``(X, Y)`` in ``fit``). ``None`` uses
        ``HierarchicalLabelTree(label_embedding="pifa")`` with this estimator's
        ``random_state`` and ``n_jobs``.
    negative_sampling : {"tfn", "tfn+man"}, default="tfn"
        Negatives of each node: instances of its parent cluster (teacher forcing), plus
        with ``"tfn+man"`` the instances whose previous-layer beam hit the parent.
    loss : {"squared_hinge", "logistic"}, default="squared_hinge"
        Loss of the binary problems.
    Cp, Cn : float, default=1.0
        Costs of positive / negative instances.
    tol : float, default=0.1
        Stopping tolerance of the dual coordinate descent (liblinear's ``eps``).
    max_iter : int, default=100
        Maximum passes over the data of each binary problem.
    bias : float, default=1.0
        Value of the bias feature appended to every sample (0 disables it), at most 1000.
        Like the features it should be of order 1: a large bias takes over the model and,
        from about 100 on, gets every feature weight pruned.
    weight_threshold : float, default=0.1
        Weights with an absolute value below this are dropped after training (model
        size and prediction speed; PECOS's default). The default assumes L2-normalised
        rows of ``X`` (as ``TfidfVectorizer`` gives by default): weights scale as one over
        the feature values, so on raw counts or scaled TF-IDF most or all of them fall
        below it and the model ranks poorly or not at all. ``fit`` warns when the median
        row norm of ``X`` is far from 1, and when a layer keeps no feature weight for most
        of its nodes.
    relevance_weighted : bool, default=False
        Weight the positives of inner-layer nodes by relevance: the cost of a positive
        sample is ``Cp`` times the number of its labels under the node, divided by its
        largest such count (MatchXML's ranker setting).
    beam_size : int, default=10
        Clusters kept per sample at every inner layer of the beam search.
    top_k : int, default=10
        Labels returned per sample by ``predict`` and ``predict_topk``. Values above the
        number of labels are clipped with a warning.
    {ranker_output_params}
    post_processor : {"l3-hinge", "sigmoid", "noop"}, default="l3-hinge"
        How a node's score combines with its parent's: ``exp(-max(1 - v, 0) ** 3)`` or a
        sigmoid multiplied along the path, or the raw score of the last layer.
    n_jobs : int or None, default=None
        Threads for tree building, training and prediction (joblib semantics; 0 is
        invalid). Inside ``joblib.parallel_config(backend="dask")`` the node problems of
        every layer, the matcher-aware beam searches of ``fit`` and the beam searches of
        prediction run on the workers of that context's ``distributed.Client`` instead
        (one task per worker thread and more; the tree is still built here); the model
        is the same as a local fit's. See the scaling page of the docs.
    random_state : int, RandomState instance or None, default=0
        Seeds the tree and the coordinate-descent orders. The default makes two fits on
        the same data give the same model (PECOS's behaviour); None draws a new seed from
        numpy's global random state at every fit.
    verbose : int, default=0
        Print one line per layer when > 0 (also logged at DEBUG level to this module's
        logger).

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Label identifiers; column ``j`` of every output matrix is ``classes_[j]``.
    target_type_ : str
        The kind of ``Y`` seen in ``fit`` (``"multiclass"``, ``"multilabel-indicator"``,
        ``"multilabel-sparse"`` or ``"multilabel-sequences"``); outputs follow it.
    tree_ : HierarchicalLabelTree
        The fitted label tree.
    weights_ : list of csc_matrix
        ``weights_[t]`` has shape ``(n_features_in_ + 1, K_t)``: the linear models of the
        nodes of layer ``t`` (last row: bias weights); the last layer holds the labels.
    n_features_in_ : int
        Number of features seen in ``fit``.
    fit_time_per_layer_ : list of float
        Seconds spent training each layer.
    fit_bytes_per_layer_ : list of dict or None
        After a fit on a Dask cluster, per layer, the bytes sent to the workers
        (``"broadcast"``: data copied to every worker, counted once per worker;
        ``"to_workers"``: task arguments) and received from them (``"from_workers"``);
        None after a local fit.
    predict_only_ : bool
        True after :meth:`compact` (or in a model saved with
        ``skxmc.save(..., predict_only=True)``): ``weights_``, ``fit_time_per_layer_``,
        ``fit_bytes_per_layer_`` and ``tree_.label_embedder_`` are gone.
    n_labels_added_ : int
        Labels added by :meth:`add_labels` since the last ``fit`` (0 after ``fit``).
    label_drift_ : float
        ``n_labels_added_ / len(classes_)``: the share of the labels that the label tree
        was not built on. A full ``fit`` is due above about 0.1 (see :meth:`add_labels`).

    See Also
    --------
    HierarchicalLabelTree : the label tree.
    skxmc.metrics.make_topk_scorer : P@k / nDCG@k scorers for ``GridSearchCV``.

    Examples
    --------
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc import XRLinearClassifier, as_label_sets
    >>> from skxmc.pipeline import make_pipeline
    >>> texts = ["cheap flights to rome", "rome hotel deals", "python sparse matrix",
    ...          "numpy matrix product", "hotel in paris", "flights to paris"]
    >>> labels = as_label_sets([["travel", "italy"], ["travel", "italy"], ["programming"],
    ...                         ["programming"], ["travel", "france"], ["travel", "france"]])
    >>> clf = make_pipeline(TfidfVectorizer(), XRLinearClassifier(top_k=2))
    >>> clf = clf.fit(texts, labels)
    >>> labels, scores = clf.predict_topk(["flights to rome"])
    >>> labels.tolist()
    [['travel', 'italy']]

    A dense 0/1 indicator (columns: travel, italy, programming, france) gets sklearn's
    rule, ``predict_proba >= 0.5`` (``threshold="auto"``); ``threshold=None`` gives each
    row its ``top_k`` best labels instead:

    >>> import numpy as np
    >>> Y = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0],
    ...               [1, 0, 0, 1], [1, 0, 0, 1]])
    >>> clf = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, Y)
    >>> clf.predict(["flights to rome", "sparse matrix"])
    array([[1, 1, 0, 0],
           [0, 0, 1, 0]])

    With one label per sample it is a multi-class classifier:

    >>> y = ["travel", "travel", "programming", "programming", "travel", "travel"]
    >>> make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, y).predict(
    ...     ["numpy sparse matrix"]).tolist()
    ['programming']
    """

    _parameter_constraints: dict = {
        "tree": [HasMethods(["fit"]), None],
        "negative_sampling": [StrOptions({"tfn", "tfn+man"})],
        "loss": [StrOptions({"squared_hinge", "logistic"})],
        "Cp": [Interval(Real, 0, None, closed="neither")],
        "Cn": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        # From ~100 on the bias feature swamps unit-norm rows (bias**2 >> |x|**2) and every
        # feature weight is pruned (fit warns); above 1e3 it nears float32's precision, and
        # 1e39 is not even a float32.
        "bias": [Interval(Real, 0, _MAX_BIAS, closed="both")],
        "weight_threshold": [Interval(Real, 0, None, closed="left")],
        "relevance_weighted": ["boolean"],
        "beam_size": [Interval(Integral, 1, None, closed="left")],
        "top_k": [Interval(Integral, 1, None, closed="left")],
        "threshold": THRESHOLD_CONSTRAINT,
        "classes": ["array-like", None],
        "sparse_output": ["boolean"],
        "post_processor": [StrOptions(set(POST_PROCESSORS))],
        "n_jobs": [
            Interval(Integral, None, -1, closed="right"),
            Interval(Integral, 1, None, closed="left"),
            None,
        ],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        tree: HierarchicalLabelTree | None = None,
        negative_sampling: str = "tfn",
        loss: str = "squared_hinge",
        Cp: float = 1.0,
        Cn: float = 1.0,
        tol: float = 0.1,
        max_iter: int = 100,
        bias: float = 1.0,
        weight_threshold: float = 0.1,
        relevance_weighted: bool = False,
        beam_size: int = 10,
        top_k: int = 10,
        threshold: Any = "auto",
        classes: Any = None,
        sparse_output: bool = False,
        post_processor: str = "l3-hinge",
        n_jobs: int | None = None,
        random_state: Any = 0,
        verbose: int = 0,
    ) -> None:
        self.tree = tree
        self.negative_sampling = negative_sampling
        self.loss = loss
        self.Cp = Cp
        self.Cn = Cn
        self.tol = tol
        self.max_iter = max_iter
        self.bias = bias
        self.weight_threshold = weight_threshold
        self.relevance_weighted = relevance_weighted
        self.beam_size = beam_size
        self.top_k = top_k
        self.threshold = threshold
        self.classes = classes
        self.sparse_output = sparse_output
        self.post_processor = post_processor
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(
        self, X: Any, Y: Any, sample_weight: Any = None, negatives: Any = None
    ) -> XRLinearClassifier:
        """Build the label tree and train the node models layer by layer.

        The fitted attributes are set together once training has finished: a fit that
        does not finish (an exception, or Ctrl-C) leaves the estimator as it was, unfitted
        or with its previous model, and a ``predict`` running meanwhile in another thread
        uses the previous model.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Features (e.g. TF-IDF), converted to CSR float32. Rows should be L2-normalised,
            as ``TfidfVectorizer`` does by default (``norm="l2"``): ``weight_threshold``
            and the regularisation assume unit-norm rows, and a warning is issued when the
            median row norm is far from 1.
        Y : sparse matrix, ndarray or sequence of label collections
            Labels: a 0/1 indicator ``(n_samples, n_labels)``, one collection of labels
            per sample (samples without labels are allowed; see
            :func:`skxmc.as_label_sets`), or a 1-D target with one label per sample.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights, finite and non-negative (None: all 1). A sample of weight
            ``w`` counts as ``w`` copies of itself, 0 as no sample at all:

            - in every node problem the sample takes part in, its cost (``Cp`` or ``Cn``,
              times the relevance with ``relevance_weighted``) is multiplied by ``w``, as
              liblinear's instance weights do, and samples of weight 0 are left out;
            - the default tree's PIFA label embeddings sum the samples' features times
              their weights (a custom ``tree`` gets ``sample_weight`` in its ``fit``).

            An integer weight therefore gives the model of the data with the sample
            repeated that many times, up to the solver's tolerance ``tol``. ``classes_``
            still comes from every sample of ``Y``, weight 0 or not. Through sklearn's
            metadata routing (``sklearn.set_config(enable_metadata_routing=True)``),
            request it with ``set_fit_request(sample_weight=True)``.
        negatives : sparse matrix, ndarray or sequence of label collections, default=None
            User-supplied hard negatives per sample, as PECOS's user-supplied matching
            chains: a 0/1 matrix of shape ``(n_samples, n_labels)`` over ``classes_``, or
            one collection of labels per sample. At every layer below the root a sample
            joins the training rows of the clusters whose children hold one of its
            negative labels, so it is a negative of those children (down to the negative
            label itself and its leaf siblings), in addition to ``negative_sampling``'s
            negatives. Labels outside ``classes_`` raise ``ValueError``; a negative that
            is also a positive of its sample is ignored (a positive stays a positive), so
            the top-k predictions of an earlier model can be passed as they are. ``None``
            (the default) trains exactly as without it. Through metadata routing,
            request it with ``set_fit_request(negatives=True)``.

        Returns
        -------
        self : XRLinearClassifier

        Examples
        --------
        Weight 0 drops a sample, weight 2 counts it twice:

        >>> import numpy as np
        >>> from sklearn.preprocessing import normalize
        >>> from skxmc import XRLinearClassifier
        >>> X = normalize(np.array([[1.0, 0.1], [0.9, 0.3], [0.1, 1.0], [0.2, 0.8]]))
        >>> y = ["a", "a", "b", "b"]
        >>> clf = XRLinearClassifier(top_k=1).fit(X, y, sample_weight=[1, 2, 0, 1])
        >>> clf.predict([[1.0, 0.2], [0.1, 0.9]]).tolist()
        ['a', 'b']
        """
        X, Y, classes, target_type, twin = self._validate_fit_input(X, Y)
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        negatives = _check_negatives(negatives, Y, classes)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        sqnorms = row_squared_norms(X)
        norms = self._check_row_norms(sqnorms)
        tree = self._fit_tree(X, Y, seed, sample_weight)
        if self.relevance_weighted:
            targets = _relevance_targets(Y, tree.cluster_chain_)
        else:
            targets = tree.cluster_label_matrices(Y)
        extra_rows = None if negatives is None else tree.cluster_label_matrices(negatives)
        weights, fit_times, bytes_per_layer = self._train_layers(
            X, sqnorms, tree, targets, classes, seed, norms, sample_weight, extra_rows
        )
        self._publish(twin, classes, target_type, tree, weights, fit_times, bytes_per_layer)
        return self

    def _publish(
        self,
        twin: XRLinearClassifier,
        classes: np.ndarray,
        target_type: str,
        tree: HierarchicalLabelTree,
        weights: list[sp.csc_matrix],
        fit_times: list[float],
        bytes_per_layer: Any,
    ) -> None:
        """Set the fitted attributes, all at once: one dict update (atomic under the GIL),
        so a concurrent predict sees the old model or the new one, and a fit interrupted
        before it has changed nothing."""
        fitted = {
            "n_features_in_": twin.n_features_in_,
            "classes_": classes,
            "target_type_": target_type,
            "tree_": tree,
            "weights_": weights,
            "fit_time_per_layer_": fit_times,
            "fit_bytes_per_layer_": bytes_per_layer,
            "predict_only_": False,
            "n_labels_added_": 0,
            "label_drift_": 0.0,
            "_search_cache": _search_structures(tree, weights, classes),
        }
        if hasattr(twin, "feature_names_in_"):
            fitted["feature_names_in_"] = twin.feature_names_in_
        self.__dict__.update(fitted)
        if "feature_names_in_" not in fitted:
            self.__dict__.pop("feature_names_in_", None)  # stale names of a previous fit

    def _validate_fit_input(self, X: Any, Y: Any) -> tuple:
        """``(X, Y, classes, target_type, twin)``: X as sorted CSR float32, Y as a label
        indicator CSR matrix with its classes and target type, and the twin estimator
        that holds ``n_features_in_`` / ``feature_names_in_`` until the model is complete
        (``validate_data(reset=True)`` sets them on the estimator it is given)."""
        check_not_raw_text(X, type(self).__name__)
        twin = type(self)(**self.get_params(deep=False))
        X = validate_data(twin, X, accept_sparse="csr", dtype=np.float32, reset=True)
        X = _as_sorted_csr(X)
        Y_csr, classes, target_type = encode_target(
            Y, classes=self.classes, name="Y", n_samples=X.shape[0]
        )
        if Y_csr.shape[1] == 0:
            raise ValueError("Y has no labels at all; XRLinearClassifier needs at least one.")
        return X, Y_csr, classes, target_type, twin

    def _check_row_norms(self, sqnorms: np.ndarray) -> tuple[float, str]:
        """Warn when the rows of X are far from L2-normalised; their median norm and a
        phrase describing them, for later messages."""
        median_norm, _, norm_phrase = _row_norm_summary(sqnorms)
        if median_norm > 0 and not _ROW_NORM_RANGE[0] <= median_norm <= _ROW_NORM_RANGE[1]:
            warnings.warn(
                f"XRLinearClassifier expects L2-normalised rows of X, but {norm_phrase}. "
                f"weight_threshold={self.weight_threshold!r} and the regularisation assume "
                f"unit-norm rows, so the model may be much worse or empty: L2-normalise the "
                f"rows (TfidfVectorizer(norm='l2'), the default, or "
                f"sklearn.preprocessing.normalize(X)).",
                UserWarning,
                stacklevel=4,
            )
        return median_norm, norm_phrase

    def _fit_tree(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, seed: int, sample_weight: np.ndarray | None
    ) -> HierarchicalLabelTree:
        """The label tree: a clone of ``tree`` (or the default tree), fitted on X, Y (and
        the sample weights, when given)."""
        t0 = time.perf_counter()
        tree = (
            HierarchicalLabelTree(random_state=seed, n_jobs=self.n_jobs)
            if self.tree is None
            else clone(self.tree)
        )
        if sample_weight is None:
            tree = tree.fit(X, Y)
        elif has_fit_parameter(tree, "sample_weight"):
            tree = tree.fit(X, Y, sample_weight=sample_weight)
        else:
            raise ValueError(
                f"sample_weight was given, but tree={type(tree).__name__} does not accept "
                f"sample_weight in fit, so its clusters would ignore the weights. Use a "
                f"HierarchicalLabelTree (its PIFA embeddings take the weights), or a tree "
                f"whose fit takes sample_weight."
            )
        progress(
            logger,
            self.verbose,
            "label tree: %d layers %s in %.2f s",
            tree.n_layers_,
            [C.shape[0] for C in tree.cluster_chain_],
            time.perf_counter() - t0,
        )
        return tree

    def _train_layers(
        self,
        X: sp.csr_matrix,
        sqnorms: np.ndarray,
        tree: HierarchicalLabelTree,
        targets: list[sp.csr_matrix],
        classes: np.ndarray,
        seed: int,
        norms: tuple[float, str],
        sample_weight: np.ndarray | None = None,
        extra_rows: list[sp.csr_matrix] | None = None,
    ) -> tuple[list[sp.csc_matrix], list[float], Any]:
        """Train the node models layer by layer, top down: ``(weights, seconds per layer,
        bytes per layer on a cluster or None)``; every node problem weighs its rows by
        ``sample_weight`` (None: unweighted). Inside ``joblib.parallel_config(
        backend="dask")`` the layers' node problems and the matcher's searches run on the
        cluster (:mod:`skxmc.linear._distributed`), with the same model. ``extra_rows``
        (the user negatives' clusters per layer, as ``tree.cluster_label_matrices`` gives
        them) adds each row, at layer ``t``, to the groups of its layer ``t - 1`` clusters."""
        weights: list[sp.csc_matrix] = []
        fit_times: list[float] = []
        empty_layers: list[str] = []
        cache = None
        cluster = _cluster_session("XRLinearClassifier.fit")
        bytes_per_layer = None if cluster is None else cluster.bytes_per_layer
        try:
            if cluster is not None:
                cluster.share_x(X, sqnorms)
                view = None
            else:
                view = solver_view(X, sqnorms)
            for t, (C, Y_t) in enumerate(zip(tree.cluster_chain_, targets)):
                t_layer = time.perf_counter()
                matcher = self._layer_matcher(X, t, cache, cluster)
                if extra_rows is not None and t > 0:
                    # user negatives: the row joins the parents of its negatives' nodes
                    extra = extra_rows[t - 1]
                    matcher = extra if matcher is None else matcher + extra
                groups = LayerGroups.from_matrices(Y_t, C, matcher)
                W = self._fit_layer(X, Y_t, groups, seed + t, sqnorms, cluster, view, sample_weight)
                weights.append(W)
                share = _empty_node_share(W, Y_t)
                if share > _EMPTY_NODE_SHARE:
                    empty_layers.append(f"layer {t + 1} ({share:.0%} of {W.shape[1]} nodes)")
                if self.negative_sampling == "tfn+man" and t + 1 < len(targets):
                    # the next layer's matcher searches the layers trained so far
                    cache = _search_structures(tree, weights, classes)
                    if cluster is not None:
                        cluster.add_search_layer(cache.chunks[t], cache.parents[t])
                fit_times.append(time.perf_counter() - t_layer)
                self._report_layer(t, len(targets), C.shape[0], W.nnz, fit_times[-1], cluster)
        finally:
            if cluster is not None:
                cluster.close()
        self._check_kept_weights(weights, empty_layers, norms)
        return weights, fit_times, bytes_per_layer

    def _layer_matcher(self, X: sp.csr_matrix, t: int, cache: Any, cluster: Any) -> Any:
        """The rows each parent node of layer ``t`` trains on besides its positives:
        every row under the root (layer 0), the beam of the layers above with matcher-aware
        negatives (``"tfn+man"``), else none (teacher forcing only)."""
        if t == 0:
            # Under the root every instance is a candidate of every first-layer node.
            return sp.csr_matrix(np.ones((X.shape[0], 1), dtype=np.float32))
        if self.negative_sampling == "tfn+man":
            return self._search(X, top_k=self.beam_size, n_layers=t, cache=cache, cluster=cluster)
        return None

    def _fit_layer(
        self,
        X: sp.csr_matrix,
        Y_t: sp.csr_matrix,
        groups: LayerGroups,
        random_state: int,
        sqnorms: np.ndarray,
        cluster: Any,
        view: tuple | None,
        sample_weight: np.ndarray | None = None,
        Cp: float | None = None,
    ) -> sp.csc_matrix:
        """One layer's node models with this estimator's solver settings (``Cp``: the
        positive cost, ``self.Cp`` when None)."""
        return fit_layer(
            X,
            Y_t,
            groups,
            loss=self.loss,
            Cp=self.Cp if Cp is None else Cp,
            Cn=self.Cn,
            tol=self.tol,
            max_iter=self.max_iter,
            bias=self.bias,
            weight_threshold=self.weight_threshold,
            use_relevance=self.relevance_weighted,
            random_state=random_state,
            n_jobs=int(effective_n_jobs(self.n_jobs)),
            row_sqnorms=sqnorms,
            sample_weight=sample_weight,
            _executor=cluster,
            _view=view,
        )

    def _report_layer(
        self, t: int, n_layers: int, n_nodes: int, nnz: int, seconds: float, cluster: Any
    ) -> None:
        """Progress lines of a trained layer (``verbose``)."""
        progress(
            logger,
            self.verbose,
            "layer %d/%d: %d nodes, %d weights, %.2f s",
            t + 1,
            n_layers,
            n_nodes,
            nnz,
            seconds,
        )
        if cluster is not None:
            sent = cluster.end_layer()
            progress(
                logger,
                self.verbose,
                "layer %d/%d on the cluster: %d bytes broadcast, %d sent, %d received",
                t + 1,
                n_layers,
                sent["broadcast"],
                sent["to_workers"],
                sent["from_workers"],
            )

    def _check_kept_weights(
        self, weights: list[sp.csc_matrix], empty_layers: list[str], norms: tuple[float, str]
    ) -> None:
        """Raise when no layer kept a single feature weight and the rows of X are not
        L2-normalised: the model would rank every sample alike, and the fix is the input.
        Warn when most nodes of some layers kept none (e.g. a ``weight_threshold`` the
        user chose high on purpose)."""
        median_norm, norm_phrase = norms
        unnormalised = not _ROW_NORM_RANGE[0] <= median_norm <= _ROW_NORM_RANGE[1]
        if median_norm > 0 and unnormalised and not any(W[:-1].nnz for W in weights):
            raise ValueError(
                f"XRLinearClassifier kept no feature weight in any layer: {norm_phrase}, "
                f"but weight_threshold={self.weight_threshold!r} and the regularisation "
                f"assume L2-normalised rows, so every weight was pruned and the model would "
                f"rank every sample alike. L2-normalise the rows of X: "
                f"TfidfVectorizer(norm='l2') (the default) or "
                f"sklearn.preprocessing.normalize(X). To train on these rows as they are, "
                f"lower weight_threshold explicitly (e.g. weight_threshold=0)."
            )
        if empty_layers:
            warnings.warn(
                f"XRLinearClassifier kept no feature weight for most nodes of "
                f"{', '.join(empty_layers)}: every weight below weight_threshold="
                f"{self.weight_threshold!r} was pruned, so these nodes score all samples "
                f"alike and the model ranks poorly. weight_threshold assumes L2-normalised "
                f"rows of X (TF-IDF rows should be L2-normalised, as "
                f"TfidfVectorizer(norm='l2') does) and a bias of order 1; here "
                f"{norm_phrase} and bias={self.bias!r}. Normalise X, or lower "
                f"weight_threshold.",
                UserWarning,
                stacklevel=5,
            )

    # ----------------------------------------------------------- add labels

    @_fit_context(prefer_skip_nested_validation=True)
    def add_labels(
        self, X: Any, Y: Any, *, classes: Any = None, sample_weight: Any = None
    ) -> XRLinearClassifier:
        """Add new labels to the fitted model without a full refit.

        Each new label joins the leaf cluster that the model's beam reaches most
        strongly for the rows of ``X`` that carry it (the sum of their leaf-cluster path
        scores, the rows of weight 0 left out), and only the new labels' own rankers
        are trained, with the layer solver of ``fit``, on the rows of that cluster's
        group: the rows that carry a new label of the cluster (positives of their
        label) and the rows whose best leaf cluster (the top of their beam) it is, the
        counterpart of the rows positive for the cluster that teacher forcing trains a
        label on (wider negatives score new labels below old ones, which were trained
        against the cluster's rows only), with twice the positive cost ``Cp`` (their
        cluster's node was not trained on their rows, so their path scores start lower
        than an old label's). No existing node is retrained: the inner
        nodes already lead the label's rows to its cluster, and the old labels' scores
        stay bit-identical, so the top-k of a row changes only where a new label enters
        it. ``classes_`` grows
        (kept sorted when it was; a user-given order gets the new labels at the end),
        and ``tree_``, ``weights_`` and the beam search are updated together, at the end
        (a concurrent predict sees the old model or the new one).

        The tree was built on the labels of the last ``fit``; ``label_drift_``, the share
        of today's labels added since then, says how far it has drifted. Above about
        10% a full ``fit`` on all labels is due (see the XR-Linear page of
        the docs: measured on tibkat_gnd_en). A saved model is updated with
        ``model = skxmc.load(path); model.add_labels(X, Y);
        skxmc.save(model, path, overwrite=True)`` (the save replaces the folder
        atomically).

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Training rows with ``n_features_in_`` features, transformed as for ``fit``
            (the original training rows, new rows, or both). Rows without a new label
            are negatives of the new labels whose cluster their beam reaches.
        Y : sparse matrix, ndarray or sequence of label collections
            The rows' labels among the new classes only (a label of ``classes_`` raises):
            one collection per row (may be empty), or a 0/1 indicator
            ``(n_samples, n_new)`` whose columns ``classes`` names. Every new label needs
            at least one positive row.
        classes : array-like of shape (n_new,), default=None
            Names of the columns of an indicator ``Y``. None: the integers that follow
            ``max(classes_)`` (integer classes only). Not used with label collections.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-row weights, as in ``fit``.

        Returns
        -------
        self : XRLinearClassifier
            With the new labels in ``classes_``, ``n_labels_added_`` and ``label_drift_``
            updated.

        Examples
        --------
        >>> import numpy as np
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.datasets import make_xmc_classification
        >>> X, Y = make_xmc_classification(300, 200, 20, random_state=0)
        >>> clf = XRLinearClassifier(top_k=5).fit(X, Y[:, :18])  # labels 18, 19 held out
        >>> old_top = clf.predict_topk(X[:3])
        >>> clf = clf.add_labels(X, Y[:, 18:])  # indicator: its columns become 18 and 19
        >>> clf.classes_[-3:].tolist(), clf.n_labels_added_, round(clf.label_drift_, 2)
        ([17, 18, 19], 2, 0.1)
        >>> scores = clf.predict_topk(X[:3], labels=range(18))[1]
        >>> bool(np.array_equal(scores, old_top[1]))  # old labels score as before
        True
        """
        t0 = time.perf_counter()
        check_is_fitted(self)
        if vars(self).get("predict_only_", False):
            raise ValueError(
                "add_labels needs the node weights (weights_), which this predict-only "
                "model no longer holds (made by compact() or saved with "
                "skxmc.save(..., predict_only=True)); add labels to the full model."
            )
        self._check_complete()
        check_not_raw_text(X, type(self).__name__)
        X = self._validate_X(X)
        n = X.shape[0]
        Y_new, new_classes = encode_new_labels(Y, classes, self.classes_, n)
        sample_weight = check_sample_weight(sample_weight, n)
        tree, weights, cache = self.tree_, self.weights_, self._search_cache
        chain = tree.cluster_chain_
        n_leaves = chain[-1].shape[1]
        if len(chain) == 1:
            # one leaf: every row is a candidate of the root, as in fit's first layer
            beam = negatives = sp.csr_matrix(np.ones((n, 1), dtype=np.float32))
        else:
            # the leaf clusters of each row's beam; "noop" path scores are raw and may be
            # negative: route on [0, 1] scores
            beam = self._proba_of(self._search(X, top_k=None, n_layers=len(chain) - 1))
            negatives = _pad_columns(keep_topk(beam, _NEGATIVE_CLUSTERS), n_leaves)
        Y_vote = Y_new
        if sample_weight is not None:
            Y_vote = sp.csr_matrix(Y_new.multiply(sample_weight[:, None]))
        routing = keep_topk(beam, _ROUTING_CLUSTERS) if len(chain) > 1 else beam
        leaf = route_new_labels(Y_vote, routing, np.asarray(chain[-1].sum(axis=0)).ravel())
        C_new = sp.csr_matrix(
            (np.ones(len(leaf), np.float32), leaf.astype(np.int32), np.arange(len(leaf) + 1)),
            shape=(len(leaf), n_leaves),
        )
        groups = LayerGroups.from_matrices(Y_new, C_new, negatives)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        W_new = self._fit_layer(
            X,
            Y_new,
            groups,
            seed + len(chain) + len(self.classes_),
            row_squared_norms(X),
            None,
            None,
            sample_weight,
            Cp=self.Cp * _NEW_LABEL_CP,
        )
        merged, order = merge_label_columns(self.classes_, new_classes)
        W_last = sp.csc_matrix(sp.hstack([weights[-1], W_new], format="csc")[:, order])
        W_last.sort_indices()
        C_last = sp.csr_matrix(sp.vstack([chain[-1], C_new], format="csr")[order])
        new_tree = type(tree).__new__(type(tree))
        new_tree.__dict__.update(tree.__dict__)
        new_tree.__dict__.update(
            cluster_chain_=[*chain[:-1], C_last],
            classes_=merged,
            n_labels_=len(merged),
            leaf_assignment_=np.concatenate([tree.leaf_assignment_, leaf])[order],
        )
        new_weights = [*weights[:-1], W_last]
        P = C_last.T.tocsr()
        P.sort_indices()
        new_cache = _SearchCache(
            [*cache.parents[:-1], P], [*cache.chunks[:-1], ChunkedWeights(W_last, P)], merged
        )
        n_added = int(vars(self).get("n_labels_added_", 0)) + len(new_classes)
        drift = n_added / len(merged)
        # one update: a concurrent predict sees the old model or the new one
        self.__dict__.update(
            classes_=merged,
            tree_=new_tree,
            weights_=new_weights,
            n_labels_added_=n_added,
            label_drift_=drift,
            _search_cache=new_cache,
        )
        progress(
            logger,
            self.verbose,
            "add_labels: %d new labels into %d leaf clusters, %d weights, %.2f s; label "
            "drift %.3f (share of the labels the tree was not built on; fit again above %.2f)",
            len(new_classes),
            len(np.unique(leaf)),
            W_new.nnz,
            time.perf_counter() - t0,
            drift,
            _REFIT_DRIFT,
        )
        if drift > _REFIT_DRIFT:
            logger.info(
                "label drift %.3f exceeds %.2f: a full fit on all labels is due.",
                drift,
                _REFIT_DRIFT,
            )
        return self

    # -------------------------------------------------------- predict-only

    def compact(self) -> XRLinearClassifier:
        """Drop what only training and inspection need; predictions stay bit-identical.

        The beam search reads the node weights from its own layout (grouped by parent
        node), so the weight matrices ``weights_`` are a second copy of them: a
        predict-only model keeps the layout alone and frees the memory of ``weights_``
        (saved, 0.58 of the full folder's size on tibkat_gnd_en; see the persistence page
        of the docs). Dropped: ``weights_``, ``fit_time_per_layer_``,
        ``fit_bytes_per_layer_`` (training diagnostics) and the tree's
        ``label_embedder_`` (the label2vec model of a ``"label2vec"`` tree). Kept: the
        parameters, ``classes_``, ``tree_``'s cluster chain, ``n_features_in_``, and so
        ``predict``, ``predict_topk``, ``predict_proba``, ``decision_function``,
        ``score``, pickling and :func:`skxmc.save` / :func:`skxmc.load` (memory-mapped
        too). Lost: reading ``weights_`` (the error names this method),
        :meth:`explain`, which reads the node weights per feature, and
        :func:`skxmc.io.to_pecos`, which writes them. ``fit`` trains a full model again
        (the dropped state comes back only that way); ``clone`` gives an unfitted copy
        as usual. :func:`skxmc.save` with ``predict_only=True`` saves a compacted copy
        and leaves this estimator whole.

        Returns
        -------
        self : XRLinearClassifier
            With ``predict_only_`` True.

        Examples
        --------
        >>> import numpy as np
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.datasets import make_xmc_classification
        >>> X, Y = make_xmc_classification(200, 300, 40, random_state=0)
        >>> clf = XRLinearClassifier().fit(X, Y)
        >>> before = clf.predict_topk(X[:5])
        >>> clf = clf.compact()
        >>> after = clf.predict_topk(X[:5])
        >>> bool(np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1]))
        True
        >>> clf.predict_only_, hasattr(clf, "weights_")
        (True, False)
        """
        check_is_fitted(self)
        self._check_complete()
        tree = self.tree_
        if "label_embedder_" in vars(tree):
            # a copy: the tree object may be shared (e.g. by a copy made before)
            tree = type(tree).__new__(type(tree))
            tree.__dict__.update(self.tree_.__dict__)
            del tree.__dict__["label_embedder_"]
        dropped = {name: None for name in _TRAINING_ONLY}
        state = {k: v for k, v in vars(self).items() if k not in dropped}
        state.update(tree_=tree, predict_only_=True)
        # one assignment: a concurrent predict sees the whole model, before or after
        self.__dict__ = state
        return self

    def _predict_only_copy(self) -> XRLinearClassifier:
        """A compacted copy sharing the arrays (``skxmc.save(..., predict_only=True)``);
        this estimator is left as it is."""
        check_is_fitted(self)
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        return copy.compact()

    def __getattr__(self, name: str) -> Any:
        # Called only when the attribute is missing: name what compact() dropped.
        if name in _TRAINING_ONLY and vars(self).get("predict_only_", False):
            raise AttributeError(
                f"this XRLinearClassifier is predict-only (made by compact() or saved with "
                f"skxmc.save(..., predict_only=True)) and no longer holds {name}: "
                f"{_TRAINING_ONLY[name]}. Fit it again, or use the full model (saved "
                f"without predict_only), to get it."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -------------------------------------------------------------- predict

    def __sklearn_is_fitted__(self) -> bool:
        # Complete models only: the search structures exist once the weights of every
        # layer do (after fit, unpickling and loading).
        return "_search_cache" in vars(self)

    def _build_search_structures(self) -> None:
        """Rebuild ``_search_cache`` from ``tree_`` / ``weights_`` (after unpickling and
        loading; never during predict, which must leave the estimator unchanged)."""
        self._search_cache = _search_structures(self.tree_, self.weights_, self.classes_)

    def _check_complete(self) -> None:
        """Raise if the fitted attributes do not form one complete model (e.g. a model
        saved by an older version from an interrupted fit)."""
        try:
            _check_model_state(vars(self))
        except ValueError as exc:
            raise ValueError(f"this XRLinearClassifier holds an {exc}; fit it again.") from None

    def _check_saved_state(self, attributes: dict, arrays: dict) -> None:
        """The same checks on a saved state, before it is loaded (skxmc.load's hook)."""
        state = {**attributes, **arrays}
        # an unfitted template (e.g. MatchXML's ranker) has neither
        if "weights_" in state or state.get("predict_only_", False):
            _check_model_state(state)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if not state.get("predict_only_", False):
            # derived data, not worth pickling; a predict-only model has no weights_ to
            # derive it from, and keeps it
            state.pop("_search_cache", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "weights_" in state:
            self._check_complete()
            self._build_search_structures()
        elif state.get("predict_only_", False):
            self._check_complete()

    def _save_state(self) -> tuple[dict, dict]:
        check_is_fitted(self)
        self._check_complete()
        attributes, arrays = super()._save_state()
        # The beam search's layout too (about the weights' size again): loading then builds
        # nothing, and skxmc.load(mmap=True) predicts from the mapped file.
        arrays["_search_layout"] = [_layout_arrays(c) for c in self._search_cache.chunks]
        return attributes, arrays

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        arrays = dict(arrays)
        layout = arrays.pop("_search_layout", None)  # absent in older model directories
        super()._load_state(attributes, arrays)
        self._check_complete()
        predict_only = bool(getattr(self, "predict_only_", False))
        if predict_only and not (
            isinstance(layout, list) and all(_is_block_layout(lay) for lay in layout)
        ):
            raise ValueError(
                "a predict-only model must hold its beam-search layout (its only copy of "
                "the weights), and this one does not."
            )
        if layout is None or (
            isinstance(layout, list) and not all(_is_block_layout(lay) for lay in layout)
        ):
            if layout is not None:
                logger.info(
                    "this model directory holds the beam-search layout of an older skxmc; "
                    "it is rebuilt in memory (save the model again to load it mapped)."
                )
            self._build_search_structures()
            return
        parents = [C.T.tocsr() for C in self.tree_.cluster_chain_]
        for P in parents:
            P.sort_indices()
        n_rows = self.n_features_in_ + 1
        shapes = [(n_rows, C.shape[0]) for C in self.tree_.cluster_chain_]
        # the weight count of every layer, checked against the layout's (none to check in
        # a predict-only model: the layout is its only copy of the weights)
        nnz = [None] * len(shapes) if predict_only else [W.nnz for W in self.weights_]
        if not isinstance(layout, list) or len(layout) != len(shapes):
            raise ValueError("the saved beam-search layout does not have one entry per layer.")
        chunks = [
            _chunked_from_layout(lay, shape, n, P, t)
            for t, (lay, shape, n, P) in enumerate(zip(layout, shapes, nnz, parents))
        ]
        self._search_cache = _SearchCache(parents, chunks, self.classes_)

    def _search(
        self,
        X: sp.csr_matrix,
        *,
        top_k: int | None,
        n_layers: int | None = None,
        cache: _SearchCache | None = None,
        cluster: Any = None,
    ) -> sp.csr_matrix:
        """Beam search; on the fit's cluster (training rows, already there) when
        ``cluster`` is given, on the cluster of an active dask joblib context when
        predicting, else locally in row blocks of bounded memory."""
        parents, chunks, _ = self._search_cache if cache is None else cache
        kwargs = {
            "bias": self.bias,
            "beam_size": self.beam_size,
            "top_k": top_k,
            "post_processor": self.post_processor,
            "n_layers": n_layers,
        }
        if cluster is not None:
            return cluster.search_training_rows(X.shape[0], **kwargs)
        if n_layers is None:
            session = _cluster_session(f"{type(self).__name__}.predict")
            if session is not None:
                with session:
                    return session.search(X, chunks, parents, **kwargs)
        n_jobs = int(effective_n_jobs(self.n_jobs))
        return _blockwise(
            X,
            lambda Xb: beam_search(Xb, chunks, parents, n_jobs=n_jobs, **kwargs),
            _block_rows(parents, self.beam_size),
        )

    def _validate_X(self, X: Any) -> sp.csr_matrix:
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=False)
        return _as_sorted_csr(X)

    @property
    def _score_floor(self) -> float:
        # Post-processed path scores lie in [0, 1]; raw "noop" scores are unbounded.
        return 0.0 if self.post_processor != "noop" else float(np.finfo(np.float32).min)

    def _selected(
        self, X: sp.csr_matrix, columns: np.ndarray, *, top_k: int | None, cache: _SearchCache
    ) -> sp.csr_matrix:
        """Exact path scores of the labels ``columns`` (their ``top_k`` best when set)."""
        return selected_search(
            X,
            cache.chunks,
            cache.parents,
            columns,
            bias=self.bias,
            post_processor=self.post_processor,
            top_k=top_k,
            n_jobs=int(effective_n_jobs(self.n_jobs)),
        )

    def _rank_scores(
        self, X: Any, k: int | None, labels: np.ndarray | None = None
    ) -> sp.csr_matrix:
        """Path scores of the ``k`` best labels of each row (all the labels the beam
        reaches when None), CSR ``(n_samples, n_labels)``; with ``labels`` (columns), the
        exact path scores of those labels (their ``k`` best when set), beam or not."""
        X = self._validate_X(X)
        if labels is None:
            return self._search(X, top_k=k)
        return self._selected(X, labels, top_k=k, cache=self._search_cache)

    def _proba_of(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        """With ``post_processor="l3-hinge"`` or ``"sigmoid"`` the path scores already lie
        in [0, 1]; with ``"noop"`` a sigmoid of the raw scores."""
        if self.post_processor == "noop":
            scores.data = (1.0 / (1.0 + np.exp(-scores.data))).astype(np.float32)
        return scores

    def predict_topk(
        self, X: Any, k: int | None = None, *, labels: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best labels of each sample and their scores, best first.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Samples.
        k : int or None, default=None
            Labels per sample; None: ``top_k``.
        labels : array-like of shape (n_selected,), default=None
            Rank only these labels (identifiers from ``classes_``), by their exact path
            scores, as PECOS's ``predict(X, selected_outputs_csr=...)``: every layer keeps
            the ancestors of the selected labels instead of a beam, so each selected label
            gets the score a beam wide enough to reach it would give (the beam's own score
            when it does reach it), and no other label is scored. The cost grows with the
            subset (the children of its ancestors, per sample), not with ``beam_size``.
            At most ``len(labels)`` labels per sample are returned. None: the beam search.

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            Label identifiers from ``classes_``. Empty slots (fewer than ``k`` labels
            reached) hold a value that is never a label (see
            :func:`skxmc.labels.indices_to_labels`: -1, or ``min(classes_) - 1`` when
            the classes include -1; NaN for float labels; None otherwise) and score
            ``-inf``, which the metrics read as empty.
        scores : ndarray of shape (n_samples, k)
            Path scores; ``-inf`` in empty slots.
        """
        X = self._validate_X(X)
        columns = self._label_columns(labels)
        k = self._resolve_k(k, columns)
        cache = self._search_cache  # one snapshot: weights and classes of the same fit
        if columns is None:
            scores = self._search(X, top_k=k, cache=cache)
        else:
            scores = self._selected(X, columns, top_k=k, cache=cache)
        idx, val = topk_from_sparse(scores, k)
        return LabelSpace(cache.classes).labels_of(idx), val.astype(np.float32)

    def explain(
        self,
        X: Any,
        k: int = 5,
        *,
        n_features: int = 5,
        feature_names: Any = None,
        labels: Any = None,
        node_features: bool = False,
    ) -> list[list[LabelExplanation]]:
        """Why each sample got its top labels: the tree path of each label with every
        node's score, and the features that contribute most to the label's ranker.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Samples.
        k : int, default=5
            Labels explained per sample: the ``k`` that ``predict_topk(X, k)`` returns,
            in its order.
        n_features : int, default=5
            Features listed per label: those of the sample with the largest contributions
            ``weight * value`` (by absolute value) to the label's linear score; 0 lists
            none.
        feature_names : array-like of str, default=None
            One name per column of ``X``, ``n_features_in_`` of them (e.g. a vectoriser's
            ``get_feature_names_out()``; :meth:`skxmc.pipeline.Pipeline.explain` passes
            them). None: ``feature_names_in_`` when ``fit`` saw them, else no names.
        labels : array-like, default=None
            Explain these labels (identifiers from ``classes_``) instead of the beam's,
            as ``predict_topk(X, k, labels=labels)`` ranks them: their ``k`` best by
            exact path score. Answers "why not this label?".
        node_features : bool, default=False
            Also list the top ``n_features`` contributions of every inner node of each
            path (``NodeScore.features``): what led the beam into each cluster.

        Returns
        -------
        list of list of LabelExplanation
            Per sample, one :class:`~skxmc.linear.LabelExplanation` per label, best
            first (fewer than ``k`` when the beam reached fewer labels). The last node of
            each ``path`` is the label; its ``path_score`` is the label's ``score``.

        Examples
        --------
        A pipeline names the features by the vectoriser's terms:

        >>> from sklearn.feature_extraction.text import TfidfVectorizer
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.pipeline import make_pipeline
        >>> docs = ["red apple pie", "green apple tart", "fast red car", "old blue car",
        ...         "ripe pear jam", "new electric bike"]
        >>> kinds = ["food", "food", "vehicle", "vehicle", "food", "vehicle"]
        >>> pipe = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(docs, kinds)
        >>> why = pipe.explain(["green apple pie"], k=1, n_features=2)[0][0]
        >>> why.label, [f.name for f in why.features]
        ('food', ['apple', 'pie'])
        >>> why.path[-1].path_score == why.score  # the last node is the label
        True
        """
        check_is_fitted(self)
        weights = self.weights_  # a predict-only model raises here, naming compact()
        X = self._validate_X(X)
        names = check_explain_args(
            n_features,
            feature_names
            if feature_names is not None
            else getattr(self, "feature_names_in_", None),
            self.n_features_in_,
        )
        columns = self._label_columns(labels)
        k = self._resolve_k(k, columns)
        cache = self._search_cache
        if columns is None:
            scores = self._search(X, top_k=k, cache=cache)
        else:
            scores = self._selected(X, columns, top_k=k, cache=cache)
        idx, val = topk_from_sparse(scores, k)
        return explain_rows(
            X,
            idx,
            LabelSpace(cache.classes).labels_of(idx),
            val.astype(np.float32),
            weights=weights,
            chain=self.tree_.cluster_chain_,
            bias=self.bias,
            post_processor=self.post_processor,
            n_features=int(n_features),
            feature_names=names,
            node_features=bool(node_features),
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
