"""Beam search through a label tree with per-node linear scorers.

Each layer ``t`` has a weight matrix ``W_t`` (CSC, ``(n_features + 1, K_t)``, last row the
bias weight) and a parent map ``C_t`` (``(K_t, K_{t-1})``, one parent per node). From the
root, every query keeps the ``beam_size`` best nodes of a layer; only their children are
scored at the next layer (a sparse candidate set, never ``n x K_t`` dense), and the final
layer keeps the ``top_k`` best labels.

Scores of a node combine its own linear score with its parent's path score through a
post-processor, as PECOS does: ``"l3-hinge"`` multiplies ``exp(-max(1 - v, 0) ** 3)``,
``"sigmoid"`` multiplies ``1 / (1 + exp(-v))``, ``"noop"`` keeps the raw score ``v``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
import scipy.sparse as sp
from numba import prange

from .._numba import interruptible, jit
from .._ranking import topk_from_sparse
from .._sparse_product import csr_arrays, radix_bits, radix_sort

POST_PROCESSORS = ("l3-hinge", "sigmoid", "noop")

# Layers with at most this many nodes score every node of a query with a dense accumulator
# (cost: the query's weights, no search); larger layers score only the beam's children.
DENSE_LAYER_MAX_NODES = 2048


class ChunkedWeights:
    """One layer's weights regrouped by parent node, for fast beam-search scoring.

    For every parent ``p`` the non-zero weights of its children are stored feature-major:
    ``features[feat_start[p]:feat_start[p + 1]]`` are the sorted feature ids used by any
    child of ``p``; entry range ``entry_start[j]:entry_start[j + 1]`` of such a feature
    ``j`` lists ``(child position within p, weight)``. Scoring a query against ``p`` then
    costs ``nnz(x) * log(#features of p)`` plus the touched weights, instead of every weight
    of every child (PECOS's chunked layout serves the same purpose).

    Parameters
    ----------
    W : csc_matrix of shape (n_features + 1, K_t)
        The layer's weights (last row: bias).
    parents : csr_matrix of shape (K_{t-1}, K_t)
        Transposed parent map with sorted indices; the children of ``p`` in column order
        define the child positions.
    """

    def __init__(self, W: sp.csc_matrix, parents: sp.csr_matrix) -> None:
        W = sp.csc_matrix(W)
        n_parents, n_nodes = parents.shape
        if W.shape[1] != n_nodes:
            raise ValueError(f"W has {W.shape[1]} columns but the parent map {n_nodes} nodes.")
        w_indptr, w_indices, w_data = csr_arrays(W)  # CSC arrays: same dtypes
        p_indptr, p_indices, _ = csr_arrays(parents)
        nnz = int(w_indptr[-1])
        features = np.empty(nnz, dtype=np.int32)
        entry_start = np.empty(nnz + 1, dtype=np.int64)
        self.entry_local = np.empty(nnz, dtype=np.int32)
        self.entry_value = np.empty(nnz, dtype=np.float32)
        self.feat_start = np.empty(n_parents + 1, dtype=np.int64)
        with interruptible():
            n_pairs = _chunk_layout_kernel(
                w_indptr,
                w_indices,
                w_data,
                p_indptr,
                p_indices,
                np.zeros(W.shape[0], dtype=np.int64),
                np.empty(W.shape[0], dtype=np.int64),
                np.empty(W.shape[0], dtype=np.int64),
                np.empty(2049, dtype=np.int64),
                radix_bits(W.shape[0]),
                features,
                entry_start,
                self.entry_local,
                self.entry_value,
                self.feat_start,
            )
        # one (parent, feature) pair per feature a parent's children use: trim the bounds
        self.features = features[:n_pairs].copy()
        self.entry_start = entry_start[: n_pairs + 1].copy()
        self.children_count = np.diff(parents.indptr).astype(np.int64)
        # Layers with few nodes are scored for all nodes at once from a feature-major copy
        # (no searching; a dense accumulator of n_nodes per thread), see score_candidates.
        self.n_nodes = n_nodes
        self.feature_major = (
            sp.csr_matrix(W, dtype=np.float32) if n_nodes <= DENSE_LAYER_MAX_NODES else None
        )


@jit(nogil=True)
def _chunk_layout_kernel(
    w_indptr,
    w_indices,
    w_data,
    p_indptr,
    p_indices,
    count,
    touched,
    tmp,
    radix_counts,
    n_bits,
    features,
    entry_start,
    entry_local,
    entry_value,
    feat_start,
):  # pragma: no cover - compiled
    """Fill the :class:`ChunkedWeights` arrays from CSC weights in O(nnz): per parent, a
    counting sort of its children's entries by feature (``count``: zeros of n_rows, left
    zeroed), stable in child order. Returns the number of (parent, feature) pairs."""
    n_pairs = 0
    n_entries = 0
    for p in range(len(p_indptr) - 1):
        feat_start[p] = n_pairs
        n_touched = np.int64(0)  # int64 from the start, as radix_sort's other callers
        for j in range(p_indptr[p], p_indptr[p + 1]):
            c = p_indices[j]
            for q in range(w_indptr[c], w_indptr[c + 1]):
                f = w_indices[q]
                if count[f] == 0:
                    touched[n_touched] = f
                    n_touched += 1
                count[f] += 1
        radix_sort(touched, n_touched, tmp, radix_counts, n_bits)
        for k in range(n_touched):
            f = touched[k]
            features[n_pairs + k] = f
            entry_start[n_pairs + k] = n_entries
            n_entries += count[f]
            count[f] = entry_start[n_pairs + k]  # now the write position of feature f
        for j in range(p_indptr[p], p_indptr[p + 1]):
            c = p_indices[j]
            for q in range(w_indptr[c], w_indptr[c + 1]):
                r = count[w_indices[q]]
                entry_local[r] = j - p_indptr[p]
                entry_value[r] = w_data[q]
                count[w_indices[q]] = r + 1
        for k in range(n_touched):
            count[touched[k]] = 0
        n_pairs += n_touched
    feat_start[len(p_indptr) - 1] = n_pairs
    entry_start[n_pairs] = n_entries
    return n_pairs


@jit(nogil=True, inline="always")
def _score_entry(
    i,
    p,
    base,
    x_indptr,
    x_indices,
    x_data,
    bias,
    n_features,
    feat_start,
    features,
    entry_start,
    entry_local,
    entry_value,
    out,
):  # pragma: no cover - compiled
    lo = feat_start[p]
    hi = feat_start[p + 1]
    # Features of x and of the chunk are both sorted: merge with a galloping search, so
    # that each probe stays near the previous match.
    for q in range(x_indptr[i], x_indptr[i + 1] + 1):
        if lo >= hi:
            break
        if q < x_indptr[i + 1]:
            f = x_indices[q]
            v = x_data[q]
        else:
            f = n_features  # the bias feature
            v = bias
        a = lo
        step = 1
        while a + step < hi and features[a + step] < f:
            a += step
            step *= 2
        b = min(a + step + 1, hi)
        while a < b:
            mid = (a + b) >> 1
            if features[mid] < f:
                a = mid + 1
            else:
                b = mid
        lo = a
        if a < hi and features[a] == f:
            for r in range(entry_start[a], entry_start[a + 1]):
                out[base + entry_local[r]] += entry_value[r] * v


@jit(parallel=True)
def _score_chunks_kernel(
    x_indptr,
    x_indices,
    x_data,
    bias,
    n_features,
    entry_order,
    entry_row,
    entry_parent,
    cand_start,
    block,
    feat_start,
    features,
    entry_start,
    entry_local,
    entry_value,
    out,
):  # pragma: no cover - compiled
    n_entries = len(entry_order)
    n_blocks = (n_entries + block - 1) // block
    # Beam entries are visited grouped by parent: consecutive entries share a chunk, which
    # then stays in cache (the per-active-cluster products of PECOS). Blocks of entries
    # run in parallel; each entry writes its own slice of ``out``.
    for b in prange(n_blocks):
        for k in range(b * block, min((b + 1) * block, n_entries)):
            e = entry_order[k]
            _score_entry(
                entry_row[e],
                entry_parent[e],
                cand_start[e],
                x_indptr,
                x_indices,
                x_data,
                bias,
                n_features,
                feat_start,
                features,
                entry_start,
                entry_local,
                entry_value,
                out,
            )


@jit(parallel=True)
def _score_dense_kernel(
    x_indptr,
    x_indices,
    x_data,
    bias,
    n_features,
    w_indptr,
    w_indices,
    w_data,
    n_nodes,
    c_indptr,
    c_indices,
    n_blocks,
    out,
):  # pragma: no cover - compiled
    n_rows = len(x_indptr) - 1
    block = (n_rows + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        acc = np.zeros(n_nodes, dtype=np.float32)
        for i in range(b * block, min((b + 1) * block, n_rows)):
            for q in range(x_indptr[i], x_indptr[i + 1]):
                f = x_indices[q]
                v = x_data[q]
                for r in range(w_indptr[f], w_indptr[f + 1]):
                    acc[w_indices[r]] += w_data[r] * v
            for r in range(w_indptr[n_features], w_indptr[n_features + 1]):
                acc[w_indices[r]] += w_data[r] * bias
            for q in range(c_indptr[i], c_indptr[i + 1]):
                out[q] = acc[c_indices[q]]
            acc[:] = 0.0


@interruptible()
def score_candidates(
    X: sp.csr_matrix,
    path: sp.csr_matrix,
    chunks: ChunkedWeights,
    n_candidates: int,
    *,
    bias: float,
    n_jobs: int = 1,
    candidates: sp.csr_matrix | None = None,
) -> np.ndarray:
    """Linear scores ``[x_i, bias] . w_c`` of the children of every beam entry of ``path``,
    in the order :func:`expand_children` lists them (float32, length ``n_candidates``).

    Small layers (``chunks.feature_major`` set) are scored with a dense per-thread
    accumulator over all nodes and need ``candidates`` (the expanded CSR); large layers
    merge each query with the chunk of each beam entry's parent."""
    out = np.zeros(n_candidates, dtype=np.float32)
    if n_candidates == 0:
        return out
    x_indptr, x_indices, x_data = csr_arrays(X)
    if chunks.feature_major is not None and candidates is not None:
        w_indptr, w_indices, w_data = csr_arrays(chunks.feature_major)
        c_indptr, c_indices, _ = csr_arrays(candidates)
        with _numba_threads(n_jobs):
            _score_dense_kernel(
                x_indptr,
                x_indices,
                x_data,
                np.float32(bias),
                X.shape[1],
                w_indptr,
                w_indices,
                w_data,
                chunks.n_nodes,
                c_indptr,
                c_indices,
                max(1, min(X.shape[0], 4 * n_jobs)),
                out,
            )
        return out
    parent = path.indices.astype(np.int64)
    kids_per_entry = chunks.children_count[parent]
    cand_start = np.concatenate([[0], np.cumsum(kids_per_entry)[:-1]]).astype(np.int64)
    entry_row = np.repeat(np.arange(path.shape[0], dtype=np.int64), np.diff(path.indptr))
    entry_order = np.argsort(parent, kind="stable")
    with _numba_threads(n_jobs):
        _score_chunks_kernel(
            x_indptr,
            x_indices,
            x_data,
            np.float32(bias),
            X.shape[1],
            entry_order,
            entry_row,
            parent,
            cand_start,
            64,
            chunks.feat_start,
            chunks.features,
            chunks.entry_start,
            chunks.entry_local,
            chunks.entry_value,
            out,
        )
    return out


class _numba_threads:
    """Context manager limiting numba's parallel regions to ``n`` threads."""

    def __init__(self, n: int) -> None:
        self.n = max(1, min(int(n), numba.config.NUMBA_NUM_THREADS))

    def __enter__(self) -> None:
        self.previous = numba.get_num_threads()
        numba.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        numba.set_num_threads(self.previous)


def combine_scores(raw: np.ndarray, parent: np.ndarray, post_processor: str) -> np.ndarray:
    """Path score of a node from its linear score and its parent's path score."""
    if post_processor == "l3-hinge":
        # exp(-max(1 - raw, 0) ** 3) * parent, the same operations in place
        out = np.subtract(1.0, raw, dtype=raw.dtype)
        np.maximum(out, 0.0, out=out)
        np.power(out, 3, out=out)
        np.negative(out, out=out)
        np.exp(out, out=out)
        out *= parent
        return out
    if post_processor == "sigmoid":
        return parent / (1.0 + np.exp(-raw))
    if post_processor == "noop":
        return raw
    raise ValueError(f"post_processor must be one of {POST_PROCESSORS}, got {post_processor!r}.")


def keep_topk(scores: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """Keep the ``k`` best stored entries of every row (ties: lower column first)."""
    idx, val = topk_from_sparse(scores, k, canonical=True)
    keep = idx >= 0
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    return sp.csr_matrix((val[keep].astype(np.float32), idx[keep], indptr), shape=scores.shape)


@jit(nogil=True)
def _expand_kernel(
    path_indptr, path_indices, path_data, p_indptr, p_indices, out_indptr, out_indices, out_data
):  # pragma: no cover - compiled
    k = 0
    out_indptr[0] = 0
    for i in range(len(path_indptr) - 1):
        for e in range(path_indptr[i], path_indptr[i + 1]):
            parent = path_indices[e]
            for c in range(p_indptr[parent], p_indptr[parent + 1]):
                out_indices[k] = p_indices[c]
                out_data[k] = path_data[e]
                k += 1
        out_indptr[i + 1] = k


def expand_children(path: sp.csr_matrix, parents: sp.csr_matrix) -> sp.csr_matrix:
    """Candidates of the next layer: the children of each row's beam, carrying the parent's
    path score. Built structurally (not by a sparse product, which would drop a candidate
    whose parent score underflowed to zero)."""
    path = path.tocsr()
    path_indptr, path_indices, path_data = csr_arrays(path)
    p_indptr, p_indices, _ = csr_arrays(parents)
    total = int(np.diff(p_indptr)[path_indices].sum())
    indptr = np.empty(path.shape[0] + 1, dtype=np.int64)
    cols = np.empty(total, dtype=np.int32)
    data = np.empty(total, dtype=np.float32)
    _expand_kernel(path_indptr, path_indices, path_data, p_indptr, p_indices, indptr, cols, data)
    return sp.csr_matrix((data, cols, indptr), shape=(path.shape[0], parents.shape[1]))


def beam_search(
    X: sp.csr_matrix,
    chunks: Sequence[ChunkedWeights],
    parents: Sequence[sp.csr_matrix],
    *,
    bias: float,
    beam_size: int,
    top_k: int | None,
    post_processor: str = "l3-hinge",
    n_layers: int | None = None,
    n_jobs: int = 1,
) -> sp.csr_matrix:
    """Search the tree and return the path scores of the last searched layer.

    Parameters
    ----------
    X : csr_matrix of float32, shape (n, n_features)
        Queries with sorted indices.
    chunks : list of ChunkedWeights
        ``chunks[t]`` holds the weights of layer ``t`` grouped by parent.
    parents : list of csr_matrix
        ``parents[t]`` has shape ``(K_{t-1}, K_t)``: the transposed parent map with sorted
        indices (``parents[0]`` is ``(1, K_0)``: all first-layer nodes under the root).
    bias : float
        Value of the bias feature appended to every query.
    beam_size : int
        Nodes kept per query at every layer but the last.
    top_k : int or None
        Labels kept at the last layer; ``None`` keeps every scored candidate.
    post_processor : {"l3-hinge", "sigmoid", "noop"}
        How a node's linear score combines with its parent's path score.
    n_layers : int, optional
        Search only the first ``n_layers`` layers (matcher-aware negatives while
        training); all by default. A last searched layer that is an inner layer keeps
        ``beam_size`` nodes.
    n_jobs : int
        Threads for candidate scoring.

    Returns
    -------
    csr_matrix of float32, shape (n, K_last)
    """
    n = X.shape[0]
    n_total = len(chunks)
    n_layers = n_total if n_layers is None else n_layers
    path = sp.csr_matrix(
        (np.ones(n, dtype=np.float32), np.zeros(n, dtype=np.int32), np.arange(n + 1)),
        shape=(n, 1),
    )
    for t in range(n_layers):
        candidates = expand_children(path, parents[t])
        raw = score_candidates(
            X, path, chunks[t], candidates.nnz, bias=bias, n_jobs=n_jobs, candidates=candidates
        )
        candidates.data = combine_scores(raw, candidates.data, post_processor).astype(
            np.float32, copy=False
        )
        keep = top_k if t == n_total - 1 else beam_size
        path = candidates if keep is None else keep_topk(candidates, keep)
    return path
