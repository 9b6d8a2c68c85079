"""Training checkpoints: weights, optimiser states, RNG states and progress, written atomically.

Layout of ``<checkpoint_dir>/last/``: ``model.safetensors`` (the module's state dict),
``optim.pt`` (optimiser state dicts and torch RNG states, read back with
``torch.load(weights_only=True)``, which unpickles tensors and plain containers only) and
``trainer_state.json`` (step, epoch, position in the epoch, history, numpy / Python RNG
states, the run's fingerprint). A checkpoint is written to a temporary folder and renamed
into place, so an interruption while saving keeps the previous checkpoint.

The fingerprint says which fit a checkpoint belongs to: the estimator's parameters
(:func:`params_fingerprint`) and a hash of the training data (:func:`data_fingerprint`), so
that a checkpoint is resumed only by the fit that wrote it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from ._tokenize import TokenizedTexts
from ._weights import load_module_weights, save_module_weights

__all__ = [
    "capture_rng_state",
    "data_fingerprint",
    "load_checkpoint",
    "params_fingerprint",
    "restore_rng_state",
    "save_checkpoint",
]

LAST = "last"
_OLD = "last.old"
FORMAT_VERSION = 1


def capture_rng_state(generator: np.random.Generator | None = None) -> dict[str, Any]:
    """Python, numpy (global and ``generator``), torch and CUDA RNG states."""
    # The legacy global generator is what third-party code (and seed_everything) uses.
    key, pos, has_gauss, gauss = np.random.get_state(legacy=True)[1:]  # noqa: NPY002
    version, internal, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "python": [version, list(internal), py_gauss],
        "numpy": {
            "key": key.tolist(),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    if generator is not None:
        state["generator"] = generator.bit_generator.state
    return state


def restore_rng_state(state: dict[str, Any], generator: np.random.Generator | None = None) -> None:
    """Inverse of :func:`capture_rng_state`."""
    version, internal, py_gauss = state["python"]
    random.setstate((version, tuple(internal), py_gauss))
    n = state["numpy"]
    key = np.asarray(n["key"], dtype=np.uint32)
    legacy = ("MT19937", key, n["pos"], n["has_gauss"], n["gauss"])
    np.random.set_state(legacy)  # noqa: NPY002
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        # A checkpoint from a machine with more GPUs restores the ones present.
        for i, s in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, i)
    if generator is not None and "generator" in state:
        generator.bit_generator.state = state["generator"]


def save_checkpoint(
    directory: str | os.PathLike,
    module: torch.nn.Module,
    optimizers: list[torch.optim.Optimizer],
    trainer_state: dict[str, Any],
    rng_state: dict[str, Any],
) -> Path:
    """Write a checkpoint to ``directory/last`` atomically; return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory))
    try:
        save_module_weights(module, tmp / "model.safetensors")
        blob = {
            "optimizers": [opt.state_dict() for opt in optimizers],
            "torch_rng": rng_state["torch"],
            "cuda_rng": rng_state["cuda"],
        }
        torch.save(blob, tmp / "optim.pt")
        json_rng = {k: v for k, v in rng_state.items() if k not in ("torch", "cuda")}
        payload = {"format_version": FORMAT_VERSION, **trainer_state, "rng": json_rng}
        (tmp / "trainer_state.json").write_text(json.dumps(payload), encoding="utf-8")
        last, old = directory / LAST, directory / _OLD
        if old.exists():
            shutil.rmtree(old)
        if last.exists():
            last.rename(old)
        tmp.rename(last)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return last


def find_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint under ``directory``, or None."""
    directory = Path(directory)
    for name in (LAST, _OLD):  # "last.old" survives a crash between the two renames
        path = directory / name
        if (path / "trainer_state.json").is_file() and (path / "optim.pt").is_file():
            return path
    return None


def load_checkpoint(
    path: str | os.PathLike, module: torch.nn.Module, optimizers: list[torch.optim.Optimizer]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load weights and optimiser states in place; return (trainer_state, rng_state)."""
    path = Path(path)
    state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    load_module_weights(module, path / "model.safetensors", map_location=device)
    blob = torch.load(path / "optim.pt", map_location=device, weights_only=True)
    if len(blob["optimizers"]) != len(optimizers):
        raise ValueError(
            f"checkpoint {path} has {len(blob['optimizers'])} optimisers, the trainer "
            f"{len(optimizers)}."
        )
    for opt, sd in zip(optimizers, blob["optimizers"]):
        opt.load_state_dict(sd)
    rng = dict(state.pop("rng"))
    # RNG states must be CPU ByteTensors whatever map_location was.
    rng["torch"] = blob["torch_rng"].cpu()
    rng["cuda"] = [s.cpu() for s in blob["cuda_rng"]]
    return state, rng


# Fingerprints ---------------------------------------------------------------------------

# Parameters that change neither the data nor the training: a fit may resume on another
# device, with other verbosity, from a checkpoint folder that was moved, or with another
# time limit (a fit stopped by max_time is resumed by the next, whatever its limit).
RUN_ONLY_PARAMS = ("verbose", "checkpoint_dir", "device", "max_time")


