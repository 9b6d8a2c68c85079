"""Adding rows to a fitted XR-Linear model (:meth:`XRLinearClassifier.update`).

A node of XR-Linear is one binary problem: the rows of its parent group (in row order),
its positives among them, their sample weights, the solver settings and the node's seed
(:func:`~skxmc.linear._problem.label_seeds`: the layer's seed and the node's column).
The solver is deterministic in those (the feature renumbering of ``solver_view`` keeps
every sum's order), so a node whose problem did not change would be retrained into the
same bits. ``fit`` keeps a 64-bit fingerprint of every node's problem
(``training_fingerprints_``) and ``update`` retrains only the nodes whose fingerprint
changed, top down, on the label tree of the last ``fit``:

- :func:`row_hashes`: one hash per row of ``X`` (its features, values and weight);
- :func:`layer_fingerprints`: per layer, each group's row sequence (``"groups"``), each
  node's positives by content (``"positives"``, blind to the rest of the group) and its
  whole problem (``"exact"``: the group's rows and the positives' places in them).

``scope="groups"`` retrains the nodes whose ``exact`` print changed (every child of a
group that gained or lost a row: the model that retraining every node on the fixed tree
gives, bit for bit); ``scope="labels"`` only those whose ``positives`` print changed (the
labels of the new rows and the clusters above them; their siblings keep their models and
miss the new rows as negatives until a ``"groups"`` update or a ``fit``).
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
from ..labels import LabelSpace, encode_target
from ._model_state import _search_structures
from ._problem import (
    LayerGroups,
    _relevance_targets,
    _splitmix64,
    row_squared_norms,
    solver_view,
)

__all__ = [
    "UpdateMixin",
    "layer_fingerprints",
    "row_hashes",
    "solver_settings",
    "training_fingerprints",
]

logger = logging.getLogger(__name__)
_Model = TypeVar("_Model", bound="UpdateMixin")

# Row drift (share of today's training rows that the label tree was not built on) above
# which update() advises a full fit. Chosen on tibkat_gnd_en's dev split (``update``
# suite, seed 0): with 10% new rows (drift 0.097) the updated model's P@5 was 0.05 above
# the full refit's, with 30% (drift 0.294) 0.23 below it.
_REFIT_ROW_DRIFT = 0.2

_FORMAT = 1  # version of training_fingerprints_'s layout


def _segment_sums(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Wrapping uint64 sums of ``values[indptr[k]:indptr[k + 1]]`` (empty segments: 0)."""
    cs = np.zeros(values.shape[0] + 1, np.uint64)
    np.cumsum(values, dtype=np.uint64, out=cs[1:])
    return cs[indptr[1:]] - cs[indptr[:-1]]


def _u64(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.uint64)


def row_hashes(X: sp.csr_matrix, sample_weight: np.ndarray | None) -> np.ndarray:
    """One uint64 per row of the canonical CSR float32 ``X``: its feature ids, values and
    (when given) weight."""
    entries = _splitmix64((_u64(X.indices) << np.uint64(32)) | _u64(X.data.view(np.uint32)))
    indptr = X.indptr.astype(np.int64)
    h = _splitmix64(_segment_sums(entries, indptr) ^ _splitmix64(_u64(np.diff(indptr))))
    if sample_weight is not None:
        w = np.ascontiguousarray(sample_weight, dtype=np.float64).view(np.uint64)
        h = _splitmix64(h ^ _splitmix64(w))
    return h


