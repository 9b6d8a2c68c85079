"""Label handling: every label format skxmc accepts becomes CSR float32 plus ``classes_``.

This module is the single place where label input is validated and converted. Estimators,
metrics and scorers call :func:`encode_labels` (fit time: learn the label space) or
:class:`LabelSpace` (transform / inverse transform against a learned label space).

Accepted label inputs
---------------------
* a scipy sparse matrix or a 2-D numeric numpy array of 0/1 values, shape ``(n, L)``:
  the label space is ``arange(L)``;
* a sequence (list, tuple, numpy object / str array, pandas Series) of label collections,
  one per sample, each a list / tuple / set / frozenset / 1-D array of hashable labels
  (``str`` or ``int``, not mixed; ``None`` is refused, as it marks empty top-k slots).
  Empty collections (samples without labels) are allowed, duplicates inside a collection
  are counted once. Label storage follows the distinct labels, not the longest label
  times the number of occurrences, and the ``classes`` of str labels are an object array
  of ``str`` (as sklearn's ``MultiLabelBinarizer`` gives), whose size is the label text,
  not the number of labels times the longest one (a ``<U`` array);
* a 1-D sequence of single labels (a multi-class target, as sklearn classifiers take):
  one label per sample. Continuous (non-integer float) values are rejected. A column
  vector ``(n, 1)`` (e.g. ``df[["label"]]``) is raveled to this form with a
  ``DataConversionWarning``, as sklearn's classifiers do.

A Python list of lists is always read as label collections, never as an indicator matrix:
``[[0, 1], [2]]`` means "labels 0 and 1" and "label 2". Pass a numpy array or a scipy
sparse matrix for an indicator matrix. A list whose rows are all 0/1 sequences of one
length (``Y.tolist()`` of an indicator) is ambiguous and raises an error saying how to
pass either meaning.

Label sets and scikit-learn's model selection
---------------------------------------------
scikit-learn rejects lists of label lists wherever it inspects ``y`` (``check_cv`` with an
integer ``cv``, the default of ``GridSearchCV`` and ``cross_val_score``): "legacy
multi-label data representation". :func:`as_label_sets` returns the same labels as a 1-D
object array of ``frozenset`` rows, which sklearn slices like any 1-D array and types as
"unknown" (so ``cv=5`` means ``KFold(5)``, as for any multi-label target). The loaders of
:mod:`skxmc.datasets` return this form, and every skxmc function that takes labels accepts
it.
"""

from __future__ import annotations

import itertools
import numbers
import warnings
from collections.abc import Hashable, Sequence, Set
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "EncodedLabels",
    "LabelSet",
    "LabelSpace",
    "as_label_sets",
    "check_label_matrix",
    "encode_labels",
    "encode_target",
    "indices_to_labels",
]

#: The kinds of label input, as :func:`encode_target` reports them (the names follow
#: sklearn's ``type_of_target`` where it has one).
TARGET_TYPES = ("multiclass", "multilabel-indicator", "multilabel-sparse", "multilabel-sequences")

_COLLECTION_TYPES = (list, tuple, Set, np.ndarray)


def _is_sparse(Y: Any) -> bool:
    return sp.issparse(Y)


def _is_numeric_array(Y: Any) -> bool:
    """A numeric array that is not 1-D: an indicator matrix (1-D arrays are targets)."""
    return isinstance(Y, np.ndarray) and Y.dtype.kind in "biuf" and Y.ndim != 1


def _check_n_rows(n_rows: int, n_samples: int | None, name: str) -> None:
    if n_samples is not None and n_rows != n_samples:
        raise ValueError(
            f"{name} has {n_rows} rows but X has {n_samples} samples; "
            f"{name} must have one row (label collection) per sample."
        )


