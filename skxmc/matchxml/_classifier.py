"""MatchXML as a composition: the matcher, static sentence embeddings and a ranker."""

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
from sklearn.utils.validation import check_is_fitted, check_random_state

from .._optional import require_extra

with require_extra("text", "MatchXMLClassifier"):
    pass

from .._base import THRESHOLD_CONSTRAINT, MultiLabelRankerMixin
from .._compat import HasMethods, Interval, StrOptions, _fit_context
from .._logging import progress
from .._ranking import topk_from_sparse, topk_to_csr
from .._sample_weight import drop_zero_weight_samples
from .._vectorizers import default_tfidf
from ..io import PersistenceMixin, persistent
from ..labels import LabelSpace, encode_target
from ..linear import XRLinearClassifier
from ..text._classifier import TextTransformerMixin
from ..text._config import TRAINING_FIELDS, TrainingConfig
from ..text._sentence import SentenceEmbedder
from ..tree import HierarchicalLabelTree, pifa_embeddings
from ._explain import MatchXMLExplanation, block_contributions, with_blocks
from ._matcher import MultiStageMatcher
from ._stages import (
    _default_encoder_source,
    _single_texts,
    _stack_features,
    refined_label_embeddings,
)

__all__ = ["MatchXMLClassifier", "make_matchxml"]

