"""MatchXML's training losses over candidate labels: text-label matching and squared hinge.

Both work on a padded candidate layout: for a batch of ``B`` texts, ``candidates`` is a
``(B, M)`` tensor of label (or cluster) ids, ``mask`` says which slots are real and
``targets`` which real slots are positives. Scores are inner products of L2-normalised
text and label embeddings.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["candidate_scores", "text_label_matching_loss", "weighted_squared_hinge"]


def candidate_scores(text_emb: torch.Tensor, label_emb: torch.Tensor) -> torch.Tensor:
    """Scores ``(B, M)`` of texts ``(B, d)`` against their candidates' embeddings ``(B, M, d)``."""
    return torch.einsum("bd,bmd->bm", text_emb, label_emb)


def _masked_multi_positive_nll(
    logits: torch.Tensor,
    mask: torch.Tensor,
    targets: torch.Tensor,
    row_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """``-mean_p log softmax(logits)[p]`` per row, the softmax running over the row's real
    slots (``mask``), summed over the rows and divided by the number of rows (eq. 4's
    :math:`1/N_b`): a row without a positive adds 0 and still counts. ``row_weight``
    multiplies each row's term."""
    logits = logits.masked_fill(~mask, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    positives = targets & mask
    n_pos = positives.sum(dim=1)
    rows = n_pos > 0
    if not bool(rows.any()):
        return logits.new_zeros(())
    per_row = -(log_prob.masked_fill(~positives, 0.0).sum(dim=1)[rows] / n_pos[rows])
    if row_weight is not None:
        per_row = per_row * row_weight.to(per_row.device, per_row.dtype)[rows]
    return per_row.sum() / logits.shape[0]


def text_label_matching_loss(
    text_emb: torch.Tensor,
    label_emb: torch.Tensor,
    mask: torch.Tensor,
    targets: torch.Tensor,
    batch_label_emb: torch.Tensor,
    batch_label_targets: torch.Tensor,
    *,
    temperature: float = 0.05,
    matching_weight: float = 0.5,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""MatchXML's text-label matching loss (eqs. 4-6 of the paper).

    ``matching_weight * L_tl + (1 - matching_weight) * L_lt``:

    - ``L_tl`` (text to label): for each text, a softmax over its candidate labels
      (positives and hard negatives), averaged over its positives; the texts' terms are
      summed and divided by the batch size :math:`N_b`, as in eq. 4, so a text without a
      positive among its candidates adds 0 and still counts. (Before, skxmc averaged over
      the texts with a positive; the two are equal when every text has one, as in every
      fit whose texts all have a label.)
    - ``L_lt`` (label to text): for each positive label of the batch, a softmax over the
      batch's texts, averaged over the texts that have the label.

    Parameters
    ----------
    text_emb : Tensor of shape (B, d)
        L2-normalised text embeddings.
    label_emb : Tensor of shape (B, M, d)
        L2-normalised embeddings of each text's candidate labels.
    mask : bool Tensor of shape (B, M)
        Real candidate slots (rows are padded to the longest candidate list).
    targets : bool Tensor of shape (B, M)
        Which candidates are positives of their text.
    batch_label_emb : Tensor of shape (P, d)
        L2-normalised embeddings of the distinct positive labels of the batch.
    batch_label_targets : bool Tensor of shape (P, B)
        ``[j, i]``: text ``i`` has label ``j``.
    temperature : float, default=0.05
        The softmax temperature :math:`\tau`.
    matching_weight : float, default=0.5
        :math:`\lambda` in [0, 1]: 1 keeps only the text-to-label direction.
    sample_weight : Tensor of shape (B,), optional
        Per-text weights: each text's ``L_tl`` term is multiplied by its weight, and in
        ``L_lt`` each text's log-probability under a label by its weight (a weighted mean
        over the label's texts, each term divided by the label's number of texts as
        without weights). None: every text weighs 1.

    Returns
    -------
    loss : scalar Tensor

    Examples
    --------
    >>> import torch, torch.nn.functional as F
    >>> from skxmc.losses import text_label_matching_loss
    >>> z = F.normalize(torch.randn(2, 8), dim=1)
    >>> labels = F.normalize(torch.randn(3, 8), dim=1)   # label 0, 1, 2
    >>> cand = torch.tensor([[0, 1], [1, 2]])             # candidates of each text
    >>> mask = torch.ones(2, 2, dtype=torch.bool)
    >>> targets = torch.tensor([[True, False], [False, True]])  # text 0: label 0, text 1: label 2
    >>> pos = torch.tensor([0, 2])                        # the batch's positive labels
    >>> loss = text_label_matching_loss(z, labels[cand], mask, targets, labels[pos],
    ...                                 torch.tensor([[True, False], [False, True]]))
    >>> bool(loss > 0)
    True
    """
    if not 0.0 <= matching_weight <= 1.0:
        raise ValueError(f"matching_weight must be in [0, 1], got {matching_weight}.")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}.")
    loss_tl = _masked_multi_positive_nll(
        candidate_scores(text_emb, label_emb) / temperature, mask, targets, sample_weight
    )
    if matching_weight == 1.0 or batch_label_emb.shape[0] == 0:
        return loss_tl
    logits_lt = batch_label_emb @ text_emb.T / temperature
    all_texts = torch.ones_like(batch_label_targets, dtype=torch.bool)
    if sample_weight is not None:
        # weight each (label, text) term by the text's weight: scale the targets' sum
        log_prob = logits_lt - torch.logsumexp(logits_lt, dim=1, keepdim=True)
        w = sample_weight.to(log_prob.device, log_prob.dtype)[None, :]
        n_pos = batch_label_targets.sum(dim=1).clamp(min=1)
        per_label = -(log_prob * w).masked_fill(~batch_label_targets, 0.0).sum(dim=1) / n_pos
        loss_lt = per_label.mean()
        return matching_weight * loss_tl + (1.0 - matching_weight) * loss_lt
    loss_lt = _masked_multi_positive_nll(logits_lt, all_texts, batch_label_targets)
    return matching_weight * loss_tl + (1.0 - matching_weight) * loss_lt


def weighted_squared_hinge(
    scores: torch.Tensor,
    mask: torch.Tensor,
    targets: torch.Tensor,
    *,
    margin: float = 1.0,
    positive_weight: torch.Tensor | float = 1.0,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Weighted squared hinge over candidate slots (MatchXML's intermediate stages).

    ``w * max(0, margin - s * y)^2`` with ``y = +1`` for positives and ``-1`` for
    negatives, averaged over the real slots; positives weigh ``positive_weight`` (the
    label value in the reference code), negatives 1.

    Parameters
    ----------
    scores : Tensor of shape (B, M)
    mask, targets : bool Tensor of shape (B, M)
    margin : float, default=1.0
    positive_weight : float or Tensor of shape (B, M), default=1.0
    sample_weight : Tensor of shape (B,), optional
        Per-text weights: the weighted mean over the real slots, each slot of text ``i``
        weighing its weight (a batch in which a text of weight 2 appears twice gives the
        same loss). None: every text weighs 1.

    Returns
    -------
    loss : scalar Tensor

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import weighted_squared_hinge
    >>> s = torch.tensor([[0.9, -0.5]])
    >>> m = torch.ones(1, 2, dtype=torch.bool)
    >>> t = torch.tensor([[True, False]])
    >>> round(float(weighted_squared_hinge(s, m, t)), 4)  # ((1 - 0.9)^2 + (1 - 0.5)^2) / 2
    0.13
    """
    sign = targets.to(scores.dtype) * 2.0 - 1.0
    weight = torch.where(
        targets,
        torch.as_tensor(positive_weight, dtype=scores.dtype, device=scores.device),
        torch.ones((), dtype=scores.dtype, device=scores.device),
    )
    per_slot = weight * F.relu(margin - sign * scores) ** 2
    per_slot = per_slot.masked_fill(~mask, 0.0)
    if sample_weight is not None:
        # the weighted mean over slots: a text of weight 2 counts as two copies of its slots
        w = sample_weight.to(per_slot.device, per_slot.dtype)[:, None]
        return (per_slot * w).sum() / (mask * w).sum().clamp(min=torch.finfo(w.dtype).tiny)
    return per_slot.sum() / mask.sum().clamp(min=1)
