"""Texts that do not fit in memory: generators, iterators and Hugging Face datasets.

The neural text estimators read ``X`` through this module when it is a *stream*: an
iterator or generator, any iterable without a length, or a ``datasets.Dataset`` /
``datasets.IterableDataset``. A stream is read once, in chunks of :data:`CHUNK` texts,
each chunk checked (:func:`~skxmc.text._tokenize.check_texts`, errors naming the row's
position in the whole stream) and tokenised before the next is read. What ``fit`` keeps
is then the token ids (4 bytes a token, :class:`~skxmc.text._tokenize.TokenizedTexts`),
never the Python strings (about 50 bytes of overhead each, plus 1 to 4 bytes a
character); ``predict`` and ``transform`` keep neither: each chunk's outputs are written
and its tokens dropped.

Hugging Face datasets are recognised by duck typing (``datasets`` is not a dependency):
the texts are the ``"text"`` column, or the only column.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "CHUNK",
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


def dataset_text_column(X: Any, name: str = "X") -> str:
    """The column of a Hugging Face dataset that holds the texts: ``"text"``, or the only
    column; anything else is a ValueError naming the columns."""
    columns = list(X.column_names or [])
    if "text" in columns:
        return "text"
    if len(columns) == 1:
        return columns[0]
    shown = ", ".join(repr(c) for c in columns[:8]) + (", ..." if len(columns) > 8 else "")
    raise ValueError(
        f"{name} is a Hugging Face dataset with columns {shown or '(none)'}; skxmc reads its "
        f"texts from a column named 'text' or from a dataset with one column. Select or "
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
    if hasattr(X, "columns") and hasattr(X, "iloc"):  # DataFrame
        return False
    if hasattr(X, "__array__") or hasattr(X, "shape"):
        return False
    return isinstance(X, Iterator) or (isinstance(X, Iterable) and not hasattr(X, "__len__"))


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
        Any input :func:`~skxmc.text._tokenize.check_texts` takes, or a stream
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
    from ._tokenize import check_texts

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
