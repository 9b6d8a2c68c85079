"""ONNX export of fine-tuned text models, and ONNX Runtime as their inference backend.

:func:`export_text_model` writes a fitted estimator's text model (encoder, pooling and the
heads its ``transform`` / ``predict`` read) as one ONNX graph with dynamic batch and
sequence axes. :class:`OnnxTextModel` runs such a graph with ONNX Runtime on the
batches of a :class:`~skxmc.text.TokenizedTexts`, exactly as
:func:`~skxmc.text.batched_inference` runs the torch model: the tokenizer, the
length-sorted batches and the padding stay the same, so only the forward pass changes.

The estimators expose this as ``export_onnx(path)`` and
``set_inference_backend("onnx")`` (see :class:`~skxmc.text._weights.FineTunedModelMixin`).
``onnx`` and ``onnxruntime`` are optional dependencies, imported only here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._optional import require
from ._tokenize import TokenizedTexts

__all__ = ["OnnxTextModel", "export_text_model", "weights_fingerprint"]

#: ONNX output of each model method that inference calls; ``logits_and_embed`` (KNN-BERT)
#: is the two outputs side by side, as the torch method concatenates them.
_METHOD_OUTPUTS = {
    "embed": ("embeddings",),
    "features": ("embeddings",),
    "logits": ("logits",),
    "logits_and_embed": ("logits", "embeddings"),
}
_META_PREFIX = "skxmc."


def require_onnxruntime(purpose: str = "running a model with ONNX Runtime") -> Any:
    """Import ``onnxruntime``, or raise an ImportError with the pip command of the extra."""
    return require("onnxruntime", "onnx", purpose)


def require_onnx(purpose: str = "exporting a model to ONNX") -> Any:
    """Import ``onnx``, or raise an ImportError with the pip command of the extra."""
    return require("onnx", "onnx", purpose)


def weights_fingerprint(module: torch.nn.Module) -> str:
    """SHA-256 of a module's ``state_dict`` (names, dtypes, shapes and bytes).

    Stored in an exported graph, so that a graph of other weights (another fit, another
    estimator) is refused when attached to an estimator.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{t.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _shared_features(module: torch.nn.Module, features: torch.Tensor) -> Iterator[None]:
    # The heads (``embed``, ``logits``...) each call ``self.features(inputs)``: answering
    # with the features already computed puts the encoder in the graph once, not per head.
    module.features = lambda inputs: features
    try:
        yield
    finally:
        del module.features


#: The tensors a :class:`~skxmc.text.TextBatch` holds, in the graph's input order.
_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


class _ExportGraph(torch.nn.Module):
    """Token tensors in, one tensor per exported output out (what the exporter traces).

    Named arguments rather than ``*tensors``: the dynamo exporter maps ``dynamic_axes`` to
    the parameters by name.
    """

    def __init__(self, module: torch.nn.Module, methods: Sequence[str]) -> None:
        super().__init__()
        self.module = module
        self.methods = list(methods)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        features = self.module.features(inputs)
        with _shared_features(self.module, features):
            return tuple(getattr(self.module, m)(inputs).float() for m in self.methods)


def export_text_model(
    module: torch.nn.Module,
    sample: dict[str, torch.Tensor],
    path: str | os.PathLike,
    *,
    outputs: dict[str, str],
    metadata: dict[str, str] | None = None,
    opset_version: int | None = None,
    dynamo: bool = False,
) -> Path:
    """Export ``module``'s text model to an ONNX file with dynamic batch and sequence axes.

    Parameters
    ----------
    module : torch.nn.Module
        An :class:`~skxmc.text._classifier.EncoderModule` (``features(inputs)``, and the
        methods named in ``outputs``), on the CPU. It is put in eval mode while exporting.
    sample : dict of str to torch.Tensor
        One padded batch's ``TextBatch.inputs`` (at least two texts of different lengths,
        so that the traced graph masks padding); its keys become the graph's inputs.
    path : str or path-like
        The ``.onnx`` file to write (parent folders are created).
    outputs : dict of str to str
        Graph output name -> method of ``module`` (e.g. ``{"embeddings": "embed"}``).
    metadata : dict of str to str, optional
        Written into the graph's ``metadata_props`` (keys get the ``skxmc.`` prefix).
    opset_version : int or None, default=None
        ONNX opset; None: 17 for the TorchScript exporter, torch's default for dynamo.
    dynamo : bool, default=False
        Use the ``torch.export``-based exporter (needs ``onnxscript``) instead of the
        TorchScript-based one.

    Returns
    -------
    path : pathlib.Path
    """
    from ._encoder import eval_mode

    onnx = require_onnx()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    input_names = [name for name in _INPUT_NAMES if name in sample]
    if sorted(input_names) != sorted(sample) or input_names[:2] != list(_INPUT_NAMES[:2]):
        raise ValueError(
            f"sample must hold {_INPUT_NAMES[:2]} (and token_type_ids for text pairs), as "
            f"TextBatch.inputs do; got {sorted(sample)}."
        )
    output_names = list(outputs)
    graph = _ExportGraph(module, [outputs[name] for name in output_names])
    dynamic_axes = {name: {0: "batch", 1: "sequence"} for name in input_names}
    dynamic_axes.update({name: {0: "batch"} for name in output_names})
    kwargs: dict[str, Any] = {}
    if opset_version is None and not dynamo:
        opset_version = 17  # LayerNormalization as one operator; ONNX Runtime >= 1.14 runs it
    if dynamo:
        kwargs["external_data"] = False  # one self-contained file (models under 2 GB)
        # The torch.export-based exporter takes shapes per argument, not dynamic_axes.
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        kwargs["dynamic_shapes"] = {name: {0: batch, 1: sequence} for name in input_names}
    else:
        kwargs["dynamic_axes"] = dynamic_axes
    with eval_mode(graph), warnings.catch_warnings():
        # The tracer warns about Python branches on shapes in transformers' mask code; the
        # branch taken for a padded sample is right for every batch (tests check batch
        # sizes and lengths). The TorchScript exporter also warns that it is deprecated.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.onnx")
        warnings.filterwarnings("ignore", message=r".*legacy TorchScript-based ONNX export")
        warnings.filterwarnings("ignore", message=r"Exporting aten::index operator")
        warnings.filterwarnings("ignore", message=r"# The axis name: .* will not be used")
        try:
            torch.onnx.export(
                graph,
                tuple(sample[name] for name in input_names),
                str(path),
                input_names=input_names,
                output_names=output_names,
                opset_version=opset_version,
                dynamo=dynamo,
                verbose=False,
                **kwargs,
            )
        except ImportError as exc:  # the dynamo exporter's onnxscript
            raise ImportError(
                f"torch.onnx.export(dynamo={dynamo}) needs a package that is not installed "
                f"({exc}); pip install onnxscript, or export with dynamo=False."
            ) from exc
    if metadata:
        model = onnx.load(str(path), load_external_data=False)
        for key, value in metadata.items():
            entry = model.metadata_props.add()
            entry.key, entry.value = _META_PREFIX + key, str(value)
        onnx.save(model, str(path))
    return path


class OnnxTextModel:
    """A text model exported to ONNX, run by ONNX Runtime on tokenised texts.

    Parameters
    ----------
    model : str, path-like or bytes
        The ``.onnx`` file (or its bytes), as written by an estimator's ``export_onnx``.
    n_threads : int or None, default=None
        ONNX Runtime's ``intra_op_num_threads`` (threads inside one operator, as
        ``torch.set_num_threads`` for torch); None: ONNX Runtime's default (one per
        physical core). Operators run one after the other (``inter_op_num_threads=1``).
    providers : sequence of str or None, default=None
        Execution providers; None: ``["CPUExecutionProvider"]``.

    Attributes
    ----------
    session : onnxruntime.InferenceSession
    input_names, output_names : list of str
    metadata : dict of str to str
        What the exporter recorded (``skxmc.*`` keys: estimator, outputs, weights hash...).

    Raises
    ------
    ImportError
        When ``onnxruntime`` is not installed (the message gives the pip command).
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes,
        *,
        n_threads: int | None = None,
        providers: Sequence[str] | None = None,
    ) -> None:
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        if n_threads is not None:
            if int(n_threads) < 1:
                raise ValueError(f"n_threads must be >= 1 or None, got {n_threads!r}.")
            options.intra_op_num_threads = int(n_threads)
        options.inter_op_num_threads = 1
        source = model if isinstance(model, bytes) else os.fspath(model)
        if not isinstance(source, bytes) and not Path(source).is_file():
            raise FileNotFoundError(
                f"ONNX file {source!r} does not exist; write it with estimator.export_onnx(path)."
            )
        self.path = None if isinstance(source, bytes) else Path(source)
        self.n_threads = n_threads
        self.session = ort.InferenceSession(
            source, sess_options=options, providers=list(providers or ["CPUExecutionProvider"])
        )
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        custom = self.session.get_modelmeta().custom_metadata_map
        self.metadata = {
            k[len(_META_PREFIX) :]: v for k, v in custom.items() if k.startswith(_META_PREFIX)
        }

    def __repr__(self) -> str:
        where = "bytes" if self.path is None else str(self.path)
        return f"OnnxTextModel({where!r}, outputs={self.output_names}, n_threads={self.n_threads})"

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(
            "an OnnxTextModel (an ONNX Runtime session) cannot be pickled; pickle the "
            "estimator (it drops the session) and call set_inference_backend('onnx', "
            "onnx_path=...) again after loading."
        )

    def outputs_for(self, method: str) -> tuple[str, ...]:
        """The graph outputs that give what the torch model's ``method`` returns."""
        names = _METHOD_OUTPUTS.get(method)
        # "embeddings" holds ``embed`` when the model has that method, else ``features``
        # (KNN-BERT's ``embed`` projects the features: the two differ).
        source = self.metadata.get("embeddings_method", "embed")
        if method in ("embed", "features", "logits_and_embed") and source != method.replace(
            "logits_and_", ""
        ):
            names = None
        if names is None or any(n not in self.output_names for n in names):
            raise ValueError(
                f"this ONNX model has no output for {method!r} (outputs: {self.output_names}); "
                f"export it again with the estimator's export_onnx(path)."
            )
        return names

    def run(
        self,
        tokenized: TokenizedTexts,
        outputs: Sequence[str],
        *,
        batch_size: int = 64,
        verbose: int = 0,
        desc: str = "encoding",
    ) -> np.ndarray:
        """The ``outputs`` of every text, side by side, rows in input order.

        Batches are those of :func:`~skxmc.text.batched_inference` (sorted by decreasing
        length, padded to the longest text of each batch).

        Parameters
        ----------
        tokenized : TokenizedTexts
            The texts, tokenised by the estimator's own tokenizer.
        outputs : sequence of str
            Graph outputs to return, concatenated along the columns.
        batch_size : int, default=64
            Texts per batch.
        verbose : int, default=0
            Show a progress bar when > 0.
        desc : str, default="encoding"
            Progress bar label.

        Returns
        -------
        out : numpy.ndarray of float32 of shape (n_texts, n_columns)
            ``(0, 0)`` for no texts, as :func:`~skxmc.text.batched_inference`.
        """
        from ._encoder import _progress

        outputs = list(outputs)
        batches = tokenized.batches(batch_size)
        result: np.ndarray | None = None
        bar = _progress(len(batches), desc, verbose)
        try:
            for batch in batches:
                missing = [n for n in self.input_names if n not in batch.inputs]
                if missing:
                    raise ValueError(
                        f"the ONNX model needs inputs {missing} that the tokenised texts lack "
                        f"(text pairs give token_type_ids; single texts do not)."
                    )
                feed = {name: batch.inputs[name].numpy() for name in self.input_names}
                values = self.session.run(outputs, feed)
                block = np.concatenate(
                    [np.asarray(v, dtype=np.float32).reshape(len(batch), -1) for v in values],
                    axis=1,
                )
                if result is None:
                    result = np.empty((len(tokenized), block.shape[1]), dtype=np.float32)
                result[batch.indices] = block
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        if result is None:
            return np.zeros((0, 0), dtype=np.float32)
        return result


def export_to_bytes(export: Any) -> bytes:
    """Run ``export(path)`` into a temporary folder and return the file's bytes (for a
    session held in memory, with no file to keep)."""
    with tempfile.TemporaryDirectory(prefix="skxmc-onnx-") as folder:
        path = Path(folder) / "model.onnx"
        export(path)
        return path.read_bytes()


def metadata_json(value: Any) -> str:
    """Metadata values are strings: lists and dicts go in as JSON."""
    return json.dumps(value, sort_keys=True)