def check_label_matrix(
    Y: Any, *, name: str = "Y", n_samples: int | None = None, n_labels: int | None = None
) -> sp.csr_matrix:
    """Validate a 0/1 indicator matrix (sparse or dense) and return it as CSR float32.

    Parameters
    ----------
    Y : sparse matrix or ndarray of shape (n_samples, n_labels)
        Binary label indicator matrix.
    name : str, default="Y"
        Argument name used in error messages.
    n_samples : int, optional
        Expected number of rows.
    n_labels : int, optional
        Expected number of columns (the fitted label space).

    Returns
    -------
    csr_matrix of float32
        Canonical CSR: sorted indices, no duplicates, no explicit zeros.
    """
    if _is_sparse(Y):
        if Y.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got a sparse array with {Y.ndim} dimensions.")
        Y_csr = sp.csr_matrix(Y, dtype=np.float64, copy=True)
        Y_csr.sum_duplicates()
        data = Y_csr.data
    else:
        arr = np.asarray(Y)
        if arr.ndim != 2:
            raise ValueError(
                f"{name} must be a 2-D indicator matrix or a sequence of label collections; "
                f"got an array with {arr.ndim} dimension(s). For single-label targets pass "
                f"[[label] for label in y]."
            )
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} indicator matrix must be numeric, got dtype {arr.dtype}.")
        data = arr
        Y_csr = None
    if data.dtype.kind == "f" and not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or infinite values; labels must be 0 or 1.")
    if data.size and data.min() < 0:
        raise ValueError(f"{name} contains negative values; labels must be 0 or 1.")
    if data.size and not np.all((data == 0) | (data == 1)):
        bad = np.unique(data[(data != 0) & (data != 1)])[:5]
        kind = "continuous" if np.any(bad != np.round(bad)) else "multi-class"
        raise ValueError(
            f"{name} must be binary (0/1); found non-binary values such as {bad.tolist()} "
            f"(a {kind} target is not a label indicator matrix)."
        )
    if Y_csr is None:
        # float64 first so that any integer dtype (even uint8 with > 255 columns) is exact.
        Y_csr = sp.csr_matrix(np.asarray(data, dtype=np.float32))
    Y_csr.eliminate_zeros()
    Y_csr = Y_csr.astype(np.float32)
    Y_csr.sort_indices()
    _check_n_rows(Y_csr.shape[0], n_samples, name)
    if n_labels is not None and Y_csr.shape[1] != n_labels:
        raise ValueError(
            f"{name} has {Y_csr.shape[1]} columns but the estimator was fitted with "
            f"{n_labels} labels."
        )
    return Y_csr


def _coerce(Y: Any, name: str) -> Any:
    """Reject ``None``; turn array-likes (pandas objects, ``__array__`` wrappers) into arrays
    so that numeric 2-D ones are read as indicator matrices."""
    if Y is None:
        raise ValueError(
            f"{name} is None: requires y to be passed, but the target y is None. Pass the "
            f"labels of every sample."
        )
    if not isinstance(Y, (list, tuple, np.ndarray, str, bytes)) and not _is_sparse(Y):
        if hasattr(Y, "__array__"):
            return np.asarray(Y)
    return Y


def _ravel_column(Y: Any, name: str, *, warn: bool = True) -> Any:
    """A column vector ``(n, 1)`` (an ndarray, or a one-column DataFrame after
    :func:`_coerce`) as the 1-D target ``(n,)`` it stands for, as sklearn's classifiers
    read it (``column_or_1d``), with a ``DataConversionWarning``. Read as a one-column
    indicator or as rows of one-label collections, a 0/1 column would make every sample
    get the one label, and ``df[["label"]]`` would make one label collection per row."""
    if not (isinstance(Y, np.ndarray) and Y.ndim == 2 and Y.shape[1] == 1):
        return Y
    if warn:
        from sklearn.exceptions import DataConversionWarning

        warnings.warn(
            f"A column-vector {name} was passed when a 1-d array was expected. Please change "
            f"the shape of {name} to (n_samples,), for example using ravel(); it is read as "
            f"one label per sample. For a one-label indicator matrix pass a sparse matrix.",
            DataConversionWarning,
            stacklevel=3,
        )
    return Y.ravel()


