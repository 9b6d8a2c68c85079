"""What every multi-label ranking estimator shares (XR-Linear, MatchXML, SNM).

The contract of DESIGN.md: ``predict_topk(X, k)`` returns ``(labels, scores)``,
``score`` is precision@1, ``top_k`` larger than the label set is clipped with a warning,
and the outputs follow the target given to ``fit``, as in sklearn's
``OneVsRestClassifier``:

========================== ====================== =====================================
``Y`` in ``fit``           ``predict``            ``decision_function`` /
                                                  ``predict_proba``
========================== ====================== =====================================
1-D (one label per sample) 1-D labels (the best)  dense ``(n, L)``; proba rows sum to 1
dense 0/1 ``(n, L)``       dense 0/1 int          dense ``(n, L)``
sparse 0/1 ``(n, L)``      CSR 0/1                CSR ``(n, L)``
label collections          CSR 0/1                CSR ``(n, L)``
========================== ====================== =====================================

``sparse_output=True`` makes every 2-D output CSR (a dense ``(n, L)`` does not fit in
memory for large label sets). CSR outputs store only the labels the search reached; in
dense outputs the others get the estimator's lowest score (``_score_floor``), and 0 in
``predict_proba``.

The decision rule of multi-label ``predict`` is two parameters, ``top_k`` and
``threshold`` (both tunable by ``GridSearchCV``): a row gets the labels whose
``predict_proba`` score is at least ``threshold``, at most ``top_k`` of them, or exactly its
``top_k`` best labels when ``threshold`` is None. The default ``threshold="auto"`` is
sklearn's multi-label rule (``predict_proba >= 0.5``) for a dense indicator target, where
sklearn's metrics and scorers (``f1_samples``, ``accuracy``...) read ``predict``, and
XMC's top-k for label collections and sparse targets, whose users rank with
``predict_topk`` and the P@k scorers. A 1-D target predicts each row's best label.

Scores. ``decision_function`` gives each ranker's own scores; ``predict_proba`` maps them
monotonically into [0, 1], on a common scale where a label at 0.5 is about as likely
relevant as not, so that one ``threshold`` means roughly the same for every ranker:

* XRLinearClassifier (and MatchXMLClassifier, whose ranker it is): the path score, the
  product along the label's tree path of each node's post-processed score (l3-hinge
  ``exp(-max(1 - v, 0) ** 3)`` by default, or a sigmoid), already in [0, 1]; with
  ``post_processor="noop"`` a sigmoid of the raw score. Not fitted as probabilities and
  on the cautious side (a label scores well only if its ancestors do: on a Reuters slice
  ``threshold=0.5`` kept 0.56 labels per row for 1.2 true ones), so a tuned threshold is
  usually below 0.5;
* SNMClassifier: ``decision_function`` is the cosine of the sample and class vectors, in
  [-1, 1]; ``predict_proba`` is ``sigmoid(a * cosine + b)``, Platt-scaled in ``fit`` on
  training rows (``proba_calibration_``): probabilities of relevance among each row's best
  labels, over-confident where the model over-fits its training data (tune ``threshold``
  on held-out data). Models saved before skxmc had this map cosines linearly to [0, 1] (and
  ``threshold="auto"`` keeps the top-k rule for them);
* a 1-D (multi-class) target: each row of ``predict_proba`` is divided by its sum.

None of them is calibrated on held-out data: for decisions that need probabilities,
tune ``threshold`` (or per-label thresholds) on a validation split, or wrap a 1-D
target in ``CalibratedClassifierCV``.

Two per-call options follow napkinXC and PECOS: ``predict(X, threshold=t)`` gives each
row the labels whose ``predict_proba`` score is at least ``t`` among those the search
reaches (``k`` caps them), and ``labels=subset`` in ``predict``, ``predict_topk``,
``decision_function`` and ``predict_proba`` scores exactly the labels of ``subset``
(PECOS's selected outputs); outputs keep the columns of ``classes_`` and the rules above.
"""

from __future__ import annotations

import sys
import textwrap
import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ._compat import Interval, StrOptions
from ._ranking import topk_from_sparse
from ._sample_weight import check_sample_weight
from .labels import LabelSpace, encode_labels

