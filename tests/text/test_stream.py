"""Streams of texts (generators, one-shot iterators, Hugging Face datasets) in the neural
estimators: read once, tokenised chunk by chunk, the same model as from a list."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skxmc.text import _stream
from skxmc.text._stream import (
    is_hf_dataset,
    is_text_stream,
    iter_text_chunks,
    materialize_texts,
)
from skxmc.text._tokenize import TokenizedTexts, tokenize

from .._helpers import FakeDataset, OneShot, make_knnbert, make_sharprecl, sharprecl_toy_data

torch.set_num_threads(1)


def test_what_is_a_stream():
    assert is_text_stream(x for x in ["a"])
    assert is_text_stream(iter(["a"]))
    assert is_text_stream(OneShot(["a"]))
    assert is_text_stream(FakeDataset({"text": ["a"]}))
    for in_memory in (["a"], ("a",), np.array(["a"]), "a", None):
        assert not is_text_stream(in_memory)
    assert is_hf_dataset(FakeDataset({"text": ["a"]})) and not is_hf_dataset(["a"])


def test_chunks_check_rows_by_their_position_in_the_stream():
    texts = [f"text {i}" for i in range(10)]
    chunks = list(iter_text_chunks(iter(texts), size=4))
    assert [len(c) for c, _ in chunks] == [4, 4, 2]
    assert [t for c, _ in chunks for t in c] == texts
    bad = [*texts[:6], None, *texts[7:]]
    with pytest.raises(TypeError, match=r"X\[6\] is a missing value"):
        list(iter_text_chunks(iter(bad), size=4))
    mixed = ["a", "b", ("c", "d")]
    with pytest.raises(TypeError, match=r"X\[2:3\] holds text pairs"):
        list(iter_text_chunks(iter(mixed), size=2))


def test_dataset_text_column():
    ds = FakeDataset({"label": [0, 1], "text": ["a b", "c"]})
    assert materialize_texts(ds) == ["a b", "c"]
    assert materialize_texts(FakeDataset({"body": ["x"]})) == ["x"]
    with pytest.raises(ValueError, match="columns 'a', 'b'.*'text'"):
        materialize_texts(FakeDataset({"a": ["x"], "b": ["y"]}))


def test_tokenize_a_stream_equals_the_list(tiny_bert_loaded, monkeypatch):
    _, tokenizer = tiny_bert_loaded
    texts = [f"the cat number {i} sat on the mat " * (i % 4) for i in range(23)]
    monkeypatch.setattr(_stream, "CHUNK", 5)
    monkeypatch.setattr("skxmc.text._tokenize._CHUNK", 5)
    from_list = tokenize(tokenizer, texts)
    from_stream = tokenize(tokenizer, (t for t in texts))
    np.testing.assert_array_equal(from_list.ids, from_stream.ids)
    np.testing.assert_array_equal(from_list.offsets, from_stream.offsets)
    pairs = [(t, "a dog") for t in texts]
    a, b = tokenize(tokenizer, pairs), tokenize(tokenizer, iter(pairs))
    np.testing.assert_array_equal(a.type_ids, b.type_ids)
    assert len(tokenize(tokenizer, iter([]))) == 0


def test_head_shares_memory_and_subset_in_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 6, 50)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tok = TokenizedTexts(rng.integers(0, 99, offsets[-1]).astype(np.int32), offsets)
    head = tok.head(20)
    assert len(head) == 20 and np.shares_memory(head.ids, tok.ids)
    np.testing.assert_array_equal(head.ids, tok.subset(np.arange(20)).ids)
    rows = rng.permutation(50)[:30]
    expected = np.concatenate([tok.ids[offsets[i] : offsets[i + 1]] for i in rows])
    monkeypatch.setattr("skxmc.text._tokenize._SUBSET_BLOCK", 7)
    np.testing.assert_array_equal(tok.subset(rows).ids, expected)
    both = TokenizedTexts.concatenate([head, tok.subset(rows)])
    assert len(both) == 50
    np.testing.assert_array_equal(both.ids, np.concatenate([head.ids, expected]))


def _fitted_pair(make, tiny_bert_dir, X, y, **params):
    a = make(tiny_bert_dir, max_epochs=1, **params).fit(X, y)
    b = make(tiny_bert_dir, max_epochs=1, **params).fit((t for t in X), y)
    return a, b


@pytest.mark.parametrize("n_views", [1, 2])
def test_sharprecl_fits_a_generator_as_the_list(tiny_bert_dir, monkeypatch, n_views):
    # Chunks smaller than the data: the augmented view is drawn chunk by chunk, from the
    # generator a list fit uses, so the model is the same.
    monkeypatch.setattr(_stream, "CHUNK", 7)
    X, y = sharprecl_toy_data()
    a, b = _fitted_pair(make_sharprecl, tiny_bert_dir, X, y, n_views=n_views)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-5)
    np.testing.assert_allclose(a.train_embeddings_, b.train_embeddings_, atol=1e-5)
    np.testing.assert_array_equal(a.train_targets_, b.train_targets_)
    # predict over a stream, chunk by chunk, gives the rows of the list
    np.testing.assert_allclose(a.decision_function(iter(X)), a.decision_function(X), atol=1e-6)
    assert list(a.predict(FakeDataset({"text": X}))) == list(a.predict(X))


def test_sharprecl_stream_with_validation_weights_and_views(tiny_bert_dir):
    X, y = sharprecl_toy_data()
    w = np.ones(len(X))
    w[[0, 5]] = 0
    clf = make_sharprecl(
        tiny_bert_dir, max_epochs=1, validation_fraction=0.2, n_iter_no_change=2
    ).fit(iter(X), y, sample_weight=w)
    assert len(clf.train_embeddings_) == len(clf.train_indices_)
    assert not set(clf.train_indices_) & {0, 5}
    # a pre-computed second view, itself a stream
    views = [t.upper() for t in X]
    make_sharprecl(tiny_bert_dir, max_epochs=1).fit(iter(X), y, X_augmented=iter(views))
    with pytest.raises(ValueError, match="X_augmented must hold one view"):
        make_sharprecl(tiny_bert_dir, max_epochs=1).fit(iter(X), y, X_augmented=iter(views[:-1]))


def test_stream_reads_once_and_errors_name_the_argument(tiny_bert_dir):
    X, y = sharprecl_toy_data()
    clf = make_sharprecl(tiny_bert_dir, max_epochs=1)
    clf.fit(OneShot(X), list(y))  # read once, also with sample_weight
    make_sharprecl(tiny_bert_dir, max_epochs=1).fit(OneShot(X), y, sample_weight=np.ones(len(X)))
    clf.fit_transform(OneShot(X), y)  # needed twice: read once into a list
    with pytest.raises(ValueError, match="X and y have different lengths"):
        make_sharprecl(tiny_bert_dir, max_epochs=1).fit(iter(X), y[:-1])
    with pytest.raises(ValueError, match="X is empty"):
        make_sharprecl(tiny_bert_dir, max_epochs=1).fit(iter([]), [])
    with pytest.raises(ValueError, match="trained on single texts"):
        clf.predict(iter([("a", "b")]))


def test_knnbert_fits_a_generator_as_the_list(tiny_bert_dir):
    X, y = sharprecl_toy_data((8, 6, 4))
    a, b = _fitted_pair(make_knnbert, tiny_bert_dir, X, y)
    np.testing.assert_allclose(a.memory_features_, b.memory_features_, atol=1e-5)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(iter(X)), atol=1e-5)


def test_real_hugging_face_dataset(tiny_bert_dir):
    datasets = pytest.importorskip("datasets")
    X, y = sharprecl_toy_data()
    ds = datasets.Dataset.from_dict({"text": X, "label": list(y)})
    clf = make_sharprecl(tiny_bert_dir, max_epochs=1).fit(ds, ds["label"])
    assert list(clf.predict(ds.to_iterable_dataset())) == list(clf.predict(X))
