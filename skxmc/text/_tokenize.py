"""Tokenise once, then batch with dynamic padding and length-sorted order.

:class:`TokenizedTexts` holds the token ids of all texts of one ``fit`` / ``predict`` call
in two flat arrays (ids and offsets), which costs 2 bytes per token (4 for vocabularies of
more than 65,536 tokens) instead of the ~36 of Python lists, and hands out
:class:`TextBatch` objects padded only to the longest text of the batch. Sorting by length
before batching puts texts of similar length together, so little compute is spent on
padding; the batch indices let callers put results back in the input order.

A stream of texts (:mod:`skxmc.text._stream`) is tokenised chunk by chunk as it is read
(:class:`TokenBuffer`); :func:`tokenize_views` also tokenises a second view of each chunk
(an augmented copy) as it goes by, into one container with the texts
(:class:`TokenViews`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from ._stream import check_texts, is_text_stream, iter_text_chunks

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "TextBatch",
    "TokenBuffer",
    "TokenViews",
    "TokenizedTexts",
    "tokenize",
    "tokenize_views",
]

#: Default truncation length. Self-attention costs grow with the square of the length and a
#: BERT-base step on CPU already takes seconds at 128 tokens; GPU users raise it.
DEFAULT_MAX_LENGTH = 128
# Texts are tokenised in chunks so that the tokenizer's Python lists never hold more than
# this many texts at a time.
_CHUNK = 4096
# Rows gathered at a time by TokenizedTexts.subset.
_SUBSET_BLOCK = 65536


@dataclasses.dataclass(frozen=True)
class TextBatch:
    """One padded batch: model inputs and the positions of its texts in the input.

    Attributes
    ----------
    indices : numpy.ndarray of shape (batch_size,)
        Row of each text in the :class:`TokenizedTexts` it came from; use it to fetch labels
        or to write outputs back in input order.
    inputs : dict of str to torch.Tensor
        ``input_ids`` and ``attention_mask`` (and ``token_type_ids`` for text pairs), of
        shape ``(batch_size, width)`` where ``width`` is the longest text of the batch.
    """

    indices: np.ndarray
    inputs: dict[str, torch.Tensor]

    def __len__(self) -> int:
        return len(self.indices)

    def to(self, device: torch.device | str) -> TextBatch:
        """The same batch with its tensors on ``device``."""
        return TextBatch(
            self.indices, {k: v.to(device, non_blocking=True) for k, v in self.inputs.items()}
        )


class _BatchIterable:
    """Re-iterable sequence of batches with a length (for progress bars and schedules);
    with ``view_offset``, each batch's rows ``idx`` come with rows ``idx + view_offset``
    (their second views), gathered batch by batch."""

    def __init__(
        self, source: TokenizedTexts, batches: list[np.ndarray], view_offset: int | None = None
    ) -> None:
        self._source = source
        self._batches = batches
        self._view_offset = view_offset

    def __len__(self) -> int:
        return len(self._batches)

    def __iter__(self) -> Iterator[TextBatch]:
        for idx in self._batches:
            if self._view_offset is not None:
                # Both views in one forward pass: rows [originals, views].
                idx = np.concatenate([idx, idx + self._view_offset])
            yield self._source.collate(idx)


class TokenizedTexts:
    """Token ids of a list of texts (or text pairs), tokenised once.

    Build it with :func:`tokenize` or :meth:`from_texts`; then draw padded batches with
    :meth:`batches` (inference: sorted by length; training: shuffled, optionally bucketed
    by length) or :meth:`collate` (any rows, e.g. sampled positives).

    Parameters
    ----------
    ids : numpy.ndarray of int32 or uint16
        All token ids, concatenated (kept as uint16 when given so: what :func:`tokenize`
        stores when every id is below 65,536; any other dtype becomes int32).
    offsets : numpy.ndarray of int64 of shape (n_texts + 1,)
        Text ``i`` holds ``ids[offsets[i]:offsets[i + 1]]``.
    pad_token_id : int
        Id used for padding (masked out by the attention mask).
    type_ids : numpy.ndarray of int8, optional
        Segment ids aligned with ``ids``, for text pairs (when the model uses them).
    pairs : bool, default=False
        Whether each sample is a text pair.

    Attributes
    ----------
    lengths : numpy.ndarray of int64 of shape (n_texts,)
        Number of tokens of each text, special tokens included.

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.text._tokenize import TokenizedTexts
    >>> tok = TokenizedTexts(np.array([2, 7, 3, 2, 7, 8, 9, 3], dtype=np.int32),
    ...                      np.array([0, 3, 8]), pad_token_id=0)
    >>> [b.inputs["input_ids"].shape[1] for b in tok.batches(1)]
    [5, 3]
    """

    def __init__(
        self,
        ids: np.ndarray,
        offsets: np.ndarray,
        *,
        pad_token_id: int = 0,
        type_ids: np.ndarray | None = None,
        pairs: bool = False,
    ) -> None:
        self.pairs = bool(pairs) or type_ids is not None
        ids = np.asarray(ids)
        self.ids = ids if ids.dtype == np.uint16 else ids.astype(np.int32, copy=False)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.pad_token_id = int(pad_token_id)
        self.type_ids = None if type_ids is None else np.asarray(type_ids, dtype=np.int8)
        self.lengths = np.diff(self.offsets)
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.ids) or (self.lengths < 0).any():
            raise ValueError("offsets must start at 0, end at len(ids) and never decrease.")
        if self.type_ids is not None and len(self.type_ids) != len(self.ids):
            raise ValueError("type_ids must be aligned with ids.")

    def __len__(self) -> int:
        return len(self.lengths)

    def __repr__(self) -> str:
        n = len(self)
        mean = float(self.lengths.mean()) if n else 0.0
        return (
            f"TokenizedTexts(n_texts={n}, mean_length={mean:.1f}, "
            f"max_length={int(self.lengths.max()) if n else 0}, pairs={self.pairs})"
        )

    @classmethod
    def from_texts(
        cls, tokenizer: Any, texts: Sequence, *, max_length: int | None = DEFAULT_MAX_LENGTH
    ) -> TokenizedTexts:
        """Tokenise ``texts`` (see :func:`tokenize`)."""
        return tokenize(tokenizer, texts, max_length=max_length)

    @staticmethod
    def concatenate(parts: Sequence[TokenizedTexts]) -> TokenizedTexts:
        """The texts of ``parts``, one after the other (all of one kind)."""
        lengths = np.concatenate([p.lengths for p in parts])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        types = [p.type_ids for p in parts]
        return TokenizedTexts(
            np.concatenate([p.ids for p in parts]),
            offsets,
            pad_token_id=parts[0].pad_token_id,
            type_ids=None if any(t is None for t in types) else np.concatenate(types),
            pairs=parts[0].pairs,
        )

    def head(self, n: int) -> TokenizedTexts:
        """The first ``n`` texts, sharing this container's arrays (no copy)."""
        end = int(self.offsets[n])
        return TokenizedTexts(
            self.ids[:end],
            self.offsets[: n + 1],
            pad_token_id=self.pad_token_id,
            type_ids=None if self.type_ids is None else self.type_ids[:end],
            pairs=self.pairs,
        )

    def subset(self, indices: Sequence[int] | np.ndarray) -> TokenizedTexts:
        """The texts at ``indices`` (in that order), as a new container."""
        indices = np.asarray(indices, dtype=np.int64)
        lengths = self.lengths[indices]
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.empty(int(offsets[-1]), dtype=self.ids.dtype)
        types = None if self.type_ids is None else np.empty(len(ids), dtype=np.int8)
        # In blocks of rows: the int64 positions gathered never cover all the tokens.
        for start in range(0, len(indices), _SUBSET_BLOCK):
            stop = min(start + _SUBSET_BLOCK, len(indices))
            gather = _ranges(self.offsets[indices[start:stop]], lengths[start:stop])
            ids[offsets[start] : offsets[stop]] = self.ids[gather]
            if types is not None:
                types[offsets[start] : offsets[stop]] = self.type_ids[gather]
        return TokenizedTexts(
            ids, offsets, pad_token_id=self.pad_token_id, type_ids=types, pairs=self.pairs
        )

    def collate(self, indices: Sequence[int] | np.ndarray) -> TextBatch:
        """Pad the texts at ``indices`` to the longest of them (dynamic padding).

        Padding is on the right, so the first token is ``[CLS]`` for every row (CLS
        pooling relies on it).

        Parameters
        ----------
        indices : array-like of int
            Rows to put in the batch, in that order.

        Returns
        -------
        batch : TextBatch
        """
        indices = np.asarray(indices, dtype=np.int64)
        lengths = self.lengths[indices]
        width = int(lengths.max()) if len(indices) else 0
        ids = np.full((len(indices), width), self.pad_token_id, dtype=np.int64)
        # One boolean scatter instead of a Python loop over rows.
        mask = np.arange(width)[None, :] < lengths[:, None]
        gather = _ranges(self.offsets[indices], lengths)
        ids[mask] = self.ids[gather]
        inputs = {
            "input_ids": torch.from_numpy(ids),
            "attention_mask": torch.from_numpy(mask.astype(np.int64)),
        }
        if self.type_ids is not None:
            types = np.zeros((len(indices), width), dtype=np.int64)
            types[mask] = self.type_ids[gather]
            inputs["token_type_ids"] = torch.from_numpy(types)
        return TextBatch(indices, inputs)

    def batches(
        self,
        batch_size: int,
        *,
        shuffle: bool = False,
        rng: np.random.Generator | int | None = None,
        sort_by_length: bool = True,
        bucket_factor: int = 50,
        drop_last: bool = False,
    ) -> _BatchIterable:
        """Batches covering every text once, as a re-iterable with ``len``.

        Parameters
        ----------
        batch_size : int
            Texts per batch (the last one may be smaller unless ``drop_last``).
        shuffle : bool, default=False
            False (inference): batches in order of decreasing length when
            ``sort_by_length``, else in input order. The longest batch comes first, so an
            out-of-memory error shows at once. True (training): a random order from
            ``rng``; with ``sort_by_length`` the shuffled texts are cut into buckets of
            ``bucket_factor * batch_size`` texts, each bucket is sorted by length and cut
            into batches, and the batch order is shuffled again: batches stay random
            while padding is nearly gone.
        rng : numpy.random.Generator, int or None, default=None
            Source of randomness when ``shuffle``.
        sort_by_length : bool, default=True
            Group texts of similar length (see ``shuffle``).
        bucket_factor : int, default=50
            Bucket size in batches when shuffling. 1 gives plain shuffled batches.
        drop_last : bool, default=False
            Drop a last, smaller batch (useful for in-batch negatives).

        Returns
        -------
        batches : iterable of TextBatch
            Each batch's ``indices`` give the rows of its texts; iterate it once per epoch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        n = len(self)
        if not shuffle:
            order = np.argsort(-self.lengths, kind="stable") if sort_by_length else np.arange(n)
            chunks = [order[i : i + batch_size] for i in range(0, n, batch_size)]
        else:
            rng = np.random.default_rng(rng)
            order = rng.permutation(n)
            if sort_by_length and bucket_factor > 1:
                size = batch_size * bucket_factor
                buckets = [order[i : i + size] for i in range(0, n, size)]
                order = (
                    np.concatenate(
                        [b[np.argsort(-self.lengths[b], kind="stable")] for b in buckets]
                    )
                    if buckets
                    else order
                )
            chunks = [order[i : i + batch_size] for i in range(0, n, batch_size)]
            if sort_by_length and bucket_factor > 1:
                chunks = [chunks[i] for i in rng.permutation(len(chunks))]
        if drop_last:
            chunks = [c for c in chunks if len(c) == batch_size]
        return _BatchIterable(self, chunks)

    def batches_of(
        self, rows: list[np.ndarray], *, view_offset: int | None = None
    ) -> _BatchIterable:
        """Batches of the given ``rows`` (one array per batch), as a re-iterable with ``len``.

        With ``view_offset``, the texts' second views are stored after them (row ``i``'s
        view at ``i + view_offset``, as :class:`TokenViews` keeps them) and each batch
        holds its rows, then their views, for one forward pass over both.
        """
        return _BatchIterable(self, rows, view_offset)

    def n_batches(self, batch_size: int, *, drop_last: bool = False) -> int:
        """Number of batches :meth:`batches` yields per pass."""
        n = len(self)
        return n // batch_size if drop_last else math.ceil(n / batch_size)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each (start, length), vectorised."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    # Each position's start of run minus the run's offset in the output.
    shift = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift


class TokenBuffer:
    """Tokenise texts chunk by chunk into one :class:`TokenizedTexts` (what a stream of
    texts becomes: only the compact token ids are kept, never the texts).

    Parameters
    ----------
    tokenizer : transformers tokenizer
    max_length : int or None
        As in :func:`tokenize`.
    pairs : bool
        Whether the texts are text pairs.
    """

    def __init__(self, tokenizer: Any, max_length: int | None, pairs: bool) -> None:
        self.tokenizer = tokenizer
        self.max_length = _resolve_max_length(tokenizer, max_length)
        self.pairs = bool(pairs)
        self.want_types = self.pairs and "token_type_ids" in getattr(
            tokenizer, "model_input_names", ["token_type_ids"]
        )
        self._ids: list[np.ndarray] = []
        self._types: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(x) for x in self._lengths)

    def add(self, texts: Sequence) -> None:
        """Tokenise checked ``texts`` (pairs as tuples) and append them."""
        for start in range(0, len(texts), _CHUNK):
            ids, types, lengths = _encode(
                self.tokenizer,
                texts[start : start + _CHUNK],
                self.pairs,
                self.max_length,
                self.want_types,
            )
            self._ids.append(ids)
            self._lengths.append(lengths)
            if types is not None:
                self._types.append(types)

    @staticmethod
    def join(*buffers: TokenBuffer) -> TokenizedTexts:
        """The texts of ``buffers``, one after the other, in one container (the buffers
        are emptied; their chunks are copied once, into the result)."""
        first = buffers[0]
        for b in buffers[1:]:
            first._ids += b._ids
            first._lengths += b._lengths
            first._types += b._types
            b._ids, b._lengths, b._types = [], [], []
        return first.finish()

    def finish(self) -> TokenizedTexts:
        """The tokens of every text added, in order (the buffer is emptied)."""
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        del lengths
        # uint16 chunks and int32 ones (ids above 65,535) join as int32
        ids = np.concatenate(self._ids) if self._ids else np.zeros(0, dtype=np.uint16)
        self._ids, self._lengths = [], []
        type_ids = None
        if self.want_types:
            type_ids = np.concatenate(self._types) if self._types else np.zeros(0, np.int8)
            self._types = []
        pad = self.tokenizer.pad_token_id
        return TokenizedTexts(
            ids,
            offsets,
            pad_token_id=0 if pad is None else pad,
            type_ids=type_ids,
            pairs=self.pairs,
        )


class TokenViews:
    """A second view of each of ``n`` texts, tokenised with them (:func:`tokenize_views`):
    ``tokens`` holds the ``n`` texts, then their ``n`` views, which is what training on
    both reads (built without a copy).

    Parameters
    ----------
    tokens : TokenizedTexts
        The texts, then their views.
    n : int
        The number of texts.
    """

    def __init__(self, tokens: TokenizedTexts, n: int) -> None:
        self.tokens, self.n = tokens, n

    def __len__(self) -> int:
        return self.n

    def subset_rows(self, rows: np.ndarray) -> TokenizedTexts:
        """The views of texts ``rows`` (a validation split, rows of weight 0 dropped)."""
        return self.tokens.subset(np.asarray(rows, dtype=np.int64) + self.n)


def _read_stream(
    tokenizer: Any, X: Any, max_length: int | None, view: Any = None
) -> tuple[TokenBuffer, TokenBuffer | None]:
    """Tokenise a stream chunk by chunk as it is read: the texts and, with ``view``, the
    view of each chunk (before the next chunk is read). An empty stream gives empty
    buffers of single texts."""
    _resolve_max_length(tokenizer, max_length)  # a bad max_length fails before reading
    texts = views = None
    for chunk, is_pairs in iter_text_chunks(X):
        if texts is None:
            texts = TokenBuffer(tokenizer, max_length, is_pairs)
            if view is not None:
                views = TokenBuffer(tokenizer, max_length, is_pairs)
        texts.add(chunk)
        if view is not None:
            views.add(view(chunk))
    if texts is None:
        texts = TokenBuffer(tokenizer, max_length, False)
        if view is not None:
            views = TokenBuffer(tokenizer, max_length, False)
    return texts, views


def tokenize_views(
    tokenizer: Any, X: Any, view: Any, *, max_length: int | None = DEFAULT_MAX_LENGTH
) -> TokenViews:
    """Read a stream of texts once, tokenising each chunk and its second view.

    Parameters
    ----------
    tokenizer : transformers tokenizer
    X : iterable of str or of (str, str), or Hugging Face dataset
        A stream (see :func:`~skxmc.text._stream.is_text_stream`), read once in chunks
        of :data:`~skxmc.text._stream.CHUNK` texts; the texts are not kept.
    view : callable
        ``view(chunk) -> list``: the second view of a chunk of checked texts, one per
        text, of the same kind (checked, e.g. by
        :func:`~skxmc.text._stream.check_texts`). Called once per chunk, in order.
    max_length : int or None, default=128
        As in :func:`tokenize`.

    Returns
    -------
    TokenViews
        The texts, then their views, in one container.
    """
    texts, views = _read_stream(tokenizer, X, max_length, view)
    n = len(texts)
    return TokenViews(TokenBuffer.join(texts, views), n)


def _resolve_max_length(tokenizer: Any, max_length: int | None) -> int:
    limit = getattr(tokenizer, "model_max_length", None)
    # Tokenizers without a configured limit report a huge sentinel (~1e30).
    if limit is None or limit > 100_000:
        limit = 512
    max_length = limit if max_length is None else min(int(max_length), limit)
    if max_length < 2:
        raise ValueError(f"max_length must be >= 2 (room for special tokens), got {max_length}.")
    return max_length


def _encode(
    tokenizer: Any, chunk: Sequence, is_pairs: bool, max_length: int, want_types: bool
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Token ids (int32, concatenated), segment ids (int8, or None) and lengths (int64)
    of one chunk of checked texts."""
    if is_pairs:
        enc = tokenizer(
            [a for a, _ in chunk],
            [b for _, b in chunk],
            truncation=True,
            max_length=max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=want_types,
        )
    else:
        enc = tokenizer(
            list(chunk),
            truncation=True,
            max_length=max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
    rows = enc["input_ids"]
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    total = int(lengths.sum())
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=total)
    if total and 0 <= ids.min() and ids.max() < 65536:  # half the memory (BERT: 30,522)
        ids = ids.astype(np.uint16)
    types = None
    if want_types:
        types = np.fromiter(
            itertools.chain.from_iterable(enc["token_type_ids"]), dtype=np.int8, count=total
        )
    return ids, types, lengths


