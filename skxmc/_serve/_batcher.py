"""Micro-batching: concurrent requests share one call of the model.

A request puts its texts on a queue and awaits a future. One task takes the first waiting
request, keeps collecting for at most ``max_wait`` seconds or until ``max_batch_size``
texts are waiting, then runs the model once per distinct ``k`` in a worker thread (the
event loop keeps accepting requests meanwhile) and resolves each request's future with its
rows. While a batch runs, the next one fills up, so under load batches grow by themselves
and at rest a request waits at most ``max_wait``.

The server's default ``max_wait`` is 0: a batch is what queued while the model was busy,
and what arrives while the event loop runs a couple of passes more (``IDLE_PASSES``): the
requests of callers answered together come back together, a few passes apart, and a
batch that took only the first of them cost more CPU per text. A fixed wait only pays
when one worker's callers outnumber a batch: with fewer (each of several workers holding
part of the callers), every batch waited the whole window for texts that could not come,
since its callers were all in it, and the cores idled meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

__all__ = ["MicroBatcher"]

logger = logging.getLogger(__name__)

IDLE_PASSES = 2  # event-loop passes without a new request that end a batch's collection


@dataclass
class _Request:
    texts: list[str]
    k: int
    future: asyncio.Future = field(repr=False)


class MicroBatcher:
    """Collect concurrent prediction requests into batches.

    Parameters
    ----------
    predict : callable
        ``predict(texts, k) -> list`` with one result per text.
    max_batch_size : int
        Texts per model call at most; a larger request runs as a batch of its own.
    max_wait : float
        Seconds the first request of a batch waits for others.
    executor : ThreadPoolExecutor
        Where ``predict`` runs (one thread: the model runs one batch at a time, and
        uses its own threads inside).
    """

    def __init__(
        self,
        predict: Callable[[list[str], int], list],
        *,
        max_batch_size: int,
        max_wait: float,
        executor: ThreadPoolExecutor,
    ) -> None:
        self.predict = predict
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait
        self.executor = executor
        self._queue: asyncio.Queue[_Request] | None = None
        self._task: asyncio.Task | None = None
        self._next: _Request | None = None
        self.n_batches = 0  # model calls so far, for the log and the tests

    async def start(self) -> None:
        """Start the batching task in the running event loop."""
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="skxmc-micro-batcher")

    async def stop(self) -> None:
        """Stop the task; requests still queued get an error instead of hanging."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        left = [] if self._next is None else [self._next]
        while self._queue is not None and not self._queue.empty():
            left.append(self._queue.get_nowait())
        for request in left:
            if not request.future.done():
                request.future.set_exception(RuntimeError("the server is shutting down"))

    async def submit(self, texts: list[str], k: int) -> list:
        """Rank ``texts`` in the next batch; their results, in order."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not awaited")
        future = asyncio.get_running_loop().create_future()
        # unbounded queue: put_nowait never waits, and costs no coroutine per request
        self._queue.put_nowait(_Request(texts, k, future))
        return await future

    async def _collect(self) -> list[_Request]:
        """The next batch: the first waiting request and those that join it in time."""
        assert self._queue is not None
        if self._next is not None:  # the request that did not fit into the last batch
            batch, self._next = [self._next], None
        else:
            batch = [await self._queue.get()]
        size = len(batch[0].texts)
        deadline = time.monotonic() + self.max_wait
        idle_passes = 0
        while size < self.max_batch_size:
            # Requests already waiting are taken at once: under load the queue is full
            # and a wait_for (a task and a timer per request) would cost more than the
            # request's share of the model call.
            try:
                request = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    try:
                        request = await asyncio.wait_for(self._queue.get(), remaining)
                    except asyncio.TimeoutError:
                        break
                else:
                    # No time left to wait: let the event loop run a pass or two, since a
                    # request that has arrived takes that long from its bytes to the queue,
                    # and stop once they bring nothing more.
                    if idle_passes == IDLE_PASSES:
                        break
                    idle_passes += 1
                    await asyncio.sleep(0)
                    continue
            idle_passes = 0
            if size + len(request.texts) > self.max_batch_size:
                self._next = request  # requests are never split: it opens the next batch
                break
            batch.append(request)
            size += len(request.texts)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            live = [r for r in batch if not r.future.done()]  # a client may have gone
            by_k: dict[int, list[_Request]] = {}
            for request in live:
                by_k.setdefault(request.k, []).append(request)
            # One model call per k: a beam search asked for more labels may rank the
            # first ones differently, and each answer must equal predict_topk(texts, k).
            for k, requests in by_k.items():
                texts = [text for r in requests for text in r.texts]
                t0 = time.perf_counter()
                try:
                    rows = await loop.run_in_executor(self.executor, self.predict, texts, k)
                except Exception as exc:  # the model's error goes to its requests
                    logger.exception("prediction of a batch of %d texts failed", len(texts))
                    for r in requests:
                        if not r.future.done():
                            r.future.set_exception(exc)
                    continue
                self.n_batches += 1
                logger.debug(
                    "batch of %d requests, %d texts, k=%d: %.1f ms",
                    len(requests),
                    len(texts),
                    k,
                    1000 * (time.perf_counter() - t0),
                )
                start = 0
                for r in requests:
                    end = start + len(r.texts)
                    if not r.future.done():
                        r.future.set_result(rows[start:end])
                    start = end
