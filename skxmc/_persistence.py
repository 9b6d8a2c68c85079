"""Saving and loading fitted estimators without pickle.

A model directory holds ``skxmc-model.json`` (class name, parameters, JSON attributes, skxmc
version) and ``arrays.npz`` (numpy arrays and sparse matrices, loaded with
``allow_pickle=False``); estimators with torch weights add safetensors files. Loading only
instantiates classes registered here with :func:`persistent`, so opening a model directory
from someone else never executes code from it.

Estimators opt in by decorating the class with :func:`persistent` and implementing
``_save_state(self) -> (attributes: dict, arrays: dict)`` and
``_load_state(self, attributes, arrays)``; the parameters are saved from ``get_params``.
Estimators with files of their own (torch weights) add ``_save_extra_files(directory)`` /
``_load_extra_files(directory)``: the saved estimator's files go into the model directory,
those of nested estimators (pipeline steps, parameters) into ``parts/<n>/``.

scikit-learn :class:`~sklearn.pipeline.Pipeline` objects (and
:class:`skxmc.pipeline.Pipeline`) are saved step by step when every step is an skxmc
estimator, a ``TfidfVectorizer`` / ``CountVectorizer``, another such pipeline, or
``"passthrough"``; they load as :class:`skxmc.pipeline.Pipeline`, which adds
``predict_topk``. The model directory of ``skxmc fit`` is such a pipeline; the older
layout of ``skxmc fit`` (``ranker/`` + ``vectorizer.json``) loads as well.

Integrity: ``skxmc-model.json`` lists every other file of the model (relative name, size,
sha256) under ``"files"``; :func:`load` checks that list before it reads anything else, and
checks the structure of every sparse matrix and the shapes the JSON promises before compiled
code sees them, so a damaged or crafted model directory raises an error naming the file
rather than loading wrong or crashing the process. Directories saved before the list existed
load with a warning. ``save(overwrite=True)`` replaces only a directory whose files all
belong to the model: it refuses, naming them, when the directory holds anything else.

Directories and files are created with the permissions of the user's umask.

``load(directory, mmap=True)`` maps ``arrays.npz`` into memory instead of reading it: the
archive's members are stored uncompressed, so each array is a view of the file's pages,
read on first use and shared by every process that maps the file (a copy-on-write map:
nothing can change the file). Estimators whose prediction needs derived structures save
those too (XR-Linear's beam-search layout), so a mapped model predicts without building
anything in memory; XR-Linear reads the small per-parent blocks of its leaf-size layers
from the file (``pread`` through the map's own descriptor, see :func:`mapped_file_span`)
rather than through the map, so that a process holds only the blocks its search
reaches. ``load(verify=...)`` chooses how much content the checks read: a mapped load
skips the sha256 unless ``verify=True`` and still checks every array entry;
``verify=False`` trusts the content and checks only sizes, headers, shapes and row
pointers, so a mapped load reads almost nothing.

``save(model_card=...)`` adds ``README.md``, a model card in the Hugging Face style (front
matter with ``library_name: skxmc``), listed in the manifest like the other files. A string
that is not an existing path and reads as a Hugging Face repository id (``"user/repo"``) is
looked up in the local Hugging Face cache by :func:`load` and :func:`describe`; nothing is
ever downloaded. :func:`describe` summarises a model directory from ``skxmc-model.json``
(and the array headers of ``arrays.npz``) without loading any weights.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import inspect
import io
import json
import logging
import mmap
import os
import re
import secrets
import shutil
import struct
import sys
import warnings
import weakref
import zipfile
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ._compat import validate_estimator_params
from ._vectorizers import is_text_vectorizer, vectorizer_from_state, vectorizer_to_state

if TYPE_CHECKING:
    from .pipeline import Pipeline

__all__ = ["describe", "load", "persistent", "resolve_model_dir", "save"]

logger = logging.getLogger(__name__)

CONFIG_NAME = "skxmc-model.json"
ARRAYS_NAME = "arrays.npz"
CARD_NAME = "README.md"
# The keys ``save(model_card=...)`` takes.
_CARD_KEYS = ("data_description", "metrics")
# "user/repo" as the Hugging Face hub spells repository ids (no "--" or "..": the cache
# folder name models--user--repo would be ambiguous).
_REPO_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")
# Version 2 adds pipelines and nested estimators with files (``parts/``); models without
# them are still written as version 1, so that older skxmc releases keep reading them.
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
# The layout ``skxmc fit`` wrote before it saved a pipeline: read, never written.
LEGACY_RANKER_DIR = "ranker"
LEGACY_VECTORIZER_FILE = "vectorizer.json"
_PART_PATTERN = re.compile(r"parts/[0-9]+")
# The key of skxmc-model.json that lists the other files: {name: {"size", "sha256"}}.
MANIFEST_KEY = "files"
# What a model directory saved before the manifest may hold (the estimators' files and the
# legacy ``skxmc fit`` layout): overwrite replaces these and refuses anything else.
_OWNED_WITHOUT_MANIFEST = frozenset(
    {CONFIG_NAME, ARRAYS_NAME, "model.safetensors", "encoder", "parts"}
    | {LEGACY_RANKER_DIR, LEGACY_VECTORIZER_FILE}
)
# A save's working folder next to the target: ``.<name>.skxmc-<pid>-<hex>.tmp``; the pid
# lets a later save remove the folder a killed one left behind.
_TMP_PATTERN = re.compile(r"\.(?P<name>.+)\.skxmc-(?P<pid>[0-9]+)-[0-9a-f]+\.tmp")

_REGISTRY: dict[str, type] = {}
# Whether the load in progress checks every entry of the arrays (``load(verify=False)``
# turns it off); a context variable, so that concurrent loads in threads do not mix.
_CHECK_ENTRIES: ContextVar[bool] = ContextVar("skxmc_check_entries", default=True)


def checks_entries() -> bool:
    """Whether the :func:`load` in progress checks every entry of the arrays (index ranges,
    finite values); ``False`` under ``load(verify=False)``. Estimators' ``_load_state``
    skip their checks whose cost grows with the weights when it is ``False``, and keep
    those whose cost grows with the labels or tree nodes."""
    return _CHECK_ENTRIES.get()


def persistent(cls: type) -> type:
    """Class decorator: make ``cls`` loadable by :func:`load` (by its class name)."""
    _REGISTRY[cls.__name__] = cls
    return cls


class _ArrayStore:
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
        if arr.dtype == object:
            # Label identifiers (str) live in JSON: .npz would need pickle for object arrays.
            return {"__object_array__": _jsonable_list(arr.tolist()), "shape": list(arr.shape)}
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
        return _array(arrays, ref["__array__"])


class _Arrays(Mapping):
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


class _MappedArrays(_Arrays):
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


def _is_registered(value: Any) -> bool:
    return _REGISTRY.get(type(value).__name__) is type(value) and hasattr(value, "get_params")


def _is_pipeline(value: Any) -> bool:
    # Exact classes only: a subclass (imblearn's, say) would not come back as itself.
    # Imported here, not at the top: estimators import this module, and a fit needs
    # neither sklearn.pipeline nor skxmc.pipeline.
    from sklearn.pipeline import Pipeline as SklearnPipeline

    from .pipeline import Pipeline

    return type(value) in (SklearnPipeline, Pipeline)


def _encode(value: Any, key: str, store: _ArrayStore) -> Any:
    """JSON form of a parameter / attribute; arrays go to the store."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return {
            "__sequence__": type(value).__name__,
            "items": [_encode(v, f"{key}.{i}", store) for i, v in enumerate(value)],
        }
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"cannot save {key}: dict keys must be str.")
        return {"__dict__": {k: _encode(v, f"{key}.{k}", store) for k, v in value.items()}}
    if isinstance(value, np.ndarray) or sp.issparse(value):
        return store.put(key, value)
    if is_text_vectorizer(value):
        state, arrays = vectorizer_to_state(value)
        parts = {k: store.put(f"{key}.{k}", v) for k, v in arrays.items()}
        return {"__vectorizer__": state, "arrays": parts}
    if _is_pipeline(value):
        return _encode_pipeline(value, key, store)
    if _is_registered(value):
        nested = {
            "__estimator__": type(value).__name__,
            "params": _encode(value.get_params(deep=False), f"{key}.params", store),
        }
        if hasattr(value, "_save_state") and _is_fitted(value):
            attributes, arrays = value._save_state()
            nested["attributes"] = _encode(attributes, f"{key}.attributes", store)
            nested["arrays"] = _encode(arrays, f"{key}.arrays", store)
            # The saved estimator's own files go into the model directory (see save);
            # nested ones get a folder each.
            if key != "model" and hasattr(value, "_save_extra_files"):
                nested["files"] = f"parts/{len(store.parts)}"
                store.parts.append((nested["files"], value))
                store.format_version = 2
        return nested
    raise TypeError(
        f"cannot save {key} of type {type(value).__name__} without pickle; use pickle / joblib "
        f"for models holding arbitrary Python objects."
    )


