"""Shared base of the multi-class transformer text classifiers (SharpReCL, KNN-BERT).

:class:`TransformerClassifierBase` holds what they all do the same way: parameter
validation, text and label checks, ``classes_``, the ``fit`` template around the shared
:class:`~skxmc.text.Trainer`, prediction through :func:`~skxmc.text.batched_inference`,
``transform`` (embeddings; with ``fit_transform``, ``get_feature_names_out`` and
``set_output`` from :class:`TextTransformerMixin`, so that they are feature steps of
``Pipeline`` / ``ColumnTransformer``), tags for raw-text input, pickling that lands on CPU, and
``save`` / :func:`skxmc.load` with safetensors weights. A subclass supplies the model
(:meth:`_build_module`), the training step (:meth:`_step`) and, optionally, how training
data is prepared (:meth:`_prepare_fit`) and batched (:meth:`_training_batches`).
"""

from __future__ import annotations

import functools
import logging
import os
from abc import abstractmethod
from numbers import Integral
from typing import Any

import numpy as np
import torch
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_is_fitted, check_random_state

from .._compat import Interval, StrOptions, _fit_context
from .._sample_weight import drop_zero_weight_rows, loss_weights, take_rows
from ..io import PersistenceMixin
from ._config import TrainingConfig
from ._device import inference_device
from ._encoder import batched_inference, encoder_forward, load_encoder
from ._estimator import (
    FitTask,
    NeuralEstimatorMixin,
    fill_engine_docs,
    validation_callbacks,
    validation_rows,
)
from ._optim import ParamGroup
from ._seed import seed_everything
from ._stream import check_texts, is_text_stream, iter_text_chunks, materialize_texts
from ._tokenize import TokenizedTexts, TokenViews, tokenize
from ._training import Trainer
from ._weights import FineTunedModelMixin

__all__ = ["TextTransformerMixin", "TransformerClassifierBase", "check_class_labels"]

logger = logging.getLogger(__name__)


