"""Where XR-Linear's train time goes, skxmc vs libpecos, in CPU seconds on one thread.

``xmc_linear.py`` compares wall times with 2 threads, which on a shared machine swing by
10-80% between repeats. This script removes the two largest sources of that noise so that
differences of a few percent in the per-layer work show: each library trains with **one
thread** in its own child process, and every stage is timed with **process CPU time**
(``time.process_time``: time the process was not running does not count; other jobs'
cache traffic still slows it, so compare runs made at a similar load). Each child
trains ``--fits`` times and reports the median per stage; repeats interleave the libraries.

Stages: skxmc ``fit_layer`` per layer (the solver, node targets and pruning) and ``other``
(validation, PIFA, tree, search structures); libpecos PIFA + tree and its layers, from
its "Training Layer t" INFO lines. It also estimates how well skxmc's work chunks fill two
threads: the leaf layer's chunks (``_make_items`` with ``n_threads=2``) are timed one by
one and scheduled greedily on two workers, as the thread pool hands them out; ``2-thread
makespan over ideal`` is the estimated loss to imbalance.

Usage::

    python benchmarks/xmc_linear_profile.py [--datasets ...] [--repeats 3] [--fits 3]

Run it from the benchmark environment of ``xmc_linear.py`` (libpecos needs numpy<2); the
features are ``xmc_linear.py``'s cached matrices. Writes ``results/<name>.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results
from xmc_linear import _child_env, load_cached, prepare_dataset

LIBS = ("skxmc", "libpecos")


def _skxmc_child(X: Any, Y: Any, fits: int) -> dict[str, Any]:
    import skxmc.linear._solver as solver
    import skxmc.linear._xrlinear as xr
    from skxmc import XRLinearClassifier

    layer_times: list[float] = []
    fit_layer = xr.fit_layer

    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        out = fit_layer(*args, **kwargs)
        layer_times.append(time.process_time() - t)
        leaf_args[:] = [args, kwargs]
        return out

    leaf_args: list[Any] = []
    xr.fit_layer = timed
    XRLinearClassifier(n_jobs=1).fit(X, Y)  # numba's start-up outside the timings
    runs = []
    for _ in range(fits):
        layer_times.clear()
        t = time.process_time()
        XRLinearClassifier(n_jobs=1).fit(X, Y)
        total = time.process_time() - t
        runs.append({"total": total, "layers": list(layer_times)})
    xr.fit_layer = fit_layer
    # leaf layer: time the 2-thread chunks one by one, schedule them on two workers
    (Xl, Yl, groups), kwargs = leaf_args
    chunk_times: list[float] = []
    fit_items = solver._fit_items

    def timed_items(*args: Any) -> Any:
        t = time.process_time()
        out = fit_items(*args)
        chunk_times.append(time.process_time() - t)
        return out

    class _Sequential:
        def __init__(self, max_workers: int) -> None:
            pass

        def __enter__(self) -> _Sequential:
            return self

        def __exit__(self, *exc: Any) -> None:
            pass

        def map(self, f: Any, items: Any) -> list[Any]:
            return [f(x) for x in items]

    pool = solver.ThreadPoolExecutor
    solver._fit_items, solver.ThreadPoolExecutor = timed_items, _Sequential
    try:
        solver.fit_layer(Xl, Yl, groups, **{**kwargs, "n_jobs": 2})
    finally:
        solver._fit_items, solver.ThreadPoolExecutor = fit_items, pool
    workers = [0.0, 0.0]
    for t in chunk_times:  # the pool hands the next chunk to the first free thread
        workers[int(np.argmin(workers))] += t
    ideal = sum(chunk_times) / 2
    return {
        "total": float(np.median([r["total"] for r in runs])),
        "layers": [float(np.median(v)) for v in zip(*(r["layers"] for r in runs), strict=True)],
        "runs": runs,
        "leaf_chunks": len(chunk_times),
        "makespan_over_ideal": max(workers) / ideal - 1 if ideal > 0 else 0.0,
    }


def _pecos_child(X: Any, Y: Any, fits: int) -> dict[str, Any]:
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    records: list[tuple[float, str]] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append((time.process_time(), record.getMessage()))

    log = logging.getLogger("pecos")
    log.setLevel(logging.INFO)
    log.addHandler(_Handler())

    def train() -> tuple[float, float, list[float]]:
        t0 = time.process_time()
        emb = LabelEmbeddingFactory.create(Y, X, method="pifa", threads=1)
        chain = Indexer.gen(
            emb, indexer_type="hierarchicalkmeans", nr_splits=16, max_leaf_size=100, threads=1
        )
        t1 = time.process_time()
        n0 = len(records)
        XLinearModel.train(X, Y, C=chain, threads=1)
        t2 = time.process_time()
        starts = [t for t, m in records[n0:] if m.startswith("Training Layer")] + [t2]
        return t2 - t0, t1 - t0, [b - a for a, b in itertools.pairwise(starts)]

    train()
    runs = [train() for _ in range(fits)]
    return {
        "total": float(np.median([r[0] for r in runs])),
        "pifa_tree": float(np.median([r[1] for r in runs])),
        "layers": [float(np.median(v)) for v in zip(*(r[2] for r in runs), strict=True)],
        "runs": runs,
    }


def child_main(args: argparse.Namespace) -> int:
    X, Y, _, _ = load_cached(Path(args.data), ("X_train", "Y_train", "X_test", "Y_test"))
    out = (_skxmc_child if args.child == "skxmc" else _pecos_child)(X, Y, args.fits)
    print("RESULT " + json.dumps(out))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["reuters21578_allcats", "delicious_bow"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fits", type=int, default=3)
    parser.add_argument("--name", default="xmc_linear_profile")
    parser.add_argument("--child", choices=LIBS, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_main(args)
    load_start = os.getloadavg()[0]
    rows, records = [], []
    for name in args.datasets:
        path, _ = prepare_dataset(name, "l2")
        per_lib: dict[str, list[dict[str, Any]]] = {lib: [] for lib in LIBS}
        for _ in range(args.repeats):
            for lib in LIBS:
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        lib,
                        "--data",
                        str(path),
                        "--fits",
                        str(args.fits),
                    ],
                    env=_child_env(),
                    capture_output=True,
                    text=True,
                    timeout=3600,
                )
                lines = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")]
                if proc.returncode != 0 or not lines:
                    raise RuntimeError(f"{lib} on {name} failed:\n{proc.stderr[-3000:]}")
                per_lib[lib].append(json.loads(lines[-1][len("RESULT ") :]))
        for lib, results in per_lib.items():
            records.append({"dataset": name, "library": lib, "repeats": results})
            layers = [
                float(np.median(v)) for v in zip(*(r["layers"] for r in results), strict=True)
            ]
            total = float(np.median([r["total"] for r in results]))
            row = {
                "dataset": name,
                "library": lib,
                "train CPU s": total,
                "upper layers CPU s": sum(layers[:-1]),
                "leaf layer CPU s": layers[-1],
                "rest CPU s": total - sum(layers),
            }
            if lib == "skxmc":
                row["leaf chunks"] = results[0]["leaf_chunks"]
                row["2-thread makespan over ideal"] = (
                    f"{100 * float(np.median([r['makespan_over_ideal'] for r in results])):.1f}%"
                )
            rows.append(row)
        ratios = [
            s["layers"][-1] / p["layers"][-1]
            for s, p in zip(per_lib["skxmc"], per_lib["libpecos"], strict=True)
        ]
        rows.append(
            {
                "dataset": name,
                "library": "skxmc / libpecos",
                "leaf layer CPU s": f"{np.median(ratios):.2f}x",
                "train CPU s": "{:.2f}x".format(
                    np.median(
                        [
                            s["total"] / p["total"]
                            for s, p in zip(per_lib["skxmc"], per_lib["libpecos"], strict=True)
                        ]
                    )
                ),
            }
        )
    columns = [
        "dataset",
        "library",
        "train CPU s",
        "upper layers CPU s",
        "leaf layer CPU s",
        "rest CPU s",
        "leaf chunks",
        "2-thread makespan over ideal",
    ]
    load_end = os.getloadavg()[0]
    command = "python benchmarks/xmc_linear_profile.py " + " ".join(sys.argv[1:])
    table = (
        "# XR-Linear train time in CPU seconds, one thread (benchmarks/xmc_linear_profile.py)"
        f"\n\nCommand: `{command.strip()}`  \n"
        f"Median over {args.repeats} repeats (libraries interleaved) of each child's median "
        f"over {args.fits} fits after one untimed fit; process CPU time, 1 thread. Load "
        f"average {load_start:.2f} at start, {load_end:.2f} at end. 'rest' is train minus "
        "the layers: validation, PIFA, tree (and for skxmc the search structures); "
        "libpecos's 'rest' is its PIFA + tree plus set-up. Ratio rows: medians of "
        "per-repeat ratios.\n\n" + markdown_table(rows, columns)
    )
    write_results(
        args.name,
        {"command": command, "load": [load_start, load_end], "rows": rows, "records": records},
        table,
    )
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