def _encode_pipeline(pipe: Any, key: str, store: _ArrayStore) -> dict:
    store.format_version = 2
    params = pipe.get_params(deep=False)
    steps = params.pop("steps")
    if not isinstance(steps, (list, tuple)):
        raise TypeError(f"cannot save {key}: its steps must be a list of (name, estimator).")
    encoded = []
    for i, (name, step) in enumerate(steps):
        if step is None or (isinstance(step, str) and step == "passthrough"):
            encoded.append({"name": name, "step": step})
            continue
        if not (is_text_vectorizer(step) or _is_pipeline(step) or _is_registered(step)):
            raise TypeError(
                f"cannot save step {name!r} ({type(step).__name__}) of the pipeline without "
                f"pickle: skxmc.save takes pipelines of skxmc estimators, TfidfVectorizer / "
                f"CountVectorizer and 'passthrough'; use pickle / joblib for this one."
            )
        try:
            encoded.append({"name": name, "step": _encode(step, f"{key}.steps.{i}", store)})
        except TypeError as exc:
            raise TypeError(f"cannot save step {name!r} of the pipeline: {exc}") from None
    return {
        "__pipeline__": f"{type(pipe).__module__}.{type(pipe).__qualname__}",
        "params": _encode(params, f"{key}.params", store),
        "steps": encoded,
    }


def _decode(value: Any, arrays: Any, directory: Path) -> Any:
    if not isinstance(value, dict):
        return value
    if "__sequence__" in value:
        items = [_decode(v, arrays, directory) for v in value["items"]]
        return tuple(items) if value["__sequence__"] == "tuple" else items
    if "__dict__" in value:
        return {k: _decode(v, arrays, directory) for k, v in value["__dict__"].items()}
    if "__estimator__" in value:
        return _instantiate(value, arrays, directory)
    if "__pipeline__" in value:
        from .pipeline import Pipeline

        steps = [(s["name"], _decode(s["step"], arrays, directory)) for s in value["steps"]]
        return Pipeline(steps, **_decode(value["params"], arrays, directory))
    if "__vectorizer__" in value:
        parts = {k: _ArrayStore.get(ref, arrays) for k, ref in value["arrays"].items()}
        return vectorizer_from_state(value["__vectorizer__"], parts)
    return _ArrayStore.get(value, arrays)


def _instantiate(spec: dict, arrays: Any, directory: Path) -> Any:
    name = spec["__estimator__"]
    if name not in _REGISTRY:
        from ._lazy import LAZY, public_attribute

        if name in LAZY:
            public_attribute(name)  # imports the module, which registers the class
    if name not in _REGISTRY:
        raise ValueError(f"the model directory names an unknown estimator class {name!r}.")
    cls = _REGISTRY[name]
    source = directory / CONFIG_NAME
    params = _decode(spec["params"], arrays, directory)
    est = cls(**_checked_params(cls, params, source))
    _validate_loaded_params(est, source)
    if "attributes" in spec:
        attributes = _decode(spec["attributes"], arrays, directory)
        arrays_ = _decode(spec["arrays"], arrays, directory)
        # Before _load_state: it may hand the arrays to compiled code.
        _check_state(est, attributes, arrays_, source)
        est._load_state(attributes, arrays_)
    if "files" in spec:
        # A fixed pattern: a model directory from elsewhere never points outside itself.
        if not isinstance(spec["files"], str) or not _PART_PATTERN.fullmatch(spec["files"]):
            raise ValueError(f"the model directory names an invalid part {spec['files']!r}.")
        est._load_extra_files(directory / spec["files"])
    return est


def _checked_params(cls: type, params: Any, source: Path) -> dict:
    """``params`` when they are keyword arguments that ``cls`` takes."""
    if not isinstance(params, dict):
        raise ValueError(f"{source}: the parameters of {cls.__name__} must be a mapping.")
    signature = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in signature.values()):
        unknown = sorted(set(params) - set(signature) - {"self"})
        if unknown:
            raise ValueError(
                f"{source} sets unknown parameter(s) {', '.join(map(repr, unknown))} of "
                f"{cls.__name__}; it takes {', '.join(k for k in signature if k != 'self')}. "
                f"A model saved by another skxmc version (its skxmc_version is in that file) "
                f"loads with that version; or fit it again with this one."
            )
    return params


def _validate_loaded_params(est: Any, source: Path) -> None:
    # The checks fit runs (parameter constraints): a loaded model must not skip them.
    try:
        validate_estimator_params(est)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{source}: invalid parameter of {type(est).__name__}: {exc}") from exc


