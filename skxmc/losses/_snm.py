"""Top-k stochastic negative mining (SNM): uniform negative candidates and the hardest of them.

Reddi et al. (AISTATS 2019): per example, draw ``B`` negatives uniformly (never one of
the example's positives), score only those, and apply an ordered weighted loss to the
``k`` highest-scoring ones (:func:`~skxmc.losses.ordered_weighted_loss` with
:func:`~skxmc.losses.top_k_weights`). Multi-label aware: every positive of a row is
excluded from its negatives.

Two ways to draw the candidates, for two cost regimes:

* :func:`sample_negatives`: ``B`` negatives per row, shape ``(n, B)``. Scoring them needs
  ``n * B`` gathered class vectors; the usual pattern is to score them without gradient,
  keep the ``k`` hardest with :func:`top_k_negatives` and rescore those ``k`` with
  gradient.
* :func:`sample_shared_negatives`: one pool of ``B`` uniformly drawn labels for the whole
  batch (as TensorFlow's sampled losses do), with a mask of each row's positives in it.
  Scoring is one ``(n, d) @ (d, B)`` product; each row still sees ``B`` uniform
  candidates (minus its own positives), correlated across rows. Used by
  :class:`~skxmc.SNMClassifier`.

Positives are given as a scipy sparse matrix (one row per example, any non-zero counts)
or as CSR arrays ``(indptr, indices)`` (numpy arrays or torch tensors).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

__all__ = [
    "MinedNegatives",
    "pad_positives",
    "sample_negatives",
    "sample_shared_negatives",
    "top_k_negatives",
]

_DENSE_KEYS_LIMIT = (
    1 << 24
)  # n * n_labels below which per-row sampling is exact without replacement
_RANDPERM_LIMIT = 1 << 24  # n_labels below which the shared pool is drawn without replacement


class MinedNegatives(NamedTuple):
    """What :func:`top_k_negatives` returns (unpacks as ``scores, labels, mask``)."""

    scores: torch.Tensor
    """(n, k) scores of the mined negatives, highest first (gathered from the input, so
    gradients flow back to it); entries where ``mask`` is False are meaningless."""
    labels: torch.Tensor
    """(n, k) label indices of the mined negatives; -1 where ``mask`` is False."""
    mask: torch.Tensor
    """(n, k) bool: True where the row had that many candidate negatives."""


def _csr_arrays(positives: Any) -> tuple[np.ndarray, np.ndarray]:
    if sp.issparse(positives):
        Y = sp.csr_matrix(positives)
        if not Y.has_canonical_format or (Y.data == 0).any():
            Y = Y.copy()  # never modify the caller's matrix
            Y.sum_duplicates()
            Y.eliminate_zeros()
        return np.asarray(Y.indptr, dtype=np.int64), np.asarray(Y.indices, dtype=np.int64)
    if isinstance(positives, tuple) and len(positives) == 2:
        indptr, indices = positives

        def to_np(a: Any) -> np.ndarray:
            return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)

        indptr, indices = to_np(indptr).astype(np.int64), to_np(indices).astype(np.int64)
        if (
            indptr.ndim != 1
            or indices.ndim != 1
            or len(indptr) == 0
            or indptr[0] != 0
            or indptr[-1] != len(indices)
            or np.any(np.diff(indptr) < 0)
        ):
            raise ValueError("positives (indptr, indices) is not a valid CSR structure.")
        return indptr, indices
    raise TypeError(
        "positives must be a scipy sparse matrix or a tuple (indptr, indices), got "
        f"{type(positives).__name__}."
    )


def pad_positives(
    positives: Any, n_labels: int, *, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's distinct positive labels, sorted and padded to a rectangle.

    Parameters
    ----------
    positives : sparse matrix of shape (n, n_labels) or tuple (indptr, indices)
        The positives of each row.
    n_labels : int
        Number of labels; every index must be in ``[0, n_labels)``.
    device : torch.device or str, optional
        Where to put the result (default CPU).

    Returns
    -------
    padded : torch.LongTensor of shape (n, p)
        Sorted distinct positives, padded with ``n_labels`` (``p >= 1``).
    counts : torch.LongTensor of shape (n,)
        Number of distinct positives of each row.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.losses import pad_positives
    >>> padded, counts = pad_positives((np.array([0, 2, 2, 3]), np.array([4, 1, 4])), 5)
    >>> padded.tolist(), counts.tolist()
    ([[1, 4], [5, 5], [4, 5]], [2, 0, 1])
    """
    indptr, indices = _csr_arrays(positives)
    n = len(indptr) - 1
    if len(indices) and (indices.min() < 0 or indices.max() >= n_labels):
        raise ValueError(f"positive label indices must be in [0, {n_labels}).")
    rows = np.repeat(np.arange(n), np.diff(indptr))
    # Sort by (row, label) and drop repeated labels within a row.
    order = np.lexsort((indices, rows))
    rows, labels = rows[order], indices[order]
    keep = np.ones(len(labels), dtype=bool)
    keep[1:] = (labels[1:] != labels[:-1]) | (rows[1:] != rows[:-1])
    rows, labels = rows[keep], labels[keep]
    counts = np.bincount(rows, minlength=n).astype(np.int64)
    p = max(int(counts.max()) if n else 0, 1)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    cols = np.arange(len(labels)) - starts[rows]
    padded = np.full((n, p), n_labels, dtype=np.int64)
    padded[rows, cols] = labels
    return torch.from_numpy(padded).to(device), torch.from_numpy(counts).to(device)


