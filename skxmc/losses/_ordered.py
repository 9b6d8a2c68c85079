"""Ordered weighted losses (OWL) of Reddi et al., "Stochastic Negative Mining for Learning
with Large Output Spaces" (AISTATS 2019).

For a score vector ``v`` with positive class ``y`` and the negatives' scores sorted in
decreasing order, ``v_[1] >= v_[2] >= ...``, a margin function ``phi`` (a non-increasing
surrogate of the 0/1 loss) and a non-negative, non-increasing weight vector ``theta``:

* pairwise OWL (POWL): ``sum_j theta_j * phi(v_y - v_[j])``;
* binary OWL (BOWL): ``phi(v_y) + sum_j theta_j * phi(-v_[j])``.

Both are convex in ``v`` for convex ``phi`` when ``theta`` is non-increasing (the highest
scores, whose losses are the largest, get the largest weights). The Crammer-Singer SVM is
a POWL with ``theta = (1, 0, ..., 0)``, the Weston-Watkins SVM a POWL with all ones.
Top-k stochastic negative mining is an OWL over a uniformly sampled subset of the
negatives with ``theta = (w, ..., w, 0, ...)`` on the top k: the paper's
``w = (K - 1) / (k B)`` for a sample of B of the K - 1 negatives, or ``w = 1 / k``
(SNMClassifier's ``negative_weight`` chooses; docs/snm.rst says which and why).

Multi-label rows (several positives) average the positive part over the row's positives:
BOWL ``mean_y phi(v_y) + sum_j theta_j phi(-v_[j])``, POWL
``mean_y sum_j theta_j phi(v_y - v_[j])``. Everything is vectorised over the batch and
differentiable (sorting selects, it does not change gradients).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = [
    "MARGIN_FUNCTIONS",
    "check_owl_weights",
    "margin_loss",
    "ordered_weighted_loss",
    "top_k_weights",
]

MARGIN_FUNCTIONS = ("hinge", "squared_hinge", "logistic", "exponential", "ramp")
FORMS = ("bowl", "powl")
_LN2 = 0.6931471805599453


def _hinge(u: torch.Tensor, rho: float) -> torch.Tensor:
    return torch.clamp(1.0 - u, min=0.0)


def _squared_hinge(u: torch.Tensor, rho: float) -> torch.Tensor:
    return torch.clamp(1.0 - u, min=0.0) ** 2


def _logistic(u: torch.Tensor, rho: float) -> torch.Tensor:
    return F.softplus(-u) / _LN2  # log2(1 + exp(-u)), stable for large |u|


def _exponential(u: torch.Tensor, rho: float) -> torch.Tensor:
    return torch.exp(-u)


def _ramp(u: torch.Tensor, rho: float) -> torch.Tensor:
    # 1 for u <= 0, 1 - u / rho on (0, rho], 0 above.
    return torch.clamp(1.0 - u / rho, min=0.0, max=1.0)


_PHI: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
    "hinge": _hinge,
    "squared_hinge": _squared_hinge,
    "logistic": _logistic,
    "exponential": _exponential,
    "ramp": _ramp,
}


def margin_loss(u: torch.Tensor, margin: str = "hinge", *, rho: float = 1.0) -> torch.Tensor:
    """Apply a margin function ``phi`` element-wise.

    Parameters
    ----------
    u : torch.Tensor
        Margins (score of the positive minus score of a negative, or a signed score).
    margin : {"hinge", "squared_hinge", "logistic", "exponential", "ramp"}, default="hinge"
        ``max(1 - u, 0)``, ``max(1 - u, 0) ** 2``, ``log2(1 + exp(-u))``, ``exp(-u)``, or
        the ramp ``1`` for ``u <= 0``, ``1 - u / rho`` on ``(0, rho]``, ``0`` above
        (bounded, not convex). All are upper bounds of the 0/1 loss ``1[u <= 0]``.
    rho : float, default=1.0
        Width of the ramp (used by ``"ramp"`` only); must be > 0.

    Returns
    -------
    loss : torch.Tensor
        Same shape as ``u``.

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import margin_loss
    >>> margin_loss(torch.tensor([-1.0, 0.5, 2.0]), "hinge")
    tensor([2.0000, 0.5000, 0.0000])
    >>> margin_loss(torch.tensor([-1.0, 0.5, 2.0]), "ramp", rho=2.0)
    tensor([1.0000, 0.7500, 0.0000])
    """
    if margin not in _PHI:
        raise ValueError(f"margin must be one of {MARGIN_FUNCTIONS}, got {margin!r}.")
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho!r}.")
    return _PHI[margin](u, float(rho))


def check_owl_weights(weights: Any, *, name: str = "weights") -> torch.Tensor:
    """Validate an OWL weight vector ``theta``: 1-D, finite, non-negative, non-increasing.

    Parameters
    ----------
    weights : array-like or torch.Tensor of shape (m,)
        The weights of the ``m`` highest-scoring negatives, largest score first.
    name : str, default="weights"
        Argument name for error messages.

    Returns
    -------
    weights : torch.Tensor of shape (m,)
        As a floating tensor (float32 unless already floating).

    Raises
    ------
    ValueError
        If ``weights`` is empty, not 1-D, has negative or non-finite entries, or
        increases anywhere (the OWL would no longer be convex).

    Examples
    --------
    >>> from skxmc.losses import check_owl_weights
    >>> check_owl_weights([0.5, 0.5, 0.0])
    tensor([0.5000, 0.5000, 0.0000])
    >>> check_owl_weights([0.1, 0.2])
    Traceback (most recent call last):
    ...
    ValueError: weights must be non-increasing (theta_1 >= theta_2 >= ...); entry 1 (0.2) ...
    """
    w = weights if isinstance(weights, torch.Tensor) else torch.as_tensor(weights)
    if not torch.is_floating_point(w):
        w = w.to(torch.float32)
    if w.ndim != 1 or w.numel() == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector, got shape {tuple(w.shape)}.")
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name} must be finite.")
    if bool((w < 0).any()):
        raise ValueError(f"{name} must be non-negative, got {w.min().item():.4g}.")
    rising = torch.nonzero(w[1:] > w[:-1])
    if len(rising):
        i = int(rising[0]) + 1
        raise ValueError(
            f"{name} must be non-increasing (theta_1 >= theta_2 >= ...); entry {i} "
            f"({w[i].item():.4g}) is larger than entry {i - 1} ({w[i - 1].item():.4g})."
        )
    return w


def top_k_weights(
    k: int,
    *,
    n_classes: int | None = None,
    n_sampled: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``theta`` of top-k negative mining: ``k`` equal weights.

    Each weight is ``1 / k`` (the hardest ``k`` sampled negatives averaged), or, given
    ``n_classes`` (``K``) and ``n_sampled`` (``B``), the paper's ``(K - 1) / (k B)``
    (Reddi et al., 2019, after Lemma 2): the sampled negatives then stand for all
    ``K - 1`` negatives, so the negative part weighs ``(K - 1) / B`` times more against
    the positives.

    Examples
    --------
    >>> from skxmc.losses import top_k_weights
    >>> top_k_weights(4)
    tensor([0.2500, 0.2500, 0.2500, 0.2500])
    >>> top_k_weights(2, n_classes=101, n_sampled=10)  # (101 - 1) / (2 * 10)
    tensor([5., 5.])
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}.")
    if (n_classes is None) != (n_sampled is None):
        raise ValueError("pass both n_classes and n_sampled (the paper's weights) or neither.")
    if n_classes is None:
        return torch.full((k,), 1.0 / k, dtype=dtype, device=device)
    for name, value in (("n_classes", n_classes), ("n_sampled", n_sampled)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if k > n_sampled:
        raise ValueError(f"k={k} exceeds n_sampled={n_sampled}.")
    return torch.full((k,), (n_classes - 1) / (k * n_sampled), dtype=dtype, device=device)


def _check_owl_arguments(
    scores: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor | None,
    margin: str,
    form: str,
    rho: float,
    reduction: str,
) -> torch.Tensor:
    """Check the arguments of :func:`ordered_weighted_loss` but ``weights``; returns the
    boolean mask of the candidates that exist."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}.")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")
    if margin not in _PHI:
        raise ValueError(f"margin must be one of {MARGIN_FUNCTIONS}, got {margin!r}.")
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho!r}.")
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (n, c), got shape {tuple(scores.shape)}.")
    if targets.shape != scores.shape:
        raise ValueError(f"targets has shape {tuple(targets.shape)}, scores {tuple(scores.shape)}.")
    valid = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.to(torch.bool)
    if valid.shape != scores.shape:
        raise ValueError(f"mask has shape {tuple(valid.shape)}, scores {tuple(scores.shape)}.")
    return valid


