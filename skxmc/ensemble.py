"""Ensembles of multi-label rankers: :class:`RankerEnsemble`.

Several rankers (XR-Linear with different tree seeds or label representations, rankers on
other features in pipelines of their own) are fitted on the same ``(X, Y)`` and their
sparse scores are combined per sample: each member's ``candidates`` best labels, unioned,
scored by the mean of the members' scores, of their ranks, or of their per-row softmax.
This is PECOS's ensemble of ``XLinearModel`` trees and omikuji / Parabel's several trees,
as a scikit-learn meta-estimator in the style of
:class:`~sklearn.ensemble.VotingClassifier`.

The module imports no estimator: members are any skxmc multi-label rankers (or skxmc /
scikit-learn pipelines that end with one).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed, parallel_config
from joblib import hash as joblib_hash
from joblib.parallel import get_active_backend
from sklearn.base import ClassifierMixin, clone
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

from ._base import THRESHOLD_CONSTRAINT, MultiLabelRankerMixin, _keep_best
from ._compat import Interval, StrOptions, _BaseComposition, _fit_context, _num_samples
from ._ranking import topk_from_sparse
from .io import PersistenceMixin, persistent
from .labels import LabelSpace, encode_target

__all__ = ["COMBINE_METHODS", "RankerEnsemble", "combine_scores"]

#: The values of ``RankerEnsemble(combine=...)``.
COMBINE_METHODS = ("mean", "rank", "softmax")


def _row_ids(S: sp.csr_matrix) -> np.ndarray:
    return np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))


def _borda(S: sp.csr_matrix, n_candidates: int) -> sp.csr_matrix:
    """Each stored entry replaced by ``(K - r + 1) / K``, ``r`` its 1-based rank in its
    row (best score first, ties: lower column first) and ``K = n_candidates``."""
    S = sp.csr_matrix(S)
    S.sort_indices()
    rows = _row_ids(S)
    order = np.lexsort((S.indices, -S.data.astype(np.float64), rows))
    rank = np.empty(S.nnz, dtype=np.float64)
    rank[order] = np.arange(S.nnz) - S.indptr[rows[order]] + 1
    data = np.maximum(n_candidates - rank + 1, 0.0) / n_candidates
    return sp.csr_matrix((data, S.indices.copy(), S.indptr.copy()), shape=S.shape)


def _softmax(S: sp.csr_matrix, temperature: float) -> sp.csr_matrix:
    """Softmax over each row's stored entries of ``scores / temperature``."""
    S = sp.csr_matrix(S)
    data = S.data.astype(np.float64) / temperature
    nonempty = np.diff(S.indptr) > 0
    starts = S.indptr[:-1][nonempty]
    rows = _row_ids(S)
    row_max = np.zeros(S.shape[0])
    if S.nnz:
        row_max[nonempty] = np.maximum.reduceat(data, starts)
    e = np.exp(data - row_max[rows])
    sums = np.zeros(S.shape[0])
    if S.nnz:
        sums[nonempty] = np.add.reduceat(e, starts)
    return sp.csr_matrix((e / sums[rows], S.indices.copy(), S.indptr.copy()), shape=S.shape)


