"""``skxmc serve``'s fast ``POST /predict`` route (``_PredictRoute``): the same answers,
byte for byte, as FastAPI's route, and every request it cannot answer goes to FastAPI,
which answers it as before. In process, through the ASGI interface (no server)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="pip install 'skxmc[serve]'")

from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc import XRLinearClassifier
from skxmc._serve import _app
from skxmc._serve._model import ServedModel
from skxmc.datasets import load_demo
from skxmc.pipeline import make_pipeline


@pytest.fixture(scope="module")
def served():
    demo = load_demo()
    pipe = make_pipeline(
        TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier(n_jobs=1, top_k=7)
    )
    pipe.fit(demo.train_texts[:200], demo.train_labels[:200])
    return ServedModel("in-memory", model=pipe), list(demo.test_texts[:6])


def _apps(served, fast_route: bool):
    app = _app.create_app(served, max_texts=4, max_wait_ms=0)
    if not fast_route:
        app.front_middleware = [m for m in app.front_middleware if m.cls is not _app._PredictRoute]
    return app


async def _call(app, body: bytes, content_type: bytes, chunks: int = 1) -> tuple:
    headers = [(b"content-type", content_type)] if content_type else []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/predict",
        "raw_path": b"/predict",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    size = max(1, -(-len(body) // chunks))
    parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    messages = [
        {"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
        for i, p in enumerate(parts)
    ]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)

    sent = []

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    body_out = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], sorted(start["headers"]), body_out


def _answers(served, requests, fast_route):
    app = _apps(served, fast_route)

    async def run():
        async with app.router.lifespan_context(app):
            return [await _call(app, *r) for r in requests]

    return asyncio.run(run())


def test_fast_route_answers_as_fastapi_does(served, monkeypatch):
    model, texts = served
    json_type = b"application/json"
    requests = [
        (json.dumps({"text": texts[0]}).encode(), json_type),
        (json.dumps({"texts": texts[:3], "k": 4}).encode(), json_type, 3),
        (
            json.dumps({"text": texts[1], "threshold": 0.01}).encode(),
            b"application/json; charset=utf-8",
        ),
        (json.dumps({"text": "caf\u00e9 \u00fcber", "k": 2}).encode(), json_type),
        # refused: FastAPI's 400 and message, through the replayed body
        (json.dumps({"text": 5}).encode(), json_type),
        (json.dumps({"texts": texts[:5]}).encode(), json_type, 2),
        (json.dumps({"text": "a", "k": 10**6}).encode(), json_type),
        (json.dumps({"text": "a", "extra": 1}).encode(), json_type),
        (b"{not json", json_type),
        (json.dumps({"text": "a"}).encode(), b"text/plain"),
        (json.dumps({"text": "a"}).encode(), b""),
    ]
    to_fastapi = []  # what the fast route passed on to FastAPI
    real_init = _app._PredictRoute.__init__

    def init(self, app, answer):
        async def inner(scope, receive, send):
            to_fastapi.append(scope["path"])
            await app(scope, receive, send)

        real_init(self, inner, answer)

    monkeypatch.setattr(_app._PredictRoute, "__init__", init)
    fast = _answers(model, requests, fast_route=True)
    assert len(to_fastapi) == 7  # the refused ones; the valid four were answered here
    slow = _answers(model, requests, fast_route=False)
    assert fast == slow
    assert [status for status, _, _ in fast] == [200] * 4 + [400] * 7
    assert json.loads(fast[1][2])["predictions"][2]["labels"]  # a real answer


def test_a_failing_model_is_logged_once_as_500(served, caplog):
    """The fast route runs outside Starlette's error middleware: the model's error goes
    to the ASGI server (uvicorn answers 500), and the request is still logged once."""
    model, texts = served

    class Failing(ServedModel):
        def predict(self, texts, k):
            raise ValueError("the model failed")

    failing = Failing.__new__(Failing)
    failing.__dict__.update(model.__dict__)
    app = _app.create_app(failing, max_wait_ms=0)

    async def run():
        async with app.router.lifespan_context(app):
            body = json.dumps({"text": texts[0]}).encode()
            with pytest.raises(ValueError, match="the model failed"):
                await _call(app, body, b"application/json")

    with caplog.at_level("INFO", logger="skxmc._serve._app"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if "/predict" in r.getMessage()]
    assert len(lines) == 1 and " POST /predict 500 " in lines[0], lines
