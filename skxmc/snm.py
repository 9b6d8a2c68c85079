"""SNMClassifier: an embedding model for extreme multi-label classification trained with
top-k stochastic negative mining (Reddi et al., AISTATS 2019)."""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Callable, Iterator
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._optional import require_extra

with require_extra("text", "SNMClassifier"):
    import torch
    import torch.nn.functional as F

from ._base import THRESHOLD_CONSTRAINT, MultiLabelRankerMixin, check_not_raw_text
from ._compat import Interval, StrOptions, _fit_context, validate_data
from ._memory import check_snm_fit
from ._ranking import topk_to_csr, truth_hits
from ._sample_weight import drop_zero_weight_samples, loss_weights
from ._search import SEARCH_METHODS, InnerProductIndex, resolve_search
from .io import PersistenceMixin, persistent
from .labels import LabelSpace, encode_target
from .losses import (
    MARGIN_FUNCTIONS,
    ordered_weighted_loss,
    pad_positives,
    sample_shared_negatives,
    top_k_weights,
)
from .text._config import TrainingConfig
from .text._device import inference_device, resolve_device
from .text._estimator import (
    NeuralEstimatorMixin,
    fill_engine_docs,
    validation_callbacks,
    validation_rows,
)
from .text._optim import ParamGroup
from .text._seed import seed_everything
from .text._training import Trainer
from .text._weights import load_module_weights, module_on_cpu, save_module_weights

__all__ = ["SNMClassifier", "SNMModule", "csr_inputs"]

logger = logging.getLogger(__name__)

_WEIGHTS = "model.safetensors"
_EMBED_ROWS = 4096  # rows per forward pass (class-centroid initialisation, prediction)
# Scores held at once by a threshold scan (float32, 64 MB) whatever the number of labels.
_THRESHOLD_BLOCK = 1 << 24
# Platt scaling of predict_proba: training rows and best-ranked labels per row it reads.
_CALIBRATION_ROWS = 4096
_CALIBRATION_K = 20


class SNMModule(torch.nn.Module):
    """The paper's network: ``x -> Linear(d, hidden) -> ReLU -> Linear(hidden, embed) ->
    L2-normalise``, and one L2-normalised ``embed``-dimensional vector per class; the score
    of a class is the inner product (a cosine).

    With sparse input (``sparse_input=True``) the first layer's weight is an
    ``nn.Embedding(sparse=True)`` table: a batch gathers the rows of its distinct features
    and sums them with ``F.embedding_bag(mode="sum", per_sample_weights=values)``, so the
    gradient is sparse with one row per distinct feature of the batch (never
    ``n_features x hidden``) and a sparse optimiser updates only those rows. The class
    vectors are an ``nn.Embedding(sparse=True)`` for the same reason.

    Parameters
    ----------
    n_features, n_labels, hidden_size, embedding_size : int
        Shapes.
    sparse_input : bool
        Sparse first layer (CSR input) instead of ``nn.Linear`` (dense input).
    """

    def __init__(
        self,
        n_features: int,
        n_labels: int,
        hidden_size: int,
        embedding_size: int,
        sparse_input: bool,
    ) -> None:
        super().__init__()
        self.sparse_input = sparse_input
        if sparse_input:
            self.input = torch.nn.Embedding(n_features, hidden_size, sparse=True)
            # N(0, 1) rows (nn.EmbeddingBag's initialisation): unit-norm rows of X give
            # hidden pre-activations of unit variance.
            self.input_bias = torch.nn.Parameter(torch.zeros(hidden_size))
        else:
            self.input = torch.nn.Linear(n_features, hidden_size)
            self.input_bias = None
        self.output = torch.nn.Linear(hidden_size, embedding_size)
        self.labels = torch.nn.Embedding(n_labels, embedding_size, sparse=True)
        # Unit-norm-scale rows: Adam's per-coordinate steps then turn the (normalised)
        # class vectors at a useful rate; N(0, 1) rows of norm sqrt(embedding_size) barely move.
        torch.nn.init.normal_(self.labels.weight, std=1.0 / math.sqrt(embedding_size))

    def embed(self, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Normalised input embeddings ``(n, embed)``; ``inputs`` is what
        :func:`csr_inputs` returns for sparse input, ``(X,)`` for dense input."""
        if self.sparse_input:
            features, local, offsets, values = inputs
            rows = self.input(features)  # the batch's distinct features only
            h = F.embedding_bag(local, rows, offsets, mode="sum", per_sample_weights=values)
            h = h + self.input_bias
        else:
            h = self.input(inputs[0])
        return F.normalize(self.output(torch.relu(h)), dim=-1)

    def label_vectors(self, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Normalised class vectors of ``labels`` (any shape), or of every class."""
        w = self.labels.weight if labels is None else self.labels(labels)
        return F.normalize(w, dim=-1)


def _check_not_collapsed(module: SNMModule, inputs: tuple, est: Any) -> None:
    """Warn when training left every sample on the zero vector (all ReLUs dead): the
    loss stays finite, so nothing else notices, and every score is 0 (e.g. a learning
    rate of 1e9)."""
    with torch.inference_mode():
        norms = module.embed(inputs).float().norm(dim=1)
    if not torch.isfinite(norms).all():
        raise FloatingPointError(
            f"SNMClassifier training diverged: the embeddings hold NaN or infinity; lower "
            f"training.learning_rate (now {est._train.learning_rate}) or input_learning_rate "
            f"(now {est.input_learning_rate})."
        )
    if len(norms) and bool((norms < 1e-6).all()):
        warnings.warn(
            f"SNMClassifier training collapsed: every training sample maps to the zero "
            f"vector, so every label scores 0. Lower training.learning_rate (now "
            f"{est._train.learning_rate}) or input_learning_rate (now "
            f"{est.input_learning_rate}).",
            UserWarning,
            stacklevel=3,
        )


def csr_inputs(X: sp.csr_matrix, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
    """A CSR batch as ``(features, local, offsets, values)`` tensors for
    :meth:`SNMModule.embed`: the distinct feature indices, each non-zero's position among
    them, the row offsets and the values."""
    features, local = np.unique(X.indices, return_inverse=True)

    def as_tensor(a: np.ndarray, dtype: type) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype)).to(device)

    return (
        as_tensor(features, np.int64),
        as_tensor(local.ravel(), np.int64),
        as_tensor(X.indptr[:-1], np.int64),
        as_tensor(X.data, np.float32),
    )


