"""Pipeline folders: scikit-learn / skxmc pipelines saved step by step, and the layout that
``skxmc fit`` wrote before it saved a pipeline (``ranker/`` + ``vectorizer.json``).

A :class:`~sklearn.pipeline.Pipeline` (or :class:`skxmc.pipeline.Pipeline`) is saved when
every step is an skxmc estimator, a ``TfidfVectorizer`` / ``CountVectorizer``, another such
pipeline, or ``"passthrough"``; it loads as :class:`skxmc.pipeline.Pipeline`, which adds
``predict_topk``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._vectorizers import is_text_vectorizer, vectorizer_from_state
from ._format import LEGACY_RANKER_DIR, LEGACY_VECTORIZER_FILE, read_json
from ._registry import is_pipeline, is_registered

__all__ = ["decode_pipeline", "encode_pipeline", "load_legacy_cli_dir"]

if TYPE_CHECKING:
    from ..pipeline import Pipeline


def encode_pipeline(pipe: Any, key: str, store: Any, encode: Callable) -> dict:
    """The JSON form of ``pipe``; ``encode(value, key, store)`` encodes its steps."""
    store.format_version = max(store.format_version, 2)
    params = pipe.get_params(deep=False)
    steps = params.pop("steps")
    if not isinstance(steps, (list, tuple)):
        raise TypeError(f"cannot save {key}: its steps must be a list of (name, estimator).")
    encoded = []
    for i, (name, step) in enumerate(steps):
        if step is None or (isinstance(step, str) and step == "passthrough"):
            encoded.append({"name": name, "step": step})
            continue
        if not (is_text_vectorizer(step) or is_pipeline(step) or is_registered(step)):
            raise TypeError(
                f"cannot save step {name!r} ({type(step).__name__}) of the pipeline without "
                f"pickle: skxmc.save takes pipelines of skxmc estimators, TfidfVectorizer / "
                f"CountVectorizer and 'passthrough'; use pickle / joblib for this one."
            )
        try:
            encoded.append({"name": name, "step": encode(step, f"{key}.steps.{i}", store)})
        except TypeError as exc:
            raise TypeError(f"cannot save step {name!r} of the pipeline: {exc}") from None
    return {
        "__pipeline__": f"{type(pipe).__module__}.{type(pipe).__qualname__}",
        "params": encode(params, f"{key}.params", store),
        "steps": encoded,
    }


def decode_pipeline(value: dict, decode: Callable[[Any], Any]) -> Pipeline:
    """The :class:`skxmc.pipeline.Pipeline` that :func:`encode_pipeline` saved."""
    from ..pipeline import Pipeline

    steps = [(s["name"], decode(s["step"])) for s in value["steps"]]
    return Pipeline(steps, **decode(value["params"]))


def load_legacy_cli_dir(directory: Path, load: Callable[..., Any], **options: Any) -> Pipeline:
    """``ranker/`` + ``vectorizer.json`` (what earlier ``skxmc fit`` wrote) as a pipeline;
    ``load(folder, **options)`` reads the ranker."""
    from ..pipeline import make_pipeline

    state = read_json(directory / LEGACY_VECTORIZER_FILE)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in state.pop("arrays", {}).items()}
    ranker = load(directory / LEGACY_RANKER_DIR, **options)
    return make_pipeline(vectorizer_from_state(state, arrays), ranker)