def layer_fingerprints(
    groups: LayerGroups, Y_t: sp.csr_matrix, hashes: np.ndarray, sample_weight: np.ndarray | None
) -> dict[str, np.ndarray]:
    """Fingerprints of one layer's node problems (``groups`` as ``fit`` builds them,
    before the rows of weight 0 leave; ``Y_t`` the layer's targets)."""
    n, n_labels = Y_t.shape
    if sample_weight is not None:
        groups = groups.keep_rows(sample_weight > 0)
    counts = np.diff(groups.row_indptr)
    n_groups = counts.shape[0]
    starts = np.repeat(groups.row_indptr[:-1], counts)
    local = np.arange(groups.row_indices.shape[0], dtype=np.int64) - starts
    rows = groups.row_indices.astype(np.int64)
    group_fp = _segment_sums(
        _splitmix64(hashes[rows] ^ _splitmix64(_u64(local))), groups.row_indptr
    )
    group_fp = _splitmix64(group_fp ^ _splitmix64(_u64(counts) + np.uint64(1)))
    parent = np.full(n_labels, -1, np.int64)
    parent[groups.label_indices] = np.repeat(np.arange(n_groups), np.diff(groups.label_indptr))
    Y = sp.csc_matrix(Y_t)
    Y.sort_indices()
    ent_row = Y.indices.astype(np.int64)
    ent_col = np.repeat(np.arange(n_labels), np.diff(Y.indptr))
    value = _u64(Y.data.astype(np.float32).view(np.uint32)) << np.uint64(32)
    kept = np.ones(ent_row.shape[0], bool)
    if sample_weight is not None:
        kept = sample_weight[ent_row] > 0
    positives = _splitmix64(hashes[ent_row] ^ value) * _u64(kept)
    # the place of every positive in its node's group (a positive outside it is ignored)
    keys = np.repeat(np.arange(n_groups, dtype=np.int64), counts) * n + rows
    g = parent[ent_col]
    q = np.maximum(g, 0) * n + ent_row
    pos = np.searchsorted(keys, q)
    inside = (g >= 0) & (pos < keys.shape[0])
    inside[inside] &= keys[pos[inside]] == q[inside]
    place = pos - groups.row_indptr[np.maximum(g, 0)]
    exact = _splitmix64(_u64(np.where(inside, place, 0)) ^ value) * _u64(inside)
    node_pos = _splitmix64(_segment_sums(positives, Y.indptr))
    own_group = np.where(parent >= 0, group_fp[np.maximum(parent, 0)], np.uint64(0))
    node_exact = _splitmix64(_segment_sums(exact, Y.indptr) ^ _splitmix64(own_group))
    return {"groups": group_fp, "positives": node_pos, "exact": node_exact}


def solver_settings(model: Any, weighted: bool) -> str:
    """The settings every node problem depends on besides its rows (a change retrains
    every node)."""
    keys = ("loss", "Cp", "Cn", "tol", "max_iter", "bias", "weight_threshold")
    keys += ("relevance_weighted", "negative_sampling")
    values = {k: getattr(model, k) for k in keys}
    return repr(sorted({**values, "weighted": bool(weighted)}.items()))


def training_fingerprints(
    model: Any,
    seed: int,
    hashes: np.ndarray,
    layers: list[dict],
    weighted: bool,
    tree_rows: np.ndarray | None = None,
    negatives: bool = False,
) -> dict:
    """``training_fingerprints_``: the layers' prints, the fit's seed, the solver settings
    and the hashes of the rows the label tree was built on (``tree_rows``; those of
    ``hashes`` when None)."""
    return {
        "format": _FORMAT,
        "seed": int(seed),
        "settings": solver_settings(model, weighted),
        "negatives": bool(negatives),
        "tree_rows": np.unique(hashes) if tree_rows is None else tree_rows,
        "layers": layers,
    }


def _only_columns(groups: LayerGroups, columns: np.ndarray) -> LayerGroups:
    """``groups`` with the label columns where ``columns`` is True only (rows kept)."""
    kept = columns[groups.label_indices]
    before = np.concatenate(([0], np.cumsum(kept, dtype=np.int64)))
    return LayerGroups(
        groups.row_indptr,
        groups.row_indices,
        before[groups.label_indptr],
        groups.label_indices[kept],
    )


def _replace_columns(W: sp.csc_matrix, W_new: sp.csc_matrix, columns: np.ndarray) -> sp.csc_matrix:
    """``W`` with the columns where ``columns`` is True taken from ``W_new`` (bit for bit)."""
    both = sp.hstack([sp.csc_matrix(W), W_new], format="csc")
    pick = np.where(columns, np.arange(W.shape[1]) + W.shape[1], np.arange(W.shape[1]))
    out = sp.csc_matrix(both[:, pick], dtype=np.float32)
    out.sort_indices()
    return out


