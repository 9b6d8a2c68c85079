"""Hyperparameters that cannot work fail up front with a clear message (issue 21, the
"3-hyper" rows of the reliability review).

Size parameters whose tensors cannot fit raise :class:`InsufficientMemoryError` at the
start of ``fit`` (before the encoder loads, before any weight is allocated), naming the
parameter and the estimate in GiB; other impossible settings raise a plain error naming
the parameter.
"""

from __future__ import annotations

import pickle
import re
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import skxmc._memory as memory
from skxmc._augment import augment_texts
from skxmc._memory import InsufficientMemoryError, check_allocation, encoder_hidden_size
from skxmc.knnbert import KNNBertClassifier
from skxmc.label2vec import Label2VecTransformer
from skxmc.sharprecl import SharpReCLClassifier
from skxmc.snm import SNMClassifier
from skxmc.text import TrainingConfig

from ._helpers import topic_texts, with_training

torch.set_num_threads(1)

GIB = 2**30
GIB_PATTERN = re.compile(r"about [\d,.]+ GiB")


class EncoderLoaded(Exception):
    """Raised by the stand-in for load_encoder: the check came too late."""


@pytest.fixture
def machine_16gib(monkeypatch):
    """A machine with 16 GiB of RAM (12 GiB free), like the review's, so that the rows do
    not depend on the machine running the tests."""
    monkeypatch.setattr(memory, "_host_memory", lambda: (16 * GIB, 12 * GIB))


@pytest.fixture
def no_encoder_load(monkeypatch):
    """Make loading the encoder fail loudly: a memory check must come before it."""

    def load_encoder(*args, **kwargs):
        raise EncoderLoaded("the encoder was loaded before the memory check")

    monkeypatch.setattr("skxmc.text._classifier.load_encoder", load_encoder)


def texts_and_classes():
    return topic_texts((6, 4, 2))


def snm_data():
    X = sp.random(60, 30, density=0.3, random_state=0, format="csr", dtype=np.float32)
    Y = [[i % 10, (3 * i) % 10] for i in range(60)]
    return X, Y


TEXT = {"device": "cpu", "max_length": 16, "batch_size": 8, "max_epochs": 1}

SHARP, KNN, SNM = SharpReCLClassifier, KNNBertClassifier, SNMClassifier

# Estimator, kind of data, parameters; the message must name the first parameter.
MEMORY_CASES = [
    (SHARP, "text", {"n_synthetic_negative": 10**7}),
    (SHARP, "text", {"n_synthetic_positive": 10**7}),
    (SHARP, "text", {"projection_dim": 10**8}),
    (KNN, "text", {"queue_size": 10**10}),
    (KNN, "text", {"n_enqueue_per_anchor": 10**12}),
    (SNM, "sparse", {"hidden_size": 10**9}),
    (SNM, "dense", {"hidden_size": 10**9}),
    (SNM, "sparse", {"embedding_size": 10**9, "hidden_size": 8}),
]


def case_param(cls, kind, params, suffix=""):
    name, value = next(iter(params.items()))
    short = cls.__name__.removesuffix("Classifier").lower()
    case_id = f"3-hyper-{short}-{name}=1e{len(str(value)) - 1}-{kind}{suffix}"
    return pytest.param(cls, kind, params, name, id=case_id)


def _fit(cls, kind, params, encoder):
    if kind == "text":
        X, y = texts_and_classes()
        return cls(**with_training(encoder=encoder, **TEXT, **params)).fit(X, y)
    X, Y = snm_data()
    X = X.toarray() if kind == "dense" else X
    return SNMClassifier(**with_training(**params, device="cpu", max_epochs=1)).fit(X, Y)


def _assert_memory_message(exc: BaseException, parameter: str) -> None:
    assert isinstance(exc, MemoryError) and isinstance(exc, ValueError)
    message = str(exc)
    assert parameter in message, message
    assert GIB_PATTERN.search(message), message
    assert "16.0 GiB in all" in message and "12.0 GiB available" in message, message


@pytest.mark.parametrize(
    "cls, kind, params, parameter",
    [case_param(*case) for case in MEMORY_CASES],
)
def test_sizes_that_cannot_fit_fail_before_the_encoder_loads(
    cls, kind, params, parameter, tiny_bert_dir, machine_16gib, no_encoder_load
):
    start = time.perf_counter()
    with pytest.raises(InsufficientMemoryError) as info:
        _fit(cls, kind, params, str(tiny_bert_dir))
    assert time.perf_counter() - start < 5
    _assert_memory_message(info.value, parameter)
    assert info.value.n_bytes > info.value.limit_bytes == 16 * GIB


