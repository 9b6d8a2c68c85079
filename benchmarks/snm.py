"""Top-k stochastic negative mining vs plain negative sampling (Reddi et al. 2019, Table 2),
and the dev-split study of SNMClassifier's settings (negative weights, initialisation).

For each dataset, ``SNMClassifier`` is trained with top-k SNM for every ``k`` of
``--ks`` and every negative weighting of ``--negative-weights`` (``"paper"``:
``(L - 1) / (k B)`` per mined negative, Reddi et al.; ``"mean"``: ``1 / k``), and, unless
``--no-baselines``, with uniform negative sampling (``negative_sampling="uniform"``: the
loss averages over all ``B`` sampled negatives) and the untrained starting model, with the
same ``B`` (``n_sampled``), epochs and seeds and otherwise default parameters (BOWL hinge,
512-512 network, batch 256). ``--label-inits`` adds rows with other class-vector
initialisations. P@1/3/5 and R@1/3/5 are reported as mean ± sample std (ddof=1) over
``--seeds``; with uniform rows, each SNM row's values are also given divided by the
uniform row's (the paper's normalisation: above 1 means SNM is better).
``XRLinearClassifier(n_jobs=2)`` (defaults) runs on the same features for reference unless
``--no-xrlinear``.

``--dev-fraction F`` holds out a fraction ``F`` of the training rows (one fixed random
split, the same for every seed and row) as a dev set: every model trains on the rest and
is scored on the dev set and on the test set. Settings are chosen on dev; test is
reported beside it.

Features are those of ``benchmarks/xmc_linear.py`` (shared cache in
``benchmarks/results/cache/``): TF-IDF ``sublinear_tf=True, ngram_range=(1, 2),
min_df=2, max_features=200000, float32`` fitted on train for ``tibkat_gnd_en`` (labels
of train and test binarised together: test-only labels count as misses), and the
XC-repository bag of words with L2-normalised rows for ``delicious_bow`` and
``bibtex_bow``.

Defaults (chosen to finish in about 30-40 minutes on 2 shared CPU cores with one seed):

* ``B`` per dataset: ``bibtex_bow`` 64 (of 159 labels), ``delicious_bow`` 256 (of 983),
  ``tibkat_gnd_en`` 1024 (of 24,931; the paper's setting for its smallest label set).
  On the two small sets the paper's ``B = 1024`` would exceed the label count and make
  every label a candidate (no sampling at all), so ``B`` keeps roughly the paper's
  ``B / L`` ratio there. ``k`` values above ``B`` are skipped.
* epochs: ``bibtex_bow`` 20, ``delicious_bow`` 10, ``tibkat_gnd_en`` 3.
* ``label_init="centroid"`` (the default): both methods start from class vectors at the
  centroids of the untrained network's embeddings. The row ``untrained start`` scores
  that starting model, so that a method which only degrades it shows as such.

Run::

    nice -n 10 .venv/bin/python benchmarks/snm.py
    .venv/bin/python benchmarks/snm.py --datasets bibtex_bow --ks 1 \\
        --negative-weights paper mean --seeds 0 1 2 --dev-fraction 0.1 --no-baselines \\
        --no-xrlinear --threads 1 --name snm_dev_weights

Prints a markdown table and writes ``benchmarks/results/<name>.{md,json}`` (default
``snm``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from _common import fit_complete, markdown_table, peak_rss_mb, write_results  # noqa: E402
from xmc_linear import load_cached, prepare_dataset  # noqa: E402

DATASETS = ("bibtex_bow", "delicious_bow", "tibkat_gnd_en")
DEFAULT_B = {"bibtex_bow": 64, "delicious_bow": 256, "tibkat_gnd_en": 1024}
DEFAULT_EPOCHS = {"bibtex_bow": 20, "delicious_bow": 10, "tibkat_gnd_en": 3}
KS = (1, 5, 10, 50)
METRICS = ("precision@1", "precision@3", "precision@5", "recall@1", "recall@3", "recall@5")
SHORT = {
    "precision@1": "P@1",
    "precision@3": "P@3",
    "precision@5": "P@5",
    "recall@1": "R@1",
    "recall@3": "R@3",
    "recall@5": "R@5",
}
DEV_SPLIT_SEED = 12345  # the dev rows are the same for every model seed


def _per_dataset(values: list[str] | None, default: dict[str, int], name: str) -> dict[str, int]:
    out = dict(default)
    for item in values or []:
        if "=" in item:
            key, value = item.split("=", 1)
            if key not in default:
                sys.exit(f"--{name}: unknown dataset {key!r}")
            out[key] = int(value)
        else:
            out = {k: int(item) for k in default}
    return out


def _metrics(Y: Any, top: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    from skxmc.metrics import precision_at_k, recall_at_k

    out = {}
    for k in (1, 3, 5):
        out[f"precision@{k}"] = 100 * precision_at_k(Y, top, k=k)
        out[f"recall@{k}"] = 100 * recall_at_k(Y, top, k=k)
    return out


def split_dev(X: Any, Y: Any, fraction: float) -> tuple[Any, Any, Any, Any]:
    """Train rows minus a random ``fraction`` of them, and those rows (the dev set)."""
    n = X.shape[0]
    order = np.random.default_rng(DEV_SPLIT_SEED).permutation(n)
    n_dev = round(fraction * n)
    dev, fit = np.sort(order[:n_dev]), np.sort(order[n_dev:])
    return X[fit], Y[fit], X[dev], Y[dev]


def _evaluate(clf: Any, evals: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split, (X, Y) in evals.items():
        t0 = time.perf_counter()
        top = clf.predict_topk(X, k=5)
        out[f"{split}_predict_s"] = time.perf_counter() - t0
        out.update({f"{split}_{m}": v for m, v in _metrics(Y, top).items()})
    return out


def run_snm(
    X: Any,
    Y: Any,
    evals: dict[str, tuple[Any, Any]],
    *,
    negative_sampling: str,
    k: int,
    n_sampled: int,
    epochs: int,
    seed: int,
    **params: Any,
) -> dict[str, Any]:
    from skxmc import SNMClassifier

    flat = dict(
        negative_sampling=negative_sampling,
        n_hard_negatives=k,
        n_sampled=n_sampled,
        **params,
        max_epochs=epochs,
        device="cpu",
        random_state=seed,
    )
    # the configurations are flat (learning_rate next to the SNM parameters)
    clf = SNMClassifier(**SNMClassifier._upgrade_params(flat))
    t0 = time.perf_counter()
    fit_complete(clf, X, Y)
    fit_s = time.perf_counter() - t0
    return {"fit_s": fit_s, "final_loss": clf.loss_curve_[-1], **_evaluate(clf, evals)}


def run_xrlinear(X: Any, Y: Any, evals: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    from skxmc import XRLinearClassifier

    clf = XRLinearClassifier(n_jobs=2)
    t0 = time.perf_counter()
    clf.fit(X, Y)
    fit_s = time.perf_counter() - t0
    return {"fit_s": fit_s, **_evaluate(clf, evals)}


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) if len(values) > 1 else None)


def summarise(runs: list[dict[str, Any]], splits: list[str]) -> list[dict[str, Any]]:
    """One row per (dataset, method): mean, sample std and seeds of every metric."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["method"]), []).append(r)
    rows = []
    for (dataset, method), rs in groups.items():
        row: dict[str, Any] = {
            "dataset": dataset,
            "method": method,
            "B": rs[0]["B"],
            "epochs": rs[0]["epochs"],
            "seeds": [r["seed"] for r in rs],
            "fit_s": statistics.fmean(r["fit_s"] for r in rs),
        }
        for split in splits:
            for m in METRICS:
                mean, std = _mean_std([r[f"{split}_{m}"] for r in rs])
                row[f"{split}_{m}"], row[f"{split}_{m}_std"] = mean, std
        rows.append(row)
    return rows


