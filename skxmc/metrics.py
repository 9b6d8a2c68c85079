"""Ranking metrics for extreme multi-label classification: P@k, R@k, nDCG@k, PSP@k, PSnDCG@k.

All metrics are computed in O(nnz) from the top-k of each row: a dense ``(n, L)`` array is
never built (except when the caller passes dense scores). Formulas follow napkinXC's
``napkinxc.metrics`` and pyxclib; see the "Metrics" page of the documentation.

Inputs
------
``Y_true``
    Anything :mod:`skxmc` accepts as labels: a 0/1 CSR / sparse / dense indicator matrix, or
    a sequence of label collections. With label collections, pass ``classes`` (for example
    ``clf.classes_``) to say which label each score column stands for; without it, integer
    labels are taken as column indices.
``Y_score``
    One of: a sparse score matrix (only stored entries are candidates), a dense score
    matrix ``(n, L)``, or a pair ``(indices, scores)`` of ``(n, m)`` arrays as returned by
    ``predict_topk`` (indices ``< 0`` are empty slots; the pair's first array may also hold
    label identifiers, mapped through ``classes``).

Ties between equal scores are broken deterministically in favour of the lower column index.
Labels in ``Y_true`` that are outside the score columns (unseen at fit time) are never
predicted, so they count as misses: they add to the number of relevant labels used by
recall and nDCG, and they have no propensity, so they are left out of the best achievable
propensity-scored ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._labels import LabelSpace, encode_labels
from ._ranking import (
    top_truth_weights,
    topk_from_dense,
    topk_from_pairs,
    topk_from_sparse,
    truth_hits,
)

__all__ = [
    "evaluate",
    "inverse_propensity",
    "make_topk_scorer",
    "ndcg_at_k",
    "precision_at_k",
    "psndcg_at_k",
    "psprecision_at_k",
    "recall_at_k",
]


@dataclass
class _Ranked:
    """Top-k ranking of the predictions aligned with the truth."""

    hits: np.ndarray  # (n, k) uint8
    top_idx: np.ndarray  # (n, k) column indices, -1 for empty slots
    truth: sp.csr_matrix  # (n, L) relevant labels over the score columns
    n_relevant: np.ndarray  # (n,) relevant labels per row, unknown ones included


def _check_k(k: Any, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}.")
    return int(k)


def _is_pair(Y_score: Any) -> bool:
    return isinstance(Y_score, tuple) and len(Y_score) == 2


def _n_score_columns(Y_score: Any) -> int | None:
    if _is_pair(Y_score):
        return None
    if sp.issparse(Y_score):
        return Y_score.shape[1]
    arr = np.asarray(Y_score)
    return arr.shape[1] if arr.ndim == 2 else None


def _encode_truth(Y_true: Any, classes: Any, n_columns: int | None) -> tuple[sp.csr_matrix, np.ndarray]:
    """Truth as CSR over the score columns plus per-row counts of unknown labels."""
    if classes is not None:
        space = LabelSpace(np.asarray(classes))
        if n_columns is not None and n_columns != space.n_labels:
            raise ValueError(
                f"Y_score has {n_columns} columns but classes has {space.n_labels} labels."
            )
        enc = space.transform(Y_true, name="Y_true")
        return enc.Y, enc.n_unknown
    Y, truth_classes = encode_labels(Y_true, name="Y_true")
    is_matrix = sp.issparse(Y_true) or (
        isinstance(Y_true, np.ndarray) and Y_true.dtype.kind in "biuf" and Y_true.ndim == 2
    )
    if is_matrix:
        if n_columns is not None and Y.shape[1] != n_columns:
            raise ValueError(
                f"Y_true has {Y.shape[1]} columns but Y_score has {n_columns}; both must "
                f"index the same labels."
            )
        return Y, np.zeros(Y.shape[0], dtype=np.int64)
    if truth_classes.dtype.kind not in "iu":
        raise ValueError(
            "Y_true holds label names; pass classes= (e.g. clf.classes_) to say which label "
            "each column of Y_score stands for."
        )
    # Integer labels are column indices; labels outside the columns are unseen ones.
    width = n_columns if n_columns is not None else int(truth_classes.max(initial=-1)) + 1
    if len(truth_classes) and truth_classes.min() < 0:
        raise ValueError("Y_true holds negative integer labels; they cannot be column indices.")
    enc = LabelSpace(np.arange(width)).transform(Y_true, name="Y_true")
    return enc.Y, enc.n_unknown


def _pair_indices(indices: Any, classes: Any) -> np.ndarray:
    """Column indices of a ``(labels, scores)`` pair: labels are mapped through ``classes``
    (empty slots and unknown labels become -1); without ``classes`` they must be indices."""
    idx = np.asarray(indices)
    if classes is None:
        if idx.dtype.kind not in "iu":
            raise ValueError(
                "Y_score (labels, scores) holds label identifiers; pass classes= (e.g. "
                "clf.classes_) to map them to columns."
            )
        return idx
    return LabelSpace(np.asarray(classes)).columns_of(idx.ravel()).reshape(idx.shape)


def _rank(Y_true: Any, Y_score: Any, k: int, classes: Any = None) -> _Ranked:
    n_columns = _n_score_columns(Y_score)
    truth, n_unknown = _encode_truth(Y_true, classes, n_columns)
    if _is_pair(Y_score):
        idx = _pair_indices(Y_score[0], classes)
        top_idx, _ = topk_from_pairs(idx, Y_score[1], k)
        if top_idx.size and top_idx.max() >= truth.shape[1]:
            # Integer-labelled truth without classes: widen so that extra predicted columns
            # are plain misses.
            truth = sp.csr_matrix(
                (truth.data, truth.indices, truth.indptr),
                shape=(truth.shape[0], int(top_idx.max()) + 1),
            )
    elif sp.issparse(Y_score):
        top_idx, _ = topk_from_sparse(Y_score, k)
    else:
        scores = np.asarray(Y_score)
        if scores.ndim != 2 or scores.dtype.kind not in "biuf":
            raise ValueError(
                "Y_score must be a sparse or dense 2-D score matrix or an (indices, scores) "
                f"pair of arrays; got {type(Y_score).__name__} with shape {scores.shape}."
            )
        top_idx, _ = topk_from_dense(scores, k)
    if top_idx.shape[0] != truth.shape[0]:
        raise ValueError(
            f"Y_true has {truth.shape[0]} rows but Y_score has {top_idx.shape[0]}; they must "
            f"describe the same samples."
        )
    if truth.shape[0] == 0:
        raise ValueError("Y_true and Y_score have no rows; metrics need at least one sample.")
    n_relevant = np.diff(truth.indptr).astype(np.int64) + n_unknown
    return _Ranked(truth_hits(top_idx, truth), top_idx, truth, n_relevant)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2))


def _check_inv_propensity(inv_propensity: Any, n_labels: int) -> np.ndarray:
    if inv_propensity is None:
        raise ValueError(
            "inv_propensity is required for propensity-scored metrics; compute it with "
            "skxmc.metrics.inverse_propensity(Y_train)."
        )
    w = np.asarray(inv_propensity, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"inv_propensity must be 1-D, got shape {w.shape}.")
    if len(w) < n_labels:
        raise ValueError(
            f"inv_propensity has {len(w)} entries but the scores index {n_labels} labels."
        )
    if not np.all(np.isfinite(w)) or (w.size and w.min() < 0):
        raise ValueError("inv_propensity must be finite and non-negative.")
    return w


def _ndcg_norm(n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Ideal DCG per row: the sum of the first min(k, #relevant) discounts (0 if none)."""
    ideal = np.concatenate([[0.0], np.cumsum(_discounts(k))])
    return ideal[np.minimum(n_relevant, k)]


