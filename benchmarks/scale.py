"""Scale: XRLinearClassifier vs libpecos XR-Linear on generated data, 10k to 1M labels.

Issue 18, point 2. For every size ``L`` in ``--sizes`` (labels), one instance of
:func:`skxmc.datasets.make_xmc_classification` with rows growing with the labels:
``n_train = --rows-per-label * L`` training rows, ``n_test = min(n_train // 5,
--max-test)`` test rows (the generator's rows are i.i.d., so the last rows are the test
set), ``--n-features`` features, ``--length`` word tokens and ``--labels-per-sample``
labels per row (the generator's defaults, 50 and 3, give about 44 non-zeros and 2.7 labels
per row; ``--length 57 --labels-per-sample 6.3`` give about 50 and 5, the issue's
setting), the generator's defaults otherwise (label exponent 1, topics of 25 labels),
``random_state=--seed``. The same matrices go to both libraries in the same run.

The libraries run exactly as in ``benchmarks/xmc_linear.py`` (this script imports its
child-process runner, ``run_child``, and its library settings): each in its own child
process with 2 threads, skxmc after an untimed numba warm-up child; peak RSS is the
child's own high-water mark (interpreter, imports and its copy of the data included).
The columns are those the runner reports (see xmc_linear.py for the exact protocol of
``train s`` / ``predict s`` and, where reported, the fresh-process times). P@1 / P@5
(x100) are computed here with ``skxmc.metrics`` from the children's top-10 predictions;
``most frequent labels`` is the reference a model that ignores the features gets
(the train set's most frequent labels ranked first for every test row).

libpecos needs numpy<2, so run this from the benchmark environment, which has libpecos
and skxmc (``pip install -e . --no-deps``) installed::

    python benchmarks/scale.py --sizes 10000 100000 1000000   (benchmark environment)
    # the issue's setting (1 row per label, about 50 non-zeros and 5 labels per row):
    python benchmarks/scale.py --sizes 10000 100000 --rows-per-label 1 --length 57 \
        --labels-per-sample 6.3 --name scale_issue
    # the generator alone (time and memory of make_xmc_classification at these sizes):
    python benchmarks/scale.py --generate-only --sizes 10000 100000 1000000 --name scale_generate

Writes ``benchmarks/results/<--name>.{json,md}`` after every size (an interrupted run keeps
what it measured) and the plot ``docs/_static/scale.png`` (time and peak memory against the
number of labels; ``--with-generator NAME`` adds the generator's own curve from a
``--generate-only`` result). ``--replot`` only redraws the plot from the JSON (with any environment
that has matplotlib, e.g. the project's ``.venv``, when the benchmark environment has not).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.sparse as sp

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(REPO_ROOT))

import xmc_linear  # noqa: E402  (the child-process runner and library settings)
from _common import RESULTS, markdown_table, peak_rss_mb, write_results  # noqa: E402

PLOT = REPO_ROOT / "docs" / "_static" / "scale.png"
LIBS = ("skxmc", "libpecos")


def _command() -> str:
    return " ".join(["python", "benchmarks/scale.py", *sys.argv[1:]])


def _frequency_reference(Y_tr: sp.csr_matrix, n_test: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-10 (indices, scores) that rank the train set's most frequent labels first."""
    counts = np.asarray(Y_tr.sum(axis=0)).ravel()
    top = np.argsort(-counts, kind="stable")[: xmc_linear.TOP_K]
    idx = np.broadcast_to(top, (n_test, top.size)).astype(np.int64)
    sc = np.broadcast_to(counts[top].astype(np.float32), idx.shape).copy()
    return idx, sc


def _label_stats(Y_tr: sp.csr_matrix) -> dict[str, Any]:
    counts = np.bincount(Y_tr.indices, minlength=Y_tr.shape[1])
    seen = counts[counts > 0]
    return {
        "labels_with_train_positives": int(seen.size),
        "share_of_those_with_1_or_2": round(float((seen <= 2).mean()), 3),
        "max_label_frequency": int(counts.max()),
        "labels_per_train_row": round(Y_tr.nnz / Y_tr.shape[0], 2),
    }


