"""skxmc: scikit-learn-compatible extreme multi-label and imbalanced text classification."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

__all__ = ["__version__"]