def data_fingerprint(*parts: Any) -> str:
    """A digest of training data, for checkpoint fingerprints.

    Every part is hashed in full with BLAKE2b, with its type, dtype and shape, so that
    two inputs get the same digest only when they hold the same values in the same order.
    Hashing everything rather than a sample costs about a second per GB (far less than a
    training epoch over the same data), and a sample would miss a few edited texts or
    relabelled rows, which would resume the wrong model without a word.

    Parameters
    ----------
    *parts : object
        Any of: ``None``; str, bytes, bool, int or float; numpy arrays (numeric, string
        or object) and torch tensors; scipy sparse matrices and arrays (hashed in
        canonical CSR form, so duplicate or unsorted entries do not matter);
        :class:`~skxmc.text.TokenizedTexts`; sequences (lists of texts or text pairs)
        and mappings of these (mapping keys as str, in sorted order).

    Returns
    -------
    digest : str
        32 hexadecimal characters.

    Raises
    ------
    TypeError
        For a part of another type (it cannot be hashed reliably).

    Examples
    --------
    >>> import numpy as np
    >>> from skxmc.text._checkpoint import data_fingerprint
    >>> a = data_fingerprint(["a cat", "a dog"], np.array([0, 1]))
    >>> a == data_fingerprint(["a cat", "a dog"], np.array([1, 0]))
    False
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(b"skxmc-data-1")
    for part in parts:
        _hash_into(h, part)
    return h.hexdigest()


def _hash_array(h: Any, a: np.ndarray) -> None:
    if a.dtype.kind == "O":
        h.update(b"O" + repr(a.shape).encode())
        _hash_sequence(h, a.ravel().tolist())
        return
    a = np.ascontiguousarray(a)
    h.update(b"A" + a.dtype.str.encode() + repr(a.shape).encode())
    h.update(a.reshape(-1).view(np.uint8))


def _hash_token_ids(h: Any, ids: np.ndarray) -> None:
    """Hash token ids as int32, whatever their stored dtype (uint16 ids hash as the int32
    ones of earlier versions did, so that their checkpoints still match), in blocks."""
    if ids.dtype == np.int32:
        _hash_array(h, ids)
        return
    h.update(b"A" + np.dtype(np.int32).str.encode() + repr(ids.shape).encode())
    for start in range(0, len(ids), 1 << 20):
        h.update(ids[start : start + (1 << 20)].astype(np.int32).view(np.uint8))


def _hash_sequence(h: Any, items: list) -> None:
    h.update(b"L%d;" % len(items))
    if all(type(t) is str for t in items):
        # Texts: lengths, then all bytes at once (one update per text would be slow).
        encoded = [t.encode("utf-8", "surrogatepass") for t in items]
        h.update(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)).tobytes())
        h.update(b"".join(encoded))
        return
    for item in items:
        _hash_into(h, item)


def _hash_into(h: Any, obj: Any) -> None:
    if obj is None:
        h.update(b"N")
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        h.update(b"s%d;" % len(data) + data)
    elif isinstance(obj, bytes):
        h.update(b"b%d;" % len(obj) + obj)
    elif isinstance(obj, (bool, int, float, np.generic)):
        h.update(b"v" + type(obj).__name__.encode() + repr(obj).encode() + b";")
    elif isinstance(obj, TokenizedTexts):
        h.update(b"T" + (b"p" if obj.pairs else b"s"))
        _hash_token_ids(h, obj.ids)
        _hash_array(h, obj.offsets)
        _hash_into(h, obj.type_ids)
    elif sp.issparse(obj):
        X = sp.csr_matrix(obj)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        h.update(b"S" + repr(X.shape).encode())
        for a in (X.indptr, X.indices, X.data):
            _hash_array(h, a)
    elif isinstance(obj, torch.Tensor):
        _hash_array(h, obj.detach().cpu().numpy())
    elif isinstance(obj, np.ndarray):
        _hash_array(h, obj)
    elif isinstance(obj, Mapping):
        h.update(b"M%d;" % len(obj))
        for key in sorted(obj, key=str):
            _hash_into(h, str(key))
            _hash_into(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        _hash_sequence(h, list(obj))
    elif hasattr(obj, "__array__"):  # pandas Series / DataFrame
        _hash_array(h, np.asarray(obj))
    else:
        raise TypeError(
            f"data_fingerprint cannot hash a {type(obj).__name__}; pass arrays, sparse "
            f"matrices, texts or TokenizedTexts."
        )


def params_fingerprint(
    estimator: Any, *, exclude: tuple[str, ...] = RUN_ONLY_PARAMS
) -> dict[str, Any]:
    """The estimator's parameters as a JSON-able dict, for checkpoint fingerprints.

    Plain values (numbers, strings, None, paths, lists and dicts of them) are kept as they
    are; a nested estimator becomes its class and parameters; an array becomes its
    :func:`data_fingerprint`; any other object (a callable, a random generator) becomes
    its qualified name, so two different functions with the same name count as equal.

    Parameters
    ----------
    estimator : estimator
        Anything with ``get_params(deep=False)``.
    exclude : tuple of str, default=("verbose", "checkpoint_dir", "device", "max_time")
        Parameters that do not change the training.

    Returns
    -------
    params : dict
    """
    return {
        k: _describe_param(v)
        for k, v in estimator.get_params(deep=False).items()
        if k not in exclude
    }


def _describe_param(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (list, tuple)):
        return [_describe_param(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _describe_param(x) for k, x in v.items()}
    if isinstance(v, np.ndarray) or sp.issparse(v):
        return {"array": data_fingerprint(v)}
    is_estimator = hasattr(v, "get_params") and not isinstance(v, type)
    # Functions and classes are named by themselves, other objects by their type.
    kind = v if isinstance(v, type) or (callable(v) and not is_estimator) else type(v)
    name = f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', repr(kind))}"
    if is_estimator:
        return {"class": name, "params": params_fingerprint(v, exclude=())}
    return {"object": name}
