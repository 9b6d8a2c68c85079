"""Rebalanced contrastive learning with class prototypes (SharpReCL, Li et al.).

Standalone torch functions: logit-adjusted cross-entropy (eq. 6), effective-number class
weights, the per-class rebalanced target sets built by simple-sampling and hard-mixup
around the prototypes (eqs. 8-10), and the class-weighted supervised contrastive loss over
anchors plus those targets (eq. 11).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "class_prior_weights",
    "effective_number_weights",
    "logit_adjusted_cross_entropy",
    "rebalanced_contrastive_loss",
    "rebalanced_targets",
]


def logit_adjusted_cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    log_prior: torch.Tensor,
    *,
    tau: float = 1.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy on ``logits + tau * log_prior`` (logit compensation, eq. 6).

    Training with the prior added and predicting with the raw logits makes the raw
    logits estimate a class-balanced posterior (Menon et al., 2021): rare classes are no
    longer under-predicted.

    Parameters
    ----------
    logits : torch.Tensor of shape (n, n_classes)
    targets : torch.Tensor of int64 of shape (n,)
    log_prior : torch.Tensor of shape (n_classes,)
        Log class frequencies of the training set.
    tau : float, default=1.0
        Strength of the adjustment; 0 gives the plain cross-entropy.
    reduction : {"mean", "sum", "none"}, default="mean"

    Returns
    -------
    loss : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import logit_adjusted_cross_entropy
    >>> logits = torch.zeros(2, 2)
    >>> prior = torch.tensor([0.8, 0.2]).log()
    >>> round(float(logit_adjusted_cross_entropy(logits, torch.tensor([1, 1]), prior)), 4)
    1.6094
    """
    adjusted = logits.float() + tau * log_prior.to(logits.device, torch.float32)
    return F.cross_entropy(adjusted, targets, reduction=reduction)


def effective_number_weights(
    class_counts: Sequence[int] | np.ndarray, beta: float = 0.9999
) -> np.ndarray:
    """Class weights ``(1 - beta) / (1 - beta ** n_c)``, normalised to mean 1.

    The "effective number of samples" weights of Cui et al. (2019), used by the SharpReCL
    reference code to weight each anchor's contrastive loss by its class: rare classes
    weigh more. ``beta -> 1`` tends to inverse frequency, ``beta = 0`` to uniform weights.

    Parameters
    ----------
    class_counts : array-like of int of shape (n_classes,)
        Training examples per class (all >= 1).
    beta : float, default=0.9999
        In [0, 1).

    Returns
    -------
    weights : numpy.ndarray of float32 of shape (n_classes,)

    Examples
    --------
    >>> from skxmc.losses import effective_number_weights
    >>> effective_number_weights([100, 10], beta=0.0).tolist()
    [1.0, 1.0]
    >>> w = effective_number_weights([100, 10]); bool(w[1] > 5 * w[0])
    True
    """
    counts = np.asarray(class_counts, dtype=np.float64)
    if counts.ndim != 1 or (counts < 1).any():
        raise ValueError("class_counts must be a 1-D array of counts >= 1.")
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be in [0, 1), got {beta}.")
    # 1 - beta**n computed as -expm1(n log beta): exact for beta close to 1.
    effective = (
        -np.expm1(counts * math.log(beta)) / (1.0 - beta) if beta > 0 else np.ones_like(counts)
    )
    weights = 1.0 / effective
    return (weights * len(weights) / weights.sum()).astype(np.float32)