def combine_scores(
    scores: list[sp.spmatrix],
    *,
    combine: str = "mean",
    weights: Any = None,
    n_candidates: int | None = None,
    temperature: float = 1.0,
) -> sp.csr_matrix:
    """Combine several rankers' sparse scores of the same samples and labels.

    Each matrix holds one ranker's scores of its candidate labels (the stored entries of a
    row); a label a ranker did not score counts as 0 in the (weighted) mean below.

    Parameters
    ----------
    scores : list of sparse matrices of shape (n_samples, n_labels)
        One per ranker, same shape, columns in the same label order.
    combine : {"mean", "rank", "softmax"}, default="mean"
        ``"mean"``: the weighted mean of the scores themselves (give them on one scale,
        e.g. ``predict_proba``'s). ``"rank"``: a Borda count, the weighted mean of
        ``(K - r + 1) / K`` where ``r`` is the label's 1-based rank among the ranker's
        candidates of that row and ``K`` is ``n_candidates`` (so 1 for the best label,
        ``1 / K`` for the K-th and 0 for labels it did not rank). ``"softmax"``: the
        weighted mean of each ranker's per-row softmax of ``scores / temperature`` over its
        candidates (every row of a ranker then sums to 1).
    weights : array-like of shape (n_rankers,), default=None
        Non-negative weight of each ranker, not all 0 (None: equal weights).
    n_candidates : int, default=None
        ``K`` of ``"rank"``; None: the largest number of entries in a row of any ranker.
    temperature : float, default=1.0
        Temperature of ``"softmax"`` (positive).

    Returns
    -------
    csr_matrix of shape (n_samples, n_labels)
        The combined scores, stored for the union of the rankers' candidates.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> a = sp.csr_matrix([[0.9, 0.5, 0.0]])
    >>> b = sp.csr_matrix([[0.0, 0.7, 0.1]])
    >>> print(combine_scores([a, b]).toarray().round(2))
    [[0.45 0.6  0.05]]
    >>> print(combine_scores([a, b], combine="rank", n_candidates=2).toarray())
    [[0.5  0.75 0.25]]
    """
    if not scores:
        raise ValueError("scores must hold at least one sparse matrix; got an empty list.")
    if combine not in COMBINE_METHODS:
        raise ValueError(f"combine must be one of {COMBINE_METHODS}; got {combine!r}.")
    shape = scores[0].shape
    if any(S.shape != shape for S in scores):
        raise ValueError(
            f"the score matrices must have one shape; got {[S.shape for S in scores]}."
        )
    w = _check_weights(weights, len(scores))
    mats = [sp.csr_matrix(S) for S in scores]
    for S in mats:
        S.sum_duplicates()
    if combine == "rank":
        if n_candidates is None:
            n_candidates = max(int(np.diff(S.indptr).max(initial=0)) for S in mats) or 1
        mats = [_borda(S, n_candidates) for S in mats]
    elif combine == "softmax":
        if not temperature > 0:
            raise ValueError(f"temperature must be positive; got {temperature!r}.")
        mats = [_softmax(S, temperature) for S in mats]
    total = sp.csr_matrix(shape, dtype=np.float64)
    for wi, S in zip(w, mats):
        if wi > 0:
            # A structural union: labels a ranker did not score add 0, but keep their entry.
            total = total + sp.csr_matrix(
                (S.data.astype(np.float64) * wi, S.indices, S.indptr), shape=shape
            )
    total = total / w.sum()
    total = sp.csr_matrix(total, dtype=np.float32)
    total.sort_indices()
    return total