def _check_state(est: Any, attributes: dict, arrays: dict, source: Path) -> None:
    """Check that the loaded state agrees with itself (shapes, label count) before use.

    An estimator may define ``_check_saved_state(attributes, arrays)`` (raising
    ``ValueError``); otherwise the rules below, keyed by class name, apply.
    """
    state = {**attributes, **arrays}
    try:
        hook = getattr(est, "_check_saved_state", None)
        if callable(hook):
            hook(attributes, arrays)
        _generic_state_checks(state)
        rule = _STATE_RULES.get(type(est).__name__)
        if rule is not None:
            rule(state)
    except ValueError as exc:
        raise ValueError(f"{source}: inconsistent {type(est).__name__}: {exc}") from exc


def _n_rows(value: Any) -> int:
    shape = getattr(value, "shape", None)
    if shape is None or len(shape) < 1:
        raise ValueError(f"expected an array, got {type(value).__name__}.")
    return int(shape[0])


def _generic_state_checks(state: dict) -> None:
    classes = state.get("classes_")
    if classes is not None:
        classes = np.asarray(classes)
        if classes.ndim != 1:
            raise ValueError(f"classes_ has shape {classes.shape}; expected 1-D.")
        try:
            n_unique = len(set(classes.tolist()))
        except TypeError:
            n_unique = len(classes)  # unhashable labels: left to the estimator
        if n_unique != len(classes):
            raise ValueError("classes_ holds duplicate labels.")
    n_features = state.get("n_features_in_")
    if n_features is not None and (
        not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 0
    ):
        raise ValueError(f"n_features_in_ is {n_features!r}; expected a non-negative int.")


def _check_tree_state(state: dict) -> None:
    chain = state.get("cluster_chain_")
    if chain is None:
        return
    if not isinstance(chain, list) or not chain:
        raise ValueError("cluster_chain_ must be a non-empty list of matrices.")
    n_parent = 1
    for t, C in enumerate(chain):
        if not sp.issparse(C) or C.shape[1] != n_parent:
            raise ValueError(
                f"cluster_chain_[{t}] has shape {getattr(C, 'shape', None)}; expected "
                f"(n_nodes, {n_parent}) after the previous layer's {n_parent} nodes."
            )
        n_parent = C.shape[0]
    expected = {
        "n_labels_": n_parent,
        "n_layers_": len(chain),
    }
    for name, value in expected.items():
        if name in state and state[name] != value:
            raise ValueError(f"{name} is {state[name]!r}; the cluster chain gives {value}.")
    for name in ("classes_", "leaf_assignment_"):
        if state.get(name) is not None and _n_rows(state[name]) != n_parent:
            raise ValueError(
                f"{name} has {_n_rows(state[name])} entries for {n_parent} labels "
                f"(rows of the last cluster_chain_ matrix)."
            )


# Per-class consistency rules for estimators that do not define ``_check_saved_state``.
_STATE_RULES = {
    "HierarchicalLabelTree": _check_tree_state,
}


def _is_fitted(est: Any) -> bool:
    if _is_pipeline(est):
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted

        try:
            check_is_fitted(est)
        except NotFittedError:
            return False
        return True
    return any(k.endswith("_") and not k.startswith("__") for k in vars(est))


def _is_legacy_cli_dir(directory: Path) -> bool:
    return (directory / LEGACY_RANKER_DIR / CONFIG_NAME).is_file() and (
        directory / LEGACY_VECTORIZER_FILE
    ).is_file()


def holds_model(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a model :func:`load` reads (so ``save`` may replace it)."""
    directory = Path(directory)
    return (directory / CONFIG_NAME).is_file() or _is_legacy_cli_dir(directory)


def _load_legacy_cli_dir(directory: Path) -> Pipeline:
    """``ranker/`` + ``vectorizer.json`` (what earlier ``skxmc fit`` wrote) as a pipeline."""
    from .pipeline import make_pipeline

    state = _read_json(directory / LEGACY_VECTORIZER_FILE)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in state.pop("arrays", {}).items()}
    return make_pipeline(vectorizer_from_state(state, arrays), load(directory / LEGACY_RANKER_DIR))


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"{path} is not valid JSON ({exc}): truncated or damaged?") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds a JSON {type(value).__name__}; expected an object.")
    return value


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build_manifest(root: Path) -> dict[str, dict]:
    """``{relative name: {"size", "sha256"}}`` of every file under ``root`` but the config."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path != root / CONFIG_NAME:
            name = path.relative_to(root).as_posix()
            files[name] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    return files


def _checked_manifest(manifest: Any, source: Path) -> dict[str, dict]:
    if not isinstance(manifest, dict):
        raise ValueError(f"{source}: {MANIFEST_KEY!r} must map file names to sizes and hashes.")
    for name, entry in manifest.items():
        parts = PurePosixPath(name).parts
        # Relative names inside the directory only: a crafted list never reaches elsewhere.
        if (
            not parts
            or PurePosixPath(name).is_absolute()
            or any(part in ("", ".", "..") for part in parts)
            or "\\" in name
            or name == CONFIG_NAME
            or not isinstance(entry, dict)
            or not isinstance(entry.get("size"), int)
            or not isinstance(entry.get("sha256"), str)
        ):
            raise ValueError(f"{source}: invalid entry {name!r} in its {MANIFEST_KEY!r} list.")
    return manifest


def _owned_dirs(manifest: dict) -> set[PurePosixPath]:
    """The folders (relative, without the top level) that hold the manifest's files."""
    return {
        parent
        for name in manifest
        for parent in PurePosixPath(name).parents
        if parent != PurePosixPath(".")
    }


def _verify_files(
    directory: Path, manifest: dict[str, dict], source: Path, *, hashes: bool = True
) -> None:
    """Every listed file is there with its recorded size (and hash, unless ``hashes`` is
    False), and the folders of the model hold nothing else (a tokenizer reads any
    vocabulary file it finds in its folder)."""
    for name, entry in manifest.items():
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing ({source} lists it): the model directory is incomplete; "
                f"copy or save it again."
            )
        size = path.stat().st_size
        if size != entry["size"]:
            raise ValueError(
                f"{path} has {size} bytes where {entry['size']} were saved: the file is "
                f"truncated, damaged or was replaced."
            )
        if hashes and _sha256(path) != entry["sha256"]:
            raise ValueError(
                f"{path} is not the file that was saved (its sha256 differs): the file is "
                f"damaged or was replaced."
            )
    owned_dirs = _owned_dirs(manifest)
    extra = []
    for folder in sorted(owned_dirs):
        for path in (directory / folder).iterdir():
            rel = folder / path.name
            if rel.as_posix() not in manifest and rel not in owned_dirs:
                extra.append(rel.as_posix())
    if extra:
        raise ValueError(
            f"the model folders of {directory} hold files that were not saved with the model "
            f"({', '.join(sorted(extra))}; {source} lists the saved ones): remove them, they "
            f"could change what loads."
        )


