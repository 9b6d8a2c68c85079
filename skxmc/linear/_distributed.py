"""XR-Linear on a Dask cluster: the node problems of every layer, the beam searches of
training (matcher-aware negatives) and of prediction, spread over ``distributed`` workers.

How a user asks for it: scikit-learn's own switch, a :func:`joblib.parallel_config`
context with the ``"dask"`` backend around ``fit`` / ``predict*``::

    from dask.distributed import Client
    import joblib

    client = Client("tcp://scheduler:8786")
    with joblib.parallel_config(backend="dask"):
        clf.fit(X, Y)
        labels, scores = clf.predict_topk(X_test)

Why this and not a ``client=`` parameter: a Client is a live connection, and estimator
parameters are cloned (deep-copied) by ``clone`` / ``GridSearchCV`` and saved with the
model; the same code runs locally or on a cluster by changing the context only, as for
scikit-learn's own estimators. Only the backend's ``client`` is used here: the work is
submitted with that client directly (scatter + submit), not through ``joblib.Parallel``,
whose tasks would each carry their arguments.

What travels (the docs' scaling page reports the bytes per layer):

* ``X`` (CSR arrays and row norms) once per fit, broadcast to every worker
  (``client.scatter(..., broadcast=True)``) before the first layer;
* per layer, the :class:`~skxmc.linear._solver.LayerTask` (groups, targets, seeds,
  sample weights) once to every worker, then one small task per work chunk (three index
  arrays) whose result is the chunk's sparse weights; the layer's matrix is assembled on
  the client;
* with ``negative_sampling="tfn+man"``, every trained layer's search structures once to
  every worker, and the training rows are searched in row blocks (the result: the
  block's beam);
* ``predict*``: the model's search structures once per call to every worker, each row
  block of the queries to one worker.

The result equals a local fit: every label's solver has its own seeded coordinate order
(:func:`~skxmc.linear._solver.label_seeds`), so how labels are cut into chunks, and where
a chunk runs, does not change its weights; the beam search treats rows independently.

Failures: a worker that dies has its tasks rerun elsewhere by the scheduler (up to
``distributed.scheduler.allowed-failures``), from replicas of the broadcast data; past
that, or on any error in a task, ``fit`` raises :class:`RuntimeError` naming the layer,
and the estimator keeps its previous state (no partial model).

``dask`` is imported only here, and only when such a context is active: ``import skxmc``
never imports it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._beam import beam_search
from ._problem import LayerTask, solver_view
from ._solver import run_chunk

logger = logging.getLogger(__name__)

__all__ = ["ClusterSession", "active_client"]

# Rows per beam-search task (training rows for matcher-aware negatives, or queries): large
# enough that a task's overhead (a few ms) is small against its search, small enough that a
# block's candidate matrices stay far below a worker's memory.
SEARCH_BLOCK_ROWS = 16384


def active_client() -> Any:
    """The ``distributed.Client`` of an active ``joblib.parallel_config(backend="dask")``
    context, or None (no context, or another backend). Imports nothing from dask: the
    backend object exists only if the user's context created it."""
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend()
    if type(backend).__name__ != "DaskDistributedBackend":
        return None
    return backend.client


