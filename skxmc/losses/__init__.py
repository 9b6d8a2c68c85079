"""Losses shared by the neural estimators (torch functions usable on their own).

Submodules: ``_supcon`` (supervised contrastive losses with a key queue, KNN-BERT),
``_moco`` (MoCo contrastive loss with one positive key, the SCL-MoCo baseline),
``_rebalanced`` (class-prior-weighted contrastive learning with prototypes, SharpReCL),
``_imbalanced`` (focal and Dice classification losses, SharpReCL's Table 8).
Also ``_ordered`` (ordered weighted losses, POWL / BOWL, with their margin functions) and
``_snm`` (the top-k stochastic negative mining sampler; SNMClassifier, MatchXML).
"""

from __future__ import annotations

from ._imbalanced import dice_loss, focal_loss
from ._matching import candidate_scores, text_label_matching_loss, weighted_squared_hinge
from ._moco import moco_contrastive_loss
from ._ordered import (
    MARGIN_FUNCTIONS,
    check_owl_weights,
    margin_loss,
    ordered_weighted_loss,
    top_k_weights,
)
from ._rebalanced import (
    class_prior_weights,
    effective_number_weights,
    logit_adjusted_cross_entropy,
    rebalanced_contrastive_loss,
    rebalanced_targets,
)
from ._snm import (
    MinedNegatives,
    pad_positives,
    sample_negatives,
    sample_shared_negatives,
    top_k_negatives,
)
from ._supcon import batch_contrastive_loss, queue_contrastive_loss, select_queue_positives

__all__: list[str] = [
    "MARGIN_FUNCTIONS",
    "MinedNegatives",
    "batch_contrastive_loss",
    "candidate_scores",
    "check_owl_weights",
    "class_prior_weights",
    "dice_loss",
    "effective_number_weights",
    "focal_loss",
    "logit_adjusted_cross_entropy",
    "margin_loss",
    "moco_contrastive_loss",
    "ordered_weighted_loss",
    "pad_positives",
    "queue_contrastive_loss",
    "rebalanced_contrastive_loss",
    "rebalanced_targets",
    "sample_negatives",
    "sample_shared_negatives",
    "select_queue_positives",
    "text_label_matching_loss",
    "top_k_negatives",
    "top_k_weights",
    "weighted_squared_hinge",
]
