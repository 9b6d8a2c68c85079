"""Saving and loading fitted estimators without pickle.

A model directory holds ``skxmc-model.json`` (class name, parameters, JSON attributes, skxmc
version) and ``arrays.npz`` (numpy arrays and sparse matrices, loaded with
``allow_pickle=False``); estimators with torch weights add safetensors files. Loading only
instantiates classes registered here with :func:`persistent`, so opening a model directory
from someone else never executes code from it.

Estimators opt in by decorating the class with :func:`persistent` and implementing
``_save_state(self) -> (attributes: dict, arrays: dict)`` and
``_load_state(self, attributes, arrays)``; the parameters are saved from ``get_params``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._vectorizers import is_text_vectorizer, vectorizer_from_state, vectorizer_to_state

__all__ = ["load", "persistent", "save"]

CONFIG_NAME = "skxmc-model.json"
ARRAYS_NAME = "arrays.npz"
FORMAT_VERSION = 1

_REGISTRY: dict[str, type] = {}


def persistent(cls: type) -> type:
    """Class decorator: make ``cls`` loadable by :func:`load` (by its class name)."""
    _REGISTRY[cls.__name__] = cls
    return cls


class _ArrayStore:
    """Collects arrays and sparse matrices under unique keys for one ``.npz`` file."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

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
            cls = sp.csr_matrix if ref["format"] == "csr" else sp.csc_matrix
            return cls(
                (arrays[f"{key}.data"], arrays[f"{key}.indices"], arrays[f"{key}.indptr"]),
                shape=tuple(ref["shape"]),
            )
        if "__object_array__" in ref:
            out = np.empty(len(ref["__object_array__"]), dtype=object)
            out[:] = ref["__object_array__"]
            return out.reshape(ref["shape"])
        return arrays[ref["__array__"]]


def _jsonable_list(values: list) -> list:
    for v in values:
        if not isinstance(v, (str, int, float, bool, type(None))):
            raise TypeError(f"cannot save label {v!r} of type {type(v).__name__} without pickle.")
    return values


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
        return {"__vectorizer__": state,
                "arrays": {k: store.put(f"{key}.{k}", v) for k, v in arrays.items()}}  # fmt: skip
    if type(value).__name__ in _REGISTRY and hasattr(value, "get_params"):
        nested = {"__estimator__": type(value).__name__,
                  "params": _encode(value.get_params(deep=False), f"{key}.params", store)}
        if hasattr(value, "_save_state") and _is_fitted(value):
            attributes, arrays = value._save_state()
            nested["attributes"] = _encode(attributes, f"{key}.attributes", store)
            nested["arrays"] = _encode(arrays, f"{key}.arrays", store)
        return nested
    raise TypeError(
        f"cannot save {key} of type {type(value).__name__} without pickle; use pickle / joblib "
        f"for models holding arbitrary Python objects."
    )


def _decode(value: Any, arrays: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "__sequence__" in value:
        items = [_decode(v, arrays) for v in value["items"]]
        return tuple(items) if value["__sequence__"] == "tuple" else items
    if "__dict__" in value:
        return {k: _decode(v, arrays) for k, v in value["__dict__"].items()}
    if "__estimator__" in value:
        return _instantiate(value, arrays)
    if "__vectorizer__" in value:
        parts = {k: _ArrayStore.get(ref, arrays) for k, ref in value["arrays"].items()}
        return vectorizer_from_state(value["__vectorizer__"], parts)
    return _ArrayStore.get(value, arrays)


def _instantiate(spec: dict, arrays: Any) -> Any:
    name = spec["__estimator__"]
    if name not in _REGISTRY:
        import skxmc

        if name in skxmc._LAZY:
            getattr(skxmc, name)  # imports the module, which registers the class
    if name not in _REGISTRY:
        raise ValueError(f"the model directory names an unknown estimator class {name!r}.")
    est = _REGISTRY[name](**_decode(spec["params"], arrays))
    if "attributes" in spec:
        est._load_state(_decode(spec["attributes"], arrays), _decode(spec["arrays"], arrays))
    return est


def _is_fitted(est: Any) -> bool:
    return any(k.endswith("_") and not k.startswith("__") for k in vars(est))


def save(estimator: Any, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Save a fitted estimator to ``directory`` (see the module docstring).

    The directory is written next to its final place and moved in at the end, so an
    interrupted save never leaves a half-written model. An existing directory is only
    replaced when ``overwrite=True`` and when it holds an skxmc model: other folders are
    never deleted.
    """
    from . import __version__

    directory = Path(directory)
    if type(estimator).__name__ not in _REGISTRY:
        raise TypeError(f"{type(estimator).__name__} does not support save(); use pickle.")
    if not _is_fitted(estimator):
        raise ValueError(f"this {type(estimator).__name__} is not fitted yet; fit it before saving.")
    if directory.exists():
        if not directory.is_dir():
            raise FileExistsError(f"directory {str(directory)!r} exists and is a file.")
        if any(directory.iterdir()):
            if not (directory / CONFIG_NAME).is_file():
                raise FileExistsError(
                    f"directory {str(directory)!r} is not empty and holds no skxmc model; "
                    f"choose an empty or new directory (nothing was written)."
                )
            if not overwrite:
                raise FileExistsError(
                    f"directory {str(directory)!r} already holds a model; pass overwrite=True "
                    f"to replace it."
                )
    store = _ArrayStore()
    spec = _encode(estimator, "model", store)
    config = {"format_version": FORMAT_VERSION, "skxmc_version": __version__, "model": spec}
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=1), encoding="utf-8")
        np.savez(tmp / ARRAYS_NAME, **store.arrays)
        if hasattr(estimator, "_save_extra_files"):
            estimator._save_extra_files(tmp)
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            directory.rename(old)
            tmp.rename(directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(directory)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return directory


def load(directory: str | os.PathLike) -> Any:
    """Load an estimator saved with ``est.save(directory)``; never unpickles anything.

    Examples
    --------
    >>> import skxmc
    >>> skxmc.load("no/such/dir")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no skxmc model in 'no/such/dir' (skxmc-model.json is missing).
    """
    directory = Path(directory)
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise FileNotFoundError(f"no skxmc model in {str(directory)!r} ({CONFIG_NAME} is missing).")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{config_path} has format version {config.get('format_version')!r}; this skxmc "
            f"reads version {FORMAT_VERSION}."
        )
    with np.load(directory / ARRAYS_NAME, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    est = _instantiate(config["model"], arrays)
    if hasattr(est, "_load_extra_files"):
        est._load_extra_files(directory)
    return est


class PersistenceMixin:
    """Adds ``save(directory)``; fitted attributes (names ending in ``_``) are stored.

    Subclasses decorated with :func:`persistent` round-trip through :func:`load` as long as
    their fitted attributes are scalars, strings, arrays, sparse matrices, lists / tuples /
    dicts of those, or other persistent estimators. Override ``_save_state`` /
    ``_load_state`` for anything else.
    """

    def save(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Save the fitted model to ``directory`` (JSON + ``.npz``; loading runs no pickle).

        Parameters
        ----------
        directory : str or path-like
            Target directory; created if missing. A non-empty directory that holds no
            skxmc model is never touched.
        overwrite : bool, default=False
            Replace a model already saved in ``directory``.

        Returns
        -------
        pathlib.Path
            The directory; reload with :func:`skxmc.load`.
        """
        return save(self, directory, overwrite=overwrite)

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
