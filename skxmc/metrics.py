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
    label identifiers, mapped through ``classes``). In every format a score of ``-inf``
    means "not predicted": such a slot or entry is never a hit, whatever its label (this is
    how ``predict_topk`` marks its empty slots, whose fill value is not a label).
``classes``
    The label of each score column (``clf.classes_``): str or int, no duplicates.
``inv_propensity`` (PSP@k, PSnDCG@k)
    Inverse propensities keyed by label (:func:`inverse_propensity`, a ``{label: value}``
    mapping or a ``(classes, values)`` tuple), looked up by the label of each score column;
    or a plain array with exactly one entry per score column. See
    :class:`InversePropensities`.

Ties between equal scores are broken deterministically in favour of the lower column index.
Labels in ``Y_true`` that are outside the score columns (unseen at fit time) are never
predicted, so they count as misses: they add to the number of relevant labels used by
recall and nDCG, and they have no propensity, so they are left out of the best achievable
propensity-scored ranking.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._ranking import (
    top_truth_weights,
    topk_from_dense,
    topk_from_pairs,
    topk_from_sparse,
    truth_hits,
)
from .labels import (
    LabelSpace,
    _as_label_array,
    _coerce,
    _is_numeric_array,
    check_label_matrix,
    encode_labels,
)

__all__ = [
    "InversePropensities",
    "evaluate",
    "inverse_propensity",
    "label_set_scorer",
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
    classes: np.ndarray | None  # label of each score column; None: the column index
    # False only for integer label collections ranked from an (indices, scores) pair without
    # classes: nothing then says how many columns there are, L is inferred from the data.
    width_known: bool


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


def _is_indicator(Y_true: Any) -> bool:
    return sp.issparse(Y_true) or (
        isinstance(Y_true, np.ndarray) and Y_true.dtype.kind in "biuf" and Y_true.ndim == 2
    )


def _encode_truth(
    Y_true: Any, classes: Any, n_columns: int | None
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Truth as CSR over the score columns plus per-row counts of unknown labels."""
    if classes is not None:
        space = LabelSpace(classes)
        if n_columns is not None and n_columns != space.n_labels:
            raise ValueError(
                f"Y_score has {n_columns} columns but classes has {space.n_labels} labels."
            )
        enc = space.transform(Y_true, name="Y_true")
        return enc.Y, enc.n_unknown
    if _is_indicator(Y_true):
        # Not encode_labels: its classes, arange(n_labels), are not needed here.
        Y = check_label_matrix(Y_true, name="Y_true")
        if n_columns is not None and Y.shape[1] != n_columns:
            raise ValueError(
                f"Y_true has {Y.shape[1]} columns but Y_score has {n_columns}; both must "
                f"index the same labels."
            )
        return Y, np.zeros(Y.shape[0], dtype=np.int64)
    Y, truth_classes = encode_labels(Y_true, name="Y_true")
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
    return LabelSpace(classes).columns_of(idx.ravel()).reshape(idx.shape)


def _rank(Y_true: Any, Y_score: Any, k: int, classes: Any = None) -> _Ranked:
    """Rank the predictions: ``hits`` and ``top_idx`` have ``min(k, candidates)`` columns,
    as no row has more candidates than that (so a huge ``k`` allocates nothing)."""
    if classes is not None:
        # Duplicate labels would make a hit on one copy a miss on the other.
        classes = _label_keys(classes, "classes")
    n_columns = _n_score_columns(Y_score)
    truth, n_unknown = _encode_truth(Y_true, classes, n_columns)
    if _is_pair(Y_score):
        idx = _pair_indices(Y_score[0], classes)
        width = idx.shape[1] if idx.ndim == 2 else 1
        top_idx, _ = topk_from_pairs(idx, Y_score[1], min(k, max(width, 1)))
        if top_idx.size and top_idx.max() >= truth.shape[1]:
            # Integer-labelled truth without classes: widen so that extra predicted columns
            # are plain misses.
            truth = _widen(truth, int(top_idx.max()) + 1)
    elif sp.issparse(Y_score):
        S = sp.csr_matrix(Y_score)
        top_idx, top_score = topk_from_sparse(
            S, min(k, max(int(S.getnnz(axis=1).max(initial=0)), 1))
        )
        top_idx[np.isneginf(top_score)] = -1
    else:
        scores = np.asarray(Y_score)
        if scores.ndim != 2 or scores.dtype.kind not in "biuf":
            raise ValueError(
                "Y_score must be a sparse or dense 2-D score matrix or an (indices, scores) "
                f"pair of arrays; got {type(Y_score).__name__} with shape {scores.shape}."
            )
        top_idx, top_score = topk_from_dense(scores, min(k, max(scores.shape[1], 1)))
        top_idx[np.isneginf(top_score)] = -1
    if top_idx.shape[0] != truth.shape[0]:
        raise ValueError(
            f"Y_true has {truth.shape[0]} rows but Y_score has {top_idx.shape[0]}; they must "
            f"describe the same samples."
        )
    if truth.shape[0] == 0:
        raise ValueError("Y_true and Y_score have no rows; metrics need at least one sample.")
    n_relevant = np.diff(truth.indptr).astype(np.int64) + n_unknown
    width_known = classes is not None or not _is_pair(Y_score) or _is_indicator(Y_true)
    return _Ranked(
        truth_hits(top_idx, truth),
        top_idx,
        truth,
        n_relevant,
        classes,
        width_known,
    )


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2))


def _widen(truth: sp.csr_matrix, n_columns: int) -> sp.csr_matrix:
    """The same truth over more columns (the extra ones hold no relevant label)."""
    return sp.csr_matrix(
        (truth.data, truth.indices, truth.indptr), shape=(truth.shape[0], n_columns)
    )


def _duplicate(labels: np.ndarray) -> Any:
    """A label that occurs twice in ``labels``, or None."""
    if labels.dtype != object:
        if len(labels) < 2 or bool(np.all(labels[:-1] < labels[1:])):
            return None  # sorted and unique: the usual case (classes_), O(L) and vectorised
        ordered = np.sort(labels)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        return repeated[0].item() if len(repeated) else None
    seen: set = set()
    for label in labels.tolist():
        if label in seen:
            return label
        seen.add(label)
    return None


def _label_keys(classes: Any, name: str) -> np.ndarray:
    """Validate labels used as keys: 1-D, str or int (not mixed), no duplicates."""
    if isinstance(classes, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of labels, got the string {classes!r}.")
    arr = classes if isinstance(classes, np.ndarray) else None
    if arr is None or arr.dtype.kind not in "iu":
        # Through the label module, so that a list mixing str and int is rejected instead of
        # becoming strings ("1" would then not match the label 1), and str labels become an
        # object array as every classes_ is (a '<U' copy costs the longest label per entry).
        flat = arr.tolist() if arr is not None and arr.ndim == 1 else list(classes)
        arr = _as_label_array(flat, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}.")
    dup = _duplicate(arr)
    if dup is not None:
        raise ValueError(f"{name} lists the label {dup!r} more than once; labels must be unique.")
    arr = arr.copy()
    arr.flags.writeable = False
    return arr


def _propensity_values(values: Any, name: str = "inv_propensity") -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}.")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}.")
    arr = np.array(arr, dtype=np.float64)  # a private copy, made read-only below
    if not np.all(np.isfinite(arr)) or (arr.size and arr.min() < 0):
        raise ValueError(f"{name} must be finite and non-negative.")
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class InversePropensities:
    """Inverse propensities ``1 / p_l`` keyed by label, as :func:`inverse_propensity`
    returns them.

    The propensity-scored metrics look up the propensity of each score column by the
    column's **label** (``classes=``, or ``estimator.classes_`` in a scorer), never by its
    position. Position is not identity: in cross-validation each fold's estimator learns
    its ``classes_`` from its own training part, usually a subset of all the labels, so
    its column ``j`` is in general another label than entry ``j`` of propensities computed
    on all the training labels. Keyed by label, propensities computed once on the full
    training labels are right for every fold.

    Every ``inv_propensity=`` argument of :mod:`skxmc.metrics` takes this object, a
    ``{label: value}`` mapping (``dict``, pandas ``Series``), a ``(classes, values)``
    tuple, or a plain 1-D array. A plain array (or ``classes=None``) has no labels, so it
    is read by position and must have exactly one entry per score column: a longer or
    shorter one raises instead of silently weighting a label with another's propensity.

    Parameters
    ----------
    classes : array-like of shape (n_labels,) or None
        The label of each entry of ``values``: str or int (not mixed), unique, in any
        order. None: the entries are indexed by score column (the propensities of an
        indicator matrix, whose columns have no names).
    values : array-like of shape (n_labels,)
        The inverse propensities, finite and non-negative.

    Attributes
    ----------
    classes : ndarray of shape (n_labels,) or None
        Read-only copy of ``classes``.
    values : ndarray of float64 of shape (n_labels,)
        Read-only copy of ``values``; ``np.asarray(w)`` returns it too.

    See Also
    --------
    inverse_propensity : Computes them from training labels (Jain et al., 2016).

    Examples
    --------
    >>> from skxmc.metrics import InversePropensities
    >>> w = InversePropensities(classes=["b", "a"], values=[4.0, 2.0])
    >>> w.lookup(["a", "b", "a"])
    array([2., 4., 2.])
    >>> len(w)
    2
    """

    classes: np.ndarray | None
    values: np.ndarray

    def __post_init__(self) -> None:
        values = _propensity_values(self.values)
        classes = self.classes
        if classes is not None:
            classes = _label_keys(classes, "inv_propensity classes")
            if len(classes) != len(values):
                raise ValueError(
                    f"inv_propensity has {len(classes)} labels but {len(values)} values; it "
                    f"needs one value per label."
                )
        # Frozen dataclass: the validated copies replace the inputs once, here.
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "classes", classes)

    def __len__(self) -> int:
        return len(self.values)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        # np.asarray(w): the values in stored order, for code that wants a plain array.
        return self.values.astype(self.values.dtype if dtype is None else dtype, copy=bool(copy))

    def lookup(self, labels: Any) -> np.ndarray:
        """The inverse propensities of ``labels``, in their order.

        Parameters
        ----------
        labels : array-like of shape (n,)
            Label identifiers, for example an estimator's ``classes_``.

        Returns
        -------
        ndarray of float64 of shape (n,)

        Raises
        ------
        ValueError
            When some labels have no inverse propensity (the message names a few), or
            when this object has no labels (``classes=None``).
        """
        if self.classes is None:
            raise ValueError(
                "inv_propensity has no labels (classes=None): its entries are indexed by "
                "score column and cannot be looked up by label."
            )
        labels = np.asarray(labels).ravel()
        positions = LabelSpace(self.classes).columns_of(labels)
        missing = positions < 0
        if missing.any():
            shown = labels[missing][:5].tolist()
            key_kind, label_kind = _kind_name(self.classes), _kind_name(labels)
            hint = ""
            if missing.all() and key_kind and label_kind and key_kind != label_kind:
                hint = f" (inv_propensity is keyed by {key_kind} labels, these are {label_kind})"
            raise ValueError(
                f"inv_propensity has no value for {int(missing.sum())} of the {len(labels)} "
                f"labels of the score columns, e.g. {shown}{hint}. Compute it on labels that "
                f"include every label the estimator can predict: in cross-validation, on all "
                f"the training labels rather than one fold's; inverse_propensity(..., "
                f"classes=...) also covers labels without training samples."
            )
        return self.values[positions]


def _kind_name(labels: np.ndarray) -> str | None:
    """ "int" or "str" for labels of one of these kinds (str ones in a ``<U`` or an object
    array), else None."""
    if labels.dtype.kind in "iu":
        return "int"
    if labels.dtype.kind == "U" or (
        labels.dtype == object and len(labels) and isinstance(labels.flat[0], str)
    ):
        return "str"
    return None


def _as_inv_propensity(inv_propensity: Any) -> InversePropensities:
    """Any accepted ``inv_propensity`` as :class:`InversePropensities` (``classes=None`` for
    a positional array)."""
    if inv_propensity is None:
        raise ValueError(
            "inv_propensity is required for propensity-scored metrics; compute it with "
            "skxmc.metrics.inverse_propensity(Y_train)."
        )
    if isinstance(inv_propensity, InversePropensities):
        return inv_propensity
    if isinstance(inv_propensity, Mapping):
        return InversePropensities(list(inv_propensity.keys()), list(inv_propensity.values()))
    if hasattr(inv_propensity, "to_numpy") and hasattr(inv_propensity, "index"):
        if getattr(inv_propensity, "ndim", 1) != 1:
            raise ValueError(
                f"inv_propensity must be 1-D (a Series indexed by label), got shape "
                f"{inv_propensity.shape}."
            )
        return InversePropensities(list(inv_propensity.index), inv_propensity.to_numpy())
    if (
        isinstance(inv_propensity, tuple)
        and len(inv_propensity) == 2
        and not any(np.isscalar(part) for part in inv_propensity)
    ):
        return InversePropensities(*inv_propensity)
    return InversePropensities(None, inv_propensity)


def _column_weights(inv_propensity: Any, r: _Ranked) -> np.ndarray:
    """The inverse propensity of every score column of ``r``, looked up by label."""
    w = _as_inv_propensity(inv_propensity)
    n_columns = r.truth.shape[1]
    if w.classes is None:
        n = len(w.values)
        if not r.width_known and n > n_columns:
            # Integer label collections ranked from a pair, without classes: the columns are
            # the label integers and their number is unknown; the array names n of them.
            r.truth = _widen(r.truth, n)
            n_columns = n
        if n != n_columns:
            raise ValueError(
                f"inv_propensity has {n} entries but the scores have {n_columns} columns. A "
                f"positional inv_propensity (a plain array, or the propensities of an "
                f"indicator matrix) needs exactly one entry per score column. An estimator "
                f"in cross-validation knows only its fold's labels: key the propensities by "
                f"label, e.g. inverse_propensity(Y_train) on label collections, "
                f"inverse_propensity(Y_train, classes=...), a {{label: value}} mapping or a "
                f"(classes, values) tuple."
            )
        return np.asarray(w.values)
    if r.classes is None and w.classes.dtype.kind not in "iu":
        raise ValueError(
            f"inv_propensity is keyed by labels such as {w.classes[:3].tolist()} but the score "
            f"columns have no labels; pass classes= (e.g. clf.classes_) to name them."
        )
    return w.lookup(r.classes if r.classes is not None else np.arange(n_columns))


def _ndcg_norm(n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Ideal DCG per row: the sum of the first min(k, #relevant) discounts (0 if none)."""
    m = min(k, int(n_relevant.max(initial=0)))
    ideal = np.concatenate([[0.0], np.cumsum(_discounts(m))])
    return ideal[np.minimum(n_relevant, m)]


def _max_relevant(r: _Ranked, k: int) -> int:
    """``k`` clipped to the most relevant labels of a row: the width of the best ranking."""
    return max(1, min(k, int(np.diff(r.truth.indptr).max(initial=0))))


def _precision(r: _Ranked, k: int) -> float:
    return float(r.hits[:, :k].sum(axis=1, dtype=np.float64).mean() / k)


def _recall(r: _Ranked, k: int) -> float:
    found = r.hits[:, :k].sum(axis=1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_row = np.where(r.n_relevant > 0, found / np.maximum(r.n_relevant, 1), 0.0)
    return float(per_row.mean())


def _ndcg(r: _Ranked, k: int) -> float:
    hits = r.hits[:, :k]
    dcg = hits @ _discounts(hits.shape[1])
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
    best = top_truth_weights(r.truth, w, _max_relevant(r, k)).sum(axis=1) / k
    return float(gained.sum() / best.sum()) if best.sum() > 0 else 0.0


def _psndcg(r: _Ranked, k: int, w: np.ndarray, normalize: bool) -> float:
    norm = _ndcg_norm(r.n_relevant, k)
    safe = np.where(norm > 0, norm, 1.0)
    gain = _ps_gain(r, k, w)
    gained = np.where(norm > 0, (gain @ _discounts(gain.shape[1])) / safe, 0.0)
    if not normalize:
        return float(gained.mean())
    best_w = top_truth_weights(r.truth, w, _max_relevant(r, k))
    best = np.where(norm > 0, (best_w @ _discounts(best_w.shape[1])) / safe, 0.0)
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
    inv_propensity : InversePropensities, mapping, (classes, values) tuple or array-like
        Inverse propensities ``1 / p_l``, see :func:`inverse_propensity`. Keyed ones (an
        :class:`InversePropensities` with labels, a ``{label: value}`` dict or pandas
        Series, a ``(classes, values)`` tuple) are looked up by the label of each score
        column (``classes``; without ``classes`` the column index) and may hold more
        labels; a score column whose label has no value raises a ValueError. A plain 1-D
        array is positional: it must have exactly one entry per score column.
    normalize : bool, default=False
        Divide by the best achievable value.

    Examples
    --------
    >>> from skxmc.metrics import psprecision_at_k
    >>> Y = np.array([[1, 0], [0, 1]])
    >>> psprecision_at_k(Y, np.eye(2), inv_propensity=[2.0, 4.0], k=1)
    3.0

    Keyed by label, the propensities may cover more labels than the score columns:

    >>> w = {"x": 2.0, "y": 4.0, "z": 8.0}
    >>> psprecision_at_k([["x"], ["y"]], np.eye(2), inv_propensity=w, k=1, classes=["x", "y"])
    3.0
    """
    k = _check_k(k)
    r = _rank(Y_true, Y_score, k, classes)
    return _psprecision(r, k, _column_weights(inv_propensity, r), normalize)


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
    return _psndcg(r, k, _column_weights(inv_propensity, r), normalize)


def _check_jain_constants(A: Any, B: Any) -> tuple[float, float]:
    for name, value in (("A", A), ("B", B)):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not np.isfinite(float(value))
        ):
            raise ValueError(f"{name} must be a finite real number, got {value!r}.")
    if A < 0:
        raise ValueError(
            f"A must be >= 0, got {A!r}: with A < 0 frequent labels would get the larger "
            f"inverse propensity."
        )
    if B <= 0:
        raise ValueError(
            f"B must be > 0, got {B!r}: the propensities are real only when N_l + B > 0 for "
            f"every label, including labels with N_l = 0 training samples."
        )
    return float(A), float(B)


def inverse_propensity(
    Y_train: Any, *, A: float = 0.55, B: float = 1.5, classes: Any = None
) -> InversePropensities:
    r"""Inverse label propensities of Jain et al. (2016) from the training labels, keyed by
    label.

    .. math:: \frac{1}{p_l} = 1 + (\log N - 1)(B + 1)^A (N_l + B)^{-A}

    where ``N`` is the number of training samples and ``N_l`` the number with label ``l``.
    Usual values (Jain et al.; pyxclib; napkinXC): ``A=0.55, B=1.5`` (default, e.g.
    EURLex-4K, AmazonCat-13K, and what we use for every dataset in ``shared/data``);
    ``A=0.5, B=0.4`` for Wikipedia datasets (WikiLSHTC-325K, WikipediaLarge-500K);
    ``A=0.6, B=2.6`` for Amazon datasets (Amazon-670K, Amazon-3M).

    The result carries each value's label, and the metrics look propensities up by the
    label of each score column: compute them once on **all** the training labels and pass
    them to a scorer used in cross-validation, where each fold's estimator knows only a
    subset of the labels (:class:`InversePropensities` says why position is not enough).

    Parameters
    ----------
    Y_train : sparse matrix, ndarray or sequence of label collections
        Training labels, at least 3 samples (``log N - 1 > 0``).
    A : float, default=0.55
        Exponent, finite and ``>= 0``.
    B : float, default=1.5
        Offset, finite and ``> 0``: ``N_l + B`` must be positive also for labels without
        training samples, or the propensities would not be real.
    classes : array-like, optional
        The labels to return (``clf.classes_``, or every label a model can predict), in
        this order; labels of ``classes`` absent from ``Y_train`` get ``N_l = 0``. For an
        indicator matrix, the label of each of its columns.

    Returns
    -------
    InversePropensities
        ``values`` and their ``classes``: ``classes`` if given, else the sorted labels of
        ``Y_train``. An indicator matrix without ``classes`` has no column names, so
        ``classes`` is None and the result is positional: accepted only for scores with
        exactly its number of columns (an estimator fitted on that matrix).

    Examples
    --------
    >>> from skxmc.metrics import inverse_propensity
    >>> w = inverse_propensity([["a"], ["a", "b"], ["a"]])
    >>> w.classes
    array(['a', 'b'], dtype=object)
    >>> w.values.round(3)
    array([1.071, 1.099])
    >>> w.lookup(["b"]).round(3)  # the rarer label weighs more
    array([1.099])
    >>> inverse_propensity([["a"], ["a", "b"], ["a"]], classes=["c", "b"]).values.round(3)
    array([1.131, 1.099])
    """
    A, B = _check_jain_constants(A, B)
    if classes is not None:
        keys = _label_keys(classes, "classes")
        Y = LabelSpace(keys).transform(Y_train, name="Y_train").Y
    else:
        Y, keys = encode_labels(Y_train, name="Y_train")
        coerced = _coerce(Y_train, "Y_train")
        if sp.issparse(coerced) or _is_numeric_array(coerced):
            keys = None  # an indicator matrix: its columns have no names, only positions
    n = Y.shape[0]
    if n < 3:
        # log(N) - 1 < 0 below e samples: the formula would give propensities above 1.
        raise ValueError(f"Y_train has {n} rows; inverse_propensity needs at least 3.")
    counts = np.bincount(Y.indices, minlength=Y.shape[1]).astype(np.float64)
    c = (np.log(n) - 1.0) * (B + 1.0) ** A
    return InversePropensities(keys, 1.0 + c * (counts + B) ** (-A))


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

    Parameters
    ----------
    Y_true, Y_score, classes
        As in :func:`precision_at_k`.
    ks : sequence of int, default=(1, 3, 5)
        Cut-off ranks.
    inv_propensity : InversePropensities, mapping, (classes, values) tuple or array-like, \
optional
        As in :func:`psprecision_at_k`; None leaves the propensity-scored metrics out.
    normalize : bool, default=False
        Divide the propensity-scored metrics by their best achievable value.

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> from skxmc.metrics import evaluate
    >>> scores = evaluate(np.array([[1, 0, 1]]), np.array([[0.9, 0.5, 0.1]]), ks=(1, 2))
    >>> {k: round(v, 4) for k, v in scores.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'precision@1': 1.0, 'recall@1': 0.5, 'ndcg@1': 1.0, 'precision@2': 0.5,
     'recall@2': 0.5, 'ndcg@2': 0.6131}
    """
    ks = [_check_k(k, "ks") for k in ks]
    if not ks:
        raise ValueError("ks must list at least one cut-off.")
    r = _rank(Y_true, Y_score, max(ks), classes)
    w = None
    if inv_propensity is not None:
        w = _column_weights(inv_propensity, r)
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
        self.kwargs = dict(kwargs)
        if "inv_propensity" in self.kwargs:
            # Validated once here, so that a bad value fails before any fold is fitted.
            self.kwargs["inv_propensity"] = _as_inv_propensity(self.kwargs["inv_propensity"])

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
        Extra arguments of the metric (``inv_propensity``, ``normalize``). The
        propensities are looked up by the label of each column of the fold's estimator
        (its ``classes_``), so compute them once on all the training labels, e.g.
        ``inv_propensity=inverse_propensity(Y)``; a plain array is positional and must
        match every fold's number of columns exactly.

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


class _LabelSetScorer:
    """A sklearn scorer (by name) that reads label collections as an indicator."""

    def __init__(self, scoring: str) -> None:
        from sklearn.metrics import get_scorer

        self.scoring = scoring
        self._scorer = get_scorer(scoring)  # unknown names fail here, with sklearn's list
        missing = [a for a in ("_score_func", "_sign", "_kwargs") if not hasattr(self._scorer, a)]
        if missing:  # pragma: no cover - a sklearn without these scorer internals
            raise TypeError(f"label_set_scorer cannot wrap {scoring!r} with this sklearn.")

    def _response(self, estimator: Any, X: Any) -> Any:
        methods = getattr(self._scorer, "_response_method", "predict")
        methods = (methods,) if isinstance(methods, str) else tuple(methods)
        for method in methods:
            if hasattr(estimator, method):
                return getattr(estimator, method)(X)
        raise TypeError(f"{type(estimator).__name__} has none of {methods}.")

    def __call__(self, estimator: Any, X: Any, y_true: Any, **kwargs: Any) -> float:
        if not _is_label_collections(y_true):
            return self._scorer(estimator, X, y_true, **kwargs)
        if kwargs:
            raise TypeError(f"label_set_scorer({self.scoring!r}) takes no {sorted(kwargs)}.")
        classes = np.asarray(estimator.classes_)
        # Labels unseen in fit get columns too, never predicted: they count as misses.
        _, found = encode_labels(y_true, name="Y_true")
        unseen = found[LabelSpace(classes).columns_of(found) < 0] if len(classes) else found
        columns = np.concatenate([classes.astype(object), unseen.astype(object)])
        Y = LabelSpace(columns).transform(y_true, name="Y_true").Y.toarray().astype(np.int64)
        out = self._response(estimator, X)
        out = out.toarray() if sp.issparse(out) else np.asarray(out)
        if out.ndim != 2 or out.shape[1] != len(classes):
            raise ValueError(
                f"{type(estimator).__name__} returned shape {out.shape} for label collections; "
                f"expected (n_samples, {len(classes)}) over its classes_."
            )
        floor = float(out.min(initial=0.0))
        out = np.hstack([out, np.full((out.shape[0], len(unseen)), floor, dtype=out.dtype)])
        if self.scoring.startswith("roc_auc"):
            # ROC AUC is undefined for a label without positives (or negatives) in Y_true.
            both = (Y.min(axis=0) == 0) & (Y.max(axis=0) == 1)
            if not both.any():
                raise ValueError(
                    f"{self.scoring}: no label of Y_true has both positive and negative rows."
                )
            Y, out = Y[:, both], out[:, both]
        return self._scorer._sign * self._scorer._score_func(Y, out, **self._scorer._kwargs)

    def __repr__(self) -> str:
        return f"label_set_scorer({self.scoring!r})"


def _is_label_collections(y: Any) -> bool:
    """Whether ``y`` holds label collections (not a 1-D target nor an indicator)."""
    from .labels import _label_rows

    y = _coerce(y, "Y_true")
    if sp.issparse(y) or _is_numeric_array(y):
        return False
    _, single = _label_rows(y, "Y_true")
    return not single


def label_set_scorer(scoring: str) -> Callable[..., float]:
    """One of sklearn's string scorers, made to accept label collections as ``Y``.

    sklearn's scorers by name (``"f1_samples"``, ``"accuracy"``, ``"jaccard_samples"``,
    ``"roc_auc"``, ``"average_precision"``, ``"neg_log_loss"``...) need a 0/1 indicator:
    given label collections (:func:`skxmc.as_label_sets`, what skxmc's loaders return) they
    fail. This scorer turns both sides into indicators over the fold's estimator's
    ``classes_`` (plus a column, never predicted, for each label of ``Y`` that the fold
    did not see in ``fit``: it counts as a miss), then calls sklearn's scorer function
    on them: ``predict`` for the label metrics (so the ``threshold`` and ``top_k``
    parameters decide), ``decision_function`` / ``predict_proba`` densified for the
    ranking ones. ROC AUC keeps the labels that have both positive and negative rows in
    ``Y`` (it is undefined for the others). A 1-D target or an indicator ``Y`` is passed
    to sklearn's scorer unchanged.

    Dense ``(n_samples, n_labels)`` outputs are built: for thousands of labels prefer
    skxmc's ranking scorers (:func:`make_topk_scorer`), which read label collections
    in O(nnz).

    Parameters
    ----------
    scoring : str
        A name of :func:`sklearn.metrics.get_scorer`.

    Returns
    -------
    scorer : callable ``scorer(estimator, X, Y)``

    Examples
    --------
    >>> from skxmc.metrics import label_set_scorer
    >>> label_set_scorer("f1_samples")
    label_set_scorer('f1_samples')
    """
    if not isinstance(scoring, str):
        raise TypeError(f"scoring must be the name of a sklearn scorer, got {scoring!r}.")
    return _LabelSetScorer(scoring)