def _foreign_entries(directory: Path) -> list[str]:
    """What ``directory`` holds besides the model saved in it (``save`` must not delete it)."""
    manifest = None
    if (directory / CONFIG_NAME).is_file():
        try:
            manifest = _read_json(directory / CONFIG_NAME).get(MANIFEST_KEY)
        except (ValueError, OSError):
            manifest = None
    if not isinstance(manifest, dict):  # saved before the manifest: the known names
        return sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in directory.iterdir()
            if p.name not in _OWNED_WITHOUT_MANIFEST
        )
    owned_dirs = _owned_dirs(manifest)
    foreign = []
    stack = [PurePosixPath()]
    while stack:
        rel = stack.pop()
        for path in (directory / rel).iterdir():
            name = rel / path.name
            if path.is_dir() and not path.is_symlink():
                if name in owned_dirs:
                    stack.append(name)
                else:
                    foreign.append(f"{name.as_posix()}/")
            elif name.as_posix() not in manifest and name.as_posix() != CONFIG_NAME:
                foreign.append(name.as_posix())
    return sorted(foreign)


def _open_arrays(path: Path) -> Any:
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


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but another user's
        return True
    return True


def _remove_stale_temps(directory: Path) -> None:
    """Remove the hidden working folders of earlier saves to ``directory`` that were killed
    (their process is gone); a running save's folder is left alone."""
    if not directory.parent.is_dir():
        return
    for path in directory.parent.iterdir():
        match = _TMP_PATTERN.fullmatch(path.name)
        if match and match["name"] == directory.name and not _pid_alive(int(match["pid"])):
            logger.info("removing %s, left by an interrupted save", path)
            shutil.rmtree(path, ignore_errors=True)
    old = directory.with_name(f".{directory.name}.old")
    if old.exists() and holds_model(directory):  # otherwise it may be the only copy
        shutil.rmtree(old, ignore_errors=True)


def _new_sibling_dir(directory: Path) -> Path:
    """A new empty directory next to ``directory``; unlike ``tempfile.mkdtemp`` (mode 0o700)
    it gets the user's umask, so a model saved for a server stays readable by it."""
    while True:
        name = f".{directory.name}.skxmc-{os.getpid()}-{secrets.token_hex(6)}.tmp"
        tmp = directory.with_name(name)
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``), so
    that no instant leaves ``b`` missing; ``False`` where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # no libc symbol (musl before 1.2.5, old glibc)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # e.g. a filesystem without it
        return False
    raise OSError(err, os.strerror(err), str(b))


def save(
    estimator: Any,
    directory: str | os.PathLike,
    *,
    overwrite: bool = False,
    model_card: bool | Mapping[str, Any] | None = None,
) -> Path:
    """Save a fitted estimator or pipeline to ``directory`` without pickle.

    The directory gets ``skxmc-model.json`` and ``arrays.npz`` (plus safetensors files for
    torch weights), created with the user's umask; ``skxmc-model.json`` lists the other
    files with their sizes and sha256 hashes, which :func:`load` verifies. The model is
    written into a hidden folder next to its final place and moved in at the end (on Linux
    by an atomic exchange with the old one), so an interrupted or killed save leaves the old
    model or the new one, never a mix. A hidden folder left by a killed save is removed by
    the next save to the same directory.

    An existing directory is only replaced when ``overwrite=True``, when it holds an skxmc
    model and when everything in it belongs to that model: a directory that also holds
    other files (notes, plots) is refused with their names, and nothing is deleted.

    Parameters
    ----------
    estimator : estimator or Pipeline
        A fitted skxmc estimator, or a fitted scikit-learn / skxmc
        :class:`~sklearn.pipeline.Pipeline` whose steps are skxmc estimators,
        ``TfidfVectorizer`` / ``CountVectorizer`` (without callables), pipelines of those,
        or ``"passthrough"``.
    directory : str or path-like
        Target directory; created if missing.
    overwrite : bool, default=False
        Replace a model already saved in ``directory``.
    model_card : bool or dict, default=None
        Write a model card, ``README.md`` (Hugging Face style: front matter with
        ``library_name: skxmc`` and tags, then the estimator, its non-default parameters,
        the number of labels and features). ``True`` or a dict writes one; the dict may
        add ``"data_description"`` (str, markdown: what the model was trained on) and
        ``"metrics"`` (dict of metric name to number). The card is listed in
        ``skxmc-model.json`` like the other files, so :func:`load` verifies it too.
        ``None`` / ``False``: no card.

    Returns
    -------
    pathlib.Path
        The directory; reload with :func:`skxmc.load`.

    Raises
    ------
    TypeError
        For other estimators or pipeline steps (use pickle / joblib for those), or a
        ``model_card`` that is neither a bool nor a dict.
    ValueError
        When ``estimator`` is not fitted, or ``model_card`` has an unknown key or a value
        of the wrong type.
    FileExistsError
        When ``directory`` is a file, a non-empty folder without a model, a model and
        ``overwrite=False``, or a model together with files that are not part of it.

    Examples
    --------
    >>> import tempfile
    >>> import skxmc
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc.pipeline import make_pipeline
    >>> texts = ["red apple", "green apple", "red car", "fast car"]
    >>> labels = [["fruit"], ["fruit"], ["vehicle"], ["vehicle"]]
    >>> pipe = make_pipeline(TfidfVectorizer(), skxmc.XRLinearClassifier(top_k=1))
    >>> path = skxmc.save(pipe.fit(texts, labels), tempfile.mkdtemp() + "/model")
    >>> skxmc.load(path).predict_topk(["a fast car"])[0].tolist()
    [['vehicle']]
    """
    from ._version import __version__

    directory = Path(directory)
    card = _checked_card_options(model_card)  # before anything is written
    if not (_is_registered(estimator) or _is_pipeline(estimator)):
        raise TypeError(
            f"{type(estimator).__name__} does not support save(); skxmc.save takes skxmc "
            f"estimators and Pipelines of them; use pickle / joblib for others."
        )
    if not _is_fitted(estimator):
        raise ValueError(
            f"this {type(estimator).__name__} is not fitted yet; fit it before saving."
        )
    if directory.exists():
        if not directory.is_dir():
            raise FileExistsError(f"directory {str(directory)!r} exists and is a file.")
        if any(directory.iterdir()):
            if not holds_model(directory):
                raise FileExistsError(
                    f"directory {str(directory)!r} is not empty and holds no skxmc model; "
                    f"choose an empty or new directory (nothing was written)."
                )
            if not overwrite:
                raise FileExistsError(
                    f"directory {str(directory)!r} already holds a model; pass overwrite=True "
                    f"to replace it."
                )
            refuse_foreign_entries(directory)
    store = _ArrayStore()
    spec = _encode(estimator, "model", store)
    config = {"format_version": store.format_version, "skxmc_version": __version__, "model": spec}
    directory.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(directory)
    tmp = _new_sibling_dir(directory)
    try:
        np.savez(tmp / ARRAYS_NAME, **store.arrays)
        if hasattr(estimator, "_save_extra_files"):
            estimator._save_extra_files(tmp)
        for part, est in store.parts:
            (tmp / part).mkdir(parents=True)
            est._save_extra_files(tmp / part)
        if card is not None:

            def shape_of(key: str) -> tuple | None:
                return getattr(store.arrays.get(key), "shape", None)

            summary = _summarize(spec, store.format_version, __version__, shape_of)
            text = _model_card(summary, card, estimator)
            (tmp / CARD_NAME).write_text(text, encoding="utf-8")
        # Written last, with the list of the files above: a folder without it is no model.
        config[MANIFEST_KEY] = _build_manifest(tmp)
        (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=1), encoding="utf-8")
        if directory.exists():
            refuse_foreign_entries(directory)  # again: files may have arrived meanwhile
            if not _exchange(tmp, directory):
                old = directory.with_name(f".{directory.name}.old")
                shutil.rmtree(old, ignore_errors=True)
                directory.rename(old)
                tmp.rename(directory)
                shutil.rmtree(old, ignore_errors=True)
            # After the exchange ``tmp`` holds the old model: removed below.
        else:
            tmp.rename(directory)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("saved %s to %s", type(estimator).__name__, directory)
    return directory