def _cell(row: dict[str, Any], key: str) -> str:
    std = row.get(f"{key}_std")
    return f"{row[key]:.2f}" + ("" if std is None else f" ± {std:.2f}")


def write_report(
    runs: list[dict[str, Any]],
    args: argparse.Namespace,
    infos: dict[str, Any],
    epochs: dict[str, int],
    n_sampled: dict[str, int],
    splits: list[str],
    start: float,
    final: bool = False,
) -> None:
    import torch

    summary = summarise(runs, splits)
    command = "benchmarks/snm.py " + " ".join(sys.argv[1:])
    settings = ", ".join(f"{d}: B={n_sampled[d]}, {epochs[d]} epochs" for d in args.datasets)
    dev = (
        f"dev = {args.dev_fraction:g} of the training rows (split seed {DEV_SPLIT_SEED}), "
        "models trained on the rest; "
        if args.dev_fraction
        else ""
    )
    lines = [
        "# Top-k stochastic negative mining (benchmarks/snm.py)",
        "",
        f"Command: `{command.strip()}`  ",
        f"torch {torch.__version__}, {args.torch_threads} threads, CPU; seeds "
        f"{args.seeds}; {dev}{settings}. SNMClassifier defaults otherwise (BOWL hinge, "
        "512-512, batch 256). Values x100, mean ± sample std (ddof=1) over the seeds. "
        f"Total {time.perf_counter() - start:.0f} s, peak RSS {peak_rss_mb():.0f} MB.",
        "" if final else "**Partial results (the run did not finish).**",
    ]
    for split in splits:
        cols = [f"{split} {SHORT[m]}" for m in METRICS]
        table_rows = [
            {
                "dataset": r["dataset"],
                "method": r["method"],
                "B": r["B"],
                "epochs": r["epochs"],
                "seeds": len(r["seeds"]),
                **{c: _cell(r, f"{split}_{m}") for c, m in zip(cols, METRICS)},
                "fit s": round(r["fit_s"], 1),
            }
            for r in summary
        ]
        lines += [
            "",
            f"{split.capitalize()} set:",
            "",
            markdown_table(
                table_rows, ["dataset", "method", "B", "epochs", "seeds", *cols, "fit s"]
            ),
        ]
        uniform = {r["dataset"]: r for r in summary if r["method"] == "uniform"}
        ratio_rows = []
        for r in summary:
            base = uniform.get(r["dataset"])
            if base is None or not r["method"].startswith("snm"):
                continue
            ratio_rows.append(
                {
                    "dataset": r["dataset"],
                    "method": r["method"],
                    **{
                        SHORT[m]: (
                            r[f"{split}_{m}"] / base[f"{split}_{m}"]
                            if base[f"{split}_{m}"]
                            else float("nan")
                        )
                        for m in METRICS
                    },
                }
            )
        if ratio_rows:
            lines += [
                "",
                f"{split.capitalize()} set, SNM mean divided by the uniform negative "
                "sampling mean (same B, epochs, seeds; above 1: SNM better):",
                "",
                markdown_table(ratio_rows, ["dataset", "method", *(SHORT[m] for m in METRICS)]),
            ]
    table = "\n".join(lines)
    if final:
        print()
        print(table)
    write_results(
        args.name,
        {
            "command": command,
            "epochs": epochs,
            "n_sampled": n_sampled,
            "ks": args.ks,
            "seeds": args.seeds,
            "negative_weights": args.negative_weights,
            "label_inits": args.label_inits,
            "dev_fraction": args.dev_fraction,
            "dev_split_seed": DEV_SPLIT_SEED,
            "torch": torch.__version__,
            "threads": args.torch_threads,
            "datasets": infos,
            "runs": runs,
            "summary": summary,
            "total_s": time.perf_counter() - start,
            "complete": final,
        },
        table,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--ks", nargs="+", type=int, default=list(KS))
    parser.add_argument(
        "--negative-weights",
        nargs="+",
        default=["mean"],
        choices=["paper", "mean"],
        help="SNM negative weightings to run (SNMClassifier negative_weight; default: "
        "the estimator's default)",
    )
    parser.add_argument(
        "--label-inits",
        nargs="+",
        default=["centroid"],
        choices=["centroid", "random"],
        help="class-vector initialisations of the SNM rows",
    )
    parser.add_argument(
        "--epochs",
        nargs="+",
        metavar="[DATASET=]N",
        help=f"epochs for every run (N) or per dataset (DATASET=N); default {DEFAULT_EPOCHS}",
    )
    parser.add_argument(
        "--n-sampled",
        nargs="+",
        metavar="[DATASET=]B",
        help=f"candidates B per batch; default {DEFAULT_B}",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument(
        "--dev-fraction",
        type=float,
        default=0.0,
        help="hold out this fraction of the training rows as a dev set",
    )
    parser.add_argument(
        "--no-baselines",
        action="store_true",
        help="skip the uniform negative sampling and untrained-start rows",
    )
    parser.add_argument("--no-xrlinear", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--name", default="snm", help="results/<name>.json / .md")
    args = parser.parse_args()
    if not 0 <= args.dev_fraction < 1:
        sys.exit("--dev-fraction must be in [0, 1)")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    args.torch_threads = torch.get_num_threads()  # read now: later fits may change it
    epochs = _per_dataset(args.epochs, DEFAULT_EPOCHS, "epochs")
    n_sampled = _per_dataset(args.n_sampled, DEFAULT_B, "n-sampled")
    splits = ["dev", "test"] if args.dev_fraction else ["test"]

    start = time.perf_counter()
    runs: list[dict[str, Any]] = []
    infos: dict[str, Any] = {}
    for name in args.datasets:
        path, info = prepare_dataset(name, "l2")
        X_tr, Y_tr, X_te, Y_te = load_cached(path)
        evals = {"test": (X_te, Y_te)}
        if args.dev_fraction:
            X_tr, Y_tr, X_dev, Y_dev = split_dev(X_tr, Y_tr, args.dev_fraction)
            evals = {"dev": (X_dev, Y_dev), **evals}
            info["n_dev"] = X_dev.shape[0]
        info["n_fit"] = X_tr.shape[0]
        infos[name] = info
        B, E = n_sampled[name], epochs[name]
        n_labels = info["n_labels"]
        print(
            f"{name}: {X_tr.shape[0]} train / {info.get('n_dev', 0)} dev / {info['n_test']} "
            f"test, {info['n_features']} features, {n_labels} labels; B={B}, {E} epochs",
            flush=True,
        )
        configs: list[tuple[str, dict[str, Any]]] = []
        if not args.no_baselines:
            configs.append(("uniform", dict(negative_sampling="uniform", k=1, epochs=E)))
            # The starting point both methods share (class vectors at the centroids of the
            # untrained network's embeddings): learning rates of 1e-12 leave it unchanged.
            configs.append(
                (
                    "untrained start",
                    dict(
                        negative_sampling="uniform",
                        k=1,
                        epochs=1,
                        learning_rate=1e-12,
                        input_learning_rate=1e-12,
                        label_learning_rate=1e-12,
                    ),
                )
            )
        for k in args.ks:
            if k > B:
                continue
            for weight in args.negative_weights:
                for init in args.label_inits:
                    label = f"snm k={k} {weight}" + ("" if init == "centroid" else f" {init}")
                    configs.append(
                        (
                            label,
                            dict(
                                negative_sampling="snm",
                                k=k,
                                epochs=E,
                                negative_weight=weight,
                                label_init=init,
                            ),
                        )
                    )
        # Seeds outermost: a run stopped early still compares every row on the same seeds.
        for seed in args.seeds:
            for label, cfg in configs:
                res = run_snm(X_tr, Y_tr, evals, n_sampled=B, seed=seed, **cfg)
                runs.append(
                    {
                        "dataset": name,
                        "method": label,
                        "B": B,
                        "epochs": 0 if label == "untrained start" else E,
                        "seed": seed,
                        **res,
                    }
                )
                score = " ".join(f"{s} P@1 {res[f'{s}_precision@1']:.2f}" for s in evals)
                print(f"  {label} seed {seed}: {score} ({res['fit_s']:.0f} s)", flush=True)
                write_report(runs, args, infos, epochs, n_sampled, splits, start)
        if not args.no_xrlinear:
            res = run_xrlinear(X_tr, Y_tr, evals)
            runs.append(
                {"dataset": name, "method": "XRLinear", "B": "", "epochs": "", "seed": 0, **res}
            )
            print(
                f"  XRLinear: P@1 {res['test_precision@1']:.2f} ({res['fit_s']:.0f} s)", flush=True
            )
        write_report(runs, args, infos, epochs, n_sampled, splits, start)
    write_report(runs, args, infos, epochs, n_sampled, splits, start, final=True)


if __name__ == "__main__":
    main()
