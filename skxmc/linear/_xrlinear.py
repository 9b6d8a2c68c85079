"""XRLinearClassifier: the hierarchical linear ranker of PECOS (XR-Linear) as an estimator."""

from __future__ import annotations

import logging
import time
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._base import MultiLabelRankerMixin, check_not_raw_text
from .._compat import HasMethods, Interval, StrOptions, _fit_context, validate_data
from .._labels import LabelSpace, encode_target
from .._logging import progress
from .._persistence import PersistenceMixin, persistent
from .._ranking import topk_from_sparse
from ..tree import HierarchicalLabelTree
from ._beam import POST_PROCESSORS, ChunkedWeights, beam_search
from ._solver import LayerGroups, fit_layer, row_squared_norms

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
    """CSR float32 with sorted indices, copying only when the input is not already so.

    The solver and the beam search run about twice as fast on sorted indices, and
    ``TfidfVectorizer`` emits unsorted ones; the caller's matrix is never modified.
    """
    X = sp.csr_matrix(X, dtype=np.float32) if not sp.isspmatrix_csr(X) else X
    if X.dtype != np.float32:
        X = X.astype(np.float32)
    if not X.has_sorted_indices:
        X = X.copy()
        X.sort_indices()
    return X


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
        Value of the bias feature appended to every sample (0 disables it).
    weight_threshold : float, default=0.1
        Weights with an absolute value below this are dropped after training (model
        size and prediction speed; PECOS's default).
    relevance_weighted : bool, default=False
        Weight the positives of inner-layer nodes by relevance: the cost of a positive
        sample is ``Cp`` times the number of its labels under the node, divided by its
        largest such count (MatchXML's ranker setting).
    beam_size : int, default=10
        Clusters kept per sample at every inner layer of the beam search.
    top_k : int, default=10
        Labels returned per sample by ``predict`` and ``predict_topk``. Values above the
        number of labels are clipped with a warning.
    classes : array-like of shape (n_labels,), default=None
        A fixed label space (as ``MultiLabelBinarizer(classes=...)``): the columns of every
        output, in this order; labels of ``Y`` outside it are ignored with a warning. Set it
        for ``cross_val_predict`` on label collections, where each fold would otherwise
        learn its own columns. None: the labels seen in ``fit``.
    sparse_output : bool, default=False
        Return CSR from ``predict``, ``decision_function`` and ``predict_proba`` whatever
        the target. False: outputs follow ``Y`` as in sklearn's ``OneVsRestClassifier``
        (1-D labels for a 1-D target, dense for a dense indicator, CSR for sparse ``Y`` or
        label collections). Set it with a dense ``Y`` of many labels.
    post_processor : {"l3-hinge", "sigmoid", "noop"}, default="l3-hinge"
        How a node's score combines with its parent's: ``exp(-max(1 - v, 0) ** 3)`` or a
        sigmoid multiplied along the path, or the raw score of the last layer.
    n_jobs : int or None, default=None
        Threads for tree building, training and prediction (joblib semantics).
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

    See Also
    --------
    HierarchicalLabelTree : the label tree.
    skxmc.metrics.make_topk_scorer : P@k / nDCG@k scorers for ``GridSearchCV``.

    Examples
    --------
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc import XRLinearClassifier
    >>> from skxmc.pipeline import make_pipeline
    >>> texts = ["cheap flights to rome", "rome hotel deals", "python sparse matrix",
    ...          "numpy matrix product", "hotel in paris", "flights to paris"]
    >>> labels = [["travel", "italy"], ["travel", "italy"], ["programming"],
    ...           ["programming"], ["travel", "france"], ["travel", "france"]]
    >>> clf = make_pipeline(TfidfVectorizer(), XRLinearClassifier(top_k=2))
    >>> clf = clf.fit(texts, labels)
    >>> labels, scores = clf.predict_topk(["flights to rome"])
    >>> labels.tolist()
    [['travel', 'italy']]

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
        "bias": [Interval(Real, 0, None, closed="left")],
        "weight_threshold": [Interval(Real, 0, None, closed="left")],
        "relevance_weighted": ["boolean"],
        "beam_size": [Interval(Integral, 1, None, closed="left")],
        "top_k": [Interval(Integral, 1, None, closed="left")],
        "classes": ["array-like", None],
        "sparse_output": ["boolean"],
        "post_processor": [StrOptions(set(POST_PROCESSORS))],
        "n_jobs": [Integral, None],
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
        self.classes = classes
        self.sparse_output = sparse_output
        self.post_processor = post_processor
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, Y: Any) -> XRLinearClassifier:
        """Build the label tree and train the node models layer by layer.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Features (e.g. TF-IDF), converted to CSR float32.
        Y : sparse matrix, ndarray or sequence of label collections
            Labels: a 0/1 indicator ``(n_samples, n_labels)``, one collection of labels
            per sample (samples without labels are allowed; see
            :func:`skxmc.as_label_sets`), or a 1-D target with one label per sample.

        Returns
        -------
        self : XRLinearClassifier
        """
        check_not_raw_text(X, type(self).__name__)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=True)
        X = _as_sorted_csr(X)
        Y_csr, self.classes_, self.target_type_ = encode_target(
            Y, classes=self.classes, name="Y", n_samples=X.shape[0]
        )
        if Y_csr.shape[1] == 0:
            raise ValueError("Y has no labels at all; XRLinearClassifier needs at least one.")
        n_jobs = int(effective_n_jobs(self.n_jobs))
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

        t0 = time.perf_counter()
        tree = (
            HierarchicalLabelTree(random_state=seed, n_jobs=self.n_jobs)
            if self.tree is None
            else clone(self.tree)
        )
        self.tree_ = tree.fit(X, Y_csr)
        progress(
            logger,
            self.verbose,
            "label tree: %d layers %s in %.2f s",
            self.tree_.n_layers_,
            [C.shape[0] for C in self.tree_.cluster_chain_],
            time.perf_counter() - t0,
        )
        if self.relevance_weighted:
            targets = _relevance_targets(Y_csr, self.tree_.cluster_chain_)
        else:
            targets = self.tree_.cluster_label_matrices(Y_csr)
        sqnorms = row_squared_norms(X)
        self.weights_ = []
        self.fit_time_per_layer_ = []
        for t, (C, Y_t) in enumerate(zip(self.tree_.cluster_chain_, targets)):
            t_layer = time.perf_counter()
            if t == 0:
                # Under the root every instance is a candidate of every first-layer node.
                matcher = sp.csr_matrix(np.ones((X.shape[0], 1), dtype=np.float32))
            elif self.negative_sampling == "tfn+man":
                matcher = self._search(X, n_layers=t, top_k=self.beam_size)
            else:
                matcher = None
            groups = LayerGroups.from_matrices(Y_t, C, matcher)
            W = fit_layer(
                X,
                Y_t,
                groups,
                loss=self.loss,
                Cp=self.Cp,
                Cn=self.Cn,
                tol=self.tol,
                max_iter=self.max_iter,
                bias=self.bias,
                weight_threshold=self.weight_threshold,
                use_relevance=self.relevance_weighted,
                random_state=seed + t,
                n_jobs=n_jobs,
                row_sqnorms=sqnorms,
            )
            self.weights_.append(W)
            if self.negative_sampling == "tfn+man" and t + 1 < len(targets):
                self._build_search_structures()  # the next layer's matcher searches this one
            self.fit_time_per_layer_.append(time.perf_counter() - t_layer)
            progress(
                logger,
                self.verbose,
                "layer %d/%d: %d nodes, %d weights, %.2f s",
                t + 1,
                len(targets),
                C.shape[0],
                W.nnz,
                self.fit_time_per_layer_[-1],
            )
        self._build_search_structures()
        return self

    # -------------------------------------------------------------- predict

    def _build_search_structures(self) -> None:
        """Parent maps and parent-grouped weights for the beam search, derived from
        ``tree_`` / ``weights_`` (rebuilt after fit, unpickling and loading; never during
        predict, which must leave the estimator unchanged)."""
        parents = []
        for C in self.tree_.cluster_chain_:
            P = C.T.tocsr()
            P.sort_indices()
            parents.append(P)
        chunks = [ChunkedWeights(W, P) for W, P in zip(self.weights_, parents)]
        self._search_cache = (parents, chunks)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_search_cache", None)  # derived data: not worth pickling
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "weights_" in state:
            self._build_search_structures()

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        super()._load_state(attributes, arrays)
        self._build_search_structures()

    def _search(
        self, X: sp.csr_matrix, *, top_k: int | None, n_layers: int | None = None
    ) -> sp.csr_matrix:
        parents, chunks = self._search_cache
        return beam_search(
            X,
            chunks,
            parents,
            bias=self.bias,
            beam_size=self.beam_size,
            top_k=top_k,
            post_processor=self.post_processor,
            n_layers=n_layers,
            n_jobs=int(effective_n_jobs(self.n_jobs)),
        )

    def _validate_X(self, X: Any) -> sp.csr_matrix:
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=False)
        return _as_sorted_csr(X)

    @property
    def _score_floor(self) -> float:
        # Post-processed path scores lie in [0, 1]; raw "noop" scores are unbounded.
        return 0.0 if self.post_processor != "noop" else float(np.finfo(np.float32).min)

    def _rank_scores(self, X: Any, k: int | None) -> sp.csr_matrix:
        """Path scores of the ``k`` best labels of each row (all the labels the beam
        reaches when None), CSR ``(n_samples, n_labels)``."""
        return self._search(self._validate_X(X), top_k=k)

    def _proba_of(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        """With ``post_processor="l3-hinge"`` or ``"sigmoid"`` the path scores already lie
        in [0, 1]; with ``"noop"`` a sigmoid of the raw scores."""
        if self.post_processor == "noop":
            scores.data = (1.0 / (1.0 + np.exp(-scores.data))).astype(np.float32)
        return scores

    def predict_topk(self, X: Any, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best labels of each sample and their scores, best first.

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            Label identifiers from ``classes_``; empty slots (fewer than ``k`` labels
            reached) hold -1 for integer labels and None otherwise.
        scores : ndarray of shape (n_samples, k)
            Path scores; ``-inf`` in empty slots.
        """
        X = self._validate_X(X)
        k = self._resolve_k(k)
        scores = self._search(X, top_k=k)
        idx, val = topk_from_sparse(scores, k)
        return LabelSpace(self.classes_).labels_of(idx), val.astype(np.float32)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
