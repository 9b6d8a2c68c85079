"""What every neural estimator shares around the :class:`~skxmc.text.Trainer`.

:class:`NeuralEstimatorMixin` holds the one copy of: the checkpoint fingerprint of the
estimator's parameters, the token limit of the encoder, the engine parameters passed to
the trainer (read from the estimator's ``training``, a
:class:`~skxmc.text.TrainingConfig`, with the estimator's defaults), the
``training__<field>`` routing of ``set_params``, the :class:`TypeError` for the old flat
names of those settings (and the upgrade of models saved with them), and the fitted
attributes read from the training result (``loss_curve_``, ``history_``...).
:func:`fill_engine_docs` puts the description of ``training`` into an estimator's
docstring in place of the line ``{training_params}``.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from typing import Any

import numpy as np

from ._checkpoint import RUN_ONLY_PARAMS, _describe_param
from ._config import TRAINING_FIELDS, TrainingConfig, reject_flat_training_params
from ._optim import ParamGroup
from ._training import TrainResult

__all__ = [
    "TRAINING_PARAM_DOC",
    "FitTask",
    "NeuralEstimatorMixin",
    "fill_engine_docs",
    "validation_callbacks",
    "validation_rows",
]

TRAINING_PARAM_DOC = """\
training : skxmc.text.TrainingConfig or None, default=None
    Training-loop settings: length of training, batch and optimiser, validation and
    early stopping, device and precision, seed, progress and checkpoints (see
    :class:`~skxmc.text.TrainingConfig`). None: ``TrainingConfig()``. In a grid search
    or ``set_params``, reach a field as ``training__<field>`` (e.g.
    ``training__max_epochs``). This estimator's defaults for the fields left None:
    {defaults}."""


ENCODER_PARAMS_DOC = """\
encoder : str or path-like, default="bert-base-uncased"
    Hugging Face hub name or local model directory (offline, pass a directory).
pooling : {"cls", "pooler", "mean", "max", "mean_sqrt_len"}, default="cls"
    Text embedding from the token states; the paper uses ``[CLS]``. Sentence-embedding
    models (MiniLM) are trained for ``"mean"``."""

FIT_ATTRIBUTES_DOC = """\
loss_curve_ : list of float
    Loss of every optimiser step.
history_ : list of dict
    One record per epoch: ``epoch``, ``step``, ``loss`` (mean), ``seconds`` and, with
    ``training.validation_fraction``, ``valid_score``.
n_iter_ : int
    Epochs run (a partial epoch counts).
n_steps_ : int
    Optimiser steps run.
