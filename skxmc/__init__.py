"""skxmc: scikit-learn-compatible extreme multi-label and imbalanced text classification."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0.dev0"

from ._labels import LabelSet, as_label_sets
from ._numba import warmup
from ._persistence import describe, load, save
from .label2vec import Label2VecTransformer
from .linear import XRLinearClassifier
from .tree import HierarchicalLabelTree

# Estimators built on torch / transformers are imported on first use, so that the linear
# XMC path (``import skxmc``; XRLinearClassifier) does not pay torch's import time and
# ~180 MB of memory, and works with the core install alone: without the [text] extra, their
# modules raise an ImportError that gives the pip command (skxmc._optional).
_LAZY = {
    "KNNBertClassifier": ".knnbert",
    "MatchXMLClassifier": ".matchxml",
    "SNMClassifier": ".snm",
    "SharpReCLClassifier": ".sharprecl",
}

__all__ = [
    "HierarchicalLabelTree",
    "KNNBertClassifier",
    "Label2VecTransformer",
    "LabelSet",
    "MatchXMLClassifier",
    "SNMClassifier",
    "SharpReCLClassifier",
    "XRLinearClassifier",
    "__version__",
    "as_label_sets",
    "describe",
    "load",
    "save",
    "warmup",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'skxmc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
