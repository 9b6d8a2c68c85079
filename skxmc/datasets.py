"""Data loaders: JSON-lines text sets, Extreme Classification Repository BoW files, demo data."""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from contextlib import closing
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

from ._labels import as_label_sets

__all__ = ["get_data_dir", "load_demo", "load_text_jsonl", "load_xc_bow", "make_imbalanced"]

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
    texts: list = []
    labels: list = []
    kind: str | None = None
    pairs: bool | None = None
    with closing(_records(path)) as records:  # closes the file on an early error too
        for line_no, record in records:
            where = f"{path}: line {line_no}"
            text = record.get(text_field)
            if text_field not in record:
                raise ValueError(
                    f"{where}: the record has no {text_field!r} field (it has "
                    f"{sorted(record)!r:.80})."
                )
            if not isinstance(text, str):
                raise ValueError(
                    f"{where}: field {text_field!r} must be a string, got {text!r:.60}."
                )
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
                raise ValueError(
                    f"{where}: 'label' must be a single label; use 'labels' for lists."
                )
            texts.append(text)
            labels.append(value)
    if kind == "label":
        return texts, np.asarray(labels)
    return texts, as_label_sets(labels, indicator=False)


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
        _, first_line = next(lines, (1, ""))
        header = first_line.split()
        try:
            n_points, n_features, n_labels = (int(v) for v in header)
        except ValueError:
            raise ValueError(
                f"{path}: line 1 must be the header 'num_points num_features num_labels', "
                f"got {' '.join(header)!r:.80}."
            ) from None
        x_indptr, x_indices, x_data = [0], [], []
        y_indptr, y_indices = [0], []
        for line_no, line in lines:
            line = line.rstrip("\r\n")
            if not line.strip():
                raise ValueError(f"{path}: line {line_no} is empty; every point needs a line.")
            try:
                first, _, rest = line.partition(" ")
                if ":" in first:  # no labels: the line starts with a feature
                    first, rest = "", line
                line_labels = [int(v) for v in first.split(",")] if first else []
                pairs = [item.split(":") for item in rest.split()]
                line_features = [int(f) for f, _ in pairs]
                line_values = [float(v) for _, v in pairs]
            except ValueError:
                raise ValueError(
                    f"{path}: line {line_no} is malformed ({line[:80]!r}); expected "
                    f"'l1,l2 f:v f:v ...'."
                ) from None
            if line_labels and not 0 <= min(line_labels) <= max(line_labels) < n_labels:
                raise ValueError(
                    f"{path}: line {line_no} has a label id outside [0, {n_labels}) declared "
                    f"in the header."
                )
            if line_features and not 0 <= min(line_features) <= max(line_features) < n_features:
                raise ValueError(
                    f"{path}: line {line_no} has a feature id outside [0, {n_features}) "
                    f"declared in the header."
                )
            # float() reads 'nan' and 'inf' (and a large exponent overflows to inf); no model
            # can use them, and float32 storage would turn 1e39 into inf too.
            bad = next(
                (v for v in line_values if not math.isfinite(v) or abs(v) > _FLOAT32_MAX), None
            )
            if bad is not None:
                raise ValueError(
                    f"{path}: line {line_no} has a non-finite or float32-overflowing feature value "
                    f"({bad!r}); feature values must be finite numbers."
                )
            y_indices.extend(line_labels)
            x_indices.extend(line_features)
            x_data.extend(line_values)
            x_indptr.append(len(x_indices))
            y_indptr.append(len(y_indices))
    n_read = len(x_indptr) - 1
    if n_read != n_points:
        raise ValueError(
            f"{path}: the header declares {n_points} points but the file has {n_read}."
        )
    X = sp.csr_matrix(
        (np.asarray(x_data, dtype=np.float32), np.asarray(x_indices, dtype=np.int32), x_indptr),
        shape=(n_points, n_features),
    )
    Y = sp.csr_matrix(
        (
            np.ones(len(y_indices), dtype=np.float32),
            np.asarray(y_indices, dtype=np.int32),
            y_indptr,
        ),
        shape=(n_points, n_labels),
    )
    for M in (X, Y):
        M.sum_duplicates()
        M.sort_indices()
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
