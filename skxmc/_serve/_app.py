"""The web application of ``skxmc serve``: FastAPI routes over a :class:`ServedModel`.

FastAPI rather than bare Starlette: its request models (pydantic) validate the JSON and
document it in the same place, so the OpenAPI schema at ``/openapi.json`` and the page at
``/docs`` describe exactly what is checked. Validation errors are answered with status
400 (FastAPI's default is 422) and one readable ``detail`` string, like every other
refusal here.

``/docs`` (Swagger UI) and ``/redoc`` load their scripts from this server, not from a CDN
(FastAPI's default), so they work on machines without internet access: the assets come
from ``fastapi-offline``, which packages a Swagger UI recent enough for the OpenAPI 3.1
schema FastAPI writes (``swagger-ui-bundle`` ships 4.x, which cannot read 3.1).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from .._optional import require_extra
from .._serve_limits import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_TEXTS,
    DEFAULT_MAX_WAIT_MS,
)
from .._version import __version__
from ._batcher import MicroBatcher
from ._model import ServedModel
from ._page import PAGE_HTML

with require_extra("serve", "skxmc serve"):
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from fastapi_offline import FastAPIOffline
    from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
    from starlette.middleware import Middleware

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_TEXTS",
    "DEFAULT_MAX_WAIT_MS",
    "OPTIONS_ENV",
    "app_from_environment",
    "create_app",
]

logger = logging.getLogger(__name__)

# Worker processes of ``--workers`` build their app from this variable (JSON of
# create_app's arguments): uvicorn starts them from an import string, not an object.
OPTIONS_ENV = "SKXMC_SERVE_OPTIONS"


class _Texts(BaseModel):
    """One text or a batch, as a request gives it."""

    model_config = ConfigDict(extra="forbid")

    text: StrictStr | None = Field(None, description="One text (or give `texts`).")
    texts: list[StrictStr] | None = Field(
        None, description="A batch of texts (or give `text`); answered in order."
    )

    def as_list(self, max_texts: int) -> list[str]:
        if (self.text is None) == (self.texts is None):
            raise _bad(
                "give either 'text' (one string) or 'texts' (a list of strings), "
                + ("not both." if self.text is not None else "not neither.")
            )
        if self.text is not None:
            return [self.text]
        assert self.texts is not None
        if not self.texts:
            raise _bad("'texts' is an empty list; give at least one text.")
        if len(self.texts) > max_texts:
            raise _bad(
                f"'texts' has {len(self.texts)} texts; at most {max_texts} per request "
                f"(skxmc serve --max-texts). Split the batch."
            )
        return self.texts


class PredictRequest(_Texts):
    """``POST /predict``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"text": "a history of Bavarian railways", "k": 5}]},
    )

    k: StrictInt | None = Field(
        None,
        ge=1,
        description="Labels per text, 1 to the number of labels (default: the model's top_k).",
    )
    threshold: float | None = Field(
        None,
        strict=True,
        allow_inf_nan=False,
        description="Leave out labels that score below it.",
    )


class ExplainRequest(_Texts):
    """``POST /explain``."""

    k: StrictInt = Field(5, ge=1, description="Labels explained per text.")


class Prediction(BaseModel):
    """The labels of one text, best first, with their scores."""

    labels: list[Any]
    scores: list[float]


class PredictResponse(BaseModel):
    """One prediction per text, in the order of the request."""

    predictions: list[Prediction]


class ExplainResponse(BaseModel):
    """Per text, one explanation per label (see ``skxmc explain``)."""

    explanations: list[list[dict[str, Any]]]


class ErrorResponse(BaseModel):
    """What was wrong with the request."""

    detail: str


def _bad(message: str) -> HTTPException:
    return HTTPException(status_code=400, detail=message)


