"""Supervised contrastive loss against a queue of labelled keys (KNN-BERT, MoCo style)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["queue_contrastive_loss", "select_queue_positives"]


def check_queue_inputs(
    anchors: torch.Tensor,
    anchor_labels: torch.Tensor,
    keys: torch.Tensor,
    key_labels: torch.Tensor,
    temperature: float,
) -> None:
    """The argument checks shared by the losses against a queue of labelled keys."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}.")
    if anchors.ndim != 2 or keys.ndim != 2 or anchors.shape[1] != keys.shape[1]:
        raise ValueError(
            f"anchors and keys must be 2-D with the same width, got shapes "
            f"{tuple(anchors.shape)} and {tuple(keys.shape)}."
        )
    if len(anchor_labels) != len(anchors) or len(key_labels) != len(keys):
        raise ValueError("labels must have one entry per anchor / key.")


def select_queue_positives(
    similarities: torch.Tensor,
    positive_mask: torch.Tensor,
    *,
    n_most_similar: int = 100,
    n_least_similar: int = 1,
) -> torch.Tensor:
    """Mask of the positives each anchor contrasts: its most and least similar ones.

    Parameters
    ----------
    similarities : torch.Tensor of shape (n_anchors, n_keys)
        Anchor-key similarities.
    positive_mask : torch.Tensor of bool of shape (n_anchors, n_keys)
        Which keys share the anchor's label.
    n_most_similar : int, default=100
        Positives kept from the most similar end (``top_k`` of the reference code).
    n_least_similar : int, default=1
        Positives kept from the least similar end (``end_k``). An anchor with at most
        ``n_most_similar + n_least_similar`` positives keeps them all.

    Returns
    -------
    selected : torch.Tensor of bool of shape (n_anchors, n_keys)
        A subset of ``positive_mask``.
    """
    if n_most_similar < 0 or n_least_similar < 0:
        raise ValueError("n_most_similar and n_least_similar must be >= 0.")
    n_keys = similarities.shape[1]
    sims = similarities.detach()
    selected = torch.zeros_like(positive_mask)
    neg_inf = torch.tensor(float("-inf"), device=sims.device, dtype=sims.dtype)
    for k, sign in ((min(n_most_similar, n_keys), 1.0), (min(n_least_similar, n_keys), -1.0)):
        if k == 0:
            continue
        values, idx = torch.where(positive_mask, sign * sims, neg_inf).topk(k, dim=1)
        # Rows with fewer than k positives pick masked keys too: drop those.
        selected.scatter_(1, idx, torch.isfinite(values) | selected.gather(1, idx))
    return selected & positive_mask


