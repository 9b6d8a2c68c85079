"""Safe readers and writers of arrays: ``arrays.npz`` (no pickle, optionally memory-mapped),
the checks of sparse matrices before compiled code reads them, and string arrays (labels)
stored compactly as UTF-8 bytes plus offsets.

String arrays: numpy's fixed-width ``<U`` arrays cost 4 bytes times the longest string for
every entry (50,000 labels of 2,000 characters: 400 MB), so :func:`save` writes each as two
plain arrays, ``<key>.offsets`` (int64, one more than the strings) and ``<key>.utf8``
(uint8), and :func:`load` gives an object array of ``str``. ``<U`` arrays written by older
versions load as they were saved.
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
import struct
import weakref
import zipfile
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._format import ARRAYS_NAME, CONFIG_NAME

__all__ = [
    "CHECK_ENTRIES",
    "ArrayStore",
    "Arrays",
    "MappedArrays",
    "checks_entries",
    "decode_strings",
    "encode_strings",
    "mapped_file_span",
    "open_arrays",
]

# Whether the load in progress checks every entry of the arrays (``load(verify=False)``
# turns it off); a context variable, so that concurrent loads in threads do not mix.
CHECK_ENTRIES: ContextVar[bool] = ContextVar("skxmc_check_entries", default=True)


def checks_entries() -> bool:
    """Whether the :func:`load` in progress checks every entry of the arrays (index ranges,
    finite values); ``False`` under ``load(verify=False)``. Estimators' ``_load_state``
    skip their checks whose cost grows with the weights when it is ``False``, and keep
    those whose cost grows with the labels or tree nodes."""
    return CHECK_ENTRIES.get()


class ArrayStore:
    """Collects arrays and sparse matrices under unique keys for one ``.npz`` file, and the
    nested estimators that write files of their own."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.parts: list[tuple[str, Any]] = []
        self.format_version = 1

    def put(self, key: str, value: Any) -> dict:
        if sp.issparse(value):
            fmt = value.format if value.format in ("csr", "csc") else "csr"
            m = value.asformat(fmt)
            for part in ("data", "indices", "indptr"):
                self.arrays[f"{key}.{part}"] = np.asarray(getattr(m, part))
            return {"__sparse__": key, "format": fmt, "shape": list(m.shape)}
        arr = np.asarray(value)
        if arr.dtype == object and not _all_str(arr):
            # Other labels (tuples...) live in JSON: .npz would need pickle for object arrays.
            return {"__object_array__": _jsonable_list(arr.tolist()), "shape": list(arr.shape)}
        if arr.dtype.kind == "U" or arr.dtype == object:
            # str labels (an object array, or the '<U' of a user's array): UTF-8 + offsets,
            # not fixed-width strings at 4 bytes x the longest one per entry.
            offsets, utf8 = encode_strings(arr)
            self.arrays[f"{key}.offsets"], self.arrays[f"{key}.utf8"] = offsets, utf8
            self.format_version = max(self.format_version, 3)
            return {"__strings__": key, "shape": list(arr.shape)}
        self.arrays[key] = arr
        return {"__array__": key}

    @staticmethod
    def get(ref: dict, arrays: Any) -> Any:
        if "__sparse__" in ref:
            key = ref["__sparse__"]
            parts = [_array(arrays, f"{key}.{part}") for part in ("data", "indices", "indptr")]
            return _checked_sparse(key, ref.get("format"), ref.get("shape"), *parts, arrays)
        if "__object_array__" in ref:
            out = np.empty(len(ref["__object_array__"]), dtype=object)
            out[:] = ref["__object_array__"]
            return out.reshape(ref["shape"])
        if "__strings__" in ref:
            key = ref["__strings__"]
            offsets, utf8 = _array(arrays, f"{key}.offsets"), _array(arrays, f"{key}.utf8")
            return decode_strings(key, offsets, utf8, ref.get("shape"), arrays)
        arr = _array(arrays, ref["__array__"])
        # Models of format 2 (26aef59) saved str labels as '<U' arrays: loaded as the object
        # array of str that skxmc builds, so that an old model costs what a new one does.
        return arr.astype(object) if arr.dtype.kind == "U" else arr


def _all_str(arr: np.ndarray) -> bool:
    """Whether a non-empty object array holds only ``str`` (label names)."""
    return arr.size > 0 and all(isinstance(x, str) for x in arr.ravel().tolist())


