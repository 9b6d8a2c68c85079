"""SharpReCL against plain and logit-adjusted fine-tuning, and its ablations.

Accuracy and macro-F1 (x100, mean ± sample std over the seeds) and seconds per epoch on
the paper's sets: Ohsumed titles and TREC as shipped by SharpReCL (with their augmented
views), R52, and ir=50 versions of TREC, Biomedical and CR (made with
:func:`skxmc.datasets.make_imbalanced`). Encoder: all-MiniLM-L6-v2 (mean pooling); the
paper used BERT-base. Every row trains on two views unless it says otherwise.
Replaces ``sharprecl.py`` and ``sharprecl_diagnosis.py`` (its dev-split selection and
``--tune`` are not ported: git history keeps them).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks import _textclf

SEEDS = (0, 1, 2)
DATASETS = {
    "sharprecl_ohsumed_titles": ("sharprecl_ohsumed_titles", None),
    "sharprecl_trec": ("sharprecl_trec", None),
    "r52": ("r52", None),
    "trec_ir50": ("trec", 50),
    "biomedical_ir50": ("biomedical", 50),
    "cr_ir50": ("cr", 50),
}
ROWS: dict[str, dict[str, Any]] = {
    "plain CE": {"contrastive_weight": 0.0, "logit_adjustment": 0.0, "augmentation": None},
    "SharpReCL": {},
    "logit-adjusted CE": {"contrastive_weight": 0.0, "augmentation": None},
    "SharpReCL 1 view": {"n_views": 1, "augmentation": None},
    "w/o SS": {"ablate": ("simple_sampling",)},
    "w/o HM": {"ablate": ("hard_mixup",)},
    "w/o delta_CL": {"ablate": ("prior_weighting",)},
    "w/o delta_CLS": {"logit_adjustment": 0.0},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _textclf.add_arguments(parser, DATASETS, ROWS)


def make_estimator(encoder: str, args: argparse.Namespace, seed: int, row: dict) -> Any:
    """The only place that builds a SharpReCL estimator (training settings included)."""
    from skxmc import SharpReCLClassifier

    return _textclf.build(SharpReCLClassifier, encoder, args, seed, **{"n_views": 2, **row})


def run(args: argparse.Namespace) -> dict:
    return _textclf.run(args, DATASETS, ROWS, make_estimator)