def _label_rows(Y: Any, name: str, *, check_indicator: bool = True) -> tuple[list, bool]:
    """Return ``Y`` as a list of label collections, validating each row's container, and
    whether ``Y`` was a 1-D target (one label per sample)."""
    if isinstance(Y, (str, bytes)):
        raise ValueError(
            f"{name} must be a sequence of label collections (e.g. [['a', 'b'], ['c']]) or a "
            f"0/1 indicator matrix, got a single string {Y[:50]!r}."
        )
    if isinstance(Y, np.ndarray) and Y.ndim == 2:
        rows = list(Y)  # 2-D str / object array: one row of labels per sample
    else:
        try:
            rows = list(Y)
        except TypeError:
            raise ValueError(
                f"{name} must be a sequence of label collections or a 0/1 indicator matrix, "
                f"got {type(Y).__name__}."
            ) from None
    if rows and not any(isinstance(row, _COLLECTION_TYPES) for row in rows):
        # A 1-D target (multi-class): one label per sample.
        floats = [r for r in rows if isinstance(r, (float, np.floating))]
        if floats and any(not float(r).is_integer() for r in floats):
            raise ValueError(
                f"Unknown label type: continuous. {name} holds non-integer numbers such as "
                f"{next(r for r in floats if not float(r).is_integer())!r}; labels must be "
                f"identifiers (str or int), not continuous values."
            )
        return [[row] for row in rows], True
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes)):
            raise ValueError(
                f"{name}[{i}] is a bare string {row[:50]!r}; each sample's labels must be a "
                f"collection such as [{row[:50]!r}]."
            )
        if not isinstance(row, _COLLECTION_TYPES):
            raise ValueError(
                f"{name}[{i}] is a {type(row).__name__}, not a collection of labels; {name} "
                f"must be a sequence of label collections (lists, tuples or sets). "
                f"For single-label targets pass [[label] for label in y]."
            )
    if check_indicator:
        _reject_indicator_rows(rows, name)
    return rows, False


def _is_01(x: Any) -> bool:
    # Floats too: ``Y.tolist()`` of a float indicator is as ambiguous as of an int one.
    return isinstance(x, (numbers.Integral, np.integer, float, np.floating)) and (x == 0 or x == 1)


def _reject_indicator_rows(rows: list, name: str) -> None:
    """Raise when every row is a 0/1 list / tuple of one length >= 2: that is an indicator
    matrix passed as nested lists (``Y.tolist()``), which would otherwise silently become
    a problem with the two labels 0 and 1."""
    first = rows[0] if rows else None
    if not isinstance(first, (list, tuple)) or len(first) < 2:
        return
    width = len(first)
    for row in rows:
        if not isinstance(row, (list, tuple)) or len(row) != width or not all(map(_is_01, row)):
            return
    raise ValueError(
        f"{name} is a list of 0/1 rows of length {width}, which could be an indicator matrix "
        f"({width} labels) or label collections (labels 0 and 1). Pass np.asarray({name}) "
        f"for an indicator matrix, or skxmc.as_label_sets({name}, indicator=False) (rows of "
        f"sets) for label collections."
    )


def _none_label_error(name: str) -> ValueError:
    return ValueError(
        f"{name} contains None as a label; None marks the empty slots of top-k predictions "
        f"of str labels, so it cannot be a label. Use str or int labels (e.g. 'none')."
    )


def _normalise_label(label: Any, name: str) -> Hashable:
    if isinstance(label, np.generic):
        label = label.item()
    if label is None:
        raise _none_label_error(name)
    if isinstance(label, float) and np.isnan(label):
        raise ValueError(f"{name} contains a NaN label.")
    try:
        hash(label)
    except TypeError:
        raise ValueError(
            f"{name} contains an unhashable label {label!r} ({type(label).__name__}); labels "
            f"must be hashable values such as str or int."
        ) from None
    return label


def _flatten(rows: list, name: str) -> tuple[list, np.ndarray]:
    """Flatten label collections (de-duplicated per row) into one list plus row pointers."""
    lengths = np.empty(len(rows), dtype=np.int64)
    flat_rows = []
    for i, row in enumerate(rows):
        items = row.tolist() if isinstance(row, np.ndarray) else row
        if not isinstance(items, Set):
            try:
                items = dict.fromkeys(items)  # ordered de-duplication
            except TypeError:
                items = [_normalise_label(x, name) for x in items]  # raises a clear error
        lengths[i] = len(items)
        flat_rows.append(items)
    flat = list(itertools.chain.from_iterable(flat_rows))
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return flat, indptr


def _type_kind(t: type) -> str:
    if issubclass(t, numbers.Integral) and not issubclass(t, (bool, np.bool_)):
        return "int"
    if issubclass(t, str):
        return "str"
    return "none" if t is type(None) else "other"


def _label_kind(flat: list, name: str) -> str:
    """The kind of the labels of ``flat``: "int", "str" or "other" (object labels).

    Looks at the set of Python types only, which is C-speed even for millions of labels.
    """
    kinds = {_type_kind(t) for t in set(map(type, flat))}
    if "none" in kinds:
        raise _none_label_error(name)
    if "int" in kinds and "str" in kinds:
        raise ValueError(
            f"{name} mixes str and int labels; use one type for all labels "
            f"(e.g. convert every label with str())."
        )
    if len(kinds) == 1 and kinds != {"other"}:
        return kinds.pop()
    return "other"