def check_class_labels(y: Any, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate 1-D multi-class targets; returns ``(classes, y_encoded)``.

    Any hashable, sortable labels work (str, int, ...); a 2-D ``y`` is rejected, since
    these classifiers predict exactly one class per text.
    """
    if y is None:
        raise ValueError(
            "y is required: this classifier needs one class label per text of X, got None."
        )
    if hasattr(y, "toarray") or (hasattr(y, "ndim") and np.ndim(y) > 1):
        shape = getattr(y, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] == 1:
            raise ValueError(
                f"y must be 1-D (one class per text), got shape {shape}; pass y.ravel()."
            )
        raise ValueError(
            f"y must be a 1-D array of class labels (multi-class), got shape {shape}; "
            f"multi-label targets are not supported by this classifier."
        )
    _check_one_label_kind(y)
    if isinstance(y, (list, tuple)) and y and all(isinstance(v, str) for v in y):
        # An object array, not '<U', which costs 4 bytes x the longest label per sample.
        y = np.fromiter(y, dtype=object, count=len(y))
    y = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of class labels, got shape {y.shape}.")
    if len(y) != n_samples:
        raise ValueError(f"X and y have different lengths ({n_samples} and {len(y)}).")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity.")
    if y.dtype == object and any(v is None for v in y):
        raise ValueError("y contains None.")
    if y.dtype.kind == "f" and not np.all(y == np.round(y)):
        bad = y[y != np.round(y)][0]
        raise ValueError(
            f"Unknown label type: continuous. y holds non-integer numbers such as {bad!r}; "
            f"class labels must be identifiers (str or int), not continuous values."
        )
    if y.dtype == object:
        kinds = {type(v).__name__ for v in y.tolist()}
        if len(kinds) > 1:
            raise ValueError(
                f"y mixes label types {sorted(kinds)}; use one type for all class labels "
                f"(e.g. convert every label with str())."
            )
    classes, y_encoded = np.unique(y, return_inverse=True)
    if classes.dtype.kind == "U":
        classes = classes.astype(object)  # str classes_ are object arrays, as in skxmc.labels
    if len(classes) < 2:
        raise ValueError(
            f"the training data holds {len(classes)} class; a classifier needs at least 2."
        )
    return classes, y_encoded.astype(np.int64)


def _check_one_label_kind(y: Any) -> None:
    """Refuse labels that mix strings and numbers, as scikit-learn does: numpy would turn
    ``[1, "a"]`` into strings, and class ``1`` would come back as ``"1"``."""
    if isinstance(y, np.ndarray) and y.dtype != object:
        return  # one dtype: the caller's array already holds one kind
    values = y.tolist() if hasattr(y, "tolist") else list(y)
    kinds = {isinstance(v, (str, bytes)) for v in values if v is not None}
    if len(kinds) > 1:
        raise ValueError(
            "Mix of label input types (string and number): y holds both, e.g. "
            f"{next(v for v in values if isinstance(v, (str, bytes)))!r} and "
            f"{next(v for v in values if v is not None and not isinstance(v, (str, bytes)))!r}"
            "; convert every label to one type (e.g. str)."
        )


def take_texts(texts: list | TokenizedTexts, rows: np.ndarray) -> list | TokenizedTexts:
    """The texts at ``rows``: of a list, or of the token ids a stream became."""
    if isinstance(texts, TokenizedTexts):
        return texts.subset(rows)
    return [texts[i] for i in rows]


def _subset_fit_params(fit_params: dict[str, Any], rows: np.ndarray, n: int) -> dict[str, Any]:
    """``fit_params`` with the per-text ones (sequences of length ``n``) cut to ``rows``."""
    out = {}
    for key, value in fit_params.items():
        if isinstance(value, TokenizedTexts):  # the tokens a stream became
            out[key] = value.subset(rows)
            continue
        if isinstance(value, TokenViews):  # their views, tokenised with them
            out[key] = value.subset_rows(rows)
            continue
        if value is not None and not isinstance(value, str) and hasattr(value, "__len__"):
            if len(value) == n:
                rows_of = getattr(value, "iloc", value)  # pandas: by position
                value = [value[i] for i in rows] if isinstance(value, list) else rows_of[rows]
        out[key] = value
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (stable: the row maximum is subtracted first)."""
    scores = np.asarray(logits, dtype=np.float64).copy()
    scores -= scores.max(axis=1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=1, keepdims=True)
    return scores


class TextTransformerMixin(ClassNamePrefixFeaturesOutMixin, TransformerMixin):
    """``fit_transform``, ``get_feature_names_out`` and ``set_output`` for text estimators.

    For estimators that ``fit`` on raw texts and whose ``transform(X)`` returns features
    (embeddings, or stacked TF-IDF and embeddings), so that they work as feature steps:
    in a :class:`~sklearn.pipeline.Pipeline`, and in a
    :class:`~sklearn.compose.ColumnTransformer` with ``set_output(transform="pandas")``
    (or ``sklearn.set_config(transform_output="pandas")``).

    What it adds:

    - ``fit_transform(X, y, **fit_params)``: ``fit(X, y, **fit_params).transform(X)``
      (the fitted model embeds its own training texts, as ``transform`` would);
    - ``get_feature_names_out()``: ``["<classname>0", "<classname>1", ...]``, one name per
      output column (sklearn's :class:`~sklearn.base.ClassNamePrefixFeaturesOutMixin`);
    - ``set_output(transform=...)``: ``transform`` and ``fit_transform`` return a pandas
      DataFrame (index taken from a pandas ``X``) or a polars DataFrame with these
      column names. Sparse outputs cannot become DataFrames (scikit-learn raises).

    The estimator defines ``transform`` and a read-only ``_n_features_out`` (the number of
    output columns), which must raise :class:`AttributeError` before ``fit`` so that
    ``get_feature_names_out`` raises :class:`~sklearn.exceptions.NotFittedError`. Put the
    mixin before :class:`~sklearn.base.BaseEstimator` in the bases (after
    :class:`~sklearn.base.ClassifierMixin` for a classifier: its tags keep the estimator
    a classifier, this mixin only adds ``transformer_tags``). Internal callers that need
    the raw features (``predict`` through ``transform``, ``kneighbors``...) must call an
    unwrapped private method instead: with pandas output configured, ``transform``
    returns a DataFrame.
    """

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit on ``X`` (and ``y``), then transform ``X``.

        Parameters
        ----------
        X : sequence of str or of (str, str)
            Training texts.
        y : array-like of shape (n_samples,) or label matrix
            Targets, as ``fit`` takes them.
        **fit_params
            Passed to ``fit`` (e.g. SharpReCL's ``X_augmented``).

        Returns
        -------
        features : numpy.ndarray, sparse matrix or DataFrame of shape \
                (n_samples, n_features_out)
            What ``transform(X)`` returns after the fit (a DataFrame with
            ``set_output(transform="pandas")``).
        """
        if not hasattr(X, "__len__") or is_text_stream(X):  # read once, needed twice
            X = materialize_texts(X) if is_text_stream(X) else list(X)
        return self.fit(X, y, **fit_params).transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.two_d_array = False
        # The input is text, so no input dtype can be preserved.
        tags.transformer_tags.preserves_dtype = []
        return tags


@fill_engine_docs
class TransformerClassifierBase(
    NeuralEstimatorMixin,
    FineTunedModelMixin,
    PersistenceMixin,
    ClassifierMixin,
    TextTransformerMixin,
    BaseEstimator,
):
    """Base of fine-tuned transformer classifiers with one class per text.

    Not used directly: subclasses define ``__init__`` (keyword-only, storing every
    parameter, the common ones described below), :meth:`_build_module` and :meth:`_step`.

    Parameters
    ----------
    encoder : str or path-like
        Hugging Face hub name or local model directory.
    pooling : {"cls", "pooler", "mean", "max", "mean_sqrt_len"}
        How token states become one text embedding.
    max_length : int
        Truncation length in tokens.
    {training_params}
    """

    _parameter_constraints: dict = {
        "encoder": [str, os.PathLike],
        "pooling": [StrOptions({"cls", "pooler", "mean", "max", "mean_sqrt_len"})],
        "max_length": [Interval(Integral, 2, None, closed="left")],
        "training": [TrainingConfig, None],
    }

    # transform / predict / predict_proba read the model through _text_model_outputs, so
    # set_inference_backend("onnx") can run them with ONNX Runtime.
    _onnx_inference = True

    # Subclass hooks ---------------------------------------------------------------------

    @abstractmethod
    def _build_module(self, encoder: torch.nn.Module, n_classes: int) -> torch.nn.Module:
        """The whole trainable model; must hold the encoder as ``.encoder`` and define
        ``logits(inputs)`` and ``embed(inputs)``. Depends only on the parameters, the
        encoder and ``n_classes`` (it is rebuilt that way by :func:`skxmc.load`)."""

    @abstractmethod
    def _step(self, batch: Any, task: FitTask) -> torch.Tensor | dict[str, Any]:
        """One training step's loss (see :meth:`skxmc.text.Trainer.fit`)."""

    def _prepare_fit(
        self,
        texts: list,
        y: np.ndarray,
        rng: np.random.RandomState,
        *,
        sample_weight: np.ndarray | None = None,
        **fit_params: Any,
    ) -> FitTask:
        """The fit's task: tokenised training texts and targets; override to add views,
        statistics, etc. ``sample_weight``: the training rows' weights (positive) or
        None; ``fit_params`` are the extra ``fit`` arguments."""
        if fit_params:
            raise TypeError(f"fit() got unexpected arguments {sorted(fit_params)}.")
        weights = loss_weights(sample_weight)
        return FitTask(
            self._tokenize(texts),
            torch.as_tensor(y),
            len(texts),
            rng,
            sample_weight=None
            if weights is None
            else torch.as_tensor(weights, dtype=torch.float32),
        )

    def _training_batches(self, task: FitTask, epoch: int, rng: np.random.Generator) -> Any:
        """The batches of one epoch (default: shuffled, length-bucketed text batches)."""
        return task.tokens.batches(self._train.batch_size, shuffle=True, rng=rng)

    def _finish_fit(self, task: FitTask) -> None:
        """After training, also when it failed or was interrupted: drop training-only
        state from the model (override)."""

    def _finalize_fit(self, task: FitTask) -> None:
        """After a training that returned (completed or interrupted): override to derive
        fitted attributes from the trained model."""

    def _param_groups(self, module: torch.nn.Module) -> list[ParamGroup]:
        """Encoder and heads as two groups (the heads often need a larger rate)."""
        head_lr = (
            self._train.learning_rate
            if self._train.head_learning_rate is None
            else self._train.head_learning_rate
        )
        encoder_ids = {id(p) for p in module.encoder.parameters()}
        heads = [(n, p) for n, p in module.named_parameters() if id(p) not in encoder_ids]
        groups = [self._main_param_group("encoder", module.encoder)]
        if heads:
            groups.append(
                ParamGroup("heads", heads, lr=head_lr, weight_decay=self._train.weight_decay)
            )
        return groups

    # Fit --------------------------------------------------------------------------------

    def _validate_fit_data(self, X: Any, y: Any) -> tuple[list, np.ndarray]:
        if isinstance(X, TokenizedTexts):  # a stream, read and tokenised
            texts, is_pairs = X, X.pairs
        else:
            texts, is_pairs = check_texts(X)
        if not len(texts):
            raise ValueError("X is empty: fit needs at least one text per class.")
        self.classes_, y_encoded = check_class_labels(y, len(texts))
        self.text_pairs_ = bool(is_pairs)
        return texts, y_encoded

    def _tokenize(self, texts: Any) -> TokenizedTexts:
        if isinstance(texts, TokenizedTexts):
            return texts
        return tokenize(self.tokenizer_, texts, max_length=self._max_length())

    def _check_fit_params(self) -> None:
        """Checks of the parameters that need no data (override; run before a stream is
        read, and by ``_validate_fit_data``)."""

    def _read_fit_stream(
        self, X: Any, rs: np.random.RandomState, fit_params: dict[str, Any]
    ) -> tuple[TokenizedTexts, dict[str, Any]]:
        """Read a stream ``X`` once into token ids (the tokenizer is loaded), after the
        per-text ``fit_params`` that are streams too (SharpReCL's ``X_augmented``);
        override to derive per-text data (augmented views) while the texts go by."""
        fit_params = {
            key: self._tokenize(value) if is_text_stream(value) else value
            for key, value in fit_params.items()
        }
        return self._tokenize(X), fit_params

    def _load_for_fit(self, seed: int) -> torch.nn.Module:
        seed_everything(seed)  # the heads' initial weights
        encoder, self.tokenizer_ = load_encoder(self.encoder, verbose=self._train.verbose)
        return encoder

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any
    ) -> TransformerClassifierBase:
        """Fine-tune the encoder and heads on texts ``X`` with classes ``y``.

        Ctrl-C stops training with a :class:`~skxmc.text.TrainingInterruptedWarning` and
        leaves a usable model (the weights of the last completed step).

        Parameters
        ----------
        X : sequence or iterable of str or of (str, str)
            Training texts (a list, numpy array or pandas Series; not a bare string). A
            generator, an iterable without ``len`` or a Hugging Face ``datasets.Dataset``
            / ``IterableDataset`` (its ``"text"`` column) is read once, in chunks, and
            only its token ids are kept (see :ref:`large-data`).
        y : array-like of shape (n_samples,)
            Class labels (any hashable, sortable values), in memory also when ``X`` is
            a stream (an iterator is read into a list).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-text weights (see the subclass's ``fit``).
        **fit_params
            Subclass-specific data (e.g. pre-computed augmented texts).

        Returns
        -------
        self
        """
        encoder = None
        if is_text_stream(X):
            # The tokenizer first: the stream is tokenised as it is read, and only its token
            # ids are kept. The seeds are drawn as they are for a list, so that a stream
            # without a validation split fits the model the list would.
            self._check_fit_params()
            if y is not None and not hasattr(y, "__len__"):
                y = list(y)
            rs = check_random_state(self._train.random_state)
            seed = int(rs.randint(np.iinfo(np.int32).max))
            encoder = self._encoder_loaded = self._load_for_fit(seed)
            try:
                X, fit_params = self._read_fit_stream(X, rs, fit_params)
            finally:
                del self._encoder_loaded
        kept = None  # positions in X of the rows of positive weight (None: all)
        if sample_weight is not None:
            X, y, sample_weight, fit_params, kept = self._drop_zero_weight_rows(
                X, y, sample_weight, fit_params
            )
        texts, y_encoded = self._validate_fit_data(X, y)
        # An ONNX Runtime session holds the previous fit's weights.
        self.__dict__.pop("_onnx_model", None)
        if encoder is None:
            rs = check_random_state(self._train.random_state)
            seed = int(rs.randint(np.iinfo(np.int32).max))
            encoder = self._load_for_fit(seed)
        self.module_ = self._build_module(encoder, len(self.classes_))
        train, valid = self._validation_split(y_encoded, rs)
        if valid is not None:
            valid_tokens, y_valid = self._tokenize(take_texts(texts, valid)), y_encoded[valid]
            fit_params = _subset_fit_params(fit_params, train, len(texts))
            texts, y_encoded = take_texts(texts, train), y_encoded[train]
            sample_weight = None if sample_weight is None else sample_weight[train]
        if sample_weight is not None:
            fit_params["sample_weight"] = sample_weight
        task = self._prepare_fit(texts, y_encoded, rs, **fit_params)
        task.rows = None if valid is None else train
        if kept is not None:  # positions in the X given to fit, dropped rows counted
            task.rows = kept if task.rows is None else kept[task.rows]
        callbacks = [] if valid is None else self._validation_callbacks(valid_tokens, y_valid)
        task.trainer = Trainer(
            self.module_ if task.module is None else task.module,
            self._param_groups(self.module_),
            n_epochs=self._train.max_epochs,
            max_steps=self._train.max_steps,
            warmup=self._train.warmup,
            random_state=seed,
            # The tokenised texts are what training reads (augmented views included).
            fit_data=(task.tokens, task.y, self.classes_),
            **self._engine_params(callbacks),
        )
        try:
            result = task.trainer.fit(
                functools.partial(self._step, task=task),
                functools.partial(self._training_batches, task),
            )
        finally:
            self._finish_fit(task)
        self.module_.eval()
        self._set_fit_result(result)
        self._finalize_fit(task)
        return self

    @staticmethod
    def _drop_zero_weight_rows(
        X: Any, y: Any, sample_weight: Any, fit_params: dict[str, Any]
    ) -> tuple[Any, Any, np.ndarray, dict[str, Any], np.ndarray | None]:
        """Checked weights, and ``X``, ``y``, weights and per-text ``fit_params`` without
        the rows of weight 0 (before anything reads them: as if they were not there), and
        the positions of the rows kept (None: all)."""
        texts = X if isinstance(X, TokenizedTexts) else check_texts(X)[0]
        n = len(texts)
        weights, kept = drop_zero_weight_rows(sample_weight, n)
        if kept is not None:
            X = take_texts(texts, kept)
            y = take_rows(y, kept, n)
            fit_params = _subset_fit_params(fit_params, kept, n)
        return X, y, weights, fit_params, kept

    def _validation_split(
        self, y: np.ndarray, rs: np.random.RandomState
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Training and validation rows (stratified when every class has two rows)."""
        stratify = y if np.bincount(y).min() >= 2 else None
        train, valid = validation_rows(
            len(y),
            self._train.validation_fraction,
            self._train.n_iter_no_change,
            rs,
            stratify=stratify,
        )
        if valid is not None and len(np.unique(y[train])) < len(self.classes_):
            raise ValueError(
                f"validation_fraction={self._train.validation_fraction} leaves a class without "
                f"training texts; lower it or pass more data."
            )
        return train, valid

    def _validation_callbacks(self, tokens: TokenizedTexts, y: np.ndarray) -> list:
        """Validation accuracy after each epoch, and early stopping on it."""

        def accuracy(trainer: Trainer) -> float:
            logits = batched_inference(
                self.module_.logits,
                tokens,
                batch_size=2 * self._train.batch_size,
                device=trainer.device,
            )
            return float(np.mean(logits.argmax(axis=1) == y))

        return validation_callbacks(accuracy, self._train.n_iter_no_change)

    # Inference --------------------------------------------------------------------------

    def _inference_device(self) -> torch.device:
        return inference_device(self._train.device)

    def _check_pairs(self, texts: list, is_pairs: bool) -> None:
        if texts and is_pairs != self.text_pairs_:
            kind = "text pairs" if self.text_pairs_ else "single texts"
            given = (
                "text pairs (2-tuples, or a two-column DataFrame / array)"
                if is_pairs
                else "single texts"
            )
            raise ValueError(f"this model was trained on {kind}; X holds {given}.")

    def _forward_all(self, X: Any, method: str, desc: str) -> np.ndarray:
        check_is_fitted(self, "module_")
        if is_text_stream(X):
            return self._forward_stream(X, method, desc)
        texts, is_pairs = check_texts(X)
        self._check_pairs(texts, is_pairs)
        return self._forward_tokens(self._tokenize(texts), method, desc)

    def _forward_tokens(self, tokens: TokenizedTexts, method: str, desc: str) -> np.ndarray:
        # Torch on the inference device, or ONNX Runtime after set_inference_backend("onnx").
        return self._text_model_outputs(
            method,
            tokens,
            batch_size=2 * self._train.batch_size,
            device=self._inference_device(),
            verbose=self._train.verbose,
            desc=desc,
        )

    def _forward_stream(self, X: Any, method: str, desc: str) -> np.ndarray:
        """The outputs of a stream, chunk by chunk: each chunk is tokenised, run and its
        tokens dropped, so only the outputs grow with the number of texts."""
        parts = []
        for texts, is_pairs in iter_text_chunks(X):
            self._check_pairs(texts, is_pairs)
            out = self._forward_tokens(self._tokenize(texts), method, desc)
            parts.append(out.reshape(len(texts), -1))
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def decision_function(self, X: Any) -> np.ndarray:
        """Class scores (logits), shape (n_samples, n_classes).

        Parameters
        ----------
        X : sequence of str or of (str, str)

        Returns
        -------
        scores : numpy.ndarray of float32 of shape (n_samples, n_classes)
        """
        out = self._forward_all(X, "logits", "predicting")
        return out.reshape(len(out), len(self.classes_))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (softmax of the logits); rows sum to 1.

        Parameters
        ----------
        X : sequence of str or of (str, str)

        Returns
        -------
        proba : numpy.ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        return softmax(self.decision_function(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most likely class of each text.

        Parameters
        ----------
        X : sequence of str or of (str, str)

        Returns
        -------
        y_pred : numpy.ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        scores = self.decision_function(X)
        return self.classes_[scores.argmax(axis=1)] if len(scores) else self.classes_[:0]

    def transform(self, X: Any) -> np.ndarray:
        """The learned text embeddings: the model's ``embed`` (what SharpReCL's classifier
        reads; KNN-BERT's L2-normalised projection, the space of its kNN search).

        Parameters
        ----------
        X : sequence of str or of (str, str)

        Returns
        -------
        embeddings : numpy.ndarray of float32 of shape (n_samples, n_dims)
            A DataFrame with columns :meth:`get_feature_names_out` after
            ``set_output(transform="pandas")``.
        """
        return self._embeddings(X)

    def _embeddings(self, X: Any) -> np.ndarray:
        # transform() is wrapped by set_output; internal callers need the plain array.
        return self._forward_all(X, "embed", "embedding")

    @property
    def _n_features_out(self) -> int:
        """Width of ``transform``'s output (the hidden size); AttributeError before fit."""
        return self.module_.hidden_size

    # Tags, pickling, persistence -------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.classifier_tags.multi_label = False
        tags.non_deterministic = True  # GPU kernels and bf16 are not bitwise reproducible
        return tags

    def _rebuild_module(self, encoder: torch.nn.Module) -> torch.nn.Module:
        return self._build_module(encoder, len(self.classes_))


class EncoderModule(torch.nn.Module):
    """An encoder with pooling: ``features(inputs)`` is the pooled text embedding."""

    def __init__(self, encoder: torch.nn.Module, pooling: str) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling

    @property
    def hidden_size(self) -> int:
        return int(self.encoder.config.hidden_size)

    def features(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return encoder_forward(self.encoder, inputs, self.pooling).float()
