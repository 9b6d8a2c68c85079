"""Explanations of XR-Linear predictions: each predicted label's tree path with the score
of every node on it, and the features that contribute most to the label's ranker.

A label's path score is built layer by layer from the linear scores of the nodes on its
path (``[x, bias] . w``) by the post-processor, exactly as the beam search combines them
(see :mod:`skxmc.linear._beam`): ``"l3-hinge"`` multiplies ``exp(-max(1 - v, 0) ** 3)``
along the path, ``"sigmoid"`` multiplies ``1 / (1 + exp(-v))``, ``"noop"`` keeps the leaf's
raw score. A node's linear score is the sum of the contributions ``w_f * x_f`` of the
features of ``x`` and of the bias term ``bias * w_bias``; the largest of those
contributions of the label's own ranker (the leaf) say why it scored as it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from .._kernels.beam import _combine
from .._ranking import topk_from_sparse
from ..labels import LabelSpace
from ._beam import _POST_CODES

__all__ = [
    "ExplainMixin",
    "FeatureContribution",
    "LabelExplanation",
    "NodeScore",
    "check_explain_args",
    "explain_rows",
]


class FeatureContribution(NamedTuple):
    """One feature's share ``weight * value`` of a node's linear score.

    Attributes
    ----------
    feature : int
        Column of ``X``.
    name : str or None
        The feature's name when known (``feature_names``), else None.
    value : float
        The feature's value in the sample.
    weight : float
        The node's weight of the feature.
    contribution : float
        ``weight * value``.
    """

    feature: int
    name: str | None
    value: float
    weight: float
    contribution: float


class NodeScore(NamedTuple):
    """One node of a label's path through the tree.

    Attributes
    ----------
    layer : int
        Layer of the node (0: the first layer under the root; the last: the labels).
    node : int
        Index of the node within its layer (a column of ``weights_[layer]``; at the last
        layer, the label's column in ``classes_``).
    score : float
        The node's linear score ``[x, bias] . w``.
    path_score : float
        Its score after the post-processor, combined with its parent's path score: the
        score the beam search ranks the node by. At the last layer it is the label's
        ``predict_topk`` score.
    features : tuple of FeatureContribution
        The node's largest feature contributions, for the inner nodes of a path when
        ``explain(..., node_features=True)``; empty otherwise (the label's own are
        :attr:`LabelExplanation.features`).
    """

    layer: int
    node: int
    score: float
    path_score: float
    features: tuple[FeatureContribution, ...] = ()

    def to_dict(self) -> dict:
        """The node as plain Python values.

        Returns
        -------
        dict
            The fields, ``features`` as a list of dicts.
        """
        return {**self._asdict(), "features": [f._asdict() for f in self.features]}


@dataclass(frozen=True)
class LabelExplanation:
    """Why a label was predicted for a sample.

    Attributes
    ----------
    label : object
        The label (an element of ``classes_``).
    score : float
        Its ``predict_topk`` score.
    path : tuple of NodeScore
        The nodes from the first layer down to the label, one per layer.
    features : tuple of FeatureContribution
        The features of the sample with the largest contributions (by absolute value,
        largest first) to the label's linear score, ``path[-1].score``.
    bias_contribution : float
        The bias term's share of that score, ``bias * w_bias``: with the contributions of
        every feature of the sample it sums to ``path[-1].score``.
    """

    label: Any
    score: float
    path: tuple[NodeScore, ...]
    features: tuple[FeatureContribution, ...]
    bias_contribution: float

    def to_dict(self) -> dict:
        """The explanation as plain Python values (JSON-ready when the label is).

        Returns
        -------
        dict
            ``label``, ``score``, ``path`` (a list of :meth:`NodeScore.to_dict`),
            ``features`` (a list of dicts with the fields of
            :class:`FeatureContribution`) and ``bias_contribution``.
        """
        label = self.label.item() if isinstance(self.label, np.generic) else self.label
        return {
            "label": label,
            "score": self.score,
            "path": [node.to_dict() for node in self.path],
            "features": [f._asdict() for f in self.features],
            "bias_contribution": self.bias_contribution,
        }

    def __str__(self) -> str:
        path = " > ".join(f"{n.node} ({n.score:+.3f} -> {n.path_score:.3f})" for n in self.path)
        feats = ", ".join(
            f"{f.name if f.name is not None else f.feature}: {f.contribution:+.3f}"
            for f in self.features
        )
        return f"{self.label!r} score {self.score:.4f}\n  path: {path}\n  features: {feats}"


def check_explain_args(n_features: Any, feature_names: Any, n_features_in: int) -> Any:
    """Validate ``explain``'s ``n_features`` and ``feature_names``; the names as an array
    (or None)."""
    if isinstance(n_features, bool) or not isinstance(n_features, Integral) or n_features < 0:
        raise ValueError(
            f"n_features must be an int >= 0 (features listed per label), got {n_features!r}."
        )
    if feature_names is None:
        return None
    names = np.asarray(feature_names, dtype=object)
    if names.ndim != 1 or names.shape[0] != n_features_in:
        raise ValueError(
            f"feature_names must hold one name per feature of X ({n_features_in}), got "
            f"shape {names.shape}."
        )
    return names


def _linear_score(values: np.ndarray, weights: np.ndarray, bias_term: np.float32) -> np.float32:
    """``[x, bias] . w`` summed as the beam-search kernels sum it: in float32, feature by
    feature in increasing id order, the bias term last (so that the path scores match
    theirs to the last bit)."""
    acc = np.float32(0.0)
    for p in (weights.astype(np.float32) * values.astype(np.float32)).tolist():
        acc = np.float32(acc + np.float32(p))
    return np.float32(acc + bias_term)


def _column(W: sp.csc_matrix, node: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = W.indptr[node], W.indptr[node + 1]
    return W.indices[lo:hi], W.data[lo:hi]


def _node_terms(
    x_idx: np.ndarray, x_val: np.ndarray, W: sp.csc_matrix, node: int, bias: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.float32]:
    """The features shared by the sample and the node's weights (ids, values, weights),
    and the bias term (float32)."""
    w_idx, w_val = _column(W, node)
    n_rows = W.shape[0]
    bias_w = w_val[w_idx == n_rows - 1]
    bias_term = np.float32(bias) * np.float32(bias_w[0] if bias_w.size else 0.0)
    common, xi, wi = np.intersect1d(x_idx, w_idx, assume_unique=True, return_indices=True)
    return common, x_val[xi], w_val[wi], np.float32(bias_term)


def _top_features(
    feats: np.ndarray,
    vals: np.ndarray,
    ws: np.ndarray,
    n_features: int,
    feature_names: np.ndarray | None,
) -> tuple[FeatureContribution, ...]:
    """The ``n_features`` largest contributions ``weight * value`` by absolute value,
    largest first (ties: lower feature id first)."""
    contrib = vals * ws
    order = np.argsort(-np.abs(contrib), kind="stable")[:n_features]
    return tuple(
        FeatureContribution(
            int(feats[j]),
            None if feature_names is None else str(feature_names[feats[j]]),
            float(vals[j]),
            float(ws[j]),
            float(contrib[j]),
        )
        for j in order
    )


def explain_rows(
    X: sp.csr_matrix,
    label_columns: np.ndarray,
    label_ids: np.ndarray,
    label_scores: np.ndarray,
    *,
    weights: list,
    chain: list,
    bias: float,
    post_processor: str,
    n_features: int,
    feature_names: np.ndarray | None,
    node_features: bool = False,
) -> list[list[LabelExplanation]]:
    """Explanations of the given labels of every row of ``X``.

    Parameters
    ----------
    X : csr_matrix of float32, shape (n, n_features_in)
        Samples, canonical format.
    label_columns : ndarray of int, shape (n, k)
        Columns of the labels to explain (``-1``: an empty slot, skipped).
    label_ids, label_scores : ndarray of shape (n, k)
        The labels and their ``predict_topk`` scores.
    weights, chain : list
        ``weights_`` and ``tree_.cluster_chain_`` of the model.
    bias : float
        The bias feature's value.
    post_processor : str
        The model's post-processor.
    n_features : int
        Features listed per label.
    feature_names : ndarray of object or None
        One name per column of ``X``.
    node_features : bool, default=False
        List the top features of the inner nodes of each path too.

    Returns
    -------
    list of list of LabelExplanation
        Per row, its labels in the order given.
    """
    # the parent of every node of layer t (a column of layer t - 1); layer 0: the root
    parent_of = [np.asarray(C.indices, dtype=np.int64) for C in chain]
    code = _POST_CODES[post_processor]
    n_layers = len(weights)
    out: list[list[LabelExplanation]] = []
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        x_idx, x_val = X.indices[lo:hi], X.data[lo:hi]
        row: list[LabelExplanation] = []
        for col, label, score in zip(label_columns[i], label_ids[i], label_scores[i]):
            if col < 0:
                continue
            nodes = [int(col)]
            for t in range(n_layers - 1, 0, -1):
                nodes.append(int(parent_of[t][nodes[-1]]))
            nodes.reverse()
            path = []
            parent_score = np.float32(1.0)
            for t, node in enumerate(nodes):
                feats, vals, ws, bias_term = _node_terms(x_idx, x_val, weights[t], node, bias)
                raw = _linear_score(vals, ws, bias_term)
                parent_score = np.float32(_combine(raw, parent_score, code))
                top = _top_features(feats, vals, ws, n_features, feature_names)
                leaf = t == n_layers - 1
                node_top = top if node_features and not leaf else ()
                path.append(NodeScore(t, node, float(raw), float(parent_score), node_top))
            row.append(LabelExplanation(label, float(score), tuple(path), top, float(bias_term)))
        out.append(row)
    return out


class ExplainMixin:
    """:meth:`explain` of XRLinearClassifier."""

    def explain(
        self,
        X: Any,
        k: int = 5,
        *,
        n_features: int = 5,
        feature_names: Any = None,
        labels: Any = None,
        node_features: bool = False,
    ) -> list[list[LabelExplanation]]:
        """Why each sample got its top labels: the tree path of each label with every
        node's score, and the features that contribute most to the label's ranker.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Samples.
        k : int, default=5
            Labels explained per sample: the ``k`` that ``predict_topk(X, k)`` returns,
            in its order.
        n_features : int, default=5
            Features listed per label: those of the sample with the largest contributions
            ``weight * value`` (by absolute value) to the label's linear score; 0 lists
            none.
        feature_names : array-like of str, default=None
            One name per column of ``X``, ``n_features_in_`` of them (e.g. a vectoriser's
            ``get_feature_names_out()``; :meth:`skxmc.pipeline.Pipeline.explain` passes
            them). None: ``feature_names_in_`` when ``fit`` saw them, else no names.
        labels : array-like, default=None
            Explain these labels (identifiers from ``classes_``) instead of the beam's,
            as ``predict_topk(X, k, labels=labels)`` ranks them: their ``k`` best by
            exact path score. Answers "why not this label?".
        node_features : bool, default=False
            Also list the top ``n_features`` contributions of every inner node of each
            path (``NodeScore.features``): what led the beam into each cluster.

        Returns
        -------
        list of list of LabelExplanation
            Per sample, one :class:`~skxmc.linear.LabelExplanation` per label, best
            first (fewer than ``k`` when the beam reached fewer labels). The last node of
            each ``path`` is the label; its ``path_score`` is the label's ``score``.

        Examples
        --------
        A pipeline names the features by the vectoriser's terms:

        >>> from sklearn.feature_extraction.text import TfidfVectorizer
        >>> from skxmc import XRLinearClassifier
        >>> from skxmc.pipeline import make_pipeline
        >>> docs = ["red apple pie", "green apple tart", "fast red car", "old blue car",
        ...         "ripe pear jam", "new electric bike"]
        >>> kinds = ["food", "food", "vehicle", "vehicle", "food", "vehicle"]
        >>> pipe = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(docs, kinds)
        >>> why = pipe.explain(["green apple pie"], k=1, n_features=2)[0][0]
        >>> why.label, [f.name for f in why.features]
        ('food', ['apple', 'pie'])
        >>> why.path[-1].path_score == why.score  # the last node is the label
        True
        """
        check_is_fitted(self)
        weights = self.weights_  # a predict-only model raises here, naming compact()
        X = self._validate_X(X)
        names = check_explain_args(
            n_features,
            feature_names
            if feature_names is not None
            else getattr(self, "feature_names_in_", None),
            self.n_features_in_,
        )
        columns = self._label_columns(labels)
        k = self._resolve_k(k, columns)
        cache = self._search_cache
        if columns is None:
            scores = self._search(X, top_k=k, cache=cache)
        else:
            scores = self._selected(X, columns, top_k=k, cache=cache)
        idx, val = topk_from_sparse(scores, k)
        return explain_rows(
            X,
            idx,
            LabelSpace(cache.classes).labels_of(idx),
            val.astype(np.float32),
            weights=weights,
            chain=self.tree_.cluster_chain_,
            bias=self.bias,
            post_processor=self.post_processor,
            n_features=int(n_features),
            feature_names=names,
            node_features=bool(node_features),
        )
