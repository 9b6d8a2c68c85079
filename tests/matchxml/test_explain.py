"""MatchXMLClassifier.explain: the ranker's path and features, split over feature blocks."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import skxmc
from skxmc.matchxml import MatchXMLExplanation

from .test_classifier import HashingSentenceEncoder, make_clf, multilabel_texts


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir):
    X, Y = multilabel_texts(40)
    encoder = HashingSentenceEncoder(dim=8)
    # all three blocks: TF-IDF, static sentence embeddings, fine-tuned embeddings
    clf = make_clf(tiny_bert_dir, max_epochs=1, sentence_encoder=encoder, fine_tuned_weight=0.5)
    return clf.fit(X, Y), X, encoder


def test_labels_scores_and_paths_are_the_rankers(fitted):
    clf, X, _ = fitted
    texts = X[:4]
    labels, scores = clf.predict_topk(texts, k=3)
    explained = clf.explain(texts, k=3, n_features=3)
    features = clf.transform(texts)
    ranker_view = clf.ranker_.explain(features, 3, n_features=3)
    for i, row in enumerate(explained):
        assert [e.label for e in row] == labels[i].tolist()
        assert [e.score for e in row] == pytest.approx(scores[i].tolist(), rel=1e-6)
        for e, r in zip(row, ranker_view[i]):
            assert isinstance(e, MatchXMLExplanation)
            assert e.path == r.path and e.bias_contribution == r.bias_contribution
            assert e.path[-1].node == list(clf.classes_).index(e.label)
            assert e.path[-1].path_score == pytest.approx(e.score, rel=1e-6)


def test_blocks_split_the_label_score(fitted):
    clf, X, encoder = fitted
    n_tfidf = len(clf.vectorizer_.vocabulary_)
    n_fine = clf.matcher_.module_.hidden_size
    bounds = {
        "tfidf": (0, n_tfidf),
        "sentence": (n_tfidf, n_tfidf + encoder.dim),
        "fine_tuned": (n_tfidf + encoder.dim, n_tfidf + encoder.dim + n_fine),
    }
    assert clf.n_features_ranker_ == n_tfidf + encoder.dim + n_fine
    W = clf.ranker_.weights_[-1].toarray()
    words = clf.vectorizer_.get_feature_names_out()
    for i, row in enumerate(clf.explain(X[:3], k=2, n_features=4)):
        x = clf.transform([X[i]]).toarray()[0]
        for e in row:
            w = W[:, e.path[-1].node]
            expected = {name: float(x[a:b] @ w[a:b]) for name, (a, b) in bounds.items()}
            assert list(e.blocks) == list(bounds)
            for name in bounds:
                assert e.blocks[name] == pytest.approx(expected[name], abs=1e-6)
            total = sum(e.blocks.values()) + e.bias_contribution
            assert total == pytest.approx(e.path[-1].score, abs=1e-5)
            # the top features by |weight x value|, named by term or block dimension
            contrib = x * w[: len(x)]
            top = np.argsort(-np.abs(contrib), kind="stable")[:4]
            assert [f.feature for f in e.features] == top.tolist()
            for f in e.features:
                if f.feature < n_tfidf:
                    assert f.name == words[f.feature]
                elif f.feature < n_tfidf + encoder.dim:
                    assert f.name == f"sentence[{f.feature - n_tfidf}]"
                else:
                    assert f.name == f"fine_tuned[{f.feature - n_tfidf - encoder.dim}]"
            out = json.loads(json.dumps(e.to_dict()))
            assert out["label"] == e.label and out["blocks"] == pytest.approx(e.blocks)
            assert "blocks: tfidf" in str(e)


def test_chosen_labels_k_and_bad_input(fitted):
    clf, X, _ = fitted
    row = clf.explain(X[:1], k=2, labels=["rare", "sea"])[0]
    labels, scores = clf.predict_topk(X[:1], k=2, labels=["rare", "sea"])
    assert [e.label for e in row] == labels[0].tolist()
    assert [e.score for e in row] == pytest.approx(scores[0].tolist(), rel=1e-6)
    two = copy.copy(clf)
    two.top_k = 2
    assert len(two.explain(X[:1], k=None)[0]) == 2
    assert clf.explain([], k=2) == []
    with pytest.raises(ValueError, match="k must be a positive integer"):
        clf.explain(X[:1], k=0)
    with pytest.raises(ValueError, match="n_features must be an int"):
        clf.explain(X[:1], n_features=-1)
    with pytest.raises(ValueError, match="not in classes_"):
        clf.explain(X[:1], labels=["no such label"])
    other = copy.copy(clf)
    other.ranker_ = object()
    with pytest.raises(TypeError, match="needs an XRLinearClassifier ranker"):
        other.explain(X[:1])


def test_no_fine_tuned_block_and_save_load(tiny_bert_dir, tmp_path):
    X, Y = multilabel_texts(40)
    clf = make_clf(tiny_bert_dir, max_epochs=1, fine_tuned_weight=0.0).fit(X, Y)
    row = clf.explain(X[:2], k=2)
    assert all(list(e.blocks) == ["tfidf"] for r in row for e in r)
    assert clf.n_features_ranker_ == len(clf.vectorizer_.vocabulary_)
    clf.save(tmp_path / "model")
    loaded = skxmc.load(tmp_path / "model")
    assert [[e.to_dict() for e in r] for r in loaded.explain(X[:2], k=2)] == [
        [e.to_dict() for e in r] for r in row
    ]