def generate(n_labels: int, args: argparse.Namespace) -> tuple[Any, Any, int, int]:
    """The generated problem of one size (shared with scale_dask.py): ``(X, Y, n_train,
    n_test)``, the last ``n_test`` rows being the test set."""
    from skxmc.datasets import make_xmc_classification

    n_train = args.rows_per_label * n_labels
    n_test = min(n_train // 5, args.max_test)
    X, Y = make_xmc_classification(
        n_train + n_test,
        args.n_features,
        n_labels,
        length=args.length,
        labels_per_sample=args.labels_per_sample,
        random_state=args.seed,
    )
    return X, Y, n_train, n_test


def run_size(n_labels: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Generates one instance, runs the libraries on it, returns its record."""
    load_start = os.getloadavg()
    before = peak_rss_mb()
    start = time.perf_counter()
    X, Y, n_train, n_test = generate(n_labels, args)
    gen_s = time.perf_counter() - start
    growth = peak_rss_mb() - before
    output_mb = sum(a.nbytes for M in (X, Y) for a in (M.data, M.indices, M.indptr)) / 2**20
    Y_tr, Y_te = Y[:n_train], Y[n_train:]
    record: dict[str, Any] = {
        "n_labels": n_labels,
        "n_train": n_train,
        "n_test": n_test,
        "n_features": args.n_features,
        "nnz_per_row": round(X.nnz / X.shape[0], 1),
        "generate_s": round(gen_s, 2),
        "generate_peak_rss_growth_mb": round(growth, 1),
        "output_mb": round(output_mb, 1),
        **_label_stats(Y_tr),
        "load_average_start": load_start,
        "libraries": {},
    }
    print(
        f"\n== L={n_labels}: {n_train} train / {n_test} test rows, {args.n_features} "
        f"features, {record['nnz_per_row']} nnz/row; generated in {gen_s:.1f} s; "
        f"load average {record['load_average_start'][0]:.2f}",
        flush=True,
    )
    if args.generate_only:
        record["load_average_end"] = os.getloadavg()
        return record
    X_tr, X_te = X[:n_train], X[n_train:]
    del X, Y
    for M in (X_tr, X_te, Y_tr, Y_te):
        M.has_sorted_indices = True
    data_path = workdir / f"scale_{n_labels}.npz"
    arrays: dict[str, np.ndarray] = {}
    for name, M in (("X_train", X_tr), ("Y_train", Y_tr), ("X_test", X_te), ("Y_test", Y_te)):
        xmc_linear._save_csr(arrays, name, M)
    np.savez(data_path, **arrays)
    del arrays, X_tr, X_te

    idx, sc = _frequency_reference(Y_tr, n_test)
    ref = xmc_linear._evaluate(Y_te, Y_tr, idx, sc)
    record["most_frequent_labels"] = {k: round(v, 2) for k, v in ref.items()}
    for lib in args.libraries:
        if lib.startswith("skxmc"):
            warm = xmc_linear.run_child("skxmc-warmup", None, None, args.timeout)
            if warm.get("status") != "ok":
                print(f"  skxmc warm-up: {warm.get('status')}: {warm.get('error')}", flush=True)
        load = os.getloadavg()
        res = xmc_linear.run_child(lib, data_path, None, args.timeout)
        res["load_average_start"] = load
        res["load_average_end"] = os.getloadavg()
        if res.get("status") == "ok":
            metrics = xmc_linear._evaluate(Y_te, Y_tr, res.pop("_indices"), res.pop("_scores"))
            res["metrics"] = {k: round(v, 2) for k, v in metrics.items()}
            print(
                f"  {lib}: P@1 {metrics['precision@1']:.2f}  P@5 {metrics['precision@5']:.2f}  "
                f"train {res['train_s']:.1f} s  predict {res['predict_s']:.1f} s  "
                f"peak RSS {res['peak_rss_mb']:.0f} MB",
                flush=True,
            )
        else:
            res.pop("_indices", None)
            res.pop("_scores", None)
            print(f"  {lib}: {res.get('status')}: {res.get('error')}", flush=True)
        record["libraries"][lib] = res
    data_path.unlink()
    record["load_average_end"] = os.getloadavg()
    return record


def _table_rows(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def f(v: Any, digits: int = 2) -> str:
        return "" if v is None else f"{v:.{digits}f}"

    rows = []
    for s in sizes:
        common = {"labels": s["n_labels"], "train rows": s["n_train"], "test rows": s["n_test"]}
        if "most_frequent_labels" not in s:  # --generate-only
            continue
        ref = s["most_frequent_labels"]
        rows.append(
            {
                **common,
                "library": "most frequent labels",
                "P@1": f(ref["precision@1"]),
                "P@5": f(ref["precision@5"]),
            }
        )
        for lib, r in s["libraries"].items():
            row = {**common, "library": xmc_linear.LIBRARIES.get(lib, lib)}
            if r.get("status") != "ok":
                row["P@1"] = str(r.get("status", "?")).upper()
                rows.append(row)
                continue
            row.update(
                {
                    "P@1": f(r["metrics"]["precision@1"]),
                    "P@5": f(r["metrics"]["precision@5"]),
                    "train s": f(r["train_s"], 1),
                    "train s fresh process": f(r.get("train_cold_s"), 1),
                    "predict s": f(r["predict_s"], 1),
                    "peak RSS MB": f(r["peak_rss_mb"], 0),
                    "load avg": f"{r['load_average_start'][0]:.1f}",
                }
            )
            rows.append(row)
    return rows


COLUMNS = [
    "labels",
    "train rows",
    "test rows",
    "library",
    "P@1",
    "P@5",
    "train s",
    "train s fresh process",
    "predict s",
    "peak RSS MB",
    "load avg",
]


def write(payload: dict[str, Any], name: str, final: bool) -> Path:
    sizes = payload["sizes"]
    head = "" if final else "**Partial results (the run did not finish).**\n\n"
    head += f"Command: `{payload['command']}`  \n"
    head += (
        f"Data: `make_xmc_classification(n_train + n_test, {payload['n_features']}, L, "
        f"length={payload.get('length', 50.0)}, "
        f"labels_per_sample={payload.get('labels_per_sample', 3.0)}, "
        f"random_state={payload['seed']})`, defaults otherwise; n_train = "
        f"{payload['rows_per_label']} x L, n_test = min(n_train // 5, {payload['max_test']}). "
    )
    if not payload.get("generate_only"):
        head += (
            f"{payload['threads']} threads per library, each in its own child process "
            "(protocol of benchmarks/xmc_linear.py). "
        )
    head += (
        f"Timings are indicative: the machine has {payload['cpus']} cores and other jobs "
        "ran concurrently (load averages in the tables). `generate s`: one "
        "`make_xmc_classification` call for all n_train + n_test rows (single-threaded "
        "numpy); `generator peak RSS growth`: how much the call raised the process's "
        "memory high-water mark (VmHWM), against the returned matrices' size.\n\n"
    )
    stats = [
        {
            "labels": s["n_labels"],
            "nnz/row": s["nnz_per_row"],
            "labels/row": s["labels_per_train_row"],
            "labels in train": s["labels_with_train_positives"],
            "of those with 1-2 positives": s["share_of_those_with_1_or_2"],
            "top label's positives": s["max_label_frequency"],
            "rows generated": s["n_train"] + s["n_test"],
            "generate s": s["generate_s"],
            "generator peak RSS growth MB": s["generate_peak_rss_growth_mb"],
            "returned matrices MB": s["output_mb"],
            "load avg": f"{s['load_average_start'][0]:.1f}",
        }
        for s in sizes
    ]
    stats_table = markdown_table(stats, list(stats[0]) if stats else [])
    if payload.get("generate_only"):
        text = head + "Generator only (no libraries run).\n\n" + stats_table
    else:
        table = markdown_table(_table_rows(sizes), COLUMNS)
        text = head + table + "\n\nGenerated data (labels: train split):\n\n" + stats_table
    payload["complete"] = final
    return write_results(name, payload, text)


def plot(payload: dict[str, Any], path: Path, generator: dict[str, Any] | None = None) -> None:
    """Time and peak memory against L: the libraries of ``payload`` and, if given, the
    generator alone (a ``--generate-only`` result)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    styles = {"skxmc": ("C0", "o"), "libpecos": ("C1", "s")}
    for lib in LIBS:
        pts = [
            (s["n_labels"], s["libraries"][lib])
            for s in payload["sizes"]
            if s["libraries"].get(lib, {}).get("status") == "ok"
        ]
        if not pts:
            continue
        color, marker = styles[lib]
        name = xmc_linear.LIBRARIES[lib]
        L = [p[0] for p in pts]
        train = [p[1]["train_s"] for p in pts]
        predict = [p[1]["predict_s"] for p in pts]
        peak = [p[1]["peak_rss_mb"] / 1024 for p in pts]
        axes[0].plot(L, train, "-" + marker, color=color, label=f"{name}: train")
        axes[0].plot(L, predict, "--" + marker, color=color, mfc="none", label=f"{name}: predict")
        axes[1].plot(L, peak, "-" + marker, color=color, label=name)
    if generator is not None:
        L = [s["n_labels"] for s in generator["sizes"]]
        gen_s = [s["generate_s"] for s in generator["sizes"]]
        gen_gb = [s["generate_peak_rss_growth_mb"] / 1024 for s in generator["sizes"]]
        label = "make_xmc_classification (all rows)"
        axes[0].plot(L, gen_s, ":^", color="C2", label=label)
        axes[1].plot(L, gen_gb, ":^", color="C2", label=label + ": peak growth")
    for ax, title, unit in ((axes[0], "Time", "seconds"), (axes[1], "Peak memory", "GB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"labels L (train rows = {payload['rows_per_label']} L)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        "make_xmc_classification data; libraries with 2 threads each; "
        "indicative (shared 2-core machine)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")


def project(payload: dict[str, Any], targets: list[int], names: list[str]) -> None:
    """Power-law extrapolation ``y = y1 * (L / L1) ** b`` of each library's train time and
    peak RSS from its two largest measured sizes, ``b`` the slope between them."""
    import math

    rows, records = [], []
    for lib in LIBS:
        pts = [
            (s["n_labels"], s["libraries"][lib])
            for s in payload["sizes"]
            if s["libraries"].get(lib, {}).get("status") == "ok"
        ]
        if len(pts) < 2:
            continue
        (l0, r0), (l1, r1) = pts[-2], pts[-1]
        for key, label in (("train_s", "train s"), ("peak_rss_mb", "peak RSS MB")):
            b = math.log(r1[key] / r0[key]) / math.log(l1 / l0)
            for target in targets:
                value = r1[key] * (target / l1) ** b
                record = {"library": lib, "quantity": key, "from": [l0, l1], "slope": b}
                records.append({**record, "labels": target, "projected": value})
                rows.append(
                    {
                        "library": xmc_linear.LIBRARIES.get(lib, lib),
                        "quantity": label,
                        f"measured at {l0:,} / {l1:,} labels": f"{r0[key]:.0f} / {r1[key]:.0f}",
                        "slope b (y ~ L^b)": f"{b:.2f}",
                        "labels": f"{target:,}",
                        "train rows": f"{target * payload['rows_per_label']:,}",
                        "projected": f"{value:.0f}",
                    }
                )
    command = _command()
    text = (
        f"Command: `{command}`  \n**A projection, not a measurement**: each library's "
        f"train time and peak RSS at its two largest measured sizes (results "
        f"{', '.join(names)}), extended as a power law in the number of labels L with "
        f"rows growing with L ({payload['rows_per_label']} x L) and the same generator "
        f"settings; it ignores everything that changes with a real data set (features, "
        f"labels per row, cluster sizes) and the machine's contention.\n\n"
        + markdown_table(rows, list(rows[0]) if rows else [])
    )
    write_results(f"{names[0]}_projection", {"command": command, "projections": records}, text)
    print(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=int,
        default=[10_000, 100_000, 1_000_000],
        help="numbers of labels, one instance each",
    )
    parser.add_argument("--rows-per-label", type=int, default=10, help="train rows per label")
    parser.add_argument("--max-test", type=int, default=50_000, help="test rows at most")
    parser.add_argument("--n-features", type=int, default=100_000, help="features")
    parser.add_argument("--seed", type=int, default=0, help="random_state of the generator")
    parser.add_argument(
        "--length", type=float, default=50.0, help="the generator's word tokens per row"
    )
    parser.add_argument(
        "--labels-per-sample", type=float, default=3.0, help="the generator's labels per row"
    )
    parser.add_argument(
        "--libraries", nargs="+", default=list(LIBS), choices=LIBS, help="libraries to run"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per child run")
    parser.add_argument("--name", default="scale", help="results/<name>.{json,md}")
    parser.add_argument("--plot", type=Path, default=PLOT, help="PNG file of the plot")
    parser.add_argument("--replot", action="store_true", help="only redraw the plot")
    parser.add_argument(
        "--with-generator",
        metavar="NAME",
        help="also plot the generator's times from results/NAME.json (a --generate-only run)",
    )
    parser.add_argument(
        "--also",
        nargs="+",
        default=[],
        metavar="NAME",
        help="with --replot: add the sizes of results/NAME.json (runs of the same settings)",
    )
    parser.add_argument(
        "--project",
        type=int,
        nargs="+",
        metavar="L",
        help="with --replot: extrapolate train time and peak RSS to L labels from the two "
        "largest sizes (a power law in L; rows grow with L as in the runs); writes "
        "results/<name>_projection.{json,md}",
    )
    parser.add_argument(
        "--generate-only",
        action="store_true",
        help="only time the generator (no libraries, no plot); e.g. --name scale_generate",
    )
    args = parser.parse_args()
    for opt in ("rows_per_label", "max_test", "n_features", "length", "labels_per_sample"):
        if getattr(args, opt) < 1:
            parser.error(f"--{opt.replace('_', '-')} must be >= 1")
    if any(size < 1 for size in args.sizes):
        parser.error(f"--sizes must be positive numbers of labels, got {args.sizes}")
    generator = None
    if args.with_generator:
        generator = json.loads((RESULTS / f"{args.with_generator}.json").read_text())
    if args.replot:
        payload = json.loads((RESULTS / f"{args.name}.json").read_text())
        for name in args.also:
            other = json.loads((RESULTS / f"{name}.json").read_text())
            keys = ("rows_per_label", "n_features", "length", "labels_per_sample", "seed")
            if any(other.get(k) != payload.get(k) for k in keys):
                parser.error(f"--also {name}: its settings differ from those of {args.name}")
            payload["sizes"] += other["sizes"]
        payload["sizes"].sort(key=lambda s: s["n_labels"])
        plot(payload, args.plot, generator)
        if args.project:
            project(payload, args.project, [args.name, *args.also])
        return 0

    payload: dict[str, Any] = {
        "command": _command(),
        "rows_per_label": args.rows_per_label,
        "max_test": args.max_test,
        "n_features": args.n_features,
        "length": args.length,
        "labels_per_sample": args.labels_per_sample,
        "seed": args.seed,
        "threads": xmc_linear.THREADS,
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "git": xmc_linear._git_state(),
        "skxmc_source_at_start": xmc_linear.skxmc_fingerprint(),
        "generate_only": args.generate_only,
        "load_average_start": os.getloadavg(),
        "sizes": [],
    }
    print(
        f"python {sys.executable}; numpy {np.__version__}; CPUs {os.cpu_count()}; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="skxmc_scale_"))
    try:
        for n_labels in args.sizes:
            payload["sizes"].append(run_size(n_labels, args, workdir))
            payload["load_average_end"] = os.getloadavg()
            write(payload, args.name, final=False)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    payload["skxmc_source_at_end"] = xmc_linear.skxmc_fingerprint()
    path = write(payload, args.name, final=True)
    print((RESULTS / f"{args.name}.md").read_text())
    print(f"wrote {path}")
    if args.generate_only:
        return 0
    try:
        plot(payload, args.plot, generator)
    except ImportError:  # the benchmark environment may lack matplotlib
        print(
            "matplotlib is missing: draw the plot with any environment that has it:\n"
            f"    python benchmarks/scale.py --replot --name {args.name}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
