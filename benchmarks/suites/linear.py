"""XR-Linear on the reference sets, beside libpecos's XR-Linear when it is installed.

Every (dataset, library, seed) runs in its own fresh interpreter: fit and predict twice,
the first pair fresh (numba loads its cached kernels inside it; the peak memory is read
right after it), the second warm (what a refit or a long-running service pays). The
table reports the warm times, the fresh process's peak memory and the ranking metrics
(x100): P@1/3/5, nDCG@5, PSP@5 (propensities A=0.55, B=1.5 from the training labels).
The seed is the label tree's ``random_state``.

Replaces ``xmc_linear.py`` (its peer table, protocol and features), ``scale_seeds.py``
(seeds) and ``xmc_linear_memory.py`` (peak memory) of the scripts before the harness.
libpecos needs numpy<2 and scipy<1.14: run the suite from that environment to include it
(``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any

from benchmarks import _data
from benchmarks._harness import Clock, in_child, peak_rss_mb, summarise

SEEDS = (0, 1, 2)
DATASETS = ("reuters21578_allcats", "bibtex_bow", "delicious_bow", "tibkat_gnd_en")
QUICK_DATASETS = ("reuters21578_allcats",)
METRICS = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@5", "fit_s", "fit_cpu_s", "predict_s")
THREADS = 2
TOP_K = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", nargs="+", help=f"default: {' '.join(DATASETS)}")
    parser.add_argument(
        "--libraries",
        nargs="+",
        default=["skxmc", "libpecos"],
        choices=["skxmc", "skxmc-man", "libpecos"],
        help="libpecos is skipped (and said so) where it is not installed",
    )
    parser.add_argument("--threads", type=int, default=THREADS)


def make_estimator(library: str, seed: int, threads: int) -> Any:
    from skxmc import XRLinearClassifier

    params: dict[str, Any] = {"n_jobs": threads, "random_state": seed}
    if library == "skxmc-man":
        params["negative_sampling"] = "tfn+man"
    return XRLinearClassifier(**params)


def measure(dataset: str, library: str, seed: int, quick: bool, threads: int) -> dict:
    """One run, in its child process (see the module docstring)."""
    X_tr, Y_tr, X_te, Y_te = _data.xmc_features(dataset, quick)
    if library == "libpecos":
        return _measure_pecos(X_tr, Y_tr, X_te, Y_te, seed, threads)
    out: dict[str, Any] = {}
    for round_ in ("fresh", "warm"):
        clf = make_estimator(library, seed, threads)
        with Clock() as fit:
            clf.fit(X_tr, Y_tr)
        with Clock() as predict:
            clf.predict_topk(X_te, k=TOP_K)
        if round_ == "fresh":
            out.update(fresh_fit_s=fit.wall_s, fresh_predict_s=predict.wall_s)
            out["fresh_peak_rss_mb"] = peak_rss_mb()
    out.update(fit_s=fit.wall_s, fit_cpu_s=fit.cpu_s, predict_s=predict.wall_s)
    out.update(_data.ranking_metrics(clf, X_te, Y_te, Y_tr))
    out["shape"] = {"n_train": X_tr.shape[0], "n_test": X_te.shape[0], "n_labels": Y_tr.shape[1]}
    return out


def train_pecos(X_tr: Any, Y_tr: Any, *, seed: int, threads: int) -> Any:
    """libpecos's XR-Linear as its users train it: PIFA label features, a hierarchical
    k-means tree (16 splits, leaves of 100), ``XLinearModel.train`` defaults."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    feat = LabelEmbeddingFactory.create(Y_tr, X_tr, method="pifa", threads=threads)
    chain = Indexer.gen(
        feat,
        indexer_type="hierarchicalkmeans",
        nr_splits=16,
        max_leaf_size=100,
        seed=seed,
        threads=threads,
    )
    return XLinearModel.train(X_tr, Y_tr, C=chain, threads=threads)


def _measure_pecos(X_tr, Y_tr, X_te, Y_te, seed: int, threads: int) -> dict:
    """PIFA -> hierarchical k-means (16 splits, leaves of 100) -> ``XLinearModel.train``
    defaults, in memory; prediction with beam 10, top 10."""
    import scipy.sparse as sp

    from skxmc.metrics import evaluate, inverse_propensity

    out: dict[str, Any] = {}
    for round_ in ("fresh", "warm"):
        with Clock() as fit:
            model = train_pecos(X_tr, Y_tr, seed=seed, threads=threads)
        with Clock() as predict:
            P = model.predict(X_te, beam_size=10, only_topk=TOP_K, threads=threads)
        if round_ == "fresh":
            out.update(fresh_fit_s=fit.wall_s, fresh_predict_s=predict.wall_s)
            out["fresh_peak_rss_mb"] = peak_rss_mb()
    out.update(fit_s=fit.wall_s, fit_cpu_s=fit.cpu_s, predict_s=predict.wall_s)
    res = evaluate(
        Y_te,
        sp.csr_matrix(P),
        ks=(1, 3, 5),
        inv_propensity=inverse_propensity(Y_tr),
        normalize=True,
    )
    out.update({f"P@{k}": 100 * res[f"precision@{k}"] for k in (1, 3, 5)})
    out["nDCG@5"] = 100 * res["ndcg@5"]
    out["PSP@5"] = 100 * res["psprecision@5"]
    return out


