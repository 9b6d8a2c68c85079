"""Static sentence embeddings (sentence-transformers models), L2-normalised, cached per call.

Two backends give the same vectors for the usual models (a transformer, a pooling layer,
optionally a normalisation layer): the ``sentence-transformers`` package when it is
installed, and a plain ``transformers`` reader of the model folder otherwise (it reads
``modules.json``, ``1_Pooling/config.json`` and ``sentence_bert_config.json``). Models with
further layers (``Dense`` projections, for instance) need ``sentence-transformers``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_memory

from .._compat import HasMethods, Interval, _fit_context
from ._classifier import TextTransformerMixin
from ._device import autocast, resolve_device
from ._encoder import (
    EncoderNotFoundError,
    batched_inference,
    dtype_kwargs,
    encoder_forward,
    eval_mode,
    folder_poolings,
    is_offline,
    load_encoder,
    not_found_message,
    pool,
    quiet_transformers,
)
from ._stream import check_texts
from ._tokenize import tokenize

__all__ = ["SentenceEmbedder", "SentenceEncoder", "sentence_embeddings"]

BACKENDS = ("auto", "sentence-transformers", "transformers")


def _has_sentence_transformers() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def read_sentence_transformers_folder(folder: str | os.PathLike) -> dict[str, Any]:
    """How to rebuild a sentence-transformers model folder with plain ``transformers``.

    Parameters
    ----------
    folder : str or path-like
        A sentence-transformers model directory, or a plain Hugging Face model directory
        (then mean pooling is used, as sentence-transformers does).

    Returns
    -------
    spec : dict
        ``transformer_path`` (directory for :func:`~skxmc.text.load_encoder`),
        ``poolings`` (list of :func:`~skxmc.text.pool` modes, concatenated),
        ``max_length`` (int or None) and ``lowercase`` (bool).

    Raises
    ------
    NotImplementedError
        For modules other than Transformer, Pooling and Normalize (install
        ``sentence-transformers`` for those).
    """
    root = Path(folder)
    spec: dict[str, Any] = {
        "transformer_path": root,
        "poolings": ["mean"],
        "max_length": None,
        "lowercase": False,
    }
    modules_file = root / "modules.json"
    if modules_file.is_file():
        for module in json.loads(modules_file.read_text(encoding="utf-8")):
            kind = module.get("type", "").rsplit(".", 1)[-1]
            sub = root / module.get("path", "")
            if kind == "Transformer":
                spec["transformer_path"] = sub
            elif kind == "Pooling":
                try:
                    spec["poolings"] = folder_poolings(root)
                except NotImplementedError as exc:
                    raise NotImplementedError(f"{exc} (pip install sentence-transformers)") from exc
            elif kind != "Normalize":  # we always normalise
                raise NotImplementedError(
                    f"{str(root)!r} has a {kind} module, which the plain-transformers reader "
                    f"does not implement: pip install sentence-transformers."
                )
    config_file = Path(spec["transformer_path"]) / "sentence_bert_config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text(encoding="utf-8"))
        spec["max_length"] = config.get("max_seq_length")
        spec["lowercase"] = bool(config.get("do_lower_case", False))
    return spec


class SentenceEncoder:
    """A sentence-transformers model producing L2-normalised embeddings, with a text cache.

    Create one per ``fit`` / ``predict`` call and drop it afterwards: the model is loaded
    once, texts seen before (in that call) are not encoded again, and the estimator does
    not carry the model around (smaller pickles, no stale device state).

    Parameters
    ----------
    name_or_path : str or path-like
        A sentence-transformers model directory or hub name (for example
        ``"sentence-transformers/all-MiniLM-L6-v2"``). Offline, a hub name must be cached.
    device : str or torch.device, default="auto"
        ``"auto"``: CUDA when available.
    backend : {"auto", "sentence-transformers", "transformers"}, default="auto"
        ``"auto"``: the ``sentence-transformers`` package when installed, else the plain
        ``transformers`` reader (Transformer + Pooling + Normalize models).
    max_length : int or None, default=None
        Truncation length; None keeps the model's own (``max_seq_length``). Lower it to
        save time on CPU.
    batch_size : int, default=64
        Texts per batch.
    mixed_precision : {"auto", "bf16", "no"}, default="auto"
        bfloat16 autocast on GPU by default.
    local_files_only : bool or None, default=None
        Never use the network; None: when offline mode is on.
    verbose : int, default=0
        Progress bars when > 0.

    Attributes
    ----------
    backend_ : str
        The backend in use.
    dim_ : int or None
        Embedding size, known after the first :meth:`encode`.

    Examples
    --------
    >>> from skxmc.text._sentence import SentenceEncoder  # doctest: +SKIP
    >>> enc = SentenceEncoder("/models/all-MiniLM-L6-v2", device="cpu")  # doctest: +SKIP
    >>> enc.encode(["a cat", "a dog", "a cat"]).shape  # doctest: +SKIP
    (3, 384)
    """

    def __init__(
        self,
        name_or_path: str | os.PathLike,
        *,
        device: str | torch.device = "auto",
        backend: str = "auto",
        max_length: int | None = None,
        batch_size: int = 64,
        mixed_precision: str | bool | None = "auto",
        local_files_only: bool | None = None,
        verbose: int = 0,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        if backend == "sentence-transformers" and not _has_sentence_transformers():
            raise ImportError(
                "backend='sentence-transformers' needs pip install sentence-transformers."
            )
        self.name_or_path = os.fspath(name_or_path)
        self.device = resolve_device(device)
        self.backend_ = (
            backend
            if backend != "auto"
            else ("sentence-transformers" if _has_sentence_transformers() else "transformers")
        )
        self.max_length = max_length
        self.batch_size = batch_size
        self.mixed_precision = mixed_precision
        self.local_files_only = is_offline() if local_files_only is None else local_files_only
        self.verbose = verbose
        self.dim_: int | None = None
        self._model: Any = None
        self._index: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    # Loading ------------------------------------------------------------------------------

    def _local_folder(self) -> Path:
        path = Path(self.name_or_path).expanduser()
        if path.is_dir():
            return path
        from huggingface_hub import snapshot_download

        try:
            return Path(
                snapshot_download(self.name_or_path, local_files_only=self.local_files_only)
            )
        except Exception as exc:  # hub errors have many types (HTTP, offline, not cached)
            raise EncoderNotFoundError(
                not_found_message(self.name_or_path, str(exc)[:300])
            ) from exc

    def _load(self) -> None:
        if self._model is not None:
            return
        if self.backend_ == "sentence-transformers":
            from sentence_transformers import SentenceTransformer

            path = Path(self.name_or_path).expanduser()
            name = str(path) if path.is_dir() else self.name_or_path
            try:
                with quiet_transformers(self.verbose):
                    # float32 weights whatever the checkpoint stores: sentence-transformers
                    # keeps a float16 checkpoint in float16, slow and lossy on a CPU
                    model = SentenceTransformer(
                        name,
                        device=str(self.device),
                        local_files_only=self.local_files_only,
                        model_kwargs=dtype_kwargs(),
                    )
            except OSError as exc:
                raise EncoderNotFoundError(
                    not_found_message(self.name_or_path, str(exc)[:300])
                ) from exc
            if self.max_length is not None:
                model.max_seq_length = min(self.max_length, model.max_seq_length or self.max_length)
            model.eval()
            self._model = model
        else:
            spec = read_sentence_transformers_folder(self._local_folder())
            model, tokenizer = load_encoder(spec["transformer_path"], verbose=self.verbose)
            max_length = spec["max_length"]
            if self.max_length is not None:
                max_length = (
                    self.max_length if max_length is None else min(max_length, self.max_length)
                )
            self._model = (
                model.to(self.device),
                tokenizer,
                spec["poolings"],
                max_length,
                spec["lowercase"],
            )

    # Encoding -----------------------------------------------------------------------------

    def _embed(self, texts: list[str]) -> np.ndarray:
        self._load()
        if self.backend_ == "sentence-transformers":
            with torch.inference_mode(), autocast(self.device, self.mixed_precision):
                # A tensor, converted here: numpy has no bfloat16.
                out = self._model.encode(
                    texts,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_tensor=True,
                    show_progress_bar=bool(self.verbose),
                )
            return out.float().cpu().numpy()
        model, tokenizer, poolings, max_length, lowercase = self._model
        if lowercase:
            texts = [t.lower() for t in texts]
        tokenized = tokenize(tokenizer, texts, max_length=max_length)

        def forward(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
            if poolings == ["mean"] or poolings == ["cls"]:
                return encoder_forward(model, inputs, poolings[0])
            out = model(**inputs)
            return torch.cat(
                [
                    pool(out.last_hidden_state, inputs["attention_mask"], p).float()
                    for p in poolings
                ],
                dim=1,
            )

        with eval_mode(model):
            out = batched_inference(
                forward,
                tokenized,
                batch_size=self.batch_size,
                device=self.device,
                mixed_precision=self.mixed_precision,
                verbose=self.verbose,
                desc="sentence embeddings",
            )
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings of ``texts``; each distinct text is encoded once.

        Parameters
        ----------
        texts : sequence of str
            The texts (a list, numpy array or pandas Series).

        Returns
        -------
        embeddings : numpy.ndarray of float32 of shape (n_texts, dim)
        """
        texts, is_pairs = check_texts(texts)
        if is_pairs:
            raise TypeError("sentence embeddings take single texts, not text pairs.")
        new = [t for t in dict.fromkeys(texts) if t not in self._index]
        if new:
            emb = self._embed(new)
            if self.dim_ is None:
                self.dim_ = emb.shape[1]
                self._matrix = np.zeros((0, self.dim_), dtype=np.float32)
            start = len(self._matrix)
            self._matrix = np.concatenate([self._matrix, emb])
            self._index.update({t: start + i for i, t in enumerate(new)})
        if not texts:
            return np.zeros((0, self.dim_ or 0), dtype=np.float32)
        return self._matrix[
            np.fromiter((self._index[t] for t in texts), dtype=np.int64, count=len(texts))
        ]

    def clear(self) -> None:
        """Forget the cached embeddings and release the model."""
        self._model = None
        self._index = {}
        self._matrix = np.zeros((0, self.dim_ or 0), dtype=np.float32)

    def __enter__(self) -> SentenceEncoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()


