"""KNN-BERT: fine-tuning with a momentum-contrast queue and kNN + linear prediction."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._optional import require_extra

with require_extra("text", "KNNBertClassifier"):
    import torch
    from torch import nn

from ._compat import Interval, StrOptions
from ._memory import FLOAT32, INT64, check_allocation, encoder_hidden_size
from ._search import SEARCH_METHODS, InnerProductIndex
from .io import persistent
from .losses import batch_contrastive_loss, moco_contrastive_loss, queue_contrastive_loss
from .text._classifier import EncoderModule, TransformerClassifierBase, softmax
from .text._config import TrainingConfig
from .text._device import resolve_device
from .text._encoder import batched_inference, encoder_forward, eval_mode
from .text._estimator import FitTask, fill_engine_docs
from .text._explain import ExplanationMixin, Neighbor, check_explain_k
from .text._optim import momentum_update

__all__ = ["ClassExplanation", "KNNBertClassifier", "Neighbor"]


@dataclasses.dataclass(frozen=True)
class ClassExplanation(ExplanationMixin):
    """Why a class got its probability for a text (:meth:`KNNBertClassifier.explain`).

    ``score = knn_weight * vote + (1 - knn_weight) * classifier``.

    Attributes
    ----------
    label : object
        The class (an element of ``classes_``).
    score : float
        Its ``predict_proba``.
    vote : float
        Its share of the kNN vote: the weights of its neighbours over those of all
        ``n_neighbors``.
    classifier : float
        The linear classifier's softmax probability.
    neighbors : tuple of Neighbor
        The voting neighbours of this class, nearest first.
    """

    label: Any
    score: float
    vote: float
    classifier: float
    neighbors: tuple[Neighbor, ...]


def _head(hidden: int, out: int, dropout: float) -> nn.Sequential:
    # The reference heads: dropout, Linear h-h, tanh, dropout, Linear h-out.
    return nn.Sequential(
        nn.Dropout(dropout),
        nn.Linear(hidden, hidden),
        nn.Tanh(),
        nn.Dropout(dropout),
        nn.Linear(hidden, out),
    )


class _KNNBertModule(EncoderModule):
    """Query encoder, classifier and projection heads (the persisted model; the key side
    of training is a :class:`_MomentumContrast` of the fit)."""

    def __init__(self, encoder: nn.Module, pooling: str, n_classes: int, dropout: float):
        super().__init__(encoder, pooling)
        h = self.hidden_size
        self.n_classes = n_classes
        self.classifier = _head(h, n_classes, dropout)
        self.projection = _head(h, h, dropout)

    # Query side -------------------------------------------------------------------------

    def project(self, features: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.projection(features).float(), dim=1)

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.classifier(self.features(inputs))

    def embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The normalised projection: the space of the queue and of the kNN search."""
        return self.project(self.features(inputs))

    def logits_and_embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        features = self.features(inputs)
        return torch.cat([self.classifier(features).float(), self.project(features)], dim=1)

    def encoder_features(self, encoder: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return encoder_forward(encoder, inputs, self.pooling).float()


class _MomentumContrast(nn.Module):
    """The training-only key side of KNN-BERT (MoCo): momentum copies of the encoder and
    the projection, and the queue of (key, label, training row) entries.

    It lives in the fit's task, never on the estimator: the persisted model stays the
    query side. The trainer trains this module, which holds the model's own encoder,
    classifier and projection (shared, not copied) under the same names, so that a
    checkpoint holds the key side and the queue with the model, in the layout of
    skxmc 26aef59's checkpoints (queue buffers, then ``encoder``, ``classifier``,
    ``projection``, ``key_encoder``, ``key_projection``).
    """

    def __init__(self, model: _KNNBertModule, queue_size: int) -> None:
        super().__init__()
        h = model.hidden_size
        self.register_buffer("queue", torch.zeros(queue_size, h))
        self.register_buffer("queue_labels", torch.full((queue_size,), -1, dtype=torch.long))
        self.register_buffer("queue_indices", torch.full((queue_size,), -1, dtype=torch.long))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self.model = [model]  # a list: not a submodule (its parts are, below)
        self.encoder = model.encoder
        self.classifier = model.classifier
        self.projection = model.projection
        self.key_encoder = copy.deepcopy(model.encoder)
        self.key_projection = copy.deepcopy(model.projection)
        for p in [*self.key_encoder.parameters(), *self.key_projection.parameters()]:
            p.requires_grad_(False)

    def momentum_update(self, momentum: float) -> None:
        momentum_update(self.key_encoder, self.encoder, momentum)
        momentum_update(self.key_projection, self.projection, momentum)

    def keys(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Normalised key features (no gradient; dropout off)."""
        with torch.no_grad(), eval_mode(self.key_encoder, self.key_projection):
            features = self.model[0].encoder_features(self.key_encoder, inputs)
            return nn.functional.normalize(self.key_projection(features).float(), dim=1)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor, labels: torch.Tensor, indices: torch.Tensor) -> None:
        """Write entries first-in first-out (the oldest are overwritten)."""
        size = self.queue.shape[0]
        if len(keys) > size:  # only the newest fit
            keys, labels, indices = keys[-size:], labels[-size:], indices[-size:]
        n = len(keys)
        if n == 0:
            return
        slots = (int(self.queue_ptr) + torch.arange(n, device=self.queue.device)) % size
        self.queue[slots] = keys.to(self.queue.dtype)
        self.queue_labels[slots] = labels.to(self.queue_labels.device)
        self.queue_indices[slots] = indices.to(self.queue_indices.device)
        self.queue_ptr.fill_((int(self.queue_ptr) + n) % size)

    def memory(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The filled entries: (keys, labels, training rows), as numpy arrays."""
        filled = (self.queue_labels >= 0).cpu().numpy()
        return (
            self.queue.detach().cpu().numpy()[filled].copy(),
            self.queue_labels.cpu().numpy()[filled].copy(),
            self.queue_indices.cpu().numpy()[filled],
        )


@dataclasses.dataclass
class _KNNBertTask(FitTask):
    """Per-fit state: the rows of each class, the seed of the memory sampling and, with
    a queue, the key side (momentum encoder and queue)."""

    class_members: list = dataclasses.field(default_factory=list)
    memory_seed: int = 0
    moco: _MomentumContrast | None = None
    member_p: list | None = None  # with sample weights: draw probabilities per class


@persistent
@fill_engine_docs
class KNNBertClassifier(TransformerClassifierBase):
    """Fine-tuned transformer classifier with a kNN vote (KNN-BERT).

    KNN-BERT (Li et al.) trains the encoder with cross-entropy plus a supervised
    contrastive loss in which each text is contrasted with a large queue of labelled
    features from a momentum (key) encoder, as in MoCo; it then predicts by mixing the
    linear classifier's softmax with the votes of the text's nearest neighbours among
    the stored training features::

        loss  = lambda * contrastive + (1 - lambda) * CE     (lambda: contrastive_weight)
        proba = phi * votes / k + (1 - phi) * softmax(logits)  (phi: knn_weight)

    ``contrastive_weight=0, knn_weight=0`` is plain fine-tuning; ``knn_weight=1`` predicts
    by the kNN vote alone. The paper's baselines: ``contrastive_keys="batch",
    knn_weight=0`` (SCL) and ``contrastive_keys="moco", knn_weight=0`` (SCL-MoCo). Works on
    single texts and on text pairs (MRPC, RTE).

    ``X`` is a sequence of texts (list, array, pandas Series or one-column DataFrame) or of
    text pairs (2-tuples, or a two-column DataFrame / array). ``transform`` gives the
    normalised embeddings of the kNN search; with ``fit_transform``,
    ``get_feature_names_out`` and ``set_output`` the classifier is also a feature step
    (e.g. ``ColumnTransformer([("emb", KNNBertClassifier(), "text")])``).

    Parameters
    ----------
    {encoder_params}
    max_length : int, default=128
        Truncation length in tokens.
    dropout : float, default=0.1
        Dropout of the classifier and projection heads.
    contrastive_weight : float, default=0.1
        ``lambda``: share of the contrastive loss; 0 trains with cross-entropy only (no
        key encoder, no queue: the cost of plain fine-tuning).
    contrastive_keys : {"queue", "moco", "batch"}, default="queue"
        What each text is contrasted with. ``"queue"``: the momentum queue, with the
        ``n_most_similar`` most and ``n_least_similar`` least similar queue entries of its
        class as positives (KNN-BERT; :func:`skxmc.losses.queue_contrastive_loss`).
        ``"moco"``: one positive, the key of a random training text of its class encoded
        by the momentum encoder at this step, against the queue entries of other classes
        as negatives; no positive is selected from the queue (``n_most_similar`` and
        ``n_least_similar`` are unused). This is the paper's "SCL-MoCo" baseline (with
        ``knn_weight=0``; :func:`skxmc.losses.moco_contrastive_loss`); the keys drawn
        for the positives are the ones enqueued. ``"batch"``: the other texts of its
        batch, with gradients on both sides and no key encoder or queue (supervised
        contrastive learning in the batch, the paper's "SCL" baseline;
        :func:`skxmc.losses.batch_contrastive_loss`); the kNN memory then comes from the
        training texts as without a queue.
    temperature : float, default=0.07
        Temperature of the contrastive loss.
    momentum : float, default=0.999
        Momentum of the key encoder's update (``key = m * key + (1 - m) * query``).
    queue_size : int, default=32000
        Entries (normalised key feature, label) in the queue; filled by one pass of the
        key encoder over the training data before training.
    n_enqueue_per_anchor : int, default=16
        Random same-class training texts encoded by the key side and enqueued per text
        of each batch (the reference's 16 multiplies the cost of a step; lower it on CPU).
        With ``contrastive_keys="moco"`` the first of them is the text's positive (one is
        drawn and not enqueued when this is 0).
    n_most_similar : int, default=100
        Positives kept per anchor from the most similar end (``top_k``).
    n_least_similar : int, default=1
        Positives kept per anchor from the least similar end (``end_k``).
    knn_weight : float, default=0.5
        ``phi``: weight of the kNN vote in the prediction; 0 the linear classifier only,
        1 the vote only.
    n_neighbors : int, default=10
        Neighbours that vote.
    knn_memory : {"queue", "train"}, default="queue"
        What the neighbours are searched in. ``"queue"``: the queue's entries at the end
        of training (key features, as in the paper; without a queue, i.e.
        ``contrastive_weight=0`` or ``contrastive_keys="batch"``, at most ``queue_size``
        random training texts encoded by the final model). ``"train"``: every training
        text once, encoded by the final model after training (one more pass; no
        duplicates, no stale features). Prefer ``"train"`` for small training sets: each
        text once, a smaller memory than the queue, which then holds repeated keys of the
        same texts from older key encoders.
    search : {"auto", "exact", "approximate"}, default="auto"
        How the neighbours are found. ``"exact"``: cosine against every memory entry
        (blocked matrix products). ``"approximate"``: a faiss inverted-file index built
        after ``fit`` / loading (``pip install faiss-cpu``), each query scanning a
        fraction of the memory. ``"auto"``: approximate from 200,000 memory entries on
        when faiss is installed, exact below, where exact search is as fast (the kNN
        search benchmarks page).
    {training_params}
        The paper: ``batch_size=8``, ``learning_rate=2e-5``. Checkpoints hold the queue.

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (n_classes,)
        The class labels.
    memory_features_ : numpy.ndarray of float32 of shape (n_memory, hidden_size)
        L2-normalised features searched by the kNN vote.
    memory_targets_ : numpy.ndarray of int64 of shape (n_memory,)
        Class of each memory entry, as a column of ``classes_``.
    memory_indices_ : numpy.ndarray of int64 of shape (n_memory,)
        Training row (position in ``X`` of ``fit``) of each memory entry.
    memory_weights_ : numpy.ndarray of float64 of shape (n_memory,)
        The ``sample_weight`` of each memory entry's text (scaled to mean 1 over the
        training texts): its vote. Only after a fit with unequal weights.
    module_ : torch.nn.Module
        Encoder, classifier and projection heads (the key side of training is not kept).
    tokenizer_ : transformers tokenizer
    {fit_attributes}
    text_pairs_ : bool
        Whether the model was trained on text pairs.

    See Also
    --------
    skxmc.losses.queue_contrastive_loss : the contrastive loss.
    SharpReCLClassifier : contrastive fine-tuning for imbalanced classes.

    Notes
    -----
    Differences from the reference code: the queue, the anchors and the kNN search all
    use the projected, L2-normalised features (the reference mixes raw encoder outputs
    and projected ones); keys are encoded with dropout off; the momentum update runs at
    the start of each step (as in MoCo), before the keys of that step are encoded.
    ``decision_function`` returns the mixed scores, so its argmax is ``predict``.

    References
    ----------
    L. Li, D. Song, R. Ma, X. Qiu, X. Huang, "KNN-BERT: Fine-Tuning Pre-Trained Models
    with KNN Classifier", 2021.

    Examples
    --------
    >>> from skxmc import KNNBertClassifier  # doctest: +SKIP
    >>> clf = KNNBertClassifier(encoder="/models/all-MiniLM-L6-v2", pooling="mean",
    ...                         n_enqueue_per_anchor=4)  # doctest: +SKIP
    >>> clf.fit(train_texts, train_labels).score(test_texts, test_labels)  # doctest: +SKIP
    0.9...
    >>> sims, rows, labels = clf.kneighbors(["a great movie"], n_neighbors=3,
    ...                                     return_labels=True)  # doctest: +SKIP
    """

    _training_defaults = {
        "batch_size": 16,
        "max_epochs": 3,
        "learning_rate": 2e-5,
        "weight_decay": 0.0,
        "warmup": 0.0,
    }

    _parameter_constraints: dict = {
        **TransformerClassifierBase._parameter_constraints,
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "contrastive_weight": [Interval(Real, 0, 1, closed="both")],
        "contrastive_keys": [StrOptions({"queue", "moco", "batch"})],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "momentum": [Interval(Real, 0, 1, closed="both")],
        "queue_size": [Interval(Integral, 1, None, closed="left")],
        "n_enqueue_per_anchor": [Interval(Integral, 0, None, closed="left")],
        "n_most_similar": [Interval(Integral, 0, None, closed="left")],
        "n_least_similar": [Interval(Integral, 0, None, closed="left")],
        "knn_weight": [Interval(Real, 0, 1, closed="both")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "knn_memory": [StrOptions({"queue", "train"})],
        "search": [StrOptions(set(SEARCH_METHODS))],
    }

    def __init__(
        self,
        *,
        encoder: str = "bert-base-uncased",
        pooling: str = "cls",
        max_length: int = 128,
        dropout: float = 0.1,
        contrastive_weight: float = 0.1,
        contrastive_keys: str = "queue",
        temperature: float = 0.07,
        momentum: float = 0.999,
        queue_size: int = 32000,
        n_enqueue_per_anchor: int = 16,
        n_most_similar: int = 100,
        n_least_similar: int = 1,
        knn_weight: float = 0.5,
        n_neighbors: int = 10,
        knn_memory: str = "queue",
        search: str = "auto",
        training: TrainingConfig | None = None,
    ) -> None:
        self.encoder = encoder
        self.pooling = pooling
        self.max_length = max_length
        self.dropout = dropout
        self.contrastive_weight = contrastive_weight
        self.contrastive_keys = contrastive_keys
        self.temperature = temperature
        self.momentum = momentum
        self.queue_size = queue_size
        self.n_enqueue_per_anchor = n_enqueue_per_anchor
        self.n_most_similar = n_most_similar
        self.n_least_similar = n_least_similar
        self.knn_weight = knn_weight
        self.n_neighbors = n_neighbors
        self.knn_memory = knn_memory
        self.search = search
        self.training = training

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> KNNBertClassifier:
        """Fine-tune on texts ``X`` with classes ``y``, then store the kNN memory.

        Ctrl-C stops training with a :class:`~skxmc.text.TrainingInterruptedWarning` and
        leaves a usable model (memory included).

        Parameters
        ----------
        X : sequence or iterable of str or of (str, str)
            Training texts or text pairs. A generator or a Hugging Face dataset is read once, in
            chunks, keeping only the token ids (see :ref:`large-data`).
        y : array-like of shape (n_samples,)
            Class labels (str, int, any sortable hashable values).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-text weights (finite, >= 0). Each text's cross-entropy and contrastive
            (anchor) terms are multiplied by its weight, the weights scaled to mean 1 over
            the training texts, so that an integer weight counts as repeated copies of the
            text in expectation over the uniformly drawn batches (an epoch still passes
            once over each text; all weights equal give exactly the unweighted fit); the
            same-class texts enqueued for each anchor are drawn in proportion to their
            weights. The kNN memory holds each text (or queue entry) once, and each
            neighbour votes its text's weight (``memory_weights_``), out of the total
            weight of the ``n_neighbors``. A text of weight 0 is dropped before anything
            else (classes, validation split, queue, memory). In a
            :class:`~sklearn.pipeline.Pipeline` with metadata routing, request it with
            ``set_fit_request(sample_weight=True)``.

        Returns
        -------
        self

        Raises
        ------
        MemoryError
            Before the encoder loads, when ``queue_size`` (with the encoder's hidden size)
            implies tensors larger than the memory of the training device; the error (also
            a ValueError) names the parameter and the estimate in GiB.
        """
        return super().fit(X, y, sample_weight=sample_weight)

    # Hooks of TransformerClassifierBase -----------------------------------------------

    def _build_module(self, encoder: nn.Module, n_classes: int) -> nn.Module:
        return _KNNBertModule(encoder, self.pooling, n_classes, self.dropout)

    def _validate_fit_data(self, X: Any, y: Any) -> tuple[list, np.ndarray]:
        texts, y_encoded = super()._validate_fit_data(X, y)
        # Here, before the encoder loads: a queue that cannot fit fails in a second.
        self._check_memory(len(texts))
        return texts, y_encoded

    def _check_memory(self, n_samples: int) -> None:
        """Refuse a ``queue_size`` (or enqueue count) whose tensors cannot fit."""
        if not self._uses_queue():
            return
        device = resolve_device(self._train.device)
        hidden = encoder_hidden_size(self.encoder)
        h = hidden or 1  # unknown until the encoder loads: a lower bound
        width = f"hidden size {hidden}" if hidden else "a hidden size of at least 1"
        q = int(self.queue_size)
        batch = min(int(self._train.batch_size), n_samples)
        # The queue holds a float32 key and two int64 (label, row) per entry; it is built
        # on the CPU, then moved to the training device.
        queue = q * (FLOAT32 * h + 2 * INT64)
        what = "the momentum queue (queue_size x hidden size)"
        check_allocation(
            queue, what=what, parameter=f"queue_size={q} and {width}", hint="lower queue_size"
        )
        # Each step compares the batch with every entry: float32 similarities and three
        # boolean masks of (batch, queue_size).
        check_allocation(
            queue + batch * q * (FLOAT32 + 3),
            what=f"{what} and one step's similarities to it (batch x queue_size)",
            parameter=f"queue_size={q}, batch_size={self._train.batch_size} and {width}",
            device=device,
            hint="lower queue_size or batch_size",
        )
        # Same-class rows drawn (int64) and encoded by the key side at every step.
        check_allocation(
            INT64 * batch * int(self.n_enqueue_per_anchor),
            what="the texts enqueued per training step (batch x n_enqueue_per_anchor)",
            parameter=(
                f"n_enqueue_per_anchor={self.n_enqueue_per_anchor} and "
                f"batch_size={self._train.batch_size}"
            ),
            hint="lower n_enqueue_per_anchor",
        )

    def _uses_queue(self) -> bool:
        return self.contrastive_weight > 0 and self.contrastive_keys in ("queue", "moco")

    def _prepare_fit(
        self,
        texts: list,
        y: np.ndarray,
        rng: np.random.RandomState,
        *,
        sample_weight: np.ndarray | None = None,
        **fit_params: Any,
    ) -> _KNNBertTask:
        base = super()._prepare_fit(texts, y, rng, sample_weight=sample_weight, **fit_params)
        for name in (
            "memory_features_",
            "memory_targets_",
            "memory_indices_",
            "memory_weights_",
            "_memory_index",
        ):
            self.__dict__.pop(name, None)
        task = _KNNBertTask(
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
            class_members=[np.flatnonzero(y == c) for c in range(len(self.classes_))],
            memory_seed=int(rng.randint(np.iinfo(np.int32).max)),
        )
        if base.sample_weight is not None:  # same-class draws in proportion to the weights
            w = base.sample_weight.numpy().astype(np.float64)
            task.member_p = [w[m] / w[m].sum() for m in task.class_members]
        if not self._uses_queue():
            return task
        task.moco = moco = _MomentumContrast(self.module_, self.queue_size)
        task.module = moco  # the trainer trains (and checkpoints) the key side too
        # One pass of the key side over the training data fills the queue (in a random
        # order, so that a queue smaller than the data keeps a random part of it).
        device = self._inference_device()
        moco.to(device)
        order = np.random.default_rng(task.memory_seed).permutation(len(y))
        order = order[-self.queue_size :]
        keys = self._encode(moco.keys, task.tokens.subset(order), device, "filling the queue")
        moco.enqueue(
            torch.from_numpy(keys).to(device), torch.as_tensor(y[order]), torch.as_tensor(order)
        )
        return task

    def _encode(self, forward: Any, tokens: Any, device: torch.device, desc: str) -> np.ndarray:
        """``forward`` (the key side, the model's embedding) of every text of ``tokens``
        in inference batches (twice the training batch), rows in input order."""
        return batched_inference(
            forward,
            tokens,
            batch_size=2 * self._train.batch_size,
            device=device,
            verbose=self._train.verbose,
            desc=desc,
        )

    def _training_batches(self, task: FitTask, epoch: int, rng: np.random.Generator) -> Any:
        # Plain random batches: length-bucketing could group texts of one class.
        return task.tokens.batches(
            self._train.batch_size, shuffle=True, rng=rng, sort_by_length=False
        )

    def _finish_fit(self, task: _KNNBertTask) -> None:
        if task.moco is not None and self.knn_memory == "queue":
            features, targets, rows = task.moco.memory()
            self.memory_features_, self.memory_targets_ = features, targets
            self.memory_indices_ = task.row_positions(rows)
            self._set_memory_weights(task, rows)

    def _set_memory_weights(self, task: _KNNBertTask, rows: np.ndarray) -> None:
        """The votes of the memory entries of training rows ``rows``: their weights."""
        if task.sample_weight is not None:
            self.memory_weights_ = task.sample_weight.numpy().astype(np.float64)[rows]

    def _finalize_fit(self, task: _KNNBertTask) -> None:
        if not hasattr(self, "memory_features_"):
            self._memory_from_training_texts(task)
        self._index_memory()

    def _memory_from_training_texts(self, task: _KNNBertTask) -> None:
        """Encode the training texts with the final model (``knn_memory="train"``, or
        ``"queue"`` without a trained queue)."""
        y = task.y.numpy()
        rows = np.arange(len(y))
        if self.knn_memory == "queue" and len(rows) > self.queue_size:
            rng = np.random.default_rng(task.memory_seed)
            rows = np.sort(rng.choice(len(y), self.queue_size, replace=False))
        device = self._inference_device()
        module = self.module_.to(device)
        with eval_mode(module):
            # all the training texts: a view of the tokens, not a copy
            tokens = task.tokens.head(len(y)) if len(rows) == len(y) else task.tokens.subset(rows)
            feats = self._encode(module.embed, tokens, device, "kNN memory")
        self.memory_features_ = feats
        self.memory_targets_ = np.asarray(y[rows], dtype=np.int64)
        self.memory_indices_ = task.row_positions(rows)
        self._set_memory_weights(task, rows)

    def _step(self, batch: Any, task: _KNNBertTask) -> dict[str, Any]:
        trainer, module = task.trainer, self.module_
        device = trainer.device
        labels = task.y[torch.as_tensor(batch.indices)].to(device)
        row_weight = task.row_weights(batch.indices, device)
        features = module.features(batch.inputs)
        logits = module.classifier(features)
        if row_weight is None:
            ce = nn.functional.cross_entropy(logits.float(), labels)
        else:
            ce = (
                nn.functional.cross_entropy(logits.float(), labels, reduction="none") * row_weight
            ).mean()
        w = self.contrastive_weight
        if w > 0 and self.contrastive_keys == "batch":
            cl = batch_contrastive_loss(
                module.project(features),
                labels,
                temperature=self.temperature,
                sample_weight=row_weight,
            )
            return {"loss": w * cl + (1 - w) * ce, "ce": ce.detach(), "contrastive": cl.detach()}
        if not self._uses_queue():
            return {"loss": ce, "ce": ce.detach()}
        anchors = module.project(features)
        # MoCo order: update the key side from the current query weights, contrast with
        # the queue, then enqueue this step's keys.
        task.moco.momentum_update(self.momentum)
        if self.contrastive_keys == "moco":
            cl = self._moco_loss(task, anchors, labels, batch.indices, device, row_weight)
            return {"loss": w * cl + (1 - w) * ce, "ce": ce.detach(), "contrastive": cl.detach()}
        cl = queue_contrastive_loss(
            anchors,
            labels,
            task.moco.queue,
            task.moco.queue_labels,
            n_most_similar=self.n_most_similar,
            n_least_similar=self.n_least_similar,
            temperature=self.temperature,
            sample_weight=row_weight,
        )
        self._enqueue_same_class(task, batch.indices, device)
        return {"loss": w * cl + (1 - w) * ce, "ce": ce.detach(), "contrastive": cl.detach()}

    def _same_class_keys(
        self, task: _KNNBertTask, anchor_rows: np.ndarray, n: int, device: torch.device
    ) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        """Draw ``n`` training texts of each anchor's class (in anchor order) and encode
        them with the key side, yielding ``(rows, keys)`` chunk by chunk."""
        rng = task.trainer.rng
        y = task.y.numpy()
        p = task.member_p
        rows = np.concatenate(
            [
                rng.choice(task.class_members[y[i]], n, p=None if p is None else p[y[i]])
                for i in anchor_rows
            ]
        )
        chunk = 2 * self._train.batch_size
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            yield part, task.moco.keys(task.tokens.collate(part).to(device).inputs)

    def _enqueue_same_class(
        self, task: _KNNBertTask, anchor_rows: np.ndarray, device: torch.device
    ) -> None:
        n = self.n_enqueue_per_anchor
        if n == 0:
            return
        y = task.y.numpy()
        for part, keys in self._same_class_keys(task, anchor_rows, n, device):
            task.moco.enqueue(keys, torch.as_tensor(y[part]), torch.as_tensor(part))

    def _moco_loss(
        self,
        task: _KNNBertTask,
        anchors: torch.Tensor,
        labels: torch.Tensor,
        anchor_rows: np.ndarray,
        device: torch.device,
        row_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """SCL-MoCo's loss: the first of the same-class texts drawn for each anchor, encoded
        by the key side, is its positive; the drawn keys are then enqueued."""
        n = self.n_enqueue_per_anchor
        m = max(n, 1)  # one positive per anchor even when nothing is enqueued
        parts, chunks = zip(*self._same_class_keys(task, anchor_rows, m, device))
        rows, keys = np.concatenate(parts), torch.cat(chunks)
        y = task.y.numpy()
        moco = task.moco
        positives = keys.view(len(anchor_rows), m, -1)[:, 0]
        loss = moco_contrastive_loss(
            anchors,
            labels,
            positives,
            moco.queue,
            moco.queue_labels,
            temperature=self.temperature,
            sample_weight=row_weight,
        )
        if n > 0:
            moco.enqueue(keys, torch.as_tensor(y[rows]), torch.as_tensor(rows))
        return loss

    # Inference --------------------------------------------------------------------------

    def _logits_and_embeddings(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        out = self._forward_all(X, "logits_and_embed", "predicting")
        n_classes = len(self.classes_)
        if out.shape[0] == 0:
            return np.zeros((0, n_classes), np.float32), np.zeros((0, 0), np.float32)
        return out[:, :n_classes], out[:, n_classes:]

    def _index_memory(self) -> None:
        """(Re)build the search structure over ``memory_features_`` (after ``fit``,
        unpickling and loading; never during ``predict``, which leaves the model as is)."""
        self._memory_index = InnerProductIndex(self.memory_features_, method=self.search)

    def _search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Cosine top-``k`` in the memory (similarities, rows of memory)."""
        index = self.__dict__.get("_memory_index")
        if index is None or index.requested_method != self.search:
            # search changed by set_params after fit: a one-off structure for this call
            index = InnerProductIndex(self.memory_features_, method=self.search)
        norms = np.linalg.norm(queries, axis=1, keepdims=True)
        return index.search(queries / np.maximum(norms, 1e-12), k)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_memory_index", None)  # faiss indexes do not pickle; rebuilt on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if "memory_features_" in self.__dict__:
            self._index_memory()

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        super()._load_state(attributes, arrays)
        if "memory_features_" in self.__dict__:
            self._index_memory()

    def _votes(self, embeddings: np.ndarray) -> np.ndarray:
        _, rows = self._search(embeddings, self.n_neighbors)
        return self._vote_shares(rows)

    def _vote_shares(self, rows: np.ndarray) -> np.ndarray:
        """Each class's share of the votes of the memory entries ``rows`` (one row of
        neighbours per text)."""
        targets = self.memory_targets_[rows]
        n_classes = len(self.classes_)
        votes = np.zeros((len(rows), n_classes))
        at = (np.repeat(np.arange(len(rows)), rows.shape[1]), targets.ravel())
        weights = self.__dict__.get("memory_weights_")
        if weights is None:
            np.add.at(votes, at, 1.0)
            return votes / rows.shape[1]
        # sample weights: each neighbour votes its text's weight, out of the k's total
        np.add.at(votes, at, weights[rows].ravel())
        return votes / weights[rows].sum(axis=1, keepdims=True)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities: ``knn_weight * votes / k + (1 - knn_weight) * softmax``.

        After a fit with unequal ``sample_weight``, the votes are the neighbours' weights
        over their total instead of counts over ``k``.

        Parameters
        ----------
        X : sequence of str or of (str, str)

        Returns
        -------
        proba : numpy.ndarray of shape (n_samples, n_classes)
            Rows sum to 1; columns follow ``classes_``.
        """
        check_is_fitted(self, "memory_features_")
        logits, emb = self._logits_and_embeddings(X)
        phi = float(self.knn_weight)
        proba = np.zeros(logits.shape, dtype=np.float64)
        if len(logits) == 0:
            return proba
        if phi < 1:
            proba += (1 - phi) * softmax(logits)
        if phi > 0:
            proba += phi * self._votes(emb)
        return proba

    def decision_function(self, X: Any) -> np.ndarray:
        """The mixed scores of :meth:`predict_proba` (their argmax is :meth:`predict`).

        Parameters
        ----------
        X : sequence of str or of (str, str)

        Returns
        -------
        scores : numpy.ndarray of shape (n_samples, n_classes)
        """
        return self.predict_proba(X)

    def explain(self, X: Any, k: int = 5) -> list[list[ClassExplanation]]:
        """Why each text got its most probable classes: the linear classifier's
        probability, the kNN vote, and the voting neighbours (training texts) of each.

        Parameters
        ----------
        X : sequence of str or of (str, str)
        k : int, default=5
            Classes explained per text (at most the number of classes), most probable
            first, ties in the order of ``classes_``.

        Returns
        -------
        list of list of ClassExplanation
            Per text, one :class:`ClassExplanation` per class; its ``score`` is the
            class's :meth:`predict_proba`. The neighbours of all classes together are
            the ``n_neighbors`` of :meth:`kneighbors`; training texts are given by their
            row in ``fit``'s ``X`` (the model does not keep the texts).
        """
        check_is_fitted(self, "memory_features_")
        k = check_explain_k(k, len(self.classes_))
        logits, emb = self._logits_and_embeddings(X)
        if len(logits) == 0:
            return []
        sims, rows = self._search(emb, self.n_neighbors)
        votes = self._vote_shares(rows)
        classifier = softmax(logits)
        phi = float(self.knn_weight)
        proba = phi * votes + (1 - phi) * classifier  # as predict_proba
        weights = self.__dict__.get("memory_weights_")
        out = []
        for i in range(len(rows)):
            targets = self.memory_targets_[rows[i]]
            row = []
            for c in np.argsort(-proba[i], kind="stable")[:k]:
                neighbors = tuple(
                    Neighbor(
                        int(self.memory_indices_[r]),
                        float(sim),
                        1.0 if weights is None else float(weights[r]),
                    )
                    for r, sim, t in zip(rows[i], sims[i], targets)
                    if t == c
                )
                row.append(
                    ClassExplanation(
                        self.classes_[c],
                        float(proba[i, c]),
                        float(votes[i, c]),
                        float(classifier[i, c]),
                        neighbors,
                    )
                )
            out.append(row)
        return out

    def kneighbors(
        self,
        X: Any,
        n_neighbors: int | None = None,
        return_distance: bool = True,
        *,
        return_labels: bool = False,
    ) -> Any:
        """The nearest memory entries of each text, to see why the kNN vote decided.

        Parameters
        ----------
        X : sequence of str or of (str, str)
        n_neighbors : int or None, default=None
            Neighbours per text; None: ``n_neighbors`` (capped at the memory size).
        return_distance : bool, default=True
            Also return the cosine similarities (larger is closer; not distances).
        return_labels : bool, default=False
            Also return the class labels of the neighbours.

        Returns
        -------
        similarities : numpy.ndarray of float32 of shape (n_samples, n_neighbors)
            Cosine similarities, decreasing along each row (if ``return_distance``).
        indices : numpy.ndarray of int64 of shape (n_samples, n_neighbors)
            Training rows (positions in the ``X`` given to ``fit``). With the queue as
            memory, a training text may appear more than once.
        labels : numpy.ndarray of shape (n_samples, n_neighbors)
            Their classes (if ``return_labels``).
        """
        check_is_fitted(self, "memory_features_")
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        k = check_explain_k(k, None, name="n_neighbors")  # bools refused, as in explain
        emb = self._embeddings(X)
        if len(emb) == 0:
            k = min(k, len(self.memory_features_))
            sims, rows = np.zeros((0, k), np.float32), np.zeros((0, k), np.int64)
        else:
            sims, rows = self._search(emb, k)
        out: list[np.ndarray] = [sims] if return_distance else []
        out.append(self.memory_indices_[rows])
        if return_labels:
            out.append(self.classes_[self.memory_targets_[rows]])
        return out[0] if len(out) == 1 else tuple(out)
