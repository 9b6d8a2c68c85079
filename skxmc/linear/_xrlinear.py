"""XRLinearClassifier: the hierarchical linear ranker of PECOS (XR-Linear) as an estimator."""

from __future__ import annotations

import logging
import time
import warnings
from numbers import Integral, Real
from typing import Any

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
from ._add_labels import AddLabelsMixin
from ._beam import (
    POST_PROCESSORS,
    beam_search,
)
from ._explain import ExplainMixin
from ._fast_predict import fast_rows, search_few, topk_labels
from ._model_state import ModelStateMixin, _search_structures, _SearchCache
from ._problem import LayerGroups, _relevance_targets, row_squared_norms, solver_view
from ._select import selected_search
from ._solver import fit_layer
from ._update import UpdateMixin, layer_fingerprints, row_hashes, training_fingerprints

logger = logging.getLogger(__name__)

__all__ = ["XRLinearClassifier"]


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


def _cluster_session(label: str) -> Any:
    """A :class:`~skxmc.linear._distributed.ClusterSession` on the client of an active
    ``joblib.parallel_config(backend="dask")`` context, else None (dask stays unimported)."""
    from ._distributed import ClusterSession, active_client

    client = active_client()
    return None if client is None else ClusterSession(client, label)


def _cluster_session_absent() -> bool:
    """No ``joblib.parallel_config(backend="dask")`` context is active."""
    from ._distributed import active_client

    return active_client() is None


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
class XRLinearClassifier(
    AddLabelsMixin,
    UpdateMixin,
    ExplainMixin,
    ModelStateMixin,
    MultiLabelRankerMixin,
    PersistenceMixin,
    ClassifierMixin,
    BaseEstimator,
):
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
    training_fingerprints_ : dict
        64-bit prints of every node's training problem (per layer: ``"groups"``,
        ``"positives"``, ``"exact"``), the fit's seed, the solver settings and the hashes
        of the rows the label tree was built on: what :meth:`update` compares to retrain
        only the changed nodes. Saved with the model; dropped by :meth:`compact`.
    nodes_updated_ : list of int
        Nodes trained per layer by the last ``fit`` (all) or :meth:`update`.
    update_drift_ : float
        After :meth:`update`, the share of its training rows that the label tree was not
        built on (0 after ``fit``). A full ``fit`` is due above about 0.2 (see
        :meth:`update`).

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
        hashes = row_hashes(X, sample_weight)
        prints: list[dict] = []
        weights, fit_times, bytes_per_layer = self._train_layers(
            X, sqnorms, tree, targets, classes, seed, norms, sample_weight, extra_rows,
            (hashes, prints),
        )  # fmt: skip
        fingerprints = training_fingerprints(
            self, seed, hashes, prints, sample_weight is not None, negatives=extra_rows is not None
        )
        self._publish(
            twin, classes, target_type, tree, weights, fit_times, bytes_per_layer, fingerprints
        )
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
        fingerprints: dict,
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
            "training_fingerprints_": fingerprints,
            "nodes_updated_": [C.shape[0] for C in tree.cluster_chain_],
            "update_drift_": 0.0,
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
        fingerprints: tuple[np.ndarray, list] | None = None,
    ) -> tuple[list[sp.csc_matrix], list[float], Any]:
        """Train the node models layer by layer, top down: ``(weights, seconds per layer,
        bytes per layer on a cluster or None)``; every node problem weighs its rows by
        ``sample_weight`` (None: unweighted). Inside ``joblib.parallel_config(
        backend="dask")`` the layers' node problems and the matcher's searches run on the
        cluster (:mod:`skxmc.linear._distributed`), with the same model. ``extra_rows``
        (the user negatives' clusters per layer, as ``tree.cluster_label_matrices`` gives
        them) adds each row, at layer ``t``, to the groups of its layer ``t - 1`` clusters.
        ``fingerprints``: ``(row hashes, list)``, the list gets every layer's node
        problem prints (:func:`~skxmc.linear._update.layer_fingerprints`)."""
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
                if fingerprints is not None:
                    hashes, prints = fingerprints
                    prints.append(layer_fingerprints(groups, Y_t, hashes, sample_weight))
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

    # -------------------------------------------------------------- predict

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
        rows = fast_rows(self, X) if labels is None else None
        # a few valid rows (the same result; anything else, or a dask context, which
        # searches on its cluster, takes the full path below)
        if rows is not None and self.post_processor in POST_PROCESSORS:
            if _cluster_session_absent():
                k = self._resolve_k(k)
                cache = self._search_cache
                path = search_few(
                    rows,
                    X.shape[1],
                    cache,
                    bias=self.bias,
                    beam_size=self.beam_size,
                    top_k=k,
                    post_processor=self.post_processor,
                )
                return topk_labels(path, k, cache)
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
