"""label2vec: dense label embeddings learned from label co-occurrence (MatchXML, III-B).

Every training instance is one "sentence" whose "words" are its positive labels; gensim's
Word2Vec Skip-gram with negative sampling then learns one vector per label, so that labels
that are assigned together end up close. MatchXML (Ye et al., 2024) builds its hierarchical
label tree from these vectors instead of PIFA's sparse TF-IDF aggregates.

Public API: :class:`Label2VecTransformer`. The label tree uses it through
``HierarchicalLabelTree(label_embedding="label2vec")`` (or ``"pifa+label2vec"``, or an
instance: ``label_embedding=Label2VecTransformer(...)``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.preprocessing import normalize
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from skxmc._compat import Interval, _fit_context
from skxmc._logging import progress
from skxmc._optional import require
from skxmc.io import PersistenceMixin, persistent
from skxmc.labels import LabelSpace, encode_labels

__all__ = ["Label2VecTransformer"]

logger = logging.getLogger(__name__)
#: gensim's own log records are re-emitted under this logger while ``fit`` runs.
GENSIM_LOGGER_NAME = f"{__name__}.gensim"

# gensim's compiled training routines truncate sentences to this many tokens
# (gensim.models.word2vec_inner.MAX_WORDS_IN_BATCH).
_MAX_SENTENCE_LENGTH = 10000
# The default ``negative`` (the paper's), accepted however few labels there are.
_DEFAULT_NEGATIVE = 20
# What needs gensim (the [label2vec] extra), for the ImportError when it is missing.
_NEEDED_BY = (
    "Label2VecTransformer (also HierarchicalLabelTree and MatchXMLClassifier with "
    "label_embedding='label2vec' or 'pifa+label2vec')"
)


def _stable_hash(token: str) -> int:
    """Hash of a token that does not depend on ``PYTHONHASHSEED`` (gensim's ``hashfxn``)."""
    return zlib.crc32(token.encode("utf-8"))


def _join(thread: threading.Thread) -> None:
    """Wait a little for ``thread`` (a function of its own so that tests can interrupt it)."""
    thread.join(0.1)


# Containers that hold the labels of one instance (rows of a sequence of label sets).
_LABEL_SET_TYPES = (list, tuple, AbstractSet, np.ndarray)


def _check_not_texts(Y: Any, name: str) -> None:
    """Reject a 1-D sequence of strings: what a column of texts looks like.

    As a 1-D target (one label per instance) it would give label2vec no co-occurrence to
    learn from anyway; label sets and 1-D numeric targets pass. Other malformed input is
    left to skxmc's label validation.
    """
    if isinstance(Y, (list, tuple)):
        rows = Y
    elif hasattr(Y, "__array__") and not sp.issparse(Y) and np.ndim(Y) == 1:
        rows = np.asarray(Y)
        if rows.dtype.kind not in "OUS":
            return
    else:
        return
    if len(rows) and all(isinstance(row, (str, bytes)) for row in rows):
        raise ValueError(
            f"{name} holds bare strings ({name}[0] = {str(rows[0])[:50]!r}), which look like "
            f"texts: Label2VecTransformer learns label vectors from label sets, one collection "
            f"of labels per instance (e.g. [['cat', 'pet'], ['dog']]), not from texts. Fit it "
            f"on the labels, not on the texts of a text pipeline; for one label per instance "
            f"pass [[label] for label in {name}]."
        )


def _is_label_sets(y: Any) -> bool:
    """Whether ``y`` is a multi-label target: a matrix or a sequence of label collections."""
    if sp.issparse(y):
        return True
    shape = getattr(y, "shape", None)
    if shape is not None and len(shape) == 2:
        return shape[1] != 1  # a column vector is a 1-D target
    if isinstance(y, (list, tuple)) or getattr(getattr(y, "dtype", None), "kind", "") == "O":
        return any(isinstance(row, _LABEL_SET_TYPES) for row in y)
    return False


class _LabelSentences:
    """Re-iterable corpus: the label tokens of every instance that has labels.

    Iterating yields one list of tokens per instance, in instance order. With ``shuffle``,
    the order of the labels inside each sentence is drawn afresh at every iteration (gensim
    iterates the corpus once per epoch). Iteration stops early once ``stop`` is set.
    """

    def __init__(
        self,
        Y: sp.csr_matrix,
        tokens: np.ndarray,
        *,
        shuffle: bool,
        rng: np.random.RandomState,
        stop: threading.Event,
    ) -> None:
        lengths = np.diff(Y.indptr)
        nonempty = np.flatnonzero(lengths)
        self.bounds = list(zip(Y.indptr[nonempty].tolist(), Y.indptr[nonempty + 1].tolist()))
        self.indices = Y.indices
        self.row_of = np.repeat(np.arange(Y.shape[0]), lengths) if shuffle else None
        self.tokens = tokens
        self.shuffle = shuffle
        self.rng = rng
        self.stop = stop

    def __len__(self) -> int:
        return len(self.bounds)

    def __iter__(self) -> Iterator[list[str]]:
        indices = self.indices
        if self.shuffle:
            # Sort by (row, random key): a random permutation inside every row.
            order = np.lexsort((self.rng.random_sample(len(indices)), self.row_of))
            indices = indices[order]
        flat = self.tokens[indices].tolist()
        for a, b in self.bounds:
            if self.stop.is_set():
                return
            yield flat[a:b]


class _Forward(logging.Handler):
    """Re-emit gensim's log records under the ``skxmc`` logger tree."""

    def __init__(self, target: logging.Logger, stop: threading.Event) -> None:
        super().__init__()
        self.target = target
        self.stop = stop

    def emit(self, record: logging.LogRecord) -> None:
        # After an interruption gensim warns that the epochs saw fewer sentences than
        # announced; our own warning says what happened instead.
        if self.stop.is_set() or not self.target.isEnabledFor(record.levelno):
            return
        copy = logging.makeLogRecord(record.__dict__)
        copy.name = self.target.name
        self.target.handle(copy)


@contextlib.contextmanager
def _gensim_logging_routed(verbose: int, stop: threading.Event) -> Iterator[None]:
    """While active, gensim's records (WARNING+, or INFO+ with ``verbose >= 2``) go to
    :data:`GENSIM_LOGGER_NAME` instead of propagating from the ``gensim`` logger."""
    gensim_logger = logging.getLogger("gensim")
    level = logging.INFO if verbose >= 2 else logging.WARNING
    handler = _Forward(logging.getLogger(GENSIM_LOGGER_NAME), stop)
    handler.setLevel(level)
    saved = gensim_logger.level, gensim_logger.propagate
    gensim_logger.addHandler(handler)
    gensim_logger.setLevel(level)
    gensim_logger.propagate = False
    try:
        yield
    finally:
        gensim_logger.removeHandler(handler)
        gensim_logger.setLevel(saved[0])
        gensim_logger.propagate = saved[1]


def _epoch_callback(on_epoch_end: Any) -> Any:
    """A gensim callback object calling ``on_epoch_end()`` after every epoch."""
    callbacks = require("gensim.models.callbacks", "label2vec", _NEEDED_BY)

    class _Callback(callbacks.CallbackAny2Vec):
        def on_epoch_end(self, model: Any) -> None:
            on_epoch_end()

    return _Callback()


def _check_fit_arguments(Y: Any, y: Any) -> None:
    """Refuse label sets passed as ``y`` and texts passed as ``Y`` (see ``fit``)."""
    if y is not None and _is_label_sets(y):
        raise ValueError(
            "Label2VecTransformer.fit got label sets as y, which it ignores: it learns "
            "from its first argument Y (the label sets), not from X and y. In a pipeline "
            "fitted as pipe.fit(X, Y), Label2VecTransformer would read X (e.g. texts) as "
            "label sets; fit it on the labels instead: Label2VecTransformer().fit(Y)."
        )
    _check_not_texts(Y, "Y")


def _encode_training_labels(Y: Any) -> tuple[sp.csr_matrix, np.ndarray]:
    """``Y`` as a CSR indicator matrix and its label identifiers; it needs a positive label."""
    Y_csr, classes = encode_labels(Y, name="Y")
    if Y_csr.nnz == 0:
        raise ValueError(
            "Y has no positive labels: label2vec learns label vectors from the labels "
            "assigned to each instance; pass instances with at least one label."
        )
    return Y_csr, classes


def _warn_if_truncated(longest: int) -> None:
    """Warn (at the caller of ``fit``) when gensim will truncate the longest sentence."""
    if longest > _MAX_SENTENCE_LENGTH:
        warnings.warn(
            f"an instance has {longest} labels; gensim trains on the first "
            f"{_MAX_SENTENCE_LENGTH} labels of an instance only.",
            UserWarning,
            stacklevel=4,  # here, fit, sklearn's fit wrapper, the caller
        )


def _label_vectors(model: Any, n_labels: int, vector_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The L2-normalised vector of every label trained in ``model`` (zero rows for the
    others), and which labels have one."""
    keep = np.fromiter((int(t) for t in model.wv.index_to_key), np.int64, len(model.wv))
    E = np.zeros((n_labels, vector_size), dtype=np.float32)
    E[keep] = model.wv.vectors
    has_vector = np.zeros(n_labels, dtype=bool)
    has_vector[keep] = True
    return normalize(E, copy=False), has_vector


@persistent
class Label2VecTransformer(
    PersistenceMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Label embeddings by Skip-gram over label co-occurrence (MatchXML's label2vec).

    The input is a label matrix (what :class:`~sklearn.preprocessing.MultiLabelBinarizer`
    produces) or label collections, not features. Each training instance becomes a
    "sentence" made of its positive labels, and gensim's :class:`~gensim.models.Word2Vec`
    trains a Skip-gram model (``sg=1``) with negative sampling on these sentences
    (section III-B of the MatchXML paper): labels that occur on the same instances get
    similar vectors. The vectors are L2-normalised, one row per label. ``transform``
    embeds label sets (mean of their label vectors), so the result can also serve as a
    feature.

    Parameters mirror gensim's names; the defaults are the paper's (Table II, Eurlex-4K
    column) with the two modifications of section III-B: the window spans every label of
    an instance and frequent labels are not subsampled.

    Parameters
    ----------
    vector_size : int, default=100
        Dimension of the label vectors.
    window : int or None, default=None
        Largest distance between a label and its context labels inside a sentence.
        ``None``: the largest number of labels on one training instance (stored in
        ``window_``), so that every pair of labels of an instance is a training pair, as
        the paper prescribes (label order carries no meaning).
    negative : int, default=20
        Negative samples per positive pair, drawn with replacement among the labels. At
        most the number of labels that get a vector (or 20): beyond that every pair draws
        each label several times, which only multiplies the training time.
    ns_exponent : float, default=0.5
        Exponent of the negative-sampling distribution (label frequency to this power):
        1.0 samples proportionally to frequency, 0.0 uniformly, a negative value samples
        rare labels more often.
    epochs : int, default=20
        Passes over the sentences.
    sample : float, default=0
        Threshold for downsampling frequent labels (gensim's ``sample``). The paper uses
        none (0): in XMC frequent labels are as informative as rare ones. (MatchXML's
        published code passes 0.1; gensim's own default is 1e-3.)
    alpha : float, default=0.025
        Initial learning rate; it decreases linearly to ``min_alpha`` over training.
    min_alpha : float, default=1e-4
        Final learning rate.
    min_count : int, default=1
        Labels with fewer positive instances get no vector (a zero row, listed in
        ``unseen_labels_``). The default keeps every label that occurs.
    shuffle : bool, default=False
        Draw a new order of the labels inside each sentence at every epoch. Label order is
        arbitrary (column order, i.e. sorted label identifiers), so it only matters when the
        window does not cover whole sentences (a ``window`` smaller than the longest
        label set, or ``shrink_windows=True``): without shuffling, labels whose identifiers
        sort close together would be context pairs more often; with shuffling every pair
        of an instance has the same chance. With the default window (every pair is
        trained at every epoch) shuffling only changes the order of the updates.
        Shuffling costs a permutation of all label occurrences per epoch.
    shrink_windows : bool, default=False
        gensim's dynamic window: draw each target's window uniformly in ``[1, window]``,
        favouring close context labels. Off by default (no distance between labels).
    n_jobs : int, default=None
        Worker threads of gensim; ``None`` means 1 unless in a
        :func:`joblib.parallel_config` context, ``-1`` all processors. Results are
        reproducible only with one worker (thread scheduling changes the update order).
    random_state : int, RandomState instance or None, default=0
        Seeds gensim (initial vectors, negative samples) and the shuffling. With one
        worker (``n_jobs=None`` or 1) the same seed gives identical embeddings in every
        run: labels reach gensim as tokens made of their column index, and its hash
        function is replaced by a CRC32 hash, so ``PYTHONHASHSEED`` plays no role. None
        draws a new seed from numpy's global random state at every fit.
    verbose : int, default=0
        ``0``: silent, except that gensim's warnings are logged. ``>= 1``: a progress bar
        over epochs and a summary line (INFO) on the ``skxmc.label2vec`` logger.
        ``>= 2``: gensim's own INFO records too. During ``fit`` gensim's records are
        re-emitted by the ``skxmc.label2vec.gensim`` logger (they do not reach the
        ``gensim`` logger's handlers nor propagate from it).

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        Label identifiers, the row order of ``embeddings_`` (``arange(n_labels)`` for a
        label matrix).
    embeddings_ : ndarray of shape (n_labels, vector_size), float32
        One L2-normalised vector per label; zero rows for ``unseen_labels_``.
    unseen_labels_ : ndarray
        Labels without a vector: columns of a label matrix with no positive instance (a
        label space wider than the training labels), and labels with fewer than
        ``min_count`` positive instances. Labels given as collections always occur.
    window_ : int
        The window used (``window``, or the largest number of labels of an instance).
    n_epochs_ : int
        Epochs completed (``epochs`` unless training was interrupted).

    See Also
    --------
    skxmc.HierarchicalLabelTree : ``label_embedding="label2vec"`` builds the tree
        from these vectors, ``"pifa+label2vec"`` from their concatenation with PIFA.
    skxmc.tree.pifa_embeddings : The sparse TF-IDF label embeddings label2vec replaces.

    Notes
    -----
    Labels that never occur together with another label receive no training pair: their
    vector stays gensim's random initial vector (normalised), which carries no
    information. This happens for labels that only occur alone on their instances, and
    for every label when all instances have a single label (or when there is a single
    label). Empty instances are skipped. Sentences are truncated by gensim at 10,000
    labels.

    ``fit`` runs gensim in a background thread: Ctrl-C stops it after the current
    sentences, with a warning, and leaves the vectors trained so far. The gensim model is
    not kept, so the fitted transformer pickles and round-trips through ``save`` /
    :func:`skxmc.load` as arrays only.

    References
    ----------
    H. Ye, R. Sunderraman, S. Ji, "MatchXML: An Efficient Text-Label Matching Framework
    for Extreme Multi-Label Text Classification", IEEE TKDE, 2024, section III-B.

    Examples
    --------
    >>> from skxmc.label2vec import Label2VecTransformer
    >>> Y = [["cat", "pet"], ["dog", "pet"], ["cat", "dog", "pet"],
    ...      ["car", "road"], ["car", "road", "truck"], ["road", "truck"]] * 20
    >>> l2v = Label2VecTransformer(vector_size=8, epochs=30, random_state=0).fit(Y)
    >>> l2v.classes_
    array(['car', 'cat', 'dog', 'pet', 'road', 'truck'], dtype=object)
    >>> l2v.embeddings_.shape, l2v.window_
    ((6, 8), 3)
    >>> similarity = l2v.embeddings_ @ l2v.embeddings_.T
    >>> bool(similarity[0, 4] > similarity[0, 1])  # car is closer to road than to cat
    True
    >>> l2v.transform([["cat", "pet"], ["truck"]]).shape
    (2, 8)
    """

    _parameter_constraints: ClassVar[dict] = {
        "vector_size": [Interval(Integral, 1, None, closed="left")],
        "window": [Interval(Integral, 1, None, closed="left"), None],
        "negative": [Interval(Integral, 1, None, closed="left")],
        "ns_exponent": [Interval(Real, None, None, closed="neither")],
        "epochs": [Interval(Integral, 1, None, closed="left")],
        "sample": [Interval(Real, 0, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "min_alpha": [Interval(Real, 0, None, closed="left")],
        "min_count": [Interval(Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "shrink_windows": ["boolean"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        vector_size: int = 100,
        window: int | None = None,
        negative: int = 20,
        ns_exponent: float = 0.5,
        epochs: int = 20,
        sample: float = 0.0,
        alpha: float = 0.025,
        min_alpha: float = 1e-4,
        min_count: int = 1,
        shuffle: bool = False,
        shrink_windows: bool = False,
        n_jobs: int | None = None,
        random_state: Any = 0,
        verbose: int = 0,
    ) -> None:
        self.vector_size = vector_size
        self.window = window
        self.negative = negative
        self.ns_exponent = ns_exponent
        self.epochs = epochs
        self.sample = sample
        self.alpha = alpha
        self.min_alpha = min_alpha
        self.min_count = min_count
        self.shuffle = shuffle
        self.shrink_windows = shrink_windows
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, Y: Any, y: Any = None) -> Label2VecTransformer:
        """Train the label vectors on the label sets of the training instances.

        Parameters
        ----------
        Y : sparse matrix, ndarray or sequence of label collections
            Labels of the training instances in any format skxmc accepts:
            a 0/1 indicator matrix of shape (n_samples, n_labels), label collections
            (``[["a", "b"], ["c"]]``), or a 1-D numeric target (one label per instance,
            which gives no co-occurrence). A 1-D sequence of strings is rejected: it is
            what texts look like (``make_pipeline(Label2VecTransformer()).fit(texts, Y)``
            would otherwise learn from the texts); wrap single labels as
            ``[[label] for label in y]``.
        y : None or 1-D array-like, default=None
            Ignored; pipelines and ``ColumnTransformer`` pass the target of the final
            estimator (one value per instance) to every step. A multi-label ``y`` (a 2-D
            matrix, a sparse matrix or a sequence of label collections) raises a
            ValueError: it means that the label sets to learn from were passed as ``y``
            (as in a pipeline fitted on texts and labels) instead of as ``Y``.

        Returns
        -------
        self : Label2VecTransformer
            Fitted transformer.

        Raises
        ------
        ValueError
            For bare-string rows in ``Y`` or a multi-label ``y`` (see above), for
            ``Y`` without any positive label, and for a ``negative`` larger than both the
            number of labels that get a vector and 20.
        """
        _check_fit_arguments(Y, y)
        Word2Vec = require("gensim.models", "label2vec", _NEEDED_BY).Word2Vec
        Y_csr, classes = _encode_training_labels(Y)
        n_labels = len(classes)
        longest = int(np.diff(Y_csr.indptr).max())
        window = longest if self.window is None else int(self.window)
        _warn_if_truncated(longest)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        workers = max(1, int(effective_n_jobs(self.n_jobs)))
        counts = np.bincount(Y_csr.indices, minlength=n_labels)
        self._check_negative(int((counts >= self.min_count).sum()))
        tokens = np.array([str(j) for j in range(n_labels)], dtype=object)
        stop = threading.Event()
        corpus = _LabelSentences(Y_csr, tokens, shuffle=self.shuffle, rng=rng, stop=stop)

        t0 = time.perf_counter()
        with _gensim_logging_routed(self.verbose, stop):
            model = self._word2vec(Word2Vec, window=window, seed=seed, workers=workers)
            self._build_vocab(model, tokens, counts, corpus_count=len(corpus))
            self.n_epochs_ = self._train(model, corpus, stop)
        seconds = time.perf_counter() - t0

        self.embeddings_, has_vector = _label_vectors(model, n_labels, self.vector_size)
        self.classes_ = classes
        self.unseen_labels_ = classes[~has_vector]
        self.window_ = window
        progress(
            logger,
            self.verbose,
            "label2vec: %d labels (%d without a vector), %d sentences (longest %d "
            "labels), window %d, %d/%d epochs in %.2fs with %d worker(s)",
            n_labels,
            len(self.unseen_labels_),
            len(corpus),
            longest,
            window,
            self.n_epochs_,
            self.epochs,
            seconds,
            workers,
        )
        return self

    def _word2vec(self, Word2Vec: type, *, window: int, seed: int, workers: int) -> Any:
        """An untrained gensim Skip-gram model (``sg=1``, negative sampling) with these
        parameters; labels are hashed by CRC32, so ``PYTHONHASHSEED`` plays no role."""
        return Word2Vec(
            vector_size=self.vector_size,
            window=window,
            min_count=self.min_count,
            sample=self.sample,
            seed=seed,
            workers=workers,
            alpha=self.alpha,
            min_alpha=self.min_alpha,
            sg=1,
            hs=0,
            negative=self.negative,
            ns_exponent=self.ns_exponent,
            epochs=self.epochs,
            hashfxn=_stable_hash,
            shrink_windows=self.shrink_windows,
        )

    def _build_vocab(
        self, model: Any, tokens: np.ndarray, counts: np.ndarray, *, corpus_count: int
    ) -> None:
        """Give ``model`` its vocabulary from the label counts (labels below ``min_count``
        are left out by gensim); refuse an empty vocabulary."""
        # Counts in column order: ties in frequency keep column order in gensim's (stable)
        # frequency sort, so the vocabulary never depends on hashing.
        model.build_vocab_from_freq(
            {tokens[j]: int(counts[j]) for j in np.flatnonzero(counts)},
            corpus_count=corpus_count,
        )
        if len(model.wv) == 0:
            raise ValueError(
                f"no label has at least min_count={self.min_count} positive instances "
                f"(the most frequent has {int(counts.max())}); lower min_count."
            )

    def _check_negative(self, n_vocab: int) -> None:
        """Refuse a ``negative`` far above the number of labels: gensim's cost grows with
        it, with nothing more to learn."""
        if n_vocab == 0 or self.negative <= max(n_vocab, _DEFAULT_NEGATIVE):
            return  # no vocabulary: fit reports min_count with its own message
        raise ValueError(
            f"negative={self.negative} is more than the {n_vocab} labels that get a vector: "
            f"every positive pair would draw each label about "
            f"{self.negative / n_vocab:,.0f} times as a negative, which multiplies the "
            f"training time without adding information. Pass negative <= "
            f"{max(n_vocab, _DEFAULT_NEGATIVE)}."
        )

    def _train(self, model: Any, corpus: _LabelSentences, stop: threading.Event) -> int:
        """Run gensim's training in a thread; Ctrl-C stops it cleanly. Returns epochs done."""
        done = [0]
        bar = None
        if self.verbose:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.epochs, desc="label2vec epochs", unit="epoch")

        def epoch_end() -> None:
            if not stop.is_set():
                done[0] += 1
                if bar is not None:
                    bar.update()

        errors: list[BaseException] = []

        def run() -> None:
            try:
                model.train(
                    corpus,
                    total_examples=len(corpus),
                    epochs=self.epochs,
                    callbacks=[_epoch_callback(epoch_end)],
                )
            except BaseException as exc:  # re-raised in the calling thread
                errors.append(exc)

        thread = threading.Thread(target=run, name="skxmc-label2vec", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                try:
                    _join(thread)
                except KeyboardInterrupt:
                    if not stop.is_set():
                        stop.set()
                        warnings.warn(
                            f"label2vec training interrupted by the user after {done[0]} of "
                            f"{self.epochs} epochs; the label vectors trained so far are kept.",
                            UserWarning,
                            stacklevel=4,
                        )
        finally:
            if bar is not None:
                bar.close()
        if errors:
            raise errors[0]
        return done[0]

    def transform(self, Y: Any) -> np.ndarray:
        """Embed label sets: the L2-normalised mean of their label vectors.

        Parameters
        ----------
        Y : sparse matrix, ndarray or sequence of label collections
            Label sets over ``classes_`` (an indicator matrix must have ``len(classes_)``
            columns). Labels not in ``classes_`` are ignored. A 1-D sequence of strings
            (texts, by its look) is rejected, as in :meth:`fit`.

        Returns
        -------
        ndarray of shape (n_samples, vector_size), float32
            Unit rows; zero rows for instances without a label that has a vector.
        """
        check_is_fitted(self)
        _check_not_texts(Y, "Y")
        Y_csr = LabelSpace(self.classes_).transform(Y, name="Y").Y
        # The mean and the sum of the label vectors differ by a positive factor only.
        Z = np.asarray(Y_csr @ self.embeddings_, dtype=np.float32)
        return normalize(Z, copy=False)

    @property
    def _n_features_out(self) -> int:
        return self.embeddings_.shape[1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The input is a label matrix / label collections, as for sklearn's
        # MultiLabelBinarizer: not a 2-D array of numeric features (continuous values
        # are rejected), so sklearn's feature-based checks do not apply.
        tags.input_tags.two_d_array = False
        tags.input_tags.sparse = True
        tags.target_tags.required = False
        tags.target_tags.one_d_labels = True
        tags.target_tags.two_d_labels = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags
