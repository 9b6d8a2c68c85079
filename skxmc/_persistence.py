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

Directories and files are created with the permissions of the user's umask.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.pipeline import Pipeline as _SklearnPipeline

from ._vectorizers import is_text_vectorizer, vectorizer_from_state, vectorizer_to_state
from .pipeline import Pipeline, make_pipeline

__all__ = ["load", "persistent", "save"]

logger = logging.getLogger(__name__)

CONFIG_NAME = "skxmc-model.json"
ARRAYS_NAME = "arrays.npz"
# Version 2 adds pipelines and nested estimators with files (``parts/``); models without
# them are still written as version 1, so that older skxmc releases keep reading them.
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
# The layout ``skxmc fit`` wrote before it saved a pipeline: read, never written.
LEGACY_RANKER_DIR = "ranker"
LEGACY_VECTORIZER_FILE = "vectorizer.json"
_PART_PATTERN = re.compile(r"parts/[0-9]+")
_PIPELINE_CLASSES = (_SklearnPipeline, Pipeline)

_REGISTRY: dict[str, type] = {}


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


def _is_registered(value: Any) -> bool:
    return _REGISTRY.get(type(value).__name__) is type(value) and hasattr(value, "get_params")


def _is_pipeline(value: Any) -> bool:
    # Exact classes only: a subclass (imblearn's, say) would not come back as itself.
    return type(value) in _PIPELINE_CLASSES


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
        steps = [(s["name"], _decode(s["step"], arrays, directory)) for s in value["steps"]]
        return Pipeline(steps, **_decode(value["params"], arrays, directory))
    if "__vectorizer__" in value:
        parts = {k: _ArrayStore.get(ref, arrays) for k, ref in value["arrays"].items()}
        return vectorizer_from_state(value["__vectorizer__"], parts)
    return _ArrayStore.get(value, arrays)


def _instantiate(spec: dict, arrays: Any, directory: Path) -> Any:
    name = spec["__estimator__"]
    if name not in _REGISTRY:
        import skxmc

        if name in skxmc._LAZY:
            getattr(skxmc, name)  # imports the module, which registers the class
    if name not in _REGISTRY:
        raise ValueError(f"the model directory names an unknown estimator class {name!r}.")
    est = _REGISTRY[name](**_decode(spec["params"], arrays, directory))
    if "attributes" in spec:
        est._load_state(
            _decode(spec["attributes"], arrays, directory),
            _decode(spec["arrays"], arrays, directory),
        )
    if "files" in spec:
        # A fixed pattern: a model directory from elsewhere never points outside itself.
        if not isinstance(spec["files"], str) or not _PART_PATTERN.fullmatch(spec["files"]):
            raise ValueError(f"the model directory names an invalid part {spec['files']!r}.")
        est._load_extra_files(directory / spec["files"])
    return est


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
    state = json.loads((directory / LEGACY_VECTORIZER_FILE).read_text(encoding="utf-8"))
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in state.pop("arrays", {}).items()}
    return make_pipeline(vectorizer_from_state(state, arrays), load(directory / LEGACY_RANKER_DIR))


def _new_sibling_dir(directory: Path) -> Path:
    """A new empty directory next to ``directory``; unlike ``tempfile.mkdtemp`` (mode 0o700)
    it gets the user's umask, so a model saved for a server stays readable by it."""
    while True:
        tmp = directory.with_name(f".{directory.name}.{secrets.token_hex(6)}.tmp")
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def save(estimator: Any, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Save a fitted estimator or pipeline to ``directory`` without pickle.

    The directory gets ``skxmc-model.json`` and ``arrays.npz`` (plus safetensors files for
    torch weights), created with the user's umask. It is written next to its final place
    and moved in at the end, so an interrupted save never leaves a half-written model. An
    existing directory is only replaced when ``overwrite=True`` and when it holds an skxmc
    model: other folders are never deleted.

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

    Returns
    -------
    pathlib.Path
        The directory; reload with :func:`skxmc.load`.

    Raises
    ------
    TypeError
        For other estimators or pipeline steps (use pickle / joblib for those).
    ValueError
        When ``estimator`` is not fitted.
    FileExistsError
        When ``directory`` is a file, a non-empty folder without a model, or a model and
        ``overwrite=False``.

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
    from . import __version__

    directory = Path(directory)
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
    store = _ArrayStore()
    spec = _encode(estimator, "model", store)
    config = {"format_version": store.format_version, "skxmc_version": __version__, "model": spec}
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling_dir(directory)
    try:
        (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=1), encoding="utf-8")
        np.savez(tmp / ARRAYS_NAME, **store.arrays)
        if hasattr(estimator, "_save_extra_files"):
            estimator._save_extra_files(tmp)
        for part, est in store.parts:
            (tmp / part).mkdir(parents=True)
            est._save_extra_files(tmp / part)
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
    logger.info("saved %s to %s", type(estimator).__name__, directory)
    return directory


def load(directory: str | os.PathLike) -> Any:
    """Load an estimator or pipeline saved with :func:`save`; never unpickles anything.

    Only classes registered by skxmc and scikit-learn's text vectorisers are created, so
    opening a model directory from someone else runs no code from it. Pipelines come back as
    :class:`skxmc.pipeline.Pipeline`; a model directory of ``skxmc fit`` is one.

    Parameters
    ----------
    directory : str or path-like
        A directory written by :func:`save` (or by ``skxmc fit``).

    Returns
    -------
    estimator
        The fitted estimator or pipeline.

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
        if _is_legacy_cli_dir(directory):
            return _load_legacy_cli_dir(directory)
        raise FileNotFoundError(f"no skxmc model in {str(directory)!r} ({CONFIG_NAME} is missing).")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("format_version") not in _READABLE_VERSIONS:
        raise ValueError(
            f"{config_path} has format version {config.get('format_version')!r}; this skxmc "
            f"reads versions {', '.join(map(str, _READABLE_VERSIONS))}: upgrade skxmc."
        )
    with np.load(directory / ARRAYS_NAME, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    est = _decode(config["model"], arrays, directory)
    if "__estimator__" in config["model"] and hasattr(est, "_load_extra_files"):
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
