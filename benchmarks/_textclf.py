"""The text classifiers' protocol, shared by the ``sharprecl`` and ``knnbert`` suites.

A suite gives its data sets, its rows (name -> estimator parameters) and one function that
builds its estimator; this module loads the splits (imbalanced versions made with
:func:`skxmc.datasets.make_imbalanced`, few-shot samples per class), fits every row for
every seed, and reports accuracy and macro-F1 (x100, mean ± sample std over the seeds) and
seconds per epoch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import _data
from benchmarks._harness import fit_complete, summarise

QUICK_TRAIN, QUICK_TEST = 120, 60
METRICS = ("accuracy", "macro_f1", "fit_s", "s_per_epoch", "predict_ms_per_text")


def add_arguments(parser: argparse.ArgumentParser, datasets: dict, rows: dict) -> None:
    parser.add_argument("--datasets", nargs="+", choices=list(datasets), help="default: all")
    parser.add_argument("--rows", nargs="+", choices=list(rows), help="default: all")
    parser.add_argument("--encoder", help="encoder folder (default: the bundled MiniLM)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--shots", type=int, help="training texts per class (few-shot)")
    parser.add_argument("--max-train", type=int)
    parser.add_argument("--max-test", type=int)
    parser.add_argument("--device", default="cpu")


def build(cls: type, encoder: str, args: argparse.Namespace, seed: int, **params: Any) -> Any:
    """A fine-tuned text classifier of class ``cls`` with the suite's training settings
    (passed through :func:`benchmarks._data.training_settings`), mean pooling and
    ``params``."""
    training = _data.training_settings(
        cls,
        max_epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        device=args.device,
        random_state=seed,
    )
    return cls(encoder=encoder, pooling="mean", max_length=args.max_length, **training, **params)


def load(folder: str, ratio: int | None, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Train and test texts of one set; ``ratio`` makes it imbalanced (most/least 50)."""
    from skxmc.datasets import get_data_dir, make_imbalanced

    root = get_data_dir(required=True) / folder
    splits = {}
    for split in ("train", "test"):
        with gzip.open(root / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        texts = [(r["text"], r["text_pair"]) if "text_pair" in r else r["text"] for r in records]
        splits[split] = (texts, np.asarray([str(r["label"]) for r in records]))
    (X, y), (X_test, y_test) = splits["train"], splits["test"]
    if ratio is not None:
        keep, _ = make_imbalanced(list(range(len(X))), y, imbalance_ratio=ratio, random_state=0)
        X, y = [X[i] for i in keep], y[keep]
    rng = np.random.default_rng(seed)
    n_train = QUICK_TRAIN if args.quick else args.max_train
    n_test = QUICK_TEST if args.quick else args.max_test
    if args.shots:
        idx = np.sort(
            np.concatenate(
                [rng.permutation(np.flatnonzero(y == c))[: args.shots] for c in np.unique(y)]
            )
        )
        X, y = [X[i] for i in idx], y[idx]
    if n_train and len(X) > n_train:
        idx = np.sort(rng.permutation(len(X))[:n_train])
        X, y = [X[i] for i in idx], y[idx]
    if n_test and len(X_test) > n_test:
        idx = np.sort(rng.permutation(len(X_test))[:n_test])
        X_test, y_test = [X_test[i] for i in idx], y_test[idx]
    return {"X": X, "y": y, "X_test": X_test, "y_test": y_test}


def scores(clf: Any, X_test: list, y_test: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score

    start = time.perf_counter()
    pred = clf.predict(X_test)
    ms = 1000 * (time.perf_counter() - start) / max(len(X_test), 1)
    return {
        "accuracy": 100 * accuracy_score(y_test, pred),
        "macro_f1": 100 * f1_score(y_test, pred, average="macro"),
        "predict_ms_per_text": ms,
    }


def run(
    args: argparse.Namespace,
    datasets: dict[str, tuple[str, int | None]],
    rows: dict[str, dict[str, Any]],
    make_estimator: Callable[..., Any],
    predict_rows: Callable[[Any, str], dict[str, dict]] | None = None,
) -> dict:
    """Fit every (data set, row, seed). ``predict_rows(clf, row)`` may score several rows
    from one fitted model (KNN-BERT's heads) as ``{row name: scores}``."""
    if args.quick:
        args.epochs = 1  # a tiny random encoder on 120 texts: one epoch shows it runs
    quick_sets = list(datasets)[:1]
    names = args.datasets or (quick_sets if args.quick else list(datasets))
    row_names = args.rows or (list(rows)[:2] if args.quick else list(rows))
    texts_for_vocab: list[str] = []
    runs = []
    for name in names:
        folder, ratio = datasets[name]
        if not _data.available(folder):
            print(f"{name}: data absent, skipped")
            continue
        for seed in args.seeds:
            data = load(folder, ratio, args, seed)
            if not texts_for_vocab:
                texts_for_vocab = [t if isinstance(t, str) else " ".join(t) for t in data["X"]]
                encoder, encoder_name = _data.encoder_for(args, texts_for_vocab)
            for row in row_names:
                clf = make_estimator(encoder, args, seed, rows[row])
                start = time.perf_counter()
                fit_complete(clf, data["X"], data["y"])
                fit_s = time.perf_counter() - start
                epochs = args.epochs
                scored = predict_rows(clf, row) if predict_rows else {row: {}}
                for out_row, params in scored.items():
                    if params:
                        clf.set_params(**params)
                    record = {"dataset": name, "row": out_row, "seed": seed, "fit_s": fit_s}
                    record["s_per_epoch"] = fit_s / max(epochs, 1)
                    record.update(scores(clf, data["X_test"], data["y_test"]))
                    record["n_train"] = len(data["X"])
                    runs.append(record)
                    print(f"{name} / {out_row} / seed {seed}: acc {record['accuracy']:.2f}")
    config = {
        k: getattr(args, k)
        for k in ("epochs", "batch_size", "max_length", "learning_rate", "shots", "device")
    }
    config["encoder"] = encoder_name if texts_for_vocab else None
    return {
        "config": config,
        "tables": [
            {
                "title": "Accuracy and macro-F1",
                "caption": "x100 on the test split; seconds per epoch of the fit.",
                "columns": ["dataset", "row", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["dataset", "row"], METRICS),
            }
        ],
        "runs": runs,
    }