@persistent
@fill_engine_docs
class SNMClassifier(
    NeuralEstimatorMixin, MultiLabelRankerMixin, PersistenceMixin, ClassifierMixin, BaseEstimator
):
    """Embedding model trained with top-k stochastic negative mining (SNM).

    The model of Reddi et al. (2019), "Stochastic Negative Mining for Learning with Large
    Output Spaces": features ``x`` go through ``Linear(d, hidden_size) -> ReLU ->
    Linear(hidden_size, embedding_size) -> L2-normalise``; every class has a learned
    L2-normalised vector of the same size, and the score of a class is the inner product.
    Training never scores all classes: for each batch, ``n_sampled`` (``B``) candidate
    labels are drawn uniformly, each example's positives are removed from its candidates,
    and an ordered weighted loss (BOWL hinge by default) is applied to the
    ``n_hard_negatives`` (``k``) highest-scoring of them (top-k SNM), or to all of them
    with equal weights (``negative_sampling="uniform"``, plain negative sampling, the
    paper's baseline). Prediction is an exact top-k search over all class vectors, in
    blocks (a dense ``(n_samples, n_labels)`` score matrix is never held).

    Sparse input (TF-IDF, bag of words) makes the first layer a sparse embedding table
    summed per row (``F.embedding_bag(mode="sum")`` with the CSR values as weights) and
    trained by plain SGD with a large learning rate, as in the paper, so each step costs
    the batch's non-zeros, not ``n_features x hidden_size``; class vectors are a sparse
    table trained by SparseAdam (only the sampled and positive rows). Dense input uses an
    ``nn.Linear`` trained by Adam. Training runs through
    :class:`skxmc.text.Trainer` (progress bar, Ctrl-C stops with a usable model,
    checkpoints).

    Parameters
    ----------
    negative_sampling : {"snm", "uniform"}, default="snm"
        ``"snm"``: the loss weighs the ``n_hard_negatives`` hardest of the sampled
        negatives, each ``1 / n_hard_negatives`` (top-k SNM). ``"uniform"``: every sampled
        negative weighs ``1 / n`` (plain negative sampling with the same ``B``).
    n_sampled : int or "auto", default="auto"
        ``B``, uniformly drawn candidate labels per batch (one pool shared by the batch's
        examples, each example's own positives excluded). ``"auto"``: the paper's
        settings, 1024 for label sets up to 100,000 labels and 32768 above; capped at
        the number of labels (then every label is a candidate).
    n_hard_negatives : int, default=1
        ``k`` of top-k SNM (the paper's best setting is 1). Must not exceed
        ``n_sampled``.
    negative_weight : {"mean", "paper"}, default="mean"
        Weight of each of the ``k`` hardest sampled negatives in the loss
        (``negative_sampling="snm"`` only). ``"mean"``: ``1 / k``. ``"paper"``:
        ``(L - 1) / (k B)`` (Reddi et al., 2019), so that the ``B`` sampled candidates
        stand for all ``L - 1`` negatives, which weighs the negatives ``(L - 1) / B`` times
        more against the positives. Keep ``"mean"``: on dev splits the paper's weighting
        scored far lower with this network and its optimisers (the SNM benchmarks page).
    loss : {"bowl", "powl"}, default="bowl"
        Binary OWL ``mean_pos phi(s_y) + sum_j theta_j phi(-s_[j])`` or pairwise OWL
        ``mean_pos sum_j theta_j phi(s_y - s_[j])`` (see
        :func:`skxmc.losses.ordered_weighted_loss`).
    margin : {"hinge", "squared_hinge", "logistic", "exponential", "ramp"}, default="hinge"
        The margin function ``phi``.
    rho : float, default=1.0
        Width of the ramp margin (``margin="ramp"`` only).
    scale : float, default=1.0
        Scores (cosines in ``[-1, 1]``) are multiplied by ``scale`` in the loss.
    label_init : {"centroid", "random"}, default="centroid"
        Starting class vectors. ``"centroid"``: the normalised mean of the initial
        network's embeddings of the class's training examples (one forward pass over
        ``X`` before training; classes without examples start random). ``"random"``:
        Gaussian rows. Random vectors of tail classes (seen once or twice per epoch) barely
        move, so the hardest sampled negative is an arbitrary class and top-k mining with
        a small ``k`` learns noise. Keep ``"centroid"`` for label sets with a long tail
        (see the SNM page of the user guide).
    hidden_size : int, default=512
        Width of the hidden layer.
    embedding_size : int, default=512
        Size of the input and class embeddings.
    input_learning_rate : float, default=1.0
        Per-example learning rate of plain SGD on the sparse first layer (sparse input
        only): the step size is ``input_learning_rate * batch_size``, as the loss is a
        batch mean. This is the paper's "SGD with a large learning rate" for embedding
        layers; SparseAdam costs about 20 times more per step on 200,000 TF-IDF features.
    label_learning_rate : float or None, default=None
        Learning rate of SparseAdam on the class vectors; None: ``learning_rate``.
    top_k : int, default=10
        Labels returned per sample by ``predict`` and ``predict_topk`` and scored by CSR
        ``decision_function`` / ``predict_proba`` (dense outputs score every label);
        values above the number of labels are clipped with a warning.
    {ranker_output_params}
    search : {"auto", "exact", "approximate"}, default="auto"
        How ``predict*`` find each sample's best labels. ``"exact"``: every class vector,
        in blocks (never a dense ``(n_samples, n_labels)``). ``"approximate"``: a faiss
        inverted-file index over the class vectors, built after ``fit`` / loading
        (``pip install faiss-cpu``); each sample scans a fraction of the labels.
        ``"auto"``: approximate from 200,000 labels on when faiss is installed, exact
        below, where exact search is as fast (the kNN search benchmarks page).
    {training_params}

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Label identifiers; column ``j`` of every output matrix is ``classes_[j]``.
    target_type_ : str
        The kind of ``Y`` seen in ``fit`` (see :class:`XRLinearClassifier`).
    module_ : SNMModule
        The trained network and class vectors (on CPU after unpickling / loading).
    n_features_in_ : int
        Number of features seen in ``fit``.
    sparse_input_ : bool
        Whether ``fit`` saw sparse input (sparse first layer).
    n_sampled_ : int
        The candidate pool size used (``n_sampled`` resolved and capped).
    proba_calibration_ : ndarray of shape (2,)
        ``(a, b)`` of ``predict_proba = sigmoid(a * cosine + b)``: Platt scaling fitted
        at the end of ``fit`` on up to 4,096 training rows (their 20 best labels and their
        positives), so that ``threshold`` means about what it means for XR-Linear.
    {fit_attributes}

    See Also
    --------
    skxmc.losses.ordered_weighted_loss : the loss.
    skxmc.losses.sample_shared_negatives : the candidate sampler.
    XRLinearClassifier : a tree-based linear model on the same features.

    Notes
    -----
    The negatives of a batch come from one uniformly drawn pool (as in TensorFlow's sampled
    losses, and one ``(batch, d) @ (d, B)`` product) rather than ``B`` independent draws per
    example (``batch * B`` gathered class vectors); each example still sees ``B`` uniform
    candidates minus its positives. :func:`skxmc.losses.sample_negatives` draws per
    example for models where that cost is affordable.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc import SNMClassifier
    >>> from skxmc.text import TrainingConfig
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 8)).astype(np.float32)
    >>> labels = [[int(x[0] > 0), 2 + int(x[1] > 0)] for x in X]
    >>> training = TrainingConfig(max_epochs=20, batch_size=32, device="cpu")
    >>> clf = SNMClassifier(hidden_size=32, embedding_size=16, n_sampled=4, top_k=2,
    ...                     training=training).fit(X, labels)
    >>> clf.score(X, labels) > 0.9
    True
    >>> labels, scores = clf.predict_topk(X[:2])
    >>> labels.shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        "training": [TrainingConfig, None],
        "negative_sampling": [StrOptions({"snm", "uniform"})],
        "n_sampled": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_hard_negatives": [Interval(Integral, 1, None, closed="left")],
        "negative_weight": [StrOptions({"mean", "paper"})],
        "loss": [StrOptions({"bowl", "powl"})],
        "margin": [StrOptions(set(MARGIN_FUNCTIONS))],
        "rho": [Interval(Real, 0, None, closed="neither")],
        "scale": [Interval(Real, 0, None, closed="neither")],
        "label_init": [StrOptions({"centroid", "random"})],
        "hidden_size": [Interval(Integral, 1, None, closed="left")],
        "embedding_size": [Interval(Integral, 1, None, closed="left")],
        "input_learning_rate": [Interval(Real, 0, None, closed="neither")],
        "label_learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "top_k": [Interval(Integral, 1, None, closed="left")],
        "threshold": THRESHOLD_CONSTRAINT,
        "classes": ["array-like", None],
        "sparse_output": ["boolean"],
        "search": [StrOptions(set(SEARCH_METHODS))],
    }

    # Predictions of any top_k come from the same training.
    _fingerprint_exclude = ("top_k", "threshold")
    _training_defaults = {
        "batch_size": 256,
        "max_epochs": 10,
        "learning_rate": 1e-3,
        "weight_decay": 0.0,
        "warmup": 0.0,
    }
    # The network is small and trains on CPU in float32, epoch by epoch.
    _training_unsupported = ("max_steps", "head_learning_rate", "mixed_precision")

    def __init__(
        self,
        *,
        negative_sampling: str = "snm",
        n_sampled: int | str = "auto",
        n_hard_negatives: int = 1,
        negative_weight: str = "mean",
        loss: str = "bowl",
        margin: str = "hinge",
        rho: float = 1.0,
        scale: float = 1.0,
        label_init: str = "centroid",
        hidden_size: int = 512,
        embedding_size: int = 512,
        input_learning_rate: float = 1.0,
        label_learning_rate: float | None = None,
        top_k: int = 10,
        threshold: Any = "auto",
        classes: Any = None,
        sparse_output: bool = False,
        search: str = "auto",
        training: TrainingConfig | None = None,
    ) -> None:
        self.negative_sampling = negative_sampling
        self.n_sampled = n_sampled
        self.n_hard_negatives = n_hard_negatives
        self.negative_weight = negative_weight
        self.loss = loss
        self.margin = margin
        self.rho = rho
        self.scale = scale
        self.label_init = label_init
        self.hidden_size = hidden_size
        self.embedding_size = embedding_size
        self.input_learning_rate = input_learning_rate
        self.label_learning_rate = label_learning_rate
        self.top_k = top_k
        self.threshold = threshold
        self.classes = classes
        self.sparse_output = sparse_output
        self.search = search
        self.training = training

    # ------------------------------------------------------------------ fit

    def _resolve_n_sampled(self, n_labels: int) -> int:
        b = self.n_sampled
        if b == "auto":
            b = 1024 if n_labels <= 100_000 else 32768
        if self.n_hard_negatives > b:
            raise ValueError(
                f"n_hard_negatives={self.n_hard_negatives} exceeds n_sampled={b}: top-k "
                f"negative mining keeps k of the B sampled candidates, so k <= B."
            )
        return int(min(b, n_labels))

    def _build_module(self) -> SNMModule:
        return SNMModule(
            self.n_features_in_,
            len(self.classes_),
            self.hidden_size,
            self.embedding_size,
            self.sparse_input_,
        )

    def _param_groups(self, module: SNMModule) -> list[ParamGroup]:
        label_lr = (
            self._train.learning_rate
            if self.label_learning_rate is None
            else self.label_learning_rate
        )
        dense = [
            (n, p)
            for n, p in module.named_parameters()
            if not n.startswith("labels.") and not (self.sparse_input_ and n == "input.weight")
        ]
        groups = [self._main_param_group("dense", dense, schedule="constant")]
        if self.sparse_input_:
            groups.append(
                ParamGroup(
                    "input",
                    [("input.weight", module.input.weight)],
                    lr=self.input_learning_rate * self._train.batch_size,
                    optimizer="sgd",
                    schedule="constant",
                )
            )
        groups.append(
            ParamGroup(
                "labels",
                [("labels.weight", module.labels.weight)],
                lr=label_lr,
                optimizer="sparse_adam",
                schedule="constant",
            )
        )
        return groups

    def _inputs(self, X: Any, device: torch.device) -> tuple[torch.Tensor, ...]:
        if self.sparse_input_:
            return csr_inputs(sp.csr_matrix(X, dtype=np.float32), device)
        dense = X.toarray() if sp.issparse(X) else X
        return (torch.as_tensor(np.asarray(dense, dtype=np.float32)).to(device),)

    def _init_label_centroids(
        self, X: Any, Y: sp.csr_matrix, sample_weight: np.ndarray | None = None
    ) -> None:
        """Point every class vector at the mean initial embedding of its examples
        (weighted by ``sample_weight``), keeping the rows' random norms (the scale Adam's
        steps are tuned to)."""
        module = self.module_
        with torch.inference_mode():
            H = torch.cat(
                [
                    module.embed(self._inputs(X[i : i + _EMBED_ROWS], "cpu"))
                    for i in range(0, X.shape[0], _EMBED_ROWS)
                ]
            ).numpy()
        if sample_weight is not None:
            H = H * sample_weight[:, None].astype(H.dtype)
        centroids = torch.from_numpy(np.asarray(Y.T.tocsr() @ H, dtype=np.float32))
        norms = centroids.norm(dim=1, keepdim=True)
        has_examples = norms.squeeze(1) > 0
        with torch.no_grad():
            weight = module.labels.weight
            scale = weight[has_examples].norm(dim=1, keepdim=True)
            weight[has_examples] = centroids[has_examples] / norms[has_examples] * scale

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, Y: Any, sample_weight: Any = None) -> SNMClassifier:
        """Train the network and the class vectors.

        Ctrl-C stops training with a :class:`~skxmc.text.TrainingInterruptedWarning` and
        leaves a usable model.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
            Features; sparse input (TF-IDF, bag of words) trains a sparse first layer.
        Y : sparse matrix, ndarray or sequence of label collections
            Labels: a 0/1 indicator ``(n_samples, n_labels)`` or one collection of labels
            per sample. Samples without labels are allowed.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights (finite, >= 0): each sample's loss is multiplied by its
            weight, the weights scaled to mean 1, so that an integer weight counts as
            repeated samples in expectation (:func:`skxmc._sample_weight.loss_weights`);
            a sample of weight 0 is dropped before anything else. An epoch still passes
            over each kept sample once. In a :class:`~sklearn.pipeline.Pipeline` with
            metadata routing, request it with ``set_fit_request(sample_weight=True)``.

        Returns
        -------
        self : SNMClassifier
        """
        X, Y_csr, sample_weight = self._validate_fit_data(X, Y, sample_weight)
        n_labels = Y_csr.shape[1]
        self.n_sampled_ = self._resolve_n_sampled(n_labels)
        self._check_fit_memory(X, Y_csr)
        rs = check_random_state(self._train.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        train, valid = validation_rows(
            X.shape[0], self._train.validation_fraction, self._train.n_iter_no_change, rs
        )
        callbacks = []
        if valid is not None:
            callbacks = validation_callbacks(
                self._precision_at_1(X[valid], Y_csr[valid]), self._train.n_iter_no_change
            )
            X, Y_csr = X[train], Y_csr[train]
            sample_weight = None if sample_weight is None else sample_weight[train]
        seed_everything(seed)  # initial weights
        self.module_ = self._build_module()
        if self.label_init == "centroid":
            self._init_label_centroids(X, Y_csr, sample_weight)
        weights = self._negative_weights(n_labels)
        module, n = self.module_, X.shape[0]
        trainer = Trainer(
            module,
            self._param_groups(module),
            n_epochs=self._train.max_epochs,
            warmup=self._train.warmup,
            max_grad_norm=None,
            random_state=seed,
            fit_data=(X, Y_csr, self.classes_),
            # Sampled-softmax scores and SparseAdam tables stay in float32.
            **{**self._engine_params(callbacks), "mixed_precision": "no"},
        )
        step = self._loss_step(trainer, X, Y_csr, weights, loss_weights(sample_weight))

        def batches(epoch: int, rng: np.random.Generator) -> list[np.ndarray]:
            order = rng.permutation(n)
            return [
                order[i : i + self._train.batch_size] for i in range(0, n, self._train.batch_size)
            ]

        result = trainer.fit(step, batches)
        module.eval()
        _check_not_collapsed(module, self._inputs(X[:_EMBED_ROWS], trainer.device), self)
        self._index_labels()
        self.proba_calibration_ = self._fit_proba_calibration(X, Y_csr, seed, sample_weight)
        self._set_fit_result(result)
        return self

    def _validate_fit_data(
        self, X: Any, Y: Any, sample_weight: Any
    ) -> tuple[Any, sp.csr_matrix, np.ndarray | None]:
        """``fit``'s checked ``X`` (CSR float32 or dense), ``Y`` as CSR and the weights,
        rows of weight 0 dropped; sets ``sparse_input_``, ``classes_``, ``target_type_``."""
        check_not_raw_text(X, type(self).__name__)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=True)
        if not np.all(np.isfinite(X.data if sp.issparse(X) else X)):
            raise ValueError("X contains NaN or infinity.")
        self.sparse_input_ = bool(sp.issparse(X))
        if self.sparse_input_:
            X = sp.csr_matrix(X, dtype=np.float32)
        sample_weight, X, Y = drop_zero_weight_samples(sample_weight, X.shape[0], X, Y)
        Y_csr, self.classes_, self.target_type_ = encode_target(
            Y, classes=self.classes, name="Y", n_samples=X.shape[0]
        )
        if Y_csr.shape[1] == 0 or Y_csr.nnz == 0:
            raise ValueError("Y has no labels at all; SNMClassifier needs at least one positive.")
        return X, Y_csr, sample_weight

    def _check_fit_memory(self, X: Any, Y: sp.csr_matrix) -> None:
        """Before any weight exists: sizes that cannot fit fail now, naming the parameter."""
        check_snm_fit(
            n_samples=X.shape[0],
            n_features=X.shape[1],
            n_labels=Y.shape[1],
            max_positives=int(np.diff(Y.indptr).max()),
            hidden_size=self.hidden_size,
            embedding_size=self.embedding_size,
            batch_size=self._train.batch_size,
            n_sampled=self.n_sampled_,
            sparse_input=self.sparse_input_,
            centroid_init=self.label_init == "centroid",
            device=resolve_device(self._train.device),
        )

    def _negative_weights(self, n_labels: int) -> torch.Tensor | None:
        """The ordered weights of the sampled negatives (``negative_weight``); None for
        ``negative_sampling="uniform"`` (every candidate weighs the same)."""
        k = self.n_hard_negatives
        if self.negative_sampling != "snm":
            return None
        if self.negative_weight == "paper":
            return top_k_weights(k, n_classes=n_labels, n_sampled=self.n_sampled_)
        return top_k_weights(k)

    def _loss_step(
        self,
        trainer: Trainer,
        X: Any,
        Y: sp.csr_matrix,
        weights: torch.Tensor | None,
        row_weight: np.ndarray | None,
    ) -> Callable[[np.ndarray], torch.Tensor]:
        """``step(rows)``: the loss of one batch of training rows. Positives against one
        shared pool of ``n_sampled_`` candidates drawn from ``trainer.rng``, weighed by
        ``weights`` (ordered) and ``row_weight`` (per row, mean 1; None: unweighted)."""
        module, device, n_labels = self.module_, trainer.device, Y.shape[1]
        theta = None if weights is None else weights.to(device)
        if row_weight is not None:
            row_weight = torch.as_tensor(row_weight, dtype=torch.float32)

        def step(idx: np.ndarray) -> torch.Tensor:
            h = module.embed(self._inputs(X[idx], device))
            Y_b = Y[idx]
            g = torch.Generator(device=device).manual_seed(int(trainer.rng.integers(1 << 62)))
            candidates, is_pos = sample_shared_negatives(
                Y_b, n_labels, self.n_sampled_, generator=g, device=device
            )
            padded, _ = pad_positives(Y_b, n_labels, device=device)
            pos_valid = padded < n_labels
            pos_vec = module.label_vectors(padded.clamp(max=n_labels - 1))
            pos_scores = (h.unsqueeze(1) * pos_vec).sum(-1)
            neg_scores = h @ module.label_vectors(candidates).T
            scores = torch.cat([pos_scores, neg_scores], dim=1) * self.scale
            targets = torch.cat([torch.ones_like(pos_valid), torch.zeros_like(is_pos)], dim=1)
            mask = torch.cat([pos_valid, ~is_pos], dim=1)
            loss = ordered_weighted_loss(
                scores,
                targets,
                weights=theta,
                margin=self.margin,
                form=self.loss,
                rho=self.rho,
                mask=mask,
                reduction="mean" if row_weight is None else "none",
            )
            return loss if row_weight is None else (loss * row_weight[idx].to(device)).mean()

        return step

    def _precision_at_1(self, X: Any, Y: sp.csr_matrix) -> Any:
        """``scoring(trainer)``: the share of ``X``'s rows whose best-scored label (exact
        inner products, in row batches) is one of their labels in ``Y``."""
        Y = sp.csr_matrix(Y, copy=True)
        Y.eliminate_zeros()
        Y.sort_indices()  # what truth_hits reads

        def scoring(trainer: Any) -> float:
            module, best = self.module_, []
            V = module.label_vectors()
            for lo in range(0, X.shape[0], self._train.batch_size):
                h = module.embed(self._inputs(X[lo : lo + self._train.batch_size], trainer.device))
                best.append(np.asarray((h @ V.T).argmax(dim=1).cpu(), dtype=np.int64))
            top = np.concatenate(best)[:, None] if best else np.zeros((0, 1), np.int64)
            return float(truth_hits(top, Y).mean()) if len(top) else 0.0

        return scoring

    # -------------------------------------------------------------- predict

    def _validate_X(self, X: Any) -> Any:
        check_is_fitted(self, "module_")
        check_not_raw_text(X, type(self).__name__)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float32, reset=False)
        if not np.all(np.isfinite(X.data if sp.issparse(X) else X)):
            raise ValueError("X contains NaN or infinity.")
        return sp.csr_matrix(X) if sp.issparse(X) else X

    def _index_labels(self) -> None:
        """Build the approximate label index when ``search`` asks for one (after ``fit``,
        unpickling and loading; never during ``predict``). The exact search needs none."""
        self.__dict__.pop("_label_index", None)
        module = self.__dict__.get("module_")
        if module is None or resolve_search(self.search, len(self.classes_)) != "approximate":
            return
        with torch.inference_mode():
            self._label_index = InnerProductIndex(module.label_vectors(), method=self.search)

    def _embedded_blocks(self, X: Any, device: Any) -> Iterator[tuple[int, torch.Tensor]]:
        """``(start, embeddings)`` of the rows of ``X`` in blocks, in inference mode (the
        caller holds ``torch.inference_mode()``); the module's mode is restored after."""
        module = self.module_.to(device)
        was_training = module.training
        module.eval()
        try:
            for start in range(0, X.shape[0], _EMBED_ROWS):
                yield start, module.embed(self._inputs(X[start : start + _EMBED_ROWS], device))
        finally:
            module.train(was_training)

    def _topk(
        self, X: Any, k: int, columns: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k column indices and scores over the classes (``search``), in row blocks;
        with ``columns``, an exact search among those classes only (``k`` at most their
        number)."""
        n = X.shape[0]
        idx_out = np.empty((n, k), dtype=np.int64)
        score_out = np.empty((n, k), dtype=np.float32)
        device = inference_device(self._train.device)
        module = self.module_.to(device)
        with torch.inference_mode():
            if columns is not None:
                # A subset has no prebuilt index: its class vectors are searched exactly.
                selected = torch.as_tensor(columns, dtype=torch.long, device=device)
                vectors = module.label_vectors(selected)
                index = InnerProductIndex(vectors, method="exact", device=device)
            else:
                index = self.__dict__.get("_label_index")
                if index is None or index.requested_method != self.search:
                    vectors = module.label_vectors()
                    index = InnerProductIndex(vectors, method=self.search, device=device)
            for start, h in self._embedded_blocks(X, device):
                vals, idx = index.search(h, k)
                idx_out[start : start + len(h)] = idx if columns is None else columns[idx]
                score_out[start : start + len(h)] = vals
        return idx_out, score_out

    # Cosine scores: -1 is the lowest a label can get.
    _score_floor = -1.0

    def _rank_scores(
        self, X: Any, k: int | None, labels: np.ndarray | None = None
    ) -> sp.csr_matrix:
        """Cosines of the ``k`` best labels of each row, CSR ``(n_samples, n_labels)``;
        ``k=None``: every label for dense outputs, ``top_k`` for CSR ones. With ``labels``
        (columns): an exact search among those labels, all of them when ``k`` is None."""
        X = self._validate_X(X)
        if k is None:
            if labels is not None:
                k = len(labels)
            else:
                k = len(self.classes_) if self._dense_output() else self._resolve_k(None)
        idx, vals = self._topk(X, k, labels)
        return topk_to_csr(idx, vals, len(self.classes_))

    def _fit_proba_calibration(
        self, X: Any, Y: sp.csr_matrix, seed: int, sample_weight: np.ndarray | None = None
    ) -> np.ndarray:
        """Platt scaling of the cosines: ``(a, b)`` of ``sigmoid(a * cosine + b)``, fitted by
        logistic regression on whether each of the best-ranked labels (and each positive)
        of up to ``_CALIBRATION_ROWS`` training rows is one of the row's labels.

        Cosines are no probabilities: mapped linearly to [0, 1] they sum to about 4.7 per
        row on a Reuters slice and ``threshold=0.5`` kept 86% of the labels. After Platt
        scaling a threshold of 0.5 keeps the labels the model finds more likely relevant
        than not, as XR-Linear's path scores roughly do. Each row's scores carry its
        ``sample_weight`` (of mean one, as in the loss), so an integer weight calibrates
        about as repeating the row would, and equal weights as no weights."""
        from sklearn.linear_model import LogisticRegression

        rows = np.random.default_rng(seed).permutation(X.shape[0])[:_CALIBRATION_ROWS]
        rows.sort()
        Xs, Ys = X[rows], sp.csr_matrix(Y[rows])
        k = min(len(self.classes_), max(self.top_k, _CALIBRATION_K))
        idx, cos = self._topk(Xs, k)
        hit = np.zeros(idx.shape, dtype=bool)
        for i, (lo, hi) in enumerate(zip(Ys.indptr[:-1], Ys.indptr[1:])):
            hit[i] = np.isin(idx[i], Ys.indices[lo:hi])
        # Positives outside the top k: their exact cosines.
        missed = Ys.copy()
        missed[np.repeat(np.arange(len(rows)), k)[hit.ravel()], idx[hit]] = 0
        missed.eliminate_zeros()
        extra = np.zeros(0, dtype=np.float32)
        if missed.nnz:
            r = np.repeat(np.arange(missed.shape[0]), np.diff(missed.indptr))
            with torch.inference_mode():
                device = inference_device(self._train.device)
                V = self.module_.to(device).label_vectors(
                    torch.as_tensor(missed.indices, dtype=torch.long, device=device)
                )
                H = torch.cat([h for _, h in self._embedded_blocks(Xs, device)])
                extra = (H[torch.as_tensor(r, device=device)] * V).sum(-1).float().cpu().numpy()
        score = np.concatenate([cos.ravel(), extra]).astype(np.float64)[:, None]
        label = np.concatenate([hit.ravel(), np.ones(len(extra), dtype=bool)])
        weight = loss_weights(None if sample_weight is None else sample_weight[rows])
        if weight is not None:
            weight = np.concatenate([np.repeat(weight, k), weight[r] if missed.nnz else []])
        if label.all() or not label.any():
            return np.array([2.0 * self.scale, 0.0])  # nothing to tell apart: a fixed slope
        lr = LogisticRegression(C=1e4).fit(score, label, sample_weight=weight)
        return np.array([float(lr.coef_[0, 0]), float(lr.intercept_[0])])

    @property
    def _proba_on_common_scale(self) -> bool:
        return self._calibration() is not None

    def _calibration(self) -> tuple[float, float] | None:
        # Models saved before the calibration existed keep their linear map.
        ab = getattr(self, "proba_calibration_", None)
        return None if ab is None else (float(ab[0]), float(ab[1]))

    def _proba_of(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        """Cosines mapped to [0, 1] by ``sigmoid(a * cosine + b)``, Platt-scaled in
        ``fit`` (``proba_calibration_``); models fitted before that: linearly."""
        ab = self._calibration()
        c = scores.data.astype(np.float64)
        if ab is None:
            p = np.clip((c + 1.0) / 2.0, 0.0, 1.0)
        else:
            p = 1.0 / (1.0 + np.exp(-(ab[0] * c + ab[1])))
        scores.data = p.astype(np.float32)
        return scores

    def _above_threshold(
        self, X: Any, threshold: float | np.ndarray, columns: np.ndarray | None
    ) -> sp.csr_matrix:
        """The :meth:`predict_proba` scores of every label (of ``columns``) that reach
        ``threshold``: an exact scan of the class vectors in blocks, whatever ``search``
        (an approximate index cannot list every label above a score), holding at most
        ``_THRESHOLD_BLOCK`` scores at once."""
        X = self._validate_X(X)
        device = inference_device(self._train.device)
        module = self.module_.to(device)
        n, n_labels = X.shape[0], len(self.classes_)
        ab = self._calibration()
        rows, cols, vals = [], [], []
        with torch.inference_mode():
            if columns is None:
                V = module.label_vectors()
                thr = threshold
            else:
                V = module.label_vectors(torch.as_tensor(columns, dtype=torch.long, device=device))
                thr = threshold if np.isscalar(threshold) else threshold[columns]
            if not np.isscalar(thr):
                thr = torch.as_tensor(thr, dtype=torch.float64, device=device)
            step = max(1, _THRESHOLD_BLOCK // max(len(V), 1))
            for start, H in self._embedded_blocks(X, device):
                for sub in range(0, len(H), step):
                    # Same arithmetic as _proba_of (float64, then float32).
                    C = (H[sub : sub + step] @ V.T).double()
                    if ab is None:
                        P = ((C + 1.0) / 2.0).clamp(0.0, 1.0).float()
                    else:
                        P = (1.0 / (1.0 + torch.exp(-(ab[0] * C + ab[1])))).float()
                    r, c = torch.nonzero(P >= thr, as_tuple=True)
                    rows.append((r + start + sub).cpu().numpy())
                    cols.append(c.cpu().numpy())
                    vals.append(P[r, c].float().cpu().numpy())
        r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
        if columns is not None:
            c = columns[c]
        v = np.concatenate(vals) if vals else np.zeros(0, dtype=np.float32)
        out = sp.csr_matrix((v, (r, c)), shape=(n, n_labels), dtype=np.float32)
        out.sort_indices()
        return out

    def predict_topk(
        self, X: Any, k: int | None = None, *, labels: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best labels of each sample and their scores, best first.

        Parameters
        ----------
        X : {sparse matrix, ndarray} of shape (n_samples, n_features)
        k : int or None, default=None
            Labels per sample; None: ``top_k``.
        labels : array-like of shape (n_selected,), default=None
            Rank only these labels (identifiers from ``classes_``): an exact search
            among their class vectors, whatever ``search``; at most ``len(labels)``
            labels per sample. None: every label.

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            Label identifiers from ``classes_``.
        scores : ndarray of float32 of shape (n_samples, k)
            Cosine scores, decreasing along each row.
        """
        X = self._validate_X(X)
        columns = self._label_columns(labels)
        idx, vals = self._topk(X, self._resolve_k(k, columns), columns)
        return LabelSpace(self.classes_).labels_of(idx), vals

    # ------------------------------------------------- tags, pickling, persistence

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()  # multi-label ranker tags from the mixin
        tags.input_tags.sparse = True
        return tags

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if state.get("module_") is not None:
            state["module_"] = module_on_cpu(state["module_"])  # CUDA tensors need CUDA
        state.pop("_label_index", None)  # faiss indexes do not pickle; rebuilt on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._index_labels()

    def _save_state(self) -> tuple[dict, dict]:
        attributes, arrays = super()._save_state()
        attributes.pop("module_", None)
        return attributes, arrays

    def _save_extra_files(self, directory: str | os.PathLike) -> None:
        save_module_weights(self.module_, Path(directory) / _WEIGHTS)

    def _load_extra_files(self, directory: str | os.PathLike) -> None:
        module = self._build_module()
        load_module_weights(module, Path(directory) / _WEIGHTS)
        self.module_ = module.eval()
        self._index_labels()
