"""Top-k inner-product search over the rows of a fixed matrix: exact or approximate.

One home for "which stored vectors score highest against these queries", used by
:class:`~skxmc.KNNBertClassifier` (cosine kNN over its memory) and
:class:`~skxmc.SNMClassifier` (best labels over its class vectors).

- ``"exact"``: dense products in blocks of queries with torch's BLAS (never an
  ``(n_queries, n_vectors)`` matrix for all queries at once).
- ``"approximate"``: a faiss inverted-file index (``IndexIVFFlat``, inner product): k-means
  cells over the stored vectors, and each query scans only its ``n_probe`` nearest cells.
  Its build cost (k-means) is paid once after ``fit`` or loading; a search then costs about
  ``n_probe / n_cells`` of the exact one.
- ``"auto"``: approximate when faiss is installed and there are at least
  :data:`APPROXIMATE_MIN_VECTORS` stored vectors, else exact. Below that size the exact
  search is as fast and gives exact answers (``benchmarks/knn_search.py`` measures both).

The index itself is never saved: it is rebuilt from the vectors (deterministically, fixed
k-means seed) after unpickling or ``skxmc.load``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._optional import require

__all__ = ["APPROXIMATE_MIN_VECTORS", "SEARCH_METHODS", "InnerProductIndex", "resolve_search"]

SEARCH_METHODS = ("auto", "exact", "approximate")

# "auto" switches to the faiss index from this many stored vectors on. Measured with
# benchmarks/knn_search.py (384-d clustered vectors, 1,000 queries, one thread; results in
# benchmarks/results/knn_search*.md): exact search costs 0.4 / 3.2 / 8.8 / 42 ms per query
# at 20k / 100k / 300k / 1M vectors, the index 2.1 / 1.5 / 2.8 / 9.8 ms (recall@10 1.0;
# 0.90 / 0.98 / 0.999 on a harder, more spread set), after a build of 2 / 13 / 48 / 165 s.
# Below ~200k the exact search is cheap next to encoding a text (~10 ms with MiniLM on a
# CPU thread), so the build and the approximation do not pay off; above it they do.
APPROXIMATE_MIN_VECTORS = 200_000

# Scores held at once by the exact search (float32): 256 MB, whatever the number of
# stored vectors; at most 1024 queries per block.
_SCORE_BLOCK = 1 << 26
_MAX_QUERY_BLOCK = 1024
# k-means seed of the index (faiss's ClusteringParameters.seed): fixed, so that a model
# rebuilds the same index after loading and predicts the same.
_KMEANS_SEED = 1234
# Vectors per cell used to train the k-means (faiss warns below 39 per centroid).
_TRAIN_PER_CELL = 40
_MIN_PER_CELL = 39
_MIN_SCANNED = 8192


def _import_faiss() -> Any:
    return require(
        "faiss",
        "knn",
        "search='approximate'",
        alternative=" (or pip install faiss-gpu), or use search='exact'",
    )


def _faiss_available() -> bool:
    try:
        _import_faiss()
    except ImportError:
        return False
    return True


def resolve_search(method: str, n_vectors: int) -> str:
    """``"exact"`` or ``"approximate"`` for ``method`` in :data:`SEARCH_METHODS`."""
    if method not in SEARCH_METHODS:
        raise ValueError(f"search must be one of {SEARCH_METHODS}, got {method!r}.")
    if method == "auto":
        if n_vectors >= APPROXIMATE_MIN_VECTORS and _faiss_available():
            return "approximate"
        return "exact"
    return method


class InnerProductIndex:
    """The ``k`` rows of ``vectors`` with the largest inner product with each query.

    Parameters
    ----------
    vectors : ndarray or torch.Tensor of shape (n_vectors, dim)
        The stored vectors (e.g. L2-normalised, for cosine scores).
    method : {"auto", "exact", "approximate"}, default="auto"
        See the module docstring.
    device : str or torch.device, default="cpu"
        Where the exact search multiplies (the approximate index is on CPU).
    n_cells : int or None, default=None
        Cells of the approximate index; None: ``4 * sqrt(n_vectors)`` (at most
        ``n_vectors / 39``, the fewest training vectors per cell faiss accepts).
    n_probe : int or None, default=None
        Cells scanned per query; None: ``max(8, n_cells // 16)``, raised so that about
        8,192 vectors are scanned at least.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc._search import InnerProductIndex
    >>> vectors = np.eye(4, dtype=np.float32)
    >>> scores, rows = InnerProductIndex(vectors, method="exact").search(
    ...     np.array([[0.1, 0.9, 0.0, 0.0]], dtype=np.float32), k=2)
    >>> rows.tolist()
    [[1, 0]]
    """

    def __init__(
        self,
        vectors: Any,
        *,
        method: str = "auto",
        device: Any = "cpu",
        n_cells: int | None = None,
        n_probe: int | None = None,
    ) -> None:
        import torch

        if vectors.ndim != 2:
            raise ValueError(f"vectors must be 2-D, got shape {tuple(vectors.shape)}.")
        self.n_vectors, self.dim = (int(v) for v in vectors.shape)
        self.requested_method = method
        self.method = resolve_search(method, self.n_vectors)
        self._index = None
        if self.method == "approximate" and self.n_vectors > 0:
            if isinstance(vectors, torch.Tensor):
                vectors = vectors.detach().float().cpu().numpy()
            self._index = self._build_ivf(
                np.ascontiguousarray(vectors, dtype=np.float32), n_cells, n_probe
            )
            self._vectors = None
        else:
            # the exact search runs where the vectors live (a GPU model searches on GPU)
            self._vectors = torch.as_tensor(vectors, dtype=torch.float32, device=device)

    def _build_ivf(self, vectors: np.ndarray, n_cells: int | None, n_probe: int | None) -> Any:
        faiss = _import_faiss()
        n = self.n_vectors
        # faiss asks for >= 39 training vectors per cell (_MIN_PER_CELL)
        cells = n_cells if n_cells is not None else min(int(4 * math.sqrt(n)), n // _MIN_PER_CELL)
        cells = max(1, min(cells, n))
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(quantizer, self.dim, cells, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = _KMEANS_SEED
        index.cp.niter = 10  # k-means passes: cells only route queries, they need not be tight
        # k-means on an evenly spaced sample (deterministic): enough per cell, not all n
        n_train = min(n, cells * _TRAIN_PER_CELL)
        sample = vectors[np.linspace(0, n - 1, n_train).astype(np.int64)]
        index.train(sample)
        index.add(vectors)
        if n_probe is None:
            # a sixteenth of the cells, and at least ~_MIN_SCANNED vectors: small indexes
            # have small cells, and too few scanned vectors lose neighbours (measured
            # recall@10 0.62 at 20k vectors with 32 of 512 cells, benchmarks/knn_search.py)
            n_probe = max(8, cells // 16, math.ceil(cells * _MIN_SCANNED / n))
        index.nprobe = min(cells, n_probe)
        self.n_cells, self.n_probe = cells, index.nprobe
        return index

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and rows of the ``min(k, n_vectors)`` best vectors per query, best first.

        Parameters
        ----------
        queries : ndarray or torch.Tensor of shape (n_queries, dim)
        k : int

        Returns
        -------
        scores : ndarray of float32 of shape (n_queries, min(k, n_vectors))
        rows : ndarray of int64 of shape (n_queries, min(k, n_vectors))
        """
        import torch

        if isinstance(queries, torch.Tensor):
            queries = queries.detach().float().cpu().numpy()
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {queries.shape}.")
        k = min(int(k), self.n_vectors)
        if self._index is None:
            return self._exact(queries, k)
        scores, rows = self._index.search(queries, k)
        # a probe can find fewer than k vectors in its cells (rows -1): scan every cell for
        # those queries, through per-call parameters (the shared index is never modified,
        # so concurrent predict calls stay safe)
        short = np.flatnonzero((rows < 0).any(axis=1))
        if short.size:
            every_cell = _import_faiss().SearchParametersIVF(nprobe=self.n_cells)
            scores[short], rows[short] = self._index.search(queries[short], k, params=every_cell)
        return scores, rows.astype(np.int64, copy=False)

    def _exact(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        scores = np.empty((len(queries), k), dtype=np.float32)
        rows = np.empty((len(queries), k), dtype=np.int64)
        if k == 0:
            return scores, rows
        stored = self._vectors
        step = max(1, min(_MAX_QUERY_BLOCK, _SCORE_BLOCK // max(self.n_vectors, 1)))
        with torch.inference_mode():
            for start in range(0, len(queries), step):
                block = torch.from_numpy(queries[start : start + step]).to(stored.device)
                s, i = (block @ stored.T).topk(k, dim=1)
                scores[start : start + len(s)] = s.float().cpu().numpy()
                rows[start : start + len(s)] = i.cpu().numpy()
        return scores, rows

    def __getstate__(self) -> dict:
        # faiss indexes do not pickle; the owner rebuilds the index from the vectors
        raise TypeError("InnerProductIndex is not picklable; rebuild it from the vectors.")
