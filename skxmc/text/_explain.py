"""What the neural classifiers' ``explain`` methods share: a training text near a query
(:class:`Neighbor`), the check of ``explain``'s ``k``, and an exact cosine search of the
nearest training texts of one class."""

from __future__ import annotations

import dataclasses
from numbers import Integral
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Neighbor", "check_explain_k", "explanation_dict", "nearest_of_class"]


class Neighbor(NamedTuple):
    """A training text near a text being explained.

    :meth:`skxmc.KNNBertClassifier.explain` lists the memory entries among the
    ``n_neighbors`` that vote for a text; :meth:`skxmc.SharpReCLClassifier.explain` the
    nearest training texts of each explained class.

    Attributes
    ----------
    training_row : int
        Its training text: a position in the ``X`` given to ``fit``.
    similarity : float
        Cosine similarity to the text (larger is closer).
    weight : float
        The text's scaled ``sample_weight`` (1 after an unweighted fit); in KNN-BERT, its
        vote.
    """

    training_row: int
    similarity: float
    weight: float


def explanation_dict(explanation: Any) -> dict:
    """A per-class explanation dataclass as plain Python values: its fields, the label as a
    Python scalar when it is a numpy one, ``neighbors`` as a list of dicts."""
    out = {f.name: getattr(explanation, f.name) for f in dataclasses.fields(explanation)}
    if isinstance(out["label"], np.generic):
        out["label"] = out["label"].item()
    out["neighbors"] = [n._asdict() for n in out["neighbors"]]
    return out


def check_explain_k(k: Any, n_classes: int) -> int:
    """``explain``'s ``k`` checked (a positive int) and capped at ``n_classes``."""
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}.")
    return min(int(k), n_classes)


def nearest_of_class(
    similarities: np.ndarray, members: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` rows of ``members`` most similar to one query (``similarities``: of every
    training row), most similar first, ties to the lower row; ``(rows, similarities)``."""
    sims = similarities[members]
    if n < len(members):
        # a partial selection first: a class may hold most of a large training set
        cut = np.partition(sims, len(sims) - n)[len(sims) - n]
        keep = np.flatnonzero(sims >= cut)
        members, sims = members[keep], sims[keep]
    order = np.lexsort((members, -sims))[:n]
    return members[order], sims[order]
