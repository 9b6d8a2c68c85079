"""MoCo supervised contrastive loss with one positive key per anchor (the SCL-MoCo
baseline of KNN-BERT, Li et al.)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._supcon import check_queue_inputs

__all__ = ["moco_contrastive_loss"]


def moco_contrastive_loss(
    anchors: torch.Tensor,
    anchor_labels: torch.Tensor,
    positive_keys: torch.Tensor,
    keys: torch.Tensor,
    key_labels: torch.Tensor,
    *,
    temperature: float = 0.07,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """MoCo contrastive loss with supervised negatives: one positive key per anchor, the
    queue's keys of other classes as negatives.

    Each anchor ``a`` has one positive key ``p_a`` (the momentum encoder's feature of
    another text of its class) and, as negatives, every queue key whose label differs from
    its own; queue keys of its own class are left out (neither positive nor negative).
    The loss is MoCo's cross-entropy with the positive as target, averaged over anchors::

        l(a) = -log(exp(s_ap / T) / (exp(s_ap / T) + sum_n exp(s_an / T)))

    with cosine similarities ``s``. Unlike :func:`queue_contrastive_loss` (KNN-BERT), no
    positive is selected from the queue: this is the "SCL-MoCo" baseline of the KNN-BERT
    paper, as in the reference code's ``ContrastiveMoCo``. Gradients flow into ``anchors``
    only.

    Parameters
    ----------
    anchors : torch.Tensor of shape (n_anchors, dim)
        Query features; L2-normalised here.
    anchor_labels : torch.Tensor of int of shape (n_anchors,)
    positive_keys : torch.Tensor of shape (n_anchors, dim)
        One positive key per anchor; L2-normalised here and detached.
    keys : torch.Tensor of shape (n_keys, dim)
        Queue features; L2-normalised here and detached.
    key_labels : torch.Tensor of int of shape (n_keys,)
        Labels of the keys; a negative label marks an empty queue slot (ignored).
    temperature : float, default=0.07
    sample_weight : torch.Tensor of shape (n_anchors,), optional
        Per-anchor weights: each anchor's term is multiplied by its weight (the
        normaliser is unchanged, so weights of mean 1 keep the loss's scale). None:
        every anchor weighs 1.

    Returns
    -------
    loss : torch.Tensor (scalar)
        An anchor without negatives contributes 0.

    See Also
    --------
    queue_contrastive_loss : KNN-BERT's loss, with positives selected from the queue.
    batch_contrastive_loss : the in-batch supervised contrastive loss (SCL).

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import moco_contrastive_loss
    >>> a = torch.tensor([[1.0, 0.0]])
    >>> queue = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    >>> loss = moco_contrastive_loss(a, torch.tensor([0]), torch.tensor([[1.0, 0.0]]),
    ...                              queue, torch.tensor([1, 0]), temperature=1.0)
    >>> round(float(loss), 4)  # -log(e / (e + 1)): the class-0 queue key is left out
    0.3133
    """
    check_queue_inputs(anchors, anchor_labels, keys, key_labels, temperature)
    if positive_keys.shape != anchors.shape:
        raise ValueError(
            f"positive_keys must have the anchors' shape {tuple(anchors.shape)}, "
            f"got {tuple(positive_keys.shape)}."
        )
    a = F.normalize(anchors.float(), dim=1)
    p = F.normalize(positive_keys.detach().float(), dim=1).to(a.device)
    k = F.normalize(keys.detach().float(), dim=1).to(a.device)
    anchor_labels = anchor_labels.to(a.device).long()
    key_labels = key_labels.to(a.device).long()
    positive = (a * p).sum(dim=1) / temperature
    negative = (key_labels[None, :] >= 0) & (anchor_labels[:, None] != key_labels[None, :])
    if len(a) == 0:
        return a.sum() * 0.0
    has_negative = negative.any(dim=1)
    # Rows without negatives get dummy finite logits (a row of -inf would give NaN
    # gradients through logsumexp) and a loss of 0.
    neg_logits = ((a @ k.T) / temperature).masked_fill(~negative, float("-inf"))
    neg_logits = torch.where(has_negative[:, None], neg_logits, torch.zeros_like(neg_logits))
    # -log softmax of the positive = softplus(logsumexp(negatives) - positive).
    rows = F.softplus(torch.logsumexp(neg_logits, dim=1) - positive)
    if sample_weight is not None:
        rows = rows * sample_weight.to(rows.device, rows.dtype)
    return torch.where(has_negative, rows, torch.zeros_like(rows)).mean()
