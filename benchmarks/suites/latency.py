"""Latency of one text at a time, skxmc's XR-Linear beside libpecos's (issue 51 item 4).

In process, one thread (``OMP``/``MKL``/``OPENBLAS``/``NUMBA_NUM_THREADS=1``, the models'
``n_jobs=1`` / ``threads=1``), as a user comparing the two would: both libraries train
XR-Linear on the same TF-IDF features (``benchmarks/_data``; the ``linear`` suite's
settings: skxmc's defaults with ``random_state=seed``, libpecos's PIFA + hierarchical
k-means tree with its ``XLinearModel.train`` defaults), save it predict-only
(``skxmc.save(..., predict_only=True)``, ``XLinearModel.save``) and load it back
(``skxmc.load``, ``XLinearModel.load(..., is_predict_only=True)``). Then each timing
process warms up on 200 test rows and times single-row predictions of top 10, beam 10,
on its share of the first ``--texts`` test rows (``time.perf_counter_ns`` around each
call; the rows are sliced beforehand), and the same rows in one batched call (per-row
cost). libpecos needs numpy<2, so it runs in its own interpreter (``--pecos-python`` or
``$SKXMC_PECOS_PYTHON``); the machine is shared, so the processes of the two libraries
alternate over ``--rounds`` rounds of ``texts / rounds`` rows each, and each round gives
its own p50 ratio. ``skxmc (full path)`` is skxmc with its few-row path switched off
(``skxmc.linear._fast_predict.FAST_MAX_ROWS = 0``): the path that every call took before
it, which batches still take. The breakdown table times the stages of both paths on the
same rows (private methods: it names where the time goes).

Throughput through ``skxmc serve`` is the ``serve-throughput`` suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import in_child, machine

SEEDS = (0,)
DATASETS = ("tibkat_gnd_en", "reuters21578_allcats")
QUICK_DATASETS = ("reuters21578_allcats",)
TOP_K = 10
BEAM = 10
WARMUP = 200
ONE_THREAD = {
    v: "1"
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
}
LIBRARIES = ("skxmc", "skxmc (full path)", "libpecos")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", nargs="+", help=f"default: {' '.join(DATASETS)}")
    parser.add_argument("--texts", type=int, default=2000, help="test texts timed (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--pecos-python", help="libpecos's interpreter ($SKXMC_PECOS_PYTHON)")


# ----------------------------------------------------------------------------- children


def _load_npz(path: str) -> Any:
    import scipy.sparse as sp

    return sp.load_npz(path).tocsr()


def train(library: str, work: str, seed: int) -> dict:
    """Fit on ``work``'s training features and save the predict-only model there."""
    X_tr, Y_tr = _load_npz(f"{work}/X_train.npz"), _load_npz(f"{work}/Y_train.npz")
    start = time.perf_counter()
    if library == "libpecos":
        from benchmarks.suites.linear import train_pecos

        train_pecos(X_tr, Y_tr, seed=seed, threads=1).save(f"{work}/libpecos")
    else:
        import skxmc

        clf = skxmc.XRLinearClassifier(n_jobs=1, random_state=seed).fit(X_tr, Y_tr)
        skxmc.save(clf, f"{work}/skxmc", predict_only=True)
    return {"fit_s": time.perf_counter() - start}


def _predictor(library: str, work: str) -> tuple[Any, Any]:
    """``(one(row), batch(rows))`` of the saved model, as a user calls it."""
    if library == "libpecos":
        from pecos.xmc.xlinear.model import XLinearModel

        model = XLinearModel.load(f"{work}/libpecos", is_predict_only=True)

        def one(row: Any) -> Any:
            return model.predict(row, beam_size=BEAM, only_topk=TOP_K, threads=1)

        return one, one
    import skxmc

    clf = skxmc.load(f"{work}/skxmc")
    if library == "skxmc (full path)":
        from skxmc.linear import _fast_predict

        _fast_predict.FAST_MAX_ROWS = 0

    def one(row: Any) -> Any:
        return clf.predict_topk(row, k=TOP_K)

    return one, one


