"""Callbacks of the :class:`~skxmc.text.Trainer`, with skorch's names and hooks.

A callback is an object with any of the methods ``on_train_begin``, ``on_epoch_begin``,
``on_batch_begin``, ``on_batch_end``, ``on_epoch_end``, ``on_train_end`` and
``on_interrupt``, each called with the trainer (``on_batch_end`` also with the step's
record). A "batch" is one optimiser step (with gradient accumulation, several
micro-batches). A callback reads :attr:`Trainer.state`, :attr:`Trainer.history` and
:attr:`Trainer.epoch_history`, adds values to the last record, and stops training with
:meth:`Trainer.stop`.

The trainer adds its own: :class:`LRScheduler` (first, unless one is given),
:class:`Checkpoint` (with ``checkpoint_dir``) and :class:`ProgressBar` (with ``verbose``),
both last. Estimators add :class:`EpochScoring` and :class:`EarlyStopping` for
``validation_fraction`` and ``n_iter_no_change``.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..exceptions import CheckpointMismatchWarning
from ._checkpoint import (
    capture_rng_state,
    find_checkpoint,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)

# A skxmc.text._training.Trainer: not imported, since that module imports this one (the
# trainer calls its callbacks; callbacks only read and steer the trainer they are given).
Trainer = Any

__all__ = [
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "EpochScoring",
    "LRScheduler",
    "ProgressBar",
    "lr_factor",
]


SCHEDULES = ("linear", "constant")


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
    >>> from skxmc.text._callbacks import lr_factor
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


class Callback:
    """Base class: every hook does nothing; override the ones you need.

    Examples
    --------
    >>> from skxmc.text import Callback
    >>> class PrintLoss(Callback):
    ...     def on_epoch_end(self, trainer):
    ...         print(trainer.epoch_history[-1]["loss"])
    """

    def on_train_begin(self, trainer: Trainer) -> None:
        """Before the first step (after a checkpoint was resumed)."""

    def on_epoch_begin(self, trainer: Trainer) -> None:
        """Before the first step of an epoch (also of a resumed, partly done epoch)."""

    def on_batch_begin(self, trainer: Trainer) -> None:
        """Before the forward pass of an optimiser step."""

    def on_batch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        """After an optimiser step; ``record`` is its entry of :attr:`Trainer.history`."""

    def on_epoch_end(self, trainer: Trainer) -> None:
        """After the last step of an epoch; :attr:`Trainer.epoch_history` has its record."""

    def on_train_end(self, trainer: Trainer) -> None:
        """After the last step (not after an interruption, see :meth:`on_interrupt`)."""

    def on_interrupt(self, trainer: Trainer) -> None:
        """On Ctrl-C, before the trainer warns and returns."""


class StepFunction(Callback):
    """``after_step`` / ``after_epoch`` functions of the trainer: True stops training."""

    def __init__(
        self,
        after_step: Callable[[Any], Any] | None = None,
        after_epoch: Callable[[Any], Any] | None = None,
    ) -> None:
        self.after_step = after_step
        self.after_epoch = after_epoch

    def on_batch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        if self.after_step is not None and self.after_step(trainer):
            trainer.stop("callback")

    def on_epoch_end(self, trainer: Trainer) -> None:
        if self.after_epoch is not None and self.after_epoch(trainer):
            trainer.stop("callback")


class LRScheduler(Callback):
    """Sets the learning rate of every optimiser before each step.

    Parameters
    ----------
    lr_lambda : callable or None, default=None
        ``lr_lambda(step, total_steps) -> factor`` multiplying every group's peak rate.
        None: a linear warm-up over the trainer's ``warmup`` steps, then each
        :class:`~skxmc.text.ParamGroup`'s ``schedule`` (see :func:`~skxmc.text.lr_factor`).
    """

    def __init__(self, lr_lambda: Callable[[int, int], float] | None = None) -> None:
        self.lr_lambda = lr_lambda

    def on_batch_begin(self, trainer: Trainer) -> None:
        s = trainer.state
        for g, _, opt in trainer.param_groups_:
            if self.lr_lambda is not None:
                factor = self.lr_lambda(s.step, s.total_steps)
            else:
                factor = lr_factor(
                    s.step,
                    total_steps=s.total_steps,
                    warmup_steps=trainer.warmup_steps_,
                    schedule=g.schedule,
                )
            for pg in opt.param_groups:
                pg["lr"] = pg["base_lr"] * factor


class ProgressBar(Callback):
    """A tqdm bar over the planned steps with the smoothed loss (main process only)."""

    def __init__(self, desc: str = "training") -> None:
        self.desc = desc

    def on_train_begin(self, trainer: Trainer) -> None:
        self._bar, self._smoothed = None, None

    def on_batch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        if not trainer.is_main_process:
            return
        if self._bar is None:
            from tqdm.auto import tqdm

            s = trainer.state
            self._bar = tqdm(total=s.total_steps, initial=s.step - 1, desc=self.desc, unit="step")
        loss = record["loss"]
        self._smoothed = loss if self._smoothed is None else 0.9 * self._smoothed + 0.1 * loss
        self._bar.update(1)
        self._bar.set_postfix(loss=f"{self._smoothed:.4g}", refresh=False)

    def on_train_end(self, trainer: Trainer) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    on_interrupt = on_train_end


class EpochScoring(Callback):
    """Adds ``scoring(trainer)`` to every epoch's record of :attr:`Trainer.epoch_history`.

    Parameters
    ----------
    scoring : callable
        ``scoring(trainer) -> float``, e.g. the accuracy on a validation split. It runs
        with the module in eval mode and without gradients.
    name : str, default="valid_score"
        The key in the epoch records (and in an estimator's ``history_``).
    """

    def __init__(self, scoring: Callable[[Any], float], name: str = "valid_score") -> None:
        self.scoring = scoring
        self.name = name

    def on_epoch_end(self, trainer: Trainer) -> None:
        module = trainer.module
        module.eval()
        try:
            with torch.no_grad():
                value = float(self.scoring(trainer))
        finally:
            module.train()
        trainer.epoch_history[-1][self.name] = value


class EarlyStopping(Callback):
    """Stops when a monitored epoch value has not improved for ``patience`` epochs.

    As :class:`~sklearn.neural_network.MLPClassifier` with ``early_stopping=True``: at the
    end the module gets the weights of the best epoch back.

    Parameters
    ----------
    monitor : str, default="valid_score"
        Key of :attr:`Trainer.epoch_history` (written by an :class:`EpochScoring` placed
        before this callback).
    patience : int, default=5
        Epochs without an improvement larger than ``tol`` before stopping.
    tol : float, default=0.0
        Minimum improvement.
    lower_is_better : bool, default=False
        True for losses, False for scores.
    load_best : bool, default=True
        Restore the best epoch's weights when training ends. A resumed fit counts the
        patience over the epochs of the interrupted run, but keeps only best weights seen
        since the resume.

    Attributes
    ----------
    best_score_ : float
    best_epoch_ : int
        1-based epoch of the best score.
    """

    def __init__(
        self,
        monitor: str = "valid_score",
        *,
        patience: int = 5,
        tol: float = 0.0,
        lower_is_better: bool = False,
        load_best: bool = True,
    ) -> None:
        self.monitor = monitor
        self.patience = patience
        self.tol = tol
        self.lower_is_better = lower_is_better
        self.load_best = load_best

    def _better(self, value: float) -> bool:
        sign = -1.0 if self.lower_is_better else 1.0
        return sign * (value - self.best_score_) > self.tol

    def on_train_begin(self, trainer: Trainer) -> None:
        self.best_score_ = math.inf if self.lower_is_better else -math.inf
        self.best_epoch_, self._waited, self._best_state = 0, 0, None
        for record in trainer.epoch_history:  # a resumed run: the epochs before
            self._update(record, None)

    def _update(self, record: dict[str, Any], trainer: Trainer | None) -> None:
        value = record.get(self.monitor)
        if value is None:
            raise KeyError(
                f"EarlyStopping monitors {self.monitor!r}, which the epoch records lack "
                f"(they hold {sorted(record)}); put an EpochScoring before it."
            )
        if self._better(value):
            self.best_score_, self.best_epoch_, self._waited = value, record["epoch"], 0
            if trainer is not None and self.load_best:
                self._best_state = {
                    k: v.detach().to("cpu", copy=True)
                    for k, v in trainer.module.state_dict().items()
                }
        else:
            self._waited += 1

    def on_epoch_end(self, trainer: Trainer) -> None:
        self._update(trainer.epoch_history[-1], trainer)
        if self._waited >= self.patience:
            trainer.stop("early_stopping")

    def on_train_end(self, trainer: Trainer) -> None:
        last = trainer.epoch_history[-1]["epoch"] if trainer.epoch_history else 0
        if self._best_state is not None and self.best_epoch_ != last:
            trainer.module.load_state_dict(self._best_state)
        self._best_state = None


class Checkpoint(Callback):
    """Checkpoints to resume an interrupted ``fit``, and the resume itself.

    Writes ``<dirname>/last`` every ``every`` steps, at every epoch end, at the end and on
    Ctrl-C (see :func:`~skxmc.text._checkpoint.save_checkpoint`), and, at the start of
    training, resumes from the checkpoint found there when its fingerprint is the run's
    (data, parameters, seed, planned steps, tensor shapes and optimiser groups). A finished
    checkpoint of the same run is this very fit: its weights are restored without training.
    A checkpoint of another run is never resumed: a finished one is replaced (with a
    :class:`~skxmc.exceptions.CheckpointMismatchWarning`), an unfinished one makes ``fit``
    raise instead of destroying it. Only the main process writes.

    Parameters
    ----------
    dirname : str or path-like
        The checkpoint folder.
    every : int or None, default=None
        Steps between checkpoints in addition to epoch ends.
    """

    def __init__(self, dirname: str | Path, every: int | None = None) -> None:
        self.dirname = Path(dirname)
        self.every = every

    # Resume -----------------------------------------------------------------------------

    def on_train_begin(self, trainer: Trainer) -> None:
        self.last_path: Path | None = None
        found = find_checkpoint(self.dirname)
        if found is not None:
            saved = json.loads((found / "trainer_state.json").read_text(encoding="utf-8"))
            saved_fp = saved.get("fingerprint") or {}
            if saved_fp != trainer.fingerprint_:
                found = self._other_run(
                    found, saved, _fingerprint_diff(trainer.fingerprint_, saved_fp)
                )
        if found is not None:
            self._resume(trainer, found)
        self._rng = capture_rng_state(trainer.rng)
        # Only a checkpoint needs the state of the step's start (it costs one copy of it).
        self._volatile = [] if trainer.finished_before else _volatile_state(trainer)

    def _resume(self, trainer: Trainer, found: Path) -> None:
        saved, rng_state = load_checkpoint(found, trainer.module, trainer.optimizers)
        s = trainer.state
        s.step, s.epoch, s.batch_in_epoch = saved["step"], saved["epoch"], saved["batch_in_epoch"]
        s.seed = saved["seed"]
        trainer.reseed_rng()
        restore_rng_state(rng_state, trainer.rng)
        trainer.history[:] = saved["history"]
        trainer.epoch_history[:] = saved.get("epochs", [])
        trainer.prior_seconds, trainer.resumed_from = saved["seconds"], saved["step"]
        trainer.finished_before = bool(saved["completed"])
        self.last_path = found
        trainer.log("%s: resuming from %s at step %d of %d", found, s.step, s.total_steps)

    def _other_run(self, found: Path, saved: dict[str, Any], diff: list[str]) -> None:
        """Warn and start afresh over a finished checkpoint of another run; raise over an
        unfinished one (the progress of an interrupted run)."""
        what = ", ".join(diff) or "its format"
        if saved.get("completed"):
            warnings.warn(
                f"checkpoint_dir {self.dirname} holds the finished checkpoint of another "
                f"fit (it differs in {what}); it is not reused: training starts from scratch "
                f"and its checkpoints replace it.",
                CheckpointMismatchWarning,
                stacklevel=5,
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
            f"checkpoint_dir {self.dirname} holds the unfinished checkpoint of another "
            f"fit (step {saved.get('step', '?')} of {total}), which differs in {what}. To "
            f"resume that fit, fit again with its data and parameters; to train this one, "
            f"pass another checkpoint_dir or delete {found}.{hint}"
        )

    # Saving -----------------------------------------------------------------------------

    def save(self, trainer: Trainer, *, completed: bool) -> Path | None:
        """Write the checkpoint of the current step (main process only)."""
        if trainer.is_main_process:
            s = trainer.state
            payload = {
                "step": s.step,
                "epoch": s.epoch,
                "batch_in_epoch": s.batch_in_epoch,
                "seed": s.seed,
                "seconds": trainer.elapsed(),
                "completed": completed,
                "fingerprint": trainer.fingerprint_,
                "history": trainer.history,
                "epochs": trainer.epoch_history,
            }
            self.last_path = save_checkpoint(
                self.dirname, trainer.module, trainer.optimizers, payload, self._rng
            )
        trainer.wait_for_everyone()
        return self.last_path

    def on_batch_begin(self, trainer: Trainer) -> None:
        if self._volatile:
            with torch.no_grad():
                for tensor, copy in self._volatile:
                    copy.copy_(tensor)

    def on_batch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        self._rng = capture_rng_state(trainer.rng)
        s = trainer.state
        epoch_end = s.steps_per_epoch is not None and s.batch_in_epoch >= s.steps_per_epoch
        # The epoch end saves anyway.
        if self.every and s.step % self.every == 0 and not epoch_end and not trainer.stopping:
            self.save(trainer, completed=False)

    def on_epoch_end(self, trainer: Trainer) -> None:
        self._rng = capture_rng_state(trainer.rng)
        if not trainer.stopping:
            self.save(trainer, completed=False)

    def on_train_end(self, trainer: Trainer) -> None:
        if not trainer.finished_before:
            self.save(trainer, completed=trainer.stop_reason != "max_time")
        self._volatile = []

    def on_interrupt(self, trainer: Trainer) -> None:
        if trainer.in_update:
            return  # half-updated weights match no step: keep the previous checkpoint
        if trainer.mid_step:  # the step is redone on resume: undo its partial effects
            with torch.no_grad():
                for tensor, copy in self._volatile:
                    tensor.copy_(copy)
        # The RNG snapshot is the state at the start of the interrupted step.
        path = self.save(trainer, completed=False)
        trainer.interrupt_note = (
            f" A checkpoint is in {path}: fit again with the same checkpoint_dir to resume."
        )
        self._volatile = []


def _volatile_state(trainer: Trainer) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(tensor, copy) for every buffer and every parameter no optimiser steps: what a
    forward pass or the step function changes before the optimiser step (BatchNorm
    statistics, momentum encoders, queues)."""
    stepped = {id(p) for opt in trainer.optimizers for pg in opt.param_groups for p in pg["params"]}
    tensors = list(trainer.module.buffers())
    tensors += [p for p in trainer.module.parameters() if id(p) not in stepped]
    return [(t, torch.empty_like(t)) for t in tensors]


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