interrupted_ : bool
    Whether Ctrl-C ended training early."""


def fill_engine_docs(cls: type) -> type:
    """Replace the line ``{training_params}`` of ``cls``'s docstring with the description
    of its ``training`` parameter (indented as the placeholder), which lists the
    estimator's defaults (``cls._training_defaults``); the line ``{fit_attributes}``
    with the fitted attributes every neural estimator sets (``loss_curve_``...), and
    ``{encoder_params}`` with the fine-tuned classifiers' ``encoder`` and ``pooling``."""
    doc = cls.__doc__ or ""
    defaults = getattr(cls, "_training_defaults", {})
    listed = ", ".join(f"``{k}={v!r}``" for k, v in defaults.items() if v is not None)
    text = TRAINING_PARAM_DOC.replace("{defaults}", listed or "none")
    head, _, body = text.partition("\n")
    body = textwrap.fill(" ".join(body.split()), width=84)
    text = head + "\n" + textwrap.indent(body, "    ")
    for line in doc.splitlines():
        for placeholder, block in (
            ("{training_params}", text),
            ("{fit_attributes}", FIT_ATTRIBUTES_DOC),
            ("{encoder_params}", ENCODER_PARAMS_DOC),
        ):
            if line.strip() == placeholder:
                indent = line[: len(line) - len(line.lstrip())]
                doc = doc.replace(line, textwrap.indent(block, indent))
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
    module : torch.nn.Module or None
        What the trainer trains and checkpoints when it is not the estimator's model: a
        training-only wrapper that shares the model's weights and adds state of the
        fit (KNN-BERT's momentum encoder and queue). None: ``module_``.
    sample_weight : torch.Tensor or None
        Loss multiplier of every training row (float32, mean 1, see
        :func:`skxmc._sample_weight.loss_weights`); None: the unweighted loss.
    """

    tokens: Any = None
    y: Any = None
    n_train: int = 0
    rng: np.random.RandomState | None = None
    trainer: Any = None
    rows: np.ndarray | None = None
    module: Any = None
    sample_weight: Any = None

    def row_weights(self, rows: Any, device: Any) -> Any:
        """Loss multipliers of training rows ``rows`` on ``device``, or None."""
        if self.sample_weight is None:
            return None
        import torch

        return self.sample_weight[torch.as_tensor(np.asarray(rows))].to(device)

    def row_positions(self, rows: np.ndarray) -> np.ndarray:
        """Positions in ``X`` (int64) of training rows ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        return rows.copy() if self.rows is None else self.rows[rows].astype(np.int64)


class NeuralEstimatorMixin:
    """One copy of what the neural estimators share around the trainer.

    The estimator has a ``training`` parameter (a :class:`~skxmc.text.TrainingConfig` or
    None), declares its defaults for the config's None fields in ``_training_defaults``
    and the fields it cannot use in ``_training_unsupported``; a module with an
    ``encoder`` attribute as ``module_`` when it uses :meth:`_max_length`. The code
    reads the settings as ``self._train.<field>`` (resolved, never None where the
    estimator has a default).
    """

    # Parameters that change neither data nor training, besides the run-only ones.
    _fingerprint_exclude: tuple[str, ...] = ()
    # The estimator's values for TrainingConfig fields left None.
    _training_defaults: dict[str, Any] = {}
    # TrainingConfig fields the estimator has no use for (setting one is an error).
    _training_unsupported: tuple[str, ...] = ()
    # Parts tuned as ``part__param`` (the CLI routes a flat training setting there).
    _default_parts: dict[str, Any] = {"training": TrainingConfig}
    # Other renamed parameters: old name -> where it went (for the TypeError).
    _renamed_params: dict[str, str] = {}

    def __new__(cls, *args: Any, **kwargs: Any):
        # Before __init__, whose own TypeError would not say where the setting went.
        reject_flat_training_params(cls, kwargs, "()")
        return super().__new__(cls)

    @property
    def _train(self) -> TrainingConfig:
        """The training settings, the estimator's defaults in the None fields."""
        training = getattr(self, "training", None)
        return (training if training is not None else TrainingConfig()).resolve(
            self._training_defaults
        )

    def set_params(self, **params: Any):
        """Set parameters, including the training settings as ``training__<field>``
        (``training`` left None first gets a new :class:`~skxmc.text.TrainingConfig`).

        Parameters
        ----------
        **params
            Estimator parameters.

        Returns
        -------
        self
        """
        reject_flat_training_params(type(self), params, ".set_params()")
        nested = any(key.startswith("training__") for key in params)
        if nested and params.get("training", getattr(self, "training", None)) is None:
            params = {"training": TrainingConfig(), **params}
        return super().set_params(**params)

    def _validate_params(self) -> None:
        # The estimator's constraints, then the training config's (fit and load run this).
        super()._validate_params()
        training = getattr(self, "training", None)
        if training is None:
            return
        training._validate_params()
        for field in self._training_unsupported:
            value = getattr(training, field)
            if value != TrainingConfig().get_params()[field]:
                raise ValueError(
                    f"{type(self).__name__} does not use training.{field} (got {value!r}); "
                    f"leave it at its default."
                )

    @classmethod
    def _upgrade_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Saved parameters in today's form: the flat training settings of models saved
        before :class:`~skxmc.text.TrainingConfig` (skxmc 26aef59) go into ``training``.

        The persistence layer calls it on the saved parameters before ``cls(**params)``.
        """
        flat = {k: params[k] for k in TRAINING_FIELDS if k in params}
        if not flat:
            return params
        out = {k: v for k, v in params.items() if k not in flat}
        defaults = TrainingConfig().get_params()
        # A flat value equal to the estimator's default stays None (the default).
        config = {
            k: v
            for k, v in flat.items()
            if v != defaults[k]
            and not (k in cls._training_defaults and v == cls._training_defaults[k])
        }
        out["training"] = TrainingConfig(**config)
        return out

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A pickle of skxmc 26aef59 holds the flat training settings as attributes.
        super().__setstate__(self._upgrade_params(state))

    def _fit_fingerprint(self) -> dict[str, Any]:
        """Parameters a resumed checkpoint must match (JSON-able): the estimator's own and
        the resolved training settings, flat (as the checkpoints of skxmc 26aef59)."""
        exclude = (*RUN_ONLY_PARAMS, *self._fingerprint_exclude, *self._training_unsupported)
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "training"}
        params.update(self._train.get_params(deep=False))
        return {k: _describe_param(v) for k, v in params.items() if k not in exclude}

    def _max_length(self) -> int:
        """``max_length``, capped by the encoder's position embeddings (a tokenizer saved
        without ``model_max_length`` would let texts outgrow them)."""
        # while fit reads a stream, before the model is built: the encoder just loaded
        encoder = self.__dict__.get("_encoder_loaded")
        config = getattr(self.module_.encoder if encoder is None else encoder, "config", None)
        positions = getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            return min(self.max_length, positions)
        return self.max_length

    def _engine_params(self, callbacks: list | None = None) -> dict[str, Any]:
        """Keyword arguments of :class:`~skxmc.text.Trainer` taken from the parameters;
        ``callbacks`` (the estimator's own) run before the user's."""
        train = self._train
        return {
            "device": train.device,
            "verbose": train.verbose,
            "checkpoint_dir": train.checkpoint_dir,
            "callbacks": [*(callbacks or []), *(train.callbacks or [])],
            "accumulation_steps": train.accumulation_steps,
            "max_time": train.max_time,
            "mixed_precision": train.mixed_precision,
            "fingerprint": self._fit_fingerprint(),
            "desc": type(self).__name__,
        }

    def _main_param_group(self, name: str, params: Any, **options: Any) -> ParamGroup:
        """The group of the model's main parameters (the encoder, the network): trained at
        ``training.learning_rate`` with ``training.weight_decay``; ``options``: the
        group's other settings (:class:`~skxmc.text.ParamGroup`)."""
        return ParamGroup(
            name,
            params,
            lr=self._train.learning_rate,
            weight_decay=self._train.weight_decay,
            **options,
        )

    def _set_fit_result(self, result: TrainResult) -> None:
        """The fitted attributes every neural estimator has."""
        self.loss_curve_ = [float(v) for v in result.loss_curve]
        self.history_ = [dict(record) for record in result.epoch_history]
        self.n_iter_ = math.ceil(result.epochs)
        self.n_steps_ = int(result.n_steps)
        self.interrupted_ = bool(result.interrupted)
