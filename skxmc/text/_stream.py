"""Reading raw text input, in memory or as a stream.

:func:`check_texts` is the one place where skxmc's text estimators read ``X`` held in
memory: lists, arrays, pandas Series and DataFrames (texts or text pairs), each sample
checked. Texts that do not fit in memory are read here too, as a *stream*: an iterator
or generator, any iterable without a length, or a ``datasets.Dataset`` /
``datasets.IterableDataset``. A stream is read once, in chunks of :data:`CHUNK` texts,
each chunk checked (:func:`check_texts`, errors naming the row's position in the whole
stream) and tokenised (:mod:`skxmc.text._tokenize`) before the next is read. What
``fit`` keeps is then the token ids (4 bytes a token,
:class:`~skxmc.text._tokenize.TokenizedTexts`), never the Python strings (about 50 bytes
of overhead each, plus 1 to 4 bytes a character); ``predict`` and ``transform`` keep
neither: each chunk's outputs are written and its tokens dropped.

Hugging Face datasets are recognised by duck typing (``datasets`` is not a dependency):
the texts are the ``"text"`` column, or the only column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

__all__ = [
    "CHUNK",
    "check_texts",
    "dataset_text_column",
    "is_hf_dataset",
    "is_text_stream",
    "iter_text_chunks",
    "materialize_texts",
]

#: Texts read, checked and tokenised at a time from a stream.
CHUNK = 4096


def is_hf_dataset(X: Any) -> bool:
    """Whether ``X`` is a Hugging Face ``datasets.Dataset`` or ``IterableDataset``."""
    module = type(X).__module__ or ""
    return module.split(".")[0] == "datasets" and hasattr(X, "column_names")


def _shown(columns: list, most: int) -> str:
    """The first ``most`` column names, for an error message."""
    return ", ".join(repr(c) for c in columns[:most]) + (", ..." if len(columns) > most else "")


def dataset_text_column(X: Any, name: str = "X") -> str:
    """The column of a Hugging Face dataset that holds the texts: ``"text"``, or the only
    column; anything else is a ValueError naming the columns."""
    columns = list(X.column_names or [])
    if "text" in columns:
        return "text"
    if len(columns) == 1:
        return columns[0]
    raise ValueError(
        f"{name} is a Hugging Face dataset with columns {_shown(columns, 8) or '(none)'}; "
        f"skxmc reads its texts from a column named 'text' or from a dataset with one "
        f"column. Select or "
        f"rename the text column, e.g. {name}.select_columns([{(columns or ['...'])[0]!r}]) "
        f"or {name}.rename_column(..., 'text')."
    )


def is_text_stream(X: Any) -> bool:
    """Whether ``X`` is read as a stream: an iterator / generator, an iterable without
    ``len``, or a Hugging Face dataset. Lists, tuples, arrays, pandas Series and
    DataFrames are not (they are in memory already)."""
    if isinstance(X, (str, bytes, list, tuple)) or X is None:
        return False
    if is_hf_dataset(X):
        return True
    if _is_dataframe(X):
        return False
    if hasattr(X, "__array__") or hasattr(X, "shape"):
        return False
    return isinstance(X, Iterator) or (isinstance(X, Iterable) and not hasattr(X, "__len__"))


def _is_dataframe(X: Any) -> bool:
    # pandas is not a dependency of skxmc: recognise its DataFrames by duck typing (a
    # Series has no ``columns``).
    return hasattr(X, "columns") and hasattr(X, "iloc")


def _select_columns(table: Any, n_columns: int, *, frame: bool) -> list | None:
    """The rows of a one-column table as texts, of a two-column table as text pairs;
    None for other widths (the caller raises)."""
    if n_columns not in (1, 2):
        return None
    columns = [(table.iloc[:, j] if frame else table[:, j]).tolist() for j in range(n_columns)]
    return columns[0] if n_columns == 1 else list(zip(*columns))


def _as_text_list(texts: Any, name: str) -> list:
    """``texts`` as a list with one element per sample (a text or a pair)."""
    if _is_dataframe(texts):
        columns = list(texts.columns)
        rows = _select_columns(texts, len(columns), frame=True)
        if rows is None and not columns:
            raise ValueError(f"{name} is a DataFrame without columns; pass a column of texts.")
        if rows is None:
            raise ValueError(
                f"{name} is a DataFrame with {len(columns)} columns ({_shown(columns, 5)}); "
                f"a text estimator reads one column of texts (or two, as text pairs). Select the "
                f"text column, e.g. {name}[{columns[0]!r}], or route it to the estimator with "
                f"ColumnTransformer([(name, estimator, {columns[0]!r})])."
            )
        return rows
    shape = getattr(texts, "shape", None)
    if shape is not None and len(shape) != 1 and hasattr(texts, "__array__"):
        # Arrays (and other data frames) other than 1-D: iterating would give one element
        # per row or per column, or, for a 0-d array, a bare string.
        array = np.asarray(texts)
        if array.ndim == 0:
            raise TypeError(f"{name} must be a sequence of texts, got a 0-d array {array!r:.60}.")
        rows = _select_columns(array, array.shape[1], frame=False) if array.ndim == 2 else None
        if rows is None:
            raise ValueError(
                f"{name} has shape {array.shape}; a text estimator reads a 1-D array of "
                f"texts, an (n_samples, 1) array (that column) or an (n_samples, 2) array "
                f"of text pairs."
            )
        return rows
    if hasattr(texts, "tolist") and not isinstance(texts, list):  # 1-D arrays, Series
        return texts.tolist()
    if is_hf_dataset(texts):  # its text column, read once
        return materialize_texts(texts, name=name)
    return list(texts)


def check_texts(texts: Any, *, name: str = "X", start: int = 0) -> tuple[list, bool]:
    """Validate raw text input: a sequence of ``str`` or of ``(str, str)`` pairs.

    This is the one place where skxmc's text estimators read ``X``; the result always has
    one element per sample (per row of a table).

    Parameters
    ----------
    texts : sequence, iterable, numpy array, pandas DataFrame or Hugging Face dataset
        One of:

        - a list, tuple, 1-D numpy array or pandas Series of ``str`` (single texts), or of
          2-tuples of ``str`` (text pairs, for classifiers that read them);
        - a one-column DataFrame or an ``(n_samples, 1)`` array: that column (what
          ``df[["text"]]`` and ``ColumnTransformer`` with a list of one column give);
        - a two-column DataFrame or an ``(n_samples, 2)`` array: text pairs, the first
          column the first text of each pair (as a list of 2-tuples would be).

        - any other iterable (a generator...), read once into a list;
        - a Hugging Face ``datasets.Dataset`` / ``IterableDataset``: its ``"text"`` column,
          or its only column.

        DataFrames are recognised by duck typing (``columns`` and ``iloc``); pandas is not
        needed otherwise. Other widths are rejected. To read a large iterable without
        holding it as a list, see :func:`iter_text_chunks`.
    name : str, default="X"
        Used in error messages.
    start : int, default=0
        Position of the first text in the whole input, for error messages (when
        ``texts`` is one chunk of a stream).

    Returns
    -------
    texts : list
        The texts as a list (pairs as tuples), one element per sample.
    is_pairs : bool
        Whether the input holds text pairs.

    Raises
    ------
    TypeError
        For a bare string (as scikit-learn's vectorisers do), or elements that are neither
        strings nor pairs of strings (missing values included).
    ValueError
        For a DataFrame or array with more than two columns (or none), or more than two
        dimensions: select the text column first.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.text._stream import check_texts
    >>> check_texts(np.array([["a cat"], ["a dog"]]))
    (['a cat', 'a dog'], False)
    >>> check_texts([("a question", "a passage")])
    ([('a question', 'a passage')], True)
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"{name} must be a sequence of texts (a list of str, a numpy array or a pandas "
            f"Series), got a single string."
        )
    texts = _as_text_list(texts, name)
    if not texts:
        return texts, False
    is_pairs = isinstance(texts[0], (tuple, list))
    for i, t in enumerate(texts):
        if is_pairs:
            ok = (
                isinstance(t, (tuple, list))
                and len(t) == 2
                and isinstance(t[0], str)
                and isinstance(t[1], str)
            )
            if not ok:
                raise TypeError(
                    f"{name}[{start + i}] is {type(t).__name__} {t!r:.60}: text pairs must all be "
                    f"2-tuples of str (and single texts all str)."
                )
        elif not isinstance(t, str):
            if t is None or (isinstance(t, float) and t != t):
                raise TypeError(
                    f"{name}[{start + i}] is a missing value ({t!r}); drop or fill missing "
                    f"texts first."
                )
            raise TypeError(
                f"{name}[{start + i}] is {type(t).__name__}, expected str (or pass every "
                f"sample as a 2-tuple of str for text pairs)."
            )
    _check_unicode(texts, is_pairs, name, start)
    if is_pairs:
        texts = [tuple(t) for t in texts]
    return texts, is_pairs