__all__ = ["THRESHOLD_CONSTRAINT", "MultiLabelRankerMixin", "check_not_raw_text"]


def check_not_raw_text(X: Any, estimator: str) -> None:
    """Raise a clear error when raw strings reach an estimator that needs numeric features
    (sklearn's own message, "could not convert string to float: '<a whole abstract>'",
    does not say what to do)."""
    if isinstance(X, (str, bytes)):
        first = X
    elif isinstance(X, np.ndarray):
        first = X.ravel()[0] if X.dtype.kind in "USO" and X.size else None
    elif hasattr(X, "iloc") and getattr(X, "ndim", 2) == 1:  # pandas Series
        first = X.iloc[0] if len(X) else None
    elif isinstance(X, (list, tuple)):
        first = X[0] if X else None
    else:
        return
    if isinstance(first, (str, bytes)):
        raise ValueError(
            f"{estimator} needs numeric features X (e.g. TF-IDF), got raw text. Put a "
            f"vectorizer first: make_pipeline(TfidfVectorizer(dtype=np.float32), "
            f"{estimator}())."
        )


#: The parameters every ranker shares, documented once: a subclass's docstring holds the
#: line ``{ranker_output_params}`` where they belong (``__init_subclass__`` fills it).
RANKER_OUTPUT_PARAMS = """\
threshold : "auto", float, array-like of shape (n_labels,) or None, default="auto"
    The decision rule of multi-label ``predict``, with ``top_k``: each row gets the labels
    whose :meth:`predict_proba` score is at least ``threshold`` (one number in [0, 1], or
    one per label of ``classes_``), at most ``top_k`` of them, and possibly none. None:
    exactly the ``top_k`` best labels of each row, whatever their scores (XMC's
    convention). ``"auto"``: 0.5 when ``Y`` is a dense 0/1 indicator (sklearn's
    multi-label ``predict``, which ``f1_samples``, ``accuracy`` and the other sklearn
    scorers read), None for label collections and sparse ``Y`` (rank with
    ``predict_topk`` and the P@k scorers). Tune it on held-out data like any parameter
    (``GridSearchCV(clf, {"threshold": [0.1, 0.2, 0.3, 0.5]}, scoring="f1_samples")``).
    A 1-D target ignores ``"auto"`` and None and refuses a number: ``predict`` gives the
    best label; tune a binary decision threshold with ``TunedThresholdClassifierCV``,
    which reads ``predict_proba``.
classes : array-like of shape (n_labels,), default=None
    A fixed label space (as ``MultiLabelBinarizer(classes=...)``): the columns of every
    output, in this order; labels of ``Y`` outside it are ignored with a warning. Set it
    for ``cross_val_predict`` on label collections, where each fold would otherwise learn
    its own columns. None: the labels seen in ``fit``.
sparse_output : bool, default=False
    Return CSR from ``predict``, ``decision_function`` and ``predict_proba`` whatever the
    target. False: outputs follow ``Y`` as in sklearn's ``OneVsRestClassifier`` (1-D
    labels for a 1-D target, dense for a dense indicator, CSR for sparse ``Y`` or label
    collections). Set it with a dense ``Y`` of many labels."""


#: ``_parameter_constraints`` entry of ``threshold`` (per-label arrays are checked against
#: ``classes_`` at predict time).
THRESHOLD_CONSTRAINT: list = [
    StrOptions({"auto"}),
    Interval(Real, 0, 1, closed="both"),
    "array-like",
    None,
]


#: Calls between sklearn's ``_fit_and_predict`` and a ranker's output method (a Pipeline
#: and its ``available_if`` wrappers add a few).
_FRAMES_TO_FOLD = 12


