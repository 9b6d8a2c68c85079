"""Up-front memory estimates: refuse hyperparameters whose tensors cannot fit.

A size parameter set far too large (``queue_size=10**10``, ``hidden_size=10**9``) used to
fail deep inside ``fit`` with a raw allocator error ("DefaultCPUAllocator: can't allocate
memory: you tried to allocate 1280000000000 bytes"), sometimes only after the encoder had
loaded. Estimators call :func:`check_allocation` at the start of ``fit`` with the bytes
their parameters imply; it raises :class:`InsufficientMemoryError`, which names the
parameter, the estimate and the memory there is.

The checks are deliberately conservative: an estimate is a lower bound of the largest
tensors (autograd and temporaries come on top), and it is refused only when it exceeds the
whole memory of the device (the machine's RAM, capped by a cgroup limit and by the
process's address-space limit, ``ulimit -v``, or the GPU's memory), never merely what is
free at the moment. A setting that passes may still run out of memory; one that is
refused could not have run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .exceptions import InsufficientMemoryError

__all__ = [
    "FLOAT32",
    "INT64",
    "InsufficientMemoryError",
    "check_allocation",
    "check_snm_fit",
    "check_trainable",
    "device_memory",
    "encoder_hidden_size",
    "format_gib",
]

_GIB = 2**30
FLOAT32 = 4
INT64 = 8


def format_gib(n_bytes: float) -> str:
    """``n_bytes`` in GiB with one decimal (two below 1 GiB), e.g. ``"11.3 GiB"``."""
    gib = n_bytes / _GIB
    return f"{gib:,.1f} GiB" if gib >= 1 else f"{gib:.2f} GiB"


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def _host_memory() -> tuple[int | None, int | None]:
    """(total, available) bytes of RAM; None where the platform does not tell."""
    total = None
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        pass
    # A container's cgroup limit is the real ceiling (v2, then v1; v1's "no limit" is a
    # huge number, which min() ignores).
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        limit = _read_int(path)
        if limit:
            total = limit if total is None else min(total, limit)
    available = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is not None and total is not None:
        available = min(available, total)
    return total, available


def _address_space_limit() -> int | None:
    """The process's address-space limit in bytes (``ulimit -v``, ``RLIMIT_AS``), or None.

    Every allocation of the process counts against it, so past it a tensor fails like
    RAM that is not there (``DefaultCPUAllocator: can't allocate memory``)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        return None
    return None if soft in (resource.RLIM_INFINITY, -1) or soft <= 0 else int(soft)


def _virtual_size() -> int | None:
    """Bytes of address space the process uses now (``VmSize``), or None."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def device_memory(device: Any = None) -> tuple[int | None, int | None, str]:
    """Memory of ``device``: ``(total, available, description)`` in bytes.

    Parameters
    ----------
    device : torch.device, str or None, default=None
        None or a CPU device: the machine's RAM (capped by a cgroup limit and by the
        process's address-space limit, ``ulimit -v``). A CUDA device:
        ``torch.cuda.mem_get_info``. Other devices (MPS...): unknown.

    Returns
    -------
    total, available : int or None
        None when unknown (the check is then skipped).
    description : str
        Where the memory is, for messages.
    """
    kind = getattr(device, "type", None) or (str(device).split(":")[0] if device else "cpu")
    if kind == "cpu":
        total, available = _host_memory()
        limit = _address_space_limit()
        if limit is None or (total is not None and total <= limit):
            return total, available, "this machine's RAM"
        used = _virtual_size()
        if used is not None:
            headroom = max(limit - used, 0)
            available = headroom if available is None else min(available, headroom)
        return limit, available, "this process's address-space limit (ulimit -v)"
    if kind == "cuda":
        import torch

        try:
            free, total = torch.cuda.mem_get_info(device)
        except (RuntimeError, AssertionError, ValueError):  # no CUDA here: resolved elsewhere
            return None, None, f"device {device}"
        return int(total), int(free), f"the memory of {device}"
    return None, None, f"device {device}"


def check_allocation(
    n_bytes: float, *, what: str, parameter: str, device: Any = None, hint: str | None = None
) -> None:
    """Raise if ``n_bytes`` cannot fit in the memory of ``device``.

    Parameters
    ----------
    n_bytes : int or float
        Estimated size (a lower bound of what the parameters imply).
    what : str
        What the memory is for, e.g. ``"the KNN-BERT queue (queue_size x hidden size)"``.
    parameter : str
        The parameter(s) that set the size with their values, e.g. ``"queue_size=10000000000"``.
    device : torch.device, str or None, default=None
        Where the tensors live (see :func:`device_memory`); None: the host RAM.
    hint : str or None, default=None
        Advice that ends the message (which parameter to lower); default: "use smaller
        values".

    Raises
    ------
    InsufficientMemoryError
        If ``n_bytes`` exceeds the total memory of the device. Nothing is checked when the
        memory of the device is unknown.

    Examples
    --------
    >>> from skxmc._memory import check_allocation
    >>> check_allocation(1024, what="a small table", parameter="size=256")
    >>> check_allocation(2**70, what="a huge table", parameter="size=2**68")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skxmc.exceptions.InsufficientMemoryError: a huge table would take about ...
    """
    total, available, where = device_memory(device)
    if total is None or n_bytes <= total:
        return
    free = f", {format_gib(available)} available now" if available is not None else ""
    advice = hint if hint is not None else "use smaller values"
    err = InsufficientMemoryError(
        f"{what} would take about {format_gib(n_bytes)} with {parameter}: more than "
        f"{where} ({format_gib(total)} in all{free}); {advice}."
    )
    err.n_bytes, err.limit_bytes, err.parameter = int(n_bytes), int(total), parameter
    raise err


def check_trainable(
    n_bytes: float,
    *,
    what: str,
    parameter: str,
    device: Any = None,
    copies: int = 4,
    hint: str | None = None,
) -> None:
    """:func:`check_allocation` for trainable weights of ``n_bytes``: modules are built on
    the CPU (one copy there), then trained on ``device`` with ``copies`` copies (weights,
    gradients and the optimiser's state: 4 for Adam / AdamW).

    Parameters
    ----------
    n_bytes : int or float
        Size of the weights.
    what, parameter : str
        As in :func:`check_allocation`.
    device : torch.device, str or None, default=None
        The training device; None: the CPU.
    copies : int, default=4
        Copies of the weights during training.
    hint : str or None, default=None
        As in :func:`check_allocation`.
    """
    kind = getattr(device, "type", None) or (str(device).split(":")[0] if device else "cpu")
    if kind != "cpu":
        check_allocation(n_bytes, what=what, parameter=parameter, hint=hint)
    what = f"{what} with gradients and optimiser state" if copies > 1 else what
    check_allocation(copies * n_bytes, what=what, parameter=parameter, device=device, hint=hint)


def check_snm_fit(
    *,
    n_samples: int,
    n_features: int,
    n_labels: int,
    max_positives: int,
    hidden_size: int,
    embedding_size: int,
    batch_size: int,
    n_sampled: int,
    sparse_input: bool,
    centroid_init: bool,
    device: Any = None,
) -> None:
    """The checks of :class:`skxmc.SNMClassifier` (its tensors, from its parameters and the
    shapes of ``X`` and ``Y``), before any weight is allocated.

    Raises
    ------
    InsufficientMemoryError
        Naming ``hidden_size``, ``embedding_size`` or ``batch_size``.
    """
    h, e = int(hidden_size), int(embedding_size)
    # Sparse input: a sparse-gradient SGD table (no optimiser state); dense: AdamW.
    input_copies = 1 if sparse_input else 4
    first = FLOAT32 * (n_features * h + h)
    check_trainable(
        first,
        what="the first layer (n_features x hidden_size)",
        parameter=f"hidden_size={h} and n_features={n_features} (the columns of X)",
        device=device,
        copies=input_copies,
        hint="lower hidden_size (or keep fewer features)",
    )
    second = FLOAT32 * (h * e + e)
    check_trainable(
        second,
        what="the second layer (hidden_size x embedding_size)",
        parameter=f"hidden_size={h} and embedding_size={e}",
        device=device,
        hint="lower hidden_size or embedding_size",
    )
    # SparseAdam keeps two moments; the centroid initialisation embeds every sample.
    labels = FLOAT32 * n_labels * e
    check_trainable(
        labels,
        what="the class vectors (n_labels x embedding_size)",
        parameter=f"embedding_size={e} and {n_labels} labels",
        device=device,
        copies=3,
        hint="lower embedding_size",
    )
    if centroid_init:
        check_allocation(
            FLOAT32 * (n_samples + 2 * n_labels) * e,
            what="the class-centroid initialisation (n_samples x embedding_size)",
            parameter=f"embedding_size={e} and {n_samples} samples",
            hint="lower embedding_size or pass label_init='random'",
        )
    b = min(int(batch_size), n_samples)
    dense_batch = 0 if sparse_input else n_features
    step = FLOAT32 * (
        b * dense_batch
        + b * h
        + (n_sampled + b * max_positives) * e
        + 3 * b * (n_sampled + max_positives)
    )
    check_allocation(
        input_copies * first + 4 * second + 3 * labels + step,
        what="the network, its optimiser state and one training step",
        parameter=(
            f"hidden_size={h}, embedding_size={e}, batch_size={batch_size} and "
            f"n_sampled={n_sampled} ({n_features} features, {n_labels} labels)"
        ),
        device=device,
        hint="lower hidden_size, embedding_size, batch_size or n_sampled",
    )


# Common keys of a transformers config.json for the width of the hidden states.
_HIDDEN_KEYS = ("hidden_size", "dim", "d_model", "n_embd")


def encoder_hidden_size(encoder: str | os.PathLike) -> int | None:
    """Hidden size of an encoder from its ``config.json``, without loading the weights.

    Reads a local model directory, or the Hugging Face cache for a hub name (no network).
    None when it cannot be told cheaply; callers then estimate with a lower bound.
    """
    config = Path(encoder) / "config.json"
    if not config.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(str(encoder), "config.json")
        except Exception:  # an odd name, no hub library: just no estimate
            return None
        if not isinstance(cached, str):
            return None
        config = Path(cached)
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # load_encoder reports a broken config with its own message
    for key in _HIDDEN_KEYS:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
