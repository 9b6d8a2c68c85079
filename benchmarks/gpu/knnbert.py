"""KNN-BERT on one GPU in 10 minutes: the ``knnbert`` suite's sets and rows.

Paper (Sec. 4): BERT-base (and RoBERTa-large), Adam at lr 2e-5, batch 8, the
Transformers toolkit's defaults otherwise, a MoCo queue of keys, and the kNN vote mixed
with the linear head. Here lr 2e-5, 128 tokens, 3 epochs, the queue as the kNN memory
(the paper's form), with these reductions: all-MiniLM-L6-v2 (mean pooling, the only
encoder the device gets) instead of BERT-base, and batch 32 instead of 8 (four times
fewer steps, so that the four sets fit the budget). One fit of each row per set and seed;
KNN-BERT's fit is scored three ways (linear head, phi = 0.5, kNN only). Order: plain CE
and KNN-BERT on the four sets, then the in-batch SCL and SCL-MoCo baselines, seed after
seed, each fit started only when the budget still holds it. The sets travel whole.
"""

from __future__ import annotations

import argparse

from benchmarks.gpu import _textfit
from benchmarks.gpu._kit import Budget, Recorder
from benchmarks.suites import knnbert as suite

__all__ = ["ENCODER", "GENSIM", "PACK", "PACK_TINY", "SEEDS", "run"]

SEEDS = (0, 1, 2)
ENCODER, GENSIM = True, False
PACK = {folder: {"train": None, "test": None} for folder, _ in suite.DATASETS.values()}
PACK_TINY = {"trec": {"train": 400, "test": 100}}
MAIN = ["plain CE", "KNN-BERT"]
SETTINGS = {"epochs": 3, "batch_size": 32, "max_length": 128, "learning_rate": 2e-5}


def run(args: argparse.Namespace, budget: Budget, rec: Recorder) -> None:
    settings = argparse.Namespace(
        **SETTINGS, device=args.device, quick=args.tiny, shots=None, max_train=None, max_test=None
    )
    if args.tiny:
        settings.epochs, settings.batch_size, settings.max_length = 1, 16, 32
    names = ["trec"] if args.tiny else list(suite.DATASETS)
    baselines = [r for r in suite.ROWS if r not in MAIN]
    passes = [(names, MAIN)] if args.tiny else [(names, MAIN), (names, baselines)]
    rec.config.update({**vars(settings), "passes": passes})
    _textfit.run_passes(args, budget, rec, suite, settings, passes, {}, heads=suite.heads)
