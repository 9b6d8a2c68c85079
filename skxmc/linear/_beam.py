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

import os
import threading
from collections.abc import Sequence
from itertools import pairwise

import numba
import numpy as np
import scipy.sparse as sp

from .._kernels.beam import (
    _check_blocks_kernel,
    _chunk_layout_kernel,
    _expand_kernel,
    _keep_topk_kernel,
    _score_chunks_kernel,
    _score_dense_kernel,
)
from .._kernels.jit import interruptible
from .._sparse_product import csr_arrays, radix_bits
from ..io import mapped_file_span

__all__ = [
    "DENSE_LAYER_MAX_NODES",
    "POST_PROCESSORS",
    "ChunkedWeights",
    "beam_search",
    "check_blocks",
    "expand_children",
    "keep_topk",
    "score_candidates",
]

POST_PROCESSORS = ("l3-hinge", "sigmoid", "noop")
# codes the scoring kernels get for each post-processor (0: the raw score)
_POST_CODES = {"noop": 0, "l3-hinge": 1, "sigmoid": 2}

# Layers with at most this many nodes score every node of a query with a dense accumulator
# (cost: the query's weights, no search); larger layers score only the beam's children.
DENSE_LAYER_MAX_NODES = 2048


class ChunkedWeights:
    """One layer's weights regrouped by parent node, for fast beam-search scoring.

    The non-zero weights of the children of parent ``p`` form one contiguous block of
    ``blocks`` (int32 words), ``blocks[block_start[p]:block_start[p + 1]]``. With
    ``n = feat_count[p]`` and ``b = block_start[p]``, the block holds

    - ``blocks[b:b + n]``: the sorted ids of the features that any child of ``p`` uses;
    - ``blocks[b + n:b + 2 * n + 1]``: entry offsets, from 0 to the block's entry count
      ``m``; feature ``j`` of the block owns entries ``offsets[j]:offsets[j + 1]``;
    - ``blocks[b + 2 * n + 1:]``: ``m`` entries of two words, the child's position within
      ``p`` and the weight's float32 bits (the kernels also read ``blocks`` as float32),
      in child order within a feature.

    Scoring a query against ``p`` then costs ``nnz(x) * log(#features of p)`` plus the
    touched weights, instead of every weight of every child (PECOS's chunked layout serves
    the same purpose). One block per parent, rather than one array per field, keeps what
    the search reads of a parent in one stretch of the file: a memory-mapped model
    (``skxmc.load(mmap=True)``) reads the small blocks of the parents that queries reach
    with one ``pread`` per run of adjacent blocks (see :func:`score_candidates`).

    A layer of at most ``DENSE_LAYER_MAX_NODES`` nodes is scored for all its nodes at once
    from a feature-major copy instead (:attr:`feature_major`, see :func:`score_candidates`):
    such a layer keeps that copy and no blocks (``block_start``, ``feat_count`` and
    ``blocks`` are ``None``), so that a fit, a saved model and a full load hold one search
    form per layer, never both.

    Parameters
    ----------
    W : csc_matrix of shape (n_features + 1, K_t)
        The layer's weights (last row: bias).
    parents : csr_matrix of shape (K_{t-1}, K_t)
        Transposed parent map with sorted indices; the children of ``p`` in column order
        define the child positions.
    dense : bool or None, default=None
        The search form: ``True`` the feature-major copy, ``False`` the blocks, ``None``
        the copy for layers of at most ``DENSE_LAYER_MAX_NODES`` nodes.
    """

    def __init__(
        self, W: sp.csc_matrix, parents: sp.csr_matrix, *, dense: bool | None = None
    ) -> None:
        W = sp.csc_matrix(W)
        n_parents, n_nodes = parents.shape
        if W.shape[1] != n_nodes:
            raise ValueError(f"W has {W.shape[1]} columns but the parent map {n_nodes} nodes.")
        self.children_count = np.diff(parents.indptr).astype(np.int64)
        self.n_nodes = n_nodes
        if dense is None:
            dense = n_nodes <= DENSE_LAYER_MAX_NODES
        if dense:
            self.feature_major = sp.csr_matrix(W, dtype=np.float32)
            self.block_start = self.feat_count = self.blocks = None
            return
        self.feature_major = None
        w_indptr, w_indices, w_data = csr_arrays(W)  # CSC arrays: same dtypes
        p_indptr, p_indices, _ = csr_arrays(parents)
        n_rows = W.shape[0]
        scratch = (
            np.zeros(n_rows, dtype=np.int64),
            np.empty(n_rows, dtype=np.int64),
            np.empty(n_rows, dtype=np.int64),
            np.empty(2049, dtype=np.int64),
            radix_bits(n_rows),
        )
        self.feat_count = np.zeros(n_parents, dtype=np.int64)
        self.block_start = np.zeros(n_parents + 1, dtype=np.int64)

        def layout(sizes_only: bool, blocks: np.ndarray) -> None:
            _chunk_layout_kernel(
                w_indptr,
                w_indices,
                w_data,
                p_indptr,
                p_indices,
                *scratch,
                sizes_only,
                self.feat_count,
                self.block_start,
                blocks,
                blocks.view(np.float32),
            )

        with interruptible():
            # Two passes: block sizes first, so that the blocks are allocated at their
            # final size (no trimmed copy at the fit's memory peak).
            layout(True, np.empty(0, dtype=np.int32))
            # block_start[p + 1] still holds parent p's block size (not yet summed)
            entries = (self.block_start[1:] - 1) // 2 - self.feat_count
            if entries.size and entries.max() >= 2**31:
                raise ValueError(
                    "a parent's children hold 2**31 weights or more, beyond what the "
                    "beam-search layout indexes; use a label tree with smaller clusters."
                )
            np.cumsum(self.block_start, out=self.block_start)
            self.blocks = np.empty(int(self.block_start[-1]), dtype=np.int32)
            layout(False, self.blocks)

    def __getstate__(self) -> dict:
        # what the few-row predict path prepared from this layer (_fast_predict) is
        # rebuilt where it is needed, never pickled
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_fast")}

    @classmethod
    def from_arrays(
        cls,
        children_count: np.ndarray,
        n_nodes: int,
        *,
        feature_major: sp.csr_matrix | None = None,
        block_start: np.ndarray | None = None,
        feat_count: np.ndarray | None = None,
        blocks: np.ndarray | None = None,
    ) -> ChunkedWeights:
        """A layer assembled from arrays already checked by the caller (a saved model's
        layout): either ``feature_major`` or the three block arrays."""
        out = cls.__new__(cls)
        out.children_count = children_count
        out.n_nodes = n_nodes
        out.feature_major = feature_major
        out.block_start, out.feat_count, out.blocks = block_start, feat_count, blocks
        return out


