"""Linear extreme multi-label models (XR-Linear and its building blocks)."""

from __future__ import annotations

from ._xrlinear import XRLinearClassifier

__all__ = ["XRLinearClassifier"]
