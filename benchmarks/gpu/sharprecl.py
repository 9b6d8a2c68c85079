"""SharpReCL on one GPU in 10 minutes: the ``sharprecl`` suite's sets and rows.

Paper (Sec. 5.1): BERT-base-uncased, AdamW at lr 5e-5, weight decay 5e-4, batch 128,
SCL temperature from {0.3, 0.5, 1}, 20 hard positives and negatives per class, 10 / 500
mixup positives and negatives, mu = 1. Here the same optimiser settings and the
estimator's defaults for the rest, with these reductions: all-MiniLM-L6-v2 (mean
pooling; 6 layers of width 384, the only encoder the device gets) instead of BERT-base,
3 epochs (the paper gives none), 128 tokens, the temperature at its default (0.5, not
chosen). Order: the comparison rows (plain CE, SharpReCL, logit-adjusted CE) on the six
sets, then the ablations (Table 4's "w/o" rows and one view), seed after seed, each fit
started only when the budget still holds it. The sets travel whole (4 MiB of texts).
"""

from __future__ import annotations

import argparse

from benchmarks.gpu import _textfit
from benchmarks.gpu._kit import Budget, Recorder
from benchmarks.suites import sharprecl as suite

__all__ = ["ENCODER", "GENSIM", "PACK", "PACK_TINY", "SEEDS", "run"]

SEEDS = (0, 1, 2)
ENCODER, GENSIM = True, False
_FOLDERS = sorted({folder for folder, _ in suite.DATASETS.values()})
PACK = {f: {"train": None, "test": None} for f in _FOLDERS}
PACK_TINY = {f: {"train": 400, "test": 100} for f in ("trec",)}
MAIN = ["plain CE", "SharpReCL", "logit-adjusted CE"]
SETTINGS = {"epochs": 3, "batch_size": 128, "max_length": 128, "learning_rate": 5e-5}


def run(args: argparse.Namespace, budget: Budget, rec: Recorder) -> None:
    settings = argparse.Namespace(
        **SETTINGS, device=args.device, quick=args.tiny, shots=None, max_train=None, max_test=None
    )
    if args.tiny:
        settings.epochs, settings.batch_size, settings.max_length = 1, 16, 32
    names = ["trec_ir50"] if args.tiny else list(suite.DATASETS)
    ablations = [r for r in suite.ROWS if r not in MAIN]
    passes = [(names, MAIN)] if args.tiny else [(names, MAIN), (names, ablations)]
    rec.config.update({**vars(settings), "weight_decay": 5e-4, "passes": passes})
    extra = {"training__weight_decay": 5e-4}
    _textfit.run_passes(args, budget, rec, suite, settings, passes, extra)
