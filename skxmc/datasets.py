"""Data loaders: JSON-lines text sets, Extreme Classification Repository BoW files, demo data."""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

from .labels import as_label_sets

__all__ = [
    "get_data_dir",
    "load_demo",
    "load_text_jsonl",
    "load_xc_bow",
    "make_imbalanced",
    "make_xmc_classification",
]

PathLike = str | os.PathLike

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _decoded_lines(stream: Iterable[bytes], name: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of the UTF-8 lines of a binary stream (plain or gzip).

    Decoding line by line, not through a text wrapper, is what lets a bad byte be reported
    with its line; a truncated or corrupt gzip stream becomes a ``ValueError`` naming
    ``name`` instead of a bare ``EOFError`` / ``BadGzipFile`` / ``zlib.error``.
    """
    line_no = 0
    try:
        for line_no, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{name}: line {line_no} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at "
                    f"byte {exc.start + 1} of the line); save the file as UTF-8."
                ) from None
            yield line_no, line
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ValueError(
            f"{name}: the gzip data is truncated or corrupt ({exc}); detected after line {line_no}."
        ) from None
    except OSError as exc:
        if exc.filename is None:  # a read error (EIO, ...) carries no file name by itself
            exc.filename = name
        raise


def _lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 text file, gzip-compressed or not (detected from
    the content); errors name the file (and the line where known)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} does not exist or is not a file.")
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        if gzipped:
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield from _decoded_lines(unzipped, str(path))
        else:
            yield from _decoded_lines(raw, str(path))


def _json_records(lines: Iterable[tuple[int, str]], name: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of JSON lines; blank lines are skipped."""
    for line_no, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: line {line_no} is not valid JSON ({exc.msg}).") from None
        if not isinstance(record, dict):
            raise ValueError(f"{name}: line {line_no} is not a JSON object.")
        yield line_no, record


def _records(path: PathLike) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of a JSON-lines file (plain or gzip)."""
    return _json_records(_lines(path), str(path))


def load_text_jsonl(
    path: PathLike,
    *,
    text_field: str = "text",
    text_pair_field: str = "text_pair",
) -> tuple[list, np.ndarray]:
    """Load a text classification set stored as JSON lines (``.jsonl`` or ``.jsonl.gz``).

    Each line is one object: multi-label ``{"text": str, "labels": [...]}`` or single-label
    ``{"text": str, "label": ...}``. Sentence-pair sets add ``"text_pair"``; the texts are
    then ``(text, text_pair)`` tuples. Other fields are ignored. Gzip is detected from the
    file content, not its name.

    Parameters
    ----------
    path : str or path-like
        The file.
    text_field : str, default="text"
        Field holding the text.
    text_pair_field : str, default="text_pair"
        Field holding the second text of sentence-pair sets.

    Returns
    -------
    texts : list of str, or list of (str, str) tuples for sentence-pair sets
    labels : ndarray of shape (n_samples,)
        Multi-label files: an object array of label sets (``frozenset``; see
        :func:`skxmc.as_label_sets`: the form sklearn's ``GridSearchCV`` and
        ``cross_val_score`` accept with their default ``cv``). Single-label files: the
        labels.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    ValueError
        For malformed content, naming the file and the line: invalid JSON or UTF-8, a
        missing or mistyped field, a truncated or corrupt gzip stream.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> from skxmc.datasets import load_text_jsonl
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "toy.jsonl"
    >>> _ = path.write_text('{"text": "a cat", "labels": ["pet"]}\\n'
    ...                     '{"text": "a car", "labels": []}\\n')
    >>> texts, labels = load_text_jsonl(path)
    >>> texts
    ['a cat', 'a car']
    >>> labels
    array([LabelSet({'pet'}), LabelSet()], dtype=object)
    """
    with closing(_records(path)) as records:  # closes the file on an early error too
        return _text_label_records(records, str(path), text_field, text_pair_field)


def _text_label_records(
    records: Iterable[tuple[int, dict]], name: str, text_field: str, text_pair_field: str
) -> tuple[list, np.ndarray]:
    """``(texts, labels)`` of :func:`load_text_jsonl` from numbered JSON records (of a
    file, or of standard input for ``skxmc fit --train -``); ``name`` names the source in
    errors."""
    texts: list = []
    labels: list = []
    kind: str | None = None
    pairs: bool | None = None
    for line_no, record in records:
        where = f"{name}: line {line_no}"
        text = record.get(text_field)
        if text_field not in record:
            raise ValueError(
                f"{where}: the record has no {text_field!r} field (it has {sorted(record)!r:.80})."
            )
        if not isinstance(text, str):
            raise ValueError(f"{where}: field {text_field!r} must be a string, got {text!r:.60}.")
        has_pair = text_pair_field in record
        if pairs is None:
            pairs = has_pair
        elif has_pair != pairs:
            raise ValueError(f"{where}: {text_pair_field!r} present on some lines only.")
        if has_pair:
            pair = record[text_pair_field]
            if not isinstance(pair, str):
                raise ValueError(f"{where}: field {text_pair_field!r} must be a string.")
            text = (text, pair)
        this_kind = "labels" if "labels" in record else "label" if "label" in record else None
        if this_kind is None:
            raise ValueError(f"{where}: the record has neither 'labels' nor 'label'.")
        if kind is None:
            kind = this_kind
        elif kind != this_kind:
            raise ValueError(f"{where}: mixes 'label' and 'labels' records in one file.")
        value = record[this_kind]
        if this_kind == "labels" and not isinstance(value, list):
            raise ValueError(f"{where}: 'labels' must be a list, got {type(value).__name__}.")
        if this_kind == "label" and isinstance(value, (list, dict)):
            raise ValueError(f"{where}: 'label' must be a single label; use 'labels' for lists.")
        texts.append(text)
        labels.append(value)
    if kind == "label":
        return texts, np.asarray(labels)
    return texts, as_label_sets(labels, indicator=False)


def _parse_xc_header(line: str, path: PathLike) -> tuple[int, int, int]:
    """``(num_points, num_features, num_labels)`` from the header line of an XC BoW file."""
    header = line.split()
    try:
        n_points, n_features, n_labels = (int(v) for v in header)
    except ValueError:
        raise ValueError(
            f"{path}: line 1 must be the header 'num_points num_features num_labels', "
            f"got {' '.join(header)!r:.80}."
        ) from None
    return n_points, n_features, n_labels


def _parse_xc_point(
    line: str, n_features: int, n_labels: int, path: PathLike, line_no: int
) -> tuple[list[int], list[int], list[float]]:
    """Label ids, feature ids and feature values of one point line ``l1,l2 f:v f:v ...``,
    checked against the header's ranges; errors name the file and the line."""
    line = line.rstrip("\r\n")
    where = f"{path}: line {line_no}"
    if not line.strip():
        raise ValueError(f"{where} is empty; every point needs a line.")
    try:
        first, _, rest = line.partition(" ")
        if ":" in first:  # no labels: the line starts with a feature
            first, rest = "", line
        labels = [int(v) for v in first.split(",")] if first else []
        pairs = [item.split(":") for item in rest.split()]
        features = [int(f) for f, _ in pairs]
        values = [float(v) for _, v in pairs]
    except ValueError:
        raise ValueError(
            f"{where} is malformed ({line[:80]!r}); expected 'l1,l2 f:v f:v ...'."
        ) from None
    if labels and not 0 <= min(labels) <= max(labels) < n_labels:
        raise ValueError(f"{where} has a label id outside [0, {n_labels}) declared in the header.")
    if features and not 0 <= min(features) <= max(features) < n_features:
        raise ValueError(
            f"{where} has a feature id outside [0, {n_features}) declared in the header."
        )
    # float() reads 'nan' and 'inf' (and a large exponent overflows to inf); no model can
    # use them, and float32 storage would turn 1e39 into inf too.
    bad = next((v for v in values if not math.isfinite(v) or abs(v) > _FLOAT32_MAX), None)
    if bad is not None:
        raise ValueError(
            f"{where} has a non-finite or float32-overflowing feature value ({bad!r}); "
            f"feature values must be finite numbers."
        )
    return labels, features, values


def _summed_float32_csr(
    data: Any, indices: list[int], indptr: list[int], shape: tuple[int, int]
) -> sp.csr_matrix:
    """A float32 CSR matrix with int32 indices, duplicates summed and indices sorted."""
    M = sp.csr_matrix(
        (np.asarray(data, dtype=np.float32), np.asarray(indices, dtype=np.int32), indptr),
        shape=shape,
    )
    M.sum_duplicates()
    M.sort_indices()
    return M


def load_xc_bow(path: PathLike) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Load a file in the Extreme Classification Repository bag-of-words text format.

    The first line is the header ``num_points num_features num_labels``; each following
    line is one point: ``l1,l2,... f1:v1 f2:v2 ...`` with 0-based label and feature ids
    (a point without labels starts with a space). The header is checked against the body.

    Parameters
    ----------
    path : str or path-like
        The file (plain or gzip).

    Returns
    -------
    X : csr_matrix of float32, shape (num_points, num_features)
    Y : csr_matrix of float32, shape (num_points, num_labels)

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    ValueError
        For malformed content, naming the file and the line: a bad header or point line,
        ids outside the header's ranges, non-finite values, invalid UTF-8, a truncated or
        corrupt gzip stream, or a point count that differs from the header.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from skxmc.datasets import load_xc_bow
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "toy.txt"
    >>> _ = path.write_text("2 3 2\\n0,1 0:1 2:0.5\\n1 1:2\\n")
    >>> X, Y = load_xc_bow(path)
    >>> X.toarray()
    array([[1. , 0. , 0.5],
           [0. , 2. , 0. ]], dtype=float32)
    >>> Y.toarray()
    array([[1., 1.],
           [0., 1.]], dtype=float32)
    """
    with closing(_lines(path)) as lines:  # closes the file on an early error too
        _, header = next(lines, (1, ""))
        n_points, n_features, n_labels = _parse_xc_header(header, path)
        x_indptr, x_indices, x_data = [0], [], []
        y_indptr, y_indices = [0], []
        for line_no, line in lines:
            labels, features, values = _parse_xc_point(line, n_features, n_labels, path, line_no)
            y_indices.extend(labels)
            x_indices.extend(features)
            x_data.extend(values)
            x_indptr.append(len(x_indices))
            y_indptr.append(len(y_indices))
    n_read = len(x_indptr) - 1
    if n_read != n_points:
        raise ValueError(
            f"{path}: the header declares {n_points} points but the file has {n_read}."
        )
    X = _summed_float32_csr(x_data, x_indices, x_indptr, (n_points, n_features))
    Y = _summed_float32_csr(np.ones(len(y_indices)), y_indices, y_indptr, (n_points, n_labels))
    Y.data[:] = 1.0  # a label listed twice on one line is still one label
    return X, Y


def get_data_dir(required: bool = False) -> Path | None:
    """The folder with the reference datasets: ``$SKXMC_DATA``, else ``../shared/data``
    next to the current directory or to the source checkout. ``None`` when absent (or an
    error if ``required``)."""
    candidates: list[Path] = []
    if os.environ.get("SKXMC_DATA"):
        candidates.append(Path(os.environ["SKXMC_DATA"]))
    candidates += [
        Path.cwd().parent / "shared" / "data",
        Path(__file__).resolve().parents[2] / "shared" / "data",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    if required:
        raise FileNotFoundError(
            "No dataset folder found: set SKXMC_DATA to the folder holding the datasets "
            f"(looked in {[str(c) for c in candidates]})."
        )
    return None


def load_demo() -> Bunch:
    """The demo data shipped with skxmc: a subset of TIBKAT records with GND subjects.

    English catalogue records (title + abstract) of the TIB Leibniz Information Centre
    for Science and Technology, labelled with GND subject ids, from the SemEval-2025 Task 5
    (LLMs4Subjects) dataset, licensed CC BY-SA 4.0 (see ``skxmc/data/README.md``).

    Returns
    -------
    Bunch
        ``train_texts``, ``test_texts`` (lists of str), ``train_labels``,
        ``test_labels`` (object arrays of ``frozenset`` label sets, which every skxmc
        estimator, metric and sklearn's model selection with its default ``cv`` accept) and
        ``description``.

    Examples
    --------
    >>> from skxmc.datasets import load_demo
    >>> demo = load_demo()
    >>> len(demo.train_texts) == len(demo.train_labels)
    True
    """
    root = resources.files("skxmc") / "data"
    out: dict[str, Any] = {}
    for split in ("train", "test"):
        with resources.as_file(root / f"tibkat_demo_{split}.jsonl.gz") as path:
            out[f"{split}_texts"], out[f"{split}_labels"] = load_text_jsonl(path)
    out["description"] = (root / "README.md").read_text(encoding="utf-8")
    return Bunch(**out)


def make_imbalanced(
    texts: Any, y: Any, *, imbalance_ratio: float = 50, random_state: int | None = 0
) -> tuple[list, np.ndarray]:
    """An imbalanced subset of a single-label data set, by the rule of Cui et al. (2019).

    Classes are sorted by size (largest first, ties by label); class ``i`` of ``C`` keeps
    ``int(n_max * imbalance_ratio ** (-i / (C - 1)))`` examples (at most what it has, at
    least 1), drawn at random, where ``n_max`` is the largest class's size. This is how
    the SharpReCL paper makes the ``ir = 10, 20, 50`` versions of balanced sets.

    Parameters
    ----------
    texts : sequence
        The texts (or any per-example items).
    y : array-like of shape (n_samples,)
        Class labels.
    imbalance_ratio : float, default=50
        Size of the largest class over the smallest (>= 1).
    random_state : int or None, default=0
        Seed of the per-class draws (the default makes the subset deterministic).

    Returns
    -------
    texts : list
        The kept texts, in their original order.
    y : numpy.ndarray
        Their labels.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.datasets import make_imbalanced
    >>> y = np.repeat(["a", "b", "c"], 100)
    >>> _, y_small = make_imbalanced(list(range(300)), y, imbalance_ratio=10)
    >>> {c: int((y_small == c).sum()) for c in "abc"}
    {'a': 100, 'b': 31, 'c': 10}
    """
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(texts):
        raise ValueError("y must be 1-D with one label per text.")
    if not imbalance_ratio >= 1:
        raise ValueError(f"imbalance_ratio must be >= 1, got {imbalance_ratio}.")
    classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    n_max, n_classes = int(counts.max()), len(classes)
    rng = np.random.default_rng(random_state)
    keep: list[np.ndarray] = []
    for rank, c in enumerate(order):
        exponent = rank / (n_classes - 1) if n_classes > 1 else 0.0
        target = max(1, min(int(counts[c]), int(n_max * imbalance_ratio ** (-exponent))))
        members = np.flatnonzero(y_idx == c)
        keep.append(rng.choice(members, size=target, replace=False))
    rows = np.sort(np.concatenate(keep))
    return [texts[i] for i in rows], y[rows]


# ----------------------------------------------------------------------------- synthetic XMC

# Rows are generated in chunks of about this many tokens (a function of ``length`` only, so
# that the output for a seed does not depend on anything else); each chunk has its own
# random stream spawned from the seed.
_CHUNK_TOKENS = 1 << 20


def _seed_sequence(random_state: Any) -> np.random.SeedSequence:
    """A ``SeedSequence`` from sklearn's ``random_state`` forms (or a ``Generator``)."""
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}.")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(2**63, size=4).tolist())
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(random_state.randint(2**31 - 1, size=4).tolist())
    raise ValueError(
        "random_state must be None, an int, a numpy RandomState or Generator, "
        f"got {type(random_state).__name__}."
    )


def _power_ranks(rng: np.random.Generator, size: int, n: Any, exponent: float) -> np.ndarray:
    """``size`` ranks in ``[0, n)`` (``n`` an int or an int array of shape ``(size,)``) with
    ``P(r)`` about proportional to ``(r + 1.5) ** -exponent``: the continuous law
    ``x ** -exponent`` on ``[1, n + 1)``, floored. O(1) work per draw and no table of ``n``.
    """
    top = np.asarray(n, dtype=np.float64) + 1.0
    u = rng.random(size)
    if abs(exponent - 1.0) < 1e-9:
        x = np.exp(u * np.log(top))
    else:
        e = 1.0 - exponent
        x = (1.0 + u * (top**e - 1.0)) ** (1.0 / e)
    ranks = x.astype(np.int64) - 1
    return np.clip(ranks, 0, np.asarray(n, dtype=np.int64) - 1)


def _check_int(value: Any, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}.")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an int {bound}, got {value}.")
    return int(value)


