"""Classification losses for imbalanced classes: focal loss and self-adjusting Dice loss.

The two alternatives to cross-entropy that SharpReCL (Li et al., Table 8) tries in its
classification branch, usable on their own. Both take raw logits and, like
:func:`~skxmc.losses.logit_adjusted_cross_entropy`, an optional log class prior that is
added to the logits first (logit compensation).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["dice_loss", "focal_loss"]


def _adjusted_log_softmax(
    logits: torch.Tensor, log_prior: torch.Tensor | None, tau: float
) -> torch.Tensor:
    scores = logits.float()
    if log_prior is not None and tau != 0:
        scores = scores + tau * log_prior.to(logits.device, torch.float32)
    return F.log_softmax(scores, dim=1)


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")


def focal_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    log_prior: torch.Tensor | None = None,
    *,
    gamma: float = 2.0,
    tau: float = 1.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Focal loss ``-(1 - p_y) ** gamma * log p_y`` (Lin et al., 2017).

    Down-weights the examples the model already classifies with confidence, so that
    training concentrates on the hard (often rare-class) ones. ``gamma=0`` gives the
    cross-entropy.

    Parameters
    ----------
    logits : torch.Tensor of shape (n, n_classes)
    targets : torch.Tensor of int64 of shape (n,)
    log_prior : torch.Tensor of shape (n_classes,), optional
        Log class frequencies; ``p`` is then the softmax of ``logits + tau * log_prior``
        (logit compensation, as in SharpReCL's eq. 6). None: the raw logits.
    gamma : float, default=2.0
        Focusing parameter (>= 0); 2 is the value Lin et al. recommend.
    tau : float, default=1.0
        Strength of the logit compensation (ignored without ``log_prior``).
    reduction : {"mean", "sum", "none"}, default="mean"

    Returns
    -------
    loss : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import focal_loss
    >>> logits, y = torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0])
    >>> [round(v, 4) for v in focal_loss(logits, y, reduction="none").tolist()]
    [0.0018, 1.6501]
    """
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}.")
    log_p = _adjusted_log_softmax(logits, log_prior, tau).gather(1, targets[:, None])[:, 0]
    loss = -((1.0 - log_p.exp()) ** gamma) * log_p
    return _reduce(loss, reduction)


def dice_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    log_prior: torch.Tensor | None = None,
    *,
    alpha: float = 0.0,
    smooth: float = 1.0,
    tau: float = 1.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Self-adjusting Dice loss (Li et al., "Dice Loss for Data-imbalanced NLP Tasks", 2020).

    For example ``i`` and class ``j``, with ``p_ij`` the predicted probability, ``y_ij``
    the one-hot target and ``q_ij = (1 - p_ij) ** alpha * p_ij``, the Dice coefficient is
    ``DSC_ij = (2 q_ij y_ij + smooth) / (q_ij + y_ij + smooth)``; the loss of example
    ``i`` is ``sum_j (1 - DSC_ij)``. It is 0 for a confident correct prediction, and it
    treats false positives and false negatives alike, which makes it less sensitive to
    the class balance than the cross-entropy. ``alpha > 0`` down-weights easy examples,
    as the focal loss does.

    Parameters
    ----------
    logits : torch.Tensor of shape (n, n_classes)
    targets : torch.Tensor of int64 of shape (n,)
    log_prior : torch.Tensor of shape (n_classes,), optional
        Log class frequencies added to the logits before the softmax (logit
        compensation). None: the raw logits.
    alpha : float, default=0.0
        Self-adjusting exponent (>= 0); 0 gives the plain (smoothed) Dice loss.
    smooth : float, default=1.0
        The smoothing term ``gamma`` of Li et al. (> 0).
    tau : float, default=1.0
        Strength of the logit compensation (ignored without ``log_prior``).
    reduction : {"mean", "sum", "none"}, default="mean"

    Returns
    -------
    loss : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import dice_loss
    >>> y = torch.tensor([0])
    >>> good, bad = dice_loss(torch.tensor([[9.0, 0]]), y), dice_loss(torch.tensor([[0.0, 9]]), y)
    >>> bool(good < 0.01 < bad)
    True
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}.")
    if smooth <= 0:
        raise ValueError(f"smooth must be > 0, got {smooth}.")
    p = _adjusted_log_softmax(logits, log_prior, tau).exp()
    q = (1.0 - p) ** alpha * p
    y = F.one_hot(targets, p.shape[1]).to(p.dtype)
    dsc = (2.0 * q * y + smooth) / (q + y + smooth)
    return _reduce((1.0 - dsc).sum(dim=1), reduction)
