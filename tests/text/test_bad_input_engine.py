"""Issue 48, the neural estimators' side: mixed label types (item 3), a lone surrogate in
a text (item 16) and ``n_synthetic_negative=10**7`` under an address-space limit (item
16). Each test fails on skxmc 26aef59."""

from __future__ import annotations

import resource

import numpy as np
import pytest

from skxmc.exceptions import InsufficientMemoryError
from skxmc.knnbert import KNNBertClassifier
from skxmc.sharprecl import SharpReCLClassifier
from skxmc.text import TrainingConfig

from .._helpers import topic_texts

GIB = 2**30
FAST = TrainingConfig(device="cpu", batch_size=8, max_epochs=1)


class EncoderLoaded(Exception):
    """The stand-in for load_encoder: the check came too late."""


@pytest.fixture
def no_encoder_load(monkeypatch):
    def load_encoder(*args, **kwargs):
        raise EncoderLoaded("the encoder was loaded before the check")

    monkeypatch.setattr("skxmc.text._classifier.load_encoder", load_encoder)


@pytest.mark.parametrize("cls", [SharpReCLClassifier, KNNBertClassifier])
@pytest.mark.parametrize("container", [list, np.array, "series"])
def test_mixed_int_and_str_labels_are_refused_as_sklearn_does(cls, container, no_encoder_load):
    X, _ = topic_texts((3, 3))
    y = [1, "a", 1, "a", 2, "b"]
    if container == "series":
        pd = pytest.importorskip("pandas")
        y = pd.Series(y)
    elif container is np.array:
        y = np.array(y, dtype=object)
    with pytest.raises(ValueError, match="Mix of label input types"):
        cls(encoder="unused", training=FAST).fit(X, y)


def test_one_label_type_still_fits_to_the_encoder(no_encoder_load):
    X, _ = topic_texts((3, 3))
    with pytest.raises(EncoderLoaded):
        SharpReCLClassifier(encoder="unused", training=FAST).fit(X, [1, 2, 1, 2, 1, 2])


@pytest.mark.parametrize("pairs", [False, True])
def test_a_lone_surrogate_names_the_row(pairs, no_encoder_load):
    X = ["fine text", "also fine", "bad \ud800 text", "fine"]
    if pairs:
        X = [("q", t) for t in X]
    with pytest.raises(ValueError, match=r"X\[2\] holds a lone surrogate '\\ud800'"):
        SharpReCLClassifier(encoder="unused", training=FAST).fit(X, [0, 1, 0, 1])


def test_a_lone_surrogate_at_predict_names_the_row():
    from skxmc.text._stream import check_texts

    with pytest.raises(ValueError, match=r"X\[1\] holds a lone surrogate .* at character 4"):
        check_texts(["ok", "bad \udfff"])


def test_n_synthetic_negative_under_an_address_space_limit_fails_fast(monkeypatch, no_encoder_load):
    # The review's machine: 16 GiB of RAM, but the process runs under ulimit -v 8 GiB, where
    # 10**7 synthetic negatives failed with a raw allocator error after the encoder loaded.
    import skxmc._memory as memory

    monkeypatch.setattr(memory, "_host_memory", lambda: (16 * GIB, 12 * GIB))
    real = resource.getrlimit

    def getrlimit(which):
        return (8 * GIB, 8 * GIB) if which == resource.RLIMIT_AS else real(which)

    monkeypatch.setattr(resource, "getrlimit", getrlimit)
    X, y = topic_texts((6, 4, 2))
    clf = SharpReCLClassifier(
        encoder="unused", projection_dim=16, n_synthetic_negative=10**7, training=FAST
    )
    with pytest.raises(InsufficientMemoryError, match=r"n_synthetic_negative=10000000") as info:
        clf.fit(X, y)
    assert "address-space limit (ulimit -v)" in str(info.value)
    assert info.value.limit_bytes == 8 * GIB