def refuse_foreign_entries(directory: Path) -> None:
    """Raise ``FileExistsError`` listing the entries of ``directory`` that are not part of the
    model saved there (overwriting would delete them)."""
    foreign = _foreign_entries(directory)
    if foreign:
        shown = ", ".join(foreign[:10]) + (
            f" and {len(foreign) - 10} more" if len(foreign) > 10 else ""
        )
        raise FileExistsError(
            f"directory {str(directory)!r} holds a model and also {shown}, which are not part "
            f"of it; overwriting would delete them. Move them elsewhere or save to another "
            f"directory (nothing was written)."
        )


def load(directory: str | os.PathLike, *, mmap: bool = False, verify: bool | None = None) -> Any:
    """Load an estimator or pipeline saved with :func:`save`; never unpickles anything.

    Only classes registered by skxmc and scikit-learn's text vectorisers are created, so
    opening a model directory from someone else runs no code from it. Pipelines come back as
    :class:`skxmc.pipeline.Pipeline`; a model directory of ``skxmc fit`` is one.

    Before anything is used, the files are checked against the list that :func:`save`
    recorded in ``skxmc-model.json`` (present, same size and sha256, no unknown files in
    the model's sub-folders), every sparse matrix's structure is checked, the shapes and
    label counts are checked against each other, and the parameters are validated as
    ``fit`` validates them; ``verify`` chooses how much of the files' content these
    checks read. A directory saved by an skxmc without that list loads with a warning
    (its files cannot be checked for completeness); save it again to add the list.

    A string that is not an existing path and reads as a Hugging Face repository id
    (``"user/repo"``) is resolved in the local Hugging Face cache, as ``from_pretrained``
    does offline: the snapshot of its ``main`` branch, downloaded beforehand with
    ``huggingface_hub.snapshot_download("user/repo")`` (or ``hf download user/repo``).
    Nothing is downloaded here; ``HF_HUB_CACHE`` / ``HF_HOME`` choose the cache.

    Parameters
    ----------
    directory : str or path-like
        A directory written by :func:`save` (or by ``skxmc fit``), or the id of a
        Hugging Face repository holding one, in the local cache.
    mmap : bool, default=False
        Map the arrays of ``arrays.npz`` into memory instead of reading them: an array's
        pages are read from disk when first used and are shared by every process that
        maps the same file, so several serving processes hold one copy of a large model.
        An :class:`~skxmc.XRLinearClassifier` saved by this version also stores its
        beam-search layout, so it predicts from the mapped arrays without building
        anything; older model directories load, but build that layout in memory. In
        layers of small per-parent blocks (the leaves of a large model) the blocks a
        search reaches are read from the file (``pread``, at most 32 MiB at a time),
        not through the map: the file's pages stay in the shared page cache and each
        process holds only the blocks it is scoring (through a map, the kernel may map
        a whole cached folio, up to 2 MB, around each block touched).
        Recommended for serving large models from several processes; the map is
        copy-on-write, so nothing can change the files.
    verify : bool or None, default=None
        How much of the files' content is checked before use; the files' presence and
        sizes (a truncated or extended file), the archive's headers, the shapes and the
        structure whose size grows with the labels or tree nodes (row pointers) are
        always checked.

        - ``True``: also every file's sha256 against the list, and every entry of every
          array (index ranges, finite values): the whole model is read once.
        - ``None`` (the default): ``True`` without ``mmap``; with ``mmap``, every check
          but the sha256. The entry checks keep compiled code in bounds whatever the
          files hold (a crafted directory raises an error); the hash, which whoever edits
          a directory can also rewrite, only guards against accidental damage. The load
          still reads every array once.
        - ``False``: no hash and no entry checks, so a mapped load reads only headers and
          row pointers, and prediction reads only the pages it uses. The files' content
          is trusted: a damaged or crafted file can make prediction return wrong scores
          or crash the process. Use it only for model directories you saved yourself or
          loaded once with ``verify=True`` (when deploying them, say), e.g.
          ``load(path, mmap=True, verify=False)`` to start serving processes of a large
          model in well under a second.

    Returns
    -------
    estimator
        The fitted estimator or pipeline.

    Raises
    ------
    FileNotFoundError
        When ``directory`` holds no model or a file of the model is missing, or names a
        Hugging Face repository that is not in the local cache.
    ValueError
        When a file is damaged, truncated or changed, or the model it describes is
        inconsistent or has invalid parameters; the message names the file.

    Examples
    --------
    >>> import skxmc
    >>> skxmc.load("no/such/dir")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no skxmc model in 'no/such/dir' (skxmc-model.json is missing).
    """
    if verify not in (True, False, None):
        raise ValueError(f"verify must be True, False or None; got {verify!r}.")
    directory = resolve_model_dir(directory)
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        if _is_legacy_cli_dir(directory):
            return _load_legacy_cli_dir(directory)
        old = directory.with_name(f".{directory.name}.old")
        hint = (
            f"; a save into it was interrupted and the previous model is in {str(old)!r}"
            if (old / CONFIG_NAME).is_file()
            else ""
        )
        raise FileNotFoundError(
            f"no skxmc model in {str(directory)!r} ({CONFIG_NAME} is missing){hint}."
        )
    config = _read_json(config_path)
    if config.get("format_version") not in _READABLE_VERSIONS:
        raise ValueError(
            f"{config_path} has format version {config.get('format_version')!r}; this skxmc "
            f"reads versions {', '.join(map(str, _READABLE_VERSIONS))}: upgrade skxmc."
        )
    if not isinstance(config.get("model"), dict):
        raise ValueError(f"{config_path} describes no model (its 'model' entry is missing).")
    if MANIFEST_KEY in config:
        manifest = _checked_manifest(config[MANIFEST_KEY], config_path)
        hashes = verify if verify is not None else not mmap
        _verify_files(directory, manifest, config_path, hashes=hashes)
    else:
        warnings.warn(
            f"{config_path} lists no files (saved by an older skxmc), so the model directory "
            f"cannot be checked for missing or changed files; save the model again to add "
            f"the list.",
            UserWarning,
            stacklevel=2,
        )
    entries = _CHECK_ENTRIES.set(verify is not False)
    try:
        with _open_arrays(directory / ARRAYS_NAME) as npz:
            arrays = (_MappedArrays if mmap else _Arrays)(npz, directory / ARRAYS_NAME)
            try:
                est = _decode(config["model"], arrays, directory)
            except (KeyError, TypeError, IndexError) as exc:
                raise ValueError(
                    f"{config_path} does not describe a model this skxmc can build "
                    f"({type(exc).__name__}: {exc}): damaged or edited?"
                ) from exc
            finally:
                if mmap:
                    arrays.close()
    finally:
        _CHECK_ENTRIES.reset(entries)
    if "__estimator__" in config["model"] and hasattr(est, "_load_extra_files"):
        est._load_extra_files(directory)
    return est


