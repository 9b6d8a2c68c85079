"""Throughput through ``skxmc serve`` (issue 51 item 4): concurrent callers posting one
text per request, against the same pipeline predicting the same texts in process.

A TF-IDF (the suites' settings) + XR-Linear pipeline (``n_jobs=1``, ``random_state=seed``)
is fitted on the training texts of ``--dataset`` and saved; ``skxmc serve`` runs on it
with its defaults (one worker, memory-mapped, micro-batches of up to 64 texts, no wait;
``OMP``/``NUMBA_NUM_THREADS=1``), and ``--concurrency`` callers post one text per request
over keep-alive connections. The callers are ``wrk`` (``--client wrk``, the default where
it is installed: C, one thread, the script ``serve_post.lua`` cycling through the first
``--texts`` test texts for ``--seconds`` after a one-second warm-up), or threads of this
process with their own ``http.client`` connection (``--client python``: each text once,
after one warm-up request per connection), which take about a core themselves and starve
the server on a small machine. The client's CPU seconds are measured apart from the
server's (``getrusage`` of the finished ``wrk``; this process's own CPU time for the
Python client). The answers are checked against the in-process ``predict`` of the same
texts (all of them with the Python client; wrk's first ``--texts`` / 4, at least 64): a
fast wrong server does not pass. The same texts are predicted in process by the served model's own
``predict`` (``ServedModel``: loaded as the server loads it, vectorising and the
conversion to Python lists included), in one batch and in batches of 64. The two sides
alternate over ``--rounds`` rounds. Where the time goes: the server's CPU seconds per
text (``/proc``), the in-process CPU per text of each step of the model on batches of
64, and the rest (HTTP, FastAPI, JSON, the micro-batcher) as their difference. The
client runs on the same machine and takes its share of the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.util
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import ROOT, in_child

__all__ = ["SEEDS", "add_arguments", "fit_pipeline", "in_process", "run", "tables"]

SEEDS = (0,)
TOP_K = 10
BATCH = 64  # skxmc serve's default --max-batch-size
OLD_WAIT_MS = 5.0  # skxmc serve's --batch-wait-ms default before batching by passes
ONE_THREAD = {
    v: "1"
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="reuters21578_allcats")
    parser.add_argument("--texts", type=int, default=2000, help="test texts (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="skxmc serve --workers rows"
    )
    parser.add_argument(
        "--client",
        choices=["wrk", "python"],
        default="wrk" if shutil.which("wrk") else "python",
        help="load generator: wrk (the default where installed) or Python threads",
    )
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="wrk's run per server (default 10)"
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        nargs="+",
        default=[0.0],
        help="skxmc serve --batch-wait-ms rows (default 0, the server's default)",
    )
    parser.add_argument(
        "--baseline-checkout",
        help="another checkout whose skxmc serve (1 worker) runs in every round too, "
        "alternating with this one's (its skxmc/ on PYTHONPATH): a before/after row",
    )


def fit_pipeline(dataset: str, quick: bool, work: str, seed: int, n_texts: int) -> dict:
    """TF-IDF (the suites' settings) + XR-Linear fitted on the training texts, saved to
    ``work/model``; the first ``n_texts`` test texts to ``work/texts.json``."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    import skxmc
    from benchmarks import _data
    from skxmc.pipeline import make_pipeline

    d = _data.text_split(dataset, quick)
    pipe = make_pipeline(
        TfidfVectorizer(**_data.TFIDF, dtype=np.float32),
        skxmc.XRLinearClassifier(n_jobs=1, random_state=seed),
    )
    start = time.perf_counter()
    pipe.fit(d["X_train"], d["y_train"])
    fit_s = time.perf_counter() - start
    skxmc.save(pipe, f"{work}/model")
    texts = d["X_test"][:n_texts]
    Path(f"{work}/texts.json").write_text(json.dumps(texts))
    return {"fit_s": fit_s, "n_texts": len(texts)}


def in_process(work: str) -> dict:
    """Texts per second of the served model's own ``predict`` (as the server loads it:
    memory-mapped, warmed up) on the texts in one batch and in batches of 64, and the
    seconds per text of its steps on batches of 64 (CPU time)."""
    from skxmc._serve._model import ServedModel

    texts = json.loads(Path(f"{work}/texts.json").read_text())
    served = ServedModel(f"{work}/model")
    vectorizer, ranker = served.model.steps[0][1], served.model.steps[-1][1]
    out: dict[str, Any] = {}
    for _ in range(2):  # the second pass is the one kept (warm)
        t0 = time.perf_counter()
        rows = served.predict(texts, TOP_K)
        out["batch_all_texts_per_s"] = len(texts) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for lo in range(0, len(texts), BATCH):
            served.predict(texts[lo : lo + BATCH], TOP_K)
        out["batch_64_texts_per_s"] = len(texts) / (time.perf_counter() - t0)
    # what the server must answer, for _check_answers
    expected = [{"labels": labels, "scores": scores} for labels, scores in rows]
    Path(f"{work}/expected.json").write_text(json.dumps(expected))
    steps = {"vectorise": 0.0, "beam search + top-k": 0.0, "to Python lists": 0.0}
    for lo in range(0, len(texts), BATCH):
        chunk = texts[lo : lo + BATCH]
        t0 = time.process_time()
        X = vectorizer.transform(chunk)
        t1 = time.process_time()
        labels, scores = ranker.predict_topk(X, k=TOP_K)
        t2 = time.process_time()
        [(list(a), [float(s) for s in b]) for a, b in zip(labels.tolist(), scores)]
        t3 = time.process_time()
        steps["vectorise"] += t1 - t0
        steps["beam search + top-k"] += t2 - t1
        steps["to Python lists"] += t3 - t2
    out["steps_us_per_text"] = {k: 1e6 * v / len(texts) for k, v in steps.items()}
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` and its children (``--workers``), from ``/proc``."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _request(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> Any:
    payload = None if body is None else json.dumps(body)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data)


def _same(got: dict, want: dict) -> bool:
    """One server answer equals the in-process one (labels exactly, scores to 1e-6)."""
    return (
        got["labels"] == want["labels"]
        and all(
            abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(got["scores"], want["scores"])
        )
        and len(got["scores"]) == len(want["scores"])
    )


def _check_answers(answers: list[tuple[int | None, bytes]], expected: list[dict]) -> None:
    """Every answer is the in-process prediction of its text. ``(i, body)``: the answer
    to text ``i``; ``(None, body)`` (wrk, which cannot tell which request a response
    answers): the answer to one of the texts, each text's answer used once."""
    unmatched: dict[tuple, list[dict]] = {}
    for want in expected:
        unmatched.setdefault(tuple(want["labels"]), []).append(want)
    for i, body in answers:
        (got,) = json.loads(body)["predictions"]
        if i is not None:
            if not _same(got, expected[i]):
                raise RuntimeError(f"text {i}: the server answered {got}, not {expected[i]}")
            continue
        wants = unmatched.get(tuple(got["labels"]), [])
        match = next((w for w in wants if _same(got, w)), None)
        if match is None:
            raise RuntimeError(f"the server answered {got}, no text's prediction")
        wants.remove(match)


def _python_load(port: int, texts: list[str], concurrency: int, measure: Any) -> dict:
    """``concurrency`` threads of this process, each text posted once."""
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=60) for _ in range(concurrency)]
    for c in conns:  # warm-up: every caller's connection, one request each
        _request(c, "POST", "/predict", {"text": texts[0], "k": TOP_K})
    next_text = iter(range(len(texts)))
    lock = threading.Lock()
    errors: list[BaseException] = []
    answers: list[tuple[int | None, bytes]] = []

    def caller(c: http.client.HTTPConnection) -> None:
        while True:
            with lock:
                i = next(next_text, None)
            if i is None:
                return
            try:
                answer = _request(c, "POST", "/predict", {"text": texts[i], "k": TOP_K})
                answers.append((i, json.dumps(answer).encode()))
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=caller, args=(c,)) for c in conns]
    with measure():
        cpu0, t0 = time.process_time(), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, client_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]!r}")
    return {"texts": len(texts), "texts_per_s": len(texts) / wall, "client_cpu_s": client_cpu,
            "answers": answers, "wall_s": wall}  # fmt: skip


def _wrk_load(
    port: int, work: Path, n_texts: int, concurrency: int, seconds: float, measure: Any
) -> dict:
    """``wrk``: one thread, ``concurrency`` connections, cycling through the texts."""
    bodies = work / "bodies.txt"
    if not bodies.exists():
        texts = json.loads((work / "texts.json").read_text())
        bodies.write_text("".join(json.dumps({"text": t, "k": TOP_K}) + "\n" for t in texts))
    sample = min(n_texts, max(64, n_texts // 4))
    env = {**os.environ, "SKXMC_WRK_BODIES": str(bodies), "SKXMC_WRK_SAMPLE": str(sample)}
    env["SKXMC_WRK_ANSWERS"] = str(work / "answers.txt")
    script = Path(__file__).with_name("serve_post.lua")
    url = f"http://127.0.0.1:{port}"

    def wrk(duration: float) -> str:
        (work / "answers.txt").unlink(missing_ok=True)
        cmd = ["wrk", "-t1", f"-c{concurrency}", f"-d{duration:g}s", "--timeout", "60s"]
        done = subprocess.run([*cmd, "-s", str(script), url], capture_output=True, text=True,
                              env=env, check=True)  # fmt: skip
        if "Non-2xx" in done.stdout or "Socket errors" in done.stdout:
            raise RuntimeError(f"wrk saw errors:\n{done.stdout}")
        return done.stdout

    wrk(1)  # warm-up
    with measure():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = wrk(seconds)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # "N requests in 10.00s, ..." and "Requests/sec: ..." of wrk's summary
    n_done = int(out.split(" requests in ", 1)[0].split()[-1])
    rate = float(out.split("Requests/sec:", 1)[1].split()[0])
    if not (work / "answers.txt").exists():
        raise RuntimeError(f"wrk answered {n_done} requests, fewer than {sample}: --seconds")
    answers = []
    for line in (work / "answers.txt").read_bytes().splitlines():
        status, body = line.split(b" ", 1)
        if status != b"200":
            raise RuntimeError(f"status {status.decode()}: {body[:300]!r}")
        answers.append((None, body))
    client_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"texts": n_done, "texts_per_s": rate, "client_cpu_s": client_cpu,
            "answers": answers, "wall_s": n_done / rate}  # fmt: skip


def through_server(
    work: Path,
    concurrency: int,
    workers: int,
    checkout: str | None = None,
    client: str = "python",
    seconds: float = 10.0,
    wait_ms: float = 0.0,
) -> dict:
    """Texts per second of ``skxmc serve`` with ``concurrency`` callers posting one text
    each, the server's and the client's CPU seconds per text."""
    texts = json.loads((work / "texts.json").read_text())
    port = _free_port()
    cmd = [sys.executable, "-m", "skxmc", "serve", str(work / "model"), "--port", str(port)]
    log_path = work / "server.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [*cmd, "--workers", str(workers), "--batch-wait-ms", f"{wait_ms:g}"],
        cwd=checkout or ROOT,  # python -m puts the working folder first on sys.path
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **ONE_THREAD, **({"PYTHONPATH": checkout} if checkout else {})},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                _request(conn, "GET", "/health")
                conn.close()
                break
            except (OSError, RuntimeError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log_path.read_text()[-3000:]) from None
                time.sleep(0.2)

        def model_calls() -> int:  # one worker's count (the one that answers)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                return int(_request(c, "GET", "/health")["model_calls"])
            finally:
                c.close()

        server: dict[str, float] = {}

        @contextlib.contextmanager
        def measure() -> Any:
            """The server's CPU seconds, model calls and requests (its log lines) over
            the load, the requests still in flight at its end included."""
            log.flush()
            logged, calls, cpu = log_path.stat().st_size, model_calls(), _cpu_s(proc.pid)
            yield
            time.sleep(0.5)  # wrk leaves requests in flight: let the server finish them
            server["cpu_s"] = _cpu_s(proc.pid) - cpu
            server["calls"] = model_calls() - calls
            with open(log_path, "rb") as f:
                f.seek(logged)
                server["requests"] = f.read().count(b" POST /predict 200 ")

        if client == "wrk":
            load = _wrk_load(port, work, len(texts), concurrency, seconds, measure)
        else:
            load = _python_load(port, texts, concurrency, measure)
        expected = json.loads((work / "expected.json").read_text())
        _check_answers(load["answers"], expected)
        n_server = server["requests"]
        if n_server < load["texts"]:  # a server whose log line we do not recognise
            raise RuntimeError(
                f"the server logged {n_server} answered POST /predict, the client got "
                f"{load['texts']}:\n{log_path.read_text()[-2000:]}"
            )
        return {
            "texts_per_s": load["texts_per_s"],
            "server_cpu_us_per_text": 1e6 * server["cpu_s"] / n_server,
            "client_cpu_us_per_text": 1e6 * load["client_cpu_s"] / max(load["texts"], 1),
            # texts per model call; with several workers /health counts one worker's
            "mean_batch": n_server / max(server["calls"], 1) if workers == 1 else None,
            "wall_s": load["wall_s"],
            "texts": load["texts"],
            "checked_answers": len(load["answers"]),
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run(args: argparse.Namespace) -> dict:
    skipped: list[str] = []
    if args.quick:
        args.texts, args.rounds, args.seconds = min(args.texts, 200), 1, min(args.seconds, 3)
    runs = _measure(args, skipped)
    return {
        "config": {
            "texts": args.texts,
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "top_k": TOP_K,
            "client": args.client,
            "wrk_seconds": args.seconds if args.client == "wrk" else None,
            "server": "skxmc serve defaults: 1 worker, mmap, --max-batch-size 64, "
            "--batch-wait-ms 0",
            "baseline_checkout": _describe_checkout(args.baseline_checkout),
            # what uvicorn picks by itself: the faster ones when uvicorn[standard] is in
            "uvicorn_http": "httptools" if importlib.util.find_spec("httptools") else "h11",
            "uvicorn_loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        },
        "note": ("Skipped: " + "; ".join(skipped) + ".") if skipped else "",
        "tables": tables(runs),
        "runs": runs,
    }


def _describe_checkout(path: str | None) -> dict | None:
    """The baseline checkout's commit and the files of ``skxmc/_serve`` that differ."""
    if not path:
        return None

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=path, capture_output=True, text=True).stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "changed": git("status", "--porcelain", "--untracked-files=no").splitlines(),
    }


def _measure(args: argparse.Namespace, skipped: list[str]) -> list[dict]:
    from benchmarks import _data

    dataset = args.dataset
    if not _data.available(dataset):
        skipped.append(f"serve: {dataset} (data absent)")
        return []
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        skipped.append("serve (pip install 'skxmc[serve]')")
        return []
    runs = []
    with tempfile.TemporaryDirectory(prefix="skxmc-serve-") as tmp:
        work = Path(tmp)
        seed = args.seeds[0]
        fit = in_child(
            "benchmarks.suites.serve_throughput:fit_pipeline",
            env=ONE_THREAD,
            dataset=dataset,
            quick=args.quick,
            work=tmp,
            seed=seed,
            n_texts=args.texts,
        )
        for r in range(args.rounds):  # alternate the two sides
            local = in_child(
                "benchmarks.suites.serve_throughput:in_process", env=ONE_THREAD, work=tmp
            )
            waits = args.batch_wait_ms
            servers = [("this checkout", None, w, ms) for w in args.workers for ms in waits]
            if args.baseline_checkout:
                servers.insert(0, ("baseline", args.baseline_checkout, 1, OLD_WAIT_MS))
            for server, checkout, workers, wait_ms in servers:
                served = through_server(
                    work, args.concurrency, workers, checkout, args.client, args.seconds, wait_ms
                )
                row = {"kind": "serve", "dataset": dataset, "seed": seed, "round": r}
                row.update(server=server, workers=workers, concurrency=args.concurrency)
                row["batch_wait_ms"] = wait_ms
                row["client"] = args.client
                row["n_texts"] = fit["n_texts"]
                row.update({k: v for k, v in local.items() if k != "steps_us_per_text"})
                steps = local["steps_us_per_text"]
                row.update({f"{k} us/text": v for k, v in steps.items()})
                row.update(served)
                row["rest us/text"] = served["server_cpu_us_per_text"] - sum(steps.values())
                row["cpu ratio"] = sum(steps.values()) / served["server_cpu_us_per_text"]
                row["vs batch_all"] = served["texts_per_s"] / local["batch_all_texts_per_s"]
                row["vs batch_64"] = served["texts_per_s"] / local["batch_64_texts_per_s"]
                rate = served["texts_per_s"]
                print(f"serve round {r + 1}, {server}, {workers} worker(s), wait {wait_ms:g} "
                      f"ms: {rate:.0f} texts/s, {row['vs batch_all']:.2f} of in-process",
                      flush=True)  # fmt: skip
                runs.append(row)
    return runs


SERVE_METRICS = (
    "texts_per_s",
    "batch_all_texts_per_s",
    "batch_64_texts_per_s",
    "vs batch_all",
    "vs batch_64",
    "cpu ratio",
    "mean_batch",
    "server_cpu_us_per_text",
    "client_cpu_us_per_text",
    "vectorise us/text",
    "beam search + top-k us/text",
    "to Python lists us/text",
    "rest us/text",
)


def tables(runs: list[dict]) -> list[dict]:
    from benchmarks._harness import summarise

    if not runs:
        return []
    keys = ["dataset", "client", "concurrency", "server", "workers", "batch_wait_ms"]
    for run in runs:  # results from before the option: the server's default
        run.setdefault("batch_wait_ms", OLD_WAIT_MS)
    rows = summarise(runs, keys, SERVE_METRICS)
    return [
        {
            "id": "serve-throughput",
            "title": "Throughput through skxmc serve",
            "caption": "Texts per second answered by skxmc serve (defaults: one worker, "
            "micro-batches of up to 64 texts; batch_wait_ms: its --batch-wait-ms, 0 by default, "
            "5 before) to concurrent callers posting one text per request, against the "
            "served model's own predict in process on the same "
            "texts (one batch; batches of 64), vectorising included both sides; cpu ratio: "
            "the model's in-process CPU per text over the server's (less sensitive to the "
            "machine's load); baseline: the server of --baseline-checkout; mean ± std over "
            "alternating rounds (n_seeds: rounds). Where the time goes: the server's "
            "CPU microseconds per text (all its processes), the in-process CPU per text of "
            "each step of the model on batches of 64, and the rest of the server's CPU "
            "(HTTP, FastAPI, JSON, micro-batching); client: the load generator (wrk, or "
            "Python threads), its CPU microseconds per text apart from the server's; the "
            "answers are checked against the in-process predict.",
            "columns": [*keys, *SERVE_METRICS, "n_seeds"],
            "rows": rows,
            "digits": {"vs batch_all": 2, "vs batch_64": 2, "cpu ratio": 2, "mean_batch": 1},
        }
    ]
