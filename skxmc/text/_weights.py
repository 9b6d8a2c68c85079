"""Torch weights in a model directory: safetensors files and encoders rebuilt from config.

An estimator's model directory keeps the encoder's ``config.json`` and tokenizer files
(:func:`save_encoder_config`) and the weights of all its modules in safetensors files
(:func:`save_module_weights`). Loading rebuilds the encoder architecture from the config
with random weights (:func:`encoder_from_config`: no network, no code from the directory)
and then copies the saved weights in (:func:`load_module_weights`), on any device: a model
trained on GPU opens on a CPU-only machine.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import Any

import torch

from ._encoder import dtype_kwargs, quiet_transformers

__all__ = [
    "FineTunedModelMixin",
    "encoder_from_config",
    "load_module_weights",
    "load_text_model",
    "module_on_cpu",
    "save_encoder_config",
    "save_module_weights",
    "save_text_model",
]

logger = logging.getLogger(__name__)

# The files a tokenizer is built from (one is enough: fast, WordPiece, BPE, SentencePiece).
# Without any, transformers falls back to a tokenizer of a handful of special tokens that
# maps every word to [UNK]: a silently different model.
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


def save_module_weights(module: torch.nn.Module, path: str | os.PathLike) -> Path:
    """Write ``module.state_dict()`` (parameters and persistent buffers) to a safetensors file.

    Tied parameters (such as shared input / output embeddings) are stored once.

    Parameters
    ----------
    module : torch.nn.Module
        The module, on any device.
    path : str or path-like
        File to write (conventionally ending in ``.safetensors``).

    Returns
    -------
    path : pathlib.Path

    Examples
    --------
    >>> import tempfile, torch
    >>> from skxmc.text import load_module_weights, save_module_weights
    >>> a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_module_weights(a, f"{d}/w.safetensors")
    ...     load_module_weights(b, f"{d}/w.safetensors")
    >>> torch.equal(a.weight, b.weight)
    True
    """
    from safetensors.torch import save_model

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(module, str(path))
    return path


def load_module_weights(
    module: torch.nn.Module,
    path: str | os.PathLike,
    *,
    map_location: str | torch.device = "cpu",
    strict: bool = True,
) -> None:
    """Copy weights saved by :func:`save_module_weights` into ``module`` (in place).

    The tensors are read on ``map_location`` and copied into the module's own tensors,
    which stay on the module's device; safetensors files hold no code, so loading a file
    from someone else is safe.

    Parameters
    ----------
    module : torch.nn.Module
        A module of the same architecture (built from the saved configuration).
    path : str or path-like
        The safetensors file.
    map_location : str or torch.device, default="cpu"
        Device the file is read onto. CPU works everywhere, whatever device the weights
        were trained on.
    strict : bool, default=True
        Fail on missing or unexpected keys.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a readable safetensors file (truncated, or a pickle).
    RuntimeError
        With ``strict``, when keys or shapes do not match (weights of another model).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    device = torch.device(map_location)
    # safetensors takes "cpu", "cuda:0" or an index rather than a torch.device.
    where = str(device) if device.type != "cuda" or device.index is not None else "cuda:0"
    if not Path(path).is_file():
        raise FileNotFoundError(f"weights file {str(path)!r} is missing.")
    try:
        missing, unexpected = load_model(module, str(path), strict=strict, device=where)
    except SafetensorError as exc:
        raise ValueError(
            f"cannot read weights file {str(path)!r} ({exc}): truncated, damaged or not a "
            f"safetensors file."
        ) from exc
    except RuntimeError as exc:
        raise RuntimeError(
            f"the weights in {str(path)!r} do not fit {type(module).__name__} (weights of "
            f"another model or configuration?): {exc}"
        ) from exc
    if not strict and (missing or unexpected):
        logger.debug(
            "load_module_weights(%s): missing %s, unexpected %s", path, missing, unexpected
        )