def resolve_model_dir(directory: str | os.PathLike) -> Path:
    """The folder of a model: ``directory`` itself, or, for a string that is not an existing
    path and reads as a Hugging Face repository id (``"user/repo"``), its snapshot in the
    local Hugging Face cache (offline: nothing is downloaded).

    Parameters
    ----------
    directory : str or path-like
        A model directory, or a repository id (a string only: a path-like is always a path).

    Returns
    -------
    pathlib.Path
        The folder to read.

    Raises
    ------
    FileNotFoundError
        When ``directory`` names a repository that is not in the local cache.
    """
    path = Path(directory)
    if (
        not isinstance(directory, str)
        or path.exists()
        # The folder an interrupted save moved aside: load() points to it.
        or path.with_name(f".{path.name}.old").exists()
        or not _REPO_ID_PATTERN.fullmatch(directory)
        or "--" in directory
        or ".." in directory
    ):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE

    try:
        return Path(snapshot_download(directory, local_files_only=True))
    except (OSError, ValueError) as exc:  # LocalEntryNotFoundError is an OSError
        logger.debug("%s is not in the Hugging Face cache: %s", directory, exc)
    raise FileNotFoundError(
        f"no skxmc model in {directory!r}: there is no such directory, and no Hugging Face "
        f"repository {directory!r} in the local cache ({HF_HUB_CACHE}; skxmc reads the cache "
        f"only, offline). Download it first with huggingface_hub.snapshot_download("
        f"{directory!r}) or `hf download {directory}`, or give the path of a model directory."
    )


def _checked_card_options(model_card: Any) -> dict | None:
    """``save``'s ``model_card`` as a dict of card options, or ``None`` for no card."""
    if model_card is None or model_card is False:
        return None
    if model_card is True:
        return {}
    if not isinstance(model_card, Mapping):
        raise TypeError(
            f"model_card must be None, a bool or a dict with keys {', '.join(_CARD_KEYS)}; "
            f"got {type(model_card).__name__}."
        )
    unknown = sorted(map(str, set(model_card) - set(_CARD_KEYS)))
    if unknown:
        raise ValueError(
            f"model_card has unknown key(s) {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(map(repr, _CARD_KEYS))}."
        )
    description = model_card.get("data_description")
    if description is not None and not isinstance(description, str):
        raise ValueError(
            f"model_card['data_description'] must be a str, got {type(description).__name__}."
        )
    metrics = model_card.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, Mapping):
            raise ValueError(
                f"model_card['metrics'] must be a dict of metric name to number, got "
                f"{type(metrics).__name__}."
            )
        for name, value in metrics.items():
            if not isinstance(name, str) or isinstance(value, bool):
                raise ValueError(
                    f"model_card['metrics'][{name!r}] must be a number, named by a str."
                )
            if not isinstance(value, (int, float, np.integer, np.floating)):
                raise ValueError(
                    f"model_card['metrics'][{name!r}] must be a number, got {type(value).__name__}."
                )
    return dict(model_card)