def _model_targets(Y: Any, classes: np.ndarray, n: int) -> sp.csr_matrix:
    """``Y`` as CSR 0/1 over ``classes`` (its columns in that order); labels outside
    ``classes`` raise, naming :meth:`add_labels`."""
    Y_csr, found, kind = encode_target(Y, name="Y", n_samples=n)
    if kind.startswith("multilabel-") and kind != "multilabel-sequences":
        if Y_csr.shape[1] != len(classes):
            raise ValueError(
                f"Y is an indicator matrix of {Y_csr.shape[1]} columns, but the model has "
                f"{len(classes)} labels: its columns must be classes_ in that order. New "
                f"labels are added with add_labels(X, Y_new) first."
            )
        return sp.csr_matrix(Y_csr, dtype=np.float32)
    cols = LabelSpace(classes).columns_of(found) if len(found) else np.empty(0, np.int64)
    unknown = cols < 0
    if unknown.any():
        raise ValueError(
            f"Y holds {int(unknown.sum())} label(s) not in classes_, e.g. "
            f"{found[unknown][:5].tolist()!r}: update adds rows for the model's labels; add "
            f"new labels with add_labels(X, Y_new) first (or fit again)."
        )
    P = sp.csr_matrix(
        (np.ones(len(cols), np.float32), cols, np.arange(len(cols) + 1)),
        shape=(len(cols), len(classes)),
    )
    out = sp.csr_matrix(Y_csr @ P, dtype=np.float32)
    out.sort_indices()
    return out


