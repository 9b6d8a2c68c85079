"""The few-row path of :meth:`XRLinearClassifier.predict_topk`: the same kernels, in the
same order, on the same arrays, without the per-call Python around them.

A single text costs libpecos about 0.3 ms (reuters) to 1 ms (tibkat); the full path spent
most of its 0.7-1.3 ms outside the compiled kernels: ``check_array`` on an input that was
already a valid CSR float32 row (0.17 ms), a scipy matrix built and checked around each
layer's candidates and beam (0.05 ms each), an ``int32 -> int64`` copy of every dense
layer's feature-major ``indptr`` (``n_features + 1`` entries) per call, numba's thread
count set and reset around each kernel, and the label mapping's ``classes_`` scan (its
empty-slot value) per call. Here:

- :func:`fast_rows` accepts only what the full validation would pass unchanged (a fitted
  model without feature names, a CSR float32 matrix of 1 to ``FAST_MAX_ROWS`` rows of
  the fitted width, all finite; sorted as the full path sorts it) and returns None for
  anything else, which then takes the full path with its errors and warnings;
- :func:`search_few` runs the beam search of :func:`~skxmc.linear._beam.beam_search` on
  raw arrays, one thread, with the per-layer arrays prepared once per fitted model
  (:func:`_prepared`);
- :func:`topk_labels` ranks the last layer as :func:`~skxmc._ranking.topk_from_sparse`
  does and maps columns to labels with a mapping plan prepared once.

The result is bit-identical to the full path (``tests/linear/test_fast_predict.py``).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import scipy.sparse as sp

from .._kernels.beam import (
    _expand_kernel,
    _keep_topk_kernel,
    _score_chunks_kernel,
    _score_dense_kernel,
)
from .._kernels.jit import interruptible
from .._kernels.ranking import _csr_topk_kernel
from .._ranking import topk_from_sparse
from .._sparse_product import csr_arrays
from ..io import mapped_file_span
from ..labels import _label_gather_plan
from ._beam import _CAN_PREAD, _POST_CODES, _READ_MAX_MEAN_BLOCK, score_candidates

__all__ = ["FAST_MAX_ROWS", "fast_rows", "search_few", "topk_labels"]

# Rows up to which predict_topk takes this path: beyond, the per-call cost that it saves is
# small beside the search, and the full path's threads and row blocks pay off.
FAST_MAX_ROWS = 32


def fast_rows(est: Any, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(indptr int64, indices int32, data float32)`` of ``X`` when ``est._validate_X``
    would return it unchanged (no copy, no error, no warning), else None."""
    if not (sp.issparse(X) and X.format == "csr" and X.dtype == np.float32):
        return None
    state = vars(est)
    if "_search_cache" not in state or "feature_names_in_" in state:
        return None  # unfitted (its error), or fitted on named features (their warning)
    n_rows, n_features = X.shape
    if not (1 <= n_rows <= FAST_MAX_ROWS) or n_features != state.get("n_features_in_"):
        return None
    if not np.isfinite(X.data).all():
        return None
    if not X.has_canonical_format:  # as _as_sorted_csr: a sorted copy (TfidfVectorizer's)
        X = X.copy()
        X.sum_duplicates()
    return csr_arrays(X)


class _Layer:
    """One layer's arrays in the kernels' dtypes, prepared once per fitted model."""

    __slots__ = ("chunks", "dense", "mapped", "p_indices", "p_indptr", "parents")

    def __init__(self, parents: sp.csr_matrix, chunks: Any) -> None:
        self.parents, self.chunks = parents, chunks
        self.p_indptr, self.p_indices, _ = csr_arrays(parents)
        fm = chunks.feature_major
        self.dense = None if fm is None else csr_arrays(fm)
        self.mapped = False
        if fm is None and _CAN_PREAD and mapped_file_span(chunks.blocks) is not None:
            # a memory-mapped model's small blocks are read from the file (score_candidates)
            self.mapped = chunks.blocks.nbytes <= _READ_MAX_MEAN_BLOCK * len(chunks.feat_count)


# the prepared layers and label plan of each search cache, kept on its last layer's
# ChunkedWeights (see ChunkedWeights.__getstate__, which leaves them out of pickles)
_ATTR = "_fast_prepared"


def _prepared(cache: Any) -> tuple[list[_Layer], tuple]:
    holder = cache.chunks[-1]
    got = getattr(holder, _ATTR, None)
    if (
        got is not None
        and got[0] is cache.classes
        and len(got[1]) == len(cache.chunks)
        and all(a.parents is P and a.chunks is c for a, P, c in zip(got[1], *cache[:2]))
    ):
        return got[1], got[2]
    layers = [_Layer(P, c) for P, c in zip(cache.parents, cache.chunks)]
    plan = _label_gather_plan(cache.classes)
    setattr(holder, _ATTR, (cache.classes, layers, plan))
    return layers, plan


