"""Prediction over feature matrices that come in row blocks.

XR-Linear scores every row on its own (the beam search of one row reads no other row),
so a matrix too large for memory can be predicted block by block: :func:`row_blocks`
cuts an in-memory matrix, any iterator of blocks does for data read from disk (one
TF-IDF ``transform`` per chunk of texts, say), and :func:`predict_topk_iter` yields each
block's top-k as it is computed. Stacking the blocks' results gives what ``predict_topk``
gives on the stacked matrix, bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from numbers import Integral
from typing import Any

import numpy as np

__all__ = ["predict_topk_iter", "row_blocks"]


def row_blocks(X: Any, size: int = 10_000) -> Iterator[Any]:
    """The rows of ``X`` in blocks of ``size`` (the last one may be smaller).

    Parameters
    ----------
    X : {sparse matrix, ndarray} of shape (n_samples, n_features)
        Any matrix that slices by rows (a CSR matrix slices without copying its whole).
    size : int, default=10000
        Rows per block.

    Yields
    ------
    block : same type as ``X``
        ``X[start:start + size]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.linear import row_blocks
    >>> [b.shape[0] for b in row_blocks(np.zeros((5, 2)), size=2)]
    [2, 2, 1]
    """
    if not isinstance(size, Integral) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}.")
    n = X.shape[0]
    for start in range(0, n, int(size)):
        yield X[start : start + int(size)]


def predict_topk_iter(
    estimator: Any, blocks: Iterable[Any], k: int | None = None, **params: Any
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The top-k labels of each block of rows, one block at a time.

    Parameters
    ----------
    estimator : fitted ranker
        Anything with ``predict_topk(X, k=k, **params)``: an
        :class:`~skxmc.XRLinearClassifier`, or a pipeline ending in a ranker (then the
        blocks are what the pipeline's first step reads, e.g. lists of texts).
    blocks : iterable
        Row blocks (see :func:`row_blocks`), read one at a time: only the block being
        predicted and its result are in memory.
    k : int or None, default=None
        Labels per row; None: the estimator's ``top_k``.
    **params
        Passed to ``predict_topk`` (e.g. ``labels=``).

    Yields
    ------
    labels : ndarray of shape (n_block_rows, k)
    scores : ndarray of shape (n_block_rows, k)
        ``predict_topk`` of the block; stacked over the blocks, they equal
        ``predict_topk`` of the stacked matrix.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skxmc import XRLinearClassifier
    >>> from skxmc.linear import predict_topk_iter, row_blocks
    >>> rng = np.random.default_rng(0)
    >>> X = sp.csr_matrix(rng.random((60, 8)), dtype=np.float32)
    >>> Y = sp.csr_matrix(rng.random((60, 6)) < 0.3, dtype=np.float32)
    >>> clf = XRLinearClassifier(random_state=0).fit(X, Y)
    >>> parts = list(predict_topk_iter(clf, row_blocks(X, 25), k=3))
    >>> [labels.shape for labels, _ in parts]
    [(25, 3), (25, 3), (10, 3)]
    >>> bool((np.vstack([s for _, s in parts]) == clf.predict_topk(X, k=3)[1]).all())
    True
    """
    if not hasattr(estimator, "predict_topk"):
        raise TypeError(
            f"estimator must have predict_topk (a fitted skxmc ranker, or a pipeline ending "
            f"in one), got {type(estimator).__name__}."
        )
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Iterable):
        raise TypeError(
            f"blocks must be an iterable of row blocks (e.g. row_blocks(X, 10000)), got "
            f"{type(blocks).__name__}."
        )
    if hasattr(blocks, "shape"):
        raise TypeError(
            "blocks is one matrix; pass row_blocks(X, size) to predict it block by block, "
            "or call predict_topk(X) for all of it."
        )
    for block in blocks:
        yield estimator.predict_topk(block, k=k, **params)
