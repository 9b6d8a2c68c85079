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
"""

from __future__ import annotations

import textwrap
import warnings
from numbers import Integral
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ._labels import LabelSpace
from .metrics import precision_at_k

__all__ = ["MultiLabelRankerMixin", "check_not_raw_text"]


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


class MultiLabelRankerMixin:
    """Mixin (before ``BaseEstimator`` in the bases) of the multi-label rankers.

    Subclasses have ``classes_``, ``target_type_``, the parameters ``top_k``, ``classes``
    and ``sparse_output``, and implement ``_rank_scores(X, k)``: validated ``X`` in, a CSR
    ``(n, L)`` of the scores of each row's ``k`` best labels out (all the labels the search
    reaches when ``k`` is None), plus ``_score_floor`` and ``_proba_of(scores)`` (scores
    mapped into [0, 1]).
    """

    _score_floor: float = 0.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        marker = "    {ranker_output_params}"
        if cls.__doc__ and marker in cls.__doc__:
            shared = textwrap.indent(RANKER_OUTPUT_PARAMS, "    ")
            cls.__doc__ = cls.__doc__.replace(marker, shared)

    def _resolve_k(self, k: int | None) -> int:
        """``k`` (``top_k`` when None) validated, and clipped with a warning to the number
        of labels."""
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
        return int(k)

    def _rank_scores(self, X: Any, k: int | None) -> sp.csr_matrix:  # pragma: no cover
        raise NotImplementedError

    def _proba_of(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        """The scores mapped into [0, 1] (identity by default)."""
        return scores

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

    def decision_function(self, X: Any) -> np.ndarray | sp.csr_matrix:
        """Scores of the labels: ``(n_samples, n_labels)``, dense or CSR (see the class
        docstring), or ``(n_samples,)`` for a two-class 1-D target, as sklearn's binary
        classifiers: ``predict_proba``'s second column minus its first (positive for the
        second class, and ranked as its probability).

        CSR output stores the labels the search reaches; dense output gives the others
        the lowest score the estimator can produce.
        """
        check_is_fitted(self)
        if self._target_type() == "multiclass" and len(self.classes_) == 2:
            P = self.predict_proba(X)
            P = P.toarray() if sp.issparse(P) else P
            return P[:, 1] - P[:, 0]
        S = self._rank_scores(X, None)
        if not self._dense_output():
            return S
        return self._densify(S, self._score_floor)

    def predict_proba(self, X: Any) -> np.ndarray | sp.csr_matrix:
        """Scores in [0, 1] of the labels, ``(n_samples, n_labels)``, dense or CSR.

        They rank labels as :meth:`decision_function` does but are not calibrated
        probabilities. Labels the search does not reach get 0. For a 1-D (multi-class)
        target each row is divided by its sum, so that rows sum to 1 as sklearn's
        classifiers do (a row with no score at all becomes uniform).
        """
        check_is_fitted(self)
        P = self._proba_of(self._rank_scores(X, None))
        if self._target_type() == "multiclass":
            P = sp.csr_matrix(P, dtype=np.float64)
            sums = np.asarray(P.sum(axis=1)).ravel()
            P = sp.diags(np.divide(1.0, sums, out=np.zeros_like(sums), where=sums > 0)) @ P
            if not self._dense_output():
                return sp.csr_matrix(P)
            D = self._densify(sp.csr_matrix(P), 0.0, np.float64)
            D[sums <= 0] = 1.0 / D.shape[1]
            return D
        return self._densify(P, 0.0) if self._dense_output() else P

    def predict(self, X: Any) -> np.ndarray | sp.csr_matrix:
        """The predicted labels.

        1-D target in ``fit``: the best label of each sample (1-D, from ``classes_``).
        Otherwise a 0/1 indicator ``(n_samples, n_labels)`` with the ``top_k`` best labels
        of each row, dense (int) for a dense ``Y`` and CSR otherwise (``sparse_output``).
        The labels are the row's best, whatever their scores: XMC's top-k convention,
        not sklearn's ``predict_proba > 0.5``.
        """
        check_is_fitted(self)
        if self._target_type() == "multiclass":
            S = self._rank_scores(X, 1)
            idx = np.full(S.shape[0], -1, dtype=np.int64)
            nonempty = np.diff(S.indptr) > 0
            idx[nonempty] = S.indices[S.indptr[:-1][nonempty]]
            return LabelSpace(self.classes_).labels_of(idx)
        S = self._rank_scores(X, self._resolve_k(None))
        S = sp.csr_matrix((np.ones(S.nnz, dtype=np.int64), S.indices, S.indptr), shape=S.shape)
        return S.toarray() if self._dense_output() else S

    def score(self, X: Any, y: Any, sample_weight: None = None) -> float:
        """Precision@1 of the predictions against the labels ``y`` (any label format
        ``fit`` accepts; labels unseen in ``fit`` count as misses). For a 1-D target this
        is the accuracy."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by score (precision@1).")
        return precision_at_k(y, self.predict_topk(X, k=1), k=1, classes=self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.target_tags.required = True
        # Y: label collections, a 0/1 indicator, or a 1-D target (one label per sample)
        tags.target_tags.multi_output = True
        return tags