def time_rows(library: str, work: str, start: int, count: int) -> dict:
    """Per-call nanoseconds of single-row predictions of test rows ``start:start +
    count`` (after a warm-up on the rows after the timed ones), and the per-row seconds of
    one batched call on them (median of 3)."""
    X = _load_npz(f"{work}/X_test.npz")
    one, batch = _predictor(library, work)
    n_timed = int(json.loads(Path(f"{work}/info.json").read_text())["n_timed"])
    warm = [X[i] for i in range(n_timed, min(n_timed + WARMUP, X.shape[0]))] or [X[0]]
    for row in warm:
        one(row)
    rows = [X[i] for i in range(start, start + count)]
    ns = []
    for row in rows:
        t0 = time.perf_counter_ns()
        one(row)
        ns.append(time.perf_counter_ns() - t0)
    block = X[start : start + count]
    batched = []
    for _ in range(3):
        t0 = time.perf_counter()
        batch(block)
        batched.append((time.perf_counter() - t0) / count)
    return {"ns": ns, "batched_s_per_row": statistics.median(batched)}


def breakdown(work: str, count: int) -> dict:
    """Median microseconds of each stage of skxmc's full path and few-row path on single
    rows (the first ``count`` test rows, after a warm-up)."""
    import numpy as np

    import skxmc
    from skxmc._ranking import topk_from_sparse
    from skxmc.labels import LabelSpace
    from skxmc.linear import _fast_predict as fp

    clf = skxmc.load(f"{work}/skxmc")
    X = _load_npz(f"{work}/X_test.npz")
    rows = [X[i] for i in range(min(count, X.shape[0]))]
    for row in rows[:WARMUP]:
        clf.predict_topk(row, k=TOP_K)
    stages: dict[str, list[float]] = {}

    def add(path: str, stamps: list[int]) -> None:
        names = FULL_STAGES if path == "full" else FAST_STAGES
        for name, t0, t1 in zip(names, stamps, stamps[1:]):
            stages.setdefault(f"{path}|{name}", []).append((t1 - t0) / 1e3)
        stages.setdefault(f"{path}|total", []).append((stamps[-1] - stamps[0]) / 1e3)

    for row in rows:
        t = [time.perf_counter_ns()]
        Xv = clf._validate_X(row)
        t.append(time.perf_counter_ns())
        k = clf._resolve_k(TOP_K, clf._label_columns(None))
        cache = clf._search_cache
        t.append(time.perf_counter_ns())
        scores = clf._search(Xv, top_k=k, cache=cache)
        t.append(time.perf_counter_ns())
        idx, val = topk_from_sparse(scores, k)
        t.append(time.perf_counter_ns())
        LabelSpace(cache.classes).labels_of(idx), val.astype(np.float32)
        t.append(time.perf_counter_ns())
        add("full", t)
        t = [time.perf_counter_ns()]
        arrays = fp.fast_rows(clf, row)
        t.append(time.perf_counter_ns())
        k = clf._resolve_k(TOP_K)
        t.append(time.perf_counter_ns())
        path = fp.search_few(
            arrays,
            row.shape[1],
            cache,
            bias=clf.bias,
            beam_size=clf.beam_size,
            top_k=k,
            post_processor=clf.post_processor,
        )
        t.append(time.perf_counter_ns())
        fp.topk_labels(path, k, cache)
        t.append(time.perf_counter_ns())
        add("few-row", t)
    return {k: float(np.median(v)) for k, v in stages.items()}


FULL_STAGES = ("validate X (check_array)", "k, labels", "beam search", "top-k", "label mapping")
FAST_STAGES = ("validate X (fast_rows)", "k", "beam search", "top-k + label mapping")


# ----------------------------------------------------------------------------- latency


