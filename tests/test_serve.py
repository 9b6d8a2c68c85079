"""``skxmc serve``, as users run it: a real server process on a free port.

One server per module (starting one costs seconds) serves a small TF-IDF + XR-Linear model
trained here; the tests talk HTTP to it with the standard library and compare with the
model's own ``predict_topk``. The try-it page is tested in a real headless browser
(Debian's ``chromium`` and ``chromium-driver`` through selenium), skipped without one.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="pip install 'skxmc[serve]'")
pytest.importorskip("uvicorn", reason="pip install 'skxmc[serve]'")

from sklearn.feature_extraction.text import TfidfVectorizer

import skxmc
from skxmc import XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.pipeline import make_pipeline

ROOT = Path(skxmc.__file__).resolve().parents[1]
START_TIMEOUT = 120  # seconds; a cold numba cache compiles the kernels at the first start


class _AnyInt:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, int)


ANY_INT = _AnyInt()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``python -m skxmc serve`` in a subprocess, its standard error collected."""

    def __init__(self, model_dir: Path, *args: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # This checkout's skxmc, whatever the venv has installed.
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "skxmc", "serve", str(model_dir)]
        command += ["--port", str(self.port), *args]
        self.proc = subprocess.Popen(
            command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
        )
        self.lines: list[str] = []
        # Drained all along: a full pipe would block the server's logging.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise AssertionError(f"the server exited with {self.proc.returncode}:\n{self.log}")
            try:
                if get(self.url + "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the server did not start:\n{self.log}")
            time.sleep(0.1)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM, then the exit status (after ``timeout`` seconds: killed, AssertionError)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"no exit {timeout} s after SIGTERM:\n{self.log}") from None
        self._reader.join(5)
        return status


