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
import itertools
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from .._logging import progress
from ..exceptions import CheckpointMismatchWarning, TrainingInterruptedWarning
from ._callbacks import Callback, Checkpoint, LRScheduler, ProgressBar, StepFunction
from ._checkpoint import data_fingerprint, find_checkpoint
from ._device import make_accelerator, move_to_device, training_device
from ._optim import ParamGroup, build_optimizers, momentum_update
from ._seed import seed_everything

__all__ = [
    "Callback",
    "CheckpointMismatchWarning",
    "ParamGroup",
    "TrainResult",
    "TrainState",
    "Trainer",
    "TrainingInterruptedWarning",
    "build_optimizers",
    "momentum_update",
]

logger = logging.getLogger(__name__)

_END = object()  # end-of-epoch sentinel (a batch may be any object)


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
        ``"callback"`` (a callback returned True or called :meth:`Trainer.stop`),
        ``"early_stopping"`` or ``"interrupted"``.
    seconds : float
        Training time, including a resumed run's earlier time.
    resumed_from : int or None
        The step a checkpoint was resumed from.
    seed : int
        The seed of the run.
    checkpoint : pathlib.Path or None
        The last checkpoint written.
    epoch_history : list of dict
        One record per finished epoch (:attr:`Trainer.epoch_history`).
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
    epoch_history: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def loss_curve(self) -> list[float]:
        """The loss of every step (scikit-learn's ``loss_curve_``)."""
        return [h["loss"] for h in self.history]


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

    The loop is skorch's: :meth:`fit` sets up, :meth:`fit_loop` runs epochs,
    :meth:`run_epoch` runs optimiser steps and :meth:`train_step` does one (forward and
    backward over ``accumulation_steps`` micro-batches, gradient clipping, optimiser
    steps). Everything else is a callback (:mod:`skxmc.text._callbacks`): the learning-rate
    schedule, checkpoints and resume, the progress bar, validation scores and early
    stopping. Device, mixed precision (with loss scaling for float16) and several
    processes go through :class:`accelerate.Accelerator`: the same code runs on one CPU,
    one GPU, or as data-parallel processes started by ``accelerate launch`` /
    ``torchrun``.

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
        ``"auto"``: CUDA when available. Under ``accelerate launch`` / ``torchrun``,
        each process uses its own GPU (``cuda:<LOCAL_RANK>``), or the CPU.
    mixed_precision : {"auto", "bf16", "fp16", "no"}, default="auto"
        Autocast of ``step_fn``: bfloat16 on GPU, float32 on CPU by default; ``"fp16"``
        scales the loss (a :class:`torch.amp.GradScaler` from ``accelerate``).
    accumulation_steps : int, default=1
        Micro-batches whose gradients add up to one optimiser step: a step over ``k``
        batches of ``b`` equals one step over a batch of ``k * b`` for losses that are
        means over the batch. Steps and epochs count optimiser steps.
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
        Adds a :class:`~skxmc.text.Checkpoint` callback: checkpoints there (every
        ``checkpoint_every`` steps, at every epoch end, at the end and on Ctrl-C), and a
        resume from the one found at the start of :meth:`fit` when it belongs to the same
        run: same ``fingerprint``, ``fit_data``, seed, planned steps, parameter shapes and
        optimiser groups. A finished checkpoint of the same run is the result of this very
        fit: its weights are restored without training. A checkpoint of another run is
        never resumed: a finished one is replaced (a :class:`CheckpointMismatchWarning`
        says so and training starts from scratch, as for every fold of a cross-validation
        sharing one folder); an unfinished one, the progress of an interrupted run, makes
        :meth:`fit` raise instead of destroying it.
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
    callbacks : list of Callback or None, default=None
        Called in order after the trainer's own learning-rate schedule (replaced by an
        :class:`~skxmc.text.LRScheduler` in the list) and before its checkpoint and
        progress bar.
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
    history : list of dict
        One record per optimiser step (see :class:`TrainResult`).
    epoch_history : list of dict
        One record per finished epoch: ``epoch`` (1-based), ``step``, ``loss`` (mean of
        its steps), ``seconds``, and what callbacks add (``valid_score``...).
    optimizers : list of torch.optim.Optimizer
        Built in :meth:`fit`; drop the trainer after ``fit`` to free their memory.
    accelerator : accelerate.Accelerator or None
        The accelerator of the last :meth:`fit`.

    Notes
    -----
    With several processes, every process reads the same batch sequence and takes every
    ``num_processes``-th batch (a short last group is cut to a multiple of the number of
    processes); gradients and the recorded loss are averaged over processes after the
    last micro-batch of a step, in one all-reduce. The step functions call the module's
    methods rather than its ``forward``, which a ``DistributedDataParallel`` wrapper would
    need; parameters without a gradient on a step count as zero, and sparse gradients
    (SparseAdam tables) are not supported across processes. Only the main process
    writes checkpoints and shows progress.

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
        accumulation_steps: int = 1,
        random_state: Any = None,
        verbose: int = 0,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int | None = None,
        fingerprint: dict[str, Any] | None = None,
        fit_data: Any = None,
        callbacks: list[Callback] | None = None,
        after_step: Callable[[Trainer], bool | None] | None = None,
        after_epoch: Callable[[Trainer], bool | None] | None = None,
        desc: str = "training",
    ) -> None:
        if n_epochs is None and max_steps is None:
            raise ValueError("set n_epochs, max_steps or both.")
        for name, value in (("n_epochs", n_epochs), ("max_steps", max_steps)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}.")
        if not isinstance(accumulation_steps, Integral) or accumulation_steps < 1:
            raise ValueError(f"accumulation_steps must be an int >= 1, got {accumulation_steps!r}.")
        self.module = module
        self.param_groups = param_groups
        self.lr, self.weight_decay = lr, weight_decay
        self.n_epochs, self.max_steps, self.warmup = n_epochs, max_steps, warmup
        self.max_grad_norm, self.max_time = max_grad_norm, max_time
        self.device = training_device(device)
        self.mixed_precision = mixed_precision
        self.accumulation_steps = int(accumulation_steps)
        self.random_state, self.verbose = random_state, verbose
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_every = checkpoint_every
        self.fingerprint, self.fit_data = fingerprint, fit_data
        self.callbacks = callbacks
        self.after_step, self.after_epoch = after_step, after_epoch
        self.desc = desc
        self.state = TrainState()
        self.rng = np.random.default_rng()
        self.optimizers: list[torch.optim.Optimizer] = []
        self.history: list[dict[str, Any]] = []
        self.epoch_history: list[dict[str, Any]] = []
        self.accelerator: Any = None
        self.stop_reason: str | None = None
        self.in_update = self.mid_step = False

    # For callbacks ----------------------------------------------------------------------

    @property
    def num_processes(self) -> int:
        """Processes training together (1 unless launched by ``accelerate launch``)."""
        return 1 if self.accelerator is None else int(self.accelerator.num_processes)

    @property
    def is_main_process(self) -> bool:
        """Whether this process writes checkpoints and shows progress."""
        return self.accelerator is None or bool(self.accelerator.is_main_process)

    @property
    def stopping(self) -> bool:
        """Whether training ends after the current step."""
        return self.stop_reason is not None

    def stop(self, reason: str = "callback") -> None:
        """End training after the current step (the first reason given is kept)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def epoch_rng(self, epoch: int) -> np.random.Generator:
        """The generator handed to ``data`` for ``epoch``: a function of (seed, epoch) only,
        so a resumed run rebuilds the interrupted epoch's batch order."""
        return np.random.default_rng([self.state.seed, 1, epoch])

    def reseed_rng(self) -> None:
        """Reset :attr:`rng` from the seed (and the process index, with several)."""
        rank = [] if self.num_processes == 1 else [self.accelerator.process_index]
        self.rng = np.random.default_rng([self.state.seed, 0, *rank])

    def elapsed(self) -> float:
        """Training seconds, including those of a resumed run."""
        return self.prior_seconds + time.perf_counter() - self._start

    def wait_for_everyone(self) -> None:
        """A barrier across processes (nothing with one)."""
        if self.num_processes > 1:
            self.accelerator.wait_for_everyone()

    def log(self, message: str, *args: Any) -> None:
        """A progress line prefixed with ``desc`` (printed with ``verbose``)."""
        if self.is_main_process:
            progress(logger, self.verbose, "%s: " + message, self.desc, *args)

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
            If the loss or the gradient norm becomes NaN or infinite: the message gives the
            optimiser step, and the last checkpoint to resume from (with
            ``checkpoint_dir``); the weights of the previous step stay.
        """
        self._setup(data, steps_per_epoch)
        # The checkpoint resumes first, so that the other callbacks see the resumed run.
        for cb in sorted(self.callbacks_, key=lambda c: not isinstance(c, Checkpoint)):
            cb.on_train_begin(self)
        try:
            self.fit_loop(step_fn)
        except KeyboardInterrupt:
            self._interrupted()
        finally:
            self._zero_grad()
            self.in_update = self.mid_step = False
            self.module.eval()
        return self._result()

    def fit_loop(self, step_fn: Callable[[Any], Any]) -> None:
        """Epochs until a stop condition, then the callbacks' ``on_train_end``."""
        if self.finished_before or self.state.step >= self.state.total_steps:
            self.stop("completed")
        while not self.stopping:
            self.run_epoch(step_fn)
        self._notify("on_train_end")

    def run_epoch(self, step_fn: Callable[[Any], Any]) -> None:
        """Optimiser steps until the epoch's batches run out or training stops."""
        s = self.state
        self._notify("on_epoch_begin")
        ended = True
        for micro_batches in self._step_batches(s.epoch):
            self.train_step(step_fn, micro_batches)
            if self.stopping:
                ended = s.steps_per_epoch is not None and s.batch_in_epoch >= s.steps_per_epoch
                break
        if not ended:
            return
        if s.batch_in_epoch == 0:
            raise ValueError(f"epoch {s.epoch} yielded no batches.")
        s.epoch += 1
        s.batch_in_epoch = 0
        losses = [h["loss"] for h in self.history[-s.step :] if h["epoch"] == s.epoch - 1]
        record = {"epoch": s.epoch, "step": s.step, "loss": float(np.mean(losses))}
        self.epoch_history.append({**record, "seconds": self.elapsed()})
        if self.n_epochs is not None and s.epoch >= self.n_epochs:
            self.stop("completed")
        self._notify("on_epoch_end")

    def train_step(self, step_fn: Callable[[Any], Any], micro_batches: list[Any]) -> None:
        """One optimiser step over this process's micro-batches."""
        s = self.state
        self._notify("on_batch_begin")
        # From here until the counters move, the module may hold a partial step (BatchNorm
        # statistics, a momentum update): a checkpoint on Ctrl-C restores the copy first.
        self.mid_step = True
        loss, extras = self._forward_backward(step_fn, micro_batches)
        loss, extras = self._all_reduce(loss, extras)
        record: dict[str, Any] = {"step": s.step + 1, "epoch": s.epoch, "loss": loss}
        self._optimizer_step(record)
        s.step += 1
        s.batch_in_epoch += 1
        self.mid_step = False  # before in_update drops, so no interrupt sees it stale
        self.in_update = False
        for i, (g, _, opt) in enumerate(self.param_groups_):
            if i == 0:
                record["lr"] = opt.param_groups[0]["lr"]
            record[f"lr_{g.name}"] = opt.param_groups[0]["lr"]
        record.update(extras)
        record["seconds"] = self.elapsed()
        s.last = record
        self.history.append(record)
        if s.step >= s.total_steps:
            self.stop("completed")
        self._notify("on_batch_end", record)
        if self.max_time is not None and time.perf_counter() - self._start >= self.max_time:
            self.stop("max_time")

    # Pieces of a step -------------------------------------------------------------------

    def _forward_backward(
        self, step_fn: Callable[[Any], Any], micro_batches: list[Any]
    ) -> tuple[float, dict[str, float]]:
        """Forward under autocast and backward of each micro-batch; mean loss and extras."""
        n = len(micro_batches)
        total, extras = 0.0, {}
        for batch in micro_batches:
            with self.accelerator.autocast():
                loss, parts = _split_output(step_fn(move_to_device(batch, self.device)))
            value = float(loss.detach())
            if not math.isfinite(value):
                self._zero_grad()
                raise self._diverged(f"the loss is {value}")
            self.accelerator.backward(loss if n == 1 else loss / n)
            total += value / n
            for key, v in parts.items():
                extras[key] = extras.get(key, 0.0) + v / n
        return total, extras

    def _all_reduce(self, loss: float, extras: dict[str, float]) -> tuple[float, dict[str, float]]:
        """Average gradients and recorded values over processes (one all-reduce)."""
        if self.num_processes == 1:
            return loss, extras
        params = [p for opt in self.optimizers for pg in opt.param_groups for p in pg["params"]]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            elif p.grad.is_sparse:
                raise NotImplementedError(
                    "sparse gradients (SparseAdam groups) cannot be averaged across "
                    "processes; train on one process or use dense embeddings."
                )
        values = torch.tensor([loss, *extras.values()], device=self.device)
        tensors = [p.grad for p in params] + [values]
        flat = self.accelerator.reduce(_flatten_dense_tensors(tensors), reduction="mean")
        for tensor, synced in zip(tensors, _unflatten_dense_tensors(flat, tensors)):
            tensor.copy_(synced)
        return float(values[0]), dict(zip(extras, values[1:].tolist()))

    def _optimizer_step(self, record: dict[str, Any]) -> None:
        """Unscale (float16), clip, step every optimiser, zero the gradients."""
        scaler = self.accelerator.scaler
        if scaler is not None:
            for opt in self.optimizers:
                scaler.unscale_(opt)
        if self.max_grad_norm:
            params = self._clipped_params()
            if params:
                norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
                record["grad_norm"] = float(norm)
                # float16's scaler skips a step with infinite gradients by design; else a
                # non-finite norm would turn every weight into NaN at this step.
                if scaler is None and not math.isfinite(record["grad_norm"]):
                    self._zero_grad()
                    raise self._diverged(f"the gradient norm is {record['grad_norm']}")
        # An interrupt from here until the counters move could leave half-updated weights
        # that match no step: no checkpoint is written for it.
        self.in_update = True
        for opt in self.optimizers:
            if scaler is not None:
                scaler.step(opt)
            else:
                opt.step()
        if scaler is not None:
            scaler.update()
        self._zero_grad()

    def _diverged(self, what: str) -> FloatingPointError:
        """The error that stops a fit whose loss or gradients became NaN or infinite: the
        step, the state the model is left in, and how to go on from the last good one."""
        s = self.state
        weights_ok = all(bool(torch.isfinite(p).all()) for p in self.module.parameters())
        kept = (
            f"the model keeps the weights of step {s.step}"
            if weights_ok
            else f"the weights were already NaN or infinite after step {s.step}"
        )
        found = None if self.checkpoint_dir is None else find_checkpoint(self.checkpoint_dir)
        if found is not None:
            done = json.loads((found / "trainer_state.json").read_text()).get("step", "?")
            resume = (
                f"The last checkpoint, of step {done}, is in {found}: fit again with the same "
                f"parameters to resume from it (a run that diverges at the same step again "
                f"needs a lower learning rate, or mixed_precision='no', and a new "
                f"checkpoint_dir)."
            )
        elif self.checkpoint_dir is not None:
            resume = (
                f"No checkpoint was written in {self.checkpoint_dir} before it: lower the "
                f"learning rate (or use mixed_precision='no') and fit again."
            )
        else:
            resume = (
                "Lower the learning rate (or use mixed_precision='no'), check the inputs, and "
                "fit again; with a checkpoint_dir, a diverged fit resumes from its last "
                "checkpoint instead of starting over."
            )
        return FloatingPointError(
            f"training diverged: {what} at optimiser step {s.step + 1} (epoch {s.epoch + 1}); "
            f"{kept}. {resume}"
        )

    def _clipped_params(self) -> list[nn.Parameter]:
        params = []
        for g, kind, opt in self.param_groups_:
            if g.clip is False or (g.clip is None and kind == "sparse_adam"):
                continue
            for pg in opt.param_groups:
                params.extend(p for p in pg["params"] if p.grad is not None)
        return params

    def _zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

    def _step_batches(self, epoch: int) -> Iterator[list[Any]]:
        """This process's micro-batches of each step of ``epoch`` (skipping the steps a
        resumed run already did)."""
        s = self.state
        n_proc, rank = self.num_processes, self.accelerator.process_index
        per_step = self.accumulation_steps * n_proc
        batches = iter(self._epoch_data(epoch, self.epoch_rng(epoch)))
        for _ in range(s.batch_in_epoch * per_step):  # resuming mid-epoch: same order, skip
            next(batches, None)
        while s.steps_per_epoch is None or s.batch_in_epoch < s.steps_per_epoch:
            group = list(itertools.islice(batches, per_step))
            mine = group[: len(group) // n_proc * n_proc][rank::n_proc]
            if not mine:
                return
            yield mine

    # Set-up and end ---------------------------------------------------------------------

    def _setup(self, data: Any, steps_per_epoch: int | None) -> None:
        self._start, self.prior_seconds = time.perf_counter(), 0.0
        self.resumed_from, self.finished_before = None, False
        self.stop_reason, self.interrupt_note = None, ""
        self.in_update = self.mid_step = False
        self.accelerator = make_accelerator(self.device, self.mixed_precision)
        seed = self.random_state
        if self.num_processes > 1 and not isinstance(seed, Integral):
            from accelerate.utils import broadcast_object_list

            seed = broadcast_object_list([seed_everything(seed)])[0]  # one seed for all
        self.state = TrainState(seed=seed_everything(seed))
        self.reseed_rng()
        self.history, self.epoch_history = [], []
        self.module.to(self.device)
        groups = self.param_groups
        if groups is None:
            groups = [ParamGroup("model", self.module, lr=self.lr, weight_decay=self.weight_decay)]
        self.param_groups_ = build_optimizers(list(groups), self.module)
        self.optimizers = [opt for _, _, opt in self.param_groups_]
        self._epoch_data = data if callable(data) else (lambda epoch, rng: data)
        self._plan(steps_per_epoch)
        self.fingerprint_ = self._fingerprint(self.state.total_steps)
        self.callbacks_ = self._default_callbacks()
        self.module.train()

    def _plan(self, n_batches: int | None) -> None:
        """Steps per epoch, planned steps and warm-up steps."""
        if n_batches is None:
            first = self._epoch_data(0, self.epoch_rng(0))
            n_batches = len(first) if hasattr(first, "__len__") else None
        if n_batches == 0:
            raise ValueError("the data yields no batches.")
        if self.n_epochs is not None and n_batches is None and self.max_steps is None:
            raise ValueError(
                "with n_epochs and batches without len(), pass steps_per_epoch or max_steps."
            )
        per_step, n_proc = self.accumulation_steps * self.num_processes, self.num_processes
        steps = None
        if n_batches is not None:
            steps = n_batches // per_step + int((n_batches % per_step) // n_proc > 0)
            if steps == 0:
                raise ValueError(f"{n_batches} batches cannot feed {n_proc} processes.")
        planned = [self.max_steps] if self.max_steps is not None else []
        if self.n_epochs is not None and steps is not None:
            planned.append(self.n_epochs * steps)
        self.state.total_steps, self.state.steps_per_epoch = min(planned), steps
        self.warmup_steps_ = _resolve_warmup(self.warmup, self.state.total_steps)

    def _default_callbacks(self) -> list[Callback]:
        user = list(self.callbacks or [])
        out: list[Callback] = (
            [] if any(isinstance(c, LRScheduler) for c in user) else [LRScheduler()]
        )
        if self.after_step is not None or self.after_epoch is not None:
            out.append(StepFunction(self.after_step, self.after_epoch))
        out += user
        if self.checkpoint_dir is not None:
            out.append(Checkpoint(self.checkpoint_dir, self.checkpoint_every))
        if self.verbose:
            out.append(ProgressBar(self.desc))
        return out

    def _notify(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks_:
            getattr(cb, hook, _nothing)(self, *args)

    def _fingerprint(self, total: int) -> dict[str, Any]:
        shapes = [[n, list(p.shape)] for n, p in self.module.state_dict().items()]
        fp: dict[str, Any] = {
            "total_steps": total,
            "state_dict": shapes,
            "groups": [[g.name, kind, g.lr] for g, kind, _ in self.param_groups_],
            "user": self.fingerprint,
        }
        if (self.accumulation_steps, self.num_processes) != (1, 1):
            fp["accumulation"] = [self.accumulation_steps, self.num_processes]
        if isinstance(self.random_state, Integral):
            fp["seed"] = int(self.random_state)
        if self.checkpoint_dir is not None:  # only checkpoints need it: skip the hashing
            fit_data = self.fit_data
            fp["data"] = fit_data if isinstance(fit_data, str) else data_fingerprint(fit_data)
        return json.loads(json.dumps(fp))  # normalise tuples etc. for comparison

    def _interrupted(self) -> None:
        self.stop_reason = "interrupted"
        self._zero_grad()
        self._notify("on_interrupt")
        warnings.warn(
            f"Training interrupted by the user after step {self.state.step} of "
            f"{self.state.total_steps}; the model keeps the weights of that step."
            f"{self.interrupt_note}",
            TrainingInterruptedWarning,
            stacklevel=3,
        )

    def _result(self) -> TrainResult:
        s = self.state
        seconds = self.prior_seconds if self.finished_before else self.elapsed()
        epochs = (s.step / s.steps_per_epoch) if s.steps_per_epoch else float(s.epoch)
        reason = self.stop_reason or "completed"
        last_loss = self.history[-1]["loss"] if self.history else float("nan")
        self.log(
            "%d steps (%.2f epochs) in %.1f s, last loss %.4g (%s)",
            s.step,
            epochs,
            seconds,
            last_loss,
            reason,
        )
        checkpoint = next((c.last_path for c in self.callbacks_ if isinstance(c, Checkpoint)), None)
        return TrainResult(
            history=self.history,
            n_steps=s.step,
            epochs=epochs,
            interrupted=reason == "interrupted",
            stop_reason=reason,
            seconds=seconds,
            resumed_from=self.resumed_from,
            seed=s.seed,
            checkpoint=checkpoint,
            epoch_history=self.epoch_history,
        )


def _nothing(*args: Any) -> None:
    """A hook a callback does not define."""


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