class UpdateMixin:
    """:meth:`update` of XRLinearClassifier (new rows without a full refit)."""

    @_fit_context(prefer_skip_nested_validation=True)
    def update(
        self: _Model, X: Any, Y: Any, *, sample_weight: Any = None, scope: str = "groups"
    ) -> _Model:
        """Retrain only the nodes whose training data changed, on the fitted label tree.

        ``X, Y`` is the whole training set of today (the rows of the last ``fit`` and the
        new ones, for the labels of ``classes_``): a node is trained on all the rows of its
        parent group, so the old rows are needed to retrain it. ``fit`` stored a
        fingerprint of every node's problem (its group's rows, its positives, their
        weights, the solver settings: ``training_fingerprints_``); ``update`` builds the
        problems of ``(X, Y)`` top down as ``fit`` does, on the tree of the last ``fit``
        (not rebuilt), and retrains with ``fit``'s solver and seeds the nodes whose
        print changed:

        - ``scope="groups"`` (default): every node whose problem changed, i.e. each node
          with a new positive and every sibling of a group that gained or lost a row
          (they have new negatives). The model is then, bit for bit, the one that
          retraining every node of the fixed tree on ``(X, Y)`` gives; an unchanged
          node is not retrained and its scores stay bit-identical.
        - ``scope="labels"``: only the nodes whose positives changed (the labels of new or
          changed rows and the clusters above them); faster, and their siblings miss the
          new rows as negatives until a ``"groups"`` update or a ``fit``.

        Changed solver settings (``Cp``, ``loss``...) retrain every node; the tree
        settings are not used (the tree is kept). User ``negatives`` of ``fit`` are not
        taken: the nodes retrained here train without them.

        The label tree was built on the rows of the last ``fit``: ``update_drift_``, the
        share of today's training rows it was not built on, says how far it has drifted
        (logged at INFO, with the advice to fit again above about
        ``0.2``; see the XR-Linear page of the docs). A saved model is updated in place
        with ``model = skxmc.load(path); model.update(X, Y);
        skxmc.save(model, path, overwrite=True)``.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            All training rows (old and new), transformed as for ``fit``.
        Y : sparse matrix, ndarray or sequence of label collections
            Their labels, all in ``classes_``: label collections (a label outside
            ``classes_`` raises; add it with :meth:`add_labels` first), or a 0/1
            indicator whose columns are ``classes_`` in order.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-row weights, as in ``fit``.
        scope : {"groups", "labels"}, default="groups"
            Which changed nodes are retrained (see above).

        Returns
        -------
        self : XRLinearClassifier
            With ``nodes_updated_`` (nodes retrained per layer), ``update_drift_`` and
            ``training_fingerprints_`` updated.

        Examples
        --------
        >>> import numpy as np
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.datasets import make_xmc_classification
        >>> X, Y = make_xmc_classification(400, 200, 20, random_state=0)
        >>> clf = XRLinearClassifier().fit(X[:360], Y[:360])
        >>> clf = clf.update(X[:360], Y[:360])  # nothing changed: nothing retrained
        >>> sum(clf.nodes_updated_)
        0
        >>> clf = clf.update(X, Y)  # 40 new rows
        >>> sum(clf.nodes_updated_) > 0, round(clf.update_drift_, 2)
        (True, 0.1)
        """
        t0 = time.perf_counter()
        check_is_fitted(self)
        if vars(self).get("predict_only_", False):
            raise ValueError(
                "update needs the node weights (weights_), which this predict-only model no "
                "longer holds (made by compact() or saved with skxmc.save(..., "
                "predict_only=True)); update the full model."
            )
        if scope not in ("groups", "labels"):
            raise ValueError(f"scope must be 'groups' or 'labels', got {scope!r}.")
        self._check_complete()
        check_not_raw_text(X, type(self).__name__)
        X = self._validate_X(X)
        n = X.shape[0]
        Y = _model_targets(Y, self.classes_, n)
        sample_weight = check_sample_weight(sample_weight, n)
        old = vars(self).get("training_fingerprints_")
        settings = solver_settings(self, sample_weight is not None)
        if old is not None and old.get("format") != _FORMAT:
            old = None
        if old is None:
            logger.info(
                "this model has no training fingerprints (fitted by an older skxmc): update "
                "retrains every node once; row drift is counted from these rows."
            )
            seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        else:
            seed = int(old["seed"])
        retrain_all = old is None or old["settings"] != settings
        if old is not None and retrain_all:
            logger.info("the solver settings changed since the last fit: every node is retrained.")
        tree, chain = self.tree_, self.tree_.cluster_chain_
        hashes = row_hashes(X, sample_weight)
        tree_rows = np.unique(hashes) if old is None else old["tree_rows"]
        seen = np.isin(hashes, tree_rows)
        if sample_weight is not None:
            seen = seen | (sample_weight == 0)
        drift = float(np.mean(~seen)) if n else 0.0
        if self.relevance_weighted:
            targets = _relevance_targets(Y, chain)
        else:
            targets = tree.cluster_label_matrices(Y)
        sqnorms = row_squared_norms(X)
        view = solver_view(X, sqnorms)
        key = "exact" if scope == "groups" else "positives"
        weights = list(self.weights_)
        layers, updated, cache = [], [], None
        for t, (C, Y_t) in enumerate(zip(chain, targets)):
            matcher = self._layer_matcher(X, t, cache, None)
            groups = LayerGroups.from_matrices(Y_t, C, matcher)
            prints = layer_fingerprints(groups, Y_t, hashes, sample_weight)
            if retrain_all:
                changed = np.ones(C.shape[0], bool)
            else:
                changed = prints[key] != old["layers"][t][key]
            if changed.any():
                W_new = self._fit_layer(
                    X, Y_t, _only_columns(groups, changed), seed + t, sqnorms, None, view,
                    sample_weight,
                )  # fmt: skip
                weights[t] = _replace_columns(weights[t], W_new, changed)
            if not retrain_all:
                # a node kept as it was keeps the print of the problem it was trained on
                prints["exact"] = np.where(changed, prints["exact"], old["layers"][t]["exact"])
            layers.append(prints)
            updated.append(int(changed.sum()))
            if self.negative_sampling == "tfn+man" and t + 1 < len(chain):
                cache = _search_structures(tree, weights[: t + 1], self.classes_)
        fingerprints = training_fingerprints(
            self, seed, hashes, layers, sample_weight is not None, tree_rows
        )
        self.__dict__.update(
            weights_=weights,
            training_fingerprints_=fingerprints,
            nodes_updated_=updated,
            update_drift_=drift,
            _search_cache=_search_structures(tree, weights, self.classes_),
        )
        progress(
            logger,
            self.verbose,
            "update (%s): %d of %d nodes retrained %s in %.2f s; row drift %.3f (share of "
            "the rows the label tree was not built on; fit again above %.2f)",
            scope,
            sum(updated),
            sum(C.shape[0] for C in chain),
            updated,
            time.perf_counter() - t0,
            drift,
            _REFIT_ROW_DRIFT,
        )
        if drift > _REFIT_ROW_DRIFT:
            logger.info(
                "row drift %.3f exceeds %.2f: a full fit on all rows is due.",
                drift,
                _REFIT_ROW_DRIFT,
            )
        return self
