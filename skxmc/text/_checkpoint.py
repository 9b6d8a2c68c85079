"""Training checkpoints: weights, optimiser states, RNG states and progress, written atomically.

Layout of ``<checkpoint_dir>/last/``: ``model.safetensors`` (the module's state dict),
``optim.pt`` (optimiser state dicts and torch RNG states, read back with
``torch.load(weights_only=True)``, which unpickles tensors and plain containers only) and
``trainer_state.json`` (step, epoch, position in the epoch, history, numpy / Python RNG
states, the run's fingerprint). A checkpoint is written to a temporary folder and renamed
into place, so an interruption while saving keeps the previous checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._weights import load_module_weights, save_module_weights

__all__ = ["capture_rng_state", "load_checkpoint", "restore_rng_state", "save_checkpoint"]

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
            "key": key.tolist(), "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(gauss)
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
    legacy = ("MT19937", np.asarray(n["key"], dtype=np.uint32), n["pos"], n["has_gauss"], n["gauss"])
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
        torch.save(
            {"optimizers": [opt.state_dict() for opt in optimizers],
             "torch_rng": rng_state["torch"], "cuda_rng": rng_state["cuda"]},
            tmp / "optim.pt",
        )  # fmt: skip
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
        raise ValueError(f"checkpoint {path} has {len(blob['optimizers'])} optimisers, the "
                         f"trainer {len(optimizers)}.")  # fmt: skip
    for opt, sd in zip(optimizers, blob["optimizers"]):
        opt.load_state_dict(sd)
    rng = dict(state.pop("rng"))
    # RNG states must be CPU ByteTensors whatever map_location was.
    rng["torch"] = blob["torch_rng"].cpu()
    rng["cuda"] = [s.cpu() for s in blob["cuda_rng"]]
    return state, rng
