"""Optimisers of the training loop: parameter groups and their optimisers.

A :class:`ParamGroup` names a part of the model with its learning rate, weight decay,
schedule and optimiser; :func:`build_optimizers` makes one optimiser per group (AdamW
without weight decay on biases and normalisation layers, SparseAdam for sparse embedding
tables) and checks that every trainable parameter is in exactly one group.
:func:`momentum_update` is the exponential moving average of a momentum (key) encoder;
:func:`fit_linear_probe` refits a linear layer on frozen features by L-BFGS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from ._callbacks import SCHEDULES

__all__ = ["OPTIMIZERS", "ParamGroup", "build_optimizers", "fit_linear_probe", "momentum_update"]

OPTIMIZERS = ("auto", "adamw", "adam", "sparse_adam", "sgd")
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)


@dataclasses.dataclass
class ParamGroup:
    """Parameters trained by one optimiser with one learning rate.

    Parameters
    ----------
    name : str
        Used in the history (``lr_<name>``) and in error messages.
    params : torch.nn.Module, iterable of torch.nn.Parameter or of (name, Parameter)
        The parameters. A module (or named parameters) lets the no-decay rule find
        biases and normalisation weights by module type and name; for bare parameters,
        every parameter with fewer than 2 dimensions counts as one. Parameters with
        ``requires_grad=False`` are skipped.
    lr : float
        Peak learning rate (reached after the warm-up).
    optimizer : {"auto", "adamw", "adam", "sparse_adam", "sgd"}, default="auto"
        ``"auto"``: ``"sparse_adam"`` when every parameter is the weight of an
        ``nn.Embedding(sparse=True)`` (only the rows in the batch are updated, the way to
        train large label-embedding tables), else ``"adamw"``.
    weight_decay : float, default=0.0
        Decoupled weight decay for AdamW, L2 penalty for Adam / SGD; never applied to
        biases and normalisation layers. Not supported by SparseAdam.
    betas : tuple of float, default=(0.9, 0.999)
        Adam moments.
    eps : float, default=1e-8
        Adam epsilon.
    momentum : float, default=0.0
        SGD momentum.
    schedule : {"linear", "constant"}, default="linear"
        After the warm-up, ``"linear"`` decays to 0 at the last step, ``"constant"`` keeps
        the peak rate.
    clip : bool or None, default=None
        Whether gradient clipping covers this group; None: yes unless the optimiser is
        SparseAdam (norms of sparse gradients are not supported by clipping).

    Examples
    --------
    MatchXML's setting: the encoder with AdamW and a label-embedding table with its own
    optimiser and learning rate.

    >>> import torch
    >>> from skxmc.text import ParamGroup
    >>> encoder = torch.nn.Linear(4, 4)
    >>> labels = torch.nn.Embedding(100, 4, sparse=True)
    >>> groups = [ParamGroup("encoder", encoder, lr=5e-5, weight_decay=0.1,
    ...                      betas=(0.9, 0.98), eps=1e-6),
    ...           ParamGroup("labels", labels, lr=1e-3)]
    """

    name: str
    params: Any
    lr: float
    optimizer: str = "auto"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum: float = 0.0
    schedule: str = "linear"
    clip: bool | None = None


def momentum_update(target: nn.Module, source: nn.Module, momentum: float) -> None:
    """Exponential moving average of weights: ``target = m * target + (1 - m) * source``.

    For momentum (key) encoders as in MoCo and KNN-BERT: call it from the trainer's
    ``after_step`` callback. Buffers (such as BatchNorm statistics) are copied.

    Parameters
    ----------
    target : torch.nn.Module
        The momentum copy (its parameters usually have ``requires_grad=False``).
    source : torch.nn.Module
        The trained module, with the same architecture.
    momentum : float
        ``m`` in [0, 1]; KNN-BERT uses 0.999.
    """
    with torch.no_grad():
        t_params, s_params = list(target.parameters()), list(source.parameters())
        if len(t_params) != len(s_params):
            raise ValueError("target and source must have the same parameters.")
        torch._foreach_mul_(t_params, momentum)
        torch._foreach_add_(t_params, s_params, alpha=1.0 - momentum)
        for tb, sb in zip(target.buffers(), source.buffers()):
            tb.copy_(sb)


def fit_linear_probe(
    layer: nn.Linear, features: torch.Tensor, loss: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    """Refit ``layer`` on frozen ``features`` (a linear probe), from zero weights.

    Minimises ``loss(features @ W.T + b)`` plus the L2 penalty of scikit-learn's
    ``LogisticRegression(C=1)``, ``||W||^2 / (2 n)``, by L-BFGS (strong Wolfe line search,
    at most 500 iterations), and writes ``W`` and ``b`` into ``layer``.

    Parameters
    ----------
    layer : torch.nn.Linear
        The layer refitted (its weights are replaced, on their device).
    features : torch.Tensor of shape (n_samples, in_features)
        On the layer's device.
    loss : callable
        ``loss(logits) -> scalar tensor``: the data term, a mean over the rows.
    """
    weight = torch.zeros_like(layer.weight, requires_grad=True)
    bias = torch.zeros_like(layer.bias, requires_grad=True)
    penalty = 0.5 / len(features)
    optimizer = torch.optim.LBFGS(
        [weight, bias], max_iter=500, tolerance_grad=1e-6, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        total = loss(features @ weight.T + bias) + penalty * weight.pow(2).sum()
        total.backward()
        return total

    with torch.enable_grad():
        optimizer.step(closure)
    with torch.no_grad():
        layer.weight.copy_(weight.detach())
        layer.bias.copy_(bias.detach())


def _named_params(params: Any) -> list[tuple[str | None, nn.Parameter, bool]]:
    """(name, parameter, no_decay) for each distinct trainable parameter."""
    out: list[tuple[str | None, nn.Parameter, bool]] = []
    seen: set[int] = set()
    if isinstance(params, nn.Module):
        for mod_name, mod in params.named_modules():
            is_norm = isinstance(mod, _NORM_TYPES) or "norm" in type(mod).__name__.lower()
            for p_name, p in mod.named_parameters(recurse=False):
                if id(p) in seen or not p.requires_grad:
                    continue
                seen.add(id(p))
                name = f"{mod_name}.{p_name}" if mod_name else p_name
                out.append((name, p, is_norm or p_name.endswith("bias")))
        return out
    if isinstance(params, (torch.Tensor, Mapping)):
        raise TypeError("ParamGroup.params must be a module or an iterable of parameters.")
    for item in params:
        name, p = item if isinstance(item, tuple) else (None, item)
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        if name is None:
            no_decay = p.ndim < 2
        else:
            last = name.rsplit(".", 1)[-1]
            no_decay = last.endswith("bias") or "norm" in name.lower()
        out.append((name, p, no_decay))
    return out


def _sparse_param_ids(module: nn.Module) -> set[int]:
    return {
        id(m.weight)
        for m in module.modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
    }


def build_optimizers(
    groups: list[ParamGroup], module: nn.Module | None = None
) -> list[tuple[ParamGroup, str, torch.optim.Optimizer]]:
    """One optimiser per :class:`ParamGroup`.

    Parameters
    ----------
    groups : list of ParamGroup
        The groups; a parameter may belong to one group only.
    module : torch.nn.Module, optional
        The whole model. When given, every trainable parameter of it must be in a group
        (forgotten parameters would silently stay untrained) and every grouped parameter
        must belong to it (it would not be moved to the device nor checkpointed).

    Returns
    -------
    optimizers : list of (ParamGroup, str, torch.optim.Optimizer)
        Each group with its resolved optimiser name and the optimiser. AdamW / Adam / SGD
        optimisers hold two torch parameter groups (with and without weight decay).
    """
    sparse_ids = _sparse_param_ids(module) if module is not None else set()
    for g in groups:
        if isinstance(g.params, nn.Module):
            sparse_ids |= _sparse_param_ids(g.params)
    owner: dict[int, str] = {}
    names: dict[int, str] = {}
    out = []
    for g in groups:
        named = _check_group(g)
        for name, p, _ in named:
            if id(p) in owner:
                raise ValueError(
                    f"parameter {name or tuple(p.shape)} is in groups "
                    f"{owner[id(p)]!r} and {g.name!r}."
                )
            owner[id(p)] = g.name
            names[id(p)] = name or str(tuple(p.shape))
        kind = g.optimizer
        if kind == "auto":
            kind = "sparse_adam" if all(id(p) in sparse_ids for _, p, _ in named) else "adamw"
        opt = _make_optimizer(g, kind, named)
        for pg in opt.param_groups:
            pg["base_lr"] = g.lr  # the schedule multiplies this
        out.append((g, kind, opt))
    if module is not None:
        _check_coverage(module, owner, names)
    return out


def _check_group(g: ParamGroup) -> list[tuple[str | None, nn.Parameter, bool]]:
    """The group's named parameters, after checking its settings."""
    if g.optimizer not in OPTIMIZERS:
        raise ValueError(
            f"group {g.name!r}: optimizer must be one of {OPTIMIZERS}, got {g.optimizer!r}."
        )
    if g.schedule not in SCHEDULES:
        raise ValueError(f"group {g.name!r}: schedule must be one of {SCHEDULES}.")
    if not g.lr >= 0:
        raise ValueError(f"group {g.name!r}: lr must be >= 0, got {g.lr}.")
    named = _named_params(g.params)
    if not named:
        raise ValueError(f"group {g.name!r} has no trainable parameters.")
    return named


