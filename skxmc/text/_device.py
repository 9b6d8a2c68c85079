"""Device resolution, mixed-precision contexts and moving batches between devices."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch

__all__ = [
    "autocast",
    "make_accelerator",
    "move_to_device",
    "resolve_device",
    "resolve_mixed_precision",
]

MIXED_PRECISION_OPTIONS = ("auto", "bf16", "fp16", "no")
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """Turn a ``device`` parameter into a :class:`torch.device`.

    Parameters
    ----------
    device : str, torch.device or None, default="auto"
        ``"auto"`` (or None) picks ``"cuda"`` when a CUDA device is available and
        ``"cpu"`` otherwise; any other value is passed to :class:`torch.device`
        (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``).

    Returns
    -------
    device : torch.device

    Raises
    ------
    ValueError
        If a CUDA device is requested on a machine without one.

    Examples
    --------
    >>> from skxmc.text._device import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a valid torch device; use 'auto', 'cpu', 'cuda' or "
            f"'cuda:<index>'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        # Failing here beats failing deep inside the first forward pass.
        raise ValueError(
            f"device={device!r} was requested but torch sees no CUDA device "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda}); use device='auto' "
            f"or device='cpu'."
        )
    return resolved


def resolve_mixed_precision(
    device: torch.device, mixed_precision: str | bool | None = "auto"
) -> torch.dtype | None:
    """The autocast dtype to use on ``device``, or None for full float32.

    Parameters
    ----------
    device : torch.device
        The device computations run on.
    mixed_precision : {"auto", "bf16", "fp16", "no"}, bool or None, default="auto"
        ``"auto"``: bfloat16 on CUDA devices that support it, float32 elsewhere (CPU
        autocast is slower than float32 on most CPUs). ``"bf16"`` (or True): bfloat16 on
        any device. ``"fp16"``: float16, for GPUs without bfloat16; training then scales
        the loss (the :class:`~skxmc.text.Trainer` does it through ``accelerate``).
        ``"no"`` (or False / None): float32.

    Returns
    -------
    dtype : torch.dtype or None
    """
    if mixed_precision is None or mixed_precision is False or mixed_precision == "no":
        return None
    if mixed_precision is True or mixed_precision == "bf16":
        return torch.bfloat16
    if mixed_precision == "fp16":
        return torch.float16
    if mixed_precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None
    raise ValueError(
        f"mixed_precision must be one of {MIXED_PRECISION_OPTIONS} or a bool, got "
        f"{mixed_precision!r}."
    )


@contextlib.contextmanager
def autocast(device: torch.device, mixed_precision: str | bool | None = "auto") -> Iterator[None]:
    """Context manager running the forward pass in bfloat16 where that pays off.

    Parameters
    ----------
    device : torch.device
        The device computations run on.
    mixed_precision : {"auto", "bf16", "fp16", "no"}, bool or None, default="auto"
        See :func:`resolve_mixed_precision`.

    Examples
    --------
    >>> import torch
    >>> from skxmc.text._device import autocast
    >>> with autocast(torch.device("cpu")):
    ...     y = torch.ones(2, 2) @ torch.ones(2, 2)
    >>> y.dtype
    torch.float32
    """
    dtype = resolve_mixed_precision(device, mixed_precision)
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def is_distributed() -> bool:
    """Whether this process is one of several launched by ``accelerate launch`` / ``torchrun``
    (read from the environment, without starting anything)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def training_device(device: str | torch.device | None = "auto") -> torch.device:
    """The device this process trains on: ``device``, or under ``accelerate launch`` /
    ``torchrun`` on GPUs, the process's own GPU (``cuda:<LOCAL_RANK>``)."""
    resolved = resolve_device(device)
    if is_distributed() and resolved.type == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return resolved


def make_accelerator(device: torch.device, mixed_precision: str | bool | None = "auto") -> Any:
    """An :class:`accelerate.Accelerator` for one ``fit`` on ``device``.

    In one process the device is ``device`` (``accelerate`` keeps one global state per
    process; it is reset here so that every ``fit`` can choose its own device and
    precision). Under ``accelerate launch`` / ``torchrun`` the process group is set up by
    ``accelerate`` and each process takes its own device.

    Parameters
    ----------
    device : torch.device
        The device asked for (ignored for the device choice when distributed).
    mixed_precision : {"auto", "bf16", "fp16", "no"}, bool or None, default="auto"
        See :func:`resolve_mixed_precision`.

    Returns
    -------
    accelerator : accelerate.Accelerator
    """
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    precision = _DTYPE_NAMES.get(resolve_mixed_precision(device, mixed_precision), "no")
    if precision == "fp16" and device.type == "cpu":
        # accelerate would silently train in float32.
        raise ValueError(
            "mixed_precision='fp16' needs a GPU; on CPU use mixed_precision='bf16' or 'no'."
        )
    distributed = is_distributed()
    if not distributed:
        AcceleratorState._reset_state(reset_partial_state=True)
    return Accelerator(
        mixed_precision=precision,
        cpu=device.type == "cpu",
        device_placement=False,  # the Trainer places the module and the batches
        step_scheduler_with_optimizer=False,
    )


def move_to_device(obj: Any, device: torch.device, *, non_blocking: bool = True) -> Any:
    """Move every tensor inside ``obj`` to ``device``.

    Handles tensors, mappings, lists, tuples, dataclasses and objects with a
    ``to(device)`` method (such as :class:`~skxmc.text.TextBatch`); anything else (numpy
    index arrays, numbers, strings) is returned unchanged.

    Parameters
    ----------
    obj : object
        A batch.
    device : torch.device
        Target device.
    non_blocking : bool, default=True
        Passed to :meth:`torch.Tensor.to`; overlaps host-to-GPU copies with compute when
        the source is in pinned memory, and is a no-op otherwise.

    Returns
    -------
    obj : object
        The same structure with its tensors on ``device``.
    """
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, torch.nn.Module):
        raise TypeError("move_to_device moves batches; move modules with module.to(device).")
    if hasattr(obj, "to") and callable(obj.to) and not isinstance(obj, type):
        return obj.to(device)
    if isinstance(obj, Mapping):
        return type(obj)(
            {k: move_to_device(v, device, non_blocking=non_blocking) for k, v in obj.items()}
        )
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(move_to_device(v, device, non_blocking=non_blocking) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_to_device(v, device, non_blocking=non_blocking) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: move_to_device(getattr(obj, f.name), device, non_blocking=non_blocking)
            for f in dataclasses.fields(obj)
            if f.init
        }
        return dataclasses.replace(obj, **changes)
    return obj


def inference_device(device: str | torch.device | None = "auto") -> torch.device:
    """The device to predict on: ``device`` when available here, else the CPU with a
    warning (a model trained with ``device="cuda"`` and opened on a CPU-only machine)."""
    try:
        return resolve_device(device)
    except ValueError:
        warnings.warn(
            f"device={device!r} is not available here; predicting on CPU.",
            RuntimeWarning,
            stacklevel=3,
        )
        return torch.device("cpu")