# A lone UTF-16 surrogate (U+D800-U+DFFF) is not a character: no tokenizer can encode it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_unicode(texts: list, is_pairs: bool, name: str, start: int = 0) -> None:
    """Refuse texts holding a lone surrogate, naming the row (the tokenizer's own error
    names neither the row nor the cause)."""
    flat = [part for t in texts for part in t] if is_pairs else texts
    try:
        "".join(flat).encode("utf-8")  # one pass in C: the usual case
        return
    except UnicodeEncodeError:
        pass
    for i, t in enumerate(texts):
        for part in t if is_pairs else (t,):
            found = _SURROGATE.search(part)
            if found is not None:
                raise ValueError(
                    f"{name}[{start + i}] holds a lone surrogate {found.group()!r} at character "
                    f"{found.start()}: not valid Unicode (often text decoded with "
                    f"errors='surrogateescape', or a broken \\uXXXX escape in JSON). Clean "
                    f"it first, e.g. text.encode('utf-8', 'replace').decode('utf-8')."
                )


def _raw_chunks(X: Any, size: int, name: str) -> Iterator[list]:
    if is_hf_dataset(X):
        column = dataset_text_column(X, name)
        if hasattr(X, "iter"):  # Dataset and IterableDataset: batches as dicts of lists
            for batch in X.iter(batch_size=size):
                yield list(batch[column])
            return
        X = (row[column] for row in X)
    chunk: list = []
    for text in X:
        chunk.append(text)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def iter_text_chunks(
    X: Any, *, name: str = "X", size: int | None = None
) -> Iterator[tuple[list, bool]]:
    """Read ``X`` in checked chunks of at most ``size`` texts.

    Parameters
    ----------
    X : iterable of str or of (str, str), or Hugging Face dataset
        Any input :func:`check_texts` takes, or a stream
        (see :func:`is_text_stream`), read once.
    name : str, default="X"
        Used in error messages, which give the row's position in the whole of ``X``.
    size : int or None, default=None
        Texts per chunk; None: :data:`CHUNK` (4096).

    Yields
    ------
    texts : list
        The chunk's texts (pairs as tuples), checked.
    is_pairs : bool
        Whether ``X`` holds text pairs (the same for every chunk: a stream that mixes
        single texts and pairs is a TypeError).

    Examples
    --------
    >>> from skxmc.text._stream import iter_text_chunks
    >>> [len(c) for c, _ in iter_text_chunks((f"text {i}" for i in range(5)), size=2)]
    [2, 2, 1]
    """
    size = CHUNK if size is None else int(size)
    if not is_text_stream(X):
        texts, pairs = check_texts(X, name=name)
        for start in range(0, len(texts), size):
            yield texts[start : start + size], pairs
        return
    start, kind = 0, None
    for raw in _raw_chunks(X, size, name):
        texts, pairs = check_texts(raw, name=name, start=start)
        if kind is None:
            kind = pairs
        elif pairs != kind:
            what = "text pairs" if kind else "single texts"
            raise TypeError(
                f"{name}[{start}:{start + len(texts)}] holds "
                f"{'text pairs' if pairs else 'single texts'}, but the rows before it hold "
                f"{what}: every sample must be of one kind."
            )
        yield texts, pairs
        start += len(texts)


def materialize_texts(X: Any, *, name: str = "X") -> Any:
    """``X`` as a list when it is a stream (read once, checked), else ``X`` unchanged.

    For estimators that need their texts several times or all at once (MatchXML's label
    clustering and its stages, SNM's ...): a one-shot generator read twice would be empty
    the second time, so they read it once, here.
    """
    if not is_text_stream(X):
        return X
    texts: list = []
    for chunk, _ in iter_text_chunks(X, name=name):
        texts.extend(chunk)
    return texts
