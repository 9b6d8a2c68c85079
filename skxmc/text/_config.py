"""The training-loop settings of the neural estimators, declared once.

:class:`TrainingConfig` holds the settings every neural estimator
(:class:`~skxmc.SharpReCLClassifier`, :class:`~skxmc.KNNBertClassifier`,
:class:`~skxmc.SNMClassifier`, :class:`~skxmc.matchxml.MultiStageMatcher`) passes to the
:class:`~skxmc.text.Trainer`: length of training, batch and optimiser, validation and
early stopping, device and precision, seed, progress and checkpoints. Each estimator
takes it as one parameter, ``training``, and keeps only the settings of its own method.

Why a small scikit-learn estimator and not a dataclass: ``get_params`` / ``set_params``
make its fields reachable from the estimator as ``training__<field>`` (``GridSearchCV``
grids, ``set_params``, ``clone``), as a Pipeline's steps are.

``training=None`` (the default) means ``TrainingConfig()``. No instance is shared as a
default: ``set_params(training__max_epochs=5)`` on an estimator whose ``training`` is
None first puts a new ``TrainingConfig()`` there (as :class:`~skxmc.MatchXMLClassifier`
does for ``matcher__*``), so a grid search never mutates a default of the class.

The settings were flat constructor parameters until skxmc 0.x (``max_epochs=3``...).
Passing one of those names now raises a :class:`TypeError` that names the new place
(``training=TrainingConfig(max_epochs=3)`` or ``training__max_epochs``), from the
constructor and from ``set_params``: a flat name silently ignored, or accepted for one
more release, would leave two spellings of the same setting in grids and configs. Models
saved with the flat names still load (:meth:`NeuralEstimatorMixin._upgrade_params`).
"""

from __future__ import annotations

import os
from numbers import Integral, Real
from typing import Any

from sklearn.base import BaseEstimator

from .._compat import Interval, StrOptions
from ..io import persistent

__all__ = ["TRAINING_FIELDS", "TrainingConfig", "reject_flat_training_params"]


