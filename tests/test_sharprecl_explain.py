"""SharpReCLClassifier.explain: the nearest training texts of each predicted class."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

import skxmc
from skxmc.cli import main
from skxmc.sharprecl import Neighbor, NeighborExplanation

from ._helpers import make_sharprecl as make_clf
from ._helpers import sharprecl_toy_data as toy_data

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir):
    X, y = toy_data()
    # one view and one epoch: explain reads the fitted model, not how well it learned
    return make_clf(tiny_bert_dir, n_views=1, max_epochs=1).fit(X, y), X, y


def _naive_neighbors(clf, X, y, text, label, n):
    """The ``n`` training texts of class ``label`` nearest to ``text``, by the cosine of
    ``transform``'s embeddings, computed from scratch."""
    train = clf.transform(X)
    q = clf.transform([text])[0]
    cos = train @ q / (np.linalg.norm(train, axis=1) * np.linalg.norm(q))
    rows = [r for r in range(len(X)) if y[r] == label]
    rows.sort(key=lambda r: (-cos[r], r))
    return rows[:n], cos


def test_explain_scores_and_nearest_training_texts(fitted):
    clf, X, y = fitted
    queries = [*X[:3], "a text the model never saw"]
    proba, logits = clf.predict_proba(queries), clf.decision_function(queries)
    explained = clf.explain(queries, k=2, n_neighbors=3)
    assert len(explained) == len(queries)
    for i, row in enumerate(explained):
        order = np.argsort(-proba[i], kind="stable")[:2]
        assert [e.label for e in row] == list(clf.classes_[order])
        for e in row:
            assert isinstance(e, NeighborExplanation)
            c = list(clf.classes_).index(e.label)
            assert e.score == pytest.approx(proba[i, c], rel=1e-5, abs=1e-7)
            assert e.logit == pytest.approx(logits[i, c], rel=1e-5, abs=1e-5)
            expected, cos = _naive_neighbors(clf, X, y, queries[i], e.label, 3)
            assert [n.training_row for n in e.neighbors] == expected
            assert [n.similarity for n in e.neighbors] == pytest.approx(
                cos[expected].tolist(), abs=1e-5
            )
            assert all(isinstance(n, Neighbor) and n.weight == 1.0 for n in e.neighbors)
            assert (
                json.loads(json.dumps(e.to_dict()))["neighbors"][0]["training_row"] == (expected[0])
            )


def test_a_training_text_is_its_own_nearest_neighbor(fitted):
    clf, X, y = fitted
    for i in (0, 13, 19):  # one text of each class
        row = clf.explain([X[i]], k=len(clf.classes_), n_neighbors=1)[0]
        own = next(e for e in row if e.label == y[i])
        assert own.neighbors[0].training_row == i
        assert own.neighbors[0].similarity == pytest.approx(1.0, abs=1e-5)


def test_k_and_n_neighbors(fitted):
    clf, X, y = fitted
    assert len(clf.explain(X[:1], k=50)[0]) == len(clf.classes_)
    smallest = min(np.bincount(np.unique(y, return_inverse=True)[1]))
    row = clf.explain(X[:1], k=3, n_neighbors=100)[0]
    assert sorted(len(e.neighbors) for e in row)[0] == smallest  # every text of the class
    assert clf.explain([], k=2) == []
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="k must be a positive int"):
            clf.explain(X[:1], k=bad)
        with pytest.raises(ValueError, match="n_neighbors must be a positive int"):
            clf.explain(X[:1], n_neighbors=bad)


def test_rows_are_positions_in_fit_X_and_weights_are_kept(tiny_bert_dir):
    X, y = toy_data()
    weights = np.ones(len(X))
    weights[0] = 0.0  # dropped before training: positions must still be those of X
    weights[1] = 3.0
    # two views: the augmented copies train, but only the original texts are kept
    clf = make_clf(tiny_bert_dir, n_views=2, max_epochs=1).fit(X, y, sample_weight=weights)
    assert 0 not in clf.train_indices_.tolist()
    np.testing.assert_array_equal(clf.train_indices_, np.arange(1, len(X)))
    emb = clf.transform(X[1:])
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    np.testing.assert_allclose(clf.train_embeddings_, emb, atol=1e-5)
    row = next(e for e in clf.explain([X[1]], k=3, n_neighbors=1)[0] if e.label == y[1])
    assert row.neighbors[0].training_row == 1
    assert row.neighbors[0].weight == pytest.approx(clf.train_weights_[0])
    assert clf.train_weights_[0] > clf.train_weights_[1]


def test_save_load_keeps_explanations_and_old_models_say_how(fitted, tmp_path, capsys):
    clf, X, _ = fitted
    assert clf.train_embeddings_.shape == (len(X), clf.module_.hidden_size)
    assert clf.train_embeddings_.dtype == np.float32
    clf.save(tmp_path / "model")
    loaded = skxmc.load(tmp_path / "model")
    assert loaded.explain(X[:2], k=2) == clf.explain(X[:2], k=2)

    # a model saved before explanations existed: no training embeddings
    old = tmp_path / "old"
    lean = copy.copy(clf)
    for name in ("train_embeddings_", "train_targets_", "train_indices_", "train_weights_"):
        lean.__dict__.pop(name, None)
    lean.save(old)
    restored = skxmc.load(old)
    np.testing.assert_allclose(restored.predict_proba(X[:2]), lean.predict_proba(X[:2]), atol=1e-6)
    with pytest.raises(AttributeError, match="saved by a skxmc from before explanations"):
        restored.explain(X[:1])
    # skxmc explain: the same advice as an error message, not a traceback
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"text": X[0]}) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["explain", "--model-dir", str(old), "--input", str(texts)]) == 1
    err = capsys.readouterr().err
    assert "skxmc explain: error:" in err and "Fit it again" in err


def test_onnx_backend_explains_as_torch(fitted, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    clf, X, _ = fitted
    want = clf.explain(X[:3], k=2, n_neighbors=2)
    path = clf.export_onnx(tmp_path / "model.onnx")
    clf.set_inference_backend("onnx", onnx_path=path)
    try:
        got = clf.explain(X[:3], k=2, n_neighbors=2)
    finally:
        clf.set_inference_backend("torch")
    for row_want, row_got in zip(want, got):
        assert [e.label for e in row_got] == [e.label for e in row_want]
        for a, b in zip(row_got, row_want):
            assert a.score == pytest.approx(b.score, abs=1e-5)
            assert [n.training_row for n in a.neighbors] == [n.training_row for n in b.neighbors]
