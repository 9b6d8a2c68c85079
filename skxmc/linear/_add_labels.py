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

import logging
import time
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._base import check_not_raw_text
from .._compat import _fit_context
from .._logging import progress
from .._sample_weight import check_sample_weight
from ..labels import (
    LabelSpace,
    _check_classes,
    _coerce,
    _is_numeric_array,
    _is_sparse,
    encode_labels,
)
from ._beam import ChunkedWeights, keep_topk
from ._model_state import _SearchCache
from ._problem import LayerGroups, row_squared_norms

__all__ = ["AddLabelsMixin", "encode_new_labels", "merge_label_columns", "route_new_labels"]

logger = logging.getLogger(__name__)
_Model = TypeVar("_Model", bound="AddLabelsMixin")


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


# Label drift (share of the labels added since the last full fit) above which a full fit
# is due; see the XR-Linear page of the docs for the measurement behind it.
_REFIT_DRIFT = 0.1
# add_labels: a new label's negatives are the rows whose best _NEGATIVE_CLUSTERS leaf
# clusters hold it, and it is placed by the top _ROUTING_CLUSTERS clusters of its rows'
# beams. Chosen on tibkat_gnd_en's dev split (seed 0, 5% of the labels added): 1 / 3 / 10
# negative clusters gave recall@5 of the new labels 38.8 / 34.1 (2) / 28.4.
_NEGATIVE_CLUSTERS = 1
_ROUTING_CLUSTERS = 10
# add_labels trains the new labels with a positive cost of Cp times this: the leaf
# cluster's node was not trained on their rows, so their path scores start from a lower
# cluster score than an old label's; a larger own score makes up for it. Chosen on the
# same dev split (seed 0, 5%): Cp x 2 raised their recall@5 from 38.8 to 43.7 with the
# overall P@5 unchanged (21.11 vs 21.15).
_NEW_LABEL_CP = 2.0


# the per-node prints of training_fingerprints_ (skxmc.linear._update)
_NODE_PRINTS = ("positives", "exact")


def _pad_columns(M: sp.csr_matrix, n_columns: int) -> sp.csr_matrix:
    """``M`` with ``n_columns`` columns (a beam search's output has the layer's width)."""
    M = sp.csr_matrix(M)
    if M.shape[1] == n_columns:
        return M
    return sp.csr_matrix((M.data, M.indices, M.indptr), shape=(M.shape[0], n_columns))


