"""The transformer engine shared by skxmc's neural estimators.

What a user calls: the training settings every neural estimator takes
(:class:`TrainingConfig`), the training loop (:class:`Trainer`, :class:`ParamGroup`,
:class:`TrainResult`, on ``accelerate``) and its callbacks (:class:`Callback`,
:class:`Checkpoint`, :class:`EarlyStopping`, :class:`EpochScoring`,
:class:`LRScheduler`, :class:`ProgressBar`), encoders (:func:`load_encoder`,
:func:`encode_texts`, :func:`bundled_minilm_path`, :class:`EncoderNotFoundError`) and
static sentence embeddings as a scikit-learn transformer (:class:`SentenceEmbedder`).

Everything else (tokenisation, devices and mixed precision, seeding, weights in model
directories, the estimators' shared base classes, ONNX export) lives in private modules
(``skxmc.text._tokenize``, ``_device``, ``_seed``, ``_weights``, ``_classifier``,
``_estimator``, ``_onnx``...), which skxmc's own code imports and which make no
stability promise. The names this package exported before skxmc 0.x still resolve here
for one release, with a :class:`FutureWarning`.

``transformers`` is imported only when an encoder is loaded.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from .._optional import require_extra

# The whole engine needs the [text] extra: check it before the first import of torch, so
# that a missing piece is an ImportError naming the extra and its pip command.
with require_extra("text", "skxmc.text"):
    import torch  # noqa: F401

from ..exceptions import EncoderNotFoundError
from ._callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    EpochScoring,
    LRScheduler,
    ProgressBar,
)
from ._config import TrainingConfig
from ._encoder import bundled_minilm_path, encode_texts, load_encoder
from ._optim import ParamGroup
from ._sentence import SentenceEmbedder
from ._training import Trainer, TrainResult

__all__ = [
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "EncoderNotFoundError",
    "EpochScoring",
    "LRScheduler",
    "ParamGroup",
    "ProgressBar",
    "SentenceEmbedder",
    "TrainResult",
    "Trainer",
    "TrainingConfig",
    "bundled_minilm_path",
    "encode_texts",
    "load_encoder",
]

# Exported until skxmc 0.x, private since: name -> module (under skxmc.text, or skxmc).
_MOVED = {
    "EncoderModule": "_classifier",
    "TextTransformerMixin": "_classifier",
    "TransformerClassifierBase": "_classifier",
    "check_class_labels": "_classifier",
    "softmax": "_classifier",
    "autocast": "_device",
    "inference_device": "_device",
    "make_accelerator": "_device",
    "move_to_device": "_device",
    "resolve_device": "_device",
    "resolve_mixed_precision": "_device",
    "POOLING_OPTIONS": "_encoder",
    "batched_inference": "_encoder",
    "encoder_forward": "_encoder",
    "eval_mode": "_encoder",
    "is_offline": "_encoder",
    "pool": "_encoder",
    "resolve_pooling": "_encoder",
    "FitTask": "_estimator",
    "NeuralEstimatorMixin": "_estimator",
    "fill_engine_docs": "_estimator",
    "validation_callbacks": "_estimator",
    "validation_rows": "_estimator",
    "OnnxTextModel": "_onnx",
    "seed_everything": "_seed",
    "SentenceEncoder": "_sentence",
    "read_sentence_transformers_folder": "_sentence",
    "sentence_embeddings": "_sentence",
    "DEFAULT_MAX_LENGTH": "_tokenize",
    "TextBatch": "_tokenize",
    "TokenizedTexts": "_tokenize",
    "check_texts": "_stream",
    "tokenize": "_tokenize",
    "TrainState": "_training",
    "build_optimizers": "_optim",
    "momentum_update": "_optim",
    "lr_factor": "_callbacks",
    "FineTunedModelMixin": "_weights",
    "encoder_from_config": "_weights",
    "load_module_weights": "_weights",
    "load_text_model": "_weights",
    "module_on_cpu": "_weights",
    "save_encoder_config": "_weights",
    "save_module_weights": "_weights",
    "save_text_model": "_weights",
    "CheckpointMismatchWarning": "skxmc.exceptions",
    "TrainingInterruptedWarning": "skxmc.exceptions",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    public = module.startswith("skxmc.")
    where = module if public else f"{__name__}.{module}"
    hint = (
        f"import it from {where}"
        if public
        else f"it is an engine internal now ({where}, no stability promise)"
    )
    warnings.warn(
        f"skxmc.text.{name} is no longer part of skxmc.text's public names and will be "
        f"removed from it in the next release; {hint}.",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(where), name)


def __dir__() -> list[str]:
    return sorted(__all__)