def _nbytes(obj: Any) -> int:
    """Bytes of the numpy arrays in ``obj`` (a matrix, a tuple, a task, search layer)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if sp.issparse(obj):
        return int(sum(a.nbytes for a in (obj.data, obj.indices, obj.indptr)))
    if isinstance(obj, LayerTask):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    if isinstance(obj, _SharedX):
        return _nbytes(obj.csr) + obj.sqnorms.nbytes
    if hasattr(obj, "__dict__"):
        return sum(_nbytes(v) for v in vars(obj).values())
    return 0


class _SharedX:
    """The training matrix and its row norms, scattered once per fit. The solver's view of
    it (:func:`~skxmc.linear._solver.solver_view`, frequency-ranked feature ids) is derived
    on each worker and never pickled, so that the feature ids travel once."""

    def __init__(self, csr: sp.csr_matrix, sqnorms: np.ndarray) -> None:
        self.csr = csr
        self.sqnorms = np.ascontiguousarray(sqnorms, dtype=np.float64)
        self._x: tuple | None = None

    @property
    def x(self) -> tuple:
        if self._x is None:
            self._x = solver_view(self.csr, self.sqnorms)
        return self._x

    def __getstate__(self) -> dict:
        return {"csr": self.csr, "sqnorms": self.sqnorms}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._x = None


# ---------------------------------------------------------------- worker-side functions


def _fit_chunk_remote(shared: _SharedX, task: LayerTask, chunk: tuple) -> tuple[np.ndarray, ...]:
    return run_chunk(shared.x, task, chunk)


def _search_remote(
    X: Any, lo: int, hi: int, layers: list, parents: list, kwargs: dict
) -> sp.csr_matrix:
    Xb = X.csr[lo:hi] if isinstance(X, _SharedX) else X
    # one thread per task: the worker's threads are the parallelism
    return beam_search(Xb, list(layers), list(parents), n_jobs=1, **kwargs)


# ---------------------------------------------------------------------- client side


@dataclass
class ClusterSession:
    """One fit's (or one predict call's) use of a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
        The client of the active joblib context.
    label : str
        What runs, for error messages (``"XRLinearClassifier.fit"``).
    """

    client: Any
    label: str
    n_threads: int = 0
    n_workers: int = 0
    bytes_per_layer: list = field(default_factory=list)
    _x: Any = None
    _futures: list = field(default_factory=list)
    _search_layers: list = field(default_factory=list)
    _layer_bytes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        threads = self.client.nthreads()
        if not threads:
            raise RuntimeError(
                f"{self.label}: the Dask cluster of the active joblib context has no workers."
            )
        self.n_workers = len(threads)
        self.n_threads = int(sum(threads.values()))
        self._reset_bytes()

    # -- bookkeeping -------------------------------------------------------------------

    def _reset_bytes(self) -> None:
        self._layer_bytes = {"broadcast": 0, "to_workers": 0, "from_workers": 0}

    def end_layer(self) -> dict:
        """Close the byte count of a layer and return it (also kept in bytes_per_layer)."""
        record = dict(self._layer_bytes)
        self.bytes_per_layer.append(record)
        self._reset_bytes()
        return record

    def _broadcast(self, obj: Any) -> Any:
        """Scatter ``obj`` to every worker once; counted as ``n_workers`` copies."""
        nbytes = _nbytes(obj)
        self._layer_bytes["broadcast"] += nbytes * self.n_workers
        future = self.client.scatter(obj, broadcast=True, hash=False)
        self._futures.append(future)
        return future

    def _gather(self, futures: list, what: str) -> list:
        try:
            results = self.client.gather(futures)
        except Exception as exc:  # a task's error, KilledWorker, a lost connection
            for f in futures:
                f.release()
            raise RuntimeError(
                f"{self.label} failed on the Dask cluster while {what}: "
                f"{type(exc).__name__}: {exc}. Nothing was fitted or returned; rerun it "
                f"(a worker that died is retried up to the scheduler's "
                f"'distributed.scheduler.allowed-failures' times)."
            ) from exc
        for f in futures:
            f.release()
        self._layer_bytes["from_workers"] += sum(_nbytes(r) for r in results)
        return results

    def close(self) -> None:
        """Release everything this session scattered."""
        for f in self._futures:
            f.release()
        self._futures.clear()
        self._search_layers.clear()
        self._x = None

    def __enter__(self) -> ClusterSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- training ------------------------------------------------------------------------

    def share_x(self, X: sp.csr_matrix, sqnorms: np.ndarray) -> None:
        """Broadcast the training matrix (once per fit)."""
        self._x = self._broadcast(_SharedX(X, sqnorms))

    def run_layer(self, task: LayerTask, chunks: Sequence[tuple]) -> list:
        """``fit_layer``'s executor hook: the layer's chunks as tasks, results in order."""
        task_future = self._broadcast(task)
        futures = []
        for chunk in chunks:
            self._layer_bytes["to_workers"] += _nbytes(chunk)
            futures.append(
                self.client.submit(_fit_chunk_remote, self._x, task_future, chunk, pure=False)
            )
        results = self._gather(futures, "training a layer")
        task_future.release()
        self._futures.remove(task_future)
        return results

    def add_search_layer(self, chunked: Any, parents: sp.csr_matrix) -> None:
        """Broadcast a trained layer's search structures (matcher-aware negatives)."""
        self._search_layers.append((self._broadcast(chunked), self._broadcast(parents)))

    def search_training_rows(self, n_rows: int, **kwargs: Any) -> sp.csr_matrix:
        """Beam search of the (already broadcast) training rows through the first
        ``kwargs["n_layers"]`` layers (those broadcast so far), by row blocks."""
        n_layers = kwargs["n_layers"]
        layers = [c for c, _ in self._search_layers[:n_layers]]
        parents = [p for _, p in self._search_layers[:n_layers]]
        futures = [
            self.client.submit(
                _search_remote,
                self._x,
                lo,
                min(lo + SEARCH_BLOCK_ROWS, n_rows),
                layers,
                parents,
                kwargs,
                pure=False,
            )
            for lo in range(0, n_rows, SEARCH_BLOCK_ROWS)
        ]
        blocks = self._gather(futures, "searching the training rows (matcher-aware negatives)")
        return sp.vstack(blocks, format="csr") if blocks else None

    # -- prediction ----------------------------------------------------------------------

    def search(
        self, X: sp.csr_matrix, chunks: Sequence[Any], parents: Sequence[Any], **kwargs: Any
    ) -> sp.csr_matrix:
        """Beam search of the queries ``X`` by row blocks: the model's structures go to
        every worker once, each block to one worker."""
        layers = [self._broadcast(c) for c in chunks]
        par = [self._broadcast(p) for p in parents]
        n = X.shape[0]
        # at least one block per worker thread, so that every thread has work
        block = max(1, min(SEARCH_BLOCK_ROWS, math.ceil(n / max(1, self.n_threads))))
        bounds = [(lo, min(lo + block, n)) for lo in range(0, n, block)]
        pieces = [X[lo:hi] for lo, hi in bounds]
        self._layer_bytes["to_workers"] += sum(_nbytes(p) for p in pieces)
        scattered = self.client.scatter(pieces, hash=False) if pieces else []
        futures = [
            self.client.submit(_search_remote, s, 0, hi - lo, layers, par, kwargs, pure=False)
            for s, (lo, hi) in zip(scattered, bounds)
        ]
        try:
            blocks = self._gather(futures, "predicting")
        finally:
            for s in scattered:
                s.release()
        if not blocks:
            return sp.csr_matrix((0, parents[-1].shape[1]), dtype=np.float32)
        return sp.vstack(blocks, format="csr")
