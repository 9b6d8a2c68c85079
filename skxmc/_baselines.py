"""Simple reference rankers, used by the demo and by tests that need real predictions."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from ._ranking import topk_from_sparse

__all__ = ["knn_label_scores"]


def knn_label_scores(
    X_train: sp.csr_matrix,
    Y_train: sp.csr_matrix,
    X_query: sp.csr_matrix,
    *,
    n_neighbors: int = 20,
    top_k: int = 10,
    batch_size: int = 2048,
) -> sp.csr_matrix:
    """Score labels by the cosine-weighted votes of the ``n_neighbors`` nearest training rows.

    A classic XMC baseline (as in SLEEC / AnnexML evaluations): cost is one sparse product
    per query batch, memory ``batch_size x n_train``. Returns a CSR ``(n_query, L)`` matrix
    holding the ``top_k`` best labels of each row.
    """
    X_train = normalize(sp.csr_matrix(X_train, dtype=np.float32))
    X_query = normalize(sp.csr_matrix(X_query, dtype=np.float32))
    Y_train = sp.csr_matrix(Y_train, dtype=np.float32)
    XT = X_train.T.tocsr()
    blocks = []
    for start in range(0, X_query.shape[0], batch_size):
        sims = (X_query[start : start + batch_size] @ XT).tocsr()
        idx, val = topk_from_sparse(sims, n_neighbors)
        val = np.where(idx >= 0, val, 0.0)
        rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
        neighbours = sp.csr_matrix(
            (val.ravel(), (rows, np.maximum(idx, 0).ravel())),
            shape=(idx.shape[0], X_train.shape[0]),
        )
        votes = (neighbours @ Y_train).tocsr()
        top, top_score = topk_from_sparse(votes, top_k)
        keep = top >= 0
        blocks.append(
            sp.csr_matrix(
                (top_score[keep], (np.nonzero(keep)[0], top[keep])),
                shape=(idx.shape[0], Y_train.shape[1]),
            )
        )
    return sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, Y_train.shape[1]))
