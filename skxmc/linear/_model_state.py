"""XR-Linear's model state: the consistency checks of a fitted or loaded model, and the
saved beam-search layout (written by ``save``, checked and rebuilt at ``skxmc.load``)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ..io import checks_entries
from ..tree import HierarchicalLabelTree
from ._beam import ChunkedWeights, check_blocks

__all__ = [
    "ModelStateMixin",
    "_SearchCache",
    "_check_model_state",
    "_chunked_from_layout",
    "_is_block_layout",
    "_layout_arrays",
    "_search_structures",
]

# The arrays of a ChunkedWeights that a saved model stores (its beam-search layout), so that
# loading, memory-mapped or not, builds nothing: name -> dtype, or the feature-major copy
# alone for a layer scored from it. Model directories of skxmc before the
# one-block-per-parent layout stored five arrays per layer instead (their layout is
# rebuilt from the weights at load); those of the first block layout stored the blocks of
# feature-major layers too (not read).
_LAYOUT_ARRAYS = {"block_start": np.int64, "feat_count": np.int64, "blocks": np.int32}

logger = logging.getLogger(__name__)
_Model = TypeVar("_Model", bound="ModelStateMixin")


def _layout_arrays(chunked: ChunkedWeights) -> dict:
    if chunked.feature_major is not None:
        return {"feature_major": chunked.feature_major}
    return {name: getattr(chunked, name) for name in _LAYOUT_ARRAYS}


def _monotone_from_zero(a: np.ndarray, end: int) -> bool:
    return a.shape[0] >= 1 and a[0] == 0 and a[-1] == end and not np.any(a[1:] < a[:-1])


def _is_block_layout(layout: Any) -> bool:
    """Whether a saved layer layout is this version's (not the five-array one)."""
    return isinstance(layout, dict) and "features" not in layout