class MultiLabelRankerMixin:
    """Mixin (before ``BaseEstimator`` in the bases) of the multi-label rankers.

    Subclasses have ``classes_``, ``target_type_``, the parameters ``top_k``, ``classes``
    and ``sparse_output``, and implement ``_rank_scores(X, k, labels=None)``: validated
    ``X`` in, a CSR ``(n, L)`` of the scores of each row's ``k`` best labels out (all the
    labels the search reaches when ``k`` is None); with ``labels`` (sorted distinct column
    indices, from :meth:`_label_columns`) the scores of exactly those labels (their ``k``
    best when ``k`` is set). Plus ``_score_floor`` and ``_proba_of(scores)`` (scores mapped
    into [0, 1], monotonically). ``_above_threshold`` may be overridden when scoring every
    reachable label at once would not fit in memory.
    """

    _score_floor: float = 0.0
    # False where predict_proba is not on the common scale (an SNM model saved before its
    # Platt scaling): threshold="auto" then keeps the top-k rule.
    _proba_on_common_scale: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        marker = "    {ranker_output_params}"
        if cls.__doc__ and marker in cls.__doc__:
            shared = textwrap.indent(RANKER_OUTPUT_PARAMS, "    ")
            cls.__doc__ = cls.__doc__.replace(marker, shared)

    def _resolve_k(self, k: int | None, columns: np.ndarray | None = None) -> int:
        """``k`` (``top_k`` when None) validated, and clipped with a warning to the number
        of labels; with a label subset (``columns``) also clipped, silently, to its size."""
        k = self.top_k if k is None else k
        if isinstance(k, bool) or not isinstance(k, (Integral, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}.")
        n_labels = len(self.classes_)
        if k > n_labels:
            warnings.warn(
                f"top_k={k} exceeds the {n_labels} labels; returning {n_labels} per sample.",
                UserWarning,
                stacklevel=3,
            )
            k = n_labels
        if columns is not None:
            k = min(k, len(columns))
        return int(k)

    def _label_columns(self, labels: Any) -> np.ndarray | None:
        """The sorted distinct columns of the label identifiers ``labels`` (None: None);
        raises when one is not in ``classes_``."""
        if labels is None:
            return None
        if isinstance(labels, (set, frozenset)):
            labels = list(labels)
        try:
            arr = np.asarray(labels)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.ndim != 1 or arr.size == 0:
            raise ValueError(
                f"labels must be a non-empty 1-D array-like of label identifiers from "
                f"classes_ (a single label goes in a list: labels=[label]), got {labels!r}."
            )
        try:
            columns = LabelSpace(self.classes_).columns_of(arr)
        except TypeError:  # unhashable entries (nested lists) are no label identifiers
            columns = np.full(len(arr), -1, dtype=np.int64)
        unknown = columns < 0
        if unknown.any():
            missing = arr[unknown]
            raise ValueError(
                f"labels holds {int(unknown.sum())} value(s) that are not in classes_ (the "
                f"labels seen in fit), e.g. {missing[:5].tolist()!r}; classes_ is "
                f"{self.classes_[:5].tolist()!r}{' ...' if len(self.classes_) > 5 else ''}."
            )
        return np.unique(columns)

    def _check_threshold(self, threshold: Any) -> float | np.ndarray:
        """``threshold`` validated: a number in [0, 1] or one per label (``(n_labels,)``)."""
        n_labels = len(self.classes_)
        expected = (
            f"threshold must be a number in [0, 1] (on the predict_proba scale) or an "
            f"array-like of shape (n_labels,) = ({n_labels},) of such numbers, one per "
            f"label of classes_"
        )
        if isinstance(threshold, (bool, np.bool_)):
            raise ValueError(f"{expected}; got {threshold!r}.")
        if isinstance(threshold, (Real, np.number)):
            value = float(threshold)
            if not 0.0 <= value <= 1.0:  # also rejects NaN
                raise ValueError(f"{expected}; got {threshold!r}.")
            return value
        try:
            arr = np.asarray(threshold)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.shape != (n_labels,) or arr.dtype.kind not in "iuf":
            shape = None if arr is None else arr.shape
            raise ValueError(f"{expected}; got {type(threshold).__name__} of shape {shape}.")
        arr = arr.astype(np.float64)
        bad = ~((arr >= 0.0) & (arr <= 1.0))
        if bad.any():
            raise ValueError(
                f"{expected}; entry {int(np.flatnonzero(bad)[0])} is {float(arr[bad][0])!r}."
            )
        return arr

    def _decision_threshold(self) -> float | np.ndarray | None:
        """The ``threshold`` parameter resolved for this fit: None (top-k), a number or
        one per label. Models saved before the parameter existed read as ``"auto"``."""
        threshold = getattr(self, "threshold", "auto")
        if isinstance(threshold, str) and threshold == "auto":
            dense = self._target_type() == "multilabel-indicator"
            return 0.5 if dense and self._proba_on_common_scale else None
        if self._target_type() == "multiclass":
            if threshold is None:
                return None
            raise ValueError(
                f"threshold={threshold!r} applies to multi-label targets; this "
                f"{type(self).__name__} was fitted on a 1-D target and predicts the best "
                f"label of each sample. Leave threshold='auto'; for a binary target tune the "
                f"decision threshold with sklearn's TunedThresholdClassifierCV."
            )
        return None if threshold is None else self._check_threshold(threshold)

    def _check_fold_columns(self) -> None:
        """In sklearn's ``cross_val_predict``, refuse label collections without a fixed
        ``classes`` when this fold learned fewer labels than ``Y`` holds: the folds'
        CSR outputs would have different widths, which scipy reports as "incompatible
        dimensions for axis 1" when sklearn stacks them."""
        if getattr(self, "classes", None) is not None:
            return
        if self._target_type() != "multilabel-sequences":
            return
        frame, y = sys._getframe(1), None
        for _ in range(_FRAMES_TO_FOLD):
            if frame is None:
                break
            if frame.f_code.co_name == "_fit_and_predict" and str(
                frame.f_globals.get("__name__", "")
            ).startswith("sklearn.model_selection"):
                y = frame.f_locals.get("y")
                break
            frame = frame.f_back
        del frame
        if y is None:
            return
        try:
            n_all = len(encode_labels(y, name="Y")[1])
        except (TypeError, ValueError):
            return
        if n_all == len(self.classes_):
            return
        name = type(self).__name__
        raise ValueError(
            f"cross_val_predict on label collections: this fold's {name} learned "
            f"{len(self.classes_)} labels but Y holds {n_all}, so the folds' predictions "
            f"would have different columns. Fix the columns with the classes parameter, "
            f"e.g. {name}(classes=MultiLabelBinarizer().fit(Y).classes_) (in a Pipeline: "
            f"set_params(<step>__classes=...))."
        )

    def _rank_scores(  # pragma: no cover
        self, X: Any, k: int | None, labels: np.ndarray | None = None
    ) -> sp.csr_matrix:
        raise NotImplementedError

    def _scores(self, X: Any, k: int | None, columns: np.ndarray | None) -> sp.csr_matrix:
        # Without a subset the call keeps the two-argument form of _rank_scores.
        if columns is None:
            return self._rank_scores(X, k)
        return self._rank_scores(X, k, labels=columns)

    def _proba_of(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        """The scores mapped into [0, 1] (identity by default)."""
        return scores

    def _above_threshold(
        self, X: Any, threshold: float | np.ndarray, columns: np.ndarray | None
    ) -> sp.csr_matrix:
        """CSR of the :meth:`_proba_of` scores that reach ``threshold``, among the labels
        the search reaches (``columns``: among exactly those labels)."""
        P = sp.csr_matrix(self._proba_of(self._scores(X, None, columns)))
        return _keep_entries(P, P.data >= _per_entry(threshold, P.indices))

    # -------------------------------------------------------------- outputs

    def _target_type(self) -> str:
        # Models fitted (and saved) before target_type_ existed always gave CSR.
        return getattr(self, "target_type_", "multilabel-sparse")

    def _dense_output(self) -> bool:
        if self.sparse_output:
            return False
        return self._target_type() in ("multiclass", "multilabel-indicator")

    @staticmethod
    def _densify(S: sp.csr_matrix, fill: float, dtype: Any = np.float32) -> np.ndarray:
        out = np.full(S.shape, fill, dtype=dtype)
        rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
        out[rows, S.indices] = S.data
        return out

    def decision_function(self, X: Any, *, labels: Any = None) -> np.ndarray | sp.csr_matrix:
        """Scores of the labels.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Samples, as ``fit`` takes them.
        labels : array-like of shape (n_selected,), default=None
            Score exactly these labels (identifiers from ``classes_``), PECOS's "selected
            outputs": each gets its exact score, reached by the search or not (see the
            estimator's ``predict_topk``), and no other label is scored. The output keeps
            the columns of ``classes_``. None: the labels the search reaches.

        Returns
        -------
        scores : ndarray or csr_matrix of shape (n_samples, n_labels), or (n_samples,)
            Dense or CSR (see the class docstring), or ``(n_samples,)`` for a two-class
            1-D target, as sklearn's binary classifiers: ``predict_proba``'s second column
            minus its first (positive for the second class, and ranked as its
            probability). CSR output stores the labels scored; dense output gives the
            others the lowest score the estimator can produce.
        """
        check_is_fitted(self)
        self._check_fold_columns()
        columns = self._label_columns(labels)
        if self._target_type() == "multiclass" and len(self.classes_) == 2:
            P = self.predict_proba(X, labels=labels)
            P = P.toarray() if sp.issparse(P) else P
            return P[:, 1] - P[:, 0]
        S = self._scores(X, None, columns)
        if not self._dense_output():
            return S
        return self._densify(S, self._score_floor)

    def predict_proba(self, X: Any, *, labels: Any = None) -> np.ndarray | sp.csr_matrix:
        """Scores in [0, 1] of the labels, ``(n_samples, n_labels)``, dense or CSR.

        They rank labels as :meth:`decision_function` does, on one scale across the
        rankers, so that a ``threshold`` means roughly the same for each (see "Scores"
        in :mod:`skxmc._base`). Labels not scored (not reached by the search, or outside
        ``labels``) get 0. For a 1-D (multi-class) target each row is divided by its sum,
        so that rows sum to 1 as sklearn's classifiers do (a row with no score at all
        becomes uniform, over ``labels`` when given).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Samples, as ``fit`` takes them.
        labels : array-like of shape (n_selected,), default=None
            Score exactly these labels (identifiers from ``classes_``), as in
            :meth:`decision_function`.

        Returns
        -------
        proba : ndarray or csr_matrix of shape (n_samples, n_labels)
        """
        check_is_fitted(self)
        self._check_fold_columns()
        columns = self._label_columns(labels)
        P = self._proba_of(self._scores(X, None, columns))
        if self._target_type() == "multiclass":
            P = sp.csr_matrix(P, dtype=np.float64)
            sums = np.asarray(P.sum(axis=1)).ravel()
            P = sp.diags(np.divide(1.0, sums, out=np.zeros_like(sums), where=sums > 0)) @ P
            if not self._dense_output():
                return sp.csr_matrix(P)
            D = self._densify(sp.csr_matrix(P), 0.0, np.float64)
            empty = sums <= 0
            if columns is None:
                D[empty] = 1.0 / D.shape[1]
            else:
                D[np.ix_(empty, columns)] = 1.0 / len(columns)
            return D
        return self._densify(P, 0.0) if self._dense_output() else P

    def predict(
        self, X: Any, *, threshold: Any = None, k: int | None = None, labels: Any = None
    ) -> np.ndarray | sp.csr_matrix:
        """The predicted labels.

        1-D target in ``fit``: the best label of each sample (1-D, from ``classes_``).
        Otherwise a 0/1 indicator ``(n_samples, n_labels)``, dense (int) for a dense ``Y``
        and CSR otherwise (``sparse_output``), with in each row:

        * by default the estimator's decision rule, its ``threshold`` and ``top_k``
          parameters: the labels whose :meth:`predict_proba` score is at least
          ``threshold``, at most ``top_k`` (or ``k``) of them, or exactly the ``top_k``
          (or ``k``) best labels when the resolved ``threshold`` is None (XMC's top-k
          convention, the default for label collections and sparse ``Y``;
          ``threshold="auto"`` is 0.5 for a dense indicator ``Y``, as sklearn's
          ``predict_proba >= 0.5``);
        * with the ``threshold`` keyword, for this call, the labels whose
          :meth:`predict_proba` score is at least ``threshold`` (napkinXC's
          ``predict(X, threshold=...)``); ``k`` then caps each row to its ``k`` best (no
          cap when None: ``top_k`` does not apply to the keyword).

        A threshold keeps labels among those the search reaches: a label the search does
        not reach is never predicted, even at ``threshold=0``, and a row may get no label
        at all.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Samples, as ``fit`` takes them.
        threshold : float or array-like of shape (n_labels,), default=None
            Lowest :meth:`predict_proba` score (in [0, 1]) of a predicted label, or one
            such bound per label of ``classes_`` (per-label thresholds, e.g. tuned on
            validation data), for this call. None: the ``threshold`` parameter (which
            ``GridSearchCV`` can tune; prefer it). Multi-label targets only: for a 1-D
            target use ``predict_proba(X) >= threshold``.
        k : int, default=None
            Labels per row (at most ``k`` under a threshold): ``top_k`` when None, except
            that the ``threshold`` keyword alone has no cap. Multi-label targets only.
        labels : array-like of shape (n_selected,), default=None
            Predict among these labels only (identifiers from ``classes_``), scored
            exactly as in :meth:`decision_function`; the output keeps the columns of
            ``classes_``, and rows get at most ``len(labels)`` labels.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_labels), or csr_matrix
        """
        check_is_fitted(self)
        self._check_fold_columns()
        columns = self._label_columns(labels)
        if self._target_type() == "multiclass":
            self._decision_threshold()  # refuses a number for a 1-D target
            if threshold is not None or k is not None:
                raise ValueError(
                    f"threshold and k apply to multi-label targets; this "
                    f"{type(self).__name__} was fitted on a 1-D target and predicts one label "
                    f"per sample (got threshold={threshold!r}, k={k!r}). Use "
                    f"predict_proba(X) >= threshold, or predict_topk(X, k)."
                )
            S = self._scores(X, 1, columns)
            idx = np.full(S.shape[0], -1, dtype=np.int64)
            nonempty = np.diff(S.indptr) > 0
            idx[nonempty] = S.indices[S.indptr[:-1][nonempty]]
            return LabelSpace(self.classes_).labels_of(idx)
        if threshold is not None:
            # The per-call threshold: capped by k only (no cap when None), as before.
            threshold = self._check_threshold(threshold)
            cap = None if k is None else self._resolve_k(k, columns)
        else:
            threshold = self._decision_threshold()
            cap = self._resolve_k(k, columns)
        if threshold is None:
            S = self._scores(X, cap, columns)
        else:
            S = self._above_threshold(X, threshold, columns)
            if cap is not None:
                S = _keep_best(S, cap)
        S = sp.csr_matrix((np.ones(S.nnz, dtype=np.int64), S.indices, S.indptr), shape=S.shape)
        S.sort_indices()
        return S.toarray() if self._dense_output() else S

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Precision@1 of the predictions against the labels ``y`` (any label format
        ``fit`` accepts; labels unseen in ``fit`` count as misses). For a 1-D target this
        is the accuracy. With ``sample_weight`` (finite, non-negative, not all 0), the
        weighted mean of the rows' precision@1."""
        # Imported here: the mixin is the estimators' base, the metrics are a user-facing
        # module of their own; score is the one place the two meet.
        from .metrics import _rank, precision_at_k

        top1 = self.predict_topk(X, k=1)
        if sample_weight is None:
            return precision_at_k(y, top1, k=1, classes=self.classes_)
        weights = check_sample_weight(sample_weight, top1[0].shape[0])
        hits = _rank(y, top1, 1, self.classes_).hits[:, :1].sum(axis=1, dtype=np.float64)
        return float(np.average(hits, weights=weights))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.target_tags.required = True
        # Y: label collections, a 0/1 indicator, or a 1-D target (one label per sample)
        tags.target_tags.multi_output = True
        return tags


def _per_entry(threshold: float | np.ndarray, indices: np.ndarray) -> float | np.ndarray:
    """The threshold of each stored entry (a per-label array is gathered by column)."""
    return threshold if np.isscalar(threshold) else threshold[indices]


def _keep_entries(S: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    """The entries of ``S`` where ``keep`` is True (rows keep their order)."""
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    return sp.csr_matrix(
        (S.data[keep], S.indices[keep], kept_before[S.indptr]), shape=S.shape, dtype=S.dtype
    )


def _keep_best(S: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """The ``k`` best stored entries of every row (ties: lower column first)."""
    idx, val = topk_from_sparse(S, k)
    keep = idx >= 0
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    return sp.csr_matrix((val[keep].astype(np.float32), idx[keep], indptr), shape=S.shape)