def class_prior_weights(class_counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Class weights ``-log P_y``, the negative log class prior (SharpReCL, eq. 11).

    Eq. 11 of the SharpReCL paper multiplies each anchor's contrastive loss by
    ``-delta_y = -log P_y``: rare classes weigh more. With many classes the spread is
    small (the weights grow with the log of the inverse frequency); with two classes it
    is large, since the majority class's weight ``-log P`` tends to 0 as its share tends
    to 1. Not normalised, as in the paper.

    Parameters
    ----------
    class_counts : array-like of int of shape (n_classes,)
        Training examples per class (all >= 1).

    Returns
    -------
    weights : numpy.ndarray of float32 of shape (n_classes,)

    Examples
    --------
    >>> from skxmc.losses import class_prior_weights
    >>> [round(w, 4) for w in class_prior_weights([3, 1]).tolist()]
    [0.2877, 1.3863]
    """
    counts = np.asarray(class_counts, dtype=np.float64)
    if counts.ndim != 1 or (counts < 1).any():
        raise ValueError("class_counts must be a 1-D array of counts >= 1.")
    return (-np.log(counts / counts.sum())).astype(np.float32)


def _sample_members(mask: torch.Tensor, n: int) -> torch.Tensor:
    """For each row of a boolean (rows, m) mask with at least one True, ``n`` column
    indices drawn uniformly with replacement among the True ones."""
    weights = mask.float()
    return torch.multinomial(weights, n, replacement=True)


def _hard_mixup(
    features: torch.Tensor,
    mask: torch.Tensor,
    hard_score: torch.Tensor,
    n: int,
    *,
    n_hard: int,
    mixup_alpha: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` synthetic targets per row of the boolean (n_classes, m) ``mask``: random pairs
    of the row's ``n_hard`` candidates of highest ``hard_score``, mixed with weights
    ``lambda ~ Beta(mixup_alpha, mixup_alpha)`` and L2-normalised. Also returns the row of
    ``features`` each target copies (a row mixed with itself), -1 for a true mixture."""
    n_classes = mask.shape[0]
    k = min(n_hard, mask.shape[1])
    score = hard_score.masked_fill(~mask, float("-inf"))
    top_score, top_idx = score.topk(k, dim=1)  # (C, k), valid where finite
    n_valid = torch.isfinite(top_score).sum(dim=1).clamp(min=1)  # (C,)
    # Two random hard candidates per synthetic target, among each class's valid ones.
    draw = torch.rand((n_classes, n, 2), device=features.device)
    slots = (draw * n_valid[:, None, None]).long().clamp(max=k - 1)
    pair = torch.gather(top_idx[:, None, :].expand(-1, n, -1), 2, slots)  # (C, n, 2)
    lam = torch.distributions.Beta(mixup_alpha, mixup_alpha).sample((n_classes, n, 1))
    lam = lam.to(features.device, features.dtype)
    mixed = lam * features[pair[..., 0]] + (1 - lam) * features[pair[..., 1]]
    same = pair[..., 0] == pair[..., 1]  # a row mixed with itself is that row again
    source = torch.where(same, pair[..., 0], torch.full_like(pair[..., 0], -1))
    return F.normalize(mixed, dim=-1), source


def _target_set(
    features: torch.Tensor,
    mask: torch.Tensor,
    n_total: int,
    hard_score: torch.Tensor,
    *,
    synthetic_ratio: float,
    n_hard: int,
    mixup_alpha: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_total`` targets for every row (class) of the candidate ``mask``: simple-sampling
    draws, then a share ``synthetic_ratio`` of hard-mixup ones (:func:`_hard_mixup`).
    Returns the targets (n_classes, n_total, d) and the row of ``features`` each copies."""
    n_syn = round(synthetic_ratio * n_total)
    parts, sources = [], []
    if n_total - n_syn > 0:
        picked = _sample_members(mask, n_total - n_syn)  # (C, n_samp)
        parts.append(features[picked])
        sources.append(picked)
    if n_syn > 0:
        mixed, source = _hard_mixup(
            features, mask, hard_score, n_syn, n_hard=n_hard, mixup_alpha=mixup_alpha
        )
        parts.append(mixed)
        sources.append(source)
    if not parts:
        n_classes, dim = mask.shape[0], features.shape[1]
        no_index = torch.zeros((n_classes, 0), dtype=torch.long, device=features.device)
        return features.new_zeros((n_classes, 0, dim)), no_index
    return torch.cat(parts, dim=1), torch.cat(sources, dim=1)


def rebalanced_targets(
    features: torch.Tensor,
    labels: torch.Tensor,
    prototypes: torch.Tensor,
    *,
    n_positive: int = 10,
    n_negative: int = 500,
    n_hard: int = 20,
    synthetic_ratio: float = 0.5,
    mixup_alpha: float = 0.5,
    simple_sampling: bool = True,
    hard_mixup: bool = True,
    return_indices: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Balanced positive and negative target sets for every class (eqs. 8-10).

    For class ``c``, the members of ``features`` labelled ``c`` are its candidate positives
    and the others its candidate negatives (with the prototypes among ``features``, every
    class has at least one of each). A fraction ``synthetic_ratio`` of each set is made by
    hard-mixup: the ``n_hard`` positives least similar to prototype ``c`` (negatives: most
    similar), mixed in random pairs with weights ``lambda ~ Beta(mixup_alpha, mixup_alpha)``
    and L2-normalised; the rest are picked at random among all candidates
    (simple-sampling). Every class gets the same number of targets whatever its size.

    Parameters
    ----------
    features : torch.Tensor of shape (m, d)
        L2-normalised embeddings: the batch's texts and the class prototypes.
    labels : torch.Tensor of int64 of shape (m,)
        Their classes in ``[0, n_classes)``.
    prototypes : torch.Tensor of shape (n_classes, d)
        L2-normalised class prototypes (hardness is measured against them).
    n_positive, n_negative : int, default=10, 500
        Targets per class.
    n_hard : int, default=20
        Hard candidates per class (fewer when a class has fewer candidates).
    synthetic_ratio : float, default=0.5
        Share of mixup targets in each set (SharpReCL grows it from 0.5 to 1).
    mixup_alpha : float, default=0.5
        Beta distribution parameter of the mixing weights.
    simple_sampling, hard_mixup : bool, default=True
        Ablation switches. With only one of them, it makes the whole set; with neither,
        the sets are empty.
    return_indices : bool, default=False
        Also return, for every positive target, the row of ``features`` it is a copy of
        (a simple-sampling draw, or a mixup of a row with itself), -1 for a true mixture.
        :func:`rebalanced_contrastive_loss` takes it to keep an anchor from being its
        own positive.

    Returns
    -------
    positives : torch.Tensor of shape (n_classes, n_pos, d)
    negatives : torch.Tensor of shape (n_classes, n_neg, d)
        ``n_pos`` / ``n_neg`` are ``n_positive`` / ``n_negative``, or 0 when both
        switches are off. Differentiable with respect to ``features``.
    positive_index : torch.Tensor of int64 of shape (n_classes, n_pos)
        Only with ``return_indices=True``.

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import rebalanced_targets
    >>> z = torch.nn.functional.normalize(torch.randn(6, 4), dim=1)
    >>> pos, neg = rebalanced_targets(z, torch.tensor([0, 0, 1, 1, 0, 1]), z[4:],
    ...                               n_positive=3, n_negative=5)
    >>> tuple(pos.shape), tuple(neg.shape)
    ((2, 3, 4), (2, 5, 4))
    """
    n_classes, dim = prototypes.shape
    labels = labels.to(features.device)
    if not (simple_sampling or hard_mixup):
        empty = features.new_zeros((n_classes, 0, dim))
        no_index = torch.zeros((n_classes, 0), dtype=torch.long, device=features.device)
        return (empty, empty, no_index) if return_indices else (empty, empty)
    if not simple_sampling:
        synthetic_ratio = 1.0
    elif not hard_mixup:
        synthetic_ratio = 0.0
    member = labels[None, :] == torch.arange(n_classes, device=features.device)[:, None]  # (C, m)
    similarity = (prototypes @ features.T).detach()  # hardness ranks need no gradient
    target_set = functools.partial(
        _target_set,
        features,
        synthetic_ratio=synthetic_ratio,
        n_hard=n_hard,
        mixup_alpha=mixup_alpha,
    )
    # Hard positives are far from their prototype, hard negatives close to it.
    positives, positive_index = target_set(member, n_positive, -similarity)
    negatives, _ = target_set(~member, n_negative, similarity)
    if return_indices:
        return positives, negatives, positive_index
    return positives, negatives


def _contrast_columns(
    anchors: torch.Tensor,
    labels: torch.Tensor,
    positives: torch.Tensor | None,
    negatives: torch.Tensor | None,
    positive_index: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The columns each anchor is contrasted with: the anchors, then its class's positive
    and negative targets. Returns the (m, columns) similarities, which columns are positives
    (same class), and which are excluded (the anchor itself, and its copies among the
    positive targets when ``positive_index`` is given)."""
    m = anchors.shape[0]
    eye = torch.eye(m, dtype=torch.bool, device=anchors.device)
    columns = [anchors @ anchors.T]
    pos_mask = [(labels[:, None] == labels[None, :]) & ~eye]
    excluded = [eye]  # an anchor is not its own target
    for targets, is_positive in ((positives, True), (negatives, False)):
        if targets is None or targets.shape[1] == 0:
            continue
        n_targets = targets.shape[1]
        per_anchor = targets.float()[labels]  # (m, t, d)
        columns.append(torch.einsum("md,mtd->mt", anchors, per_anchor))
        pos_mask.append(torch.full((m, n_targets), is_positive, device=anchors.device))
        if is_positive and positive_index is not None:
            if positive_index.shape != targets.shape[:2]:
                raise ValueError(
                    f"positive_index must have shape {tuple(targets.shape[:2])}, "
                    f"got {tuple(positive_index.shape)}."
                )
            rows = torch.arange(m, device=anchors.device)[:, None]
            excluded.append(positive_index.to(anchors.device)[labels] == rows)
        else:
            excluded.append(torch.zeros((m, n_targets), dtype=torch.bool, device=anchors.device))
    return torch.cat(columns, dim=1), torch.cat(pos_mask, dim=1), torch.cat(excluded, dim=1)


def rebalanced_contrastive_loss(
    anchors: torch.Tensor,
    labels: torch.Tensor,
    positives: torch.Tensor | None = None,
    negatives: torch.Tensor | None = None,
    *,
    temperature: float = 0.3,
    class_weights: torch.Tensor | None = None,
    positive_index: torch.Tensor | None = None,
    normalization: str = "mean",
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Class-weighted supervised contrastive loss with per-class targets (eq. 11).

    Anchor ``i`` of class ``y`` is contrasted with every other anchor and with the
    targets of its class (``positives[y]``, ``negatives[y]``); its positives are the other
    anchors of class ``y`` and ``positives[y]``, each term ``-log softmax(sim /
    temperature)`` over all of the anchor's columns, weighted by ``class_weights[y]``.
    Two normalisations:

    - ``"mean"`` (the SharpReCL reference code, and Khosla et al.'s supervised
      contrastive loss): an anchor's loss is the mean over its positives; the result is
      the weighted mean over the anchors with at least one positive.
    - ``"sum"`` (eq. 11 as the paper writes it): an anchor's loss is the sum over its
      positives divided by the number of anchors ``|D-hat|``; the result is the sum over
      anchors. Anchors with many positives (large classes) weigh more, and the scale
      grows with the number of positives, so a suitable ``contrastive_weight`` is
      smaller.

    Without targets and weights, ``"mean"`` is the supervised contrastive loss of Khosla
    et al. (2020).

    Parameters
    ----------
    anchors : torch.Tensor of shape (m, d)
        L2-normalised embeddings (SharpReCL: two views of the batch and the prototypes).
    labels : torch.Tensor of int64 of shape (m,)
    positives : torch.Tensor of shape (n_classes, p, d), optional
    negatives : torch.Tensor of shape (n_classes, q, d), optional
        From :func:`rebalanced_targets`.
    temperature : float, default=0.3
    class_weights : torch.Tensor of shape (n_classes,), optional
        Per-class anchor weights (:func:`effective_number_weights` for the reference
        code, :func:`class_prior_weights` for the paper); None: uniform.
    positive_index : torch.Tensor of int64 of shape (n_classes, p), optional
        The anchor row each positive target copies, -1 for none (from
        ``rebalanced_targets(..., return_indices=True)`` called on these anchors): an
        anchor's copies of itself are left out of its columns, as eq. 11 leaves out
        ``{i}``. None: every target counts.
    normalization : {"mean", "sum"}, default="mean"
        See above.
    sample_weight : torch.Tensor of shape (m,), optional
        Per-anchor weights: each anchor's term is multiplied by its weight (the
        normaliser is unchanged, so weights of mean 1 keep the loss's scale). None:
        every anchor weighs 1.

    Returns
    -------
    loss : torch.Tensor (scalar)

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import rebalanced_contrastive_loss
    >>> z = torch.nn.functional.normalize(torch.tensor([[1., 0], [1, .1], [0, 1], [.1, 1]]), dim=1)
    >>> good = rebalanced_contrastive_loss(z, torch.tensor([0, 0, 1, 1]))
    >>> bad = rebalanced_contrastive_loss(z, torch.tensor([0, 1, 0, 1]))
    >>> bool(good < bad)
    True
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}.")
    if normalization not in ("mean", "sum"):
        raise ValueError(f"normalization must be 'mean' or 'sum', got {normalization!r}.")
    anchors = anchors.float()
    labels = labels.to(anchors.device)
    similarity, is_positive, excluded = _contrast_columns(
        anchors, labels, positives, negatives, positive_index
    )
    logits = (similarity / temperature).masked_fill(excluded, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    mask = is_positive & ~excluded
    n_pos = mask.sum(dim=1)
    pos_sum = -(log_prob.masked_fill(~mask, 0.0)).sum(dim=1)  # (m,) summed over positives
    valid = n_pos > 0
    m = anchors.shape[0]
    if class_weights is not None:
        weights = class_weights.to(anchors.device, torch.float32)[labels]
    else:
        weights = torch.ones(m, device=anchors.device)
    if sample_weight is not None:
        weights = weights * sample_weight.to(anchors.device, torch.float32)
    if not bool(valid.any()):
        return anchors.sum() * 0.0  # no anchor has a positive: nothing to learn, keep the graph
    if normalization == "sum":
        return (pos_sum * weights).sum() / m
    per_anchor = pos_sum / n_pos.clamp(min=1)
    return (per_anchor * weights * valid).sum() / valid.sum()
