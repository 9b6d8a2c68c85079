"""KNN-BERT against plain fine-tuning and the paper's baselines (in-batch SCL, SCL-MoCo).

One KNN-BERT fit per seed is scored three ways: its linear head (``knn_weight=0``), the
paper's vote (``0.5``) and the kNN vote alone (``1``). Its kNN memory is the paper's, the
queue at the end of training (``knn_memory="queue"``); the row ``KNN-BERT, training
texts`` fits it again with every training text as the memory (``knn_memory="train"``, what
the tables of 26aef59 used), so that the main table has both memories side by side (its
heads are the vote ones: the linear head does not read the memory). Accuracy (x100, mean
± sample std over the seeds), seconds per epoch and milliseconds per predicted text;
``--shots N`` for the few-shot setting (N training texts per class, drawn per seed).
Replaces
``knnbert.py`` (its swap of the kNN memory between the training texts and the MoCo queue
is not ported: git history keeps it).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks import _textclf

SEEDS = (0, 1, 2, 3, 4)
DATASETS = {
    "sst2": ("sst2", None),
    "trec": ("trec", None),
    "agnews": ("ag_news_test", None),
    "mr": ("mr", None),
    "imdb": ("imdb", None),  # the third set of the 100-shot table (docs)
}
ROWS: dict[str, dict[str, Any]] = {
    "plain CE": {"contrastive_weight": 0.0, "knn_weight": 0.0},
    "KNN-BERT": {},
    "CE + in-batch SCL": {"contrastive_keys": "batch", "knn_weight": 0.0},
    "SCL-MoCo": {"contrastive_keys": "moco", "knn_weight": 0.0},
    "KNN-BERT, training texts": {"knn_memory": "train"},
}
HEADS = {"KNN-BERT linear head": 0.0, "KNN-BERT phi=0.5": 0.5, "kNN only": 1.0}
# the same model with the training texts as its memory: the heads that read the memory
TRAIN_MEMORY_HEADS = {"KNN-BERT phi=0.5, training texts": 0.5, "kNN only, training texts": 1.0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _textclf.add_arguments(parser, DATASETS, ROWS)


def make_estimator(encoder: str, args: argparse.Namespace, seed: int, row: dict) -> Any:
    """The only place that builds a KNN-BERT estimator (training settings included)."""
    from skxmc import KNNBertClassifier

    params = {"knn_memory": "queue", **row}
    if args.quick:
        params["queue_size"] = 256  # 120 texts: a paper-sized queue is all start-up cost
    return _textclf.build(KNNBertClassifier, encoder, args, seed, **params)


def heads(clf: Any, row: str) -> dict[str, dict]:
    if row == "KNN-BERT, training texts":
        return {name: {"knn_weight": phi} for name, phi in TRAIN_MEMORY_HEADS.items()}
    if row != "KNN-BERT":
        return {row: {}}
    return {name: {"knn_weight": phi} for name, phi in HEADS.items()}


def run(args: argparse.Namespace) -> dict:
    return _textclf.run(args, DATASETS, ROWS, make_estimator, heads)