@pytest.mark.parametrize(
    "cls, kind, params, parameter",
    [case_param(*case, "-missing-encoder") for case in MEMORY_CASES if case[1] == "text"],
)
def test_memory_error_comes_before_a_missing_encoder(cls, kind, params, parameter, machine_16gib):
    # The encoder folder does not exist: the size is refused first, without the hidden size.
    with pytest.raises(InsufficientMemoryError) as info:
        _fit(cls, kind, params, "/nonexistent/model")
    _assert_memory_message(info.value, parameter)


@pytest.mark.parametrize(
    "cls, params",
    [
        pytest.param(SharpReCLClassifier, {}, id="3-hyper-sharprecl-defaults"),
        pytest.param(SharpReCLClassifier, {"batch_size": 10**9}, id="3-hyper-sharprecl-batch=1e9"),
        pytest.param(KNNBertClassifier, {}, id="3-hyper-knnbert-defaults"),
        pytest.param(KNNBertClassifier, {"queue_size": 10**6}, id="3-hyper-knnbert-queue=1e6"),
    ],
)
def test_normal_sizes_are_not_refused(cls, params, tiny_bert_dir, machine_16gib, no_encoder_load):
    # Passing the checks means reaching the encoder load (stubbed to stop there).
    X, y = texts_and_classes()
    params = {**TEXT, **params}
    with pytest.raises(EncoderLoaded):
        cls(**with_training(encoder=str(tiny_bert_dir), **params)).fit(X, y)


def test_snm_normal_sizes_are_not_refused(machine_16gib):
    X, Y = snm_data()
    clf = SNMClassifier(training=TrainingConfig(device="cpu", max_epochs=1)).fit(
        X, Y
    )  # hidden and embedding 512
    assert clf.predict_topk(X[:2], 2)[0].shape == (2, 2)


def test_memory_check_reads_this_machine():
    # No monkeypatching: sizes beyond any machine are refused with the real numbers.
    X, Y = snm_data()
    with pytest.raises(InsufficientMemoryError, match=r"hidden_size=10000000000000") as info:
        SNMClassifier(hidden_size=10**13, training=TrainingConfig(device="cpu")).fit(X, Y)
    assert GIB_PATTERN.search(str(info.value))
    with pytest.raises(InsufficientMemoryError, match="queue_size"):
        KNNBertClassifier(
            encoder="/nonexistent/model", queue_size=10**15, training=TrainingConfig(device="cpu")
        ).fit(*texts_and_classes())


def test_check_allocation_contract(monkeypatch):
    check_allocation(1, what="one byte", parameter="size=1")  # fits anywhere
    with pytest.raises(InsufficientMemoryError) as info:
        check_allocation(2**70, what="a table", parameter="size=2**68", hint="lower size")
    exc = info.value
    assert str(exc).startswith("a table would take about ")
    assert str(exc).endswith("lower size.")
    # Picklable with its attributes (joblib sends errors between processes).
    clone = pickle.loads(pickle.dumps(exc))
    assert str(clone) == str(exc) and clone.n_bytes == 2**70 and clone.parameter == "size=2**68"
    # Unknown memory (no sysconf, no /proc): nothing is refused.
    monkeypatch.setattr(memory, "_host_memory", lambda: (None, None))
    check_allocation(2**70, what="a table", parameter="size=2**68")