def _weighted_negatives(
    scores: torch.Tensor, neg: torch.Tensor, theta: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The negatives each row weighs, as (n, m) scores and weights (0 for a non-negative).

    With ``theta``, its ``m`` highest-scoring negatives, highest first, weighted by
    ``theta``; without, all ``c`` candidates, each negative weighted ``1 / n_negatives``.
    """
    if theta is None:
        n_neg = neg.sum(dim=1, keepdim=True)
        return scores, neg.to(scores.dtype) / n_neg.clamp(min=1).to(scores.dtype)
    n, c = scores.shape
    m = min(theta.numel(), c)
    low = torch.finfo(scores.dtype).min
    ranked = torch.where(neg, scores.detach(), torch.full_like(scores, low))
    order = torch.topk(ranked, m, dim=1).indices  # highest-scoring negatives first
    return scores.gather(1, order), theta[:m].expand(n, m) * neg.gather(1, order).to(scores.dtype)


def _powl_rows(
    scores: torch.Tensor,
    pos: torch.Tensor,
    pos_w: torch.Tensor,
    neg_scores: torch.Tensor,
    neg_w: torch.Tensor,
    phi: Callable[[torch.Tensor, float], torch.Tensor],
    rho: float,
) -> torch.Tensor:
    """Per-row POWL ``sum_y pos_w[y] sum_j neg_w[j] phi(v_y - v_[j])``, only over terms
    of non-zero weight. Positives are gathered to (n, p) first so that the pairwise terms
    are (n, p, m), not (n, c, m)."""
    n = scores.shape[0]
    p = max(int(pos.sum(dim=1).max()) if n else 0, 1)
    pos_idx = torch.topk(pos.to(torch.int8), p, dim=1, sorted=False).indices
    pos_s = scores.gather(1, pos_idx)
    pos_pw = pos_w.gather(1, pos_idx)
    pair = phi(pos_s.unsqueeze(2) - neg_scores.unsqueeze(1), rho)  # (n, p, m)
    live = (pos_pw.unsqueeze(2) > 0) & (neg_w.unsqueeze(1) > 0)
    zero = scores.new_zeros(())
    weighted = torch.where(live, pair, zero) * pos_pw.unsqueeze(2) * neg_w.unsqueeze(1)
    return weighted.sum(dim=(1, 2))


def ordered_weighted_loss(
    scores: torch.Tensor,
    targets: torch.Tensor,
    *,
    weights: Any = None,
    margin: str = "hinge",
    form: str = "bowl",
    rho: float = 1.0,
    mask: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """Ordered weighted loss (POWL or BOWL) of a batch of score vectors.

    Each row holds the scores of some candidate classes (all classes, or the positives
    and the sampled negatives of that row); ``targets`` marks the positives. The negatives
    of a row are sorted by decreasing score and the ``j``-th one weighted by
    ``weights[j]``.

    Parameters
    ----------
    scores : torch.Tensor of shape (n, c)
        Candidate scores.
    targets : torch.Tensor of shape (n, c)
        1 / True for positives, 0 / False for negatives.
    weights : array-like or torch.Tensor of shape (m,), or None, default=None
        ``theta``: non-negative and non-increasing (checked). Weights of the ``m``
        highest-scoring negatives of each row; lower negatives get weight 0, and a row
        with fewer than ``m`` negatives drops the missing terms (no renormalisation).
        ``None``: every negative of a row weighted ``1 / n_negatives`` (the mean; plain
        negative sampling when the candidates are uniformly sampled negatives). Use
        :func:`top_k_weights` for top-k mining.
    margin : {"hinge", "squared_hinge", "logistic", "exponential", "ramp"}, default="hinge"
        The margin function ``phi`` (see :func:`margin_loss`).
    form : {"bowl", "powl"}, default="bowl"
        ``"bowl"``: ``mean_pos phi(v_y) + sum_j theta_j phi(-v_[j])``;
        ``"powl"``: ``mean_pos sum_j theta_j phi(v_y - v_[j])``.
    rho : float, default=1.0
        Ramp width (``margin="ramp"`` only).
    mask : torch.Tensor of bool of shape (n, c), optional
        Which candidates exist (False: padding, ignored whatever its target).
    reduction : {"mean", "sum", "none"}, default="mean"
        Over rows: the mean, the sum, or the per-row losses of shape ``(n,)``. Rows
        without positives contribute only their negative part (BOWL) or 0 (POWL).

    Returns
    -------
    loss : torch.Tensor
        A scalar, or shape ``(n,)`` with ``reduction="none"``.

    Examples
    --------
    Crammer-Singer (POWL, all weight on the hardest negative) on two rows:

    >>> import torch
    >>> from skxmc.losses import ordered_weighted_loss
    >>> scores = torch.tensor([[2.0, 0.5, 1.5], [0.0, 1.0, -1.0]])
    >>> targets = torch.tensor([[1, 0, 0], [0, 1, 0]])
    >>> ordered_weighted_loss(scores, targets, weights=[1.0], form="powl", reduction="none")
    tensor([0.5000, 0.0000])
    >>> ordered_weighted_loss(scores, targets, weights=[0.5, 0.5], form="bowl",
    ...                       reduction="none")
    tensor([2.0000, 0.5000])
    """
    valid = _check_owl_arguments(scores, targets, mask, margin, form, rho, reduction)
    pos = targets.to(torch.bool) & valid
    neg = ~targets.to(torch.bool) & valid
    phi = _PHI[margin]
    if weights is not None:
        if not isinstance(weights, torch.Tensor):
            weights = torch.as_tensor(weights, dtype=scores.dtype)  # no float32 round trip
        weights = check_owl_weights(weights).to(device=scores.device, dtype=scores.dtype)
    neg_scores, neg_w = _weighted_negatives(scores, neg, weights)  # (n, m) each
    pos_w = pos.to(scores.dtype) / pos.sum(dim=1, keepdim=True).clamp(min=1).to(scores.dtype)
    zero = scores.new_zeros(())
    if form == "bowl":
        pos_part = (torch.where(pos, phi(scores, rho), zero) * pos_w).sum(dim=1)
        neg_part = (torch.where(neg_w > 0, phi(-neg_scores, rho), zero) * neg_w).sum(dim=1)
        per_row = pos_part + neg_part
    else:
        per_row = _powl_rows(scores, pos, pos_w, neg_scores, neg_w, phi, rho)
    if reduction == "none":
        return per_row
    return per_row.sum() if reduction == "sum" else per_row.mean()