def _chunked_from_layout(
    layout: Any, shape: tuple[int, int], nnz: int | None, parents: sp.csr_matrix, t: int
) -> ChunkedWeights:
    """A layer's ChunkedWeights from its saved layout, after checking every index the
    compiled search reads (a damaged or crafted file must raise, not read out of bounds);
    under ``skxmc.load(verify=False)`` only the checks that do not grow with the weights
    (they read the per-parent arrays, never the blocks, which a mapped load leaves on
    disk until a search reaches them). ``shape`` is the layer's weight matrix's, ``nnz``
    its entry count (None for a predict-only model, which keeps no weight matrix: the
    layout is then the only copy of the weights)."""
    where = f"the saved beam-search layout of layer {t}"
    if not isinstance(layout, dict):
        raise ValueError(f"{where} is not a dict of arrays.")
    n_rows, n_nodes = shape
    children = np.diff(parents.indptr).astype(np.int64)
    major = layout.get("feature_major")
    if major is not None:
        # scored from the feature-major copy (the persistence layer has checked its CSR
        # structure); any blocks beside it are not read
        if (
            not sp.isspmatrix_csr(major)
            or major.shape != tuple(shape)
            or (nnz is not None and major.nnz != nnz)
        ):
            raise ValueError(f"{where}: feature_major must be a CSR copy of the weights.")
        return ChunkedWeights.from_arrays(children, n_nodes, feature_major=major)
    if any(k not in layout for k in _LAYOUT_ARRAYS):
        raise ValueError(
            f"{where} is incomplete (expected {sorted(_LAYOUT_ARRAYS)} or feature_major)."
        )
    arr = {}
    for name, dtype in _LAYOUT_ARRAYS.items():
        a = layout[name]
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != dtype:
            raise ValueError(f"{where}: {name} must be a 1-D {np.dtype(dtype).name} array.")
        arr[name] = a
    n_parents = parents.shape[0]
    block_start, feat_count, blocks = arr["block_start"], arr["feat_count"], arr["blocks"]
    mismatch = ValueError(f"{where} does not match the layer's weights and tree.")
    if block_start.shape[0] != n_parents + 1 or feat_count.shape[0] != n_parents:
        raise mismatch
    spare = np.diff(block_start) - 2 * feat_count - 1  # twice each parent's entry count
    if (
        not _monotone_from_zero(block_start, blocks.shape[0])
        or np.any(feat_count < 0)
        or np.any(spare < 0)
        or np.any(spare % 2)
        or (nnz is not None and int(spare.sum()) // 2 != nnz)
    ):
        raise mismatch
    if checks_entries():  # per entry; skipped under skxmc.load(verify=False)
        fault = check_blocks(block_start, feat_count, blocks, n_rows, children)
        if fault is not None:
            raise ValueError(f"{where}: {fault}.")
    return ChunkedWeights.from_arrays(children, n_nodes, **arr)


def _check_model_state(state: dict) -> None:
    """Raise ``ValueError`` unless ``classes_``, ``tree_``, ``weights_`` and
    ``n_features_in_`` of ``state`` form one model: one weight matrix per tree layer, each
    ``(n_features_in_ + 1, nodes of the layer)``, and one label per leaf. Used on fitted
    estimators (save, unpickling, loading) and on saved states before they are loaded.
    A predict-only state (``predict_only_``) has no ``weights_``: its beam-search layout
    (``_search_cache`` in memory, checked layer by layer at load) holds the weights."""
    predict_only = bool(state.get("predict_only_", False))
    required = ("classes_", "tree_", "n_features_in_") + (() if predict_only else ("weights_",))
    missing = [n for n in required if n not in state]
    if missing:
        raise ValueError(f"incomplete model (missing {missing})")
    classes, n_features = state["classes_"], state["n_features_in_"]
    chain = getattr(state["tree_"], "cluster_chain_", None)
    if predict_only:
        if chain is None:
            raise ValueError("incomplete model: tree_ has no cluster_chain_")
        cache = state.get("_search_cache")
        if cache is not None and [c.n_nodes for c in cache.chunks] != [C.shape[0] for C in chain]:
            raise ValueError("inconsistent model: the beam-search layout does not match tree_")
    else:
        _check_weights(state["weights_"], chain, n_features)
    if len(classes) != chain[-1].shape[0]:
        raise ValueError(
            f"inconsistent model: classes_ has {len(classes)} labels but the last weights_ "
            f"matrix has {chain[-1].shape[0]} columns"
        )
    tree_classes = getattr(state["tree_"], "classes_", None)
    if tree_classes is not None and len(tree_classes) != len(classes):
        raise ValueError(
            f"inconsistent model: classes_ has {len(classes)} labels but tree_.classes_ has "
            f"{len(tree_classes)}"
        )


def _check_weights(weights: Any, chain: Any, n_features: int) -> None:
    """One weight matrix per layer of ``chain``, each ``(n_features + 1, nodes)``."""
    if not isinstance(weights, list) or chain is None or len(weights) != len(chain):
        n_weights = len(weights) if isinstance(weights, list) else "?"
        n_chain = len(chain) if chain is not None else "no"
        raise ValueError(
            f"incomplete model: weights_ has {n_weights} layers but tree_ has {n_chain} "
            f"cluster_chain_ matrices (an interrupted fit?)"
        )
    for t, (W, C) in enumerate(zip(weights, chain)):
        expected = (n_features + 1, C.shape[0])
        if not sp.issparse(W) or W.shape != expected:
            raise ValueError(
                f"inconsistent model: weights_[{t}] has shape {getattr(W, 'shape', None)}, "
                f"expected (n_features_in_ + 1, nodes of layer {t}) = {expected}"
            )


class _SearchCache(NamedTuple):
    """What a beam search reads, derived from ``tree_`` / ``weights_`` and kept with the
    ``classes_`` of the same fit, so that a predict never mixes two fits."""

    parents: list
    chunks: list
    classes: np.ndarray


def _search_structures(tree: HierarchicalLabelTree, weights: list, classes: Any) -> _SearchCache:
    """Parent maps and parent-grouped weights of the beam search."""
    parents = []
    for C in tree.cluster_chain_:
        P = C.T.tocsr()
        P.sort_indices()
        parents.append(P)
    chunks = [ChunkedWeights(W, P) for W, P in zip(weights, parents)]
    return _SearchCache(parents, chunks, classes)


# What compact() drops: (name, what it is and what needs it), for the docs and the error a
# predict-only model raises when one of them is asked for.
_TRAINING_ONLY = {
    "weights_": "the node weight matrices (the beam search reads the same weights from its "
    "own layout); explain, to_pecos and inspecting the node models need them",
    "fit_time_per_layer_": "training diagnostics",
    "fit_bytes_per_layer_": "training diagnostics",
    "training_fingerprints_": "the node problems' prints that update() compares",
}


class ModelStateMixin:
    """XRLinearClassifier's fitted state as one unit: the search structures derived from
    ``tree_`` / ``weights_``, the checks that the attributes form one complete model,
    pickling, :func:`skxmc.save` / :func:`skxmc.load` hooks and the predict-only form
    (:meth:`compact`). A mixin so that ``_xrlinear.py`` reads as the algorithm."""

    def compact(self: _Model) -> _Model:
        """Drop what only training and inspection need; predictions stay bit-identical.

        The beam search reads the node weights from its own layout (grouped by parent
        node), so the weight matrices ``weights_`` are a second copy of them: a
        predict-only model keeps the layout alone and frees the memory of ``weights_``
        (saved, 0.58 of the full folder's size on tibkat_gnd_en; see the persistence page
        of the docs). Dropped: ``weights_``, ``fit_time_per_layer_``,
        ``fit_bytes_per_layer_`` (training diagnostics), ``training_fingerprints_``
        (what :meth:`update` compares) and the tree's
        ``label_embedder_`` (the label2vec model of a ``"label2vec"`` tree). Kept: the
        parameters, ``classes_``, ``tree_``'s cluster chain, ``n_features_in_``, and so
        ``predict``, ``predict_topk``, ``predict_proba``, ``decision_function``,
        ``score``, pickling and :func:`skxmc.save` / :func:`skxmc.load` (memory-mapped
        too). Lost: reading ``weights_`` (the error names this method),
        :meth:`explain`, which reads the node weights per feature, :meth:`add_labels`
        and :meth:`update`, which train nodes, and
        :func:`skxmc.io.to_pecos`, which writes them. ``fit`` trains a full model again
        (the dropped state comes back only that way); ``clone`` gives an unfitted copy
        as usual. :func:`skxmc.save` with ``predict_only=True`` saves a compacted copy
        and leaves this estimator whole.

        Returns
        -------
        self : XRLinearClassifier
            With ``predict_only_`` True.

        Examples
        --------
        >>> import numpy as np
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.datasets import make_xmc_classification
        >>> X, Y = make_xmc_classification(200, 300, 40, random_state=0)
        >>> clf = XRLinearClassifier().fit(X, Y)
        >>> before = clf.predict_topk(X[:5])
        >>> clf = clf.compact()
        >>> after = clf.predict_topk(X[:5])
        >>> bool(np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1]))
        True
        >>> clf.predict_only_, hasattr(clf, "weights_")
        (True, False)
        """
        check_is_fitted(self)
        self._check_complete()
        tree = self.tree_
        if "label_embedder_" in vars(tree):
            # a copy: the tree object may be shared (e.g. by a copy made before)
            tree = type(tree).__new__(type(tree))
            tree.__dict__.update(self.tree_.__dict__)
            del tree.__dict__["label_embedder_"]
        dropped = {name: None for name in _TRAINING_ONLY}
        state = {k: v for k, v in vars(self).items() if k not in dropped}
        state.update(tree_=tree, predict_only_=True)
        # one assignment: a concurrent predict sees the whole model, before or after
        self.__dict__ = state
        return self

    def _predict_only_copy(self: _Model) -> _Model:
        """A compacted copy sharing the arrays (``skxmc.save(..., predict_only=True)``);
        this estimator is left as it is."""
        check_is_fitted(self)
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        return copy.compact()

    def __getattr__(self, name: str) -> Any:
        # Called only when the attribute is missing: name what compact() dropped.
        if name in _TRAINING_ONLY and vars(self).get("predict_only_", False):
            raise AttributeError(
                f"this XRLinearClassifier is predict-only (made by compact() or saved with "
                f"skxmc.save(..., predict_only=True)) and no longer holds {name}: "
                f"{_TRAINING_ONLY[name]}. Fit it again, or use the full model (saved "
                f"without predict_only), to get it."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __sklearn_is_fitted__(self) -> bool:
        # Complete models only: the search structures exist once the weights of every
        # layer do (after fit, unpickling and loading).
        return "_search_cache" in vars(self)

    def _build_search_structures(self) -> None:
        """Rebuild ``_search_cache`` from ``tree_`` / ``weights_`` (after unpickling and
        loading; never during predict, which must leave the estimator unchanged)."""
        self._search_cache = _search_structures(self.tree_, self.weights_, self.classes_)

    def _check_complete(self) -> None:
        """Raise if the fitted attributes do not form one complete model (e.g. a model
        saved by an older version from an interrupted fit)."""
        try:
            _check_model_state(vars(self))
        except ValueError as exc:
            raise ValueError(f"this XRLinearClassifier holds an {exc}; fit it again.") from None

    def _check_saved_state(self, attributes: dict, arrays: dict) -> None:
        """The same checks on a saved state, before it is loaded (skxmc.load's hook)."""
        state = {**attributes, **arrays}
        # an unfitted template (e.g. MatchXML's ranker) has neither
        if "weights_" in state or state.get("predict_only_", False):
            _check_model_state(state)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if not state.get("predict_only_", False):
            # derived data, not worth pickling; a predict-only model has no weights_ to
            # derive it from, and keeps it
            state.pop("_search_cache", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "weights_" in state:
            self._check_complete()
            self._build_search_structures()
        elif state.get("predict_only_", False):
            self._check_complete()

    def _save_state(self) -> tuple[dict, dict]:
        check_is_fitted(self)
        self._check_complete()
        attributes, arrays = super()._save_state()
        # The beam search's layout too (about the weights' size again): loading then builds
        # nothing, and skxmc.load(mmap=True) predicts from the mapped file.
        arrays["_search_layout"] = [_layout_arrays(c) for c in self._search_cache.chunks]
        return attributes, arrays

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        arrays = dict(arrays)
        layout = arrays.pop("_search_layout", None)  # absent in older model directories
        super()._load_state(attributes, arrays)
        self._check_complete()
        predict_only = bool(getattr(self, "predict_only_", False))
        if predict_only and not (
            isinstance(layout, list) and all(_is_block_layout(lay) for lay in layout)
        ):
            raise ValueError(
                "a predict-only model must hold its beam-search layout (its only copy of "
                "the weights), and this one does not."
            )
        if layout is None or (
            isinstance(layout, list) and not all(_is_block_layout(lay) for lay in layout)
        ):
            if layout is not None:
                logger.info(
                    "this model directory holds the beam-search layout of an older skxmc; "
                    "it is rebuilt in memory (save the model again to load it mapped)."
                )
            self._build_search_structures()
            return
        parents = [C.T.tocsr() for C in self.tree_.cluster_chain_]
        for P in parents:
            P.sort_indices()
        n_rows = self.n_features_in_ + 1
        shapes = [(n_rows, C.shape[0]) for C in self.tree_.cluster_chain_]
        # the weight count of every layer, checked against the layout's (none to check in
        # a predict-only model: the layout is its only copy of the weights)
        nnz = [None] * len(shapes) if predict_only else [W.nnz for W in self.weights_]
        if not isinstance(layout, list) or len(layout) != len(shapes):
            raise ValueError("the saved beam-search layout does not have one entry per layer.")
        chunks = [
            _chunked_from_layout(lay, shape, n, P, t)
            for t, (lay, shape, n, P) in enumerate(zip(layout, shapes, nnz, parents))
        ]
        self._search_cache = _SearchCache(parents, chunks, self.classes_)