def _int_array(flat: list, name: str) -> np.ndarray:
    try:
        return np.asarray(flat, dtype=np.int64)
    except OverflowError:
        raise ValueError(
            f"{name} holds an integer label outside the int64 range; use str labels for such "
            f"identifiers."
        ) from None


def _object_array(labels: list) -> np.ndarray:
    """Labels as a 1-D object array: the form of every ``classes`` of str labels.

    Not ``<U``: a fixed-width array stores every entry at 4 bytes x the longest label
    (1,000 labels of 10,000 characters: 40 MB, against 10 MB of text), and drops trailing
    NUL characters, which would merge distinct labels. Object arrays of ``str`` sort,
    compare and index like ``<U`` ones, as sklearn's ``MultiLabelBinarizer`` gives them.
    """
    # np.fromiter, not np.array: tuples of equal length would become a 2-D array.
    return np.fromiter(labels, dtype=object, count=len(labels))


def _as_label_array(flat: list, name: str) -> np.ndarray:
    """Convert labels to an int64 array (int labels) or an object array (str and others).

    For label spaces (``classes``), whose labels are distinct; label occurrences go
    through :func:`_factorize`, whose storage does not grow with the longest label.
    """
    if not flat:
        return np.empty(0, dtype=np.int64)
    kind = _label_kind(flat, name)
    if kind == "int":
        return _int_array(flat, name)
    if kind == "str":
        return _object_array(flat)
    return _object_array([_normalise_label(x, name) for x in flat])


