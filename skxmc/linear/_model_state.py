"""XR-Linear's model state: the consistency checks of a fitted or loaded model, and the
saved beam-search layout (written by ``save``, checked and rebuilt at ``skxmc.load``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..io import checks_entries
from ._beam import ChunkedWeights, check_blocks

__all__ = ["_check_model_state", "_chunked_from_layout", "_is_block_layout", "_layout_arrays"]

# The arrays of a ChunkedWeights that a saved model stores (its beam-search layout), so that
# loading, memory-mapped or not, builds nothing: name -> dtype, or the feature-major copy
# alone for a layer scored from it. Model directories of skxmc before the
# one-block-per-parent layout stored five arrays per layer instead (their layout is
# rebuilt from the weights at load); those of the first block layout stored the blocks of
# feature-major layers too (not read).
_LAYOUT_ARRAYS = {"block_start": np.int64, "feat_count": np.int64, "blocks": np.int32}


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