@persistent
class TrainingConfig(BaseEstimator):
    """Training-loop settings of a neural estimator (its ``training`` parameter).

    A field left None takes the estimator's default, given on each estimator's page
    (e.g. ``max_epochs``: 3 for SharpReCL, 10 for SNM); every other value applies as
    given. In a grid search, reach a field through the estimator as
    ``training__<field>``::

        GridSearchCV(SharpReCLClassifier(), {"training__max_epochs": [2, 4]})

    Parameters
    ----------
    max_epochs : int or None, default=None
        Passes over the training data. None: the estimator's default.
    max_steps : int or None, default=None
        Cap on optimiser steps (whichever of ``max_epochs`` and ``max_steps`` ends
        first). None: no cap.
    max_time : float or None, default=None
        Seconds of training after which ``fit`` stops (checked after every optimiser
        step; a multi-stage fit applies it to each stage). The model is then the one of
        the steps done (``n_steps_``), its learning-rate schedule the one planned for the
        full budget. With ``checkpoint_dir``, the next ``fit`` with the same data and
        parameters (any ``max_time``) resumes where this one stopped. None: no limit.
    batch_size : int or None, default=None
        Training rows per batch (inference uses twice as many). None: the estimator's
        default.
    accumulation_steps : int, default=1
        Batches whose gradients add up before each optimiser step: the effective batch
        is ``accumulation_steps * batch_size`` (times the number of processes under
        ``accelerate launch``) at the memory cost of ``batch_size``. Epochs and
        ``max_steps`` count optimiser steps.
    learning_rate : float or None, default=None
        Peak learning rate (AdamW, linear decay after the warm-up) of the encoder or
        network. None: the estimator's default.
    head_learning_rate : float or None, default=None
        Learning rate of the randomly initialised heads of a fine-tuned classifier
        (SharpReCL, KNN-BERT); None: ``learning_rate``.
    weight_decay : float or None, default=None
        AdamW weight decay (not on biases and normalisation layers). None: the
        estimator's default.
    warmup : float or None, default=None
        Linear warm-up, as a fraction of the steps (< 1) or a number of steps. None: the
        estimator's default.
    validation_fraction : float or None, default=None
        Fraction of the training data held out (stratified by class for the single-label
        classifiers) and scored after every epoch: the accuracy of the classification
        head, precision@1 for the multi-label estimators (per stage for a multi-stage
        one). The scores are ``valid_score`` in ``history_``. None: all data trains.
    n_iter_no_change : int or None, default=None
        With ``validation_fraction``: stop when the validation score has not improved
        for this many epochs, and keep the weights of the best epoch (as
        :class:`~sklearn.neural_network.MLPClassifier` with ``early_stopping=True``).
        None: train for ``max_epochs``.
    device : str, default="auto"
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``,
        ``"cuda:1"``...; also the device of prediction.
    mixed_precision : {"auto", "bf16", "fp16", "no"}, default="auto"
        Autocast of the training forward pass: bfloat16 on GPUs that support it,
        float32 on CPU. ``"fp16"`` (GPUs without bfloat16) scales the loss.
    random_state : int, RandomState instance or None, default=0
        Seeds initialisation, dropout, batch order, augmentation and sampling. The
        default makes two fits on the same data give the same model on CPU (as every
        skxmc estimator); None draws a new seed from numpy's global random state at
        every fit. GPU kernels are not bitwise reproducible.
    verbose : int, default=0
        0 silent; >= 1 progress bars and a summary line.
    checkpoint_dir : str, path-like or None, default=None
        Where the trainer writes checkpoints; an interrupted ``fit`` resumes from there
        when called again with the same data and parameters. A checkpoint of a fit on
        other data or with other parameters is never reused: a finished one is replaced
        with a :class:`~skxmc.text.CheckpointMismatchWarning`, an unfinished one makes
        ``fit`` raise.
    callbacks : list of skxmc.text.Callback or None, default=None
        Extra callbacks of the training loop, e.g. an :class:`~skxmc.text.LRScheduler`
        replacing the warm-up and decay, or a custom logger. They are called after the
        estimator's own (validation score, early stopping) and before the checkpoint and
        the progress bar.

    Examples
    --------
    >>> from skxmc.text import TrainingConfig
    >>> TrainingConfig(max_epochs=2, batch_size=16)
    TrainingConfig(batch_size=16, max_epochs=2)
    """

    _parameter_constraints: dict = {
        "max_epochs": [Interval(Integral, 1, None, closed="left"), None],
        "max_steps": [Interval(Integral, 1, None, closed="left"), None],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "accumulation_steps": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "head_learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "weight_decay": [Interval(Real, 0, None, closed="left"), None],
        "warmup": [Interval(Real, 0, None, closed="left"), None],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "device": [str],
        "mixed_precision": [StrOptions({"auto", "bf16", "fp16", "no"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "checkpoint_dir": [str, os.PathLike, None],
        "callbacks": [list, None],
    }

    def __init__(
        self,
        *,
        max_epochs: int | None = None,
        max_steps: int | None = None,
        max_time: float | None = None,
        batch_size: int | None = None,
        accumulation_steps: int = 1,
        learning_rate: float | None = None,
        head_learning_rate: float | None = None,
        weight_decay: float | None = None,
        warmup: float | None = None,
        validation_fraction: float | None = None,
        n_iter_no_change: int | None = None,
        device: str = "auto",
        mixed_precision: str = "auto",
        random_state: Any = 0,
        verbose: int = 0,
        checkpoint_dir: Any = None,
        callbacks: list | None = None,
    ) -> None:
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.max_time = max_time
        self.batch_size = batch_size
        self.accumulation_steps = accumulation_steps
        self.learning_rate = learning_rate
        self.head_learning_rate = head_learning_rate
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.mixed_precision = mixed_precision
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir
        self.callbacks = callbacks

    def resolve(self, defaults: dict[str, Any]) -> TrainingConfig:
        """A copy whose None fields take ``defaults`` (the estimator's defaults).

        Parameters
        ----------
        defaults : dict
            Field name to the estimator's default value.

        Returns
        -------
        TrainingConfig
        """
        params = self.get_params(deep=False)
        for key, value in defaults.items():
            if params[key] is None:
                params[key] = value
        return TrainingConfig(**params)


TRAINING_FIELDS: tuple[str, ...] = tuple(TrainingConfig._get_param_names())


def reject_flat_training_params(cls: type, params: dict[str, Any], where: str) -> None:
    """Raise a :class:`TypeError` naming the new place of any flat training setting
    (or other renamed parameter, ``cls._renamed_params``) in ``params``."""
    renamed = getattr(cls, "_renamed_params", {})
    for key in params:
        if key in renamed:
            raise TypeError(f"{cls.__name__}{where} got {key!r}, which is now {renamed[key]}.")
        if key in TRAINING_FIELDS:
            value = params[key]
            raise TypeError(
                f"{cls.__name__}{where} got {key!r}: the training settings now live in one "
                f"parameter, training. Pass training=TrainingConfig({key}={value!r}) "
                f"(from skxmc.text import TrainingConfig), or set_params(training__{key}="
                f"{value!r}); in a grid search, name it 'training__{key}'."
            )