def _validation_message(exc: RequestValidationError, content_type: str) -> str:
    """pydantic's errors as one sentence per error: ``where: what``."""
    parts = []
    for error in exc.errors():
        kind = error.get("type")
        if kind == "json_invalid":
            reason = error.get("ctx", {}).get("error", "")
            parts.append(f"the body is not valid JSON ({reason})" if reason else "bad JSON")
            continue
        where = ""
        for part in (str(p) for p in error.get("loc", ()) if p != "body"):
            where += f"[{part}]" if part.isdigit() else (f".{part}" if where else part)
        message = error.get("msg", "invalid")
        if kind == "model_attributes_type":
            message = 'the body must be a JSON object such as {"text": "...", "k": 5}'
            if "json" not in content_type:
                message += f" sent as Content-Type: application/json (not {content_type!r})"
        elif kind == "missing" and not where:
            message = 'the body is missing: send a JSON object such as {"text": "..."}'
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts) or "invalid request"


class _RequestLog:
    """ASGI middleware: one INFO line per request (method, path, status, texts, time)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def send_status(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            client = scope.get("client")
            n_texts = scope.get("skxmc.n_texts")
            logger.info(
                "%s %s %s %d%s %.1f ms",
                f"{client[0]}:{client[1]}" if client else "-",
                scope.get("method"),
                scope.get("path"),
                status,
                "" if n_texts is None else f" texts={n_texts}",
                1000 * (time.perf_counter() - t0),
            )


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    """The request's media type is ``application/json`` (any parameters)."""
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


class _BodyTooLarge(Exception):
    pass


class _BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 with a JSON
    ``detail``, before it is read whole: at once when its ``Content-Length`` says so, else
    (chunked) as soon as the bytes received pass the limit."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def _refuse(self, size: str) -> tuple[dict, dict]:
        detail = (
            f"the request body is {size} bytes, more than this server's limit of "
            f"{self.max_bytes} bytes (skxmc serve --max-body-bytes); send fewer or "
            f"shorter texts per request."
        )
        content = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-length", str(len(content)).encode()),
            (b"content-type", b"application/json"),
            (b"connection", b"close"),
        ]
        start = {"type": "http.response.start", "status": 413, "headers": headers}
        return start, {"type": "http.response.body", "body": content}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            for message in self._refuse(length.decode()):
                await send(message)
            return
        received = 0
        started = False

        async def limited_receive() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracked_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except _BodyTooLarge:
            if started:  # cannot happen for our routes: they read the body first
                raise
            for message in self._refuse(f"more than {self.max_bytes}"):
                await send(message)


class _PredictRoute:
    """ASGI middleware: a ``POST /predict`` whose JSON body FastAPI would accept is
    answered here, without FastAPI's routing, dependency solving and response
    re-validation, which cost more per request than a text's share of the model call.

    The body is checked as FastAPI checks it (``json.loads``, then ``PredictRequest``
    validated in Python mode, then the route's own checks); anything that fails any of
    them, or another content type, goes to FastAPI with the body replayed, which answers
    as it always did (the 400 and its message). The answer is what the route returns,
    encoded as ``JSONResponse`` encodes it.
    """

    def __init__(self, app: Any, answer: Any) -> None:
        self.app, self.answer = app, answer

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/predict"
            and _is_json(scope["headers"])
        ):
            await self.app(scope, receive, send)
            return
        received = [await receive()]
        while received[-1]["type"] == "http.request" and received[-1].get("more_body", False):
            received.append(await receive())
        content = None
        if received[-1]["type"] == "http.request":
            content = await self.answer(b"".join(m.get("body", b"") for m in received), scope)
        if content is None:  # FastAPI answers, reading the same messages
            replay = iter(received)

            async def receive_again() -> dict:
                return next(replay, None) or await receive()

            await self.app(scope, receive_again, send)
            return
        headers = [
            (b"content-length", str(len(content)).encode()),
            (b"content-type", b"application/json"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})


