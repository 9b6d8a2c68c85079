"""Scores of a chosen subset of labels of an XR-Linear tree (PECOS's selected outputs).

A beam search scores only the labels under the clusters it keeps. Here every layer keeps
instead exactly the ancestors of the selected labels, so each selected label gets its full
path score (the one a beam wide enough to reach it would give), whatever the beam would
have done. The layers are scored with the beam search's own functions
(:func:`~skxmc.linear._beam.expand_children` and
:func:`~skxmc.linear._beam.score_candidates`, which applies the post-processor): a label
that both searches reach gets the same float32 score from both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from ._beam import ChunkedWeights, expand_children, keep_topk, score_candidates

__all__ = ["ancestor_masks", "selected_search"]

# Candidates (children of the kept nodes) held at once: rows are searched in blocks so
# that a large subset never builds one (n_samples x candidates) matrix for all rows.
_BLOCK_CANDIDATES = 1 << 22


def ancestor_masks(parents: Sequence[sp.csr_matrix], columns: np.ndarray) -> list[np.ndarray]:
    """Which nodes of every layer lie on the path of a selected label.

    Parameters
    ----------
    parents : list of csr_matrix
        ``parents[t]`` of shape ``(K_{t-1}, K_t)``: the transposed parent map of layer
        ``t`` (one parent per node), as :func:`~skxmc.linear._beam.beam_search` takes it.
    columns : ndarray of int
        The selected labels (columns of the last layer).

    Returns
    -------
    list of ndarray of bool
        ``masks[t][j]``: node ``j`` of layer ``t`` is a selected label (last layer) or an
        ancestor of one.
    """
    masks: list[np.ndarray] = [np.zeros(0, dtype=bool)] * len(parents)
    mask = np.zeros(parents[-1].shape[1], dtype=bool)
    mask[columns] = True
    masks[-1] = mask
    for t in range(len(parents) - 1, 0, -1):
        P = parents[t]
        parent_of = np.empty(P.shape[1], dtype=np.int64)
        parent_of[P.indices] = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
        up = np.zeros(P.shape[0], dtype=bool)
        up[parent_of[masks[t]]] = True
        masks[t - 1] = up
    return masks


def _restrict(candidates: sp.csr_matrix, mask: np.ndarray) -> sp.csr_matrix:
    """The entries of ``candidates`` whose column is in ``mask``, in their order (the
    order :func:`score_candidates` relies on at the next layer)."""
    keep = mask[candidates.indices]
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    return sp.csr_matrix(
        (candidates.data[keep], candidates.indices[keep], kept_before[candidates.indptr]),
        shape=candidates.shape,
    )


def selected_search(
    X: sp.csr_matrix,
    chunks: Sequence[ChunkedWeights],
    parents: Sequence[sp.csr_matrix],
    columns: np.ndarray,
    *,
    bias: float,
    post_processor: str,
    top_k: int | None = None,
    n_jobs: int = 1,
) -> sp.csr_matrix:
    """Path scores of the selected labels for every row of ``X``.

    Parameters
    ----------
    X : csr_matrix of float32, shape (n, n_features)
        Queries with sorted indices.
    chunks, parents : list
        As :func:`~skxmc.linear._beam.beam_search` takes them.
    columns : ndarray of int
        The selected labels (columns of the last layer), distinct.
    bias : float
        Value of the bias feature appended to every query.
    post_processor : {"l3-hinge", "sigmoid", "noop"}
        How a node's linear score combines with its parent's path score.
    top_k : int or None, default=None
        Keep the ``top_k`` best selected labels per row; None keeps them all.
    n_jobs : int, default=1
        Threads for candidate scoring.

    Returns
    -------
    csr_matrix of float32, shape (n, K_last)
        Every selected label of every row (``top_k`` of them when set), sorted indices.
    """
    n, n_labels = X.shape[0], parents[-1].shape[1]
    masks = ancestor_masks(parents, columns)
    # Candidates per row at layer t: the children of the kept nodes of layer t - 1; the
    # same for every row, since the subset is.
    widest = 1
    kept = np.ones(1, dtype=bool)
    for P, mask in zip(parents, masks):
        widest = max(widest, int(np.diff(P.indptr)[kept].sum()))
        kept = mask
    step = max(1, _BLOCK_CANDIDATES // widest)
    blocks = []
    for start in range(0, n, step):
        Xb = X[start : start + step]
        m = Xb.shape[0]
        path = sp.csr_matrix(
            (np.ones(m, dtype=np.float32), np.zeros(m, dtype=np.int32), np.arange(m + 1)),
            shape=(m, 1),
        )
        for P, chunk, mask in zip(parents, chunks, masks):
            candidates = expand_children(path, P)
            candidates.data = score_candidates(
                Xb,
                path,
                chunk,
                candidates.nnz,
                bias=bias,
                n_jobs=n_jobs,
                candidates=candidates,
                post_processor=post_processor,
            )
            path = _restrict(candidates, mask)
        if top_k is not None:
            path = keep_topk(path, top_k, n_jobs=n_jobs)
        blocks.append(path)
    if not blocks:
        return sp.csr_matrix((0, n_labels), dtype=np.float32)
    out = sp.csr_matrix(sp.vstack(blocks, format="csr"), dtype=np.float32)
    out.sort_indices()
    return out
