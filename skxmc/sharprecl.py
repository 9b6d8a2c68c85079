"""SharpReCL: rebalanced contrastive fine-tuning for imbalanced text classification."""

from __future__ import annotations

import dataclasses
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._optional import require_extra

with require_extra("text", "SharpReCLClassifier"):
    import torch
    from torch import nn

from ._augment import WordNet, augment_texts
from ._compat import Interval, StrOptions
from ._memory import FLOAT32, INT64, check_allocation, check_trainable, encoder_hidden_size
from ._sample_weight import loss_weights
from .io import persistent
from .losses import (
    class_prior_weights,
    dice_loss,
    effective_number_weights,
    focal_loss,
    logit_adjusted_cross_entropy,
    rebalanced_contrastive_loss,
    rebalanced_targets,
)
from .text._classifier import (
    EncoderModule,
    TransformerClassifierBase,
    check_class_labels,
    softmax,
)
from .text._config import TrainingConfig
from .text._device import resolve_device
from .text._encoder import batched_inference, eval_mode
from .text._estimator import FitTask, fill_engine_docs
from .text._explain import (
    ExplanationMixin,
    Neighbor,
    check_explain_k,
    class_neighbors,
    unit_rows,
)
from .text._optim import fit_linear_probe
from .text._stream import check_texts, materialize_texts
from .text._tokenize import TokenizedTexts, TokenViews, tokenize_views

__all__ = ["Neighbor", "NeighborExplanation", "SharpReCLClassifier"]


@dataclasses.dataclass(frozen=True)
class NeighborExplanation(ExplanationMixin):
    """Why a class got its probability for a text (:meth:`SharpReCLClassifier.explain`):
    its score and the training texts of the class nearest to the text.

    Attributes
    ----------
    label : object
        The class (an element of ``classes_``).
    score : float
        Its ``predict_proba``.
    logit : float
        Its ``decision_function`` (the linear classifier's logit).
    neighbors : tuple of Neighbor
        The ``n_neighbors`` training texts of this class nearest to the text (cosine of
        the embeddings that :meth:`~SharpReCLClassifier.transform` gives, the features the
        classifier reads), nearest first.
    """

    label: Any
    score: float
    logit: float
    neighbors: tuple[Neighbor, ...]


_ABLATABLE = ("simple_sampling", "hard_mixup", "prior_weighting")
_ABLATE_MOVED = (
    "ablate=({0!r},) (the paper's ablation switches are one parameter, ablate: a tuple of "
    "the parts switched off)"
)


def _synthetic_ratio(step: int, total_steps: int) -> float:
    """Share of hard-mixup targets at optimiser step ``step`` (0-based) of ``total_steps``:
    0.5 + 0.5 t / T, capped at 1 (section 3.5)."""
    return min(0.5 + 0.5 * step / max(1, total_steps), 1.0)


def _projection_head(hidden: int, out: int, batch_norm: bool = True) -> nn.Sequential:
    # The paper's two-layer MLP: Linear h-h, (BatchNorm, as in the reference code), ReLU,
    # Linear h-out.
    norm = [nn.BatchNorm1d(hidden)] if batch_norm else []
    return nn.Sequential(nn.Linear(hidden, hidden), *norm, nn.ReLU(), nn.Linear(hidden, out))


