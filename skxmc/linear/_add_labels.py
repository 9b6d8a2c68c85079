"""Adding labels to a fitted XR-Linear model (:meth:`XRLinearClassifier.add_labels`).

The pieces that do not train: reading the new labels (:func:`encode_new_labels`),
placing each new label in a leaf cluster (:func:`route_new_labels`), and merging the new
label columns into the tree's last cluster matrix, the last layer's weights and
``classes_`` (:func:`merge_label_columns`).

Placement by the model's own matcher, not by distances between label embeddings: a new
label joins the leaf cluster that the model's beam reaches most strongly for the rows
that carry the label (the sum of their path scores). The inner nodes already lead those
rows to that cluster, so they need no retraining for the new label to be found, and no
old label's node changes: the old labels' scores stay bit-identical. Embedding distance
(PIFA) would need the old labels' embeddings, which the tree does not keep, and would
place a label where the beam may not go for its rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..labels import (
    LabelSpace,
    _check_classes,
    _coerce,
    _is_numeric_array,
    _is_sparse,
    encode_labels,
)

__all__ = ["encode_new_labels", "merge_label_columns", "route_new_labels"]


def _kind(classes: np.ndarray) -> str:
    """The label family of an array of identifiers: "int", "str" or "other"."""
    if classes.dtype.kind in "iu":
        return "int"
    if classes.dtype.kind in "US" or (
        classes.dtype == object and all(isinstance(c, str) for c in classes.tolist())
    ):
        return "str"
    return "other"


def encode_new_labels(
    Y: Any, classes: Any, old_classes: np.ndarray, n_samples: int
) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(Y_new, new_classes)``: ``Y`` (labels of the ``n_samples`` rows for the new
    classes only) as CSR 0/1 over ``new_classes``, checked against the model's
    ``old_classes``. ``classes`` names the columns of an indicator ``Y`` (None: the
    integers after ``max(old_classes)`` when the model's classes are integers)."""
    Y = _coerce(Y, "Y")
    matrix = _is_sparse(Y) or _is_numeric_array(Y)
    Y_csr, found = encode_labels(Y, name="Y", n_samples=n_samples)
    if Y_csr.shape[1] == 0:
        raise ValueError("Y holds no label at all; add_labels needs at least one new label.")
    if matrix:
        if classes is not None:
            names = _check_classes(classes)
            if len(names) != Y_csr.shape[1]:
                raise ValueError(
                    f"classes has {len(names)} labels but the indicator matrix Y has "
                    f"{Y_csr.shape[1]} columns; classes names the columns of Y."
                )
        elif _kind(old_classes) == "int":
            start = int(old_classes.max()) + 1 if len(old_classes) else 0
            names = np.arange(start, start + Y_csr.shape[1], dtype=np.int64)
        else:
            raise ValueError(
                "Y is an indicator matrix and classes_ holds non-integer labels: pass "
                "classes=[...] to name the columns of Y (the new labels)."
            )
    else:
        if classes is not None:
            raise ValueError(
                "classes names the columns of an indicator matrix Y; label collections "
                "name their labels themselves, so pass classes=None."
            )
        names = found
    if _kind(names) != _kind(old_classes) or _kind(names) == "other":
        raise ValueError(
            f"the new labels must be of the kind of classes_ (int or str), got "
            f"{names.dtype} labels for classes_ of dtype {old_classes.dtype}."
        )
    if names.dtype.kind == "U":
        names = names.astype(object)  # str classes are object arrays (encode_labels')
    known = LabelSpace(old_classes).columns_of(names) >= 0
    if known.any():
        raise ValueError(
            f"Y holds {int(known.sum())} label(s) already in classes_, e.g. "
            f"{names[known][:5].tolist()!r}: add_labels adds new labels only, and the old "
            f"labels' nodes are not retrained (fit again to retrain them). Pass only the "
            f"new labels of each row."
        )
    empty = Y_csr.getnnz(axis=0) == 0
    if empty.any():
        raise ValueError(
            f"{int(empty.sum())} new label(s) have no positive row in Y, e.g. "
            f"{names[empty][:5].tolist()!r}: a new label is placed in the tree and "
            f"trained by the rows that carry it."
        )
    return Y_csr, names


def _row_argmax(S: sp.csr_matrix) -> np.ndarray:
    """Column of the largest stored entry of every row of ``S`` (-1 for empty rows; ties
    go to the lowest column)."""
    S = sp.csr_matrix(S)
    S.sum_duplicates()
    out = np.full(S.shape[0], -1, dtype=np.int64)
    for i in np.flatnonzero(np.diff(S.indptr)):
        lo, hi = S.indptr[i], S.indptr[i + 1]
        out[i] = S.indices[lo + int(np.argmax(S.data[lo:hi]))]
    return out


def route_new_labels(
    Y_new: sp.csr_matrix, matcher: sp.csr_matrix, leaf_sizes: np.ndarray
) -> np.ndarray:
    """Leaf cluster of every new label: the one of largest summed matcher score (path
    score of the leaf cluster in each row's beam) over the label's rows. A label whose
    rows reach no cluster (e.g. empty rows) joins the smallest cluster."""
    votes = sp.csr_matrix(Y_new.T @ matcher)
    leaf = _row_argmax(votes)
    lost = leaf < 0
    if lost.any():
        leaf[lost] = int(np.argmin(leaf_sizes))
    return leaf


def _is_sorted(classes: np.ndarray) -> bool:
    try:
        return bool(np.all(classes[:-1] < classes[1:]))
    except TypeError:
        return False


def merge_label_columns(
    old_classes: np.ndarray, new_classes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(classes, order)``: the merged label identifiers and the permutation that puts
    ``concatenate([old, new])`` in that order. Sorted classes (``fit``'s default) stay
    sorted; a user-given order (``classes=``) is kept, the new labels appended."""
    merged = np.concatenate([old_classes.astype(object), new_classes.astype(object)])
    if old_classes.dtype.kind in "iu":
        merged = merged.astype(np.int64)
    if _is_sorted(old_classes):
        order = np.argsort(merged, kind="stable")
    else:
        order = np.arange(len(merged))
    return merged[order], order
