"""MatchXML as a composition: MultiStageMatcher alone, the cached sentence embedder, and the
parts tuned as ``matcher__*`` / ``ranker__*`` (tiny random BERT, seconds on CPU)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

import skxmc
from skxmc import MatchXMLClassifier, MultiStageMatcher, XRLinearClassifier
from skxmc.metrics import make_topk_scorer
from skxmc.text import Callback, SentenceEmbedder

from .._helpers import with_training
from .test_classifier import multilabel_texts

FAST = dict(
    max_length=16,
    batch_size=8,
    max_epochs=1,
    max_leaf_size=2,
    branching_factor=2,
    label_embedding="pifa",
    device="cpu",
)


@pytest.fixture(scope="module")
def data():
    return multilabel_texts(48), multilabel_texts(12, seed=1)


def matcher(encoder, **params) -> MultiStageMatcher:
    return MultiStageMatcher(**with_training(encoder=str(encoder), **{**FAST, **params}))


class _Epochs(Callback):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_epoch_end(self, trainer) -> None:
        self.seen.append(len(self.seen))


def test_matcher_alone_fits_and_transforms(tiny_bert_dir, data):
    (X, Y), (X_test, _) = data
    epochs = _Epochs()
    m = matcher(tiny_bert_dir, callbacks=[epochs], accumulation_steps=2).fit(X, Y)
    Z = m.transform(X_test)
    assert Z.shape == (len(X_test), 32) and Z.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, rtol=1e-5)
    # one record per epoch of every stage, and the user's callback saw each of them
    assert [r["stage"] for r in m.history_] == list(range(len(m.stage_sizes_)))
    assert len(epochs.seen) == len(m.history_)
    # accumulation: 48 texts in batches of 8 = 6 batches -> 3 optimiser steps per stage
    assert all(len(curve) == 3 for curve in m.stage_loss_curves_)
    assert set(m.fit_times_) == {"tree", "fine_tuning"}
    assert m.get_feature_names_out()[0] == "multistagematcher0"
    assert np.array_equal(clone(m).fit_transform(X, Y), m.transform(X))


def test_matcher_label2vec_needs_no_features_and_checks_them(tiny_bert_dir, data):
    (X, Y), _ = data
    m = matcher(tiny_bert_dir, label_embedding="label2vec", max_steps=1).fit(X, Y)
    assert m.n_steps_ == len(m.stage_sizes_)
    with pytest.raises(ValueError, match="tree_features has 3 rows for 48 texts"):
        matcher(tiny_bert_dir).fit(X, Y, tree_features=np.ones((3, 4)))


def test_matcher_save_load(tiny_bert_dir, data, tmp_path):
    (X, Y), (X_test, _) = data
    m = matcher(tiny_bert_dir, max_steps=2).fit(X, Y)
    m.save(tmp_path / "m")
    loaded = skxmc.load(tmp_path / "m")
    assert type(loaded) is MultiStageMatcher
    np.testing.assert_allclose(loaded.transform(X_test), m.transform(X_test), atol=1e-6)


def test_parts_tune_in_a_grid_search(tiny_bert_dir, data):
    (X, Y), _ = data
    clf = MatchXMLClassifier(
        matcher=matcher(tiny_bert_dir, max_steps=1), sentence_encoder=None, device="cpu"
    )
    assert clf.get_params()["matcher__training__learning_rate"] is None  # the default
    assert clf.matcher._train.learning_rate == 5e-5
    search = GridSearchCV(
        clf,
        {"matcher__training__learning_rate": [1e-4, 1e-3], "ranker__Cp": [1.0, 2.0]},
        cv=KFold(2, shuffle=True, random_state=0),
        scoring=make_topk_scorer("precision", 1),
        error_score="raise",
    )
    search.fit(X, Y)
    assert len(search.cv_results_["params"]) == 4
    best = search.best_estimator_
    best_rate = search.best_params_["matcher__training__learning_rate"]
    assert best.matcher_._train.learning_rate == best_rate
    assert best.ranker_.Cp == search.best_params_["ranker__Cp"]
    # a part left None gets its default as soon as one of its parameters is set, so the
    # default MatchXMLClassifier() tunes the same way
    default = MatchXMLClassifier().set_params(ranker__Cp=1.5, matcher__training__max_epochs=3)
    assert isinstance(default.ranker, XRLinearClassifier) and default.ranker.Cp == 1.5
    assert default.ranker.negative_sampling == "tfn+man"  # the default ranker, not a bare one
    assert (
        isinstance(default.matcher, MultiStageMatcher) and default.matcher.training.max_epochs == 3
    )
    assert MatchXMLClassifier().matcher is None  # nothing shared between instances
    with pytest.raises(ValueError, match="no_such"):
        MatchXMLClassifier().set_params(matcher__no_such=1)


def test_estimator_settings_override_the_parts(tiny_bert_dir, data):
    (X, Y), _ = data
    m = matcher(tiny_bert_dir, max_steps=1, random_state=123, verbose=0)
    clf = MatchXMLClassifier(matcher=m, sentence_encoder=None, device="cpu", random_state=7)
    clf.fit(X, Y)
    assert clf.matcher_.training.device == "cpu" and clf.matcher_.training.random_state != 123
    assert clf.matcher.training.random_state == 123  # the template is cloned, never changed


class _Counter:
    def __init__(self, monkeypatch) -> None:
        import skxmc.text._sentence as module

        self.texts: list[int] = []
        original = module.sentence_embeddings

        def counting(texts, *args, **kwargs):
            self.texts.append(len(texts))
            return original(texts, *args, **kwargs)

        monkeypatch.setattr(module, "sentence_embeddings", counting)


def test_sentence_embedder_cache(tiny_bert_dir, data, tmp_path, monkeypatch):
    (X, _), _ = data
    counter = _Counter(monkeypatch)
    emb = SentenceEmbedder(encoder=str(tiny_bert_dir), device="cpu", memory=tmp_path / "cache")
    first = emb.fit_transform(X)
    again = clone(emb).fit_transform(X)
    assert counter.texts == [len(X)]  # the second call read the cache
    np.testing.assert_array_equal(first, again)
    assert emb.transform(X[:3]).shape == (3, emb.n_features_out_)
    assert counter.texts == [len(X), 3]
    # the same texts with other weights under the same path: encoded again
    weights = tiny_bert_dir / "config.json"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        emb.transform(X[:3])
    finally:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert counter.texts == [len(X), 3, 3]
    # another truncation is another key
    clone(emb).set_params(max_length=8).fit_transform(X[:3])
    assert counter.texts == [len(X), 3, 3, 3]
    # without memory nothing is cached
    plain = SentenceEmbedder(encoder=str(tiny_bert_dir), device="cpu")
    plain.fit_transform(X[:3])
    plain.transform(X[:3])
    assert counter.texts[-2:] == [3, 3]
    with pytest.raises(ValueError, match="memory"):
        SentenceEmbedder(memory=3).fit(X)


def test_grid_search_encodes_each_fold_once_with_memory(tiny_bert_dir, data, tmp_path, monkeypatch):
    (X, Y), _ = data

    def search(memory):
        clf = MatchXMLClassifier(
            matcher=matcher(tiny_bert_dir, max_steps=1),
            sentence_encoder=str(tiny_bert_dir),
            memory=memory,
            device="cpu",
        )
        grid = GridSearchCV(
            clf,
            {"ranker__Cp": [1.0, 2.0, 4.0]},
            cv=KFold(2, shuffle=True, random_state=0),
            scoring=make_topk_scorer("precision", 1),
            refit=False,
            error_score="raise",
        )
        grid.fit(X, Y)

    counter = _Counter(monkeypatch)
    search(None)
    without = list(counter.texts)
    counter.texts.clear()
    search(tmp_path / "cache")
    # 3 settings x 2 folds x (fit on the training part + score the held-out part) without
    # the cache; with it, each distinct set of texts is encoded once: the two halves (a
    # 2-fold split's training part is the other fold's held-out part)
    assert without == [24] * 12
    assert counter.texts == [24, 24]


def test_make_matchxml_routes_flat_parameters():
    from skxmc.matchxml import make_matchxml

    clf = make_matchxml(max_epochs=3, pooling="mean", top_k=4, device="cpu", random_state=5)
    assert (clf.matcher.training.max_epochs, clf.matcher.pooling) == (3, "mean")
    assert (clf.top_k, clf.device, clf.random_state) == (4, "cpu", 5)
    assert clf.matcher._train.device == "auto"  # the classifier's device is passed on in fit
    with pytest.raises(TypeError, match="unknown parameter 'no_such'"):
        make_matchxml(no_such=1)


def test_matcher_validation_split_scores_each_stage_and_stops_early(tiny_bert_dir, data):
    (X, Y), _ = data
    # 48 texts, a quarter held out: 12 validation texts, scores are multiples of 1/12
    flat = dict(learning_rate=1e-12, label_learning_rate=1e-12, max_epochs=5)
    m = matcher(tiny_bert_dir, validation_fraction=0.25, n_iter_no_change=1, **flat).fit(X, Y)
    stages = [r["stage"] for r in m.history_]
    assert sorted(set(stages)) == list(range(len(m.stage_sizes_)))
    # rates too small to change a prediction: every stage stops after its second epoch
    assert all(stages.count(s) == 2 for s in set(stages))
    for r in m.history_:
        assert 0 <= r["valid_score"] <= 1 and abs(12 * r["valid_score"] % 1) < 1e-9
    # 36 training texts in batches of 8: 5 steps an epoch
    assert all(len(curve) == 10 for curve in m.stage_loss_curves_)
    with pytest.raises(ValueError, match="validation_fraction"):
        matcher(tiny_bert_dir, n_iter_no_change=1).fit(X, Y)


def test_stage_validation_score_against_a_naive_loop(tiny_bert_dir, data):
    import torch

    from skxmc.matchxml._stages import _stage_precision_at_1, _StageModule

    (X, Y), (X_test, _) = data
    m = matcher(tiny_bert_dir, max_steps=1).fit(X, Y)
    rng = np.random.default_rng(0)
    table = rng.standard_normal((5, 32)).astype(np.float32)
    module = _StageModule(m.module_, 5, table)
    targets = sp.csr_matrix(rng.random((len(X_test), 5)) < 0.3, dtype=np.float32)

    class _Trainer:
        device = torch.device("cpu")

    score = _stage_precision_at_1(module, m._tokenize(X_test), targets, 4)(_Trainer())
    Z = m.transform(X_test).astype(np.float64)
    T = table / np.linalg.norm(table, axis=1, keepdims=True)
    hits = 0
    for i in range(len(X_test)):
        best = max(range(5), key=lambda j: float(Z[i] @ T[j]))
        hits += targets[i, best] > 0
    assert score == pytest.approx(hits / len(X_test))
