"""What every neural estimator shares around the :class:`~skxmc.text.Trainer`.

:class:`NeuralEstimatorMixin` holds the one copy of: the checkpoint fingerprint of the
estimator's parameters, the token limit of the encoder, the engine parameters passed to
the trainer (``callbacks``, ``accumulation_steps``, ``max_time``, ``mixed_precision``,
device, verbosity, checkpoints), and the fitted attributes read from the training result
(``loss_curve_``, ``history_``...). :data:`ENGINE_PARAMS_DOC` documents those
parameters once; :func:`fill_engine_docs` puts it into an estimator's docstring in place
of the line ``{engine_params}``.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from typing import Any

import numpy as np

from ._checkpoint import RUN_ONLY_PARAMS, params_fingerprint
from ._training import TrainResult

__all__ = [
    "ENGINE_PARAMS_DOC",
    "FitTask",
    "NeuralEstimatorMixin",
    "fill_engine_docs",
    "validation_callbacks",
    "validation_rows",
]

ENGINE_PARAMS_DOC = """\
callbacks : list of skxmc.text.Callback or None, default=None
    Extra callbacks of the training loop (see :mod:`skxmc.text`), e.g. an
    :class:`~skxmc.text.LRScheduler` replacing the warm-up and decay, or a custom
    logger. They are called after the estimator's own (validation score, early
    stopping) and before the checkpoint and the progress bar.
accumulation_steps : int, default=1
    Batches whose gradients add up before each optimiser step: the effective batch is
    ``accumulation_steps * batch_size`` (times the number of processes under
    ``accelerate launch``) at the memory cost of ``batch_size``. Epochs and
    ``max_steps`` count optimiser steps.
max_time : float or None, default=None
    Seconds of training after which ``fit`` stops (checked after every optimiser step;
    a multi-stage fit applies it to each stage). The model is then the one of the steps
    done (``n_steps_``), its learning-rate schedule the one planned for the full budget.
    With ``checkpoint_dir``, the next ``fit`` with the same data and parameters (any
    ``max_time``) resumes where this one stopped. For a machine lent for a fixed time;
    None: no limit."""

PRECISION_PARAMS_DOC = """\
mixed_precision : {"auto", "bf16", "fp16", "no"}, default="auto"
    Autocast of the training forward pass: bfloat16 on GPUs that support it, float32
    on CPU. ``"fp16"`` (GPUs without bfloat16) scales the loss."""

VALIDATION_PARAMS_DOC = """\
validation_fraction : float or None, default=None
    Fraction of the training data held out (stratified by class for the single-label
    classifiers) and scored after every epoch: the accuracy of the classification head,
    precision@1 for the multi-label estimators (per stage for a multi-stage one). The
    scores are ``valid_score`` in ``history_``. None: all data trains.
n_iter_no_change : int or None, default=None
    With ``validation_fraction``: stop when the validation score has not improved for
    this many epochs, and keep the weights of the best epoch (as
    :class:`~sklearn.neural_network.MLPClassifier` with ``early_stopping=True``).
    None: train for ``max_epochs``."""


def fill_engine_docs(cls: type) -> type:
    """Replace the lines ``{engine_params}``, ``{precision_params}`` and
    ``{validation_params}`` of ``cls``'s
    docstring with the shared parameter descriptions (indented as the placeholder)."""
    doc = cls.__doc__ or ""
    for key, text in (
        ("engine_params", ENGINE_PARAMS_DOC),
        ("precision_params", PRECISION_PARAMS_DOC),
        ("validation_params", VALIDATION_PARAMS_DOC),
    ):
        placeholder = "{" + key + "}"
        for line in doc.splitlines():
            if line.strip() == placeholder:
                indent = line[: len(line) - len(line.lstrip())]
                doc = doc.replace(line, textwrap.indent(text, indent))
    cls.__doc__ = doc
    return cls


def validation_rows(
    n_samples: int,
    validation_fraction: float | None,
    n_iter_no_change: int | None,
    random_state: np.random.RandomState,
    *,
    stratify: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Training and validation rows (sorted) of an estimator's ``validation_fraction``;
    ``(all rows, None)`` without one. ``stratify``: class ids to split by (single-label
    estimators, when every class has two rows)."""
    rows = np.arange(n_samples)
    if validation_fraction is None:
        if n_iter_no_change is not None:
            raise ValueError(
                "n_iter_no_change needs a validation split: set validation_fraction "
                "(e.g. 0.1) or n_iter_no_change=None."
            )
        return rows, None
    from sklearn.model_selection import train_test_split

    train, valid = train_test_split(
        rows,
        test_size=validation_fraction,
        stratify=stratify,
        random_state=random_state.randint(np.iinfo(np.int32).max),
    )
    if len(train) == 0 or len(valid) == 0:
        raise ValueError(
            f"validation_fraction={validation_fraction} leaves no training or no "
            f"validation rows out of {n_samples}; pass more data or change it."
        )
    return np.sort(train), np.sort(valid)