def request(url: str, body: object = None, *, raw: bytes | None = None) -> tuple[int, object]:
    """Status and JSON answer of a GET (no body) or POST."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def get(url: str) -> tuple[int, object]:
    return request(url)


def _expected(model, texts: list[str], k: int) -> list[tuple[list, list]]:
    labels, scores = model.predict_topk(texts, k=k)
    out = []
    for row_labels, row_scores in zip(labels.tolist(), scores):
        keep = np.isfinite(row_scores)
        out.append(([lab for lab, kept in zip(row_labels, keep) if kept], row_scores[keep]))
    return out


def _check(predictions: list[dict], expected: list[tuple[list, np.ndarray]]) -> None:
    assert len(predictions) == len(expected)
    for got, (labels, scores) in zip(predictions, expected):
        assert got["labels"] == labels
        # float32 scores travel as exact float64 values through JSON
        np.testing.assert_array_equal(np.float32(got["scores"]), scores)


@pytest.fixture(scope="module")
def demo():
    return load_demo()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, demo):
    pipe = make_pipeline(
        TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier(n_jobs=1, top_k=7)
    )
    pipe.fit(demo.train_texts[:500], demo.train_labels[:500])
    path = tmp_path_factory.mktemp("serve") / "model"
    card = {"data_description": "500 records of the demo data.", "metrics": {"P@1": 0.25}}
    skxmc.save(pipe, path, model_card=card)
    return path, pipe


@pytest.fixture(scope="module")
def server(model_dir):
    # A longer wait window than the default, so that the concurrent test sees batching
    # even on a busy machine.
    srv = Server(
        model_dir[0], "--batch-wait-ms", "20", "--max-texts", "50", "--max-body-bytes", "200000"
    )
    yield srv
    srv.stop()


def test_round_trip_equals_predict_topk(server, model_dir, demo):
    pipe = model_dir[1]
    texts = list(demo.test_texts[:20])
    status, answer = request(server.url + "/predict", {"texts": texts, "k": 5})
    assert status == 200
    _check(answer["predictions"], _expected(pipe, texts, 5))
    # one text, and the model's top_k without k
    status, answer = request(server.url + "/predict", {"text": texts[3]})
    assert status == 200
    _check(answer["predictions"], _expected(pipe, [texts[3]], 7))


def test_threshold_leaves_out_low_scores(server, model_dir, demo):
    texts = list(demo.test_texts[:5])
    ((labels, scores),) = _expected(model_dir[1], texts[:1], 10)
    cut = float(scores[2])
    status, answer = request(server.url + "/predict", {"text": texts[0], "k": 10, "threshold": cut})
    assert status == 200
    (prediction,) = answer["predictions"]
    n = int((scores >= np.float32(cut)).sum())
    assert prediction["labels"] == labels[:n] and n >= 3
    assert min(prediction["scores"]) >= cut


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"text": 5}, ["text", "valid string"]),
        ({"texts": ["a", 3]}, ["texts[1]", "valid string"]),
        ({"texts": "a text"}, ["texts", "valid list"]),
        ({"texts": []}, ["empty"]),
        ({"texts": ["a"] * 51}, ["51 texts", "at most 50"]),
        ({"text": "a", "k": "five"}, ["k", "valid integer"]),
        ({"text": "a", "k": 1.5}, ["k", "valid integer"]),
        ({"text": "a", "threshold": "high"}, ["threshold", "valid number"]),
        ({"text": "a", "k": 0}, ["k", "greater than or equal to 1"]),
        ({"text": "a", "k": 10**6}, ["k must be between 1 and"]),
        ({"text": "a", "texts": ["b"]}, ["either 'text'", "not both"]),
        ({}, ["either 'text'"]),
        ({"txt": "a"}, ["txt", "Extra inputs"]),
        ([1, 2], ["JSON object"]),
        (b"{not json", ["not valid JSON"]),
    ],
)
def test_bad_input_gets_400_with_what_was_wrong(server, body, words):
    if isinstance(body, bytes):
        status, answer = request(server.url + "/predict", raw=body)
    else:
        status, answer = request(server.url + "/predict", body)
    assert status == 400, answer
    assert set(answer) == {"detail"}
    for word in words:
        assert word in answer["detail"], answer["detail"]
    # and it keeps serving
    assert request(server.url + "/predict", {"text": "a"})[0] == 200


@pytest.mark.parametrize("chunked", [False, True])
def test_too_large_a_body_gets_413_and_the_server_goes_on(server, chunked):
    body = json.dumps({"text": "word " * 50000}).encode()  # 250 kB, the limit is 200 kB
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        try:
            if chunked:  # no Content-Length: the limit applies to the bytes as they come
                pieces = (body[i : i + 4096] for i in range(0, len(body), 4096))
                conn.request(
                    "POST",
                    "/predict",
                    pieces,
                    {"Content-Type": "application/json"},
                    encode_chunked=True,
                )
            else:
                conn.request("POST", "/predict", body, {"Content-Type": "application/json"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the rest was sent, as it may
        response = conn.getresponse()
        answer = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 413, answer
    assert "200000 bytes" in answer["detail"] and "--max-body-bytes" in answer["detail"]
    if not chunked:
        assert str(len(body)) in answer["detail"]
    assert request(server.url + "/predict", {"text": "word " * 100})[0] == 200


def test_concurrent_clients_get_their_own_answers(server, model_dir, demo):
    pipe = model_dir[1]
    texts = list(demo.test_texts[:50])
    # Each client its own text and k (1 to 5), batched with the others by the server.
    ks = [1 + i % 5 for i in range(50)]
    expected = {k: _expected(pipe, texts, k) for k in set(ks)}
    calls_before = get(server.url + "/health")[1]["model_calls"]
    barrier = threading.Barrier(50)

    def client(i: int) -> tuple[int, object]:
        barrier.wait()  # all 50 at once
        return request(server.url + "/predict", {"text": texts[i], "k": ks[i]})

    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(client, range(50)))
    for i, (status, answer) in enumerate(answers):
        assert status == 200
        _check(answer["predictions"], [expected[ks[i]][i]])
    calls = get(server.url + "/health")[1]["model_calls"] - calls_before
    assert calls < 50  # requests shared model calls


def test_health_model_docs_and_page(server, model_dir):
    assert get(server.url + "/health") == (200, {"status": "ok", "model_calls": ANY_INT})
    status, info = get(server.url + "/model")
    assert status == 200
    assert info["estimator"] == "Pipeline(TfidfVectorizer, XRLinearClassifier)"
    assert info["n_labels"] == len(model_dir[1].classes_)
    assert info["skxmc_version"] == skxmc.__version__ == info["saved_with"]
    assert info["default_k"] == 7 and info["explain"] is True
    assert info["model_card"] == {
        "training_data": "500 records of the demo data.",
        "metrics": {"P@1": 0.25},
    }
    status, schema = get(server.url + "/openapi.json")
    assert status == 200
    assert {"/predict", "/explain", "/health", "/model"} <= set(schema["paths"])
    # validation errors are documented as they are answered: 400, not FastAPI's 422
    assert set(schema["paths"]["/predict"]["post"]["responses"]) == {"200", "400"}
    with urllib.request.urlopen(server.url + "/docs", timeout=30) as response:
        assert response.status == 200
        page = response.read().decode()
    # /docs works offline: its Swagger UI script and style come from this server, no CDN
    assert "openapi.json" in page and "cdn" not in page.lower()
    assets = re.findall(r'(?:src|href)="(/[^"]+\.(?:js|css))"', page)
    assert {asset.rsplit(".", 1)[1] for asset in assets} == {"js", "css"}
    for asset in assets:
        with urllib.request.urlopen(server.url + asset, timeout=30) as response:
            assert response.status == 200 and len(response.read()) > 10_000
    with urllib.request.urlopen(server.url + "/", timeout=30) as response:
        assert response.status == 200 and b'id="text"' in response.read()


def test_explain_matches_the_model(server, model_dir, demo):
    text = demo.test_texts[0]
    status, answer = request(server.url + "/explain", {"text": text, "k": 2})
    assert status == 200
    (row,) = answer["explanations"]
    (want,) = model_dir[1].explain([text], 2)
    assert [item["label"] for item in row] == [item.label for item in want]
    assert [f["name"] for f in row[0]["features"]] == [f.name for f in want[0].features]


def test_one_log_line_per_request(server):
    before = len(server.lines)
    marker = "/model"
    get(server.url + marker)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        new = [line for line in server.lines[before:] if f"GET {marker} 200" in line]
        if new:
            break
        time.sleep(0.05)
    assert len(new) == 1 and " INFO " in new[0], server.log[-2000:]


def test_one_log_line_per_predict_answered_or_refused(server):
    """The fast route's answer and FastAPI's 400 are logged once each, by skxmc's
    middleware (uvicorn's access log is off): no request goes unlogged or twice."""
    before = len(server.lines)
    assert request(server.url + "/predict", {"text": "one log line", "k": 1})[0] == 200
    assert request(server.url + "/predict", {"text": 5})[0] == 400
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        new = [line for line in server.lines[before:] if "/predict" in line]
        if len(new) >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.2)  # a duplicate line would come at once
    new = [line for line in server.lines[before:] if "/predict" in line]
    assert len(new) == 2, server.log[-2000:]
    assert "POST /predict 200 texts=1 " in new[0] and " INFO " in new[0], new
    assert "POST /predict 400 " in new[1] and " INFO " in new[1], new


