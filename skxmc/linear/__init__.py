"""Linear extreme multi-label models (XR-Linear and its building blocks)."""

from __future__ import annotations

from ._explain import FeatureContribution, LabelExplanation, NodeScore
from ._problem import LayerGroups
from ._solver import fit_layer
from ._stream import predict_topk_iter, row_blocks
from ._xrlinear import XRLinearClassifier

__all__ = [
    "FeatureContribution",
    "LabelExplanation",
    "LayerGroups",
    "NodeScore",
    "XRLinearClassifier",
    "fit_layer",
    "predict_topk_iter",
    "row_blocks",
]
