"""skxmc: scikit-learn-compatible extreme multi-label and imbalanced text classification."""

from __future__ import annotations

from typing import Any

from ._lazy import LAZY as _LAZY
from ._lazy import public_attribute as _public_attribute
from ._version import __version__

# Every public name is imported on first use. Estimators built on torch / transformers so that
# the linear XMC path does not pay torch's import time and ~180 MB of memory, and works with
# the core install alone (without the [text] extra their modules raise an ImportError that
# gives the pip command, skxmc._optional). The core names so that ``import skxmc`` (the CLI's
# --help, __version__, a look at the API) does not load scikit-learn (~100 MB with the pandas
# it imports) and numba (~45 MB) before something needs them (benchmarks/startup_cost.py).

__all__ = [
    "HierarchicalLabelTree",
    "KNNBertClassifier",
    "Label2VecTransformer",
    "LabelSet",
    "MatchXMLClassifier",
    "MultiStageMatcher",
    "RankerEnsemble",
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
        value = _public_attribute(name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'skxmc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