def encode_strings(strings: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, utf8)``: string ``i`` is ``utf8[offsets[i]:offsets[i + 1]]``. Encoded a
    block at a time into one buffer, so that no list of all the encoded strings exists
    beside it."""
    strings = np.asarray(strings).ravel()
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    buffer = bytearray()
    for start in range(0, len(strings), 4096):
        block = [s.encode("utf-8", "surrogatepass") for s in strings[start : start + 4096].tolist()]
        np.cumsum([len(b) for b in block], out=offsets[start + 1 : start + 1 + len(block)])
        offsets[start + 1 : start + 1 + len(block)] += len(buffer)
        buffer += b"".join(block)
    return offsets, np.frombuffer(buffer, dtype=np.uint8)


def decode_strings(
    key: str, offsets: np.ndarray, utf8: np.ndarray, shape: Any, arrays: Any
) -> np.ndarray:
    """The object array of ``str`` that :func:`encode_strings` wrote, after checking the
    offsets (in range, non-decreasing) and the shape."""
    where = f"string array {key!r} of {_where(arrays)}"
    if not (
        isinstance(shape, list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise ValueError(f"{where} has shape {shape!r}; expected non-negative integers.")
    n = int(np.prod(shape, dtype=np.int64))
    if offsets.ndim != 1 or utf8.ndim != 1 or offsets.dtype.kind not in "iu":
        raise ValueError(f"{where}: offsets and bytes must be 1-D, offsets integers.")
    if utf8.dtype != np.uint8 or len(offsets) != n + 1:
        raise ValueError(f"{where}: {len(offsets)} offsets for shape {tuple(shape)}.")
    if offsets[0] != 0 or offsets[-1] != len(utf8) or np.any(np.diff(offsets) < 0):
        raise ValueError(f"{where}: offsets must rise from 0 to the number of bytes.")
    data = memoryview(np.ascontiguousarray(utf8))  # no copy of the bytes
    bounds = offsets.tolist()
    out = np.empty(n, dtype=object)
    try:
        out[:] = [str(data[a:b], "utf-8", "surrogatepass") for a, b in itertools.pairwise(bounds)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} is not valid UTF-8 ({exc}).") from None
    return out.reshape(shape)


class Arrays(Mapping):
    """The arrays of an open ``arrays.npz``, read on first use (an unused member is never
    inflated); a missing or unreadable member raises an error naming the file and key."""

    def __init__(self, npz: Any, path: Path) -> None:
        self.npz, self.path = npz, path
        self._cache: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._cache:
            if key not in self.npz.files:
                raise ValueError(
                    f"{self.path} has no array {key!r}, which {CONFIG_NAME} refers to: the "
                    f"model directory is incomplete or was edited."
                )
            try:
                self._cache[key] = self.npz[key]
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise ValueError(f"cannot read array {key!r} of {self.path}: {exc}") from exc
        return self._cache[key]

    def __iter__(self):
        return iter(self.npz.files)

    def __len__(self) -> int:
        return len(self.npz.files)


# The file behind each map of ``load(mmap=True)``: a duplicate of its descriptor (the file
# the map shows, even if the path is later replaced) and the map's address, so that a
# search can read pieces of a large mapped array with ``pread`` instead of through the map
# (see mapped_file_span). The descriptor closes when the map is freed.
_MAP_FILES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def mapped_file_span(array: np.ndarray) -> tuple[int, int] | None:
    """``(descriptor, byte offset)`` of the file content that ``array`` views, when it is
    a C-contiguous array of a model loaded with ``load(mmap=True)``; else None.

    ``os.pread(descriptor, n, offset + i)`` then reads bytes ``i:i + n`` of the array
    without touching the map: the bytes come from the page cache that every process
    shares, and the process maps no pages for them. The descriptor belongs to the map;
    callers must not close it.
    """
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        return None
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    entry = _MAP_FILES.get(base) if isinstance(base, mmap.mmap) else None
    if entry is None:
        return None
    fd, start, size = entry
    offset = array.__array_interface__["data"][0] - start
    if offset < 0 or offset + array.nbytes > size:
        return None
    return fd, offset


def _register_map(m: mmap.mmap, fileno: int) -> None:
    fd = os.dup(fileno)
    weakref.finalize(m, os.close, fd)
    start = np.frombuffer(m, dtype=np.uint8, count=1).__array_interface__["data"][0]
    _MAP_FILES[m] = (fd, start, len(m))


class MappedArrays(Arrays):
    """The arrays of ``arrays.npz`` as read-only-by-convention views of one private memory
    map of the file (``load(mmap=True)``): nothing is read until used, and the pages are
    shared with every other process that maps the same file.

    ``np.savez`` stores members uncompressed, so each member's ``.npy`` data lies at a fixed
    offset of the archive; the map is copy-on-write (``ACCESS_COPY``), so the arrays are
    writeable for the compiled kernels' type signatures and nothing can change the file.
    Compressed members (not written by :func:`save`) are read into memory.
    """

    def __init__(self, npz: Any, path: Path) -> None:
        super().__init__(npz, path)
        self._file = open(path, "rb")  # closed by close(); the map outlives it
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
        if self._map is not None:
            _register_map(self._map, self._file.fileno())
        self._infos = {
            info.filename[:-4] if info.filename.endswith(".npy") else info.filename: info
            for info in npz.zip.infolist()
        }

    def close(self) -> None:
        # the arrays keep the map alive (numpy holds a reference); only the file goes
        self._file.close()

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self._cache:
            return self._cache[key]
        info = self._infos.get(key)
        if info is None or info.compress_type != zipfile.ZIP_STORED or self._map is None:
            return super().__getitem__(key)
        try:
            array = self._mapped(info)
        except (ValueError, OSError, EOFError, struct.error) as exc:
            raise ValueError(f"cannot map array {key!r} of {self.path}: {exc}") from exc
        self._cache[key] = array
        return array

    def _mapped(self, info: zipfile.ZipInfo) -> np.ndarray:
        m = self._map
        head = m[info.header_offset : info.header_offset + 30]
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise ValueError("no zip member header at its offset")
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        start = info.header_offset + 30 + name_len + extra_len
        stream = io.BytesIO(m[start : start + min(info.file_size, 65536 + 16)])
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        if dtype.hasobject:
            raise ValueError("object arrays are never loaded (they would need pickle)")
        offset = start + stream.tell()
        count = int(np.prod(shape, dtype=np.int64))
        if offset + count * dtype.itemsize > start + info.file_size:
            raise ValueError("the array is longer than its zip member")
        flat = np.frombuffer(m, dtype=dtype, count=count, offset=offset)
        return flat.reshape(shape, order="F" if fortran else "C")


def _where(arrays: Any) -> str:
    return str(getattr(arrays, "path", ARRAYS_NAME))


def _array(arrays: Any, key: str) -> np.ndarray:
    try:
        return arrays[key]
    except KeyError:
        raise ValueError(
            f"{_where(arrays)} has no array {key!r}, which {CONFIG_NAME} refers to."
        ) from None


def _checked_sparse(
    key: str,
    fmt: Any,
    shape: Any,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    arrays: Any,
) -> sp.spmatrix:
    """The sparse matrix ``key`` after checking its structure (vectorised, before any
    compiled code reads it: out-of-range indices would make it read or write out of bounds).
    """
    where = f"sparse matrix {key!r} of {_where(arrays)}"
    if fmt not in ("csr", "csc"):
        raise ValueError(f"{where} has format {fmt!r}; expected 'csr' or 'csc'.")
    if not (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise ValueError(f"{where} has shape {shape!r}; expected two non-negative integers.")
    n_major, n_minor = shape if fmt == "csr" else shape[::-1]
    if indptr.ndim != 1 or indices.ndim != 1 or data.ndim != 1:
        raise ValueError(f"{where}: data, indices and indptr must be 1-D arrays.")
    if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu":
        raise ValueError(f"{where}: indices and indptr must be integer arrays.")
    if data.dtype.kind not in "biuf":
        raise ValueError(f"{where}: data has dtype {data.dtype}; expected numbers.")
    if len(indptr) != n_major + 1:
        raise ValueError(
            f"{where}: indptr has {len(indptr)} entries; shape {tuple(shape)} needs {n_major + 1}."
        )
    if indptr[0] != 0 or indptr[-1] != len(indices) or len(indices) != len(data):
        raise ValueError(
            f"{where}: indptr runs from {indptr[0]} to {indptr[-1]} for {len(indices)} indices "
            f"and {len(data)} values; expected 0 to the common length."
        )
    if np.any(np.diff(indptr) < 0):
        raise ValueError(f"{where}: indptr is not monotone (non-decreasing).")
    # Per entry: what keeps compiled code in bounds; skipped under load(verify=False).
    if checks_entries() and len(indices) and (indices.min() < 0 or indices.max() >= n_minor):
        raise ValueError(
            f"{where}: indices range over [{indices.min()}, {indices.max()}], outside "
            f"[0, {n_minor}) for shape {tuple(shape)}."
        )
    if checks_entries() and data.dtype.kind == "f" and not np.all(np.isfinite(data)):
        raise ValueError(f"{where} holds NaN or infinite values.")
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return cls((data, indices, indptr), shape=tuple(shape))


def _jsonable_list(values: list) -> list:
    for v in values:
        if not isinstance(v, (str, int, float, bool, type(None))):
            raise TypeError(f"cannot save label {v!r} of type {type(v).__name__} without pickle.")
    return values


def open_arrays(path: Path) -> Any:
    """``np.load(path)`` (an ``NpzFile``, no pickle) with errors that name the file."""
    try:
        npz = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: the model directory is incomplete.") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"cannot read {path} ({type(exc).__name__}: {exc}): damaged?") from exc
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is a single array, not the .npz archive save() writes.")
    return npz
