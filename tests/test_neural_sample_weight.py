"""``sample_weight`` in the neural estimators' ``fit`` (issue 48, item 12).

A weight multiplies its row's loss terms, the weights scaled to mean 1 over the training
rows; a row of weight 0 is dropped before anything reads the data. What the tests pin, on
tiny models with a fixed seed:

- weight 0 on some rows is dropping them: the same predictions, exactly (the dropped fit
  and the weighted one run the same arithmetic; MatchXML within 1e-6, see its test);
- weights all 2 are weights all 1 (and no weights): exactly, as equal weights take the
  unweighted path;
- an integer weight is a repeated row: within 1e-5 where the loss is a mean over the rows
  of one batch holding every row (full-batch training, a dropout-free encoder, the
  classification loss alone). With smaller batches the equality holds in expectation
  only: the repeated data has more batches per epoch and other draws, which on a tiny
  model move the predictions more than the weights do. The contrastive terms weigh each
  anchor by its weight, but a repeated row is also a second positive or negative of the
  other anchors, which a weight is not: they are not compared with repetition;
- bad weights raise a ValueError naming ``sample_weight``;
- metadata routing passes ``sample_weight`` through a Pipeline.
"""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.pipeline import Pipeline

from skxmc import (
    KNNBertClassifier,
    MatchXMLClassifier,
    MultiStageMatcher,
    SharpReCLClassifier,
    SNMClassifier,
)
from skxmc._sample_weight import loss_weights
from skxmc.matchxml import make_matchxml

