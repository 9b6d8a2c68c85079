"""What the neural classifiers' ``explain`` methods share: a training text near a query
(:class:`Neighbor`), ``to_dict`` of their per-class explanations
(:class:`ExplanationMixin`), the check of ``explain``'s ``k``, and an exact cosine search
of the nearest training texts of each class (:func:`class_neighbors`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from numbers import Integral
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ExplanationMixin",
    "Neighbor",
    "check_explain_k",
    "class_neighbors",
    "nearest_of_class",
    "unit_rows",
]

# Query texts whose similarities to every training text are held at once in
# class_neighbors (a block of 256 x 100,000 training texts is 100 MB of float32).
_BLOCK = 256


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


class ExplanationMixin:
    """``to_dict`` of the per-class explanation dataclasses (fields ``label`` and
    ``neighbors``, a tuple of :class:`Neighbor`)."""

    def to_dict(self) -> dict:
        """The explanation as plain Python values (JSON-ready when the label is).

        Returns
        -------
        dict
            The fields, ``neighbors`` as a list of dicts.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if isinstance(out["label"], np.generic):  # a Python scalar, for json
            out["label"] = out["label"].item()
        out["neighbors"] = [n._asdict() for n in out["neighbors"]]
        return out


def check_explain_k(k: Any, n_classes: int | None, name: str = "k") -> int:
    """``explain``'s ``k`` (or another count of ``explain``, named ``name``) checked (a
    positive int) and capped at ``n_classes`` (None: not capped)."""
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise ValueError(f"{name} must be a positive int, got {k!r}.")
    return int(k) if n_classes is None else min(int(k), n_classes)


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


def unit_rows(A: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """Rows of ``A`` scaled to unit norm, in float32 (a zero row stays zero); with
    ``in_place``, in ``A`` itself when it is float32 (the training embeddings: no second
    copy of n x hidden floats)."""
    A = np.asarray(A, dtype=np.float32)
    norms = np.linalg.norm(A, axis=1, keepdims=True)
    ok = norms > 0
    if in_place:
        np.divide(A, norms, out=A, where=ok)
        A[~ok[:, 0]] = 0
        return A
    return np.divide(A, norms, out=np.zeros_like(A), where=ok)


def class_neighbors(
    features: np.ndarray,
    embeddings: np.ndarray,
    targets: np.ndarray,
    rows: np.ndarray,
    weights: np.ndarray | None,
    n_classes: int,
    n: int,
) -> Iterator[Callable[[int], tuple[Neighbor, ...]]]:
    """The nearest training texts of each class, by cosine, for each text explained.

    Parameters
    ----------
    features : numpy.ndarray of shape (n_texts, dim)
        The embeddings of the texts explained (any norm).
    embeddings : numpy.ndarray of float32 of shape (n_train, dim)
        The training texts' embeddings, unit rows (:func:`unit_rows`).
    targets : numpy.ndarray of int of shape (n_train,)
        Their classes (indices below ``n_classes``).
    rows : numpy.ndarray of int of shape (n_train,)
        Their positions in the ``X`` given to ``fit`` (:attr:`Neighbor.training_row`).
    weights : numpy.ndarray of shape (n_train,) or None
        Their sample weights (None: 1 each).
    n_classes : int
    n : int
        Neighbours per class (fewer when the class has fewer texts).

    Yields
    ------
    neighbors_of : callable
        One per text, in order: ``neighbors_of(c)`` is the tuple of :class:`Neighbor`
        of class ``c`` nearest to the text, nearest first.
    """
    queries = unit_rows(features)
    members = [np.flatnonzero(targets == c) for c in range(n_classes)]
    for start in range(0, len(queries), _BLOCK):
        for similarities in queries[start : start + _BLOCK] @ embeddings.T:
            yield functools.partial(_neighbors_of_class, similarities, members, rows, weights, n)


def _neighbors_of_class(
    similarities: np.ndarray,
    members: list[np.ndarray],
    rows: np.ndarray,
    weights: np.ndarray | None,
    n: int,
    c: int,
) -> tuple[Neighbor, ...]:
    found, near = nearest_of_class(similarities, members[c], n)
    return tuple(
        Neighbor(int(rows[r]), float(sim), 1.0 if weights is None else float(weights[r]))
        for r, sim in zip(found, near)
    )
