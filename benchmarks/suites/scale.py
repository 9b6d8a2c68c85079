"""XR-Linear on generated sets from 10k to 1M labels: time and peak memory.

For every size ``L`` in ``--sizes`` (labels), one set of
:func:`skxmc.datasets.make_xmc_classification` with ``--rows-per-label * L`` training
rows, ``min(n_train // 5, --max-test)`` test rows and ``--n-features`` features, the
generator's defaults otherwise, ``random_state`` = the seed (one set per seed). Each
(size, seed) runs in a fresh interpreter with 2 threads: generation, fit and predict
seconds, P@1 and P@5 (x100) and the child's peak memory (its copy of the data included).
Replaces ``scale.py``, ``scale_dask.py``, ``scale_difficulty.py``, ``scale_seeds.py``,
``mmap_load.py``, ``mmap_reach.py``, ``prefetch.py`` and ``knn_search.py`` (their
special studies are not ported: git history keeps them).
"""

from __future__ import annotations

import argparse

from benchmarks._harness import Clock, in_child, summarise

SEEDS = (0,)
METRICS = ("generate_s", "fit_s", "fit_cpu_s", "predict_s", "P@1", "P@5", "peak_rss_mb")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rows-per-label", type=int, default=10)
    parser.add_argument("--max-test", type=int, default=50_000)
    parser.add_argument("--n-features", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per size")


def measure(
    n_labels: int, n_train: int, n_test: int, n_features: int, seed: int, threads: int
) -> dict:
    """One size, in its child process."""
    import numpy as np
    import scipy.sparse as sp

    from skxmc import XRLinearClassifier
    from skxmc.datasets import make_xmc_classification
    from skxmc.metrics import evaluate

    with Clock() as generate:
        X, Y = make_xmc_classification(
            n_samples=n_train + n_test, n_features=n_features, n_labels=n_labels, random_state=seed
        )
    X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
    clf = XRLinearClassifier(n_jobs=threads, random_state=seed)
    with Clock() as fit:
        clf.fit(X[:n_train], Y[:n_train])
    with Clock() as predict:
        top = clf.predict_topk(X[n_train:], k=5)
    res = evaluate(Y[n_train:], top, ks=(1, 5))
    return {
        "generate_s": generate.wall_s,
        "fit_s": fit.wall_s,
        "fit_cpu_s": fit.cpu_s,
        "predict_s": predict.wall_s,
        "P@1": 100 * res["precision@1"],
        "P@5": 100 * res["precision@5"],
        "nnz_per_row": X.nnz / X.shape[0],
    }


def run(args: argparse.Namespace) -> dict:
    sizes, rows_per_label, n_features = args.sizes, args.rows_per_label, args.n_features
    if args.quick:
        sizes, rows_per_label, n_features = [1000], 2, 5000
    runs = []
    for size in sizes:
        n_train = rows_per_label * size
        n_test = min(n_train // 5, args.max_test)
        for seed in args.seeds:
            r = in_child(
                "benchmarks.suites.scale:measure",
                timeout=args.timeout,
                n_labels=size,
                n_train=n_train,
                n_test=n_test,
                n_features=n_features,
                seed=seed,
                threads=args.threads,
            )
            r.update(labels=size, n_train=n_train, n_test=n_test, seed=seed)
            runs.append(r)
            print(f"{size} labels, seed {seed}: fit {r['fit_s']:.1f} s", flush=True)
    return {
        "config": {
            "rows_per_label": rows_per_label,
            "n_features": n_features,
            "threads": args.threads,
        },
        "tables": [
            {
                "title": "XR-Linear on generated sets",
                "caption": "Seconds, P@k x100, peak MB of the child process (data included).",
                "columns": ["labels", "n_train", "n_test", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["labels", "n_train", "n_test"], METRICS),
                "digits": {"peak_rss_mb": 0},
            }
        ],
        "runs": runs,
    }
