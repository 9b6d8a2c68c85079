"""scikit-learn text vectorisers as JSON (settings, vocabulary, idf): saving without pickle.

Used by :mod:`skxmc.io`: a vectoriser as a pipeline step, an estimator parameter
or a fitted attribute (e.g. MatchXML's TF-IDF).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["default_tfidf", "is_text_vectorizer", "vectorizer_from_state", "vectorizer_to_state"]

_CLASSES = ("TfidfVectorizer", "CountVectorizer")


def default_tfidf(**overrides: Any) -> Any:
    """skxmc's default TF-IDF for XMC text: unigrams + bigrams, sublinear tf, float32."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    params = {
        "sublinear_tf": True,
        "ngram_range": (1, 2),
        "max_features": 200_000,
        "dtype": np.float32,
    }
    params.update(overrides)
    return TfidfVectorizer(**params)


def is_text_vectorizer(value: Any) -> bool:
    """Whether ``value`` is a TfidfVectorizer / CountVectorizer that JSON can hold."""
    return type(value).__name__ in _CLASSES and type(value).__module__.startswith(
        "sklearn.feature_extraction"
    )


def _jsonable_params(vectorizer: Any) -> dict[str, Any]:
    params = {}
    for name, value in vectorizer.get_params(deep=False).items():
        if name == "dtype":
            value = np.dtype(value).name
        elif callable(value):
            raise TypeError(
                f"cannot save {type(vectorizer).__name__}({name}={value!r}) without pickle: "
                f"callables are code; use pickle / joblib for such a model."
            )
        elif isinstance(value, (set, frozenset)):
            value = sorted(value)
        elif isinstance(value, dict):
            value = {str(k): (v.item() if hasattr(v, "item") else v) for k, v in value.items()}
        params[name] = value
    return params


def vectorizer_to_state(vectorizer: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(json_part, arrays)`` of a (possibly fitted) TF-IDF / count vectoriser."""
    if not is_text_vectorizer(vectorizer):
        raise TypeError(f"cannot save a {type(vectorizer).__name__} without pickle.")
    state: dict[str, Any] = {
        "class": type(vectorizer).__name__,
        "params": _jsonable_params(vectorizer),
    }
    arrays: dict[str, np.ndarray] = {}
    if hasattr(vectorizer, "vocabulary_"):
        state["vocabulary"] = {str(t): int(i) for t, i in vectorizer.vocabulary_.items()}
        is_tfidf = type(vectorizer).__name__ == "TfidfVectorizer"
        idf = getattr(vectorizer, "idf_", None) if is_tfidf else None
        if idf is not None:
            arrays["idf"] = np.asarray(idf, dtype=np.float64)
    return state, arrays


def vectorizer_from_state(state: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """Inverse of :func:`vectorizer_to_state`."""
    from sklearn.feature_extraction import text

    if state.get("class") not in _CLASSES:
        raise ValueError(f"unknown vectoriser class {state.get('class')!r} in the model directory.")
    params = dict(state["params"])
    params["dtype"] = np.dtype(params.get("dtype", "float64")).type
    if params.get("ngram_range") is not None:
        params["ngram_range"] = tuple(params["ngram_range"])
    if isinstance(params.get("stop_words"), list):
        params["stop_words"] = list(params["stop_words"])
    vectorizer = getattr(text, state["class"])(**params)
    if "vocabulary" in state:
        vectorizer.vocabulary_ = dict(state["vocabulary"])
        if "idf" in arrays:
            vectorizer.idf_ = np.asarray(arrays["idf"], dtype=np.float64)
    return vectorizer
