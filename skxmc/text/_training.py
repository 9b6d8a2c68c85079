"""The training loop shared by the neural estimators (MatchXML, SharpReCL, KNN-BERT, SNM).

The estimator supplies the model (one :class:`torch.nn.Module` holding every trainable
part and every piece of state to checkpoint: encoder, heads, label embeddings, momentum
key encoders, queues as buffers), a ``step_fn(batch) -> loss`` closure and the batches; the
:class:`Trainer` owns everything else: device placement, bfloat16 autocast on GPU,
optimisers per parameter group (AdamW without weight decay on biases and LayerNorm,
SparseAdam for sparse embedding tables), the warm-up schedule, gradient clipping, step /
epoch / time budgets, seeding, the progress bar, the loss history, checkpoints to resume an
interrupted ``fit``, and Ctrl-C, which ends training with a warning and a usable model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .._logging import progress
from ..exceptions import CheckpointMismatchWarning, TrainingInterruptedWarning
from ._checkpoint import (
    capture_rng_state,
    data_fingerprint,
    find_checkpoint,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from ._device import autocast, move_to_device, resolve_device
from ._seed import seed_everything

__all__ = [
    "CheckpointMismatchWarning",
    "ParamGroup",
    "TrainResult",
    "TrainState",
    "Trainer",
    "TrainingInterruptedWarning",
    "build_optimizers",
    "lr_factor",
    "momentum_update",
]

logger = logging.getLogger(__name__)

OPTIMIZERS = ("auto", "adamw", "adam", "sparse_adam", "sgd")
SCHEDULES = ("linear", "constant")
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)
_END = object()  # end-of-epoch sentinel (a batch may be any object)


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


@dataclasses.dataclass
class TrainState:
    """Where training is; the trainer updates it in place (read it from callbacks)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    total_steps: int = 0
    steps_per_epoch: int | None = None
    seed: int = 0
    last: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns.

    Attributes
    ----------
    history : list of dict
        One record per optimiser step: ``step`` (1-based), ``epoch`` (0-based), ``loss``,
        ``lr`` (first group), ``lr_<group>`` for every group, ``grad_norm`` (before
        clipping, when clipping), ``seconds`` since the start, plus any extra values the
        step function returned.
    n_steps : int
        Optimiser steps done, including those of a resumed run.
    epochs : float
        Passes over the data (fractional when stopped mid-epoch).
    interrupted : bool
        Whether Ctrl-C ended training.
    stop_reason : str
        ``"completed"`` (``n_epochs`` / ``max_steps`` reached), ``"max_time"``,
        ``"callback"`` (a callback returned True) or ``"interrupted"``.
    seconds : float
        Training time, including a resumed run's earlier time.
    resumed_from : int or None
        The step a checkpoint was resumed from.
    seed : int
        The seed of the run.
    checkpoint : pathlib.Path or None
        The last checkpoint written.
    """

    history: list[dict[str, Any]]
    n_steps: int
    epochs: float
    interrupted: bool
    stop_reason: str
    seconds: float
    resumed_from: int | None
    seed: int
    checkpoint: Path | None = None

    @property
    def loss_curve(self) -> list[float]:
        """The loss of every step (scikit-learn's ``loss_curve_``)."""
        return [h["loss"] for h in self.history]


def lr_factor(step: int, *, total_steps: int, warmup_steps: int, schedule: str = "linear") -> float:
    """Learning-rate multiplier used for optimiser step ``step`` (0-based).

    Linear warm-up from 0 over ``warmup_steps`` steps, then linear decay to 0 at
    ``total_steps`` (``"linear"``, as ``transformers.get_linear_schedule_with_warmup``) or
    the peak rate (``"constant"``).

    Parameters
    ----------
    step : int
        Steps already done.
    total_steps : int
        Planned number of steps.
    warmup_steps : int
        Warm-up length.
    schedule : {"linear", "constant"}, default="linear"
        Shape after the warm-up.

    Returns
    -------
    factor : float

    Examples
    --------
    >>> from skxmc.text import lr_factor
    >>> [lr_factor(s, total_steps=6, warmup_steps=2) for s in range(6)]
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25]
    """
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}.")


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
        for name, p, _ in named:
            if id(p) in owner:
                raise ValueError(
                    f"parameter {name or tuple(p.shape)} is in groups "
                    f"{owner[id(p)]!r} and {g.name!r}."
                )
            owner[id(p)] = g.name
            names[id(p)] = name or str(tuple(p.shape))
        kind = g.optimizer
        all_sparse = all(id(p) in sparse_ids for _, p, _ in named)
        if kind == "auto":
            kind = "sparse_adam" if all_sparse else "adamw"
        decay = [p for _, p, nd in named if not nd]
        no_decay = [p for _, p, nd in named if nd]
        if kind == "sparse_adam":
            if g.weight_decay:
                raise ValueError(f"group {g.name!r}: SparseAdam has no weight decay.")
            opt: torch.optim.Optimizer = torch.optim.SparseAdam(
                [p for _, p, _ in named], lr=g.lr, betas=g.betas, eps=g.eps
            )
        else:
            torch_groups = [
                {"params": ps, "weight_decay": wd}
                for ps, wd in ((decay, g.weight_decay), (no_decay, 0.0))
                if ps
            ]
            if kind == "adamw":
                opt = torch.optim.AdamW(torch_groups, lr=g.lr, betas=g.betas, eps=g.eps)
            elif kind == "adam":
                opt = torch.optim.Adam(torch_groups, lr=g.lr, betas=g.betas, eps=g.eps)
            else:
                opt = torch.optim.SGD(torch_groups, lr=g.lr, momentum=g.momentum)
        for pg in opt.param_groups:
            pg["base_lr"] = g.lr  # the schedule multiplies this
        out.append((g, kind, opt))
    if module is not None:
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
    return out