def test_sigterm_stops_the_server_cleanly(model_dir):
    srv = Server(model_dir[0])
    assert request(srv.url + "/predict", {"text": "a"})[0] == 200
    t0 = time.monotonic()
    assert srv.stop(timeout=10) == 0, srv.log
    assert time.monotonic() - t0 < 10
    assert "Application shutdown complete" in srv.log


@pytest.mark.slow
def test_workers_serve_the_same_answers(model_dir, demo):
    srv = Server(model_dir[0], "--workers", "2")
    try:
        texts = list(demo.test_texts[:10])
        for _ in range(4):  # several connections: both workers answer some
            status, answer = request(srv.url + "/predict", {"texts": texts, "k": 3})
            assert status == 200
            _check(answer["predictions"], _expected(model_dir[1], texts, 3))
    finally:
        assert srv.stop() == 0, srv.log


def test_micro_batcher_groups_requests_without_splitting_them():
    import asyncio

    from skxmc._serve import MicroBatcher

    calls = []

    def predict(texts, k):
        calls.append((list(texts), k))
        return [f"{t}@{k}" for t in texts]

    async def main():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(predict, max_batch_size=5, max_wait=0.05, executor=executor)
            await batcher.start()
            jobs = [
                batcher.submit(["a", "b"], 2),
                batcher.submit(["c"], 2),
                batcher.submit(["d"], 3),
                batcher.submit(["e", "f", "g"], 2),  # does not fit: opens the next batch
            ]
            answers = await asyncio.gather(*jobs)
            await batcher.stop()
            return answers

    answers = asyncio.run(main())
    assert answers == [["a@2", "b@2"], ["c@2"], ["d@3"], ["e@2", "f@2", "g@2"]]
    # one call per k within a batch; the request that did not fit came next, whole
    assert calls == [(["a", "b", "c"], 2), (["d"], 3), (["e", "f", "g"], 2)]