class AddLabelsMixin:
    """:meth:`add_labels` of XRLinearClassifier (new labels without a full refit)."""

    @_fit_context(prefer_skip_nested_validation=True)
    def add_labels(
        self: _Model, X: Any, Y: Any, *, classes: Any = None, sample_weight: Any = None
    ) -> _Model:
        """Add new labels to the fitted model without a full refit.

        Each new label joins the leaf cluster that the model's beam reaches most
        strongly for the rows of ``X`` that carry it (the sum of their leaf-cluster path
        scores, the rows of weight 0 left out), and only the new labels' own rankers
        are trained, with the layer solver of ``fit``, on the rows of that cluster's
        group: the rows that carry a new label of the cluster (positives of their
        label) and the rows whose best leaf cluster (the top of their beam) it is, the
        counterpart of the rows positive for the cluster that teacher forcing trains a
        label on (wider negatives score new labels below old ones, which were trained
        against the cluster's rows only), with twice the positive cost ``Cp`` (their
        cluster's node was not trained on their rows, so their path scores start lower
        than an old label's). No existing node is retrained: the inner
        nodes already lead the label's rows to its cluster, and the old labels' scores
        stay bit-identical, so the top-k of a row changes only where a new label enters
        it. ``classes_`` grows
        (kept sorted when it was; a user-given order gets the new labels at the end),
        and ``tree_``, ``weights_`` and the beam search are updated together, at the end
        (a concurrent predict sees the old model or the new one).

        The tree was built on the labels of the last ``fit``; ``label_drift_``, the share
        of today's labels added since then, says how far it has drifted. Above about
        10% a full ``fit`` on all labels is due (see the XR-Linear page of
        the docs: measured on tibkat_gnd_en). A saved model is updated with
        ``model = skxmc.load(path); model.add_labels(X, Y);
        skxmc.save(model, path, overwrite=True)`` (the save replaces the folder
        atomically).

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Training rows with ``n_features_in_`` features, transformed as for ``fit``
            (the original training rows, new rows, or both). Rows without a new label
            are negatives of the new labels whose cluster their beam reaches.
        Y : sparse matrix, ndarray or sequence of label collections
            The rows' labels among the new classes only (a label of ``classes_`` raises):
            one collection per row (may be empty), or a 0/1 indicator
            ``(n_samples, n_new)`` whose columns ``classes`` names. Every new label needs
            at least one positive row.
        classes : array-like of shape (n_new,), default=None
            Names of the columns of an indicator ``Y``. None: the integers that follow
            ``max(classes_)`` (integer classes only). Not used with label collections.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-row weights, as in ``fit``.

        Returns
        -------
        self : XRLinearClassifier
            With the new labels in ``classes_``, ``n_labels_added_`` and ``label_drift_``
            updated.

        Examples
        --------
        >>> import numpy as np
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.datasets import make_xmc_classification
        >>> X, Y = make_xmc_classification(300, 200, 20, random_state=0)
        >>> clf = XRLinearClassifier(top_k=5).fit(X, Y[:, :18])  # labels 18, 19 held out
        >>> old_top = clf.predict_topk(X[:3])
        >>> clf = clf.add_labels(X, Y[:, 18:])  # indicator: its columns become 18 and 19
        >>> clf.classes_[-3:].tolist(), clf.n_labels_added_, round(clf.label_drift_, 2)
        ([17, 18, 19], 2, 0.1)
        >>> scores = clf.predict_topk(X[:3], labels=range(18))[1]
        >>> bool(np.array_equal(scores, old_top[1]))  # old labels score as before
        True
        """
        t0 = time.perf_counter()
        check_is_fitted(self)
        if vars(self).get("predict_only_", False):
            raise ValueError(
                "add_labels needs the node weights (weights_), which this predict-only "
                "model no longer holds (made by compact() or saved with "
                "skxmc.save(..., predict_only=True)); add labels to the full model."
            )
        self._check_complete()
        check_not_raw_text(X, type(self).__name__)
        X = self._validate_X(X)
        n = X.shape[0]
        Y_new, new_classes = encode_new_labels(Y, classes, self.classes_, n)
        sample_weight = check_sample_weight(sample_weight, n)
        tree, weights, cache = self.tree_, self.weights_, self._search_cache
        chain = tree.cluster_chain_
        n_leaves = chain[-1].shape[1]
        if len(chain) == 1:
            # one leaf: every row is a candidate of the root, as in fit's first layer
            beam = negatives = sp.csr_matrix(np.ones((n, 1), dtype=np.float32))
        else:
            # the leaf clusters of each row's beam; "noop" path scores are raw and may be
            # negative: route on [0, 1] scores
            beam = self._proba_of(self._search(X, top_k=None, n_layers=len(chain) - 1))
            negatives = _pad_columns(keep_topk(beam, _NEGATIVE_CLUSTERS), n_leaves)
        Y_vote = Y_new
        if sample_weight is not None:
            Y_vote = sp.csr_matrix(Y_new.multiply(sample_weight[:, None]))
        routing = keep_topk(beam, _ROUTING_CLUSTERS) if len(chain) > 1 else beam
        leaf = route_new_labels(Y_vote, routing, np.asarray(chain[-1].sum(axis=0)).ravel())
        C_new = sp.csr_matrix(
            (np.ones(len(leaf), np.float32), leaf.astype(np.int32), np.arange(len(leaf) + 1)),
            shape=(len(leaf), n_leaves),
        )
        groups = LayerGroups.from_matrices(Y_new, C_new, negatives)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        W_new = self._fit_layer(
            X,
            Y_new,
            groups,
            seed + len(chain) + len(self.classes_),
            row_squared_norms(X),
            None,
            None,
            sample_weight,
            Cp=self.Cp * _NEW_LABEL_CP,
        )
        merged, order = merge_label_columns(self.classes_, new_classes)
        W_last = sp.csc_matrix(sp.hstack([weights[-1], W_new], format="csc")[:, order])
        W_last.sort_indices()
        C_last = sp.csr_matrix(sp.vstack([chain[-1], C_new], format="csr")[order])
        new_tree = type(tree).__new__(type(tree))
        new_tree.__dict__.update(tree.__dict__)
        new_tree.__dict__.update(
            cluster_chain_=[*chain[:-1], C_last],
            classes_=merged,
            n_labels_=len(merged),
            leaf_assignment_=np.concatenate([tree.leaf_assignment_, leaf])[order],
        )
        new_weights = [*weights[:-1], W_last]
        P = C_last.T.tocsr()
        P.sort_indices()
        new_cache = _SearchCache(
            [*cache.parents[:-1], P], [*cache.chunks[:-1], ChunkedWeights(W_last, P)], merged
        )
        n_added = int(vars(self).get("n_labels_added_", 0)) + len(new_classes)
        drift = n_added / len(merged)
        state = {}
        prints = vars(self).get("training_fingerprints_")
        if prints is not None:
            # the new labels' nodes were not trained as fit trains them: a print of 0 that
            # no problem has, so that update() retrains them
            last, pad = prints["layers"][-1], np.zeros(len(new_classes), np.uint64)
            last = {**last, **{k: np.concatenate([last[k], pad])[order] for k in _NODE_PRINTS}}
            state["training_fingerprints_"] = {**prints, "layers": [*prints["layers"][:-1], last]}
        # one update: a concurrent predict sees the old model or the new one
        self.__dict__.update(
            **state,
            classes_=merged,
            tree_=new_tree,
            weights_=new_weights,
            n_labels_added_=n_added,
            label_drift_=drift,
            _search_cache=new_cache,
        )
        progress(
            logger,
            self.verbose,
            "add_labels: %d new labels into %d leaf clusters, %d weights, %.2f s; label "
            "drift %.3f (share of the labels the tree was not built on; fit again above %.2f)",
            len(new_classes),
            len(np.unique(leaf)),
            W_new.nnz,
            time.perf_counter() - t0,
            drift,
            _REFIT_DRIFT,
        )
        if drift > _REFIT_DRIFT:
            logger.info(
                "label drift %.3f exceeds %.2f: a full fit on all labels is due.",
                drift,
                _REFIT_DRIFT,
            )
        return self