def run(args: argparse.Namespace) -> dict:
    datasets = args.datasets or (QUICK_DATASETS if args.quick else DATASETS)
    libraries = list(args.libraries)
    skipped = []
    if "libpecos" in libraries and importlib.util.find_spec("pecos") is None:
        libraries.remove("libpecos")
        skipped.append("libpecos (not installed in this environment)")
    runs = []
    for dataset in datasets:
        if not _data.available(dataset):
            skipped.append(f"{dataset} (data absent)")
            continue
        _data.xmc_features(dataset, args.quick)  # build the cache outside the timed children
        for seed in args.seeds:
            for library in libraries:  # interleaved within a seed: load changes hit all alike
                start = time.perf_counter()
                r = in_child(
                    "benchmarks.suites.linear:measure",
                    dataset=dataset,
                    library=library,
                    seed=seed,
                    quick=args.quick,
                    threads=args.threads,
                )
                r.update(dataset=dataset, library=library, seed=seed)
                print(f"{dataset} {library} seed {seed}: {time.perf_counter() - start:.1f} s")
                runs.append(r)
    if not runs and args.quick:
        runs = _generated_quick(args)
    return {
        "config": {
            "threads": args.threads,
            "top_k": TOP_K,
            "tfidf": _data.TFIDF,
            "quick": args.quick,
        },
        "note": ("Skipped: " + "; ".join(skipped) + ".") if skipped else "",
        "tables": tables(runs),
        "runs": runs,
    }


RATIOS = ("fit_s", "fit_cpu_s", "predict_s", "fresh_peak_rss_mb")
DIFFERENCES = ("P@1", "P@5", "PSP@5")


def tables(runs: list[dict]) -> list[dict]:
    """The suite's tables from its per-seed records: every library, then skxmc against
    libpecos where both ran (ratios and differences per seed, then their mean)."""
    columns = ["dataset", "library", *METRICS, "fresh_peak_rss_mb", "n_seeds"]
    out = [
        {
            "id": "xr-linear",
            "title": "XR-Linear",
            "caption": "Warm fit and predict seconds, CPU seconds of the warm fit, "
            "peak memory (MB) of the fresh process; metrics x100.",
            "columns": columns,
            "rows": summarise(runs, ["dataset", "library"], [*METRICS, "fresh_peak_rss_mb"]),
            "digits": {"fresh_peak_rss_mb": 0, "predict_s": 3},
        }
    ]
    by_key = {(r["dataset"], r["library"], r["seed"]): r for r in runs}
    paired = []
    for (dataset, library, seed), ours in by_key.items():
        theirs = by_key.get((dataset, "libpecos", seed))
        if library != "skxmc" or theirs is None:
            continue
        row: dict[str, Any] = {"dataset": dataset, "seed": seed}
        row.update({f"{m} ratio": ours[m] / theirs[m] for m in RATIOS if theirs.get(m)})
        row.update({f"{m} diff": ours[m] - theirs[m] for m in DIFFERENCES})
        paired.append(row)
    if paired:
        metrics = [f"{m} ratio" for m in RATIOS] + [f"{m} diff" for m in DIFFERENCES]
        out.append(
            {
                "id": "vs-libpecos",
                "title": "skxmc against libpecos",
                "caption": "Per seed (the same tree seed, data and threads for both, "
                "interleaved runs), then the mean: skxmc's time and fresh-process peak "
                "memory divided by libpecos's (below 1: skxmc is faster or smaller), and "
                "skxmc's metric minus libpecos's (x100).",
                "columns": ["dataset", *metrics, "n_seeds"],
                "rows": summarise(paired, ["dataset"], metrics),
                "digits": {m: 3 for m in metrics if m.endswith("ratio")},
            }
        )
    return out


def _generated_quick(args: argparse.Namespace) -> list[dict]:
    """--quick without the reference data: a generated set, in this process."""
    X_tr, Y_tr, X_te, Y_te = _data.generated(1000, 200)
    runs = []
    for seed in args.seeds:
        clf = make_estimator("skxmc", seed, args.threads)
        with Clock() as fit:
            clf.fit(X_tr, Y_tr)
        with Clock() as predict:
            clf.predict_topk(X_te, k=TOP_K)
        r = {"dataset": "generated-1000x200", "library": "skxmc", "seed": seed}
        r.update(fit_s=fit.wall_s, fit_cpu_s=fit.cpu_s, predict_s=predict.wall_s)
        r.update(_data.ranking_metrics(clf, X_te, Y_te, Y_tr))
        runs.append(r)
    return runs
