"""scikit-learn text vectorisers saved as JSON + arrays (no pickle) and loaded back."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from skxmc._vectorizers import default_tfidf, vectorizer_from_state, vectorizer_to_state

TEXTS = ["the cat sat on the mat", "dogs and cats", "stock market prices fell", "a cat"]


@pytest.mark.parametrize(
    "vectorizer",
    [
        default_tfidf(min_df=1),
        TfidfVectorizer(
            stop_words=["the", "a"],
            ngram_range=(1, 2),
            sublinear_tf=True,
            dtype=np.float32,
            norm="l1",
        ),
        CountVectorizer(binary=True, max_features=5),
    ],
    ids=["default", "tfidf-options", "count"],
)
def test_fitted_vectorizer_round_trips(vectorizer):
    vectorizer.fit(TEXTS)
    state, arrays = vectorizer_to_state(vectorizer)
    import json

    restored = vectorizer_from_state(json.loads(json.dumps(state)), arrays)
    assert type(restored) is type(vectorizer)
    assert restored.get_params() == vectorizer.get_params()
    new = ["a cat and the market", "unknown words only"]
    np.testing.assert_array_equal(
        restored.transform(new).toarray(), vectorizer.transform(new).toarray()
    )


def test_unfitted_vectorizer_round_trips_its_settings():
    state, arrays = vectorizer_to_state(default_tfidf())
    assert arrays == {} and "vocabulary" not in state
    assert vectorizer_from_state(state, arrays).get_params() == default_tfidf().get_params()


def test_callables_and_other_classes_are_refused():
    with pytest.raises(TypeError, match="callables are code"):
        vectorizer_to_state(TfidfVectorizer(tokenizer=str.split))
    with pytest.raises(TypeError, match="without pickle"):
        vectorizer_to_state(object())
    with pytest.raises(ValueError, match="unknown vectoriser class"):
        vectorizer_from_state({"class": "HashingVectorizer", "params": {}}, {})