logger = logging.getLogger(__name__)


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
    >>> from skxmc import as_label_sets
    >>> Y = as_label_sets([["pets"], ["pets"], ["ocean"], ["ocean", "food"]] * 5)
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
        "threshold": THRESHOLD_CONSTRAINT,
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
        threshold: Any = "auto",
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
        self.threshold = threshold
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
    def fit(self, X: Any, Y: Any, sample_weight: Any = None) -> MatchXMLClassifier:
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
        sample_weight : array-like of shape (n_samples,), default=None
            Per-text weights (finite, >= 0), given to the matcher (a weighted matching
            loss, see :meth:`MultiStageMatcher.fit`) and to the ranker (instance weights:
            with :class:`~skxmc.XRLinearClassifier`, a text of weight ``w`` costs as ``w``
            copies of it, so weights all 2 are not weights all 1 there, as repeating every
            text twice is not either). The TF-IDF vocabulary and the refined tree's label
            embeddings are not weighted. A text of weight 0 is dropped before anything
            else. In a :class:`~sklearn.pipeline.Pipeline` with metadata routing, request
            it with ``set_fit_request(sample_weight=True)``.

        Returns
        -------
        self : MatchXMLClassifier
        """
        texts = _single_texts(X, type(self).__name__, fitting=True)
        sample_weight, texts, Y = drop_zero_weight_samples(sample_weight, len(texts), texts, Y)
        if sample_weight is not None and np.all(sample_weight == 1.0):
            sample_weight = None  # the unweighted fit, exactly
        routed = {} if sample_weight is None else {"sample_weight": sample_weight}
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
        self.matcher_ = matcher.fit(texts, Y_csr, tree_features=base, **routed)
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
        self.ranker_ = self._fit_ranker(
            ranker, features, Y_csr, base, fine_tuned, seed, sample_weight
        )
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
        sample_weight: np.ndarray | None = None,
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
        if sample_weight is None:
            ranker.fit(features, Y)
        else:
            ranker.fit(features, Y, sample_weight=sample_weight)
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

    # ------------------------------------------------------------------ explain

    def explain(
        self,
        X: Any,
        k: int | None = 5,
        *,
        n_features: int = 5,
        labels: Any = None,
        node_features: bool = False,
    ) -> list[list[MatchXMLExplanation]]:
        """Why each text got its top labels: the ranker's path to each label with every
        node's score, the features that contribute most, and how the label's score
        splits over TF-IDF, static sentence and fine-tuned embedding features.

        What MatchXML's matcher matches a text against are learned cluster embeddings,
        not label texts (labels are identifiers here), and the ranker that scores the
        labels is linear in the joint features; so a prediction is explained by the
        ranker (:meth:`skxmc.XRLinearClassifier.explain` on :meth:`transform`'s
        features), each TF-IDF feature named by its term and each dense dimension
        ``sentence[i]`` or ``fine_tuned[i]``.

        Parameters
        ----------
        X : sequence of str
        k : int or None, default=5
            Labels explained per text: the ``k`` that ``predict_topk(X, k)`` returns, in
            its order; None: ``top_k``.
        n_features : int, default=5
            Features listed per label (largest ``|weight * value|`` first); 0 lists none.
        labels : array-like, default=None
            Explain these labels (identifiers from ``classes_``) instead of the beam's, as
            ``predict_topk(X, k, labels=labels)`` ranks them ("why not this label?").
        node_features : bool, default=False
            Also list the top features of every inner node of each path.

        Returns
        -------
        list of list of MatchXMLExplanation
            Per text, one :class:`MatchXMLExplanation` per label, best first; its
            ``blocks`` and ``bias_contribution`` sum to the label's linear score
            (``path[-1].score``).

        Examples
        --------
        A tiny randomly initialised BERT keeps the example fast (use a real encoder such as
        ``"sentence-transformers/all-MiniLM-L6-v2"`` in practice):

        >>> import tempfile
        >>> from transformers import BertConfig, BertModel, BertTokenizerFast
        >>> from skxmc import MatchXMLClassifier, MultiStageMatcher, as_label_sets
        >>> from skxmc.text import TrainingConfig
        >>> d = tempfile.mkdtemp()
        >>> words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cats", "dogs", "fish", "sea"]
        >>> _ = open(f"{d}/vocab.txt", "w").write("\\n".join(words))
        >>> _ = BertTokenizerFast(f"{d}/vocab.txt").save_pretrained(d)
        >>> BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
        ...           num_attention_heads=2, intermediate_size=32)).save_pretrained(d)
        >>> texts = ["cats and dogs", "dogs", "fish in the sea", "sea fish"] * 5
        >>> Y = as_label_sets([["pets"], ["pets"], ["ocean"], ["ocean", "food"]] * 5)
        >>> matcher = MultiStageMatcher(encoder=d, label_embedding="pifa", max_length=8,
        ...                             training=TrainingConfig(max_epochs=1))
        >>> clf = MatchXMLClassifier(matcher=matcher, sentence_encoder=None, device="cpu")
        >>> why = clf.fit(texts, Y).explain(["sea fish"], k=1, n_features=2)[0][0]
        >>> why.label, [f.name for f in why.features]
        ('ocean', ['sea fish', 'fish'])
        >>> sorted(why.blocks)
        ['fine_tuned', 'tfidf']
        >>> total = sum(why.blocks.values()) + why.bias_contribution
        >>> bool(abs(total - why.path[-1].score) < 1e-5)
        True
        """
        check_is_fitted(self, "ranker_")
        if not isinstance(self.ranker_, XRLinearClassifier):
            raise TypeError(
                f"explain reads the ranker's tree and weights: it needs an "
                f"XRLinearClassifier ranker (the default), not a "
                f"{type(self.ranker_).__name__}."
            )
        columns = self._label_columns(labels)
        k = self._resolve_k(k, columns)
        features = self._features(X)
        if features.shape[0] == 0:
            return []
        bounds, names = self._feature_blocks()
        ranker = self.ranker_
        explained = ranker.explain(
            features,
            k,
            n_features=n_features,
            feature_names=names,
            labels=columns,
            node_features=node_features,
        )
        leaf_weights = ranker.weights_[-1]
        out = []
        for i, row in enumerate(explained):
            x = features[i]
            out.append(
                [
                    with_blocks(
                        e,
                        self.classes_[int(e.label)],
                        block_contributions(x, leaf_weights, e.path[-1].node, ranker.bias, bounds),
                    )
                    for e in row
                ]
            )
        return out

    def _feature_blocks(self) -> tuple[dict[str, int], np.ndarray]:
        """The end column of each block of the ranker features (those in use), and one
        name per column: the vectoriser's terms, ``sentence[i]``, ``fine_tuned[i]``."""
        n_sparse = self.vectorizer_.transform([""]).shape[1]
        n_fine = self.matcher_._n_features_out if self.fine_tuned_weight > 0 else 0
        n_sentence = self.n_features_ranker_ - n_sparse - n_fine
        get_names = getattr(self.vectorizer_, "get_feature_names_out", None)
        sparse_names = (
            [f"tfidf[{j}]" for j in range(n_sparse)]
            if get_names is None
            else [str(name) for name in get_names()]
        )
        names = np.asarray(
            sparse_names
            + [f"sentence[{j}]" for j in range(n_sentence)]
            + [f"fine_tuned[{j}]" for j in range(n_fine)],
            dtype=object,
        )
        bounds = {"tfidf": n_sparse}
        if n_sentence:
            bounds["sentence"] = n_sparse + n_sentence
        if n_fine:
            bounds["fine_tuned"] = self.n_features_ranker_
        return bounds, names

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
