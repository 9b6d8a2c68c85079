"""Inverse label propensities for the propensity-scored metrics of :mod:`skxmc.metrics`.

:class:`InversePropensities` (values keyed by label), :func:`inverse_propensity` (Jain et
al., 2016, from the training labels) and the validation that turns every accepted
``inv_propensity=`` form into one of them. Private: users import these names from
:mod:`skxmc.metrics`, which re-exports them; this module only keeps the metrics module
to its rankings. It knows nothing of rankings: looking the values up for the score columns
of a ranking stays in :mod:`skxmc.metrics`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .labels import (
    LabelSpace,
    _as_label_array,
    _coerce,
    _is_numeric_array,
    encode_labels,
)

__all__ = ["InversePropensities", "inverse_propensity"]


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