_BLOCK_FAULTS = {
    1: "feature ids outside [0, {n_rows})",
    2: "feature ids not increasing within a parent",
    3: "empty or unordered entry offsets",
    4: "child positions beyond a parent's children",
    5: "NaN or infinite weights",
}


def check_blocks(
    block_start: np.ndarray,
    feat_count: np.ndarray,
    blocks: np.ndarray,
    n_rows: int,
    children_count: np.ndarray,
) -> str | None:
    """What is wrong with a layer's blocks (see :class:`ChunkedWeights`), or None.

    ``block_start`` and ``feat_count`` must already be consistent (block sizes at least
    ``2 * feat_count + 1`` words, odd); this reads every word of ``blocks``."""
    code = _check_blocks_kernel(
        block_start, feat_count, blocks, blocks.view(np.float32), n_rows, children_count
    )
    return _BLOCK_FAULTS[code].format(n_rows=n_rows) if code else None


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
    post_processor: str = "noop",
) -> np.ndarray:
    """Scores of the children of every beam entry of ``path``, in the order
    :func:`expand_children` lists them (float32, length ``n_candidates``): the linear
    scores ``[x_i, bias] . w_c`` with ``post_processor="noop"``, else the path scores that
    the post-processor makes of them and of the entry's path score (``path.data``), in the
    same pass.

    Small layers (``chunks.feature_major`` set) are scored with a dense per-thread
    accumulator over all nodes and need ``candidates`` (the expanded CSR, whose data are
    the parents' path scores); large layers merge each query with the chunk of each beam
    entry's parent; a memory-mapped model's layer of small blocks is read from its file
    for the parents reached (see :func:`_score_read_blocks`)."""
    if post_processor not in _POST_CODES:
        raise ValueError(
            f"post_processor must be one of {POST_PROCESSORS}, got {post_processor!r}."
        )
    code = _POST_CODES[post_processor]
    out = np.zeros(n_candidates, dtype=np.float32)
    if n_candidates == 0:
        return out
    if chunks.feature_major is not None and candidates is None:
        raise ValueError("a layer scored from its feature-major copy needs the candidates.")
    if chunks.feature_major is not None:
        _score_dense(X, chunks, candidates, bias, code, n_jobs, out)
        return out
    x_indptr, x_indices, x_data = csr_arrays(X)
    parent = path.indices.astype(np.int64)
    kids_per_entry = chunks.children_count[parent]
    cand_start = np.concatenate([[0], np.cumsum(kids_per_entry)[:-1]]).astype(np.int64)
    entry_row = np.repeat(np.arange(path.shape[0], dtype=np.int64), np.diff(path.indptr))
    entry_order = np.argsort(parent, kind="stable")
    entry_score = np.asarray(path.data, dtype=np.float32)

    def run(order, entry_parent, block_start, feat_count, blocks, children_count):
        _score_chunks_kernel(
            x_indptr,
            x_indices,
            x_data,
            np.float32(bias),
            X.shape[1],
            order,
            entry_row,
            entry_parent,
            cand_start,
            64,
            block_start,
            feat_count,
            blocks,
            blocks.view(np.float32),
            entry_score,
            children_count,
            code,
            out,
        )

    span = mapped_file_span(chunks.blocks) if _CAN_PREAD else None
    if span is not None and chunks.blocks.nbytes > _READ_MAX_MEAN_BLOCK * len(chunks.feat_count):
        span = None  # large blocks: read through the map (see _READ_MAX_MEAN_BLOCK)
    with _numba_threads(n_jobs):
        if span is None:
            run(
                entry_order,
                parent,
                chunks.block_start,
                chunks.feat_count,
                chunks.blocks,
                chunks.children_count,
            )
        else:
            _score_read_blocks(chunks, span, parent, entry_order, run)
    return out