class _SharpReCLModule(EncoderModule):
    """Encoder + linear classifier + feature and prototype projection heads."""

    def __init__(
        self,
        encoder: nn.Module,
        pooling: str,
        n_classes: int,
        projection_dim: int,
        prototype_norm: str = "batch",
        normalize_logits: bool = False,
    ):
        super().__init__(encoder, pooling)
        self.normalize_logits = normalize_logits
        h = self.hidden_size
        self.classifier = nn.Linear(h, n_classes)
        self.feature_head = _projection_head(h, projection_dim)
        self.prototype_head = _projection_head(
            h, projection_dim, batch_norm=prototype_norm == "batch"
        )

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.classify(self.features(inputs))

    def classify(self, features: torch.Tensor) -> torch.Tensor:
        """The class logits of eq. 5, L2-normalised per row with ``normalize_logits``."""
        logits = self.classifier(features)
        return nn.functional.normalize(logits, dim=1) if self.normalize_logits else logits

    def embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.features(inputs)

    def logits_and_embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``logits`` and ``embed`` side by side, from one encoder pass (explain)."""
        features = self.features(inputs)
        return torch.cat([self.classify(features).float(), features], dim=1)

    def prototypes(self) -> torch.Tensor:
        """Class prototypes: the prototype head applied to the classifier weights (eq. 5)."""
        return nn.functional.normalize(self.prototype_head(self.classifier.weight.float()), dim=1)


_VIEWS_MISMATCH = (
    "X_augmented must hold one view of each text of X, of the same kind (texts or text pairs)."
)

# The fitted state behind explain.
_TRAIN_MEMORY = ("train_embeddings_", "train_targets_", "train_indices_", "train_weights_")


@dataclasses.dataclass
class _SharpReCLTask(FitTask):
    """Per-fit state: the views, the class prior and the contrastive class weights."""

    two_view: bool = False
    ablated: frozenset = frozenset()
    log_prior: Any = None
    class_weights: Any = None


@persistent
@fill_engine_docs
class SharpReCLClassifier(TransformerClassifierBase):
    """Fine-tuned transformer classifier for imbalanced classes (SharpReCL).

    Simple-Sampling and Hard-Mixup with Prototypes to Rebalance Contrastive Learning
    (Li et al.): cross-entropy with logit compensation by the class prior, plus a
    supervised contrastive loss over the texts (with ``n_views=2``, as in the paper, also
    an augmented view of each) and the class prototypes, in which every class gets the
    same number of positive and negative targets, drawn at random (simple-sampling) or
    mixed from its hardest examples (hard-mixup).

    ``X`` is a sequence of texts (list, array, pandas Series or one-column DataFrame) or of
    text pairs (2-tuples, or a two-column DataFrame / array). ``transform`` gives the
    fine-tuned text embeddings; with ``fit_transform``, ``get_feature_names_out`` and
    ``set_output`` the classifier is also a feature step (e.g.
    ``ColumnTransformer([("emb", SharpReCLClassifier(), "text")])``).

    Parameters
    ----------
    {encoder_params}
    max_length : int, default=128
        Truncation length in tokens (the paper: 256).
    augmentation : {"auto", "delete_swap", "synonym"}, callable or None, default="auto"
        How the second view of each text is made (``n_views=2``), once, before training;
        with ``n_views=1`` only "auto" and None are accepted. "auto": "delete_swap".
        ``"synonym"``: WordNet synonym substitution, the paper's default; it needs the
        WordNet database files (``apt-get install wordnet-base``, or a folder named by
        the ``SKXMC_WORDNET`` or ``WNSEARCHDIR`` environment variable).
        ``"delete_swap"``: random word deletion and
        swaps, which needs nothing installed (hence the default). A callable:
        ``f(texts) -> list of str`` applied to the list of training texts. None: the
        views are the same text and differ only by dropout. Pre-computed views passed to
        ``fit(X, y, X_augmented=...)`` take precedence.
    augmentation_strength : float, default=0.1
        Share of the words the built-in augmentations change.
    n_views : {1, 2}, default=1
        Views of each text per batch. 1: the original texts only (``augmentation`` is not
        used): the contrastive loss contrasts them with each other, the prototypes and
        the synthetic samples, with one encoder pass per text, so an epoch costs about
        what plain fine-tuning costs. 2 (the paper): the original and its augmented copy,
        each the other's positive. The default was chosen with ``contrastive_weight`` on
        dev splits of three imbalanced sets (the documentation's SharpReCL page): one
        view was as good or better on two of them and costs half the encoder passes.
        Pass 2 for the paper's method, and compare both on a dev split.
    temperature : float, default=0.3
        Temperature of the contrastive loss.
    contrastive_weight : float, default=0.1
        Weight ``mu`` of the contrastive loss (eq. 12); the paper's setting is 1 and its
        sensitivity study favours 0.3-0.7. The default was chosen on dev splits of three
        imbalanced sets (the documentation's SharpReCL page): with a strong imbalance
        the logit-adjusted cross-entropy is small, and a large weight lets the
        contrastive loss dominate training and starve the minority classes (on two
        classes, the minority class can vanish). 0 trains with the logit-adjusted
        cross-entropy alone (with ``augmentation=None``, on a single view). Choose it on
        a dev split whose class balance is that of the texts to be predicted, not on a
        stratified share of imbalanced training texts, which holds too few minority
        texts to rank the values.
    projection_dim : int, default=100
        Width of the contrastive space.
    n_hard : int, default=20
        Hard positive / negative candidates per class for mixup.
    n_synthetic_positive : int, default=10
        Positive targets per class per batch.
    n_synthetic_negative : int, default=500
        Negative targets per class per batch.
    mixup_alpha : float, default=0.5
        Mixing weights follow Beta(mixup_alpha, mixup_alpha).
    logit_adjustment : float, default=1.0
        Multiplier of ``log(class prior)`` added to the logits in the loss (eq. 6); 0
        gives the plain cross-entropy. Predictions use the raw logits.
    ablate : tuple of {"simple_sampling", "hard_mixup", "prior_weighting"}, default=()
        Parts of the method switched off, for the paper's ablation study (Table 4).
        ``"simple_sampling"`` ("w/o SS"): no random targets; ``"hard_mixup"`` ("w/o
        HM"): no mixup targets from hard examples (with both off, the contrastive loss
        runs on the batch and prototypes only); ``"prior_weighting"`` ("w/o delta_CL"):
        no class weight on each anchor's contrastive loss (by default a weight that
        grows as the class gets rarer, see ``contrastive_weighting``). Until skxmc 0.x
        these were the flags ``simple_sampling``, ``hard_mixup`` and
        ``prior_weighting``: ``simple_sampling=False`` is ``ablate=("simple_sampling",)``.
    contrastive_weighting : {"reference", "paper"}, default="reference"
        How the contrastive loss is weighted and normalised.
        ``"reference"`` (the authors' code): effective-number class weights
        (``beta = 0.9999``, mean 1; about inverse frequency), each anchor's loss the
        mean over its positives, averaged over anchors.
        ``"paper"`` (eq. 11 as written): weight ``-log P_y``, each anchor's loss the sum
        over its positives divided by the number of anchors, summed over anchors; its
        scale grows with the number of positives, so it usually wants a smaller
        ``contrastive_weight``. Keep the default; the documentation's SharpReCL page
        gives the dev-split comparison behind it.
    classifier_loss : {"ce", "focal", "dice", "linear_probe"}, default="ce"
        Loss of the classification branch, always on the logits plus
        ``logit_adjustment * log(prior)``: cross-entropy (eq. 6), focal loss
        (``gamma=2``) or self-adjusting Dice loss (``alpha=0``, smoothing 1), the
        variants of the paper's Table 8. ``"linear_probe"`` is the "w/o CLS" ablation
        of Table 4: the encoder trains with the contrastive loss alone (it needs
        ``contrastive_weight > 0``); after training, the classifier is fitted on the
        frozen text embeddings of the training texts (logit-adjusted cross-entropy,
        L-BFGS, the L2 penalty of scikit-learn's ``LogisticRegression(C=1)``).
        Keep ``"ce"``: the others are ablations.
    prototype_norm : {"batch", "none"}, default="batch"
        The prototype head (``proj_h`` of eq. 5, applied to the classifier's weight
        rows) is Linear, BatchNorm, ReLU, Linear in the authors' code (``"batch"``);
        ``"none"`` drops the BatchNorm, as the paper's text describes the head ("an MLP
        with one hidden layer"). The BatchNorm normalises over the classes: with two
        classes it maps every hidden unit to about +-1, and its gradient to the
        classifier weights is large where the two rows nearly agree.
    normalize_logits : bool, default=False
        L2-normalise each text's class logits before the classification loss and in
        :meth:`decision_function`, as the authors' code does; the paper's eq. 5-6 use the
        raw linear logits (False). Normalised logits lie within a unit sphere, so the
        ``log(prior)`` added in the loss can never be overcome for a minority text: its
        loss stays large and keeps the classification branch's signal against the
        contrastive loss. Predictions (the argmax) are those of the raw logits of the
        same model; :meth:`predict_proba` is the softmax of the bounded logits, so its
        probabilities stay away from 0 and 1. Keep the paper's default unless a dev split
        says otherwise (the SharpReCL page of the documentation compares both).
    {training_params}
        Each text of a batch is encoded twice with ``n_views=2``; the paper's batch size
        is 128.

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (n_classes,)
        The class labels.
    class_prior_ : numpy.ndarray of shape (n_classes,)
        Class frequencies of the training data.
    module_ : torch.nn.Module
        Encoder, classifier and projection heads.
    tokenizer_ : transformers tokenizer
    {fit_attributes}
    text_pairs_ : bool
        Whether the model was trained on text pairs.
    train_embeddings_ : numpy.ndarray of float32 of shape (n_train, hidden_size)
        The L2-normalised embeddings of the training texts (those the model trained on:
        without a validation split's texts and texts of weight 0), by the final model,
        for :meth:`explain`: the model learns no neighbours of its own (one prototype
        per class), so an explanation by examples needs them; kept rather than
        re-embedded from texts given to ``explain``, because the training texts are
        seldom at hand where a model predicts. They cost ``4 x hidden size + 16`` bytes
        per training text in memory and in the saved model (TREC's 5,452 texts: 8.5 MB
        with all-MiniLM-L6-v2, whose weights are 91 MB) and one inference pass over the
        training texts at the end of ``fit``.
    train_targets_ : numpy.ndarray of int64 of shape (n_train,)
        Their classes (indices into ``classes_``).
    train_indices_ : numpy.ndarray of int64 of shape (n_train,)
        Their positions in the ``X`` given to ``fit``.
    train_weights_ : numpy.ndarray of float64 of shape (n_train,)
        Their scaled sample weights; only after a fit with ``sample_weight``.

    See Also
    --------
    skxmc.losses.rebalanced_contrastive_loss : the contrastive loss.
    skxmc.datasets.make_imbalanced : imbalanced versions of balanced data sets.

    Notes
    -----
    Differences from the paper and the reference code: ``contrastive_weight`` defaults
    to 0.1, not 1, and ``n_views`` to 1, not 2, after a dev-split study; logits are not
    L2-normalised by default (the paper's eq. 5-6 use the raw linear logits;
    ``normalize_logits=True`` is the reference's form);
    the synthetic target counts default to the paper's 10 and 500 (the reference's
    defaults are 0); a simple-sampling draw of an anchor itself (or a mixup of it with
    itself) is not counted as that anchor's positive (eq. 11 leaves out ``{i}``); no
    model selection on the test set. The ``skxmc`` documentation's SharpReCL page lists
    every departure from the paper and the switches for its ablations.

    References
    ----------
    M. Li et al., "Simple-Sampling and Hard-Mixup with Prototypes to Rebalance
    Contrastive Learning for Text Classification".

    Examples
    --------
    >>> from skxmc import SharpReCLClassifier  # doctest: +SKIP
    >>> from skxmc.text import TrainingConfig  # doctest: +SKIP
    >>> clf = SharpReCLClassifier(encoder="/models/all-MiniLM-L6-v2", pooling="mean",
    ...                           training=TrainingConfig(max_epochs=2))  # doctest: +SKIP
    >>> clf.fit(train_texts, train_labels).score(test_texts, test_labels)  # doctest: +SKIP
    0.9...
    """

    _renamed_params = {k: _ABLATE_MOVED.format(k) for k in _ABLATABLE}
    _training_defaults = {
        "batch_size": 32,
        "max_epochs": 3,
        "learning_rate": 5e-5,
        "weight_decay": 5e-4,
        "warmup": 0.0,
    }

    _parameter_constraints: dict = {
        **TransformerClassifierBase._parameter_constraints,
        "augmentation": [StrOptions({"auto", "synonym", "delete_swap"}), callable, None],
        "augmentation_strength": [Interval(Real, 0, 1, closed="both")],
        "n_views": [Interval(Integral, 1, 2, closed="both")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "contrastive_weight": [Interval(Real, 0, None, closed="left")],
        "projection_dim": [Interval(Integral, 1, None, closed="left")],
        "n_hard": [Interval(Integral, 1, None, closed="left")],
        "n_synthetic_positive": [Interval(Integral, 0, None, closed="left")],
        "n_synthetic_negative": [Interval(Integral, 0, None, closed="left")],
        "mixup_alpha": [Interval(Real, 0, None, closed="neither")],
        "logit_adjustment": [Interval(Real, 0, None, closed="left")],
        "ablate": [tuple, list],
        "contrastive_weighting": [StrOptions({"reference", "paper"})],
        "classifier_loss": [StrOptions({"ce", "focal", "dice", "linear_probe"})],
        "prototype_norm": [StrOptions({"batch", "none"})],
        "normalize_logits": ["boolean"],
    }

    def __init__(
        self,
        *,
        encoder: str = "bert-base-uncased",
        pooling: str = "cls",
        max_length: int = 128,
        augmentation: Any = "auto",
        augmentation_strength: float = 0.1,
        n_views: int = 1,
        temperature: float = 0.3,
        contrastive_weight: float = 0.1,
        projection_dim: int = 100,
        n_hard: int = 20,
        n_synthetic_positive: int = 10,
        n_synthetic_negative: int = 500,
        mixup_alpha: float = 0.5,
        logit_adjustment: float = 1.0,
        ablate: tuple = (),
        contrastive_weighting: str = "reference",
        classifier_loss: str = "ce",
        prototype_norm: str = "batch",
        normalize_logits: bool = False,
        training: TrainingConfig | None = None,
    ) -> None:
        self.encoder = encoder
        self.pooling = pooling
        self.max_length = max_length
        self.augmentation = augmentation
        self.augmentation_strength = augmentation_strength
        self.n_views = n_views
        self.temperature = temperature
        self.contrastive_weight = contrastive_weight
        self.projection_dim = projection_dim
        self.n_hard = n_hard
        self.n_synthetic_positive = n_synthetic_positive
        self.n_synthetic_negative = n_synthetic_negative
        self.mixup_alpha = mixup_alpha
        self.logit_adjustment = logit_adjustment
        self.ablate = ablate
        self.contrastive_weighting = contrastive_weighting
        self.classifier_loss = classifier_loss
        self.prototype_norm = prototype_norm
        self.normalize_logits = normalize_logits
        self.training = training

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, X_augmented: Any = None
    ) -> SharpReCLClassifier:
        """Fine-tune on texts ``X`` with classes ``y``.

        Ctrl-C stops training with a :class:`~skxmc.text.TrainingInterruptedWarning` and
        leaves a usable model.

        Parameters
        ----------
        X : sequence or iterable of str or of (str, str)
            Training texts. A generator or a Hugging Face dataset is read once, in
            chunks, keeping only the token ids (see :ref:`large-data`).
        y : array-like of shape (n_samples,)
            Class labels (str, int, any sortable hashable values).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-text weights (finite, >= 0), scaled to mean 1 over the training texts.
            Each text's classification loss and its contrastive terms as an anchor (both
            views) are multiplied by its weight, so that an integer weight counts as
            repeated copies of the text in expectation over the uniformly drawn batches
            (an epoch still passes once over each text; all weights equal give exactly
            the unweighted fit); as a positive or negative of other anchors a text counts
            once. The class prior and the contrastive class weights use the weighted
            class counts (weights scaled to sum to the number of texts). A text of
            weight 0 is dropped before anything else (classes, validation split). In a
            :class:`~sklearn.pipeline.Pipeline` with metadata
            routing, request it with ``set_fit_request(sample_weight=True)``.
        X_augmented : sequence of str or of (str, str), optional
            A pre-computed second view of each text (e.g. back-translations, or the
            ``aug_text`` field of the SharpReCL data sets); overrides ``augmentation``.

        Returns
        -------
        self

        Raises
        ------
        MemoryError
            Before the encoder loads, when ``projection_dim`` or the synthetic target
            counts imply tensors larger than the memory of the training device; the error
            (also a ValueError) names the parameter and the estimate in GiB.
        """
        if self.classifier_loss == "linear_probe":
            # the probe embeds the training texts again after training: a one-shot
            # stream is read once, here, into a list
            X = materialize_texts(X)
        super().fit(X, y, sample_weight=sample_weight, X_augmented=X_augmented)
        if self.classifier_loss == "linear_probe":
            if sample_weight is not None:
                X, y, sample_weight, _, _ = self._drop_zero_weight_rows(X, y, sample_weight, {})
            self._fit_linear_probe(X, y, sample_weight)
        return self

    def _fit_linear_probe(self, X: Any, y: Any, sample_weight: Any = None) -> None:
        """The "w/o CLS" ablation's classifier: logit-adjusted CE on frozen embeddings."""
        features = torch.as_tensor(self._embeddings(X), dtype=torch.float32)
        _, y_encoded = check_class_labels(y, len(features))
        device = self.module_.classifier.weight.device
        features, targets = features.to(device), torch.as_tensor(y_encoded, device=device)
        log_prior = torch.as_tensor(np.log(self.class_prior_), dtype=torch.float32, device=device)
        weights = loss_weights(sample_weight)
        if weights is not None:
            weights = torch.as_tensor(weights, dtype=torch.float32, device=device)

        def data_loss(logits: torch.Tensor) -> torch.Tensor:
            tau = self.logit_adjustment
            if weights is None:
                return logit_adjusted_cross_entropy(logits, targets, log_prior, tau=tau)
            per_row = logit_adjusted_cross_entropy(
                logits, targets, log_prior, tau=tau, reduction="none"
            )
            return (per_row * weights).mean()

        fit_linear_probe(self.module_.classifier, features, data_loss)

    # Explanations ---------------------------------------------------------------------

    def explain(
        self, X: Any, k: int = 5, *, n_neighbors: int = 5
    ) -> list[list[NeighborExplanation]]:
        """Why each text got its most probable classes: each class's probability and
        logit, and the training texts of that class nearest to the text.

        The neighbours are searched exactly, by the cosine of the embeddings that
        :meth:`transform` gives (the features the linear classifier reads) among the
        stored ``train_embeddings_``: a text resembles the training texts the model
        placed beside it. A training text is its own nearest neighbour.

        Parameters
        ----------
        X : sequence of str or of (str, str)
        k : int, default=5
            Classes explained per text (at most the number of classes), most probable
            first, ties in the order of ``classes_``.
        n_neighbors : int, default=5
            Training texts listed per class (fewer when the class has fewer).

        Returns
        -------
        list of list of NeighborExplanation
            Per text, one :class:`NeighborExplanation` per class; its ``score`` is the
            class's :meth:`predict_proba` and its ``logit`` its
            :meth:`decision_function`. Training texts are given by their row in
            ``fit``'s ``X`` (the model does not keep the texts).

        Raises
        ------
        AttributeError
            When the model keeps no training embeddings (saved by a skxmc from before
            explanations): fit it again.

        Examples
        --------
        A tiny randomly initialised BERT keeps the example fast (use a real encoder in
        practice):

        >>> import tempfile
        >>> from transformers import BertConfig, BertModel, BertTokenizerFast
        >>> from skxmc import SharpReCLClassifier
        >>> from skxmc.text import TrainingConfig
        >>> d = tempfile.mkdtemp()
        >>> words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]
        >>> _ = open(f"{d}/vocab.txt", "w").write("\\n".join(words))
        >>> _ = BertTokenizerFast(f"{d}/vocab.txt").save_pretrained(d)
        >>> BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
        ...           num_attention_heads=2, intermediate_size=32)).save_pretrained(d)
        >>> texts = ["good film", "good", "bad film", "bad", "film good", "film bad"]
        >>> clf = SharpReCLClassifier(encoder=d, max_length=8, n_synthetic_negative=4,
        ...                           training=TrainingConfig(max_epochs=1, batch_size=6))
        >>> clf = clf.fit(texts, ["pos", "pos", "neg", "neg", "pos", "neg"])
        >>> why = clf.explain(["good film"], k=2, n_neighbors=2)[0]
        >>> [e.label for e in why] == list(clf.classes_[clf.predict_proba(["good film"])[0]
        ...                                              .argsort()[::-1]])
        True
        >>> best = next(e for e in why if e.label == "pos")
        >>> best.neighbors[0].training_row  # the training text "good film" itself
        0
        """
        check_is_fitted(self, "module_")
        if "train_embeddings_" not in self.__dict__:
            raise AttributeError(
                "this SharpReCLClassifier keeps no training embeddings, so explain cannot "
                "name the nearest training texts: it was saved by a skxmc from before "
                "explanations. Fit it again to get them (fit keeps the training "
                "embeddings)."
            )
        k = check_explain_k(k, len(self.classes_))
        n_neighbors = check_explain_k(n_neighbors, None, "n_neighbors")
        # one encoder pass for the scores and the neighbours, the logits computed as
        # decision_function computes them (same precision, same backend)
        out = self._forward_all(X, "logits_and_embed", "explaining")
        if len(out) == 0:
            return []
        n_classes = len(self.classes_)
        logits, features = out[:, :n_classes], out[:, n_classes:]
        proba = softmax(logits)
        nearest = class_neighbors(
            features,
            self.train_embeddings_,
            self.train_targets_,
            self.train_indices_,
            self.__dict__.get("train_weights_"),
            n_classes,
            n_neighbors,
        )
        return [
            [
                NeighborExplanation(
                    self.classes_[c], float(proba[i, c]), float(logits[i, c]), neighbors_of(c)
                )
                for c in np.argsort(-proba[i], kind="stable")[:k]
            ]
            for i, neighbors_of in enumerate(nearest)
        ]

    # Hooks of TransformerClassifierBase -----------------------------------------------

    def _validate_fit_data(self, X: Any, y: Any) -> tuple[list, np.ndarray]:
        self._check_fit_params()
        texts, y_encoded = super()._validate_fit_data(X, y)
        # Here, before the encoder loads: a size that cannot fit fails in a second.
        self._check_memory(len(texts), len(self.classes_))
        return texts, y_encoded

    def _check_fit_params(self) -> None:
        if self.classifier_loss == "linear_probe" and self.contrastive_weight == 0:
            raise ValueError(
                "classifier_loss='linear_probe' trains the encoder with the contrastive "
                "loss alone; it needs contrastive_weight > 0, got 0."
            )
        # an augmentation the user chose would be silently unused
        if self.n_views == 1 and self.augmentation not in ("auto", None):
            raise ValueError(
                f"augmentation={self.augmentation!r} makes the second view, but n_views=1 "
                "trains on the original texts only; pass n_views=2 (the paper's two "
                "views) to use it, or leave augmentation='auto'."
            )

    def _read_fit_stream(
        self, X: Any, rs: np.random.RandomState, fit_params: dict[str, Any]
    ) -> tuple[TokenizedTexts, dict[str, Any]]:
        """Tokenise a stream and, for two views, its augmented view as it goes by (the
        texts are not kept); the views follow the texts in one token container."""
        given = fit_params.get("X_augmented") is not None
        if given or not self._two_views(None) or self.augmentation is None:
            return super()._read_fit_stream(X, rs, fit_params)
        # The generator an in-memory fit would make (same seed, texts in the same order),
        # so that without a validation split the views are those of the list.
        method = "delete_swap" if self.augmentation == "auto" else self.augmentation
        rng = np.random.default_rng(int(rs.randint(np.iinfo(np.int32).max)))
        wordnet = WordNet() if method == "synonym" else None

        def view(chunk: list) -> list:
            augmented = augment_texts(
                chunk, method, p=self.augmentation_strength, random_state=rng, wordnet=wordnet
            )
            return check_texts(augmented, name="the augmented view")[0]

        views = tokenize_views(self.tokenizer_, X, view, max_length=self._max_length())
        if not len(views):
            return views.tokens, fit_params
        return views.tokens.head(len(views)), {**fit_params, "X_augmented": views}

    def _ablated(self) -> frozenset:
        """The parts of the method that ``ablate`` switches off (checked)."""
        parts = frozenset(self.ablate)
        unknown = sorted(map(str, parts - set(_ABLATABLE)))
        if unknown:
            raise ValueError(
                f"ablate holds unknown part(s) {unknown}; choose among {list(_ABLATABLE)}."
            )
        return parts

    @classmethod
    def _upgrade_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        params = dict(params)
        flags = [k for k in _ABLATABLE if k in params]
        if flags:
            params["ablate"] = tuple(k for k in flags if not params.pop(k))
        return super()._upgrade_params(params)

    def _check_memory(self, n_samples: int, n_classes: int) -> None:
        """Refuse ``projection_dim`` / synthetic target counts whose tensors cannot fit."""
        device = resolve_device(self._train.device)
        hidden = encoder_hidden_size(self.encoder)
        h = hidden or 1  # unknown until the encoder loads: a lower bound
        width = f"hidden size {hidden}" if hidden else "a hidden size of at least 1"
        d = int(self.projection_dim)
        # Two heads (Linear h-h, BatchNorm, Linear h-d) and the classifier.
        head_params = 2 * (h * h + 3 * h + h * d + d) + (h + 1) * n_classes
        check_trainable(
            FLOAT32 * head_params,
            what="the two projection heads (hidden size x projection_dim each)",
            parameter=f"projection_dim={d} and {width}",
            device=device,
            hint="lower projection_dim",
        )
        ablated = self._ablated()
        if self.contrastive_weight == 0 or {"simple_sampling", "hard_mixup"} <= ablated:
            return
        # Per step, each anchor (n_views x batch texts and the class prototypes) gathers its
        # class's targets: (anchors, targets, projection_dim), next to the (classes,
        # targets, projection_dim) target sets themselves.
        anchors = self.n_views * min(int(self._train.batch_size), n_samples) + n_classes
        targets = int(self.n_synthetic_positive) + int(self.n_synthetic_negative)
        check_allocation(
            # the targets' features, and their int64 row indices (samples, mixup pairs)
            FLOAT32 * d * targets * (anchors + n_classes) + 3 * INT64 * targets * n_classes,
            what="the synthetic contrastive targets of one training step",
            parameter=(
                f"n_synthetic_positive={self.n_synthetic_positive}, n_synthetic_negative="
                f"{self.n_synthetic_negative}, projection_dim={d} and {anchors} anchors "
                f"(batch_size={self._train.batch_size}, n_views={self.n_views}, "
                f"{n_classes} classes)"
            ),
            device=device,
            hint="lower n_synthetic_negative, n_synthetic_positive, projection_dim or batch_size",
        )

    def _build_module(self, encoder: nn.Module, n_classes: int) -> nn.Module:
        return _SharpReCLModule(
            encoder,
            self.pooling,
            n_classes,
            self.projection_dim,
            self.prototype_norm,
            self.normalize_logits,
        )

    def _two_views(self, X_augmented: Any) -> bool:
        if self.n_views == 1:
            if X_augmented is not None:
                raise ValueError(
                    "X_augmented was given but n_views=1 trains on the original "
                    "texts only; pass n_views=2 to use the augmented views."
                )
            return False
        # The logit-adjusted CE baseline without augmentation trains on one view, so that
        # it costs what plain fine-tuning costs.
        return not (
            self.contrastive_weight == 0 and self.augmentation is None and X_augmented is None
        )

    def _prepare_fit(
        self,
        texts: list,
        y: np.ndarray,
        rng: np.random.RandomState,
        *,
        sample_weight: np.ndarray | None = None,
        X_augmented: Any = None,
    ) -> _SharpReCLTask:
        n, n_classes = len(texts), len(self.classes_)
        for name in _TRAIN_MEMORY:  # a previous fit's
            self.__dict__.pop(name, None)
        # Weighted counts, the weights scaled to sum to the number of texts: the prior is
        # that of the repeated texts, and equal weights give the unweighted counts.
        counts = np.bincount(
            y,
            weights=None if sample_weight is None else sample_weight * (n / sample_weight.sum()),
            minlength=n_classes,
        )
        self.class_prior_ = counts / counts.sum()
        two_view = self._two_views(X_augmented)
        if isinstance(texts, TokenizedTexts):  # a stream, tokenised as it was read
            tokens = self._stream_tokens(texts, X_augmented if two_view else None, two_view)
            views = None
        else:
            views = list(texts)
        if two_view and views is not None:
            if X_augmented is not None:
                augmented, pairs = check_texts(X_augmented, name="X_augmented")
                if len(augmented) != n or pairs != self.text_pairs_:
                    raise ValueError(_VIEWS_MISMATCH)
            else:
                augmented = augment_texts(
                    texts,
                    "delete_swap" if self.augmentation == "auto" else self.augmentation,
                    p=self.augmentation_strength,
                    random_state=int(rng.randint(np.iinfo(np.int32).max)),
                )
            views += augmented
        if "prior_weighting" in self._ablated():
            weights = np.ones(n_classes, dtype=np.float32)
        elif self.contrastive_weighting == "paper":
            weights = class_prior_weights(counts)
        else:
            weights = effective_number_weights(counts, beta=0.9999)
        row_weight = loss_weights(sample_weight)
        return _SharpReCLTask(
            tokens=self._tokenize(views) if views is not None else tokens,
            y=torch.as_tensor(y),
            n_train=n,
            rng=rng,
            sample_weight=(
                None if row_weight is None else torch.as_tensor(row_weight, dtype=torch.float32)
            ),
            two_view=two_view,
            ablated=self._ablated(),
            log_prior=torch.as_tensor(np.log(self.class_prior_), dtype=torch.float32),
            class_weights=torch.as_tensor(weights),
        )

    def _stream_tokens(
        self, texts: TokenizedTexts, X_augmented: Any, two_view: bool
    ) -> TokenizedTexts:
        """The token container of a stream's fit: the texts, then their second view."""
        if not two_view:
            return texts
        if isinstance(X_augmented, TokenViews):  # built with the texts: no copy
            return X_augmented.tokens
        augmented = texts  # augmentation=None: the views differ only by dropout
        if isinstance(X_augmented, TokenizedTexts):  # tokenised already (a stream, a split)
            augmented = X_augmented
        elif X_augmented is not None:
            augmented = self._tokenize(check_texts(X_augmented, name="X_augmented")[0])
        if len(augmented) != len(texts) or augmented.pairs != texts.pairs:
            raise ValueError(_VIEWS_MISMATCH)
        return TokenizedTexts.concatenate([texts, augmented])

    def _finalize_fit(self, task: _SharpReCLTask) -> None:
        self._store_train_embeddings(task)

    def _store_train_embeddings(self, task: _SharpReCLTask) -> None:
        """Embed the training texts with the final model, for :meth:`explain`. The linear
        probe, fitted after this, does not change the encoder."""
        rows = np.arange(task.n_train)
        device = self._inference_device()
        module = self.module_.to(device)
        with eval_mode(module):
            features = batched_inference(
                module.embed,
                task.tokens.head(task.n_train),  # the texts come first: a view, no copy
                batch_size=2 * self._train.batch_size,
                device=device,
                verbose=self._train.verbose,
                desc="training embeddings",
            )
        self.train_embeddings_ = unit_rows(features, in_place=True)
        self.train_targets_ = task.y.numpy().astype(np.int64)
        self.train_indices_ = task.row_positions(rows)
        if task.sample_weight is not None:
            self.train_weights_ = task.sample_weight.numpy().astype(np.float64)

    def _training_batches(self, task: _SharpReCLTask, epoch: int, rng: np.random.Generator) -> Any:
        originals = task.tokens.head(task.n_train)
        # Plain random batches, not length-bucketed ones: length often goes with the class
        # (TREC's question types), and length-sorted batches holding one class each would
        # starve the in-batch contrast and the BatchNorm statistics of the other classes.
        index_batches = [
            b.indices
            for b in originals.batches(
                self._train.batch_size, shuffle=True, rng=rng, sort_by_length=False
            )
        ]
        if not task.two_view and len(index_batches) > 1 and len(index_batches[-1]) == 1:
            # One text in one view is a one-row batch, on which the heads' BatchNorm cannot
            # train: it joins the batch before it.
            index_batches[-2:] = [np.concatenate(index_batches[-2:])]
        return task.tokens.batches_of(
            index_batches, view_offset=task.n_train if task.two_view else None
        )

    def _classification_loss(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        task: _SharpReCLTask,
        row_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        loss = {"ce": logit_adjusted_cross_entropy, "focal": focal_loss, "dice": dice_loss}
        fn = loss[self.classifier_loss]
        if row_weight is None:
            return fn(logits, labels, task.log_prior, tau=self.logit_adjustment)
        per_row = fn(logits, labels, task.log_prior, tau=self.logit_adjustment, reduction="none")
        return (per_row * row_weight).mean()

    def _step(self, batch: Any, task: _SharpReCLTask) -> dict[str, Any]:
        trainer, module = task.trainer, self.module_
        device = trainer.device
        rows = batch.indices % task.n_train
        labels = task.y[torch.as_tensor(rows)].to(device)
        row_weight = task.row_weights(rows, device)
        features = module.features(batch.inputs)
        if self.classifier_loss == "linear_probe":
            ce = None  # no classification branch: the probe is fitted after training
        else:
            ce = self._classification_loss(module.classify(features), labels, task, row_weight)
        if self.contrastive_weight == 0:
            return {"loss": ce, "ce": ce.detach()}
        n_classes = len(self.classes_)
        z = nn.functional.normalize(module.feature_head(features).float(), dim=1)
        prototypes = module.prototypes()
        # Prototypes join every batch, so every class has an anchor (D-hat in the paper).
        anchors = torch.cat([z, prototypes])
        anchor_labels = torch.cat([labels, torch.arange(n_classes, device=device)])
        state = trainer.state
        ratio = _synthetic_ratio(state.step, state.total_steps)
        positives, negatives, positive_index = rebalanced_targets(
            anchors,
            anchor_labels,
            prototypes,
            n_positive=self.n_synthetic_positive,
            n_negative=self.n_synthetic_negative,
            n_hard=self.n_hard,
            synthetic_ratio=ratio,
            mixup_alpha=self.mixup_alpha,
            simple_sampling="simple_sampling" not in task.ablated,
            hard_mixup="hard_mixup" not in task.ablated,
            return_indices=True,
        )
        cl = rebalanced_contrastive_loss(
            anchors,
            anchor_labels,
            positives,
            negatives,
            temperature=self.temperature,
            class_weights=task.class_weights,
            # a sampled copy of the anchor is not its positive (eq. 11 leaves out {i})
            positive_index=positive_index,
            normalization="sum" if self.contrastive_weighting == "paper" else "mean",
            # each text anchor weighs its text's weight; the prototypes weigh 1
            sample_weight=(
                None
                if row_weight is None
                else torch.cat([row_weight, row_weight.new_ones(n_classes)])
            ),
        )
        if ce is None:
            return {"loss": self.contrastive_weight * cl, "contrastive": cl.detach()}
        return {
            "loss": ce + self.contrastive_weight * cl,
            "ce": ce.detach(),
            "contrastive": cl.detach(),
        }