def test_encoder_hidden_size_from_config(tiny_bert_dir, tmp_path):
    assert encoder_hidden_size(tiny_bert_dir) == 32
    assert encoder_hidden_size(tmp_path / "missing") is None
    (tmp_path / "config.json").write_text("{not json")
    assert encoder_hidden_size(tmp_path) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_memory_is_checked_on_the_gpu():
    total, free, where = memory.device_memory(torch.device("cuda"))
    assert total > 0 and 0 <= free <= total and "cuda" in where
    check_allocation(total // 2, what="half the GPU", parameter="x=1", device="cuda")
    with pytest.raises(InsufficientMemoryError, match="cuda"):
        check_allocation(2 * total, what="twice the GPU", parameter="x=1", device="cuda")


# Other impossible settings --------------------------------------------------------------


@pytest.mark.parametrize(
    "returned, error, match",
    [
        pytest.param(3, TypeError, r"returned int", id="3-hyper-augmentation-returns-int"),
        pytest.param("one text", TypeError, r"returned str", id="3-hyper-augmentation-returns-str"),
        pytest.param(None, TypeError, r"returned NoneType", id="3-hyper-augmentation-returns-none"),
        pytest.param(["a"], ValueError, r"returned 1 items", id="3-hyper-augmentation-too-short"),
        pytest.param(["a", 2], TypeError, r"item 1 is int", id="3-hyper-augmentation-int-item"),
    ],
)
def test_augmentation_callable_must_return_one_text_per_input(returned, error, match):
    with pytest.raises(error, match=match) as info:
        augment_texts(["one two", "three four"], lambda texts: returned)
    assert "augmentation=" in str(info.value) and "a list of 2 strings" in str(info.value)


def test_augmentation_callable_accepts_sequences_and_pairs():
    def upper(texts):
        return (t.upper() for t in texts)  # any iterable

    assert augment_texts(["a b", "c"], upper) == ["A B", "C"]
    pairs = [("a", "b"), ("c", "d")]
    assert augment_texts(pairs, lambda t: [list(p) for p in t]) == pairs
    with pytest.raises(TypeError, match=r"item 0 is str .* a \(str, str\) pair"):
        augment_texts(pairs, lambda t: ["x", "y"])


def test_sharprecl_augmentation_returning_int_names_the_parameter(tiny_bert_dir):
    X, y = texts_and_classes()
    clf = SharpReCLClassifier(
        **with_training(encoder=str(tiny_bert_dir), augmentation=lambda texts: 3, n_views=2, **TEXT)
    )
    with pytest.raises(TypeError, match=r"augmentation=.* must return a list of 12 strings"):
        clf.fit(X, y)


@pytest.mark.parametrize("augmentation", ["synonym", "delete_swap", str.upper])
def test_sharprecl_augmentation_with_one_view_is_refused(tiny_bert_dir, augmentation):
    # one view (the default) never makes a second one: a chosen augmentation would be
    # silently unused
    X, y = texts_and_classes()
    clf = SharpReCLClassifier(
        **with_training(encoder=str(tiny_bert_dir), augmentation=augmentation, **TEXT)
    )
    with pytest.raises(ValueError, match=r"augmentation=.*n_views=1.*n_views=2"):
        clf.fit(X, y)
    assert not hasattr(clf, "classes_")  # refused before anything was fitted


def label_matrix(n_labels=40):
    rng = np.random.default_rng(0)
    Y = (rng.random((100, n_labels)) < 0.1).astype(np.int64)
    Y[np.arange(100), rng.integers(n_labels, size=100)] = 1  # every row has a label
    return sp.csr_matrix(Y)


def test_label2vec_negative_far_above_the_labels_fails_fast():
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"negative=1000000 .* 40 labels .* negative <= 40"):
        Label2VecTransformer(negative=10**6).fit(label_matrix())
    assert time.perf_counter() - start < 5  # was over 90 s of training


@pytest.mark.parametrize(
    "n_labels, negative",
    [
        pytest.param(5, 20, id="3-hyper-label2vec-default-negative-few-labels"),
        pytest.param(40, 40, id="3-hyper-label2vec-negative=n_labels"),
    ],
)
def test_label2vec_reasonable_negative_is_accepted(n_labels, negative):
    l2v = Label2VecTransformer(negative=negative, epochs=1, vector_size=4).fit(
        label_matrix(n_labels)
    )
    assert l2v.embeddings_.shape == (n_labels, 4)


def test_snm_diverged_learning_rate_is_reported():  # 3-hyper-snm-learning_rate=1e9
    X, Y = snm_data()
    clf = SNMClassifier(
        hidden_size=16,
        embedding_size=8,
        training=TrainingConfig(device="cpu", max_epochs=3, learning_rate=1e9),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            clf.fit(X, Y)
        except (FloatingPointError, ValueError) as exc:
            assert "learning_rate" in str(exc)
            return
    assert any("learning_rate" in str(w.message) for w in caught)


@pytest.mark.parametrize(
    "y, match",
    [
        pytest.param([0.5, 1.5, 2.25, 0.5], "continuous", id="2-bady-sharprecl-continuous-y"),
        pytest.param(
            np.array([1, "a", 1, "a"], dtype=object),
            "Mix of label input types",
            id="2-bady-mixed-y",
        ),
    ],
)
def test_text_classifiers_refuse_unusable_targets(y, match):
    from skxmc.text._classifier import check_class_labels

    with pytest.raises(ValueError, match=match):
        check_class_labels(y, n_samples=4)


@pytest.mark.parametrize(
    "y",
    [["bb", "a" * 500, "bb"], ("bb", "a" * 500, "bb"), np.array(["bb", "a" * 500, "bb"])],
    ids=["list", "tuple", "U-array"],
)
def test_text_classifiers_keep_str_classes_as_object_arrays(y):
    # As skxmc.labels: str classes_ in an object array, not '<U500' (4 bytes x 500 a class).
    from skxmc.text._classifier import check_class_labels

    classes, y_encoded = check_class_labels(y, n_samples=3)
    assert classes.dtype == object and classes.tolist() == ["a" * 500, "bb"]
    assert y_encoded.tolist() == [1, 0, 1]
