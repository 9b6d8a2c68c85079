"""Losses shared by the neural estimators (torch functions usable on their own).

Submodules: ``_supcon`` (supervised contrastive losses with a key queue, KNN-BERT),
``_rebalanced`` (class-prior-weighted contrastive learning with prototypes, SharpReCL).
Text-label matching (MatchXML) and ordered weighted losses (stochastic negative mining)
join them with their estimators.
"""

from __future__ import annotations

from ._rebalanced import (
    effective_number_weights,
    logit_adjusted_cross_entropy,
    rebalanced_contrastive_loss,
    rebalanced_targets,
)
from ._supcon import queue_contrastive_loss, select_queue_positives

__all__: list[str] = [
    "effective_number_weights",
    "logit_adjusted_cross_entropy",
    "queue_contrastive_loss",
    "rebalanced_contrastive_loss",
    "rebalanced_targets",
    "select_queue_positives",
]