from ._helpers import topic_texts, with_training
from .matchxml.test_classifier import multilabel_texts
from .test_knnbert import make_clf as knnbert_clf
from .test_sharprecl import make_clf as sharprecl_clf
from .test_snm import FAST, _snm, _toy

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def encoder_without_dropout(tiny_bert_dir, tmp_path_factory):
    """The tiny BERT with dropout off: fits that differ only in batch composition then
    run the same arithmetic, so a weighted and a repeated row can be compared."""
    directory = tmp_path_factory.mktemp("tiny-bert-no-dropout")
    shutil.copytree(tiny_bert_dir, directory, dirs_exist_ok=True)
    config = json.loads((directory / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def sharprecl(encoder, **params):
    return sharprecl_clf(encoder, **{"device": "cpu", **params})


def knnbert(encoder, **params):
    return knnbert_clf(encoder, **{"device": "cpu", **params})


def snm(**params):
    return _snm(**{**FAST, "max_epochs": 5, **params})


def snm_data():
    return _toy(n=120)


MATCHER = dict(
    max_length=16,
    label_embedding="pifa",
    max_leaf_size=2,
    branching_factor=2,
    label_bootstrap="centroid",
)


def matcher(encoder, **params):
    training = dict(batch_size=8, max_epochs=2, learning_rate=1e-3, device="cpu", random_state=0)
    training.update({k: params.pop(k) for k in list(params) if k in training})
    return MultiStageMatcher(**with_training(encoder=str(encoder), **MATCHER, **training, **params))


def take(values, rows):
    return [values[i] for i in rows] if isinstance(values, list) else values[rows]


# The estimators on their data: (make(encoder, **params), X, y, outputs(fitted, X)).
TEXT_CLASSIFIERS = {
    "sharprecl": sharprecl,
    "knnbert": knnbert,
}


def text_data():
    return topic_texts((10, 8, 6))


def proba(clf, X):
    out = clf.predict_proba(X)
    return out.toarray() if hasattr(out, "toarray") else np.asarray(out)


# Weight 0 is dropping the row -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TEXT_CLASSIFIERS))
def test_text_classifiers_weight_zero_is_dropping(name, tiny_bert_dir):
    make = TEXT_CLASSIFIERS[name]
    X, y = text_data()
    weights = np.ones(len(X))
    weights[[1, 12, 20]] = 0
    kept = np.flatnonzero(weights)
    weighted = make(tiny_bert_dir).fit(X, y, sample_weight=weights)
    dropped = make(tiny_bert_dir).fit(take(X, kept), y[kept])
    np.testing.assert_array_equal(proba(weighted, X), proba(dropped, X))
    # the rows a weight of 0 dropped are not in the kNN memory either
    if name == "knnbert":
        np.testing.assert_array_equal(weighted.memory_features_, dropped.memory_features_)
        # kneighbors names rows of the X given to fit, dropped rows counted
        np.testing.assert_array_equal(weighted.memory_indices_, kept[dropped.memory_indices_])


def test_sharprecl_weight_zero_drops_a_whole_class(tiny_bert_dir):
    X, y = topic_texts((6, 5, 4))
    weights = (y != y[-1]).astype(float)  # the last class only has weight 0
    kept = np.flatnonzero(weights)
    weighted = sharprecl(tiny_bert_dir, max_epochs=1).fit(X, y, sample_weight=weights)
    assert list(weighted.classes_) == sorted(set(y[kept]))
    dropped = sharprecl(tiny_bert_dir, max_epochs=1).fit(take(X, kept), y[kept])
    np.testing.assert_array_equal(proba(weighted, X), proba(dropped, X))


def test_snm_weight_zero_is_dropping():
    X, Y = snm_data()
    weights = np.ones(len(X))
    weights[[5, 50, 99]] = 0
    kept = np.flatnonzero(weights)
    weighted = snm().fit(X, Y, sample_weight=weights)
    dropped = snm().fit(X[kept], take(Y, kept))
    np.testing.assert_array_equal(proba(weighted, X), proba(dropped, X))


def test_matchxml_weight_zero_is_dropping(tiny_bert_dir):
    X, Y = multilabel_texts(24)
    weights = np.ones(len(X))
    weights[[2, 7, 15]] = 0
    kept = np.flatnonzero(weights)
    params = dict(encoder=str(tiny_bert_dir), sentence_encoder=None, device="cpu")
    params.update(MATCHER, batch_size=8, max_epochs=1, random_state=0)
    weighted = make_matchxml(**params).fit(X, Y, sample_weight=weights)
    dropped = make_matchxml(**params).fit(take(X, kept), take(Y, kept))
    # Within float rounding, not exactly: the first MatchXML fit of a process differs from
    # the next ones by about 6e-8 whatever the weights (two unweighted fits do too).
    np.testing.assert_allclose(proba(weighted, X), proba(dropped, X), rtol=0, atol=1e-6)


# Equal weights are no weights --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TEXT_CLASSIFIERS))
def test_text_classifiers_weights_all_two_are_all_one(name, tiny_bert_dir):
    make = TEXT_CLASSIFIERS[name]
    X, y = text_data()
    # one epoch: equal weights take the unweighted path from the first step on
    ones = make(tiny_bert_dir, max_epochs=1).fit(X, y, sample_weight=np.ones(len(X)))
    twos = make(tiny_bert_dir, max_epochs=1).fit(X, y, sample_weight=np.full(len(X), 2.0))
    plain = make(tiny_bert_dir, max_epochs=1).fit(X, y)
    np.testing.assert_array_equal(proba(twos, X), proba(ones, X))
    np.testing.assert_array_equal(proba(ones, X), proba(plain, X))


def test_snm_weights_all_two_are_all_one():
    X, Y = snm_data()
    twos = snm().fit(X, Y, sample_weight=np.full(len(X), 2.0))
    np.testing.assert_array_equal(proba(twos, X), proba(snm().fit(X, Y), X))


def test_matcher_weights_all_two_are_all_one(tiny_bert_dir):
    X, Y = multilabel_texts(24)
    twos = matcher(tiny_bert_dir, max_epochs=1).fit(X, Y, sample_weight=np.full(len(X), 2.0))
    plain = matcher(tiny_bert_dir, max_epochs=1).fit(X, Y)
    np.testing.assert_array_equal(twos.transform(X), plain.transform(X))


# An integer weight is a repeated row -------------------------------------------------------


REPEATED = [0, 3, 11, 19]  # each has weight 2: repeated once


@pytest.mark.parametrize(
    "make",
    [
        lambda enc: sharprecl(enc, n_views=1, contrastive_weight=0.0, batch_size=64, max_epochs=3),
        lambda enc: knnbert(
            enc, contrastive_weight=0.0, batch_size=64, max_epochs=3, knn_weight=0.0
        ),
    ],
    ids=["sharprecl", "knnbert"],
)
def test_text_classifiers_integer_weight_is_repeating(make, encoder_without_dropout):
    # Full batches and the classification loss: the weighted mean over the rows of one
    # batch is the mean over the repeated rows, so only rounding differs. (KNN-BERT's
    # kNN vote is off: its memory holds a repeated text twice, a weighted one once.)
    X, y = text_data()
    weights = np.ones(len(X))
    weights[REPEATED] = 2
    rows = np.concatenate([np.arange(len(X)), REPEATED])
    weighted = make(encoder_without_dropout).fit(X, y, sample_weight=weights)
    repeated = make(encoder_without_dropout).fit(take(X, rows), y[rows])
    plain = make(encoder_without_dropout).fit(X, y)
    np.testing.assert_allclose(proba(weighted, X), proba(repeated, X), atol=1e-5)
    assert np.abs(proba(plain, X) - proba(repeated, X)).max() > 1e-3  # the weights matter


def test_snm_integer_weight_is_repeating():
    X, Y = snm_data()
    weights = np.ones(len(X))
    weights[:20] = 3
    rows = np.concatenate([np.arange(len(X)), np.repeat(np.arange(20), 2)])
    weighted = snm(batch_size=512).fit(X, Y, sample_weight=weights)
    repeated = snm(batch_size=512).fit(X[rows], take(Y, rows))
    plain = snm(batch_size=512).fit(X, Y)
    np.testing.assert_allclose(proba(weighted, X), proba(repeated, X), atol=1e-3)
    assert np.abs(proba(plain, X) - proba(repeated, X)).max() > 1e-2


def test_matcher_integer_weight_is_repeating(encoder_without_dropout):
    # The hinge stages (a weighted mean over candidate slots) with full batches, and the
    # tree's PIFA over fixed features (TF-IDF refitted on repeated texts would differ).
    X, Y = multilabel_texts(24)
    features = np.random.default_rng(0).normal(size=(len(X), 8)).astype(np.float32)
    weights = np.ones(len(X))
    weights[REPEATED] = 2
    rows = np.concatenate([np.arange(len(X)), REPEATED])

    def fit(X, Y, features, **kw):
        est = matcher(encoder_without_dropout, final_loss="hinge", batch_size=64)
        return est.fit(X, Y, tree_features=features, **kw).transform(multilabel_texts(24)[0])

    weighted = fit(X, Y, features, sample_weight=weights)
    repeated = fit(take(X, rows), take(Y, rows), features[rows])
    plain = fit(X, Y, features)
    np.testing.assert_allclose(weighted, repeated, atol=1e-4)
    assert np.abs(plain - repeated).max() > 1e-4


def test_loss_weights_have_mean_one_and_equal_weights_are_none():
    assert loss_weights(None) is None
    assert loss_weights(np.full(4, 2.5)) is None
    np.testing.assert_allclose(loss_weights(np.array([1.0, 3.0])), [0.5, 1.5])


# Bad weights, routing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        ([1.0, -1.0], "non-negative"),
        ([1.0, np.nan], "finite"),
        ([1.0], "shape"),
        ([0.0, 0.0], "zero for every sample"),
        (["a", "b"], "numbers"),
    ],
)
def test_bad_weights_raise_naming_sample_weight(bad, message, tiny_bert_dir):
    X, y = ["cat dog", "stock bank"], np.array(["pets", "money"])
    # Checked before the encoder loads (an encoder path that does not exist proves it).
    for est in (sharprecl("/nonexistent"), knnbert("/nonexistent")):
        with pytest.raises(ValueError, match="sample_weight") as info:
            est.fit(X, y, sample_weight=bad)
        assert message in str(info.value)
    with pytest.raises(ValueError, match="sample_weight"):
        snm().fit(np.eye(2, dtype=np.float32), [[0], [1]], sample_weight=bad)
    with pytest.raises(ValueError, match="sample_weight"):
        matcher("/nonexistent").fit(X, [["pets"], ["money"]], sample_weight=bad)