def _check_weights(weights: Any, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(
            f"weights must hold {n} finite non-negative numbers, one per estimator, not all "
            f"0; got {weights!r}."
        )
    return w


def _is_pipeline(est: Any) -> bool:
    return hasattr(est, "steps") and hasattr(est, "_final_estimator")


def _final_ranker(est: Any) -> Any:
    """The ranker of a member: itself, or the last step of a pipeline."""
    while _is_pipeline(est):
        est = est._final_estimator
    return est


def _member_features(est: Any, X: Any) -> Any:
    """``X`` through the transforms of a (nested) pipeline member."""
    while _is_pipeline(est):
        for _, _, transform in est._iter(with_final=False):
            X = transform.transform(X)
        est = est._final_estimator
    return X


def _set_member_classes(est: Any, classes: Any) -> None:
    """Give a member the ensemble's fixed label space (its ranker's ``classes``)."""
    if _is_pipeline(est):
        name = est.steps[-1][0]
        _set_member_classes(est._final_estimator, classes)
        est.set_params(**{name: est._final_estimator})
    elif "classes" in est.get_params(deep=False):
        est.set_params(classes=classes)


def _in_dask_task() -> bool:
    """joblib's dask backend is active: on a worker, inside a task it sent there."""
    return type(get_active_backend()[0]).__name__ == "DaskDistributedBackend"


def _fit_member(est: Any, X: Any, Y: Any, sample_weight: Any) -> Any:
    """Fit one member. Sent to a Dask worker (joblib's dask backend), the member fits
    there with threads: its own node problems would otherwise be sent to the cluster
    from inside a task and wait for worker threads that the members hold (a deadlock)."""
    kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
    if _in_dask_task():
        with parallel_config(backend="threading"):
            return est.fit(X, Y, **kwargs)
    return est.fit(X, Y, **kwargs)


def _fit_transforms(est: Any, X: Any) -> tuple[list, Any]:
    """Fit the transforms of pipeline member ``est`` on ``X``: ``(fitted steps, X')``."""
    head = est[:-1]
    if _in_dask_task():
        with parallel_config(backend="threading"):
            Xt = head.fit_transform(X)
    else:
        Xt = head.fit_transform(X)
    return list(head.steps), Xt


def _transforms_key(est: Any) -> str | None:
    """What identifies the transforms of a pipeline member (their classes and
    parameters), or None when ``est`` is not a pipeline with transforms."""
    if not _is_pipeline(est) or len(est.steps) < 2:
        return None
    try:
        return joblib_hash(
            [
                (name, step)
                if step is None or isinstance(step, str)
                else (name, type(step).__module__, type(step).__qualname__, step.get_params())
                for name, step in est.steps[:-1]
            ]
        )
    except Exception:  # parameters joblib cannot hash: fit the member alone
        return None


@persistent
class RankerEnsemble(MultiLabelRankerMixin, PersistenceMixin, ClassifierMixin, _BaseComposition):
    """An ensemble of multi-label rankers whose sparse scores are combined per sample.

    Every member is cloned and fitted on the same ``(X, Y)``, in parallel with joblib.
    At prediction each member ranks its ``candidates`` best labels of every sample; the
    union of those labels is scored by ``combine``, the (weighted) mean over the members of

    * ``"mean"``: their ``predict_proba`` scores, the rankers' common [0, 1] scale (a
      label a member did not rank counts 0);
    * ``"rank"``: a Borda count, ``(K - r + 1) / K`` for the member's ``r``-th best label
      (1-based) and 0 for the labels it did not rank, ``K = max(candidates, k)``;
    * ``"softmax"``: the per-row softmax of their ``decision_function`` scores divided by
      ``temperature``, over their candidates (each member's row sums to 1, so a member
      sure of one label weighs more on it than one that hesitates).

    The combined score is in [0, 1] for the three methods; it is what
    ``decision_function`` and ``predict_proba`` return and what ``threshold`` applies to
    (on the common scale of :mod:`skxmc._base` with ``"mean"`` only).

    Members share the label space: fitted on the same ``Y`` they learn the same
    ``classes_``; with ``classes`` set, it is passed to each member's ranker. A member
    whose ``classes_`` still differ (its own ``classes`` parameter) is refused in ``fit``.

    Parameters
    ----------
    estimators : list of (str, estimator) tuples or None, default=None
        The members, by name: skxmc multi-label rankers (``XRLinearClassifier``,
        ``SNMClassifier``...) or pipelines ending with one (a member with features of its
        own, e.g. ``make_pipeline(TfidfVectorizer(analyzer="char_wb"), XRLinearClassifier())``
        in an ensemble that takes raw text). Their parameters are reachable as
        ``<name>__<parameter>`` (``set_params``, ``GridSearchCV``), and a member set to
        ``"drop"`` is left out. None: three ``XRLinearClassifier`` whose label trees
        differ by their seed, ``[("xr0", XRLinearClassifier(random_state=0)), ("xr1",
        ...(random_state=1)), ("xr2", ...(random_state=2))]`` (PECOS's ensemble of
        trees); pass that list explicitly to reach the members' parameters.
    combine : {"mean", "rank", "softmax"}, default="mean"
        How the members' scores are combined (above).
    weights : array-like of shape (n_estimators,), default=None
        Weight of each member in the mean (None: equal). Dropped members' weights are
        ignored.
    candidates : int, default=100
        Labels each member ranks per sample (at least the ``k`` asked for).
    temperature : float, default=0.1
        Temperature of ``combine="softmax"``. XR-Linear's path scores lie in [0, 1], where
        a temperature of 1 makes the softmax nearly uniform over the candidates.
    top_k : int, default=10
        Labels returned per sample by ``predict`` and ``predict_topk``.
    {ranker_output_params}
    share_transforms : bool, default=True
        Members that are pipelines with the same transforms before their ranker (the
        same classes with the same parameters, e.g. one ``TfidfVectorizer`` setting and
        different label trees) have those transforms fitted once, on ``X``, and share
        the fitted objects; at prediction ``X`` goes through them once. The model is the
        one of separate fits when the transforms are deterministic (a vectoriser is).
        Not applied when ``sample_weight`` is given. False: every member fits its own.
    n_jobs : int or None, default=None
        Members (and shared transforms) fitted at once (joblib's ``Parallel``; None: one
        at a time unless in a ``joblib.parallel_config`` context). Inside
        ``joblib.parallel_config(backend="dask")`` the members are sent to the workers of
        that context's ``distributed.Client``, each fitted on one worker with threads.
    verbose : int, default=0
        joblib's progress messages while fitting the members.

    Attributes
    ----------
    estimators_ : list of estimators
        The fitted members (without the dropped ones), in the order of ``estimators``.
    named_estimators_ : Bunch
        The fitted members by name.
    classes_ : ndarray of shape (n_labels,)
        Label identifiers; column ``j`` of every output matrix is ``classes_[j]``.
    target_type_ : str
        The kind of ``Y`` seen in ``fit``; outputs follow it (see :mod:`skxmc._base`).
    n_features_in_ : int
        Number of features of ``X`` in ``fit``, when the first member records it.

    See Also
    --------
    combine_scores : The combination alone, on score matrices.
    XRLinearClassifier : The usual member.

    Examples
    --------
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc import RankerEnsemble, XRLinearClassifier
    >>> from skxmc.datasets import load_demo
    >>> from skxmc.pipeline import make_pipeline
    >>> demo = load_demo()
    >>> texts, labels = demo.train_texts, demo.train_labels
    >>> ensemble = RankerEnsemble(
    ...     estimators=[("xr0", XRLinearClassifier(random_state=0)),
    ...                 ("xr1", XRLinearClassifier(random_state=1))],
    ...     combine="rank", top_k=3)
    >>> clf = make_pipeline(TfidfVectorizer(), ensemble).fit(texts, labels)
    >>> top_labels, top_scores = clf.predict_topk(texts[:2])
    >>> top_labels.shape
    (2, 3)
    >>> sorted(clf[-1].named_estimators_)
    ['xr0', 'xr1']
    """

    _parameter_constraints: dict = {
        "estimators": [list, None],
        "combine": [StrOptions(set(COMBINE_METHODS))],
        "weights": ["array-like", None],
        "candidates": [Interval(Integral, 1, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "top_k": [Interval(Integral, 1, None, closed="left")],
        "threshold": THRESHOLD_CONSTRAINT,
        "classes": ["array-like", None],
        "sparse_output": ["boolean"],
        "share_transforms": ["boolean"],
        "n_jobs": [
            Interval(Integral, None, -1, closed="right"),
            Interval(Integral, 1, None, closed="left"),
            None,
        ],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        estimators: list | None = None,
        combine: str = "mean",
        weights: Any = None,
        candidates: int = 100,
        temperature: float = 0.1,
        top_k: int = 10,
        threshold: Any = "auto",
        classes: Any = None,
        sparse_output: bool = False,
        share_transforms: bool = True,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.estimators = estimators
        self.combine = combine
        self.weights = weights
        self.candidates = candidates
        self.temperature = temperature
        self.top_k = top_k
        self.threshold = threshold
        self.classes = classes
        self.sparse_output = sparse_output
        self.share_transforms = share_transforms
        self.n_jobs = n_jobs
        self.verbose = verbose

    # ------------------------------------------------ parameters (sklearn's composition)

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of the ensemble and, with ``deep``, of each member as
        ``<name>__<parameter>`` (and each member itself as ``<name>``)."""
        return self._get_params("estimators", deep=deep)

    def set_params(self, **params: Any) -> RankerEnsemble:
        """Set parameters of the ensemble, replace a member (``<name>=estimator`` or
        ``"drop"``), or set a member's parameter (``<name>__<parameter>``)."""
        self._set_params("estimators", **params)
        return self

    def _estimator_list(self) -> Any:
        """``estimators``, or the default members when None."""
        if self.estimators is not None:
            return self.estimators
        from .linear import XRLinearClassifier  # the default members only

        return [(f"xr{seed}", XRLinearClassifier(random_state=seed)) for seed in range(3)]

    @property
    def named_estimators(self) -> Bunch:
        """The (unfitted) members by name."""
        return Bunch(**dict(self._estimator_list()))

    @property
    def named_estimators_(self) -> Bunch:
        """The fitted members by name."""
        check_is_fitted(self, "estimators_")
        return Bunch(**dict(zip(self._member_names(), self.estimators_)))

    def _member_names(self) -> list[str]:
        return [name for name, est in self._estimator_list() if not _is_drop(est)]

    def _checked_members(self) -> tuple[list[str], list[Any], np.ndarray]:
        """Names, estimators and weights of the members that are not dropped."""
        estimators = self._estimator_list()
        if not isinstance(estimators, list) or not estimators:
            raise ValueError(
                "estimators must be a non-empty list of (name, estimator) tuples, e.g. "
                "[('xr0', XRLinearClassifier(random_state=0)), ('xr1', "
                f"XRLinearClassifier(random_state=1))]; got {estimators!r}."
            )
        for item in estimators:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise ValueError(
                    f"estimators must be (name, estimator) tuples with str names; got {item!r}."
                )
        names = [name for name, _ in estimators]
        self._validate_names(names)  # duplicates, "__" in names, clashes with parameters
        weights = _check_weights(self.weights, len(names))
        kept = [i for i, (_, est) in enumerate(estimators) if not _is_drop(est)]
        if not kept:
            raise ValueError("every estimator of the ensemble is 'drop'; keep at least one.")
        for i in kept:
            name, est = estimators[i]
            ranker = _final_ranker(est)
            if not (hasattr(est, "fit") and isinstance(ranker, MultiLabelRankerMixin)):
                raise ValueError(
                    f"estimator {name!r} must be an skxmc multi-label ranker (e.g. "
                    f"XRLinearClassifier) or a pipeline ending with one; got "
                    f"{type(ranker).__name__}."
                )
        if weights[kept].sum() <= 0:
            raise ValueError("the weights of the members that are not dropped are all 0.")
        return [names[i] for i in kept], [estimators[i][1] for i in kept], weights[kept]

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, Y: Any, sample_weight: Any = None) -> RankerEnsemble:
        """Fit a clone of every member on ``(X, Y)``, in parallel.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), or texts
            What the members take (texts when they are pipelines with a vectoriser).
        Y : sparse matrix, ndarray or sequence of label collections
            Labels in any format the members take (see ``XRLinearClassifier.fit``).
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to every member's ``fit`` (None: not passed).

        Returns
        -------
        self : RankerEnsemble
        """
        names, members, _ = self._checked_members()
        clones = []
        for est in members:
            est = clone(est)
            if self.classes is not None:
                _set_member_classes(est, self.classes)
            clones.append(est)
        # The members check X (which only they know how to read: features or texts), so
        # they fit before the ensemble reads Y; its classes_ are the labels they share.
        fitted = self._fit_members(clones, X, Y, sample_weight)
        _, classes, target_type = encode_target(
            Y, classes=self.classes, name="Y", n_samples=_num_samples(X)
        )
        space = LabelSpace(classes)
        for name, est in zip(names, fitted):
            own = np.asarray(_final_ranker(est).classes_)
            columns = space.columns_of(own)
            if len(own) != len(classes) or (columns < 0).any():
                raise ValueError(
                    f"estimator {name!r} learned {len(own)} labels that are not the "
                    f"ensemble's {len(classes)} (e.g. {own[columns < 0][:3].tolist()!r}); the "
                    f"members must share one label space: leave their classes parameter "
                    f"unset, or set the ensemble's classes."
                )
        state = {"estimators_": fitted, "classes_": classes, "target_type_": target_type}
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(fitted[0], name):
                state[name] = getattr(fitted[0], name)
        self.__dict__.pop("n_features_in_", None)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(state)
        self._build_columns()
        return self

    def _fit_members(self, clones: list, X: Any, Y: Any, sample_weight: Any) -> list:
        """The fitted members; with ``share_transforms``, the pipelines with the same
        transforms have them fitted once and then share them (one fitted object)."""
        groups: dict[str, list[int]] = {}
        if self.share_transforms and sample_weight is None:
            for i, est in enumerate(clones):
                key = _transforms_key(est)
                if key is not None:
                    groups.setdefault(key, []).append(i)
        shared = [idx for idx in groups.values() if len(idx) > 1]
        parallel = Parallel(n_jobs=self.n_jobs, verbose=self.verbose)
        heads = parallel(delayed(_fit_transforms)(clones[idx[0]], X) for idx in shared)
        head_of = {i: head for idx, head in zip(shared, heads) for i in idx}
        tasks = []
        for i, est in enumerate(clones):
            if i in head_of:
                tasks.append(delayed(_fit_member)(est.steps[-1][1], head_of[i][1], Y, None))
            else:
                tasks.append(delayed(_fit_member)(est, X, Y, sample_weight))
        fitted = parallel(tasks)
        for i, (steps, _) in head_of.items():
            est = clones[i]
            est.steps = [*steps, (est.steps[-1][0], fitted[i])]
            fitted[i] = est
        return fitted

    def _build_columns(self) -> None:
        """Per member, the ensemble column of each of its columns (None: the same order)."""
        space = LabelSpace(self.classes_)
        columns = []
        for est in self.estimators_:
            own = np.asarray(_final_ranker(est).classes_)
            cols = space.columns_of(own)
            same = len(cols) == len(self.classes_) and np.array_equal(cols, np.arange(len(cols)))
            columns.append(None if same else cols)
        self._member_columns = columns

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        super()._load_state(attributes, arrays)
        self._build_columns()

    # -------------------------------------------------------------- scoring

    def _member_weights(self) -> np.ndarray:
        estimators = self._estimator_list()
        return _check_weights(self.weights, len(estimators))[
            [i for i, (_, est) in enumerate(estimators) if not _is_drop(est)]
        ]

    def _rank_scores(
        self, X: Any, k: int | None, labels: np.ndarray | None = None
    ) -> sp.csr_matrix:
        """The combined scores of the ``k`` best labels of each row (of the whole union
        of the members' candidates when None); with ``labels``, among those columns."""
        check_is_fitted(self)
        n_labels = len(self.classes_)
        n_candidates = min(max(self.candidates, k or 0), n_labels)
        if labels is not None:
            n_candidates = min(n_candidates, len(labels))
        scores = []
        features: dict[tuple, Any] = {}  # X' of transforms that members share
        for est, cols in zip(self.estimators_, self._member_columns):
            ranker = _final_ranker(est)
            key = tuple(id(step) for _, step in est.steps[:-1]) if _is_pipeline(est) else ()
            if key and key in features:
                Xt = features[key]
            else:
                Xt = _member_features(est, X)
                if key:
                    features[key] = Xt
            own_labels = labels
            if cols is not None and labels is not None:
                inverse = np.full(n_labels, -1, dtype=np.int64)
                inverse[cols] = np.arange(len(cols))
                own_labels = np.sort(inverse[labels])
            S = sp.csr_matrix(ranker._scores(Xt, n_candidates, own_labels))
            if S.nnz and np.diff(S.indptr).max() > n_candidates:
                S = _keep_best(S, n_candidates)
            if self.combine == "mean":
                S = sp.csr_matrix(ranker._proba_of(S.copy()))
            if cols is not None:
                S = sp.csr_matrix((S.data, cols[S.indices], S.indptr), shape=(S.shape[0], n_labels))
            scores.append(S)
        combined = combine_scores(
            scores,
            combine=self.combine,
            weights=self._member_weights(),
            n_candidates=n_candidates,
            temperature=self.temperature,
        )
        return combined if k is None else _keep_best(combined, k)

    def predict_topk(
        self, X: Any, k: int | None = None, *, labels: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best labels of each sample by the combined score, best first.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), or texts
            Samples, as ``fit`` takes them.
        k : int or None, default=None
            Labels per sample; None: ``top_k``.
        labels : array-like of shape (n_selected,), default=None
            Rank only these labels (identifiers from ``classes_``): every member scores
            exactly them (see its ``predict_topk``).

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            Label identifiers from ``classes_``; empty slots (fewer than ``k`` labels in
            the members' candidates) as in ``XRLinearClassifier.predict_topk``.
        scores : ndarray of shape (n_samples, k)
            Combined scores; ``-inf`` in empty slots.
        """
        check_is_fitted(self)
        columns = self._label_columns(labels)
        k = self._resolve_k(k, columns)
        idx, val = topk_from_sparse(self._scores(X, k, columns), k)
        return LabelSpace(self.classes_).labels_of(idx), val.astype(np.float32)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        estimators = self.estimators if isinstance(self.estimators, list) else []
        # (None: XR-Linear members, whose tags are the defaults set above)
        members = [e for item in estimators if isinstance(item, tuple) for e in item[1:]]
        members = [e for e in members if hasattr(e, "__sklearn_tags__")]
        if members:
            from sklearn.utils import get_tags

            member_tags = [get_tags(e).input_tags for e in members]
            tags.input_tags.sparse = all(t.sparse for t in member_tags)
            tags.input_tags.string = any(t.string for t in member_tags)
        return tags


def _is_drop(est: Any) -> bool:
    return isinstance(est, str) and est == "drop"