def queue_contrastive_loss(
    anchors: torch.Tensor,
    anchor_labels: torch.Tensor,
    keys: torch.Tensor,
    key_labels: torch.Tensor,
    *,
    n_most_similar: int = 100,
    n_least_similar: int = 1,
    temperature: float = 0.07,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """KNN-BERT's supervised contrastive loss of anchors against a queue of keys.

    For every anchor, the keys with its label are the positives and all other keys the
    negatives. Of the positives, the ``n_most_similar`` most and the ``n_least_similar``
    least cosine-similar ones are kept; each kept positive ``p`` makes one row
    ``[sim(a, p), sim(a, n_1), ..., sim(a, n_m)] / T`` scored by cross-entropy with
    target 0, and the loss is the mean over all rows::

        l(a, p) = -log(exp(s_ap / T) / (exp(s_ap / T) + sum_n exp(s_an / T)))
                = softplus(logsumexp_n(s_an / T) - s_ap / T)

    Gradients flow into ``anchors`` only (keys come from a momentum encoder).

    Parameters
    ----------
    anchors : torch.Tensor of shape (n_anchors, dim)
        Query features; L2-normalised here.
    anchor_labels : torch.Tensor of int of shape (n_anchors,)
    keys : torch.Tensor of shape (n_keys, dim)
        Queue features; L2-normalised here and detached.
    key_labels : torch.Tensor of int of shape (n_keys,)
        Labels of the keys; a negative label marks an empty queue slot (ignored).
    n_most_similar : int, default=100
        Most similar positives kept per anchor.
    n_least_similar : int, default=1
        Least similar positives kept per anchor.
    temperature : float, default=0.07
    sample_weight : torch.Tensor of shape (n_anchors,), optional
        Per-anchor weights: each anchor's term is multiplied by its weight (the
        normaliser is unchanged, so weights of mean 1 keep the loss's scale). None:
        every anchor weighs 1.

    Returns
    -------
    loss : torch.Tensor (scalar)
        0 (with a gradient graph) when no anchor has a positive.

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import queue_contrastive_loss
    >>> a = torch.tensor([[1.0, 0.0]])
    >>> keys = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> loss = queue_contrastive_loss(a, torch.tensor([0]), keys, torch.tensor([0, 1]),
    ...                               temperature=1.0)
    >>> round(float(loss), 4)  # -log(e / (e + 1))
    0.3133
    """
    check_queue_inputs(anchors, anchor_labels, keys, key_labels, temperature)
    a = F.normalize(anchors.float(), dim=1)
    k = F.normalize(keys.detach().float(), dim=1)
    anchor_labels = anchor_labels.to(a.device).long()
    key_labels = key_labels.to(a.device).long()
    logits = (a @ k.T) / temperature
    valid = (key_labels >= 0)[None, :]
    same = anchor_labels[:, None] == key_labels[None, :]
    positive = same & valid
    negative = ~same & valid
    chosen = select_queue_positives(
        logits, positive, n_most_similar=n_most_similar, n_least_similar=n_least_similar
    )
    neg_lse = torch.logsumexp(logits.masked_fill(~negative, float("-inf")), dim=1)
    rows = F.softplus(neg_lse[:, None] - logits)  # -inf (no negative) gives 0
    if sample_weight is not None:
        rows = rows * sample_weight.to(rows.device, rows.dtype)[:, None]
    n_rows = chosen.sum()
    if n_rows == 0:
        return logits.sum() * 0.0
    return torch.where(chosen, rows, torch.zeros_like(rows)).sum() / n_rows


def batch_contrastive_loss(
    features: torch.Tensor,
    labels: torch.Tensor,
    *,
    temperature: float = 0.07,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Supervised contrastive loss within a batch (Khosla et al., 2020, the "out" form).

    Each text is an anchor; the other texts of its class are its positives, every other
    text of the batch is in the denominator (the anchor itself never is)::

        l(i) = -1/|P(i)| sum_{p in P(i)} log(exp(s_ip / T) / sum_{a != i} exp(s_ia / T))

    averaged over the anchors that have a positive. Gradients flow through both sides
    (no momentum encoder): the "CE + in-batch SCL" baseline of the KNN-BERT paper.

    Parameters
    ----------
    features : torch.Tensor of shape (n, dim)
        Projected features; L2-normalised here.
    labels : torch.Tensor of int of shape (n,)
    temperature : float, default=0.07
    sample_weight : torch.Tensor of shape (n,), optional
        Per-anchor weights: each anchor's term is multiplied by its weight (the
        normaliser is unchanged, so weights of mean 1 keep the loss's scale). None:
        every anchor weighs 1.

    Returns
    -------
    loss : torch.Tensor (scalar)
        0 (with a gradient graph) when no text of the batch shares its class.

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import batch_contrastive_loss
    >>> f = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> round(float(batch_contrastive_loss(f, torch.tensor([0, 0, 1]), temperature=1.0)), 4)
    0.3133
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}.")
    if features.ndim != 2 or len(labels) != len(features):
        raise ValueError(
            f"features must be 2-D with one label per row, got shape "
            f"{tuple(features.shape)} and {len(labels)} labels."
        )
    z = F.normalize(features.float(), dim=1)
    labels = labels.to(z.device).long()
    itself = torch.eye(len(z), dtype=torch.bool, device=z.device)
    logits = (z @ z.T / temperature).masked_fill(itself, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    positive = (labels[:, None] == labels[None, :]) & ~itself
    n_pos = positive.sum(dim=1)
    rows = n_pos > 0
    if not bool(rows.any()):
        return z.sum() * 0.0
    per_anchor = log_prob.masked_fill(~positive, 0.0).sum(dim=1)[rows] / n_pos[rows]
    if sample_weight is not None:
        per_anchor = per_anchor * sample_weight.to(z.device, z.dtype)[rows]
    return -per_anchor.mean()
