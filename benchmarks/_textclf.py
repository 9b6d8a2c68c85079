"""The text classifiers' protocol, shared by the ``sharprecl`` and ``knnbert`` suites.

A suite gives its data sets, its rows (name -> estimator parameters) and one function that
builds its estimator; this module loads the splits (imbalanced versions made with
:func:`skxmc.datasets.make_imbalanced`, few-shot samples per class), fits every row for
every seed, and reports accuracy and macro-F1 (x100, mean ± sample std over the seeds) and
seconds per epoch.

Long runs by hand (issue 50 item 3): ``--checkpoint-dir DIR --budget SECONDS`` stops the
command after ``SECONDS`` (the fit in progress at its next optimiser step, through the
engine's ``max_time``), keeping each finished fit's record in ``DIR/records.jsonl`` and the
unfinished one's checkpoint under ``DIR``; the same command again resumes there and writes
the results once every fit has finished. A fit's seconds add up over its sessions.
``--dev-fraction F`` scores on F of the training texts held out instead of test, for
choosing a setting (e.g. KNN-BERT's memory) on dev.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _data
from benchmarks._harness import FinishedFits, fit_complete, run_settings, summarise

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
    parser.add_argument("--weight-decay", type=float, help="default: the estimator's")
    parser.add_argument(
        "--checkpoint-dir", help="resumable run: finished fits and checkpoints kept here"
    )
    parser.add_argument(
        "--budget", type=float, help="seconds this command may train (with --checkpoint-dir)"
    )
    parser.add_argument("--shots", type=int, help="training texts per class (few-shot)")
    parser.add_argument("--max-train", type=int)
    parser.add_argument("--max-test", type=int)
    parser.add_argument(
        "--dev-fraction",
        type=float,
        help="score on this fraction of the training texts held out (stratified, drawn "
        "with the seed: a dev split for choosing settings), not on test",
    )
    parser.add_argument("--device", default="cpu")


def build(cls: type, encoder: str, args: argparse.Namespace, seed: int, **params: Any) -> Any:
    """A fine-tuned text classifier of class ``cls`` with the suite's training settings
    (passed through :func:`benchmarks._data.training_settings`), mean pooling and
    ``params``."""
    extra = {}
    if getattr(args, "weight_decay", None) is not None:
        extra["weight_decay"] = args.weight_decay
    training = _data.training_settings(
        cls,
        max_epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        device=args.device,
        random_state=seed,
        **extra,
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
    if getattr(args, "dev_fraction", None):
        X, y, X_test, y_test = _dev_split(X, y, args.dev_fraction, seed)
    if n_test and len(X_test) > n_test:
        idx = np.sort(rng.permutation(len(X_test))[:n_test])
        X_test, y_test = [X_test[i] for i in idx], y_test[idx]
    return {"X": X, "y": y, "X_test": X_test, "y_test": y_test}


def _dev_split(X: list, y: np.ndarray, fraction: float, seed: int) -> tuple:
    """Train and dev parts of the training texts: ``fraction`` of each class held out
    (drawn with ``seed``; unstratified when a class has a single text)."""
    from sklearn.model_selection import train_test_split

    if not 0 < fraction < 1:
        raise SystemExit(f"--dev-fraction must be between 0 and 1 (exclusive), got {fraction}")
    counts = np.unique(y, return_counts=True)[1]
    train, dev = train_test_split(
        np.arange(len(X)),
        test_size=fraction,
        random_state=seed,
        stratify=y if counts.min() >= 2 else None,
    )
    train, dev = np.sort(train), np.sort(dev)
    return [X[i] for i in train], y[train], [X[i] for i in dev], y[dev]


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
    resume = _Resume(
        getattr(args, "checkpoint_dir", None),
        getattr(args, "budget", None),
        run_settings(args, extendable=("datasets", "rows")),
    )
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
                key = f"{name}/{row}/seed{seed}"
                kept = resume.fits.get(key)
                if kept is not None:
                    runs += kept
                    continue
                clf = make_estimator(encoder, args, seed, rows[row])
                if not resume.prepare(clf, key):
                    continue
                start = time.perf_counter()
                fit_complete(clf, data["X"], data["y"])
                fit_s = resume.seconds(key, time.perf_counter() - start)
                if not resume.complete(clf, key, args.epochs):
                    continue
                epochs = args.epochs
                scored = predict_rows(clf, row) if predict_rows else {row: {}}
                records = []
                for out_row, params in scored.items():
                    if params:
                        clf.set_params(**params)
                    record = {"dataset": name, "row": out_row, "seed": seed, "fit_s": fit_s}
                    record["s_per_epoch"] = fit_s / max(epochs, 1)
                    record.update(scores(clf, data["X_test"], data["y_test"]))
                    record["n_train"] = len(data["X"])
                    record["n_scored"] = len(data["X_test"])
                    records.append(record)
                    print(f"{name} / {out_row} / seed {seed}: acc {record['accuracy']:.2f}")
                resume.save(key, records)
                runs += records
    resume.finish()
    config = {
        k: getattr(args, k)
        for k in ("epochs", "batch_size", "max_length", "learning_rate", "shots", "device")
    }
    split = "test"
    if getattr(args, "dev_fraction", None):
        config["dev_fraction"] = args.dev_fraction
        split = f"dev ({args.dev_fraction} of the training texts held out, per seed)"
    config["scored_split"] = split
    if getattr(args, "weight_decay", None) is not None:
        config["weight_decay"] = args.weight_decay
    config["encoder"] = encoder_name if texts_for_vocab else None
    return {
        "config": config,
        "tables": [
            {
                "title": "Accuracy and macro-F1",
                "caption": f"x100 on the {split} split; seconds per epoch of the fit.",
                "columns": ["dataset", "row", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["dataset", "row"], METRICS),
            }
        ],
        "runs": runs,
    }


class _Resume:
    """The bookkeeping of ``--checkpoint-dir`` / ``--budget``: finished fits' records, the
    seconds of unfinished ones, and the deadline. Without a folder it does nothing."""

    def __init__(self, folder: str | None, budget: float | None, settings: dict) -> None:
        if budget is not None and folder is None:
            raise SystemExit("--budget needs --checkpoint-dir (where the run resumes from)")
        self.folder = None if folder is None else Path(folder)
        self.deadline = None if budget is None else time.monotonic() + budget
        self.fits = FinishedFits(self.folder, settings)
        self.spent: dict[str, float] = {}
        self.pending: list[str] = []
        self.started = False
        if self.folder is not None:
            spent = self.folder / "seconds.json"
            if spent.exists():
                self.spent = json.loads(spent.read_text())

    def prepare(self, clf: Any, key: str) -> bool:
        """Point ``clf`` at its checkpoint and the time left; False when none is left."""
        if self.folder is None:
            return True
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and left <= 0:
            if self.started:
                self.pending.append(key)
                return False
            left = 1e-6  # each session trains at least one step: reruns always progress
        self.started = True
        clf.set_params(
            training__checkpoint_dir=str(self.folder / key.replace("/", "__").replace(" ", "_")),
            training__max_time=left,
        )
        return True

    def seconds(self, key: str, wall_s: float) -> float:
        """This fit's seconds over all its sessions."""
        if self.folder is None:
            return wall_s
        self.spent[key] = self.spent.get(key, 0.0) + wall_s
        (self.folder / "seconds.json").write_text(json.dumps(self.spent, indent=1))
        return self.spent[key]

    def complete(self, clf: Any, key: str, epochs: int) -> bool:
        """Whether the fit ran all its epochs (not stopped by the budget)."""
        if self.folder is None or len(getattr(clf, "history_", [])) >= epochs:
            return True
        self.pending.append(key)
        print(f"{key}: stopped by --budget after {clf.n_steps_} steps; kept for the next run")
        return False

    def save(self, key: str, records: list[dict]) -> None:
        self.fits.save(key, records)

    def finish(self) -> None:
        if self.pending:
            raise SystemExit(
                f"--budget reached with {len(self.pending)} fit(s) unfinished "
                f"({', '.join(self.pending)}); run the same command again to resume from "
                f"{self.folder}"
            )
