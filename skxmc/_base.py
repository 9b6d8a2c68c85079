"""What every multi-label ranking estimator shares (XR-Linear, MatchXML, SNM).

The contract of DESIGN.md: ``predict_topk(X, k)`` returns ``(labels, scores)``,
``score`` is precision@1, ``top_k`` larger than the label set is clipped with a warning,
and the tags say multi-label output with a required target.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np

from .metrics import precision_at_k

__all__ = ["MultiLabelRankerMixin"]


class MultiLabelRankerMixin:
    """Mixin (before ``BaseEstimator`` in the bases) of the multi-label rankers.

    Needs ``classes_``, a ``top_k`` parameter and ``predict_topk(X, k)``.
    """

    def _resolve_k(self, k: int | None) -> int:
        """``k`` (``top_k`` when None) validated, and clipped with a warning to the number
        of labels."""
        k = self.top_k if k is None else k
        if isinstance(k, bool) or not isinstance(k, (Integral, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}.")
        n_labels = len(self.classes_)
        if k > n_labels:
            warnings.warn(
                f"top_k={k} exceeds the {n_labels} labels; returning {n_labels} per sample.",
                UserWarning,
                stacklevel=3,
            )
            k = n_labels
        return int(k)

    def score(self, X: Any, y: Any, sample_weight: None = None) -> float:
        """Precision@1 of the predictions against the labels ``y`` (any label format
        ``fit`` accepts; labels unseen in ``fit`` count as misses)."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by score (precision@1).")
        return precision_at_k(y, self.predict_topk(X, k=1), k=1, classes=self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.target_tags.required = True
        # Y: label collections, a 0/1 indicator, or a 1-D target (one label per sample)
        tags.target_tags.multi_output = True
        return tags