def _make_optimizer(g: ParamGroup, kind: str, named: list) -> torch.optim.Optimizer:
    if kind == "sparse_adam":
        if g.weight_decay:
            raise ValueError(f"group {g.name!r}: SparseAdam has no weight decay.")
        return torch.optim.SparseAdam([p for _, p, _ in named], lr=g.lr, betas=g.betas, eps=g.eps)
    decay = [p for _, p, nd in named if not nd]
    no_decay = [p for _, p, nd in named if nd]
    torch_groups = [
        {"params": ps, "weight_decay": wd}
        for ps, wd in ((decay, g.weight_decay), (no_decay, 0.0))
        if ps
    ]
    if kind == "adamw":
        return torch.optim.AdamW(torch_groups, lr=g.lr, betas=g.betas, eps=g.eps)
    if kind == "adam":
        return torch.optim.Adam(torch_groups, lr=g.lr, betas=g.betas, eps=g.eps)
    return torch.optim.SGD(torch_groups, lr=g.lr, momentum=g.momentum)


def _check_coverage(module: nn.Module, owner: dict[int, str], names: dict[int, str]) -> None:
    """Every trainable parameter of ``module`` in a group, every grouped one in it."""
    in_module = {id(p) for p in module.parameters()}
    outside = [names[i] for i in owner if i not in in_module]
    if outside:
        raise ValueError(
            f"parameters {outside[:5]} are in a group but not in the module "
            f"(they would be neither moved to the device nor checkpointed)."
        )
    left = [n for n, p in module.named_parameters() if p.requires_grad and id(p) not in owner]
    if left:
        raise ValueError(
            f"{len(left)} trainable parameters of the module are in no group, e.g. "
            f"{left[:5]}; add them to a ParamGroup or set requires_grad=False."
        )