def sentence_embeddings(
    texts: Sequence[str],
    sentence_encoder: str | os.PathLike,
    *,
    device: str | torch.device = "auto",
    backend: str = "auto",
    max_length: int | None = None,
    batch_size: int = 64,
    verbose: int = 0,
) -> np.ndarray:
    """L2-normalised sentence embeddings of ``texts`` in one call (model loaded and released).

    Parameters
    ----------
    texts : sequence of str
        The texts.
    sentence_encoder : str or path-like
        A sentence-transformers model directory or hub name.
    device : str or torch.device, default="auto"
        ``"auto"``: CUDA when available.
    backend : {"auto", "sentence-transformers", "transformers"}, default="auto"
        See :class:`SentenceEncoder`.
    max_length : int or None, default=None
        Truncation length; None keeps the model's.
    batch_size : int, default=64
        Texts per batch.
    verbose : int, default=0
        Progress bars when > 0.

    Returns
    -------
    embeddings : numpy.ndarray of float32 of shape (n_texts, dim)
    """
    with SentenceEncoder(
        sentence_encoder,
        device=device,
        backend=backend,
        max_length=max_length,
        batch_size=batch_size,
        verbose=verbose,
    ) as enc:
        return enc.encode(texts)


def model_stamp(name_or_path: str | os.PathLike) -> list:
    """What identifies the weights behind ``name_or_path`` for a cache key: for a local
    folder, the name, size and modification time of each of its files (so a model saved
    again under the same path is not served stale embeddings); a hub name as is."""
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        return [os.fspath(name_or_path)]
    return [
        (f.relative_to(path).as_posix(), f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(path.rglob("*"))
        if f.is_file()
    ]


def _cached_embeddings(
    texts: list[str],
    name_or_path: str,
    stamp: list,
    max_length: int | None,
    device: str,
    batch_size: int,
    verbose: int,
) -> np.ndarray:
    # The function joblib.Memory caches: the key is the texts, the model (``stamp``) and
    # the truncation; device, batch size and verbosity do not change the embeddings.
    return sentence_embeddings(
        texts,
        name_or_path,
        device=device,
        max_length=max_length,
        batch_size=batch_size,
        verbose=verbose,
    )


class SentenceEmbedder(TextTransformerMixin, BaseEstimator):
    """Static sentence embeddings as a scikit-learn transformer, optionally cached on disk.

    ``transform`` loads the sentence-transformers model, encodes the texts
    (L2-normalised rows, each distinct text once) and releases the model, so a fitted
    embedder holds no weights and pickles small. With ``memory``, results are cached by
    :class:`joblib.Memory` per call, keyed on the texts, the model files and
    ``max_length``: in a grid search, every parameter setting after the first reads the
    embeddings of each fold from the cache instead of encoding the corpus again.

    Parameters
    ----------
    encoder : str or path-like, default="sentence-transformers/all-MiniLM-L6-v2"
        A sentence-transformers model directory or hub name (offline: a cached one).
    max_length : int or None, default=None
        Truncation length; None keeps the model's own.
    batch_size : int, default=64
        Texts per inference batch.
    device : str, default="auto"
        ``"auto"``: CUDA when available.
    memory : str, path-like, joblib.Memory or None, default=None
        Where to cache the embeddings (a folder or a :class:`joblib.Memory`, as
        :class:`~sklearn.pipeline.Pipeline`'s ``memory``); None: no caching. Recommended
        whenever the same texts are encoded more than once (grid searches,
        cross-validation of several models).
    verbose : int, default=0
        Progress bars when > 0.

    Attributes
    ----------
    n_features_out_ : int
        Embedding size (read in ``fit`` from one encoded text).

    See Also
    --------
    SentenceEncoder : the encoder behind it, for use outside scikit-learn.

    Examples
    --------
    >>> from skxmc.text import SentenceEmbedder  # doctest: +SKIP
    >>> emb = SentenceEmbedder(encoder="/models/all-MiniLM-L6-v2", memory="/tmp/cache")
    >>> emb.fit_transform(["a cat", "a dog"]).shape  # doctest: +SKIP
    (2, 384)
    """

    _parameter_constraints: dict = {
        "encoder": [str, os.PathLike],
        "max_length": [Interval(Integral, 2, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "device": [str],
        "memory": [str, os.PathLike, HasMethods(["cache"]), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        encoder: str | os.PathLike = "sentence-transformers/all-MiniLM-L6-v2",
        max_length: int | None = None,
        batch_size: int = 64,
        device: str = "auto",
        memory: Any = None,
        verbose: int = 0,
    ) -> None:
        self.encoder = encoder
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.memory = memory
        self.verbose = verbose

    def _encode(self, X: Any) -> np.ndarray:
        texts, is_pairs = check_texts(X)
        if is_pairs:
            raise TypeError("SentenceEmbedder takes single texts, not text pairs.")
        # check_memory takes str, not path-like
        memory = check_memory(
            os.fspath(self.memory) if isinstance(self.memory, os.PathLike) else self.memory
        )
        source = os.fspath(self.encoder)
        encode = memory.cache(_cached_embeddings, ignore=["device", "batch_size", "verbose"])
        return encode(
            texts,
            source,
            model_stamp(source),
            self.max_length,
            str(self.device),
            self.batch_size,
            self.verbose,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> SentenceEmbedder:
        """Check the parameters and read the embedding size (encodes the first text).

        Parameters
        ----------
        X : sequence of str
            Texts (only the first is encoded).
        y : None
            Ignored.

        Returns
        -------
        self : SentenceEmbedder
        """
        texts, _ = check_texts(X)
        if not texts:
            raise ValueError("X is empty: fit needs at least one text.")
        self.n_features_out_ = int(self._encode(texts[:1]).shape[1])
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> np.ndarray:
        """:meth:`fit` and :meth:`transform` with one pass over the texts."""
        Z = self._encode(X)
        if Z.shape[0] == 0:
            raise ValueError("X is empty: fit needs at least one text.")
        self.n_features_out_ = int(Z.shape[1])
        return Z

    def transform(self, X: Any) -> np.ndarray:
        """L2-normalised embeddings of ``X``.

        Parameters
        ----------
        X : sequence of str
            Texts (list, numpy array or pandas Series).

        Returns
        -------
        embeddings : ndarray of float32 of shape (n_samples, ``n_features_out_``)
        """
        check_is_fitted(self, "n_features_out_")
        Z = self._encode(X)
        if Z.shape[0] == 0:
            return np.zeros((0, self.n_features_out_), dtype=np.float32)
        return Z

    @property
    def _n_features_out(self) -> int:
        return self.n_features_out_