def _score_dense(
    X: sp.csr_matrix,
    chunks: ChunkedWeights,
    candidates: sp.csr_matrix,
    bias: float,
    code: int,
    n_jobs: int,
    out: np.ndarray,
) -> None:
    """:func:`score_candidates` of a small layer: a dense per-thread accumulator over all
    nodes, from the layer's feature-major copy, into ``out``."""
    x_indptr, x_indices, x_data = csr_arrays(X)
    w_indptr, w_indices, w_data = csr_arrays(chunks.feature_major)
    c_indptr, c_indices, c_data = csr_arrays(candidates)
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
            c_data,
            code,
            _row_blocks(X.shape[0], n_jobs),
            out,
        )


# Bytes of blocks read at once when a mapped layer is scored from its file (see
# _score_read_blocks): bounds the private memory of a search whatever the number of rows.
_READ_BUDGET = 1 << 25
# A mapped layer is read from its file only when its blocks average at most this many
# bytes. The kernel maps up to a whole cached folio (2 MB) around a touched block, so
# mapping costs most where blocks are small (the leaf layer's many parents, of which a
# batch reaches a few); a layer of large blocks has few parents, which queries mostly
# reach anyway, and mapping it spares each query the copy (benchmarks/mmap_load.py).
_READ_MAX_MEAN_BLOCK = 1 << 18
# os.preadv is POSIX-only (Linux, macOS 11+, the BSDs); elsewhere mapped layers are read
# through the map.
_CAN_PREAD = hasattr(os, "preadv")