def _resolve_warmup(warmup: float, total: int) -> int:
    if isinstance(warmup, Integral) and not isinstance(warmup, bool):
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {warmup}.")
        return int(warmup)
    if isinstance(warmup, Real) and 0.0 <= warmup < 1.0:
        return round(float(warmup) * total)
    raise ValueError(
        f"warmup must be a number of steps (int) or a fraction in [0, 1), got {warmup!r}."
    )


class Trainer:
    """The training loop of every neural estimator.

    Parameters
    ----------
    module : torch.nn.Module
        Everything trained or checkpointed (encoder, heads, label embeddings, momentum
        encoders, queues registered as buffers). It is moved to ``device``, set to train
        mode for the loop and to eval mode at the end; it stays on ``device``.
    param_groups : list of ParamGroup or None, default=None
        Optimiser groups; None: one AdamW group over the whole module with ``lr`` and
        ``weight_decay``.
    lr : float, default=5e-5
        Learning rate of the default group.
    weight_decay : float, default=0.0
        Weight decay of the default group.
    n_epochs : int or None, default=1
        Passes over the data; None: until ``max_steps``.
    max_steps : int or None, default=None
        Cap on optimiser steps (the schedule spans ``min(max_steps, n_epochs *
        steps_per_epoch)``).
    warmup : int or float, default=0.0
        Warm-up steps (int) or fraction of the planned steps (float in [0, 1)).
    max_grad_norm : float or None, default=1.0
        Clip the global gradient norm of the clipped groups; None or 0 disables.
    max_time : float or None, default=None
        Stop after this many seconds of training (checked after every step).
    device : str or torch.device, default="auto"
        ``"auto"``: CUDA when available.
    mixed_precision : {"auto", "bf16", "no"}, default="auto"
        Autocast of ``step_fn``: bfloat16 on GPU, float32 on CPU by default.
    random_state : int, RandomState or None, default=None
        Seeds Python, numpy and torch at the start of :meth:`fit` (see
        :func:`~skxmc.text.seed_everything`); also seeds :attr:`rng` and the per-epoch
        generators handed to ``data``.
    verbose : int, default=0
        > 0: a tqdm progress bar with the running loss (standard error), and a summary line
        (and a line when resuming from a checkpoint) printed to standard output. These
        lines are also logged at DEBUG on the ``skxmc.text._training`` logger, whatever
        ``verbose``.
    checkpoint_dir : str, path-like or None, default=None
        Write checkpoints there (every ``checkpoint_every`` steps, at every epoch end, at
        the end and on Ctrl-C) and resume from the one found at the start of :meth:`fit`
        when it belongs to the same run: same ``fingerprint``, ``fit_data``, seed, planned
        steps, parameter shapes and optimiser groups. A finished checkpoint of the same
        run is the result of this very fit: its weights are restored without training.
        A checkpoint of another run is never resumed: a finished one is replaced (a
        :class:`CheckpointMismatchWarning` says so and training starts from scratch, as
        for every fold of a cross-validation sharing one folder); an unfinished one, the
        progress of an interrupted run, makes :meth:`fit` raise instead of destroying it.
    checkpoint_every : int or None, default=None
        Steps between checkpoints in addition to epoch ends.
    fingerprint : dict or None, default=None
        JSON-able description of the run (an estimator's parameters, see
        :func:`~skxmc.text._checkpoint.params_fingerprint`).
    fit_data : object, default=None
        The training data the run depends on (texts or tokenised texts, feature matrix,
        encoded labels, ``classes_``, or a tuple of them, or a digest string from
        :func:`~skxmc.text._checkpoint.data_fingerprint`). With ``checkpoint_dir``, it is
        hashed once per :meth:`fit` into the checkpoint fingerprint, so that a checkpoint
        of a fit on other data is never resumed.
    after_step : callable or None, default=None
        ``after_step(trainer) -> bool | None`` after every optimiser step (momentum
        encoder updates, queue refresh, evaluation); returning True stops training.
    after_epoch : callable or None, default=None
        ``after_epoch(trainer) -> bool | None`` after every full pass; True stops.
    desc : str, default="training"
        Progress bar label.

    Attributes
    ----------
    device : torch.device
        The resolved device; batches are moved there before ``step_fn`` sees them.
    state : TrainState
        Step, epoch and position, updated during :meth:`fit`.
    rng : numpy.random.Generator
        Generator for the step function's own sampling (negatives, augmentation); its
        state is checkpointed, so a resumed run draws the same numbers.
    optimizers : list of torch.optim.Optimizer
        Built in :meth:`fit`; drop the trainer after ``fit`` to free their memory.

    Examples
    --------
    >>> import torch
    >>> from skxmc.text import Trainer
    >>> model = torch.nn.Linear(3, 1)
    >>> X, y = torch.randn(64, 3), torch.randn(64, 1)
    >>> def step(idx):
    ...     return torch.nn.functional.mse_loss(model(X[idx]), y[idx])
    >>> data = lambda epoch, rng: [torch.as_tensor(b) for b in rng.permutation(64).reshape(4, 16)]
    >>> result = Trainer(model, lr=0.1, n_epochs=5, device="cpu", random_state=0).fit(step, data)
    >>> result.n_steps, result.loss_curve[-1] < result.loss_curve[0]
    (20, True)
    """

    def __init__(
        self,
        module: nn.Module,
        param_groups: list[ParamGroup] | None = None,
        *,
        lr: float = 5e-5,
        weight_decay: float = 0.0,
        n_epochs: int | None = 1,
        max_steps: int | None = None,
        warmup: float = 0.0,
        max_grad_norm: float | None = 1.0,
        max_time: float | None = None,
        device: str | torch.device = "auto",
        mixed_precision: str | bool | None = "auto",
        random_state: Any = None,
        verbose: int = 0,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int | None = None,
        fingerprint: dict[str, Any] | None = None,
        fit_data: Any = None,
        after_step: Callable[[Trainer], bool | None] | None = None,
        after_epoch: Callable[[Trainer], bool | None] | None = None,
        desc: str = "training",
    ) -> None:
        if n_epochs is None and max_steps is None:
            raise ValueError("set n_epochs, max_steps or both.")
        if n_epochs is not None and n_epochs < 1:
            raise ValueError(f"n_epochs must be >= 1, got {n_epochs}.")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}.")
        self.module = module
        self.param_groups = param_groups
        self.lr = lr
        self.weight_decay = weight_decay
        self.n_epochs = n_epochs
        self.max_steps = max_steps
        self.warmup = warmup
        self.max_grad_norm = max_grad_norm
        self.max_time = max_time
        self.device = resolve_device(device)
        self.mixed_precision = mixed_precision
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_every = checkpoint_every
        self.fingerprint = fingerprint
        self.fit_data = fit_data
        self.after_step = after_step
        self.after_epoch = after_epoch
        self.desc = desc
        self.state = TrainState()
        self.rng = np.random.default_rng()
        self.optimizers: list[torch.optim.Optimizer] = []
        self._groups: list[tuple[ParamGroup, str, torch.optim.Optimizer]] = []
        self._in_update = False
        self._mid_step = False
        self._volatile: list[tuple[torch.Tensor, torch.Tensor]] = []

    # Helpers ----------------------------------------------------------------------------

    def epoch_rng(self, epoch: int) -> np.random.Generator:
        """The generator handed to ``data`` for ``epoch``: a function of (seed, epoch) only,
        so a resumed run rebuilds the interrupted epoch's batch order."""
        return np.random.default_rng([self.state.seed, 1, epoch])

    def _fingerprint(self, total: int) -> dict[str, Any]:
        shapes = [[n, list(p.shape)] for n, p in self.module.state_dict().items()]
        fp: dict[str, Any] = {
            "total_steps": total,
            "state_dict": shapes,
            "groups": [[g.name, kind, g.lr] for g, kind, _ in self._groups],
            "user": self.fingerprint,
        }
        if isinstance(self.random_state, Integral):
            fp["seed"] = int(self.random_state)
        if self.checkpoint_dir is not None:  # only checkpoints need it: skip the hashing
            fit_data = self.fit_data
            fp["data"] = fit_data if isinstance(fit_data, str) else data_fingerprint(fit_data)
        return json.loads(json.dumps(fp))  # normalise tuples etc. for comparison

    def _volatile_state(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(tensor, copy) for every buffer and every parameter no optimiser steps: what a
        forward pass or the step function changes before the optimiser step (BatchNorm
        statistics, momentum encoders, queues)."""
        stepped = {
            id(p) for opt in self.optimizers for pg in opt.param_groups for p in pg["params"]
        }
        tensors = list(self.module.buffers())
        tensors += [p for p in self.module.parameters() if id(p) not in stepped]
        return [(t, torch.empty_like(t)) for t in tensors]

    def _restore_volatile(self) -> None:
        with torch.no_grad():
            for tensor, copy in self._volatile:
                tensor.copy_(copy)

    def _set_lr(self, step: int, total: int, warmup: int) -> None:
        for g, _, opt in self._groups:
            factor = lr_factor(step, total_steps=total, warmup_steps=warmup, schedule=g.schedule)
            for pg in opt.param_groups:
                pg["lr"] = pg["base_lr"] * factor

    def _clipped_params(self) -> list[nn.Parameter]:
        params = []
        for g, kind, opt in self._groups:
            if g.clip is False or (g.clip is None and kind == "sparse_adam"):
                continue
            for pg in opt.param_groups:
                params.extend(p for p in pg["params"] if p.grad is not None)
        return params

    def _zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

    def _save(
        self,
        rng_state: dict[str, Any],
        fp: dict[str, Any],
        history: list,
        seconds: float,
        completed: bool,
    ) -> Path | None:
        if self.checkpoint_dir is None:
            return None
        s = self.state
        payload = {
            "step": s.step,
            "epoch": s.epoch,
            "batch_in_epoch": s.batch_in_epoch,
            "seed": s.seed,
            "seconds": seconds,
            "completed": completed,
            "fingerprint": fp,
            "history": history,
        }
        return save_checkpoint(
            self.checkpoint_dir, self.module, self.optimizers, payload, rng_state
        )

    def _train_step(
        self, step_fn: Callable[[Any], Any], batch: Any, total: int, warmup: int
    ) -> dict[str, Any]:
        """Forward (under autocast), backward, clipping, schedule and optimiser steps."""
        s = self.state
        if self._volatile:
            with torch.no_grad():
                for tensor, copy in self._volatile:
                    copy.copy_(tensor)
        # From here until the counters move, the module may hold a partial step (BatchNorm
        # statistics, a momentum update): a checkpoint on Ctrl-C restores the copy first.
        self._mid_step = True
        batch = move_to_device(batch, self.device)
        with autocast(self.device, self.mixed_precision):
            out = step_fn(batch)
        loss, extras = _split_output(out)
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            self._zero_grad()
            raise FloatingPointError(
                f"the loss is {loss_value} at step {s.step + 1}; the model keeps the weights of "
                f"step {s.step}. Lower the learning rate or check the inputs."
            )
        loss.backward()
        record: dict[str, Any] = {"step": s.step + 1, "epoch": s.epoch, "loss": loss_value}
        if self.max_grad_norm:
            params = self._clipped_params()
            if params:
                norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
                record["grad_norm"] = float(norm)
        self._set_lr(s.step, total, warmup)
        # An interrupt from here until the counters move could leave half-updated weights
        # that match no step: no checkpoint is written for it.
        self._in_update = True
        for opt in self.optimizers:
            opt.step()
        self._zero_grad()
        s.step += 1
        s.batch_in_epoch += 1
        self._mid_step = False  # before _in_update drops, so no interrupt sees it stale
        self._in_update = False
        for i, (g, _, opt) in enumerate(self._groups):
            lr = opt.param_groups[0]["lr"]
            if i == 0:
                record["lr"] = lr
            record[f"lr_{g.name}"] = lr
        record.update(extras)
        s.last = record
        return record

    def _other_run(self, found: Path, saved: dict[str, Any], diff: list[str]) -> None:
        """A checkpoint of another run was found: warn and start afresh when it is finished
        (it is replaced), raise when it is not (it is the progress of an interrupted run)."""
        what = ", ".join(diff) or "its format"
        if saved.get("completed"):
            warnings.warn(
                f"checkpoint_dir {self.checkpoint_dir} holds the finished checkpoint of another "
                f"fit (it differs in {what}); it is not reused: training starts from scratch "
                f"and its checkpoints replace it.",
                CheckpointMismatchWarning,
                stacklevel=3,
            )
            return None
        hint = ""
        if "the seed (random_state)" in diff:
            hint = (
                " With random_state=None, every fit draws a new seed and cannot resume "
                "another: set an int random_state."
            )
        total = (saved.get("fingerprint") or {}).get("total_steps", "?")
        raise ValueError(
            f"checkpoint_dir {self.checkpoint_dir} holds the unfinished checkpoint of another "
            f"fit (step {saved.get('step', '?')} of {total}), which differs in {what}. To "
            f"resume that fit, fit again with its data and parameters; to train this one, "
            f"pass another checkpoint_dir or delete {found}.{hint}"
        )

    # The loop ---------------------------------------------------------------------------

    def fit(
        self,
        step_fn: Callable[[Any], torch.Tensor | Mapping[str, Any]],
        data: Callable[[int, np.random.Generator], Iterable[Any]] | Iterable[Any],
        *,
        steps_per_epoch: int | None = None,
    ) -> TrainResult:
        """Train ``module`` by minimising what ``step_fn`` returns.

        Parameters
        ----------
        step_fn : callable
            ``step_fn(batch)`` runs the forward pass and returns the loss (a scalar tensor)
            or a dict with ``"loss"`` and further values to record (floats or scalar
            tensors). It runs under autocast; the trainer does the backward pass, clipping,
            the optimiser and schedule steps. Use :attr:`rng` for random choices and
            :attr:`device` for tensors it creates.
        data : callable or iterable
            ``data(epoch, rng)`` returning the epoch's batches (for instance
            ``tokenized.batches(32, shuffle=True, rng=rng)``), or a re-iterable used for
            every epoch. ``rng`` depends only on (seed, epoch), which lets a resumed run
            skip to the same position; batches are moved to :attr:`device` (tensors,
            dicts / lists / tuples of tensors, objects with ``.to``).
        steps_per_epoch : int or None, default=None
            Batches per epoch when the epoch's batches have no ``len``.

        Returns
        -------
        result : TrainResult

        Raises
        ------
        FloatingPointError
            If the loss becomes NaN or infinite (the weights of the previous step stay).
        """
        start_time = time.perf_counter()
        self.state = TrainState(seed=seed_everything(self.random_state))
        self.rng = np.random.default_rng([self.state.seed, 0])
        self.module.to(self.device)
        groups = self.param_groups
        if groups is None:
            groups = [ParamGroup("model", self.module, lr=self.lr, weight_decay=self.weight_decay)]
        self._groups = build_optimizers(list(groups), self.module)
        self.optimizers = [opt for _, _, opt in self._groups]

        epoch_data = data if callable(data) else (lambda epoch, rng: data)
        if steps_per_epoch is None:
            first = epoch_data(0, self.epoch_rng(0))
            steps_per_epoch = len(first) if hasattr(first, "__len__") else None
        if steps_per_epoch == 0:
            raise ValueError("the data yields no batches.")
        if self.n_epochs is not None and steps_per_epoch is None and self.max_steps is None:
            raise ValueError(
                "with n_epochs and batches without len(), pass steps_per_epoch or max_steps."
            )
        planned = [self.max_steps] if self.max_steps is not None else []
        if self.n_epochs is not None and steps_per_epoch is not None:
            planned.append(self.n_epochs * steps_per_epoch)
        total = min(planned)
        warmup = _resolve_warmup(self.warmup, total)
        self.state.total_steps, self.state.steps_per_epoch = total, steps_per_epoch
        fp = self._fingerprint(total)

        history: list[dict[str, Any]] = []
        prior_seconds, resumed_from, completed_before = 0.0, None, False
        found = find_checkpoint(self.checkpoint_dir) if self.checkpoint_dir is not None else None
        if found is not None:
            saved = json.loads((found / "trainer_state.json").read_text(encoding="utf-8"))
            saved_fp = saved.get("fingerprint") or {}
            if saved_fp != fp:
                found = self._other_run(found, saved, _fingerprint_diff(fp, saved_fp))
        if found is not None:
            saved, rng_state = load_checkpoint(found, self.module, self.optimizers)
            self.state.step, self.state.epoch = saved["step"], saved["epoch"]
            self.state.batch_in_epoch, self.state.seed = saved["batch_in_epoch"], saved["seed"]
            self.rng = np.random.default_rng([self.state.seed, 0])
            restore_rng_state(rng_state, self.rng)
            history, prior_seconds = saved["history"], saved["seconds"]
            resumed_from, completed_before = saved["step"], saved["completed"]
            progress(
                logger,
                self.verbose,
                "%s: resuming from %s at step %d of %d",
                self.desc,
                found,
                self.state.step,
                total,
            )

        tracking = self.checkpoint_dir is not None
        rng_snapshot = capture_rng_state(self.rng) if tracking else {}
        stop_reason = "completed"
        interrupted = False
        self._in_update = self._mid_step = False
        # Only a checkpoint needs the state of the step's start (it costs one copy of it).
        self._volatile = self._volatile_state() if tracking and not completed_before else []
        last_checkpoint: Path | None = found
        bar = None
        if self.verbose and not completed_before:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, initial=self.state.step, desc=self.desc, unit="step")
        smoothed = None
        self.module.train()
        try:
            done = completed_before or self.state.step >= total
            while not done:
                s = self.state
                batches = iter(epoch_data(s.epoch, self.epoch_rng(s.epoch)))
                for _ in range(s.batch_in_epoch):  # resuming mid-epoch: same order, skip
                    next(batches, _END)
                epoch_ended = False
                while not done:
                    if steps_per_epoch is not None and s.batch_in_epoch >= steps_per_epoch:
                        epoch_ended = True
                        break
                    batch = next(batches, _END)
                    if batch is _END:
                        epoch_ended = True
                        break
                    record = self._train_step(step_fn, batch, total, warmup)
                    record["seconds"] = prior_seconds + time.perf_counter() - start_time
                    history.append(record)
                    smoothed = (
                        record["loss"]
                        if smoothed is None
                        else (0.9 * smoothed + 0.1 * record["loss"])
                    )
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(loss=f"{smoothed:.4g}", refresh=False)
                    stop = bool(self.after_step(self)) if self.after_step is not None else False
                    if tracking:
                        rng_snapshot = capture_rng_state(self.rng)
                    if s.step >= total:
                        done = True
                    elif stop:
                        done, stop_reason = True, "callback"
                    elif (
                        self.max_time is not None
                        and time.perf_counter() - start_time >= self.max_time
                    ):
                        done, stop_reason = True, "max_time"
                    epoch_end = steps_per_epoch is not None and s.batch_in_epoch >= steps_per_epoch
                    if (
                        not done
                        and not epoch_end
                        and self.checkpoint_every
                        and s.step % self.checkpoint_every == 0
                    ):  # the epoch end saves anyway
                        last_checkpoint = self._save(
                            rng_snapshot, fp, history, record["seconds"], completed=False
                        )
                if s.batch_in_epoch == 0 and not done:
                    raise ValueError(f"epoch {s.epoch} yielded no batches.")
                if epoch_ended or (
                    steps_per_epoch is not None and s.batch_in_epoch >= steps_per_epoch
                ):
                    s.epoch += 1
                    s.batch_in_epoch = 0
                    stop = bool(self.after_epoch(self)) if self.after_epoch is not None else False
                    if self.n_epochs is not None and s.epoch >= self.n_epochs:
                        done = True
                    elif stop and not done:
                        done, stop_reason = True, "callback"
                    if tracking:
                        rng_snapshot = capture_rng_state(self.rng)
                    if not done:
                        last_checkpoint = self._save(
                            rng_snapshot,
                            fp,
                            history,
                            prior_seconds + time.perf_counter() - start_time,
                            completed=False,
                        )
            if tracking and not completed_before:
                last_checkpoint = self._save(
                    rng_snapshot,
                    fp,
                    history,
                    prior_seconds + time.perf_counter() - start_time,
                    completed=stop_reason in ("completed", "callback"),
                )
        except KeyboardInterrupt:
            interrupted, stop_reason = True, "interrupted"
            self._zero_grad()
            where = ""
            if tracking and not self._in_update:
                if self._mid_step:  # the step is redone on resume: undo its partial effects
                    self._restore_volatile()
                # The snapshot is the RNG state at the start of the interrupted step, which
                # is redone on resume.
                last_checkpoint = self._save(
                    rng_snapshot,
                    fp,
                    history,
                    prior_seconds + time.perf_counter() - start_time,
                    completed=False,
                )
                where = (
                    f" A checkpoint is in {last_checkpoint}: fit again with the same "
                    f"checkpoint_dir to resume."
                )
            warnings.warn(
                f"Training interrupted by the user after step {self.state.step} of {total}; "
                f"the model keeps the weights of that step.{where}",
                TrainingInterruptedWarning,
                stacklevel=2,
            )
        finally:
            self._volatile, self._mid_step = [], False
            if bar is not None:
                bar.close()
            self.module.eval()
        seconds = prior_seconds + time.perf_counter() - start_time
        if completed_before:
            seconds = prior_seconds
        s = self.state
        epochs = (s.step / steps_per_epoch) if steps_per_epoch else float(s.epoch)
        last_loss = history[-1]["loss"] if history else float("nan")
        progress(
            logger,
            self.verbose,
            "%s: %d steps (%.2f epochs) in %.1f s, last loss %.4g (%s)",
            self.desc,
            s.step,
            epochs,
            seconds,
            last_loss,
            stop_reason,
        )
        return TrainResult(
            history=history,
            n_steps=s.step,
            epochs=epochs,
            interrupted=interrupted,
            stop_reason=stop_reason,
            seconds=seconds,
            resumed_from=resumed_from,
            seed=s.seed,
            checkpoint=last_checkpoint,
        )


_FINGERPRINT_NAMES = {
    "data": "the training data",
    "seed": "the seed (random_state)",
    "total_steps": "the number of steps",
    "state_dict": "the model's tensor shapes",
    "groups": "the optimiser groups",
}


def _fingerprint_diff(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """What differs between two run fingerprints, in words (parameters by name)."""
    out = []
    for key in sorted(set(new) | set(old)):
        a, b = new.get(key), old.get(key)
        if a == b:
            continue
        if key == "user" and isinstance(a, dict) and isinstance(b, dict):
            out += [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        else:
            out.append(_FINGERPRINT_NAMES.get(key, key))
    return out


def _split_output(out: Any) -> tuple[torch.Tensor, dict[str, float]]:
    if isinstance(out, torch.Tensor):
        loss, extras = out, {}
    elif isinstance(out, Mapping) and "loss" in out:
        loss = out["loss"]
        extras = {
            k: float(v.detach()) if isinstance(v, torch.Tensor) else float(v)
            for k, v in out.items()
            if k != "loss"
        }
    else:
        raise TypeError(
            "step_fn must return a scalar loss tensor or a dict with a 'loss' key, "
            f"got {type(out).__name__}."
        )
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        raise TypeError("the loss must be a scalar tensor (reduce it with .mean() or .sum()).")
    if not loss.requires_grad:
        raise ValueError(
            "the loss does not require grad: is the forward pass under "
            "torch.no_grad / inference_mode, or are all parameters frozen?"
        )
    return loss, extras
