"""Exact and approximate top-k inner-product search (skxmc._search), and its use by
KNNBertClassifier and SNMClassifier."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import skxmc
import skxmc._search as search_module
from skxmc._search import InnerProductIndex, resolve_search


def _clustered(n, dim=16, n_centres=20, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_centres, dim))
    x = centres[rng.integers(n_centres, size=n)] + 0.3 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _brute_force(vectors, queries, k):
    scores = queries @ vectors.T
    rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, rows, axis=1), rows


def test_exact_matches_brute_force_in_any_block_size(monkeypatch):
    vectors, queries = _clustered(300), _clustered(37, seed=1)
    expected_scores, expected_rows = _brute_force(vectors, queries, 5)
    for block in (1 << 26, 300 * 4):  # one block; 4 queries per block
        monkeypatch.setattr(search_module, "_SCORE_BLOCK", block)
        scores, rows = InnerProductIndex(vectors, method="exact").search(queries, 5)
        np.testing.assert_array_equal(rows, expected_rows)
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)
        assert scores.dtype == np.float32 and rows.dtype == np.int64


def test_k_is_clipped_to_the_number_of_vectors_and_shapes_are_checked():
    index = InnerProductIndex(np.eye(3, dtype=np.float32), method="exact")
    _, rows = index.search(np.ones((2, 3), np.float32), 10)
    assert rows.shape == (2, 3) and sorted(rows[0]) == [0, 1, 2]
    with pytest.raises(ValueError, match=r"queries must have shape \(n, 3\)"):
        index.search(np.ones((2, 4), np.float32), 1)
    with pytest.raises(ValueError, match="vectors must be 2-D"):
        InnerProductIndex(np.ones(3, np.float32))


def test_resolve_search(monkeypatch):
    assert resolve_search("auto", 10) == "exact"
    assert resolve_search("exact", 10**9) == "exact"
    with pytest.raises(ValueError, match="search must be one of"):
        resolve_search("fast", 10)
    monkeypatch.setattr(search_module, "_faiss_available", lambda: False)
    assert resolve_search("auto", 10**9) == "exact"  # no faiss: exact at any size
    monkeypatch.setattr(search_module, "_faiss_available", lambda: True)
    assert resolve_search("auto", search_module.APPROXIMATE_MIN_VECTORS) == "approximate"


def test_approximate_finds_the_exact_neighbours_on_clustered_data():
    pytest.importorskip("faiss")
    vectors, queries = _clustered(20000), _clustered(200, seed=1)
    index = InnerProductIndex(vectors, method="approximate")
    assert index.method == "approximate" and 1 < index.n_probe < index.n_cells
    scores, rows = index.search(queries, 10)
    _, exact = _brute_force(vectors, queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows, exact)])
    assert recall > 0.9
    np.testing.assert_allclose(
        scores, np.take_along_axis(queries @ vectors.T, rows, 1), rtol=1e-5, atol=1e-5
    )
    # rebuilt from the same vectors: the same index, the same answers (loading relies on it)
    again = InnerProductIndex(vectors, method="approximate").search(queries, 10)
    np.testing.assert_array_equal(again[1], rows)


def test_approximate_never_returns_missing_rows():
    pytest.importorskip("faiss")
    vectors = _clustered(400)
    # one probed cell of ~40 vectors cannot give 60 hits: the search widens to all cells
    index = InnerProductIndex(vectors, method="approximate", n_cells=10, n_probe=1)
    _, rows = index.search(_clustered(5, seed=2), 60)
    assert (rows >= 0).all() and all(len(set(r)) == 60 for r in rows)
    assert index.n_probe == 1  # restored after the wider search
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(index)


def test_knnbert_approximate_search_survives_pickle_and_load(tiny_bert_dir, tmp_path):
    pytest.importorskip("faiss")
    from ._helpers import knnbert_toy_data as toy_data
    from ._helpers import make_knnbert as make_clf

    X, y = toy_data(counts=(30, 30, 30))
    clf = make_clf(
        tiny_bert_dir, search="approximate", knn_memory="train", max_epochs=1, queue_size=90
    ).fit(X, y)
    assert clf._memory_index.method == "approximate"
    exact = clf.set_params(search="exact").kneighbors(X)
    clf.set_params(search="approximate")
    approx = clf.kneighbors(X)
    # 90 memory entries make 2 cells, both probed: the approximate answer is exact
    np.testing.assert_array_equal(approx[1], exact[1])
    expected = clf.predict_proba(X)
    again = pickle.loads(pickle.dumps(clf))
    assert again._memory_index.method == "approximate"
    np.testing.assert_allclose(again.predict_proba(X), expected, rtol=1e-5, atol=1e-6)
    clf.save(tmp_path / "model")
    loaded = skxmc.load(tmp_path / "model")
    assert loaded._memory_index.method == "approximate"
    np.testing.assert_allclose(loaded.predict_proba(X), expected, rtol=1e-5, atol=1e-6)


def test_snm_approximate_search_matches_exact_and_survives_pickle_and_load(tmp_path):
    pytest.importorskip("faiss")

    from .test_snm import FAST, _snm, _toy

    X, labels = _toy()
    clf = _snm(top_k=3, search="approximate", **FAST).fit(X, labels)
    assert clf._label_index.method == "approximate"  # 6 labels: 1 cell, all probed
    approx = clf.predict_topk(X)
    exact = clf.set_params(search="exact").predict_topk(X)
    np.testing.assert_array_equal(approx[0], exact[0])
    clf.set_params(search="approximate")
    again = pickle.loads(pickle.dumps(clf))
    assert again._label_index.method == "approximate"
    np.testing.assert_array_equal(again.predict_topk(X)[0], approx[0])
    clf.save(tmp_path / "model")
    loaded = skxmc.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_topk(X)[0], approx[0])