@pytest.mark.parametrize(
    "cls",
    [
        SharpReCLClassifier,
        KNNBertClassifier,
        SNMClassifier,
        MultiStageMatcher,
        MatchXMLClassifier,
    ],
)
def test_fit_requests_sample_weight(cls):
    with sklearn.config_context(enable_metadata_routing=True):
        request = cls().set_fit_request(sample_weight=True).get_metadata_routing()
    assert request.fit.requests["sample_weight"] is True


def test_pipeline_routes_sample_weight_to_snm():
    X, Y = snm_data()
    weights = np.ones(len(X))
    weights[:30] = 0
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = Pipeline([("snm", snm().set_fit_request(sample_weight=True))])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipe.fit(X, Y, sample_weight=weights)
    direct = snm().fit(X, Y, sample_weight=weights)
    np.testing.assert_array_equal(proba(pipe, X), proba(direct, X))
    assert not np.array_equal(proba(pipe, X), proba(snm().fit(X, Y), X))


@pytest.mark.parametrize("memory", ["train", "queue"])
def test_knnbert_neighbours_vote_their_weights(memory, tiny_bert_dir):
    X, y = text_data()
    weights = np.ones(len(X))
    weights[REPEATED] = 3
    clf = knnbert(tiny_bert_dir, knn_memory=memory, knn_weight=1.0, max_epochs=1)
    clf.fit(X, y, sample_weight=weights)
    expected_weights = loss_weights(weights)[clf.memory_indices_]
    np.testing.assert_array_equal(clf.memory_weights_, expected_weights)
    rows = clf.kneighbors(X, return_distance=False)
    votes = np.zeros((len(X), len(clf.classes_)))
    for i, neighbours in enumerate(rows):
        for row in neighbours:
            votes[i, np.searchsorted(clf.classes_, y[row])] += weights[row]
    np.testing.assert_allclose(clf.predict_proba(X), votes / votes.sum(1, keepdims=True))
    # equal weights keep the counted votes (no memory_weights_)
    plain = knnbert(tiny_bert_dir, knn_memory=memory, max_epochs=1)
    assert not hasattr(plain.fit(X, y, sample_weight=np.full(len(X), 2.0)), "memory_weights_")


def test_knnbert_memory_weights_survive_save_and_load(tiny_bert_dir, tmp_path):
    import skxmc

    X, y = text_data()
    weights = np.ones(len(X))
    weights[REPEATED] = 3
    clf = knnbert(tiny_bert_dir, knn_memory="train", max_epochs=1)
    clf.fit(X, y, sample_weight=weights)
    clf.save(tmp_path / "model")
    loaded = skxmc.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.memory_weights_, clf.memory_weights_)
    np.testing.assert_allclose(loaded.predict_proba(X), clf.predict_proba(X), atol=1e-6)