def _factorize(flat: list, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(uniques, codes)``: the sorted distinct labels of ``flat`` as an array, and the
    position in ``uniques`` of every label of ``flat`` (int64).

    Memory is proportional to the label text plus 8 bytes per occurrence: str labels are
    de-duplicated by a dict before any array is built (see :func:`_object_array`).
    """
    if not flat:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    kind = _label_kind(flat, name)
    if kind == "int":
        return np.unique(_int_array(flat, name), return_inverse=True)
    uniques = list(dict.fromkeys(flat))
    if kind == "other":
        uniques = list(dict.fromkeys(_normalise_label(x, name) for x in uniques))
    try:
        uniques.sort()
    except TypeError:
        raise ValueError(
            f"{name} labels cannot be ordered (mixed types such as "
            f"{sorted({type(x).__name__ for x in uniques})}); use str or int labels."
        ) from None
    position = {label: i for i, label in enumerate(uniques)}
    codes = np.fromiter(map(position.__getitem__, flat), np.int64, len(flat))
    return _object_array(uniques), codes


def _build_csr(indptr: np.ndarray, indices: np.ndarray, n_labels: int) -> sp.csr_matrix:
    Y = sp.csr_matrix(
        (np.ones(len(indices), dtype=np.float32), indices.astype(np.int32, copy=False), indptr),
        shape=(len(indptr) - 1, n_labels),
    )
    Y.sort_indices()
    return Y


@dataclass
class EncodedLabels:
    """Result of converting label input against a label space."""

    Y: sp.csr_matrix
    """CSR float32 indicator over the known classes."""
    n_unknown: np.ndarray
    """Per-row count of labels not in the label space (they count as misses in metrics)."""


def encode_labels(
    Y: Any, *, name: str = "Y", n_samples: int | None = None
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Learn a label space from ``Y`` and return ``(Y_csr, classes)``.

    Parameters
    ----------
    Y : sparse matrix, ndarray or sequence of label collections
        Labels in any accepted format (see the module docstring).
    name : str, default="Y"
        Argument name used in error messages.
    n_samples : int, optional
        Expected number of rows.

    Returns
    -------
    Y_csr : csr_matrix of float32, shape (n_samples, n_labels)
    classes : ndarray of shape (n_labels,)
        Sorted label identifiers: int64 for int labels, an object array of ``str`` for
        str labels (its size follows the label text, not the longest label times the
        number of labels); ``arange(n_labels)`` for matrix input.

    Examples
    --------
    >>> from skxmc.labels import encode_labels
    >>> Y, classes = encode_labels([["b", "a"], ["c"]])
    >>> classes
    array(['a', 'b', 'c'], dtype=object)
    >>> Y.toarray()
    array([[1., 1., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    Y = _coerce(Y, name)
    if _is_sparse(Y) or _is_numeric_array(Y):
        Y_csr = check_label_matrix(Y, name=name, n_samples=n_samples)
        return Y_csr, np.arange(Y_csr.shape[1])
    rows, _ = _label_rows(Y, name)
    return _learn_label_space(rows, name, n_samples)


def _learn_label_space(
    rows: list, name: str, n_samples: int | None
) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(Y_csr, classes)`` of label collections: the sorted distinct labels as columns."""
    _check_n_rows(len(rows), n_samples, name)
    flat, indptr = _flatten(rows, name)
    classes, indices = _factorize(flat, name)
    return _build_csr(indptr, indices, len(classes)), classes


def encode_target(
    Y: Any, *, classes: Any = None, name: str = "Y", n_samples: int | None = None
) -> tuple[sp.csr_matrix, np.ndarray, str]:
    """Encode the target of an estimator's ``fit``: ``(Y_csr, classes, target_type)``.

    Like :func:`encode_labels`, and also reports which kind of label input ``Y`` was, so
    that the estimator's outputs can follow it (see ``TARGET_TYPES``): ``"multiclass"``
    (a 1-D target), ``"multilabel-indicator"`` (a dense 0/1 array),
    ``"multilabel-sparse"`` (a scipy sparse 0/1 matrix) or ``"multilabel-sequences"``
    (label collections).

    Parameters
    ----------
    Y : sparse matrix, ndarray or sequence of label collections
        Labels in any accepted format (see the module docstring).
    classes : array-like of shape (n_labels,), default=None
        A fixed label space, as ``MultiLabelBinarizer(classes=...)`` takes: the columns of
        the encoded matrix, in this order. Labels of ``Y`` outside it are dropped with a
        warning. For indicator input it names the columns (its length must match). None:
        the sorted labels seen in ``Y`` (``arange(n_labels)`` for matrices).
    name : str, default="Y"
        Argument name used in error messages.
    n_samples : int, optional
        The number of samples of the estimator's ``X``: ``Y`` must have one row each.

    Returns
    -------
    Y_csr : csr_matrix of float32, shape (n_samples, n_labels)
    classes : ndarray of shape (n_labels,)
        ``classes`` as an array, or the labels found; both as :func:`encode_labels` gives
        them (int64, or an object array of ``str``).
    target_type : str
        One of ``TARGET_TYPES``.
    """
    Y = _ravel_column(_coerce(Y, name), name)
    if _is_sparse(Y) or _is_numeric_array(Y):
        kind = "multilabel-sparse" if _is_sparse(Y) else "multilabel-indicator"
        Y_csr = check_label_matrix(Y, name=name, n_samples=n_samples)
        if classes is None:
            return Y_csr, np.arange(Y_csr.shape[1]), kind
        fixed = _check_classes(classes)
        if len(fixed) != Y_csr.shape[1]:
            raise ValueError(
                f"classes has {len(fixed)} labels but the indicator matrix {name} has "
                f"{Y_csr.shape[1]} columns; for matrix input classes names the columns."
            )
        return Y_csr, fixed, kind
    rows, single = _label_rows(Y, name)
    kind = "multiclass" if single else "multilabel-sequences"
    if classes is None:
        return (*_learn_label_space(rows, name, n_samples), kind)
    _check_n_rows(len(rows), n_samples, name)
    fixed = _check_classes(classes)
    enc = LabelSpace(fixed).transform(rows, name=name)
    if enc.n_unknown.any():
        warnings.warn(
            f"{int(enc.n_unknown.sum())} label(s) of {name} in {int((enc.n_unknown > 0).sum())} "
            f"row(s) are not in classes and are ignored.",
            UserWarning,
            stacklevel=3,
        )
    return enc.Y, fixed, kind


def _check_classes(classes: Any, *, allow_empty: bool = False) -> np.ndarray:
    """Validate a user-given label space: 1-D, hashable, no duplicates."""
    if isinstance(classes, (str, bytes)):
        raise ValueError(f"classes must be a sequence of labels, got the string {classes!r}.")
    flat = list(classes.tolist() if isinstance(classes, np.ndarray) else classes)
    if not flat and not allow_empty:
        raise ValueError("classes is empty; it must hold at least one label.")
    arr = _as_label_array(flat, "classes")
    if arr.ndim != 1:
        raise ValueError("classes must be 1-D.")
    if len(set(arr.tolist())) != len(arr):
        raise ValueError("classes holds duplicate labels.")
    return arr


class LabelSet(frozenset):
    """The labels of one sample: a ``frozenset`` that refuses to be ordered.

    Ordering label sets has no meaning, and refusing it turns one silent misuse into an
    error: ``cross_val_predict(..., method="decision_function" / "predict_proba")`` sorts a
    1-D target to re-encode it as classes, which would make every distinct label set one
    class of a multi-class problem.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"LabelSet({set(self)!r})" if self else "LabelSet()"

    def _no_order(self, other: Any) -> bool:
        # ValueError, not TypeError: sklearn's encoders catch TypeError and replace the
        # message with one that does not say what to do.
        raise ValueError(_no_order_message())

    __lt__ = __le__ = __gt__ = __ge__ = _no_order


_CROSS_VAL_PREDICT_ADVICE = (
    "sklearn's cross_val_predict, with method='decision_function' or 'predict_proba', "
    "re-encodes a 1-D target as classes: pass a dense 0/1 indicator instead, e.g. "
    "MultiLabelBinarizer(classes=classes).fit_transform(Y); method='predict' works on label "
    "sets when the estimator has classes=classes."
)
_METRIC_ADVICE = (
    "sklearn's classification metrics and string scorers ('f1_samples', 'accuracy', "
    "'roc_auc'...) need a 0/1 indicator: score with skxmc.metrics.label_set_scorer('f1_samples') "
    "(e.g. cross_validate(..., scoring={'f1': label_set_scorer('f1_samples')})), or compare "
    "MultiLabelBinarizer(classes=clf.classes_).fit_transform(Y) with clf.predict(X); skxmc's "
    "ranking scorers (skxmc.metrics.make_topk_scorer) take label sets as they are."
)


def _no_order_message() -> str:
    """Why label sets were compared, from the callers on the stack: sklearn's metrics
    (which sort the labels of a target) or cross_val_predict (which encodes classes)."""
    import sys

    names, modules = set(), set()
    frame = sys._getframe(2)
    while frame is not None:
        names.add(frame.f_code.co_name)
        modules.add(str(frame.f_globals.get("__name__", "")))
        frame = frame.f_back
    del frame
    head = "Label sets have no order. "
    if "cross_val_predict" in names:
        return head + _CROSS_VAL_PREDICT_ADVICE
    if any(m.startswith("sklearn.metrics") for m in modules):
        return head + _METRIC_ADVICE
    return f"{head}Two usual causes. {_CROSS_VAL_PREDICT_ADVICE} {_METRIC_ADVICE}"


def as_label_sets(Y: Any, *, classes: Any = None, indicator: bool | None = None) -> np.ndarray:
    """Labels as a 1-D object array of :class:`LabelSet` (``frozenset``) rows, the form
    that sklearn's model selection accepts with its default ``cv``.

    scikit-learn rejects a list of label lists in ``GridSearchCV``, ``cross_val_score``,
    ``cross_validate`` and ``RandomizedSearchCV`` with an integer ``cv`` ("legacy
    multi-label data representation"). An object array of sets is typed "unknown" there,
    so ``cv=5`` splits it with ``KFold``, and skxmc's estimators, metrics and scorers read
    it as label collections. :mod:`skxmc.datasets` loaders return this form.

    Parameters
    ----------
    Y : sparse matrix, ndarray or sequence of label collections
        Labels in any format skxmc accepts: label collections, or a 0/1 indicator matrix
        (sparse, or a numpy array) whose columns are ``classes``.
    classes : array-like of shape (n_labels,), default=None
        Label identifiers of the indicator's columns; None: the column indices.
    indicator : bool, default=None
        How to read a Python list of 0/1 rows of one length (ambiguous): True as an
        indicator matrix, False as label collections; None raises for such input.

    Returns
    -------
    ndarray of object of shape (n_samples,)
        One :class:`LabelSet` per sample (empty for samples without labels).

    Examples
    --------
    >>> from skxmc import as_label_sets
    >>> Y = as_label_sets([["physics", "optics"], [], ["optics"]])
    >>> Y.shape, Y.dtype
    ((3,), dtype('O'))
    >>> sorted(Y[0])
    ['optics', 'physics']
    >>> Y[1]
    LabelSet()
    >>> from sklearn.utils.multiclass import type_of_target
    >>> type_of_target(Y)  # not rejected: GridSearchCV(cv=5) uses KFold
    'unknown'
    """
    if isinstance(Y, list) and indicator:
        Y = np.asarray(Y)
    Y = _coerce(Y, "Y")
    if _is_sparse(Y) or _is_numeric_array(Y):
        Y_csr = check_label_matrix(Y, name="Y")
        # Empty classes name the columns of an indicator without any: a valid round trip.
        names = (
            np.arange(Y_csr.shape[1])
            if classes is None
            else _check_classes(classes, allow_empty=True)
        )
        if len(names) != Y_csr.shape[1]:
            raise ValueError(f"classes has {len(names)} labels but Y has {Y_csr.shape[1]} columns.")
        rows = [LabelSet(r.tolist()) for r in LabelSpace(names).inverse_transform(Y_csr)]
    else:
        rows, _ = _label_rows(Y, "Y", check_indicator=indicator is None)
        rows = [LabelSet(_normalise_row(row, "Y")) for row in rows]
    out = np.empty(len(rows), dtype=object)
    out[:] = rows
    return out


def _normalise_row(row: Any, name: str) -> list:
    items = row.tolist() if isinstance(row, np.ndarray) else row
    return [_normalise_label(x, name) for x in items]


#: Widest str labels gathered into fixed-width ``<U`` arrays; wider ones are gathered into
#: object arrays. A ``<U`` entry takes 4 bytes per character of the *longest* label, an
#: object entry 8 bytes, so one long label would otherwise multiply the memory of every
#: row of a top-k prediction or an inverse transform.
_MAX_GATHER_WIDTH = 64


def _gatherable(classes: np.ndarray) -> np.ndarray:
    """``classes`` in a dtype whose entries stay small when gathered by index."""
    if classes.dtype.kind == "U" and classes.dtype.itemsize // 4 > _MAX_GATHER_WIDTH:
        return classes.astype(object)
    return classes


class LabelSpace:
    """A fitted label space: converts labels to CSR columns and back.

    Parameters
    ----------
    classes : array-like of shape (n_labels,)
        The label identifiers, in column order (sorted, as produced by
        :func:`encode_labels`).
    """

    def __init__(self, classes: Sequence | np.ndarray) -> None:
        self.classes = np.asarray(classes)
        if self.classes.ndim != 1:
            raise ValueError("classes must be 1-D.")
        self._sorted = self.classes.dtype != object and bool(
            np.all(self.classes[:-1] < self.classes[1:])
        )
        self._index: dict | None = None

    @property
    def n_labels(self) -> int:
        return len(self.classes)

    def columns_of(self, labels: np.ndarray) -> np.ndarray:
        """Column index of each label, -1 where the label is not in the space."""
        labels = np.asarray(labels)
        if len(labels) == 0 or self.n_labels == 0:
            return np.full(len(labels), -1, dtype=np.int64)
        same_family = any(
            labels.dtype.kind in family and self.classes.dtype.kind in family
            for family in ("iu", "US")
        )
        if self._sorted and same_family:
            pos = np.searchsorted(self.classes, labels)
            pos_clipped = np.minimum(pos, self.n_labels - 1)
            found = (pos < self.n_labels) & (self.classes[pos_clipped] == labels)
            return np.where(found, pos_clipped, -1).astype(np.int64)
        if self._index is None:
            self._index = {label: i for i, label in enumerate(self.classes.tolist())}
        get = self._index.get
        return np.fromiter((get(x, -1) for x in labels.tolist()), np.int64, len(labels))

    def transform(self, Y: Any, *, name: str = "Y", n_samples: int | None = None) -> EncodedLabels:
        """Convert ``Y`` to CSR over this label space; unknown labels are dropped and counted.

        A column vector ``(n, 1)`` is a 1-D target (as in :func:`encode_target`) unless it
        is a 0/1 indicator of a one-label space."""
        Y = _coerce(Y, name)
        if not (self.n_labels == 1 and _is_numeric_array(Y)):
            Y = _ravel_column(Y, name, warn=False)
        if _is_sparse(Y) or _is_numeric_array(Y):
            Y_csr = check_label_matrix(Y, name=name, n_samples=n_samples, n_labels=self.n_labels)
            return EncodedLabels(Y_csr, np.zeros(Y_csr.shape[0], dtype=np.int64))
        rows, _ = _label_rows(Y, name)
        _check_n_rows(len(rows), n_samples, name)
        flat, indptr = _flatten(rows, name)
        # Look up each distinct label once: memory and time follow the distinct labels.
        uniques, codes = _factorize(flat, name)
        columns = self.columns_of(uniques)[codes]
        known = columns >= 0
        row_of = np.repeat(np.arange(len(rows)), np.diff(indptr))
        n_unknown = np.bincount(row_of[~known], minlength=len(rows)).astype(np.int64)
        known_per_row = np.bincount(row_of[known], minlength=len(rows))
        new_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(known_per_row, out=new_indptr[1:])
        return EncodedLabels(_build_csr(new_indptr, columns[known], self.n_labels), n_unknown)

    def inverse_transform(self, Y: sp.spmatrix | np.ndarray) -> list[np.ndarray]:
        """Indicator rows -> list of label arrays (columns with non-zero entries).

        Each array has the dtype of ``classes``, except str labels longer than 64
        characters: object arrays, whose size does not grow with the longest label.
        """
        Y_csr = sp.csr_matrix(Y)
        if Y_csr.shape[1] != self.n_labels:
            raise ValueError(
                f"Y has {Y_csr.shape[1]} columns but the label space has {self.n_labels} labels."
            )
        Y_csr.eliminate_zeros()
        Y_csr.sort_indices()
        classes = _gatherable(self.classes)
        return [classes[Y_csr.indices[a:b]] for a, b in itertools.pairwise(Y_csr.indptr)]

    def labels_of(self, indices: np.ndarray, fill_value: Any = None) -> np.ndarray:
        """Top-k column indices -> label identifiers (see :func:`indices_to_labels`)."""
        return indices_to_labels(indices, self.classes, fill_value=fill_value)


def _int_fill(classes: np.ndarray) -> int | None:
    """The empty-slot value of integer labels: -1, or one below the smallest class when
    the classes include -1 or lower, so that it is never a label; None (an object array)
    when no int64 value is free below them."""
    lowest = int(classes.min()) if len(classes) else 0
    if lowest > -1:
        return -1
    return lowest - 1 if lowest - 1 >= np.iinfo(np.int64).min else None


def indices_to_labels(
    indices: np.ndarray, classes: np.ndarray, *, fill_value: Any = None
) -> np.ndarray:
    """Map an array of column indices to label identifiers.

    Parameters
    ----------
    indices : ndarray of int
        Column indices into ``classes``; negative ones mark empty slots (fewer
        candidates than ``k``).
    classes : ndarray of shape (n_labels,)
        The label of each column.
    fill_value : object, default=None
        The value of empty slots. None picks one that is never a label: for integer
        labels ``-1``, or ``min(classes) - 1`` when the classes include ``-1`` or lower
        negative labels; ``nan`` for float labels; ``None`` (an object array) otherwise.

    Returns
    -------
    ndarray of the shape of ``indices``
        Labels of ``classes``, of its dtype, or object when ``fill_value`` does not fit
        it or when str labels are longer than 64 characters (a fixed-width array would
        store every entry at the width of the longest label); empty slots hold the fill
        value. Metrics also take a slot whose score is
        ``-inf`` as empty, whatever its label.
    """
    return _label_gather_plan(classes, fill_value=fill_value)(indices)


class _LabelGather:
    """``indices -> labels`` with the classes and the empty-slot value settled once (see
    :func:`_label_gather_plan`)."""

    __slots__ = ("classes", "fill_value")

    def __init__(self, classes: np.ndarray, fill_value: Any) -> None:
        self.classes, self.fill_value = classes, fill_value

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices)
        classes, fill_value = self.classes, self.fill_value
        missing = indices < 0
        if len(classes) == 0:
            out = np.empty(indices.shape, dtype=object if fill_value is None else classes.dtype)
            out[...] = fill_value
            return out
        labels = classes[np.where(missing, 0, indices)]
        if not missing.any():
            return labels
        if fill_value is None or (classes.dtype.kind in "US"):
            labels = labels.astype(object)
        labels[missing] = fill_value
        return labels


def _label_gather_plan(classes: np.ndarray, *, fill_value: Any = None) -> _LabelGather:
    """:func:`indices_to_labels` for fixed ``classes``, as a callable ``indices -> labels``:
    what depends only on the classes (their gatherable dtype, the empty-slot value, a scan
    of the classes for integer labels) is settled once, for callers that map many small
    index arrays with the same classes (a model answering single texts)."""
    classes = _gatherable(np.asarray(classes))
    if fill_value is None:
        if classes.dtype.kind in "iu":
            fill_value = _int_fill(classes)
            if classes.dtype.kind == "u":
                # uint cannot hold a negative fill; int64 can unless the labels are too big.
                if len(classes) and int(classes.max()) > np.iinfo(np.int64).max:
                    fill_value = None
                else:
                    classes = classes.astype(np.int64)
        elif classes.dtype.kind == "f":
            fill_value = np.nan
    return _LabelGather(classes, fill_value)