def validation_callbacks(scoring: Any, n_iter_no_change: int | None) -> list:
    """The validation score after each epoch (``valid_score``), and early stopping on it."""
    from ._callbacks import EarlyStopping, EpochScoring

    callbacks: list = [EpochScoring(scoring, name="valid_score")]
    if n_iter_no_change is not None:
        callbacks.append(EarlyStopping("valid_score", patience=n_iter_no_change))
    return callbacks


@dataclasses.dataclass
class FitTask:
    """The per-fit state of one ``fit``: what the step function and the batches read.

    Estimators subclass it to add their own (class priors, sampling tables...); it
    lives for one ``fit`` and is never stored on the estimator.

    Attributes
    ----------
    tokens : TokenizedTexts or None
        The tokenised training texts (with augmented views, when any).
    y : torch.Tensor or None
        Encoded targets of the training rows.
    n_train : int
        Training rows.
    rng : numpy.random.RandomState or None
        The fit's generator (draws of seeds for augmentation, memory sampling...).
    trainer : Trainer or None
        Set once the trainer is built: the step reads ``trainer.state``,
        ``trainer.rng`` and ``trainer.device``.
    rows : numpy.ndarray or None
        Positions in ``fit``'s ``X`` of the training rows (None: all, in order); a
        validation split leaves a subset.
    """

    tokens: Any = None
    y: Any = None
    n_train: int = 0
    rng: np.random.RandomState | None = None
    trainer: Any = None
    rows: np.ndarray | None = None

    def row_positions(self, rows: np.ndarray) -> np.ndarray:
        """Positions in ``X`` (int64) of training rows ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        return rows.copy() if self.rows is None else self.rows[rows].astype(np.int64)


class NeuralEstimatorMixin:
    """One copy of what the neural estimators share around the trainer.

    The estimator defines ``device``, ``verbose``, ``checkpoint_dir`` and optionally
    ``callbacks``, ``accumulation_steps`` and ``mixed_precision``; a module with an
    ``encoder`` attribute as ``module_`` when it uses :meth:`_max_length`.
    """

    # Parameters that change neither data nor training, besides the run-only ones.
    _fingerprint_exclude: tuple[str, ...] = ()

    def _fit_fingerprint(self) -> dict[str, Any]:
        """Parameters a resumed checkpoint must match (JSON-able)."""
        return params_fingerprint(self, exclude=(*RUN_ONLY_PARAMS, *self._fingerprint_exclude))

    def _max_length(self) -> int:
        """``max_length``, capped by the encoder's position embeddings (a tokenizer saved
        without ``model_max_length`` would let texts outgrow them)."""
        config = getattr(self.module_.encoder, "config", None)
        positions = getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            return min(self.max_length, positions)
        return self.max_length

    def _engine_params(self, callbacks: list | None = None) -> dict[str, Any]:
        """Keyword arguments of :class:`~skxmc.text.Trainer` taken from the parameters;
        ``callbacks`` (the estimator's own) run before the user's."""
        user = getattr(self, "callbacks", None) or []
        return {
            "device": self.device,
            "verbose": self.verbose,
            "checkpoint_dir": self.checkpoint_dir,
            "callbacks": [*(callbacks or []), *user],
            "accumulation_steps": getattr(self, "accumulation_steps", 1),
            "max_time": getattr(self, "max_time", None),
            "mixed_precision": getattr(self, "mixed_precision", "auto"),
            "fingerprint": self._fit_fingerprint(),
            "desc": type(self).__name__,
        }

    def _set_fit_result(self, result: TrainResult) -> None:
        """The fitted attributes every neural estimator has."""
        self.loss_curve_ = [float(v) for v in result.loss_curve]
        self.history_ = [dict(record) for record in result.epoch_history]
        self.n_iter_ = math.ceil(result.epochs)
        self.n_steps_ = int(result.n_steps)
        self.interrupted_ = bool(result.interrupted)
