"""Where each public name of ``skxmc`` lives (imported on first use).

In a module of its own, so that the package root and the persistence layer (which must
find a saved estimator's class) share one table without one importing the other.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LAZY", "public_attribute"]

LAZY = {
    "HierarchicalLabelTree": ".tree",
    "KNNBertClassifier": ".knnbert",
    "Label2VecTransformer": ".label2vec",
    "LabelSet": ".labels",
    "MatchXMLClassifier": ".matchxml",
    "MultiStageMatcher": ".matchxml",
    "SNMClassifier": ".snm",
    "RankerEnsemble": ".ensemble",
    "SharpReCLClassifier": ".sharprecl",
    "XRLinearClassifier": ".linear",
    "as_label_sets": ".labels",
    "describe": ".io",
    "load": ".io",
    "save": ".io",
    "warmup": "._warmup",
}


def public_attribute(name: str) -> Any:
    """Import the module that defines the public name ``name`` and return the object."""
    return getattr(importlib.import_module(LAZY[name], "skxmc"), name)