def _plain(value: Any) -> Any:
    """A saved value (the JSON form of ``_encode``) for display: plain JSON values, nested
    estimators by class name, arrays by ``"<array>"``."""
    if isinstance(value, (list, tuple)):  # tuples too: a spec not yet written as JSON
        return [_plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__dict__" in value:
        return {k: _plain(v) for k, v in value["__dict__"].items()}
    if "__sequence__" in value:
        return [_plain(v) for v in value.get("items", [])]
    if "__estimator__" in value:
        return f"{value['__estimator__']}(...)"
    if "__pipeline__" in value:
        return "Pipeline(...)"
    if "__vectorizer__" in value:
        return f"{value['__vectorizer__'].get('class', 'vectorizer')}(...)"
    if "__object_array__" in value:
        return value["__object_array__"]
    if "__array__" in value or "__sparse__" in value:
        return "<array>"
    return {k: _plain(v) for k, v in value.items()}


def _plain_default(value: Any) -> Any:
    """A constructor default in the form :func:`_plain` gives the saved value."""
    if isinstance(value, (list, tuple)):
        return [_plain_default(v) for v in value]
    if isinstance(value, type):
        try:
            return np.dtype(value).name  # a vectorizer's dtype is saved by name
        except TypeError:
            return value.__name__
    if hasattr(value, "get_params"):
        return f"{type(value).__name__}(...)"
    return value


def _class_named(name: str) -> type | None:
    """The class of a saved step (registered skxmc estimators, sklearn's vectorizers)."""
    if name in ("TfidfVectorizer", "CountVectorizer"):
        from sklearn.feature_extraction import text

        return getattr(text, name)
    if name not in _REGISTRY:
        from ._lazy import LAZY, public_attribute

        if name in LAZY:
            public_attribute(name)  # imports the module (not the weights), which registers it
    return _REGISTRY.get(name)


def _non_default(class_name: str, params: dict) -> dict:
    cls = _class_named(class_name)
    if cls is None:
        return dict(params)
    defaults = {
        k: p.default
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not p.empty
    }
    return {
        k: v for k, v in params.items() if k not in defaults or _plain_default(defaults[k]) != v
    }


def _estimator_params(spec: dict) -> dict:
    """The non-default parameters of a saved estimator, those of estimators among its
    parameters (a composite's parts) flattened as ``part__param``."""
    raw = spec.get("params", {})
    raw = raw.get("__dict__", raw) if isinstance(raw, dict) else {}
    plain = _plain(raw)
    shown = _non_default(spec["__estimator__"], plain if isinstance(plain, dict) else {})
    out: dict = {}
    for key, value in shown.items():
        out[key] = value
        nested = raw.get(key)
        if isinstance(nested, dict) and "__estimator__" in nested:
            out.update({f"{key}__{k}": v for k, v in _estimator_params(nested).items()})
    return out


def _steps(spec: dict, prefix: str = "") -> list[tuple[str | None, Any]]:
    """``(name, saved step)`` of a pipeline (nested ones flattened as ``outer__inner``), or
    ``[(None, spec)]`` for a lone estimator."""
    if "__pipeline__" not in spec:
        return [(None, spec)]
    out: list[tuple[str | None, Any]] = []
    for entry in spec.get("steps", []):
        name, step = f"{prefix}{entry['name']}", entry["step"]
        if isinstance(step, dict) and "__pipeline__" in step:
            out.extend(_steps(step, prefix=f"{name}__"))
        else:
            out.append((name, step))
    return out


def _fitted_entry(spec: Any, name: str) -> Any:
    """The saved fitted attribute ``name`` of an estimator's spec, or ``None``."""
    if not isinstance(spec, dict):
        return None
    for part in ("arrays", "attributes"):
        entries = spec.get(part)
        if isinstance(entries, dict) and isinstance(entries.get("__dict__"), dict):
            if name in entries["__dict__"]:
                return entries["__dict__"][name]
    return None


def _length(ref: Any, shape_of: Any) -> int | None:
    """The number of entries of a saved array / list, reading at most an array's header."""
    if isinstance(ref, list):
        return len(ref)
    if not isinstance(ref, dict):
        return None
    if "__object_array__" in ref:
        return len(ref["__object_array__"])
    if "__sequence__" in ref:
        return len(ref.get("items", []))
    if "__array__" in ref:
        shape = shape_of(ref["__array__"])
        return int(shape[0]) if shape else None
    return None


def _vocabulary_size(step: Any) -> int | None:
    if isinstance(step, dict) and "__vectorizer__" in step:
        vocabulary = step["__vectorizer__"].get("vocabulary")
        return len(vocabulary) if isinstance(vocabulary, (dict, list)) else None
    return None


def _summarize(spec: dict, format_version: Any, skxmc_version: Any, shape_of: Any) -> dict:
    """What a saved model is, from its ``skxmc-model.json`` entry ``spec`` alone;
    ``shape_of(key)`` gives the shape of an array of ``arrays.npz`` (or ``None``)."""
    steps = []
    for name, step in _steps(spec):
        if isinstance(step, dict) and "__estimator__" in step:
            cls_name = step["__estimator__"]
            steps.append({"name": name, "class": cls_name, "params": _estimator_params(step)})
            continue
        elif isinstance(step, dict) and "__vectorizer__" in step:
            cls_name = step["__vectorizer__"].get("class", "vectorizer")
            params = _plain(step["__vectorizer__"].get("params", {}))
        else:
            steps.append({"name": name, "class": "passthrough", "params": {}})
            continue
        params = params if isinstance(params, dict) else {}
        steps.append({"name": name, "class": cls_name, "params": _non_default(cls_name, params)})
    real = [(name, step) for name, step in _steps(spec) if isinstance(step, dict)]
    final = real[-1][1] if real else {}
    n_labels = _length(_fitted_entry(final, "classes_"), shape_of)
    n_features, features = None, "raw texts"
    if real:
        first = real[0][1]
        n_features = _vocabulary_size(first)
        if n_features is not None:
            features = f"{first['__vectorizer__'].get('class', 'vectorizer')} vocabulary"
        else:
            fitted = _fitted_entry(first, "n_features_in_")
            if isinstance(fitted, int) and not isinstance(fitted, bool):
                n_features, features = fitted, "input features"
            else:
                n_features = _vocabulary_size(_fitted_entry(first, "vectorizer_"))
                if n_features is not None:
                    features = "TF-IDF vocabulary (besides the encoder's texts)"
    final_cls = _class_named(final.get("__estimator__", "")) if "__estimator__" in final else None
    if final_cls is None:
        task = None
    elif hasattr(final_cls, "predict_topk"):
        task = "multi-label"
    else:
        task = "multi-class"
    classes = [s["class"] for s in steps]
    estimator = f"Pipeline({', '.join(classes)})" if "__pipeline__" in spec else classes[0]
    return {
        "estimator": estimator,
        "steps": steps,
        "task": task,
        "n_labels": n_labels,
        "n_features": n_features,
        "features": features,
        "skxmc_version": skxmc_version,
        "format_version": format_version,
    }


def _npz_shapes(path: Path) -> Any:
    """``shape_of(key)`` for the arrays of ``path``: reads the ``.npy`` header only."""

    def shape_of(key: str) -> tuple | None:
        try:
            with zipfile.ZipFile(path) as archive, archive.open(f"{key}.npy") as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, _, _ = np.lib.format.read_array_header_1_0(member)
                else:
                    shape, _, _ = np.lib.format.read_array_header_2_0(member)
            return shape
        except (KeyError, OSError, ValueError, zipfile.BadZipFile):
            return None  # a damaged file is load()'s to report; describe shows "?"

    return shape_of


def _directory_files(directory: Path) -> dict[str, int]:
    return {
        p.relative_to(directory).as_posix(): p.stat().st_size
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def describe(directory: str | os.PathLike) -> dict[str, Any]:
    """What a model directory holds, read from ``skxmc-model.json`` without loading weights.

    Only the JSON and the headers of the arrays it refers to are read (a model of many
    gigabytes is described in milliseconds); the files are not verified (:func:`load`
    does that).

    Parameters
    ----------
    directory : str or path-like
        A directory written by :func:`save` (or ``skxmc fit``), or a Hugging Face
        repository id in the local cache (see :func:`load`).

    Returns
    -------
    dict
        ``path``; ``estimator`` (the class, or ``Pipeline(step classes)``); ``steps`` (a
        list of ``{"name", "class", "params"}`` with the parameters that differ from the
        class's defaults; ``name`` is ``None`` for a lone estimator); ``task``
        (``"multi-label"``, ``"multi-class"`` or ``None``); ``n_labels``; ``n_features`` and
        ``features`` (what they are); ``skxmc_version`` and ``format_version`` it was saved
        with; ``files`` (``{relative name: bytes}``, ``skxmc-model.json`` included);
        ``total_size`` (bytes); ``model_card`` (whether ``README.md`` is one of the files).

    Raises
    ------
    FileNotFoundError
        When ``directory`` holds no model.
    ValueError
        When ``skxmc-model.json`` is not valid JSON or describes no model.
    """
    path = resolve_model_dir(directory)
    config_path = path / CONFIG_NAME
    if config_path.is_file():
        config = _read_json(config_path)
        spec = config.get("model")
        shape_of = _npz_shapes(path / ARRAYS_NAME)
        manifest = config.get(MANIFEST_KEY)
        if isinstance(manifest, dict):
            files = {CONFIG_NAME: config_path.stat().st_size}
            files.update(
                {k: v["size"] for k, v in manifest.items() if isinstance(v, dict) and "size" in v}
            )
        else:
            files = _directory_files(path)
    elif _is_legacy_cli_dir(path):
        config = _read_json(path / LEGACY_RANKER_DIR / CONFIG_NAME)
        vectorizer = _read_json(path / LEGACY_VECTORIZER_FILE)
        vectorizer.pop("arrays", None)
        ranker = config.get("model")
        spec = {
            "__pipeline__": "legacy",
            "steps": [
                {"name": "vectorizer", "step": {"__vectorizer__": vectorizer}},
                {"name": "ranker", "step": ranker},
            ],
        }
        shape_of = _npz_shapes(path / LEGACY_RANKER_DIR / ARRAYS_NAME)
        files = _directory_files(path)
    else:
        raise FileNotFoundError(f"no skxmc model in {str(path)!r} ({CONFIG_NAME} is missing).")
    if not isinstance(spec, dict):
        raise ValueError(f"{config_path} describes no model (its 'model' entry is missing).")
    try:
        summary = _summarize(
            spec, config.get("format_version"), config.get("skxmc_version"), shape_of
        )
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(
            f"{config_path} does not describe a model this skxmc can read "
            f"({type(exc).__name__}: {exc}): damaged or edited?"
        ) from exc
    return {
        "path": str(path),
        **summary,
        "files": files,
        "total_size": sum(files.values()),
        "model_card": CARD_NAME in files and CONFIG_NAME in files,
    }


def _cell(value: Any) -> str:
    """A value for a markdown table cell."""
    text = value if isinstance(value, str) else json.dumps(value)
    return "`" + text.replace("|", "\\|").replace("\n", " ").replace("`", "'") + "`"


def _model_card(summary: dict, options: dict, estimator: Any) -> str:
    """``README.md`` of a model directory: Hugging Face model-card front matter, then what
    the model is (from ``summary``) and the card options of ``save``."""
    from ._version import __version__

    task = summary["task"]
    tags = ["skxmc", "scikit-learn", "text-classification"]
    if task == "multi-label":
        tags.append("extreme-multi-label-classification")
    elif task == "multi-class":
        tags.append("multi-class-classification")
    final = estimator.steps[-1][1] if _is_pipeline(estimator) else estimator
    lines = ["---", "library_name: skxmc", "tags:", *(f"- {t}" for t in tags)]
    lines += ["pipeline_tag: text-classification", "---", ""]
    lines += [f"# {type(final).__name__}", ""]
    lines += [
        f"A model saved by [skxmc](https://skxmc.readthedocs.io) {__version__} with "
        f"`skxmc.save`: JSON, `.npz` arrays (and safetensors weights for torch models), no "
        "pickle. `skxmc-model.json` lists every file with its sha256; `skxmc.load` checks "
        "them.",
        "",
        "## Model",
        "",
        "| | |",
        "|---|---|",
        f"| estimator | `{summary['estimator']}` |",
    ]
    if task is not None:
        lines.append(f"| task | {task} |")
    n_labels = summary["n_labels"]
    lines.append(f"| labels | {n_labels if n_labels is not None else '?'} |")
    n_features = summary["n_features"]
    features = summary["features"]
    lines.append(
        f"| features | {n_features} ({features}) |" if n_features else f"| features | {features} |"
    )
    lines += ["", "## Parameters", ""]
    lines.append(
        "Parameters that differ from the defaults (all of them are in `skxmc-model.json`):"
    )
    for step in summary["steps"]:
        title = step["class"] if step["name"] is None else f"{step['name']}: {step['class']}"
        lines += ["", f"**{title}**", ""]
        if step["params"]:
            lines += ["| parameter | value |", "|---|---|"]
            lines += [f"| `{k}` | {_cell(v)} |" for k, v in sorted(step["params"].items())]
        else:
            lines.append("(all defaults)")
    if options.get("data_description"):
        lines += ["", "## Training data", "", options["data_description"].strip()]
    if options.get("metrics"):
        lines += ["", "## Metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {float(v):.6g} |" for k, v in options["metrics"].items()]
    call = "predict_topk(texts, k=5)" if task == "multi-label" else "predict(texts)"
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "import skxmc",
        'model = skxmc.load("path/to/this/folder")  # or "user/repo" from the HF cache',
        f"model.{call}",
        "```",
        "",
        "or `skxmc predict --model-dir path/to/this/folder --input texts.jsonl`; "
        "`skxmc info path/to/this/folder` describes it without loading it.",
        "",
    ]
    return "\n".join(lines)


class PersistenceMixin:
    """Adds ``save(directory)``; fitted attributes (names ending in ``_``) are stored.

    Subclasses decorated with :func:`persistent` round-trip through :func:`load` as long as
    their fitted attributes are scalars, strings, arrays, sparse matrices, lists / tuples /
    dicts of those, or other persistent estimators. Override ``_save_state`` /
    ``_load_state`` for anything else.
    """

    def save(
        self,
        directory: str | os.PathLike,
        *,
        overwrite: bool = False,
        model_card: bool | Mapping[str, Any] | None = None,
    ) -> Path:
        """Save the fitted model to ``directory`` (JSON + ``.npz``; loading runs no pickle).

        Parameters
        ----------
        directory : str or path-like
            Target directory; created if missing. A non-empty directory that holds no
            skxmc model is never touched.
        overwrite : bool, default=False
            Replace a model already saved in ``directory``.
        model_card : bool or dict, default=None
            Also write ``README.md``, a model card; see :func:`skxmc.save`.

        Returns
        -------
        pathlib.Path
            The directory; reload with :func:`skxmc.load`.
        """
        return save(self, directory, overwrite=overwrite, model_card=model_card)

    def _save_state(self) -> tuple[dict, dict]:
        attributes, arrays = {}, {}
        for name, value in vars(self).items():
            if not name.endswith("_") or name.startswith("_"):
                continue
            if isinstance(value, np.ndarray) or sp.issparse(value):
                arrays[name] = value
            else:
                attributes[name] = value
        return attributes, arrays

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        for name, value in {**attributes, **arrays}.items():
            setattr(self, name, value)
