"""What a model directory holds, read from ``skxmc-model.json`` (and the array headers of
``arrays.npz``) without loading any weights: :func:`describe`, and the summary the model
card is written from."""

from __future__ import annotations

import inspect
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ._format import (
    ARRAYS_NAME,
    CARD_NAME,
    CONFIG_NAME,
    LEGACY_RANKER_DIR,
    LEGACY_VECTORIZER_FILE,
    MANIFEST_KEY,
    is_legacy_cli_dir,
    read_json,
)
from ._hub import resolve_model_dir
from ._pecos import describe_pecos, is_pecos_dir
from ._registry import registered_class

__all__ = ["describe", "npz_shapes", "summarize"]


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
    if "__array__" in value or "__sparse__" in value or "__strings__" in value:
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
    return registered_class(name)  # imports the module (not the weights)


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
    if "__strings__" in ref:
        shape = ref.get("shape")
        return int(shape[0]) if isinstance(shape, list) and shape else None
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


def summarize(spec: dict, format_version: Any, skxmc_version: Any, shape_of: Any) -> dict:
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
    # compacted parts (XRLinearClassifier.compact / save(..., predict_only=True))
    predict_only = any(_fitted_entry(step, "predict_only_") is True for _, step in real)
    classes = [s["class"] for s in steps]
    estimator = f"Pipeline({', '.join(classes)})" if "__pipeline__" in spec else classes[0]
    return {
        "estimator": estimator,
        "steps": steps,
        "task": task,
        "n_labels": n_labels,
        "n_features": n_features,
        "features": features,
        "predict_only": predict_only,
        "skxmc_version": skxmc_version,
        "format_version": format_version,
    }


def npz_shapes(path: Path) -> Any:
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
        A directory written by :func:`save` (or ``skxmc fit``), a Hugging Face
        repository id in the local cache (see :func:`load`), or a libpecos
        ``XLinearModel`` folder (see :func:`from_pecos`).

    Returns
    -------
    dict
        ``path``; ``estimator`` (the class, or ``Pipeline(step classes)``); ``steps`` (a
        list of ``{"name", "class", "params"}`` with the parameters that differ from the
        class's defaults; ``name`` is ``None`` for a lone estimator); ``task``
        (``"multi-label"``, ``"multi-class"`` or ``None``); ``n_labels``; ``n_features`` and
        ``features`` (what they are); ``predict_only`` (whether a part of it was saved
        compacted, ``skxmc.save(..., predict_only=True)``); ``skxmc_version`` and
        ``format_version`` it was saved with; ``files`` (``{relative name: bytes}``,
        ``skxmc-model.json`` included);
        ``total_size`` (bytes); ``model_card`` (whether ``README.md`` is one of the files).
        For a libpecos folder, ``skxmc_version`` and ``format_version`` are None and
        ``pecos`` holds its layer sizes, bias, ``only_topk`` and post-processors.

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
        config = read_json(config_path)
        spec = config.get("model")
        shape_of = npz_shapes(path / ARRAYS_NAME)
        manifest = config.get(MANIFEST_KEY)
        if isinstance(manifest, dict):
            files = {CONFIG_NAME: config_path.stat().st_size}
            files.update(
                {k: v["size"] for k, v in manifest.items() if isinstance(v, dict) and "size" in v}
            )
        else:
            files = _directory_files(path)
    elif is_legacy_cli_dir(path):
        config = read_json(path / LEGACY_RANKER_DIR / CONFIG_NAME)
        vectorizer = read_json(path / LEGACY_VECTORIZER_FILE)
        vectorizer.pop("arrays", None)
        ranker = config.get("model")
        spec = {
            "__pipeline__": "legacy",
            "steps": [
                {"name": "vectorizer", "step": {"__vectorizer__": vectorizer}},
                {"name": "ranker", "step": ranker},
            ],
        }
        shape_of = npz_shapes(path / LEGACY_RANKER_DIR / ARRAYS_NAME)
        files = _directory_files(path)
    elif is_pecos_dir(path):
        info = describe_pecos(path)
        for step in info["steps"]:
            step["params"] = _non_default(step["class"], step["params"])
        return info
    else:
        raise FileNotFoundError(f"no skxmc model in {str(path)!r} ({CONFIG_NAME} is missing).")
    if not isinstance(spec, dict):
        raise ValueError(f"{config_path} describes no model (its 'model' entry is missing).")
    try:
        summary = summarize(
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