def _check_float(value: Any, name: str, low: float, high: float | None, low_open: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}.")
    value = float(value)
    bad_low = value <= low if low_open else value < low
    if not math.isfinite(value) or bad_low or (high is not None and value > high):
        lo = f"> {low}" if low_open else f">= {low}"
        bound = lo if high is None else f"{lo} and <= {high}"
        raise ValueError(f"{name} must be a finite number {bound}, got {value}.")
    return value


class _XMCSpec(NamedTuple):
    """The parameters of :func:`make_xmc_classification` (see its docstring)."""

    n_samples: int
    n_features: int
    n_labels: int
    n_topics: int | None
    labels_per_sample: float
    length: float
    label_exponent: float
    label_share: float
    noise: float
    n_topic_features: int
    n_label_features: int

    def checked(self) -> _XMCSpec:
        """The parameters checked in signature order (the first bad one is reported) and
        converted to ``int`` / ``float``; ``n_topics=None`` becomes its default."""
        n_samples = _check_int(self.n_samples, "n_samples", 1)
        n_features = _check_int(self.n_features, "n_features", 1)
        n_labels = _check_int(self.n_labels, "n_labels", 1)
        n_topics = max(1, n_labels // 25) if self.n_topics is None else self.n_topics
        n_topics = _check_int(n_topics, "n_topics", 1, n_labels)
        per_sample = _check_float(self.labels_per_sample, "labels_per_sample", 1.0, None, False)
        length = _check_float(self.length, "length", 0.0, None, True)
        exponent = _check_float(self.label_exponent, "label_exponent", 0.0, None, False)
        label_share = _check_float(self.label_share, "label_share", 0.0, 1.0, False)
        noise = _check_float(self.noise, "noise", 0.0, 1.0, False)
        if label_share + noise > 1.0:
            raise ValueError(
                f"label_share + noise must be <= 1, got {label_share} + {noise} = "
                f"{label_share + noise}."
            )
        n_topic_features = _check_int(self.n_topic_features, "n_topic_features", 1)
        n_label_features = _check_int(self.n_label_features, "n_label_features", 1)
        return _XMCSpec(
            n_samples,
            n_features,
            n_labels,
            n_topics,
            per_sample,
            length,
            exponent,
            label_share,
            noise,
            n_topic_features,
            n_label_features,
        )


@dataclass(frozen=True)
class _XMCModel:
    """The draws that every row of a generated problem shares.

    Labels fill the slots (topic ``t``, rank ``j``) = ``t + j * n_topics`` in a random
    order: topic ``t`` has the weight ``(t + 1) ** -a``, its rank-``j`` label about
    ``(j + 1.5) ** -a`` within the topic. The vocabularies are a random ranking of the
    background words and word draws for every topic and every label.
    """

    spec: _XMCSpec
    slot_label: np.ndarray  # (n_labels,) the label in each slot
    label_topics: np.ndarray  # (n_labels,) the topic of each label
    topic_size: np.ndarray  # (n_topics,) labels per topic
    topic_cum: np.ndarray  # (n_topics,) cumulative topic weights
    feature_rank: np.ndarray  # (n_features,) the feature of each background rank
    topic_words: np.ndarray  # (n_topics, n_topic_features)
    label_words: np.ndarray  # (n_labels, n_label_features)
    lengths: np.ndarray  # (n_samples,) word tokens of each row

    @classmethod
    def draw(cls, spec: _XMCSpec, rng: np.random.Generator) -> _XMCModel:
        """The shared draws, in a fixed order (the output for a seed depends on it)."""
        n_labels, n_topics, n_features = spec.n_labels, spec.n_topics, spec.n_features
        slot_label = rng.permutation(n_labels).astype(np.int32)
        feature_rank = rng.permutation(n_features).astype(np.int32)
        # integers() draws other numbers for another dtype: int32 is part of the stream.
        topic_words = rng.integers(
            n_features, size=(n_topics, spec.n_topic_features), dtype=np.int32
        )
        label_words = rng.integers(
            n_features, size=(n_labels, spec.n_label_features), dtype=np.int32
        )
        lengths = np.maximum(rng.poisson(spec.length, size=spec.n_samples), 1)
        label_topics = np.empty(n_labels, dtype=np.int32)
        label_topics[slot_label] = np.arange(n_labels) % n_topics
        topic_weights = np.arange(1, n_topics + 1, dtype=np.float64) ** -spec.label_exponent
        return cls(
            spec=spec,
            slot_label=slot_label,
            label_topics=label_topics,
            topic_size=np.bincount(label_topics, minlength=n_topics),
            topic_cum=np.cumsum(topic_weights),
            feature_rank=feature_rank,
            topic_words=topic_words,
            label_words=label_words,
            lengths=lengths,
        )

    def sample_topics(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """The topics of ``m`` rows, drawn by topic weight."""
        u = rng.random(m) * self.topic_cum[-1]
        topics = np.searchsorted(self.topic_cum, u, side="right")
        return np.minimum(topics, self.spec.n_topics - 1)

    def sample_labels(
        self, rng: np.random.Generator, topics: np.ndarray, idx_dtype: type
    ) -> tuple[np.ndarray, np.ndarray]:
        """The labels of rows of these topics: ``1 + Poisson(labels_per_sample - 1)`` draws
        by weight inside the row's topic, repeats merged. Returns the labels, row by row
        and sorted in each row (as ``idx_dtype``), and the number of labels of each row."""
        n_labels, m = self.spec.n_labels, len(topics)
        draws = 1 + rng.poisson(self.spec.labels_per_sample - 1.0, size=m)
        rows = np.repeat(np.arange(m, dtype=np.int64), draws)
        t = topics[rows]
        ranks = _power_ranks(rng, rows.size, self.topic_size[t], self.spec.label_exponent)
        keys = np.unique(rows * n_labels + self.slot_label[t + ranks * self.spec.n_topics])
        return (keys % n_labels).astype(idx_dtype), np.bincount(keys // n_labels, minlength=m)

    def sample_words(
        self,
        rng: np.random.Generator,
        topics: np.ndarray,
        lengths: np.ndarray,
        labels: np.ndarray,
        label_count: np.ndarray,
    ) -> np.ndarray:
        """The word tokens of rows (their topics, lengths and labels as
        :meth:`sample_labels` returns them) as keys ``row * n_features + word``.

        A token is, with probability ``noise``, a background word (Zipf-like over all
        features); with probability ``label_share``, a word of one of the row's labels
        (label and word uniform); otherwise a word of the row's topic (Zipf-like).
        """
        spec = self.spec
        label_start = np.cumsum(label_count) - label_count
        rows = np.repeat(np.arange(len(topics), dtype=np.int64), lengths)
        kind = rng.random(rows.size)
        words = np.empty(rows.size, dtype=np.int64)
        is_noise = kind < spec.noise
        is_label = (kind >= spec.noise) & (kind < spec.noise + spec.label_share)
        is_topic = ~(is_noise | is_label)
        del kind
        n_noise = int(is_noise.sum())
        words[is_noise] = self.feature_rank[_power_ranks(rng, n_noise, spec.n_features, 1.0)]
        lr = rows[is_label]
        which = label_start[lr] + (rng.random(lr.size) * label_count[lr]).astype(np.int64)
        word_of_label = rng.integers(spec.n_label_features, size=lr.size)
        words[is_label] = self.label_words[labels[which], word_of_label]
        del lr, which, word_of_label
        tr = rows[is_topic]
        topic_rank = _power_ranks(rng, tr.size, spec.n_topic_features, 1.0)
        words[is_topic] = self.topic_words[topics[tr], topic_rank]
        return rows * spec.n_features + words


def _bag_of_words(
    token_keys: np.ndarray, n_features: int, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``m`` rows of bag-of-words features from their tokens (keys ``row * n_features +
    word``): the column and value of every non-zero (row by row, sorted columns; values
    ``1 + log(count)``, rows L2-normalised) and the number of non-zeros of each row."""
    keys, counts = np.unique(token_keys, return_counts=True)
    del token_keys
    rows = keys // n_features
    values = (1.0 + np.log(counts)).astype(np.float32)
    norms = np.sqrt(np.bincount(rows, weights=values.astype(np.float64) ** 2, minlength=m))
    values /= norms[rows].astype(np.float32)
    return keys % n_features, values, np.bincount(rows, minlength=m)


def _flagged_canonical_csr(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A CSR matrix on these arrays, without a copy, flagged canonical (they are built
    with sorted indices and no duplicates)."""
    M = sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
    M.has_sorted_indices = True
    M.has_canonical_format = True
    return M


def _generate_xmc(spec: _XMCSpec, seq: np.random.SeedSequence) -> tuple:
    """``X, Y, sample_topics, label_topics`` of :func:`make_xmc_classification`.

    The shared draws come from the first stream spawned from ``seq``, the rows chunk by
    chunk from a stream each. ``X`` is written in place into buffers sized for the tokens
    (an upper bound of its non-zeros) and shrunk at the end; ``Y`` is small (about
    ``labels_per_sample`` per row).
    """
    n_samples = spec.n_samples
    chunk_rows = max(1, int(_CHUNK_TOKENS // max(spec.length, spec.labels_per_sample)))
    setup_seq, *chunk_seqs = seq.spawn(1 + -(-n_samples // chunk_rows))
    model = _XMCModel.draw(spec, np.random.default_rng(setup_seq))
    capacity = int(model.lengths.sum())
    big = max(capacity, spec.n_features, n_samples) > np.iinfo(np.int32).max
    idx_dtype = np.int64 if big else np.int32
    indices = np.empty(capacity, dtype=idx_dtype)
    data = np.empty(capacity, dtype=np.float32)
    indptr = np.zeros(n_samples + 1, dtype=idx_dtype)
    y_indices: list[np.ndarray] = []
    y_counts: list[np.ndarray] = []
    sample_topics = np.empty(n_samples, dtype=np.int32)
    pos = 0
    for c, chunk_seq in enumerate(chunk_seqs):
        rng = np.random.default_rng(chunk_seq)
        r0, r1 = c * chunk_rows, min((c + 1) * chunk_rows, n_samples)
        topics = model.sample_topics(rng, r1 - r0)
        sample_topics[r0:r1] = topics
        labels, label_count = model.sample_labels(rng, topics, idx_dtype)
        y_indices.append(labels)
        y_counts.append(label_count)
        columns, values, row_nnz = _bag_of_words(
            model.sample_words(rng, topics, model.lengths[r0:r1], labels, label_count),
            spec.n_features,
            r1 - r0,
        )
        indices[pos : pos + columns.size] = columns
        data[pos : pos + columns.size] = values
        indptr[r0 + 1 : r1 + 1] = pos + np.cumsum(row_nnz)
        pos += columns.size
    indices.resize(pos, refcheck=False)  # shrinks in place (realloc), no copy
    data.resize(pos, refcheck=False)
    X = _flagged_canonical_csr(data, indices, indptr, (n_samples, spec.n_features))
    y_indptr = np.zeros(n_samples + 1, dtype=idx_dtype)
    np.cumsum(np.concatenate(y_counts), out=y_indptr[1:])
    y_idx = np.concatenate(y_indices)
    Y = _flagged_canonical_csr(
        np.ones(y_idx.size, dtype=np.float32), y_idx, y_indptr, (n_samples, spec.n_labels)
    )
    return X, Y, sample_topics, model.label_topics


def make_xmc_classification(
    n_samples: int = 1000,
    n_features: int = 5000,
    n_labels: int = 1000,
    *,
    n_topics: int | None = None,
    labels_per_sample: float = 3.0,
    length: float = 50.0,
    label_exponent: float = 1.0,
    label_share: float = 0.08,
    noise: float = 0.7,
    n_topic_features: int = 100,
    n_label_features: int = 5,
    return_topics: bool = False,
    random_state: Any = None,
) -> tuple:
    """Generate a random extreme multi-label classification problem.

    The XMC counterpart of :func:`sklearn.datasets.make_multilabel_classification`:
    power-law label frequencies, and bag-of-words rows whose words depend on the labels.

    * the labels are split at random into ``n_topics`` equal topics; topic ``t`` weighs
      ``(t + 1) ** -a`` (``a = label_exponent``), its label of rank ``j`` ``(j + 1.5) ** -a``;
    * a sample picks a topic by weight, then ``1 + Poisson(labels_per_sample - 1)`` labels
      of it by weight (repeats merged): a head of frequent labels, a tail of rare ones;
    * it has ``max(1, Poisson(length))`` word tokens: with probability ``noise`` a
      background word (Zipf-like over all features), with probability ``label_share`` a
      word of one of its labels, else a word of its topic (Zipf-like); a feature's value
      is ``1 + log(count)`` and rows are L2-normalised.

    Samples are i.i.d.: the first rows against the rest are a random train/test split.
    Generation is chunked, so memory stays proportional to the output's non-zeros.

    Parameters
    ----------
    n_samples, n_features, n_labels : int, default=1000, 5000, 1000
        Rows, features (the vocabulary) and labels (labels of the tail may have no sample).
    n_topics : int or None, default=None
        The number of topics, in ``[1, n_labels]``; ``None``: ``max(1, n_labels // 25)``.
    labels_per_sample, length : float, default=3.0, 50.0
        Expected label draws (>= 1) and word tokens (> 0) per sample; repeats are merged,
        so rows have somewhat fewer labels and non-zeros.
    label_exponent : float, default=1.0
        The exponent ``a`` (>= 0; 0 gives labels of equal frequency, more a steeper head).
    label_share, noise : float, default=0.08, 0.7
        The probabilities that a token is a label word or a background word (sum <= 1;
        the rest are topic words). The defaults make a problem a linear model ranks well
        but far from perfectly; raise ``label_share`` and lower ``noise`` for an easier one.
    n_topic_features, n_label_features : int, default=100, 5
        Word draws (uniform over all features, with replacement) making each topic's and
        each label's vocabulary (>= 1); vocabularies overlap.
    return_topics : bool, default=False
        If True, also return the topic of every sample and of every label.
    random_state : int, RandomState instance, Generator or None, default=None
        Pass an int for reproducible output across calls.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
        float32, canonical (sorted indices, no duplicates), rows of unit L2 norm.
    Y : scipy.sparse.csr_matrix of shape (n_samples, n_labels)
        The label indicator matrix, float32 ones, canonical; every row has a label.
    sample_topics, label_topics : numpy.ndarray of shape (n_samples,), (n_labels,)
        The topic of each sample and of each label. Only if ``return_topics=True``.

    See Also
    --------
    sklearn.datasets.make_multilabel_classification : The small-scale analogue.

    Examples
    --------
    >>> from skxmc import XRLinearClassifier
    >>> from skxmc.datasets import make_xmc_classification
    >>> from skxmc.metrics import precision_at_k
    >>> X, Y = make_xmc_classification(2000, n_features=3000, n_labels=500, random_state=0)
    >>> X.shape, Y.shape, X.dtype, Y.dtype
    ((2000, 3000), (2000, 500), dtype('float32'), dtype('float32'))
    >>> counts = Y.sum(axis=0).A1  # a head of frequent labels, a tail of rare ones
    >>> bool(counts.max() > 200), bool((counts[counts > 0] <= 2).mean() > 0.2)
    (True, True)
    >>> clf = XRLinearClassifier().fit(X[:1500], Y[:1500])  # rows split train/test
    >>> p1 = precision_at_k(Y[1500:], clf.predict_topk(X[1500:], k=1), k=1)
    >>> bool(p1 > 0.5)
    True
    """
    spec = _XMCSpec(
        n_samples,
        n_features,
        n_labels,
        n_topics,
        labels_per_sample,
        length,
        label_exponent,
        label_share,
        noise,
        n_topic_features,
        n_label_features,
    ).checked()
    X, Y, sample_topics, label_topics = _generate_xmc(spec, _seed_sequence(random_state))
    return (X, Y, sample_topics, label_topics) if return_topics else (X, Y)