def _score_read_blocks(chunks, span, parent, entry_order, run) -> None:
    """Score a layer of a memory-mapped model from the blocks of the reached parents,
    read from the file with ``pread`` in groups of at most ``_READ_BUDGET`` bytes (one
    parent's block at least).

    Through the map, the kernel maps every page around each touched block that the page
    cache holds: recent Linux kernels map whole large folios (up to 2 MB) of a cached file,
    so 1,000 queries, which reach a seventh of a 1M-label model's leaf parents, map most of
    the layer. Read instead, a process holds only the blocks of the group it scores; the
    file's pages stay in the page cache, one copy for every process. The scores are the
    same: the kernel reads the same words, from a compact copy."""
    fd, base = span
    sorted_parent = parent[entry_order]
    reached, first = np.unique(sorted_parent, return_index=True)
    starts = chunks.block_start[reached]
    sizes = chunks.block_start[reached + 1] - starts
    # groups of consecutive reached parents whose blocks fit the budget
    bounds = [0]
    total = 0
    for g, size in enumerate(sizes.tolist()):
        if total and total + size > _READ_BUDGET // 4:
            bounds.append(g)
            total = 0
        total += size
    bounds.append(len(reached))
    first = np.append(first, len(entry_order))
    # each entry's parent as an index into its group's compact block list
    local = np.searchsorted(reached, parent)
    for g0, g1 in pairwise(bounds):
        group_starts = starts[g0:g1]
        group_sizes = sizes[g0:g1]
        block_start = np.zeros(g1 - g0 + 1, dtype=np.int64)
        np.cumsum(group_sizes, out=block_start[1:])
        blocks = _read_buffer(int(block_start[-1]))
        # one read per run of parents whose blocks are adjacent in the file
        run_ends = np.flatnonzero(group_starts[1:] != group_starts[:-1] + group_sizes[:-1])
        run_bounds = [0, *(run_ends + 1).tolist(), g1 - g0]
        for r0, r1 in pairwise(run_bounds):
            _pread_into(
                fd,
                blocks[block_start[r0] : block_start[r1]],
                base + 4 * int(group_starts[r0]),
            )
        run(
            entry_order[first[g0] : first[g1]],
            local - g0,
            block_start,
            chunks.feat_count[reached[g0:g1]],
            blocks,
            chunks.children_count[reached[g0:g1]],
        )


_buffers = threading.local()


def _read_buffer(n_words: int) -> np.ndarray:
    """``n_words`` int32 words of this thread's read buffer, kept between searches: a new
    buffer per search would fault in (and the kernel zero) every page it is read into,
    which cost more than the reads themselves. It grows to the largest group read so
    far (``_READ_BUDGET`` bytes, or one parent's block if larger)."""
    buf = getattr(_buffers, "words", None)
    if buf is None or buf.shape[0] < n_words:
        buf = np.empty(max(n_words, 1 << 14), dtype=np.int32)
        _buffers.words = buf
    return buf[:n_words]


def _pread_into(fd: int, out: np.ndarray, offset: int) -> None:
    view = memoryview(out).cast("B")
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            raise OSError(
                f"the memory-mapped model's file ended before its beam-search blocks (read "
                f"{done} of {len(view)} bytes at offset {offset}): was it truncated?"
            )
        done += n


def _row_blocks(n_rows: int, n_jobs: int) -> int:
    """Row blocks of the parallel row kernels: four per thread, so that a thread that
    gets the rows with the most work does not hold up the others alone."""
    return max(1, min(n_rows, 4 * n_jobs))


class _numba_threads:
    """Context manager limiting numba's parallel regions to ``n`` threads."""

    def __init__(self, n: int) -> None:
        self.n = max(1, min(int(n), numba.config.NUMBA_NUM_THREADS))

    def __enter__(self) -> None:
        self.previous = numba.get_num_threads()
        numba.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        numba.set_num_threads(self.previous)


def keep_topk(scores: sp.csr_matrix, k: int, *, n_jobs: int = 1) -> sp.csr_matrix:
    """Keep the ``k`` best stored entries of every row (ties: lower column first), best
    first within a row; float32 scores, ``n_jobs`` threads over row blocks."""
    indptr, indices, data = csr_arrays(scores)
    n_rows = scores.shape[0]
    out_indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.minimum(np.diff(indptr), k), out=out_indptr[1:])
    out_indices = np.empty(int(out_indptr[-1]), dtype=np.int32)
    out_data = np.empty(int(out_indptr[-1]), dtype=np.float32)
    if n_rows:
        with _numba_threads(n_jobs):
            _keep_topk_kernel(
                indptr,
                indices,
                data,
                out_indptr,
                out_indices,
                out_data,
                _row_blocks(n_rows, n_jobs),
            )
    return sp.csr_matrix((out_data, out_indices, out_indptr), shape=scores.shape)


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
        candidates.data = score_candidates(
            X,
            path,
            chunks[t],
            candidates.nnz,
            bias=bias,
            n_jobs=n_jobs,
            candidates=candidates,
            post_processor=post_processor,
        )
        keep = top_k if t == n_total - 1 else beam_size
        path = candidates if keep is None else keep_topk(candidates, keep, n_jobs=n_jobs)
    return path
