"""XRLinearClassifier: a 2-worker Dask LocalCluster against local threads, same data.

Issue 18 (points 3 and 6): the overhead of running the layers on a ``distributed``
cluster on one machine, and the bytes that move per layer. For each size ``L`` in
``--sizes``: the generated problem of ``benchmarks/scale.py`` (same defaults and seed),
then in this process

* a local fit with ``n_jobs=2`` (threads) and a prediction of the test rows;
* a ``LocalCluster(n_workers=2, threads_per_worker=1)`` (worker processes), and the same
  fit and prediction inside ``joblib.parallel_config(backend="dask")``.

Both paths are warmed up first on a small problem (numba kernels loaded in every process,
cluster started), so the timings are of the fit and the prediction only; the cluster's
start-up is reported apart. The model of the cluster is compared with the local one
(largest absolute weight difference and equal sparsity patterns), and so are the top-10
predictions. Peak RSS: this process's VmHWM (it holds the data, the local model and the
cluster's client) and each worker's own VmHWM.

    python benchmarks/scale_dask.py --sizes 10000
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from _common import markdown_table, peak_rss_mb, write_results  # noqa: E402


def _worker_peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _fit_predict(X_tr, Y_tr, X_te, args) -> tuple[Any, float, float, tuple]:
    from skxmc import XRLinearClassifier

    clf = XRLinearClassifier(
        n_jobs=2, negative_sampling=args.negative_sampling, random_state=args.random_state
    )
    t0 = time.perf_counter()
    clf.fit(X_tr, Y_tr)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = clf.predict_topk(X_te)
    return clf, fit_s, time.perf_counter() - t0, pred


def run_size(n_labels: int, args: argparse.Namespace, client: Any) -> dict[str, Any]:
    import joblib
    from scale import generate

    import skxmc
    from skxmc.metrics import precision_at_k

    X, Y, n_train, n_test = generate(n_labels, args)
    X_tr, Y_tr, X_te, Y_te = X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]
    del X
    x_mb = sum(a.nbytes for a in (X_tr.data, X_tr.indices, X_tr.indptr)) / 2**20
    load = os.getloadavg()[0]
    local, local_fit, local_pred, local_top = _fit_predict(X_tr, Y_tr, X_te, args)
    print(f"  local: fit {local_fit:.1f} s, predict {local_pred:.1f} s", flush=True)
    if args.keep_model is not None:
        # the local model waits on disk during the cluster's fit (at 1M labels the two
        # models and the workers' copies would not fit in memory together); it is compared
        # from a memory-mapped load, and the folder serves benchmarks/mmap_load.py
        keep = Path(args.keep_model) / f"xrlinear_{n_labels}"
        skxmc.save(local, keep, overwrite=True)
        del local
        gc.collect()
    with joblib.parallel_config(backend="dask"):
        remote, dask_fit, dask_pred, dask_top = _fit_predict(X_tr, Y_tr, X_te, args)
    print(f"  dask:  fit {dask_fit:.1f} s, predict {dask_pred:.1f} s", flush=True)
    if args.keep_model is not None:
        local = skxmc.load(keep, mmap=True, verify=False)
    precision = {
        name: {f"P@{k}": round(100 * float(precision_at_k(Y_te, top, k=k)), 2) for k in (1, 5)}
        for name, top in (("local", local_top), ("dask", dask_top))
    }
    same_pattern = all(
        np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
        for a, b in zip(local.weights_, remote.weights_)
    )
    max_diff = max(
        float(np.max(np.abs(a.data - b.data))) if a.nnz and same_pattern else float("nan")
        for a, b in zip(local.weights_, remote.weights_)
    )
    layers = [
        {
            "layer": t + 1,
            "nodes": int(W.shape[1]),
            "broadcast MB": round(b["broadcast"] / 2**20, 2),
            "task args MB": round(b["to_workers"] / 2**20, 3),
            "results MB": round(b["from_workers"] / 2**20, 2),
            "local s": round(local.fit_time_per_layer_[t], 2),
            "dask s": round(remote.fit_time_per_layer_[t], 2),
        }
        for t, (W, b) in enumerate(zip(remote.weights_, remote.fit_bytes_per_layer_))
    ]
    return {
        "n_labels": n_labels,
        "n_train": n_train,
        "n_test": n_test,
        "X_train_mb": round(x_mb, 1),
        "negative_sampling": args.negative_sampling,
        "local_fit_s": round(local_fit, 2),
        "dask_fit_s": round(dask_fit, 2),
        "fit_ratio": round(dask_fit / local_fit, 3),
        "local_predict_s": round(local_pred, 2),
        "dask_predict_s": round(dask_pred, 2),
        "predict_ratio": round(dask_pred / local_pred, 3),
        "same_sparsity_pattern": bool(same_pattern),
        "max_abs_weight_difference": max_diff,
        "same_top10": bool(
            np.array_equal(local_top[0], dask_top[0]) and np.array_equal(local_top[1], dask_top[1])
        ),
        "precision": precision,
        "layers": layers,
        "load_average_start": load,
        "load_average_end": os.getloadavg()[0],
        "client_peak_rss_mb": round(peak_rss_mb(), 0),
        "worker_peak_rss_mb": [round(v, 0) for v in client.run(_worker_peak_mb).values()],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    p.add_argument("--rows-per-label", type=int, default=10)
    p.add_argument("--max-test", type=int, default=50_000)
    p.add_argument("--n-features", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--length", type=float, default=50.0, help="the generator's tokens per row")
    p.add_argument("--labels-per-sample", type=float, default=3.0)
    p.add_argument("--negative-sampling", default="tfn", choices=["tfn", "tfn+man"])
    p.add_argument("--random-state", type=int, default=0, help="XRLinearClassifier's random_state")
    p.add_argument(
        "--keep-model",
        type=Path,
        help="save the local model under this folder (xrlinear_<L>) and keep it",
    )
    p.add_argument("--name", default="scale_dask")
    args = p.parse_args()

    import joblib
    from distributed import Client, LocalCluster

    from skxmc.datasets import make_xmc_classification

    # warm-up: numba kernels here and in the workers, outside every timing
    Xw, Yw = make_xmc_classification(2000, 2000, 200, random_state=1)
    _fit_predict(Xw, Yw, Xw[:100], args)
    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    with joblib.parallel_config(backend="dask"):
        _fit_predict(Xw, Yw, Xw[:100], args)
    startup_s = time.perf_counter() - t0
    records = []
    # no machine paths in results: the kept model's folder is DIR
    argv = ["DIR" if a == str(args.keep_model) else a for a in sys.argv[1:]]
    command = "python benchmarks/scale_dask.py " + " ".join(argv)
    config = {k: ("DIR" if isinstance(v, Path) else v) for k, v in vars(args).items()}
    try:
        for L in args.sizes:
            print(f"== L={L}", flush=True)
            records.append(run_size(L, args, client))
            rows = [
                {
                    "labels": r["n_labels"],
                    "train rows": r["n_train"],
                    "local fit s": r["local_fit_s"],
                    "dask fit s": r["dask_fit_s"],
                    "fit ratio": r["fit_ratio"],
                    "local predict s": r["local_predict_s"],
                    "dask predict s": r["dask_predict_s"],
                    "same model": f"{r['same_sparsity_pattern']} (max diff "
                    f"{r['max_abs_weight_difference']:.1e})",
                    "same top-10": r["same_top10"],
                    "local P@1 / P@5": "{P@1} / {P@5}".format(**r["precision"]["local"]),
                    "dask P@1 / P@5": "{P@1} / {P@5}".format(**r["precision"]["dask"]),
                    "client / worker peak RSS MB": f"{r['client_peak_rss_mb']:.0f} / "
                    + " / ".join(f"{v:.0f}" for v in r["worker_peak_rss_mb"]),
                    "load avg": f"{r['load_average_start']:.1f}-{r['load_average_end']:.1f}",
                }
                for r in records
            ]
            md = [
                f"Command: `{command}`  ",
                "Data: the generated problem of `benchmarks/scale.py` (seed "
                f"{args.seed}, {args.n_features} features, length={args.length}, "
                f"labels_per_sample={args.labels_per_sample}). Local: `n_jobs=2` threads. Dask: "
                "`LocalCluster(n_workers=2, threads_per_worker=1)` worker processes on the "
                f"same 2-core machine, `negative_sampling={args.negative_sampling!r}`, "
                f"`random_state={args.random_state}`; "
                f"cluster start-up and warm-up {startup_s:.1f} s (not in the timings). The "
                "machine was shared with other jobs (load averages in the table): timings "
                "are indicative.",
                "",
                markdown_table(rows, list(rows[0])),
            ]
            for r in records:
                md += [
                    "",
                    f"Per layer, L={r['n_labels']} (X_train: {r['X_train_mb']} MB; broadcast "
                    "= bytes copied to every worker, summed over the 2 workers; task args = "
                    "the chunks' index arrays; results = the chunks' weights sent back):",
                    "",
                    markdown_table(r["layers"], list(r["layers"][0])),
                ]
            payload = {"command": command, "config": config, "records": records}
            write_results(args.name, {**payload, "startup_s": startup_s}, "\n".join(md))
            print("\n".join(md), flush=True)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