class _App(FastAPI):
    """FastAPI with skxmc's middleware in front of Starlette's whole stack.

    ``add_middleware`` puts a middleware inside Starlette's error middleware and FastAPI's
    own (telemetry, body limit), which every request then passes through twice (its call
    and its send) even when the fast ``/predict`` route answers it, a cost per request its
    answers do not need. Here the request passes through
    ``front_middleware`` (the 413 limit, the log line, the fast route) first, and only what
    the fast route passes on reaches FastAPI. An exception in the fast route gets uvicorn's
    500 (and its traceback in the log), as Starlette's error middleware would give.

    ``fastapi_offline.FastAPIOffline`` is a function that returns a ``FastAPI``, so
    :func:`create_app` sets the class of the app it returns to this one, which adds
    nothing but ``__call__`` and the two attributes below.
    """

    # outermost first, as Starlette's user_middleware; built into _front on first call
    front_middleware: list[Middleware] = []
    _front: Any = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self._front is None:
            front: Any = super().__call__
            for cls, args, kwargs in reversed(self.front_middleware):
                front = cls(front, *args, **kwargs)
            self._front = front
        await self._front(scope, receive, send)


def _without_422(app: FastAPI) -> Any:
    """``app.openapi`` without the 422 answers FastAPI documents for every body: this
    server answers validation errors with 400 (documented by each route)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def _add_routes(
    app: FastAPI,
    served: ServedModel,
    batcher: MicroBatcher,
    executor: ThreadPoolExecutor,
    max_texts: int,
) -> Any:
    """The page, ``/health``, ``/model``, ``/predict`` and ``/explain`` on ``app``;
    returns the fast ``/predict`` answer of :class:`_PredictRoute`."""

    def check_k(k: int) -> int:
        if k > served.n_classes:
            raise _bad(f"k must be between 1 and {served.n_classes} (the model's labels), got {k}.")
        return k

    errors: dict[int | str, dict[str, Any]] = {400: {"model": ErrorResponse}}

    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE_HTML)

    @app.get("/health", summary="Liveness: the model is loaded and the server answers")
    async def health() -> dict[str, Any]:
        # model_calls: how many batches the model ranked, fewer than the requests under load
        return {"status": "ok", "model_calls": batcher.n_batches}

    @app.get("/model", summary="What is served: estimator, labels, versions, model card")
    async def model_info() -> dict[str, Any]:
        return served.info

    async def fast_predict(body: bytes, scope: dict) -> bytes | None:
        """The answer of ``POST /predict`` to a body that passes every check, or None
        (see :class:`_PredictRoute`)."""
        try:
            request = PredictRequest.model_validate(json.loads(body))
            texts = request.as_list(max_texts)
            k = check_k(served.default_k if request.k is None else request.k)
        except (ValueError, HTTPException):  # pydantic's ValidationError is a ValueError
            return None
        scope["skxmc.n_texts"] = len(texts)
        content = await answer(texts, k, request.threshold)
        return json.dumps(
            content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
        ).encode("utf-8")

    async def answer(texts: list[str], k: int, threshold: float | None) -> dict[str, Any]:
        rows = await batcher.submit(texts, k)
        predictions = []
        for labels, scores in rows:
            if threshold is not None:
                kept = [i for i, s in enumerate(scores) if s >= threshold]
                labels, scores = [labels[i] for i in kept], [scores[i] for i in kept]
            predictions.append({"labels": labels, "scores": scores})
        return {"predictions": predictions}

    @app.post(
        "/predict",
        response_model=PredictResponse,
        responses=errors,
        summary="Top-k labels of one text or a batch, with their scores",
    )
    async def predict(body: PredictRequest, request: Request) -> dict[str, Any]:
        texts = body.as_list(max_texts)
        k = check_k(served.default_k if body.k is None else body.k)
        request.scope["skxmc.n_texts"] = len(texts)
        return await answer(texts, k, body.threshold)

    @app.post(
        "/explain",
        response_model=ExplainResponse,
        responses=errors,
        summary="Why each text got its top-k labels (models with explain)",
    )
    async def explain(body: ExplainRequest, request: Request) -> dict[str, Any]:
        if not served.can_explain:
            raise _bad(f"this model ({served.info['estimator']}) has no explain.")
        texts = body.as_list(max_texts)
        k = check_k(body.k)
        request.scope["skxmc.n_texts"] = len(texts)
        # On the prediction thread too: one model call at a time.
        loop = asyncio.get_running_loop()
        rows = await loop.run_in_executor(executor, served.explain, texts, k)
        return {"explanations": rows}

    return fast_predict


def create_app(
    model: str | os.PathLike | ServedModel,
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_wait_ms: float = DEFAULT_MAX_WAIT_MS,
    max_texts: int = DEFAULT_MAX_TEXTS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    mmap: bool = True,
) -> FastAPI:
    """The server's application, with the model loaded (once, here).

    Parameters
    ----------
    model : str, path-like or ServedModel
        A model directory (loaded with ``skxmc.load(..., mmap=mmap)``) or a loaded model.
    max_batch_size : int, default=64
        Texts per model call at most (micro-batching).
    max_wait_ms : float, default=0.0
        Milliseconds a request waits for others to share its model call. With 0, a batch is
        the requests that queued while the model was busy and those that arrive in the
        event loop's next passes: no wait at rest, full batches under load. Keep 0; a
        wait above it left two workers' cores idle in the serving benchmark.
    max_texts : int, default=1000
        Texts per request at most; a longer batch is refused with 400.
    max_body_bytes : int, default=10_000_000
        Bytes of a request body at most; a larger one is refused with 413 before it is
        read whole.
    mmap : bool, default=True
        Memory-map the model's arrays.

    Returns
    -------
    FastAPI
        The ASGI application.
    """
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}.")
    if not max_wait_ms >= 0:
        raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}.")
    if max_texts < 1:
        raise ValueError(f"max_texts must be >= 1, got {max_texts}.")
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes}.")
    served = model if isinstance(model, ServedModel) else ServedModel(model, mmap=mmap)
    # One thread: one model call at a time (the model has its own threads inside), and the
    # event loop stays free to accept requests and fill the next batch.
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skxmc-predict")
    batcher = MicroBatcher(
        served.predict,
        max_batch_size=max_batch_size,
        max_wait=max_wait_ms / 1000,
        executor=executor,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        # The model, numba and the web stack leave some 230,000 objects that live as long
        # as the server; each full collection of the cyclic GC walked them all, and with
        # the allocations of every request that came to tens of microseconds per request
        # on average, in bursts. Frozen, the collector skips them (they are never garbage
        # while the server runs); unfrozen again at shutdown.
        gc.collect()
        gc.freeze()
        logger.info(
            "serving %s (%s, %d labels) with micro-batches of up to %d texts, %.1f ms wait",
            served.model_dir,
            served.info["estimator"],
            served.n_classes,
            max_batch_size,
            max_wait_ms,
        )
        try:
            yield
        finally:
            gc.unfreeze()
            await batcher.stop()
            executor.shutdown(wait=True)
            logger.info("stopped")

    app = FastAPIOffline(
        title="skxmc model server",
        version=__version__,
        description=f"Top-k labels of texts from the model in `{served.model_dir}` "
        f"({served.info['estimator']}, {served.n_classes} labels). Bad requests get status "
        f'400 and a JSON body `{{"detail": "what was wrong"}}`.',
        lifespan=lifespan,
    )
    app.__class__ = _App  # see _App
    app.state.served = served
    app.state.batcher = batcher
    fast = _add_routes(app, served, batcher, executor, max_texts)
    # the first runs first: every request is logged, the fast route's too
    app.front_middleware = [
        Middleware(_BodyLimit, max_bytes=max_body_bytes),
        Middleware(_RequestLog),
        Middleware(_PredictRoute, answer=fast),
    ]
    app.openapi = _without_422(app)  # type: ignore[method-assign]

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type", "")
        message = _validation_message(exc, content_type)
        return JSONResponse(status_code=400, content={"detail": message})

    return app


def app_from_environment() -> FastAPI:
    """The app of a ``--workers`` process: :func:`create_app` with the arguments in the
    ``SKXMC_SERVE_OPTIONS`` environment variable (JSON)."""
    try:
        options = json.loads(os.environ[OPTIONS_ENV])
    except KeyError:
        raise RuntimeError(
            f"{OPTIONS_ENV} is not set; start the server with skxmc serve."
        ) from None
    return create_app(options.pop("model"), **options)