def _prepare(dataset: str, quick: bool, work: Path, n_texts: int) -> int:
    import scipy.sparse as sp

    from benchmarks import _data

    X_tr, Y_tr, X_te, _ = _data.xmc_features(dataset, quick)
    for name, M in (("X_train", X_tr), ("Y_train", Y_tr), ("X_test", X_te)):
        sp.save_npz(work / f"{name}.npz", M, compressed=False)
    n_timed = min(n_texts, X_te.shape[0] - 1)
    (work / "info.json").write_text(json.dumps({"n_timed": n_timed}))
    return n_timed


def _percentiles(ns: list[int]) -> dict[str, float]:
    import numpy as np

    ms = np.asarray(ns, dtype=np.float64) / 1e6
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
    }


def _latency(args: argparse.Namespace, python: str | None, skipped: list[str]) -> list[dict]:
    from benchmarks import _data

    datasets = args.datasets or (QUICK_DATASETS if args.quick else DATASETS)
    libraries = [lib for lib in LIBRARIES if lib != "libpecos" or python]
    runs = []
    for dataset in datasets:
        if not _data.available(dataset):
            skipped.append(f"{dataset} (data absent)")
            continue
        for seed in args.seeds:
            with tempfile.TemporaryDirectory(prefix="skxmc-latency-") as tmp:
                work = Path(tmp)
                n_timed = _prepare(dataset, args.quick, work, args.texts)
                fits = {}
                for lib in ("skxmc", "libpecos") if python else ("skxmc",):
                    fits[lib] = in_child(
                        "benchmarks.suites.latency:train",
                        python=python if lib == "libpecos" else None,
                        env=ONE_THREAD,
                        library=lib,
                        work=str(work),
                        seed=seed,
                    )["fit_s"]
                    print(f"{dataset} {lib}: fitted in {fits[lib]:.1f} s", flush=True)
                runs += _rounds(args, dataset, seed, work, n_timed, libraries, python, fits)
                info = in_child(
                    "benchmarks.suites.latency:breakdown",
                    env=ONE_THREAD,
                    work=str(work),
                    count=n_timed,
                )
                info.pop("peak_rss_mb", None)
                info.pop("process_wall_s", None)
                runs.append({"kind": "breakdown", "dataset": dataset, "seed": seed, **info})
    return runs


