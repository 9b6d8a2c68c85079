"""Checks of the safetensors files of a model directory, read without torch.

A safetensors file is an 8-byte little-endian header length, a JSON header
(``{name: {"dtype", "shape", "data_offsets"}}``) and the tensors' bytes. :func:`check_finite`
refuses a file whose floating-point tensors hold NaN or infinity (a diverged training or a
crafted file would otherwise load and predict one constant class), naming the tensor.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

__all__ = ["check_finite"]

# dtype -> (numpy dtype the bytes are read as, mask of the exponent bits or None): bfloat16
# and the 8-bit floats have no numpy type, so their exponent bits are tested directly
# (all ones means NaN or infinity; float8 e4m3fn has no infinity and NaN is 0x7f / 0xff).
_FLOATS = {
    "F64": (np.float64, None),
    "F32": (np.float32, None),
    "F16": (np.float16, None),
    "BF16": (np.uint16, 0x7F80),
    "F8_E5M2": (np.uint8, 0x7C),
}
_HEADER_LIMIT = 100 << 20  # what safetensors itself accepts
_BLOCK = 1 << 24  # bytes read at a time


def check_finite(path: Path) -> None:
    """Raise ``ValueError`` naming ``path`` and the tensor when a floating-point tensor of
    the safetensors file ``path`` holds NaN or infinite values."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path} is not a safetensors file (shorter than its header).")
        (n,) = struct.unpack("<Q", head)
        if n > _HEADER_LIMIT:
            raise ValueError(f"{path} is not a safetensors file (header of {n} bytes).")
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} is not a safetensors file ({exc}).") from None
        if not isinstance(header, dict):
            raise ValueError(f"{path} is not a safetensors file (its header is no object).")
        for name, info in sorted(header.items()):
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            kind = _FLOATS.get(info.get("dtype"))
            if kind is None and info.get("dtype") == "F8_E4M3":
                kind = (np.uint8, None)
            offsets = info.get("data_offsets")
            if kind is None or not isinstance(offsets, list) or len(offsets) != 2:
                continue
            dtype, mask = kind
            start, end = (int(o) + 8 + n for o in offsets)
            if not _finite(f, start, end, np.dtype(dtype), mask, info.get("dtype")):
                raise ValueError(
                    f"{path}: tensor {name!r} holds NaN or infinite values (a diverged "
                    f"training or an edited file); the model would predict nonsense. Train "
                    f"again, or load the last good checkpoint."
                )


def _finite(f, start: int, end: int, dtype: np.dtype, mask: int | None, name: str) -> bool:
    step = _BLOCK - _BLOCK % dtype.itemsize
    f.seek(start)
    remaining = end - start
    while remaining > 0:
        block = f.read(min(step, remaining))
        if not block:
            return True  # a short file is the manifest's (size) or safetensors' to report
        remaining -= len(block)
        usable = len(block) - len(block) % dtype.itemsize
        values = np.frombuffer(block[:usable], dtype=dtype)
        if name == "F8_E4M3":
            if np.any((values & 0x7F) == 0x7F):
                return False
        elif mask is not None:
            if np.any((values & mask) == mask):
                return False
        elif not np.all(np.isfinite(values)):
            return False
    return True
