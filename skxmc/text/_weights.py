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
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
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
    >>> from skxmc.text._weights import load_module_weights, save_module_weights
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
    """Pickling, ``save`` / :func:`skxmc.load` and ONNX export of estimators whose fitted
    state holds a fine-tuned text model: ``module_`` (with the encoder as
    ``module_.encoder``) and ``tokenizer_``. Goes before
    :class:`skxmc.io.PersistenceMixin` in the bases; subclasses define
    ``_rebuild_module(encoder)``, which recreates ``module_`` around an encoder of the
    saved configuration, and ``_tokenize(texts)``.

    ONNX: :meth:`export_onnx` writes the text model (encoder, pooling and the heads that
    inference reads) as an ONNX graph; :meth:`set_inference_backend` runs inference
    through ONNX Runtime instead of torch in the estimators whose inference goes through
    :meth:`_text_model_outputs` (``_onnx_inference = True``).
    """

    #: Whether this estimator's inference reads the text model through
    #: :meth:`_text_model_outputs` (so that an ONNX Runtime backend can replace torch).
    _onnx_inference = False

    def _rebuild_module(self, encoder: torch.nn.Module) -> torch.nn.Module:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if state.get("module_") is not None:
            state["module_"] = module_on_cpu(state["module_"])
        state.pop("_trainer", None)
        # An ONNX Runtime session does not pickle; the unpickled estimator runs on torch.
        state.pop("_onnx_model", None)
        return state

    # ONNX -------------------------------------------------------------------------------

    def _onnx_outputs(self) -> dict[str, str]:
        """Graph output name -> method of ``module_``: ``embeddings`` (``embed``, or the
        pooled ``features`` for a bare encoder) and ``logits`` where there is a head."""
        module = self.module_
        outputs = {"embeddings": "embed" if hasattr(module, "embed") else "features"}
        if hasattr(module, "logits"):
            outputs["logits"] = "logits"
        return outputs

    def _onnx_sample(self) -> dict[str, torch.Tensor]:
        # Two texts of different lengths: the traced graph then masks padding, which is
        # right for batches with and without padding alike.
        if getattr(self, "text_pairs_", False):
            texts: list = [("onnx export sample", "a longer second text of the pair"), ("a", "b")]
        else:
            texts = ["an onnx export sample text of a few words", "a"]
        return self._tokenize(texts).collate(np.arange(len(texts))).inputs

    def export_onnx(
        self,
        path: str | os.PathLike,
        *,
        opset_version: int | None = None,
        dynamo: bool = False,
        verify: bool = True,
        atol: float = 1e-4,
    ) -> Path:
        """Write the fine-tuned text model as an ONNX graph, for ONNX Runtime or serving.

        The graph takes the tokenizer's tensors (``input_ids`` and ``attention_mask``,
        plus ``token_type_ids`` for a model of text pairs), all int64 of shape
        ``(batch, sequence)`` with both axes dynamic, and returns float32 outputs of
        shape ``(batch, width)``: ``embeddings`` (what ``transform`` returns, or the
        pooled encoder output that a ranker reads) and, for estimators with a classifier
        head, ``logits`` (the head's class scores; SharpReCL's ``predict_proba`` is their
        softmax, KNN-BERT's mixes it with kNN votes over ``embeddings``). The
        tokenizer is not in the graph: tokenise with ``tokenizer_`` (right padding).
        Use it in this estimator with :meth:`set_inference_backend`.

        Parameters
        ----------
        path : str or path-like
            The ``.onnx`` file to write (e.g. next to the saved model: ``model.onnx``).
        opset_version : int or None, default=None
            ONNX opset; None: 17 (TorchScript exporter) or torch's default (dynamo).
        dynamo : bool, default=False
            Use torch's ``torch.export``-based exporter (needs ``pip install
            onnxscript``) instead of the TorchScript-based one.
        verify : bool, default=True
            Run the written graph with ONNX Runtime on a padded batch and on a single text,
            and raise unless every output equals torch's to ``atol``.
        atol : float, default=1e-4
            Largest absolute difference ``verify`` accepts.

        Returns
        -------
        path : pathlib.Path
            The file. Its metadata (``skxmc.*`` keys) names the estimator, the outputs,
            the pooling, the tokenizer's ``max_length``, the classes (the columns of
            ``logits``, as JSON) and a hash of the weights, which
            :meth:`set_inference_backend` checks.

        Raises
        ------
        ImportError
            When ``onnx`` (or, with ``verify``, ``onnxruntime``) is not installed; the
            message gives the pip command.
        RuntimeError
            When ``verify`` finds outputs differing from torch's by more than ``atol``.
        """
        from sklearn.utils.validation import check_is_fitted

        from ._onnx import (
            export_text_model,
            require_onnxruntime,
        )

        check_is_fitted(self, "module_")
        if verify:
            require_onnxruntime("export_onnx(verify=True)")
        # Export from CPU: outputs are then compared with CPU float32 torch, not TF32 GPU.
        module = module_on_cpu(self.module_)
        outputs = self._onnx_outputs()
        sample = self._onnx_sample()
        metadata = self._onnx_metadata(module, outputs)
        path = export_text_model(
            module,
            sample,
            path,
            outputs=outputs,
            metadata=metadata,
            opset_version=opset_version,
            dynamo=dynamo,
        )
        if verify:
            _verify_onnx(path, module, sample, outputs, atol)
        return path

    def _onnx_metadata(self, module: Any, outputs: dict) -> dict:
        """The ``skxmc.*`` metadata of an exported graph (see :meth:`export_onnx`)."""
        from ._onnx import metadata_json, weights_fingerprint

        metadata = {
            "estimator": type(self).__name__,
            "outputs": metadata_json(outputs),
            "embeddings_method": outputs["embeddings"],
            "pooling": str(getattr(module, "pooling", "")),
            "text_pairs": metadata_json(bool(getattr(self, "text_pairs_", False))),
            "weights_sha256": weights_fingerprint(module),
            "max_length": str(self._max_length()),
        }
        if "logits" in outputs:
            # The logits' columns, so that a process without skxmc can name the classes.
            try:
                metadata["classes"] = metadata_json(np.asarray(self.classes_).tolist())
            except TypeError:  # labels that JSON cannot hold
                pass
        return metadata

    def set_inference_backend(
        self,
        backend: str = "onnx",
        *,
        onnx_path: str | os.PathLike | None = None,
        n_threads: int | None = None,
        providers: Sequence[str] | None = None,
    ) -> Any:
        """Run ``transform`` / ``predict`` / ``predict_proba`` through ONNX Runtime or torch.

        With ``"onnx"``, the fitted text model runs as an ONNX graph (the estimator's
        tokenizer, batches and padding are unchanged; outputs equal torch's to about 1e-5,
        checked to 1e-4 by the tests). Set after ``fit``: a new ``fit`` returns to torch,
        and so does a pickled, cloned or loaded estimator (the session is not stored).
        ``device`` is ignored while the ONNX backend is on (``providers`` chooses).

        Parameters
        ----------
        backend : {"onnx", "torch"}, default="onnx"
            ``"torch"`` drops the ONNX Runtime session.
        onnx_path : str, path-like or None, default=None
            A graph written by :meth:`export_onnx` for this very model (its weights hash
            must match). None: export one now, held in memory only.
        n_threads : int or None, default=None
            ONNX Runtime's ``intra_op_num_threads``; None: its default (one per physical
            core).
        providers : sequence of str or None, default=None
            ONNX Runtime execution providers; None: ``["CPUExecutionProvider"]``.

        Returns
        -------
        self

        Raises
        ------
        ImportError
            When ``onnxruntime`` (or, to export, ``onnx``) is not installed; the message
            gives the pip command.
        ValueError
            When ``onnx_path`` holds another model's graph (other weights or outputs).
        NotImplementedError
            For estimators whose inference does not run through the backend yet.
        """
        from sklearn.utils.validation import check_is_fitted

        from ._onnx import OnnxTextModel, export_to_bytes, require_onnxruntime, weights_fingerprint

        if backend not in ("onnx", "torch"):
            raise ValueError(f"backend must be 'onnx' or 'torch', got {backend!r}.")
        if backend == "torch":
            self.__dict__.pop("_onnx_model", None)
            return self
        if not self._onnx_inference:
            raise NotImplementedError(
                f"{type(self).__name__} runs inference with torch only; export_onnx(path) "
                f"writes its text model for serving elsewhere."
            )
        check_is_fitted(self, "module_")
        require_onnxruntime(f"{type(self).__name__}.set_inference_backend('onnx')")
        if onnx_path is None:
            source: Any = export_to_bytes(lambda path: self.export_onnx(path, verify=False))
        else:
            source = onnx_path
        runner = OnnxTextModel(source, n_threads=n_threads, providers=providers)
        expected = {
            "estimator": type(self).__name__,
            "outputs": json.dumps(self._onnx_outputs(), sort_keys=True),
            "weights_sha256": weights_fingerprint(self.module_),
        }
        wrong = [k for k, v in expected.items() if runner.metadata.get(k) != v]
        if wrong:
            raise ValueError(
                f"{str(onnx_path)!r} is not an export of this fitted model (its {', '.join(wrong)} "
                f"differ{'s' if len(wrong) == 1 else ''}); write it with export_onnx(path) "
                f"after the last fit, or pass onnx_path=None to export now."
            )
        self._onnx_model = runner
        return self

    @property
    def inference_backend_(self) -> str:
        """``"onnx"`` while :meth:`set_inference_backend` holds an ONNX Runtime session,
        else ``"torch"``."""
        return "onnx" if self.__dict__.get("_onnx_model") is not None else "torch"

    def _text_model_outputs(
        self,
        method: str,
        tokens: Any,
        *,
        batch_size: int,
        device: torch.device | None,
        verbose: int = 0,
        desc: str = "encoding",
    ) -> np.ndarray:
        """``module_.<method>`` of every text, rows in input order: through ONNX Runtime
        when a session is set, else with torch on ``device``
        (:func:`~skxmc.text.batched_inference`)."""
        from ._encoder import batched_inference, eval_mode

        runner = self.__dict__.get("_onnx_model")
        if runner is not None:
            return runner.run(
                tokens,
                runner.outputs_for(method),
                batch_size=batch_size,
                verbose=verbose,
                desc=desc,
            )
        module = self.module_.to(device)
        with eval_mode(module):
            return batched_inference(
                getattr(module, method),
                tokens,
                batch_size=batch_size,
                device=device,
                verbose=verbose,
                desc=desc,
            )

    def _save_state(self) -> tuple[dict, dict]:
        attributes, arrays = super()._save_state()
        for name in ("module_", "tokenizer_"):
            attributes.pop(name, None)
        return attributes, arrays

    def _save_extra_files(self, directory: str | os.PathLike) -> None:
        save_text_model(self.module_, self.tokenizer_, directory)

    def _load_extra_files(self, directory: str | os.PathLike) -> None:
        self.module_, self.tokenizer_ = load_text_model(directory, self._rebuild_module)


def _verify_onnx(path: Path, module: Any, sample: dict, outputs: dict, atol: float) -> None:
    """Raise unless the graph at ``path`` gives torch's outputs, to ``atol``, on the padded
    ``sample`` and on its second text alone (a batch without padding)."""
    from ._encoder import eval_mode
    from ._onnx import OnnxTextModel

    # The padded sample, and its second text alone (a batch without padding).
    length = int(sample["attention_mask"][1].sum())
    single = {name: value[1:, :length] for name, value in sample.items()}
    runner = OnnxTextModel(path, n_threads=1)
    for batch in (sample, single):
        got = runner.session.run(list(outputs), {k: v.numpy() for k, v in batch.items()})
        with torch.inference_mode(), eval_mode(module):
            for value, (name, method) in zip(got, outputs.items()):
                want = getattr(module, method)(batch).float().numpy()
                diff = float(np.abs(value - want).max())
                if not diff <= atol:
                    raise RuntimeError(
                        f"the exported ONNX graph's {name!r} output differs from "
                        f"torch by {diff:.2g} (> atol={atol:g}); export again with "
                        f"another opset_version or with dynamo=True."
                    )