def _rounds(args, dataset, seed, work, n_timed, libraries, python, fits) -> list[dict]:
    per_round = max(1, n_timed // args.rounds)
    records: dict[str, dict[str, Any]] = {
        lib: {"ns": [], "batched": [], "round_p50_ms": []} for lib in libraries
    }
    loads = []
    for r in range(args.rounds):
        order = libraries if r % 2 == 0 else libraries[::-1]
        loads.append(round(os.getloadavg()[0], 2))
        for lib in order:
            out = in_child(
                "benchmarks.suites.latency:time_rows",
                python=python if lib == "libpecos" else None,
                env=ONE_THREAD,
                library=lib,
                work=str(work),
                start=r * per_round,
                count=per_round,
            )
            records[lib]["ns"] += out["ns"]
            records[lib]["batched"].append(out["batched_s_per_row"])
            records[lib]["round_p50_ms"].append(_percentiles(out["ns"])["p50_ms"])
        print(f"{dataset} round {r + 1}/{args.rounds} done (load {loads[-1]})", flush=True)
    runs = []
    for lib, rec in records.items():
        row = {"kind": "latency", "dataset": dataset, "library": lib, "seed": seed}
        row.update(_percentiles(rec["ns"]))
        row["batched_ms_per_text"] = 1e3 * statistics.fmean(rec["batched"])
        row["round_p50_ms"] = rec["round_p50_ms"]
        row["n_calls"] = len(rec["ns"])
        row["load_avg_1m"] = loads
        row["fit_s"] = fits.get("skxmc" if lib.startswith("skxmc") else lib)
        runs.append(row)
    return runs


def run(args: argparse.Namespace) -> dict:
    from benchmarks.suites._xtransformer import pecos_python

    python, skipped = pecos_python(args.pecos_python), []
    if python is None:
        skipped.append("libpecos (no interpreter: --pecos-python or SKXMC_PECOS_PYTHON)")
    if args.quick:
        args.texts, args.rounds = min(args.texts, 100), min(args.rounds, 2)
    runs = _latency(args, python, skipped)
    return {
        "config": {
            "texts": args.texts,
            "rounds": args.rounds,
            "top_k": TOP_K,
            "beam_size": BEAM,
            "warmup": WARMUP,
            "threads": 1,
            "python": sys.version.split()[0],
            "load_avg_end": machine().get("load_avg_1m"),
        },
        "note": ("Skipped: " + "; ".join(skipped) + ".") if skipped else "",
        "tables": tables(runs),
        "runs": runs,
    }


def tables(runs: list[dict]) -> list[dict]:
    """Latency per library, skxmc against libpecos, and the stage breakdown."""
    lat = [r for r in runs if r.get("kind") == "latency"]
    out = []
    if lat:
        out.append(_latency_table(lat))
        ratio = _ratio_table(lat)
        if ratio["rows"]:
            out.append(ratio)
    brk = [r for r in runs if r.get("kind") == "breakdown"]
    if brk:
        out.append(_breakdown_table(brk))
    return out


def _latency_table(lat: list[dict]) -> dict:
    return {
        "id": "latency",
        "title": "Single-text latency, one thread",
        "caption": "Milliseconds per predict call of one TF-IDF row (top 10, beam 10), over "
        "every timed call of the alternating rounds; batched: the same rows in one call, "
        "per row. skxmc (full path): the path every call took before the few-row path.",
        "columns": [
            "dataset",
            "library",
            "p50_ms",
            "p99_ms",
            "mean_ms",
            "batched_ms_per_text",
            "n_calls",
        ],
        "rows": lat,
        "digits": {"p50_ms": 3, "p99_ms": 3, "mean_ms": 3, "batched_ms_per_text": 3},
    }


def _ratio_table(lat: list[dict]) -> dict:
    by = {(r["dataset"], r["library"]): r for r in lat}
    rows = []
    for (dataset, lib), ours in by.items():
        theirs = by.get((dataset, "libpecos"))
        if not lib.startswith("skxmc") or theirs is None:
            continue
        per_round = [a / b for a, b in zip(ours["round_p50_ms"], theirs["round_p50_ms"])]
        row = {"dataset": dataset, "library": lib}
        for m in ("p50_ms", "p99_ms", "mean_ms", "batched_ms_per_text"):
            row[f"{m.removesuffix('_ms').removesuffix('_ms_per_text')} ratio"] = ours[m] / theirs[m]
        row["round p50 ratios"] = " ".join(f"{v:.2f}" for v in per_round)
        rows.append(row)
    cols = ["p50 ratio", "p99 ratio", "mean ratio", "batched ratio"]
    return {
        "id": "vs-libpecos",
        "title": "skxmc against libpecos, single text",
        "caption": "skxmc's time divided by libpecos's (at most 1: skxmc as fast or faster), "
        "over all calls, and the p50 ratio of each round (the two libraries' processes "
        "alternate on a shared machine).",
        "columns": ["dataset", "library", *cols, "round p50 ratios"],
        "rows": rows,
        "digits": {c: 2 for c in cols},
    }


def _breakdown_table(brk: list[dict]) -> dict:
    rows = []
    for r in brk:
        for path, names in (("full", FULL_STAGES), ("few-row", FAST_STAGES)):
            for name in (*names, "total"):
                key = f"{path}|{name}"
                if key in r:
                    rows.append(
                        {"dataset": r["dataset"], "path": path, "stage": name, "median_us": r[key]}
                    )
    return {
        "id": "breakdown",
        "title": "Where a single text's time goes",
        "caption": "Median microseconds of each stage of skxmc's predict_topk on one row, the "
        "full path (every call before, batches now) and the few-row path, on the timed rows; "
        "the total is the median of the sums.",
        "columns": ["dataset", "path", "stage", "median_us"],
        "rows": rows,
        "digits": {"median_us": 1},
    }