def test_micro_batcher_without_wait_batches_what_queued_while_busy():
    # max_wait=0 (the server's default): a lone request runs at once, and the requests
    # that arrive while the model is busy share the next call.
    import asyncio

    from skxmc._serve import MicroBatcher

    calls = []
    running, release = threading.Event(), threading.Event()

    def predict(texts, k):
        calls.append(list(texts))
        running.set()
        assert release.wait(10)
        return [t.upper() for t in texts]

    async def main():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(predict, max_batch_size=64, max_wait=0.0, executor=executor)
            await batcher.start()
            first = asyncio.ensure_future(batcher.submit(["a"], 1))
            assert await asyncio.to_thread(running.wait, 10)  # "a" is in the model
            later = [asyncio.ensure_future(batcher.submit([t], 1)) for t in "bcd"]
            await asyncio.sleep(0.05)  # they queue behind the busy model
            release.set()
            answers = await asyncio.gather(first, *later)
            await batcher.stop()
            return answers

    assert asyncio.run(main()) == [["A"], ["B"], ["C"], ["D"]]
    assert calls == [["a"], ["b", "c", "d"]]


def test_micro_batcher_without_wait_takes_requests_one_pass_behind():
    # a request that reaches the queue one event-loop pass after the first (as the
    # callers answered by one batch come back) joins its batch without any wait
    import asyncio

    from skxmc._serve import MicroBatcher

    calls = []

    def predict(texts, k):
        calls.append(list(texts))
        return list(texts)

    async def main():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(predict, max_batch_size=64, max_wait=0.0, executor=executor)
            await batcher.start()
            first = asyncio.ensure_future(batcher.submit(["a"], 1))
            await asyncio.sleep(0)
            second = asyncio.ensure_future(batcher.submit(["b"], 1))
            answers = await asyncio.gather(first, second)
            await batcher.stop()
            return answers

    assert asyncio.run(main()) == [["a"], ["b"]]
    assert calls == [["a", "b"]]


def test_serve_refuses_a_missing_model(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "skxmc", "serve", str(tmp_path / "none"), "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("skxmc serve: error: ") and "none" in proc.stderr


# The try-it page in a real browser: Debian's chromium and its chromedriver (apt), driven
# by selenium without Selenium Manager (which would download a driver: no network here).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="no chromium / chromedriver: apt-get install chromium chromium-driver",
)
def test_try_it_page_in_a_headless_browser(server, model_dir, demo):
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        driver.get(server.url + "/")
        wait = WebDriverWait(driver, 30)
        # the page has read GET /model (it sets k to the model's top_k)
        wait.until(lambda d: "labels" in d.find_element(By.ID, "model").text)
        text = demo.test_texts[1]
        driver.find_element(By.ID, "text").send_keys(text)
        driver.find_element(By.ID, "k").clear()
        driver.find_element(By.ID, "k").send_keys("4")
        driver.find_element(By.ID, "submit").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "td.label"))
        shown = [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "td.label")]
        ((labels, _),) = _expected(model_dir[1], [text], 4)
        assert shown == labels
        assert len(driver.find_elements(By.CSS_SELECTOR, "td.bar > div")) >= len(labels)
        # the model explains itself: the terms behind each label are shown under its bar
        notes = [note.text for note in driver.find_elements(By.CSS_SELECTOR, "div.why")]
        assert notes and all(note.startswith("features: ") for note in notes), notes
        assert driver.find_element(By.ID, "error").text == ""
        # the API page renders from local assets and lists the routes
        driver.get(server.url + "/docs")
        paths = WebDriverWait(driver, 60).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
        )
        assert {"/predict", "/explain", "/health", "/model"} <= {p.text for p in paths}
    finally:
        driver.quit()
