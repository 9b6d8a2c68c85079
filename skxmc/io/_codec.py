"""The JSON form of estimators, parameters and fitted attributes (``"model"`` of
``skxmc-model.json``): :func:`encode` writes plain JSON values as they are, arrays and
sparse matrices into an :class:`~skxmc.io._arrays.ArrayStore` (by key), and nested
estimators, vectorisers and pipelines as tagged objects; :func:`decode` reverses it,
creating only registered classes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._vectorizers import is_text_vectorizer, vectorizer_from_state, vectorizer_to_state
from ._arrays import ArrayStore
from ._format import CONFIG_NAME, PART_PATTERN
from ._pipeline import decode_pipeline, encode_pipeline
from ._registry import (
    check_state,
    checked_params,
    is_fitted,
    is_pipeline,
    is_registered,
    registered_class,
    validate_loaded_params,
)

__all__ = ["decode", "encode", "instantiate"]


def encode(value: Any, key: str, store: ArrayStore) -> Any:
    """JSON form of a parameter / attribute; arrays go to the store."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return {
            "__sequence__": type(value).__name__,
            "items": [encode(v, f"{key}.{i}", store) for i, v in enumerate(value)],
        }
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"cannot save {key}: dict keys must be str.")
        return {"__dict__": {k: encode(v, f"{key}.{k}", store) for k, v in value.items()}}
    if isinstance(value, np.ndarray) or sp.issparse(value):
        return store.put(key, value)
    if is_text_vectorizer(value):
        state, arrays = vectorizer_to_state(value)
        parts = {k: store.put(f"{key}.{k}", v) for k, v in arrays.items()}
        return {"__vectorizer__": state, "arrays": parts}
    if is_pipeline(value):
        return encode_pipeline(value, key, store, encode)
    if is_registered(value):
        nested = {
            "__estimator__": type(value).__name__,
            "params": encode(value.get_params(deep=False), f"{key}.params", store),
        }
        if hasattr(value, "_save_state") and is_fitted(value):
            attributes, arrays = value._save_state()
            nested["attributes"] = encode(attributes, f"{key}.attributes", store)
            nested["arrays"] = encode(arrays, f"{key}.arrays", store)
            # The saved estimator's own files go into the model directory (see save);
            # nested ones get a folder each.
            if key != "model" and hasattr(value, "_save_extra_files"):
                nested["files"] = f"parts/{len(store.parts)}"
                store.parts.append((nested["files"], value))
                store.format_version = max(store.format_version, 2)
        return nested
    raise TypeError(
        f"cannot save {key} of type {type(value).__name__} without pickle; use pickle / joblib "
        f"for models holding arbitrary Python objects."
    )


def decode(value: Any, arrays: Any, directory: Path) -> Any:
    if not isinstance(value, dict):
        return value
    if "__sequence__" in value:
        items = [decode(v, arrays, directory) for v in value["items"]]
        return tuple(items) if value["__sequence__"] == "tuple" else items
    if "__dict__" in value:
        return {k: decode(v, arrays, directory) for k, v in value["__dict__"].items()}
    if "__estimator__" in value:
        return instantiate(value, arrays, directory)
    if "__pipeline__" in value:
        return decode_pipeline(value, lambda v: decode(v, arrays, directory))
    if "__vectorizer__" in value:
        parts = {k: ArrayStore.get(ref, arrays) for k, ref in value["arrays"].items()}
        return vectorizer_from_state(value["__vectorizer__"], parts)
    return ArrayStore.get(value, arrays)


def instantiate(spec: dict, arrays: Any, directory: Path) -> Any:
    name = spec["__estimator__"]
    cls = registered_class(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"the model directory names an unknown estimator class {name!r}.")
    source = directory / CONFIG_NAME
    params = decode(spec["params"], arrays, directory)
    # An estimator whose parameters were renamed since (the neural estimators' flat
    # training settings, now in one TrainingConfig) maps what older skxmc saved.
    upgrade = getattr(cls, "_upgrade_params", None)
    if upgrade is not None and isinstance(params, dict):
        params = upgrade(params)
    est = cls(**checked_params(cls, params, source))
    validate_loaded_params(est, source)
    if "attributes" in spec:
        attributes = decode(spec["attributes"], arrays, directory)
        arrays_ = decode(spec["arrays"], arrays, directory)
        # Before _load_state: it may hand the arrays to compiled code.
        check_state(est, attributes, arrays_, source)
        est._load_state(attributes, arrays_)
    if "files" in spec:
        # A fixed pattern: a model directory from elsewhere never points outside itself.
        if not isinstance(spec["files"], str) or not PART_PATTERN.fullmatch(spec["files"]):
            raise ValueError(f"the model directory names an invalid part {spec['files']!r}.")
        est._load_extra_files(directory / spec["files"])
    return est