def _check_sizes(n_labels: Any, n_sampled: Any) -> None:
    for name, v in (("n_labels", n_labels), ("n_sampled", n_sampled)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")


def _draw_with_replacement(
    padded: torch.Tensor,
    counts: torch.Tensor,
    n_labels: int,
    n_sampled: int,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Uniform i.i.d. draws from each row's negatives: a draw ``r`` in
    ``[0, n_labels - n_pos)`` is the rank of the label among the row's negatives; with the
    sorted positives ``p_j``, the label is ``r + #{j : p_j - j <= r}``."""
    n, p = padded.shape
    device = padded.device
    n_neg = (n_labels - counts).unsqueeze(1)
    u = torch.rand((n, n_sampled), generator=generator, device=device, dtype=torch.float64)
    r = torch.minimum((u * n_neg).long(), (n_neg - 1).clamp(min=0))
    q = padded - torch.arange(p, device=device)
    q = torch.where(padded >= n_labels, torch.full_like(q, n_labels + 1), q)
    out = r + torch.searchsorted(q.contiguous(), r, right=True)
    return torch.where(n_neg > 0, out, torch.full_like(out, -1))


def sample_negatives(
    positives: Any,
    n_labels: int,
    n_sampled: int,
    *,
    replace: bool | str = "auto",
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Draw ``n_sampled`` negative labels per row, uniformly among that row's negatives.

    Parameters
    ----------
    positives : sparse matrix of shape (n, n_labels) or tuple (indptr, indices)
        The positive labels of each row (several per row allowed); never drawn for it.
    n_labels : int
        Number of labels.
    n_sampled : int
        ``B``, negatives per row.
    replace : bool or "auto", default="auto"
        ``False``: distinct negatives within a row (exact, through one random key per
        label and row: memory ``n * n_labels``); a row with fewer than ``n_sampled``
        negatives gets all of them, the remaining slots filled by draws with replacement.
        ``True``: i.i.d. uniform draws (memory ``n * n_sampled``, any label count).
        ``"auto"``: ``False`` when ``n * n_labels <= 2**24``, else ``True``.
    generator : torch.Generator, optional
        Source of randomness (on ``device``); default torch's global generator.
    device : torch.device or str, optional
        Device of the result (default: the generator's device, else CPU).

    Returns
    -------
    negatives : torch.LongTensor of shape (n, n_sampled)
        Label indices; a row whose positives cover every label has ``-1`` everywhere.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, torch
    >>> from skxmc.losses import sample_negatives
    >>> Y = sp.csr_matrix(np.array([[1, 1, 0, 0, 0], [0, 0, 0, 1, 1]]))
    >>> neg = sample_negatives(Y, 5, 3, generator=torch.Generator().manual_seed(0))
    >>> neg.shape, sorted(neg[0].tolist()), sorted(neg[1].tolist())
    (torch.Size([2, 3]), [2, 3, 4], [0, 1, 2])
    """
    _check_sizes(n_labels, n_sampled)
    if device is None:
        device = generator.device if generator is not None else "cpu"
    padded, counts = pad_positives(positives, n_labels, device=device)
    n = padded.shape[0]
    if replace == "auto":
        replace = n * n_labels > _DENSE_KEYS_LIMIT
    elif not isinstance(replace, bool):
        raise ValueError(f"replace must be True, False or 'auto', got {replace!r}.")
    if n == 0:
        return torch.empty((0, n_sampled), dtype=torch.long, device=device)
    drawn = _draw_with_replacement(padded, counts, n_labels, n_sampled, generator)
    if replace:
        return drawn
    keys = torch.rand((n, n_labels + 1), generator=generator, device=device)
    keys.scatter_(1, padded, 2.0)  # positives (and the padding column) never come first
    b = min(n_sampled, n_labels)
    picked_keys, picked = torch.topk(keys[:, :n_labels], b, dim=1, largest=False)
    if b < n_sampled:
        picked = torch.cat([picked, drawn[:, b:]], dim=1)
        picked_keys = torch.cat(
            [picked_keys, torch.full_like(drawn[:, b:], 2.0, dtype=keys.dtype)], dim=1
        )
    return torch.where(picked_keys > 1.0, drawn, picked)


def sample_shared_negatives(
    positives: Any,
    n_labels: int,
    n_sampled: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One pool of uniformly drawn candidate labels for a whole batch, and each row's
    positives in it.

    Parameters
    ----------
    positives : sparse matrix of shape (n, n_labels) or tuple (indptr, indices)
        The positive labels of each row.
    n_labels : int
        Number of labels.
    n_sampled : int
        ``B``, size of the pool; at most ``n_labels`` are drawn (all labels when
        ``n_sampled >= n_labels``).
    generator : torch.Generator, optional
        Source of randomness (on ``device``).
    device : torch.device or str, optional
        Device of the results (default: the generator's device, else CPU).

    Returns
    -------
    candidates : torch.LongTensor of shape (b,)
        ``b = min(n_sampled, n_labels)`` distinct labels drawn uniformly without
        replacement (with replacement for more than ``2**24`` labels, where repeats are
        rare).
    is_positive : torch.BoolTensor of shape (n, b)
        True where ``candidates[j]`` is a positive of row ``i``: those are not negatives
        of that row (mask them out of the negatives).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, torch
    >>> from skxmc.losses import sample_shared_negatives
    >>> Y = sp.csr_matrix(np.array([[1, 0, 0, 1], [0, 0, 1, 0]]))
    >>> cand, is_pos = sample_shared_negatives(Y, 4, 10)
    >>> sorted(cand.tolist())
    [0, 1, 2, 3]
    >>> [cand[is_pos[i]].sort().values.tolist() for i in range(2)]
    [[0, 3], [2]]
    """
    _check_sizes(n_labels, n_sampled)
    if device is None:
        device = generator.device if generator is not None else "cpu"
    padded, _ = pad_positives(positives, n_labels, device=device)
    b = min(n_sampled, n_labels)
    if b == n_labels:
        candidates = torch.arange(n_labels, device=device)
    elif n_labels <= _RANDPERM_LIMIT:
        candidates = torch.randperm(n_labels, generator=generator, device=device)[:b]
    else:
        candidates = torch.randint(n_labels, (b,), generator=generator, device=device)
    n, p = padded.shape
    cand = candidates.unsqueeze(0).expand(n, b).contiguous()
    pos = torch.searchsorted(padded.contiguous(), cand).clamp(max=p - 1)
    return candidates, padded.gather(1, pos) == cand


def top_k_negatives(
    scores: torch.Tensor,
    candidates: torch.Tensor,
    k: int,
    *,
    exclude: torch.Tensor | None = None,
) -> MinedNegatives:
    """The ``k`` highest-scoring candidate negatives of each row (top-k SNM's mining step).

    Parameters
    ----------
    scores : torch.Tensor of shape (n, b)
        Scores of the candidates (with or without gradient).
    candidates : torch.LongTensor of shape (n, b) or (b,)
        Candidate labels per row (from :func:`sample_negatives`; ``-1`` marks none) or
        one shared pool (from :func:`sample_shared_negatives`).
    k : int
        Negatives kept per row; more than ``b`` keeps ``b``.
    exclude : torch.BoolTensor of shape (n, b), optional
        Candidates that are not negatives of the row (``is_positive`` of the shared
        sampler).

    Returns
    -------
    mined : MinedNegatives
        ``(scores, labels, mask)``, each of shape ``(n, min(k, b))``, hardest first.

    Examples
    --------
    >>> import torch
    >>> from skxmc.losses import top_k_negatives
    >>> scores = torch.tensor([[0.1, 0.9, 0.5], [0.3, 0.2, 0.8]])
    >>> mined = top_k_negatives(scores, torch.tensor([7, 8, 9]), 2,
    ...                         exclude=torch.tensor([[False, True, False], [False, False, False]]))
    >>> mined.labels.tolist(), mined.scores
    ([[9, 7], [9, 7]], tensor([[0.5000, 0.1000],
            [0.8000, 0.3000]]))
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}.")
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (n, b), got shape {tuple(scores.shape)}.")
    n, b = scores.shape
    if candidates.ndim == 1:
        candidates = candidates.unsqueeze(0).expand(n, b)
    if candidates.shape != scores.shape:
        raise ValueError(
            f"candidates has shape {tuple(candidates.shape)}, scores {tuple(scores.shape)}."
        )
    valid = candidates >= 0
    if exclude is not None:
        valid = valid & ~exclude
    k = min(int(k), b)
    ranked = torch.where(valid, scores.detach(), torch.full_like(scores.detach(), float("-inf")))
    order = torch.topk(ranked, k, dim=1).indices
    mask = valid.gather(1, order)
    labels = torch.where(mask, candidates.gather(1, order), torch.full_like(order, -1))
    return MinedNegatives(scores.gather(1, order), labels, mask)