def tokenize(
    tokenizer: Any, texts: Sequence, *, max_length: int | None = DEFAULT_MAX_LENGTH
) -> TokenizedTexts:
    """Tokenise texts (or text pairs) once, truncating to ``max_length`` tokens.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        A Hugging Face tokenizer (fast tokenizers are much faster on long lists).
    texts : sequence of str or of (str, str)
        Texts, or pairs tokenised as ``[CLS] a [SEP] b [SEP]`` with segment ids (the
        longer text of a pair is truncated first). A generator, an iterable without
        ``len`` or a Hugging Face dataset is read once, in chunks, and only its token ids
        are kept (see :mod:`skxmc.text._stream`).
    max_length : int or None, default=128
        Truncation length, special tokens included. None uses the model's limit
        (``tokenizer.model_max_length`` when it is set, else 512).

    Returns
    -------
    tokenized : TokenizedTexts

    Examples
    --------
    >>> from skxmc.text._tokenize import tokenize  # doctest: +SKIP
    >>> tok = tokenize(tokenizer, ["a short text", "another one"], max_length=64)  # doctest: +SKIP
    """
    if is_text_stream(texts):
        return _read_stream(tokenizer, texts, max_length)[0].finish()
    texts, is_pairs = check_texts(texts)
    buffer = TokenBuffer(tokenizer, max_length, is_pairs)
    buffer.add(texts)
    return buffer.finish()
