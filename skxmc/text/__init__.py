"""The transformer engine shared by skxmc's neural estimators.

Encoders (:func:`load_encoder`, :func:`encode_texts`, :func:`pool`), tokenisation done
once with dynamic padding and length-sorted batches (:func:`tokenize`,
:class:`TokenizedTexts`), devices and mixed precision (:func:`resolve_device`,
:func:`autocast`), seeding (:func:`seed_everything`), the training loop (:class:`Trainer`,
:class:`ParamGroup`, on ``accelerate``) and its callbacks (:class:`Callback`,
:class:`Checkpoint`, :class:`EarlyStopping`, :class:`EpochScoring`, :class:`LRScheduler`,
:class:`ProgressBar`), static sentence embeddings (:class:`SentenceEncoder`, and
:class:`SentenceEmbedder`, a scikit-learn transformer with a disk cache) and torch
weights in model directories (:func:`save_module_weights`, :func:`load_module_weights`,
:func:`encoder_from_config`).

``transformers`` is imported only when an encoder is loaded.
"""

from __future__ import annotations

from .._optional import require_extra

# The whole engine needs the [text] extra: check it before the first import of torch, so
# that a missing piece is an ImportError naming the extra and its pip command.
with require_extra("text", "skxmc.text"):
    from ._classifier import (
        EncoderModule,
        TextTransformerMixin,
        TransformerClassifierBase,
        check_class_labels,
        softmax,
    )

from ._callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    EpochScoring,
    LRScheduler,
    ProgressBar,
)
from ._config import TrainingConfig
from ._device import (
    autocast,
    inference_device,
    make_accelerator,
    move_to_device,
    resolve_device,
    resolve_mixed_precision,
)
from ._encoder import (
    POOLING_OPTIONS,
    EncoderNotFoundError,
    batched_inference,
    bundled_minilm_path,
    encode_texts,
    encoder_forward,
    eval_mode,
    is_offline,
    load_encoder,
    pool,
    resolve_pooling,
)
from ._estimator import (
    FitTask,
    NeuralEstimatorMixin,
    fill_engine_docs,
    validation_callbacks,
    validation_rows,
)
from ._onnx import OnnxTextModel
from ._seed import seed_everything
from ._sentence import (
    SentenceEmbedder,
    SentenceEncoder,
    read_sentence_transformers_folder,
    sentence_embeddings,
)
from ._tokenize import DEFAULT_MAX_LENGTH, TextBatch, TokenizedTexts, check_texts, tokenize
from ._training import (
    CheckpointMismatchWarning,
    ParamGroup,
    Trainer,
    TrainingInterruptedWarning,
    TrainResult,
    TrainState,
    build_optimizers,
    lr_factor,
    momentum_update,
)
from ._weights import (
    FineTunedModelMixin,
    encoder_from_config,
    load_module_weights,
    load_text_model,
    module_on_cpu,
    save_encoder_config,
    save_module_weights,
    save_text_model,
)

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "POOLING_OPTIONS",
    "Callback",
    "Checkpoint",
    "CheckpointMismatchWarning",
    "EarlyStopping",
    "EncoderModule",
    "EncoderNotFoundError",
    "EpochScoring",
    "FineTunedModelMixin",
    "FitTask",
    "LRScheduler",
    "NeuralEstimatorMixin",
    "OnnxTextModel",
    "ParamGroup",
    "ProgressBar",
    "SentenceEmbedder",
    "SentenceEncoder",
    "TextBatch",
    "TextTransformerMixin",
    "TokenizedTexts",
    "TrainResult",
    "TrainState",
    "Trainer",
    "TrainingConfig",
    "TrainingInterruptedWarning",
    "TransformerClassifierBase",
    "autocast",
    "batched_inference",
    "build_optimizers",
    "bundled_minilm_path",
    "check_class_labels",
    "check_texts",
    "encode_texts",
    "encoder_forward",
    "encoder_from_config",
    "eval_mode",
    "fill_engine_docs",
    "inference_device",
    "is_offline",
    "load_encoder",
    "load_module_weights",
    "load_text_model",
    "lr_factor",
    "make_accelerator",
    "module_on_cpu",
    "momentum_update",
    "move_to_device",
    "pool",
    "read_sentence_transformers_folder",
    "resolve_device",
    "resolve_mixed_precision",
    "resolve_pooling",
    "save_encoder_config",
    "save_module_weights",
    "save_text_model",
    "seed_everything",
    "sentence_embeddings",
    "softmax",
    "tokenize",
    "validation_callbacks",
    "validation_rows",
]