def _precision(r: _Ranked, k: int) -> float:
    return float(r.hits[:, :k].sum(axis=1, dtype=np.float64).mean() / k)


def _recall(r: _Ranked, k: int) -> float:
    found = r.hits[:, :k].sum(axis=1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_row = np.where(r.n_relevant > 0, found / np.maximum(r.n_relevant, 1), 0.0)
    return float(per_row.mean())


def _ndcg(r: _Ranked, k: int) -> float:
    dcg = r.hits[:, :k] @ _discounts(k)
    norm = _ndcg_norm(r.n_relevant, k)
    per_row = np.divide(dcg, norm, out=np.zeros_like(dcg), where=norm > 0)
    return float(per_row.mean())


def _ps_gain(r: _Ranked, k: int, w: np.ndarray) -> np.ndarray:
    top = r.top_idx[:, :k]
    return r.hits[:, :k] * w[np.where(top < 0, 0, top)]


def _psprecision(r: _Ranked, k: int, w: np.ndarray, normalize: bool) -> float:
    gained = _ps_gain(r, k, w).sum(axis=1) / k
    if not normalize:
        return float(gained.mean())
    best = top_truth_weights(r.truth, w, k).sum(axis=1) / k
    return float(gained.sum() / best.sum()) if best.sum() > 0 else 0.0


def _psndcg(r: _Ranked, k: int, w: np.ndarray, normalize: bool) -> float:
    disc = _discounts(k)
    norm = _ndcg_norm(r.n_relevant, k)
    safe = np.where(norm > 0, norm, 1.0)
    gained = np.where(norm > 0, (_ps_gain(r, k, w) @ disc) / safe, 0.0)
    if not normalize:
        return float(gained.mean())
    best = np.where(norm > 0, (top_truth_weights(r.truth, w, k) @ disc) / safe, 0.0)
    return float(gained.sum() / best.sum()) if best.sum() > 0 else 0.0


def precision_at_k(Y_true: Any, Y_score: Any, *, k: int = 5, classes: Any = None) -> float:
    r"""Precision at k: the fraction of the top-k predicted labels that are relevant.

    .. math:: P@k = \frac{1}{n} \sum_i \frac{1}{k} \sum_{j=1}^{k} y_{i, r_i(j)}

    Rows with fewer than ``k`` candidates still divide by ``k`` (as napkinXC and pyxclib do).

    Parameters
    ----------
    Y_true : sparse matrix, ndarray or sequence of label collections
        Relevant labels.
    Y_score : sparse matrix, ndarray or tuple (indices, scores)
        Predicted scores, see the module docstring.
    k : int, default=5
        Cut-off rank.
    classes : array-like, optional
        Label identifier of each score column (``clf.classes_``), needed when ``Y_true``
        holds label names.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.metrics import precision_at_k
    >>> Y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> precision_at_k(Y_true, scores, k=1)
    1.0
    >>> precision_at_k(Y_true, scores, k=2)
    0.5
    """
    k = _check_k(k)
    return _precision(_rank(Y_true, Y_score, k, classes), k)


def recall_at_k(Y_true: Any, Y_score: Any, *, k: int = 5, classes: Any = None) -> float:
    r"""Recall at k: the fraction of each row's relevant labels found in its top k.

    .. math:: R@k = \frac{1}{n} \sum_i \frac{1}{|y_i|} \sum_{j=1}^{k} y_{i, r_i(j)}

    Rows without relevant labels contribute 0. Parameters as :func:`precision_at_k`.

    Examples
    --------
    >>> from skxmc.metrics import recall_at_k
    >>> recall_at_k([[0, 2], [1]], np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]]), k=1)
    0.75
    """
    k = _check_k(k)
    return _recall(_rank(Y_true, Y_score, k, classes), k)


def ndcg_at_k(Y_true: Any, Y_score: Any, *, k: int = 5, classes: Any = None) -> float:
    r"""Normalised discounted cumulative gain at k.

    .. math:: nDCG@k = \frac{1}{n} \sum_i \frac{\sum_{j=1}^{k} y_{i, r_i(j)} / \log_2(j + 1)}
              {\sum_{j=1}^{\min(k, |y_i|)} 1 / \log_2(j + 1)}

    Rows without relevant labels contribute 0. Parameters as :func:`precision_at_k`.

    Examples
    --------
    >>> from skxmc.metrics import ndcg_at_k
    >>> round(ndcg_at_k(np.array([[0, 1, 1]]), np.array([[0.9, 0.5, 0.1]]), k=2), 4)
    0.3869
    """
    k = _check_k(k)
    return _ndcg(_rank(Y_true, Y_score, k, classes), k)


def psprecision_at_k(
    Y_true: Any,
    Y_score: Any,
    *,
    inv_propensity: Any,
    k: int = 5,
    normalize: bool = False,
    classes: Any = None,
) -> float:
    r"""Propensity-scored precision at k (Jain et al., 2016).

    .. math:: PSP@k = \frac{1}{n} \sum_i \frac{1}{k} \sum_{j=1}^{k}
              \frac{y_{i, r_i(j)}}{p_{r_i(j)}}

    With ``normalize=True`` the sum is divided by the same sum for the best achievable
    ranking (each row's relevant labels sorted by inverse propensity), as pyxclib and
    napkinXC (``normalize=True``) report it.

    Parameters
    ----------
    Y_true, Y_score, k, classes
        As in :func:`precision_at_k`.
    inv_propensity : array-like of shape (n_labels,)
        Inverse propensity ``1 / p_l`` of every score column, see :func:`inverse_propensity`.
    normalize : bool, default=False
        Divide by the best achievable value.

    Examples
    --------
    >>> from skxmc.metrics import psprecision_at_k
    >>> Y = np.array([[1, 0], [0, 1]])
    >>> psprecision_at_k(Y, np.eye(2), inv_propensity=[2.0, 4.0], k=1)
    3.0
    """
    k = _check_k(k)
    r = _rank(Y_true, Y_score, k, classes)
    return _psprecision(r, k, _check_inv_propensity(inv_propensity, r.truth.shape[1]), normalize)


def psndcg_at_k(
    Y_true: Any,
    Y_score: Any,
    *,
    inv_propensity: Any,
    k: int = 5,
    normalize: bool = False,
    classes: Any = None,
) -> float:
    r"""Propensity-scored nDCG at k.

    .. math:: PSnDCG@k = \frac{1}{n} \sum_i \frac{\sum_{j=1}^{k} y_{i, r_i(j)} /
              (p_{r_i(j)} \log_2(j + 1))}{\sum_{j=1}^{\min(k, |y_i|)} 1 / \log_2(j + 1)}

    ``normalize=True`` divides by the same quantity for the best achievable ranking.
    Parameters as :func:`psprecision_at_k`.

    Examples
    --------
    >>> from skxmc.metrics import psndcg_at_k
    >>> psndcg_at_k(np.array([[1, 0], [0, 1]]), np.eye(2), inv_propensity=[2.0, 4.0], k=1,
    ...             normalize=True)
    1.0
    """
    k = _check_k(k)
    r = _rank(Y_true, Y_score, k, classes)
    return _psndcg(r, k, _check_inv_propensity(inv_propensity, r.truth.shape[1]), normalize)


def inverse_propensity(
    Y_train: Any, *, A: float = 0.55, B: float = 1.5, classes: Any = None
) -> np.ndarray:
    r"""Inverse label propensities of Jain et al. (2016) from the training labels.

    .. math:: \frac{1}{p_l} = 1 + (\log N - 1)(B + 1)^A (N_l + B)^{-A}

    where ``N`` is the number of training samples and ``N_l`` the number with label ``l``.
    Usual values (Jain et al.; pyxclib; napkinXC): ``A=0.55, B=1.5`` (default, e.g.
    EURLex-4K, AmazonCat-13K, and what we use for every dataset in ``shared/data``);
    ``A=0.5, B=0.4`` for Wikipedia datasets (WikiLSHTC-325K, WikipediaLarge-500K);
    ``A=0.6, B=2.6`` for Amazon datasets (Amazon-670K, Amazon-3M).

    Parameters
    ----------
    Y_train : sparse matrix, ndarray or sequence of label collections
        Training labels.
    A, B : float
        Dataset-specific constants.
    classes : array-like, optional
        Return propensities in this column order (``clf.classes_``); labels of
        ``classes`` absent from ``Y_train`` get ``N_l = 0``.

    Returns
    -------
    ndarray of shape (n_labels,)

    Examples
    --------
    >>> from skxmc.metrics import inverse_propensity
    >>> inverse_propensity([["a"], ["a", "b"], ["a"]]).round(3)
    array([1.068, 1.109])
    """
    if classes is not None:
        Y = LabelSpace(np.asarray(classes)).transform(Y_train, name="Y_train").Y
    else:
        Y = encode_labels(Y_train, name="Y_train")[0]
    n = Y.shape[0]
    if n < 3:
        # log(N) - 1 < 0 below e samples: the formula would give propensities above 1.
        raise ValueError(f"Y_train has {n} rows; inverse_propensity needs at least 3.")
    counts = np.bincount(Y.indices, minlength=Y.shape[1]).astype(np.float64)
    c = (np.log(n) - 1.0) * (B + 1.0) ** A
    return 1.0 + c * (counts + B) ** (-A)


_METRIC_NAMES = ("precision", "recall", "ndcg", "psprecision", "psndcg")


def evaluate(
    Y_true: Any,
    Y_score: Any,
    *,
    ks: Sequence[int] = (1, 3, 5),
    inv_propensity: Any = None,
    normalize: bool = False,
    classes: Any = None,
) -> dict[str, float]:
    """All ranking metrics at several cut-offs, ranking the predictions once.

    Returns a dict with keys ``"precision@k"``, ``"recall@k"``, ``"ndcg@k"`` and, when
    ``inv_propensity`` is given, ``"psprecision@k"`` and ``"psndcg@k"`` for each ``k``.

    Examples
    --------
    >>> from skxmc.metrics import evaluate
    >>> evaluate(np.array([[1, 0, 1]]), np.array([[0.9, 0.5, 0.1]]), ks=(1, 2))
    {'precision@1': 1.0, 'recall@1': 0.5, 'ndcg@1': 1.0, 'precision@2': 0.5, 'recall@2': 0.5, 'ndcg@2': 0.6131471927654584}
    """
    ks = [_check_k(k, "ks") for k in ks]
    if not ks:
        raise ValueError("ks must list at least one cut-off.")
    r = _rank(Y_true, Y_score, max(ks), classes)
    w = None
    if inv_propensity is not None:
        w = _check_inv_propensity(inv_propensity, r.truth.shape[1])
    out: dict[str, float] = {}
    for k in ks:
        out[f"precision@{k}"] = _precision(r, k)
        out[f"recall@{k}"] = _recall(r, k)
        out[f"ndcg@{k}"] = _ndcg(r, k)
        if w is not None:
            out[f"psprecision@{k}"] = _psprecision(r, k, w, normalize)
            out[f"psndcg@{k}"] = _psndcg(r, k, w, normalize)
    return out


class _TopKScorer:
    """Scorer for ``GridSearchCV(scoring=...)``: ranks the estimator's predictions."""

    def __init__(self, metric: str, k: int, kwargs: dict) -> None:
        self.metric = metric
        self.k = k
        self.kwargs = kwargs

    def _predictions(self, estimator: Any, X: Any) -> Any:
        if hasattr(estimator, "predict_topk"):
            return estimator.predict_topk(X, k=self.k)
        if hasattr(estimator, "decision_function"):
            return estimator.decision_function(X)
        if hasattr(estimator, "predict_proba"):
            return estimator.predict_proba(X)
        raise TypeError(
            f"{type(estimator).__name__} has none of predict_topk, decision_function, "
            f"predict_proba; a top-k scorer needs ranked predictions."
        )

    def __call__(self, estimator: Any, X: Any, y_true: Any) -> float:
        classes = getattr(estimator, "classes_", None)
        fn = _METRICS[self.metric]
        return fn(y_true, self._predictions(estimator, X), k=self.k, classes=classes, **self.kwargs)

    def __repr__(self) -> str:
        return f"make_topk_scorer({self.metric!r}, k={self.k})"


_METRICS: dict[str, Callable[..., float]] = {
    "precision": precision_at_k,
    "recall": recall_at_k,
    "ndcg": ndcg_at_k,
    "psprecision": psprecision_at_k,
    "psndcg": psndcg_at_k,
}


def make_topk_scorer(metric: str, k: int = 5, **kwargs: Any) -> Callable[[Any, Any, Any], float]:
    """A scorer for ``GridSearchCV`` / ``cross_val_predict``-style model selection.

    The returned callable ``scorer(estimator, X, Y)`` ranks the estimator's predictions
    (``predict_topk`` when present, else ``decision_function``, else ``predict_proba``)
    and computes ``metric`` at ``k`` against ``Y`` (CSR indicator or label collections;
    the estimator's ``classes_`` maps columns to labels). Greater is better.

    Parameters
    ----------
    metric : {"precision", "recall", "ndcg", "psprecision", "psndcg"}
        The metric to compute.
    k : int, default=5
        Cut-off rank.
    **kwargs
        Extra arguments of the metric (``inv_propensity``, ``normalize``).

    Examples
    --------
    >>> from skxmc.metrics import make_topk_scorer
    >>> make_topk_scorer("precision", k=5)
    make_topk_scorer('precision', k=5)
    """
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {list(_METRICS)}, got {metric!r}.")
    k = _check_k(k)
    if metric.startswith("ps") and "inv_propensity" not in kwargs:
        raise ValueError(f"metric {metric!r} needs inv_propensity=...")
    return _TopKScorer(metric, k, kwargs)