def save_encoder_config(model: Any, tokenizer: Any, directory: str | os.PathLike) -> Path:
    """Save an encoder's ``config.json`` and tokenizer files, without its weights.

    Save the weights with :func:`save_module_weights` (possibly together with heads built
    on the encoder) and rebuild with :func:`encoder_from_config`.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The encoder.
    tokenizer : transformers tokenizer
        Its tokenizer.
    directory : str or path-like
        Created if needed.

    Returns
    -------
    directory : pathlib.Path
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def encoder_from_config(
    directory: str | os.PathLike, *, weights: str | os.PathLike | None = None, verbose: int = 0
) -> tuple[torch.nn.Module, Any]:
    """Rebuild an encoder and tokenizer from a saved config, without network access.

    The architecture comes from ``config.json`` (``AutoConfig`` + ``AutoModel.from_config``,
    random weights, float32, eval mode, CPU); remote code is never trusted, so only model
    types shipped with ``transformers`` load. Then load the weights with
    :func:`load_module_weights`, or pass ``weights``.

    Parameters
    ----------
    directory : str or path-like
        A directory written by :func:`save_encoder_config` (or ``save_pretrained``).
    weights : str or path-like, optional
        A safetensors file of the encoder's own ``state_dict`` to load right away.
    verbose : int, default=0
        Show ``transformers`` progress bars when > 0.

    Returns
    -------
    model : transformers.PreTrainedModel
    tokenizer : transformers tokenizer

    Raises
    ------
    FileNotFoundError
        When ``config.json`` or every tokenizer vocabulary file (``tokenizer.json``,
        ``vocab.txt``, ...) is missing: transformers would otherwise build a tokenizer of
        special tokens only.
    ValueError
        When ``config.json`` cannot be read or names an unknown architecture.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder = Path(directory)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder / 'config.json'} is missing: no encoder to rebuild.")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"{str(folder)!r} holds no tokenizer vocabulary (one of "
            f"{', '.join(TOKENIZER_FILES)}): the encoder folder is incomplete."
        )
    directory = str(directory)
    with quiet_transformers(verbose):
        try:
            config = AutoConfig.from_pretrained(
                directory, local_files_only=True, trust_remote_code=False
            )
        except (ValueError, OSError, KeyError) as exc:
            raise ValueError(f"cannot use {folder / 'config.json'}: {exc}") from exc
        model = AutoModel.from_config(config, trust_remote_code=False, **dtype_kwargs())
        tokenizer = AutoTokenizer.from_pretrained(
            directory, local_files_only=True, trust_remote_code=False
        )
    if weights is not None:
        load_module_weights(model, weights)
    model.eval()
    return model, tokenizer


ENCODER_DIR = "encoder"
WEIGHTS_FILE = "model.safetensors"


def save_text_model(module: torch.nn.Module, tokenizer: Any, directory: str | os.PathLike) -> None:
    """Save a fine-tuned text model into an estimator's model directory.

    ``directory/encoder`` gets the encoder's config and tokenizer (no weights), and
    ``directory/model.safetensors`` the weights of the whole ``module``, whose encoder is
    ``module.encoder``. :func:`load_text_model` rebuilds it without network access.
    """
    directory = Path(directory)
    save_encoder_config(module.encoder, tokenizer, directory / ENCODER_DIR)
    save_module_weights(module, directory / WEIGHTS_FILE)


def load_text_model(directory: str | os.PathLike, build: Any) -> tuple[torch.nn.Module, Any]:
    """Inverse of :func:`save_text_model`: ``(module, tokenizer)``, the module in eval mode
    on the CPU. ``build(encoder) -> module`` recreates the module around a randomly
    initialised encoder of the saved configuration before the weights are loaded."""
    directory = Path(directory)
    encoder, tokenizer = encoder_from_config(directory / ENCODER_DIR)
    module = build(encoder)
    load_module_weights(module, directory / WEIGHTS_FILE)
    return module.eval(), tokenizer


def module_on_cpu(module: torch.nn.Module | None) -> torch.nn.Module | None:
    """``module``, or a CPU copy of it when it has tensors elsewhere: what pickling stores,
    so a model trained on a GPU unpickles on a machine without one."""
    if module is not None and any(t.device.type != "cpu" for t in module.state_dict().values()):
        return copy.deepcopy(module).to("cpu")
    return module


class FineTunedModelMixin:
    """Pickling and ``save`` / :func:`skxmc.load` of estimators whose fitted state holds a
    fine-tuned text model: ``module_`` (with the encoder as ``module_.encoder``) and
    ``tokenizer_``. Goes before :class:`skxmc._persistence.PersistenceMixin` in the bases;
    subclasses define ``_rebuild_module(encoder)``, which recreates ``module_`` around an
    encoder of the saved configuration.
    """

    def _rebuild_module(self, encoder: torch.nn.Module) -> torch.nn.Module:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if state.get("module_") is not None:
            state["module_"] = module_on_cpu(state["module_"])
        state.pop("_trainer", None)
        return state

    def _save_state(self) -> tuple[dict, dict]:
        attributes, arrays = super()._save_state()
        for name in ("module_", "tokenizer_"):
            attributes.pop(name, None)
        return attributes, arrays

    def _save_extra_files(self, directory: str | os.PathLike) -> None:
        save_text_model(self.module_, self.tokenizer_, directory)

    def _load_extra_files(self, directory: str | os.PathLike) -> None:
        self.module_, self.tokenizer_ = load_text_model(directory, self._rebuild_module)
