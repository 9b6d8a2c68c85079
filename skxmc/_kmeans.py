"""Recursive balanced spherical 2-means (the label tree): the Python side of the compiled
kernels in :mod:`skxmc._kernels.kmeans`.

The algorithm follows PECOS's hierarchical k-means (``pecos/core/utils/clustering.hpp``):
every internal node holds a contiguous segment of a permutation ``elements`` of the label
ids, sorted by id. Splitting a node

1. starts from two distinct random points ``x_r`` (right) and ``x_l`` (left), the first
   centre difference being ``x_r - x_l`` (not normalised, as in PECOS);
2. scores every point by ``<c_r - c_l, x>``, sorts by ``(score, label id)`` and cuts at the
   middle: the left child gets ``n // 2`` points, the right child the rest;
3. recomputes the centres as the L2-normalised sums of each half (spherical k-means) and
   repeats until the left half no longer changes or ``max_iter`` iterations ran.

Both halves are left sorted by label id, so the children start from the same state.

Speed notes (why the code looks the way it does):

* the features a node's rows touch are listed once per node, so norms, the combined
  centre and resets cost ``O(touched)``, not ``O(n_features)``, on the many small nodes
  near the leaves, while the dense buffers stay reusable across nodes;
* the two centre sums (float64) are updated incrementally from the labels that changed
  side, once few do (later iterations move a handful of labels), instead of re-summing
  the node;
* scoring reads one combined float32 centre ``c_r / |c_r| - c_l / |c_l|``, small enough to
  stay in the L2 cache for 200k TF-IDF features;
* all kernels release the GIL: nodes of a level run in Python threads, and the few large
  nodes at the top are split across threads (:func:`split_node_threaded`) with exactly
  the same arithmetic, so the tree does not depend on ``n_jobs``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._kernels.jit import interruptible
from ._kernels.kmeans import (
    _add_rows,
    _combine,
    _move_rows,
    _partition,
    _reset,
    _scores,
    _split_nodes,
    _touched_features,
)

__all__ = ["split_level", "split_node_threaded"]


def _as_kernel_args(E: object) -> tuple:
    """``(indptr, indices, data, dense, is_dense)`` for a CSR matrix or a dense array.

    One dtype set whatever the input (``indptr`` int64, ``indices`` int32, float32 values,
    the same for the unused placeholders), so that every kernel compiles once: scipy
    stores int32 or int64 indices depending on the matrix size and how it was built.
    """
    if isinstance(E, np.ndarray):
        return (
            np.zeros(1, dtype=np.int64),
            np.zeros(1, dtype=np.int32),
            np.zeros(1, dtype=np.float32),
            np.ascontiguousarray(E, dtype=np.float32),
            True,
        )
    return (
        E.indptr.astype(np.int64, copy=False),
        E.indices.astype(np.int32, copy=False),
        E.data.astype(np.float32, copy=False),
        np.zeros((1, 1), dtype=np.float32),
        False,
    )


def _feature_buffers(n_features: int) -> tuple:
    """``s_r, s_l`` (float64), ``c`` (float32), ``mark``, ``touched``."""
    return (
        np.zeros(n_features, dtype=np.float64),
        np.zeros(n_features, dtype=np.float64),
        np.zeros(n_features, dtype=np.float32),
        np.zeros(n_features, dtype=np.bool_),
        np.empty(n_features, dtype=np.int64),
    )


def _node_buffers(max_size: int) -> tuple:
    """``scores``, ``prev``, ``to_left``, ``to_right``, ``ids``, ``sc``."""
    return (
        np.empty(max_size, dtype=np.float64),
        np.empty(max_size, dtype=np.int64),
        np.empty(max_size, dtype=np.int64),
        np.empty(max_size, dtype=np.int64),
        np.empty(max_size, dtype=np.int64),
        np.empty(max_size, dtype=np.float64),
    )


def split_level(
    E: object,
    elements: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    picks_r: np.ndarray,
    picks_l: np.ndarray,
    max_iter: int,
    n_threads: int,
    map_fn: Callable,
) -> None:
    """Split every node of one level (nodes ``starts[v]:ends[v]`` of ``elements``).

    The nodes are dealt round-robin to ``n_threads`` workers (nodes of one level differ
    in size by at most one, so a static deal is balanced); ``map_fn`` runs the workers,
    e.g. a thread pool's ``map``.
    """
    args = _as_kernel_args(E)
    max_size = int((ends - starts).max())
    n_nodes = len(starts)

    @interruptible()
    def work(t: int) -> None:
        node_ids = np.arange(t, n_nodes, n_threads, dtype=np.int64)
        buffers = (_feature_buffers(E.shape[1]), _node_buffers(max_size))
        _split_nodes(args, elements, starts, ends, picks_r, picks_l, node_ids, max_iter, *buffers)

    n_workers = min(n_threads, n_nodes)
    if n_workers == 1:
        work(0)
    else:
        list(map_fn(work, range(n_workers)))


@interruptible()
def split_node_threaded(
    E: object,
    seg: np.ndarray,
    pick_r: int,
    pick_l: int,
    max_iter: int,
    n_threads: int,
    map_fn: Callable,
) -> None:
    """Split one large node with several threads (top levels, fewer nodes than threads).

    The same steps as :func:`_split_node`, with the two full centre sums built by two
    threads (one per half, each in the one-thread order) and the scores computed by row
    chunks (one independent value per row): the arithmetic, hence the tree, is exactly
    that of the one-thread kernel.
    """
    args = _as_kernel_args(E)
    indptr, indices, is_dense = args[0], args[1], args[4]
    n = seg.shape[0]
    half = n // 2
    s_r, s_l, c, mark, touched = _feature_buffers(E.shape[1])
    scores, prev, to_left, to_right, ids, sc = _node_buffers(n)
    bounds = np.linspace(0, n, n_threads + 1).astype(np.int64)
    chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    u = _touched_features(indptr, indices, is_dense, E.shape[1], seg, mark, touched)
    pick_r, pick_l = int(pick_r), int(pick_l)

    def add_half(side: int) -> None:
        if side == 0:
            _add_rows(*args, seg, half, n, 1.0, s_r)
        else:
            _add_rows(*args, seg, 0, half, 1.0, s_l)

    def score_chunk(t: int) -> None:
        lo, hi = chunks[t]
        _scores(*args, seg, lo, hi, c, scores)

    full = True
    for it in range(max_iter):
        if it == 0:
            _reset(s_r, s_l, touched, u)
            _add_rows(*args, seg, pick_r, pick_r + 1, 1.0, s_r)
            _add_rows(*args, seg, pick_l, pick_l + 1, 1.0, s_l)
        elif full:
            _reset(s_r, s_l, touched, u)
            list(map_fn(add_half, range(2)))
        _combine(s_r, s_l, touched, u, it > 0, c)
        list(map_fn(score_chunk, range(n_threads)))
        if not _partition(seg, scores, half, prev, ids, sc):
            break
        if it > 0:
            full = _move_rows(*args, seg, prev, half, to_left, to_right, s_r, s_l)