class _one_thread:
    """numba's parallel kernels on one thread (a few rows are one row block anyway)."""

    def __enter__(self) -> None:
        self.previous = numba.get_num_threads()
        if self.previous != 1:
            numba.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        if self.previous != 1:
            numba.set_num_threads(self.previous)


def search_few(
    x: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_features: int,
    cache: Any,
    *,
    bias: float,
    beam_size: int,
    top_k: int,
    post_processor: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~skxmc.linear._beam.beam_search` of the rows ``x`` (CSR arrays), as the
    arrays of its result; the same kernel calls on the same inputs."""
    code = _POST_CODES[post_processor]
    layers, _ = _prepared(cache)
    x_indptr, x_indices, x_data = x
    n = len(x_indptr) - 1
    indptr = np.arange(n + 1, dtype=np.int64)
    indices = np.zeros(n, dtype=np.int32)
    data = np.ones(n, dtype=np.float32)
    bias32 = np.float32(bias)
    with interruptible(), _one_thread():
        for t, layer in enumerate(layers):
            chunks = layer.chunks
            total = int(chunks.children_count[indices].sum())
            c_indptr = np.empty(n + 1, dtype=np.int64)
            c_indices = np.empty(total, dtype=np.int32)
            c_data = np.empty(total, dtype=np.float32)
            _expand_kernel(
                indptr, indices, data, layer.p_indptr, layer.p_indices, c_indptr, c_indices, c_data
            )
            out = np.zeros(total, dtype=np.float32)
            if total == 0:
                pass
            elif layer.dense is not None:
                w_indptr, w_indices, w_data = layer.dense
                _score_dense_kernel(
                    x_indptr, x_indices, x_data, bias32, n_features,
                    w_indptr, w_indices, w_data, chunks.n_nodes,
                    c_indptr, c_indices, c_data, code, 1, out,
                )  # fmt: skip
            elif layer.mapped:
                path = (indptr, indices, data)
                out = _score_mapped(x, n_features, path, layer, total, bias, post_processor)
            else:
                parent = indices.astype(np.int64)
                kids = chunks.children_count[parent]
                cand_start = np.zeros(len(parent), dtype=np.int64)
                np.cumsum(kids[:-1], out=cand_start[1:])
                entry_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
                _score_chunks_kernel(
                    x_indptr, x_indices, x_data, bias32, n_features,
                    np.argsort(parent, kind="stable"), entry_row, parent, cand_start, 64,
                    chunks.block_start, chunks.feat_count, chunks.blocks,
                    chunks.blocks.view(np.float32), data, chunks.children_count, code, out,
                )  # fmt: skip
            keep = top_k if t == len(layers) - 1 else beam_size
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.minimum(np.diff(c_indptr), keep), out=indptr[1:])
            indices = np.empty(int(indptr[-1]), dtype=np.int32)
            data = np.empty(int(indptr[-1]), dtype=np.float32)
            _keep_topk_kernel(c_indptr, c_indices, out, indptr, indices, data, 1)
    return indptr, indices, data


def _score_mapped(x, n_features, path, layer, total, bias, post_processor):
    """A memory-mapped layer of small blocks: :func:`score_candidates` itself, which reads
    the reached parents' blocks from the file."""
    X = sp.csr_matrix((x[2], x[1], x[0]), shape=(len(x[0]) - 1, n_features))
    P = sp.csr_matrix((path[2], path[1], path[0]), shape=(len(path[0]) - 1, layer.chunks.n_nodes))
    return score_candidates(
        X, P, layer.chunks, total, bias=bias, n_jobs=1, post_processor=post_processor
    )


def topk_labels(
    path: tuple[np.ndarray, np.ndarray, np.ndarray], k: int, cache: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, scores)`` of :meth:`XRLinearClassifier.predict_topk` from the last
    layer's beam: :func:`~skxmc._ranking.topk_from_sparse` (ties: lower column first)
    and the label mapping of :func:`~skxmc.labels.indices_to_labels`."""
    indptr, indices, data = path
    n = len(indptr) - 1
    scores = data.astype(np.float64)
    if not np.all(np.isfinite(scores) | np.isneginf(scores)):
        # NaN or +inf path scores: the full ranking's own error
        topk_from_sparse(sp.csr_matrix((data, indices, indptr), shape=(n, len(cache.classes))), k)
    out_idx = np.full((n, k), -1, dtype=np.int64)
    out_score = np.full((n, k), -np.inf, dtype=np.float64)
    _csr_topk_kernel(indptr, indices.astype(np.int64), scores, k, out_idx, out_score)
    _, plan = _prepared(cache)
    return plan(out_idx), out_score.astype(np.float32)
