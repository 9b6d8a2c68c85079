"""skxmc: scikit-learn-compatible extreme multi-label and imbalanced text classification."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from ._persistence import load
from .label2vec import Label2VecTransformer
from .linear import XRLinearClassifier
from .tree import HierarchicalLabelTree

__all__ = [
    "HierarchicalLabelTree",
    "Label2VecTransformer",
    "XRLinearClassifier",
    "__version__",
    "load",
]
