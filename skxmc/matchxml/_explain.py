"""Explanations of MatchXML predictions: the ranker's explanation of each label (its path
through the refined tree, the features that contribute most) and how the label's linear
score splits over the blocks of the ranker's features."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..linear._explain import LabelExplanation, _node_terms

__all__ = ["FEATURE_BLOCKS", "MatchXMLExplanation", "block_contributions"]

#: The blocks of MatchXML's ranker features, in column order.
FEATURE_BLOCKS = ("tfidf", "sentence", "fine_tuned")


@dataclass(frozen=True)
class MatchXMLExplanation(LabelExplanation):
    """Why a label was predicted for a text (:meth:`MatchXMLClassifier.explain`).

    The ranker's :class:`~skxmc.linear.LabelExplanation` of the label (its ``path``
    through the ranker's tree, its top ``features``, named by the TF-IDF vocabulary and
    ``sentence[i]`` / ``fine_tuned[i]`` for the dimensions of the dense blocks), and the
    split of the label's linear score over the feature blocks.

    Attributes
    ----------
    label : object
        The label (an element of ``classes_``).
    score : float
        Its ``predict_topk`` score.
    path : tuple of NodeScore
        The nodes of the ranker's tree from the first layer down to the label.
    features : tuple of FeatureContribution
        The features with the largest contributions to the label's linear score.
    bias_contribution : float
        The bias term's share of that score.
    blocks : dict of str to float
        The share of each feature block in the label's linear score
        (``path[-1].score``): the sum of ``weight * value`` over the block's features, for
        ``"tfidf"``, ``"sentence"`` (static sentence embeddings, when used) and
        ``"fine_tuned"`` (the matcher's embedding times ``fine_tuned_weight``, when
        used). With ``bias_contribution`` they sum to the label's linear score.
    """

    blocks: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The explanation as plain Python values (JSON-ready when the label is).

        Returns
        -------
        dict
            :meth:`LabelExplanation.to_dict` and ``blocks``.
        """
        return {**super().to_dict(), "blocks": dict(self.blocks)}

    def __str__(self) -> str:
        blocks = ", ".join(f"{name} {value:+.3f}" for name, value in self.blocks.items())
        return f"{super().__str__()}\n  blocks: {blocks}, bias {self.bias_contribution:+.3f}"


def block_contributions(
    x: sp.csr_matrix, W: sp.csc_matrix, node: int, bias: float, bounds: Mapping[str, int]
) -> dict[str, float]:
    """Each block's share of node ``node``'s linear score on the one-row ``x``; ``bounds``:
    block name -> its end column (the blocks in column order)."""
    feats, vals, ws, _ = _node_terms(x.indices, x.data, W, node, bias)
    contrib = vals.astype(np.float64) * ws.astype(np.float64)
    out, start = {}, 0
    for name, end in bounds.items():
        out[name] = float(contrib[(feats >= start) & (feats < end)].sum())
        start = end
    return out


def with_blocks(
    explanation: LabelExplanation, label: Any, blocks: dict[str, float]
) -> MatchXMLExplanation:
    """The ranker's explanation of a label (a column) as a :class:`MatchXMLExplanation`."""
    return MatchXMLExplanation(
        label,
        explanation.score,
        explanation.path,
        explanation.features,
        explanation.bias_contribution,
        blocks,
    )
