"""MatchXMLClassifier on a tiny random BERT (seconds on CPU), plus one slow MiniLM test."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

import skxmc
from skxmc import MatchXMLClassifier, MultiStageMatcher, XRLinearClassifier
from skxmc.matchxml import make_matchxml
from skxmc.metrics import make_topk_scorer, precision_at_k

from .._helpers import sentence_transformers_folder

TOPICS = {
    "pets": "cat dog mat sat pet fur",
    "money": "stock market price bank money trade",
    "sport": "football game team player ball win",
    "sea": "fish sea boat water ship wave",
}


def multilabel_texts(n: int, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    """Texts mixing one or two topics' words; labels = the topics (plus a rare tag)."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    texts, labels = [], []
    for i in range(n):
        k = 1 + (i % 3 == 0)
        chosen = list(rng.choice(names, size=k, replace=False))
        words = [w for t in chosen for w in rng.permutation(TOPICS[t].split())[:4]]
        texts.append(" ".join(rng.permutation(words)))
        labels.append(chosen + (["rare"] if i % 17 == 0 else []))
    return texts, labels


def make_clf(encoder, **params) -> MatchXMLClassifier:
    # no static sentence embeddings unless a test asks: the tests below are about the rest
    defaults = dict(
        encoder=str(encoder),
        max_length=16,
        batch_size=8,
        max_epochs=2,
        label_embedding="pifa",
        max_leaf_size=2,
        branching_factor=2,
        learning_rate=1e-3,
        device="cpu",
        random_state=0,
        sentence_encoder=None,
    )
    defaults.update(params)
    return make_matchxml(**defaults)


@pytest.fixture(scope="module")
def data():
    return multilabel_texts(48), multilabel_texts(24, seed=1)


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir, data):
    (X, Y), _ = data
    return make_clf(tiny_bert_dir).fit(X, Y)


@pytest.fixture(scope="module")
def one_epoch(tiny_bert_dir, data):
    """The defaults of ``make_clf`` with one epoch, fitted once for the tests that compare
    another setting with it (fits are deterministic: refitting gives the same model)."""
    (X, Y), _ = data
    return make_clf(tiny_bert_dir, max_epochs=1).fit(X, Y)


def test_fit_predict_contract(fitted, data):
    _, (X_test, Y_test) = data
    clf = fitted
    assert list(clf.classes_) == ["money", "pets", "rare", "sea", "sport"]
    # Tree over 5 labels with leaves of <= 2 labels and 2 children per node: stages per layer.
    assert clf.matcher_.stage_sizes_ == [C.shape[0] for C in clf.matcher_.tree_.cluster_chain_]
    assert len(clf.matcher_.stage_loss_curves_) == len(clf.matcher_.stage_sizes_)
    assert (
        clf.matcher_.n_steps_
        == sum(len(c) for c in clf.matcher_.stage_loss_curves_)
        == len(clf.matcher_.loss_curve_)
    )
    assert not clf.matcher_.interrupted_
    assert set(clf.fit_times_) == {"features", "tree", "fine_tuning", "encoding", "ranker"}

    P = clf.predict(X_test)
    assert sp.isspmatrix_csr(P) and P.shape == (len(X_test), 5)
    labels, scores = clf.predict_topk(X_test, k=2)
    assert labels.shape == scores.shape == (len(X_test), 2)
    assert set(labels.ravel()) <= set(clf.classes_)
    assert np.all(np.diff(scores, axis=1) <= 0)
    proba = clf.predict_proba(X_test)
    assert sp.isspmatrix_csr(proba) and proba.data.min() >= 0 and proba.data.max() <= 1
    assert sp.isspmatrix_csr(clf.decision_function(X_test))
    features = clf.transform(X_test)
    assert features.shape == (len(X_test), clf.n_features_ranker_)
    # TF-IDF block (row-normalised) + fine-tuned embedding (normalised): squared norm 2.
    np.testing.assert_allclose(features.multiply(features).sum(axis=1).A1, 2.0, rtol=1e-4)
    # The topics are separable by their words: well above the majority-label rate.
    assert clf.score(X_test, Y_test) >= 0.8
    assert clf.score(X_test, Y_test) == pytest.approx(
        precision_at_k(Y_test, clf.predict_topk(X_test, k=1), k=1, classes=clf.classes_)
    )


# The switches that test_each_ablation_switch_changes_the_training_loss also trains (and
# predicts with) run only with -m slow here: the same fits again.
_SWITCH_DUPLICATE = pytest.mark.slow


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"final_loss": "hinge"}, marks=_SWITCH_DUPLICATE),
        pytest.param(
            {"final_loss": "matching+hinge", "matching_weight": 1.0}, marks=_SWITCH_DUPLICATE
        ),
        pytest.param({"label_embedding": "label2vec"}, marks=_SWITCH_DUPLICATE),
        {"max_steps": 3, "max_candidates": 2, "beam_size": 1},
        pytest.param(
            {"negative_sampling": "snm", "n_sampled": 3, "n_hard_negatives": 2},
            marks=_SWITCH_DUPLICATE,
        ),
        {"negative_sampling": "tfn+man+snm", "final_loss": "matching+hinge"},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()),
)
def test_ablation_switches_train(tiny_bert_dir, data, params):
    (X, Y), (X_test, _) = data
    clf = make_clf(tiny_bert_dir, max_epochs=1, **params).fit(X, Y)
    assert all(np.isfinite(clf.matcher_.loss_curve_))
    assert clf.predict_topk(X_test, k=1)[0].shape == (len(X_test), 1)
    if "max_steps" in params:
        assert all(len(c) == 3 for c in clf.matcher_.stage_loss_curves_)


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_fine_tuned_weight_scales_the_ranker_block(tiny_bert_dir, data, weight):
    (X, Y), (X_test, _) = data
    clf = make_clf(tiny_bert_dir, max_epochs=1, fine_tuned_weight=weight).fit(X, Y)
    hidden = clf.matcher_.module_.encoder.config.hidden_size
    n_tfidf = len(clf.vectorizer_.vocabulary_)
    assert clf.n_features_ranker_ == n_tfidf + (hidden if weight else 0)
    features = clf.transform(X_test)
    # [TF-IDF] has norm 1, the fine-tuned block norm `weight`
    np.testing.assert_allclose(features.multiply(features).sum(axis=1).A1, 1 + weight**2, rtol=1e-4)
    block = features[:, n_tfidf:].toarray()
    np.testing.assert_allclose(np.linalg.norm(block, axis=1), weight, rtol=1e-4, atol=1e-6)
    assert clf.predict_topk(X_test, k=1)[0].shape == (len(X_test), 1)


def test_no_fine_tuned_features_and_pifa_tree_skip_encoding(tiny_bert_dir, data, monkeypatch):
    (X, Y), (X_test, _) = data
    calls = []
    original = MultiStageMatcher._embed

    def spy(self, tokens, device, desc):
        calls.append(desc)
        return original(self, tokens, device, desc)

    monkeypatch.setattr(MultiStageMatcher, "_embed", spy)
    clf = make_clf(tiny_bert_dir, max_epochs=1, fine_tuned_weight=0.0, ranker_tree="pifa")
    clf.fit(X, Y)
    assert "encoding" not in calls  # only the stages' bootstraps ran the encoder
    calls.clear()
    clf.predict_topk(X_test, k=1)
    assert calls == []
    # the refined tree needs the training texts' embeddings even at weight 0
    make_clf(tiny_bert_dir, max_epochs=1, fine_tuned_weight=0.0).fit(X, Y)
    assert "encoding" in calls


def test_ranker_tree_refined_vs_pifa(tiny_bert_dir, data, one_epoch):
    (X, Y), (X_test, _) = data
    refined = one_epoch
    pifa = make_clf(tiny_bert_dir, max_epochs=1, ranker_tree="pifa").fit(X, Y)
    # same fine-tuning (same seed), so the same ranker features; only the tree differs
    np.testing.assert_allclose(
        refined.transform(X_test).toarray(), pifa.transform(X_test).toarray(), rtol=1e-5, atol=1e-6
    )
    assert isinstance(refined.ranker_.tree_.label_embedding, np.ndarray | sp.spmatrix)
    assert pifa.ranker_.tree_.label_embedding == "pifa"
    # a ranker given its own tree keeps it whatever ranker_tree says
    own = make_clf(
        tiny_bert_dir,
        max_epochs=1,
        ranker=XRLinearClassifier(
            tree=skxmc.HierarchicalLabelTree(label_embedding="pifa", max_leaf_size=3)
        ),
    ).fit(X, Y)
    assert own.ranker_.tree_.max_leaf_size == 3


def test_snm_mined_negatives_exclude_positives_and_duplicates(fitted):
    import torch

    from skxmc.matchxml._stages import _StageModule

    rng = np.random.default_rng(0)
    module = _StageModule(
        fitted.matcher_.module_, 5, rng.standard_normal((5, 32)).astype(np.float32)
    )
    clf = MultiStageMatcher(n_sampled=3, n_hard_negatives=3)
    positives = sp.csr_matrix(np.array([[1, 0, 0, 0, 1], [0, 1, 0, 0, 0]], dtype=np.float32))
    z = torch.nn.functional.normalize(torch.randn(2, 32), dim=-1)
    ids = torch.tensor([[0, 4, 2], [1, 3, 0]])  # row 0: candidate 2 already there
    mask = torch.tensor([[True, True, True], [True, True, False]])
    positive = torch.tensor([[True, True, False], [True, False, False]])
    ids2, mask2, pos2 = clf._append_mined(module, z, positives, ids, mask, positive, rng)
    assert ids2.shape == mask2.shape == pos2.shape == (2, 6)
    mined0 = set(ids2[0, 3:][mask2[0, 3:]].tolist())
    assert mined0 == {1, 3}  # the negatives of row 0 except 2, which is a candidate already
    mined1 = set(ids2[1, 3:][mask2[1, 3:]].tolist())
    assert len(mined1) >= 2 and not mined1 & {1, 3}  # 3 of {0, 2, 3, 4}, minus the candidate 3
    assert not pos2[:, 3:].any()


def test_max_matcher_size_caps_the_stages(tiny_bert_dir, data):
    (X, Y), _ = data
    clf = make_clf(tiny_bert_dir, max_epochs=1, max_matcher_size=2).fit(X, Y)
    assert clf.matcher_.stage_sizes_ == [2]
    with pytest.raises(ValueError, match="max_matcher_size=1 is smaller than the top layer"):
        make_clf(tiny_bert_dir, max_matcher_size=1).fit(X, Y)


class HashingSentenceEncoder:
    """Deterministic bag-of-words hashing embeddings, standing in for a sentence model."""

    def __init__(self, dim: int = 16) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return out


def test_sentence_encoder_object_joins_the_features(tiny_bert_dir, data):
    (X, Y), (X_test, _) = data
    enc = HashingSentenceEncoder()
    clf = make_clf(tiny_bert_dir, max_epochs=1, sentence_encoder=enc).fit(X, Y)
    plain = make_clf(tiny_bert_dir, max_epochs=1).fit(X, Y)
    assert clf.n_features_ranker_ == plain.n_features_ranker_ + enc.dim
    calls = enc.calls
    clf.predict_topk(X_test, k=1)
    assert enc.calls == calls + 1


def test_pickle_and_save_load_give_identical_predictions(fitted, data, tmp_path):
    _, (X_test, _) = data
    labels, scores = fitted.predict_topk(X_test, k=3)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_topk(X_test, k=3)[0], labels)
    fitted.save(tmp_path / "model")
    # the matcher's encoder is a part of the model directory
    assert len(list((tmp_path / "model").rglob("model.safetensors"))) == 1
    assert not list((tmp_path / "model").rglob("*.pkl"))
    loaded = skxmc.load(tmp_path / "model")
    assert type(loaded) is MatchXMLClassifier
    got_labels, got_scores = loaded.predict_topk(X_test, k=3)
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_allclose(got_scores, scores, rtol=1e-5, atol=1e-6)
    assert loaded.get_params()["matcher__encoder"] == fitted.get_params()["matcher__encoder"]
    assert loaded.matcher_.stage_sizes_ == fitted.matcher_.stage_sizes_


@pytest.mark.slow  # nine small fits
def test_clone_and_grid_search_over_ranker_params(tiny_bert_dir, data):
    (X, Y), _ = data
    clf = make_clf(tiny_bert_dir, **BASE_SWITCH, ranker=XRLinearClassifier(relevance_weighted=True))
    assert clone(clf).get_params()["ranker__relevance_weighted"] is True
    # A KFold: with label lists, cv=<int> would ask sklearn to stratify a multi-label y.
    cv = KFold(2, shuffle=True, random_state=0)
    grid = [0.01, 4.0]
    scorer = make_topk_scorer("precision", 1)
    search = GridSearchCV(clf, {"ranker__Cp": grid}, cv=cv, scoring=scorer, error_score="raise")
    search.fit(X, Y)
    # The same folds by hand: the search's scores are these fits' P@1, its choice the best.
    manual = np.zeros((len(grid), 2))
    for f, (train, test) in enumerate(cv.split(X)):
        for g, value in enumerate(grid):
            model = clone(clf).set_params(ranker__Cp=value)
            model.fit([X[i] for i in train], [Y[i] for i in train])
            manual[g, f] = scorer(model, [X[i] for i in test], [Y[i] for i in test])
    assert manual.mean(1)[0] != manual.mean(1)[1]  # the values score apart here
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], manual.mean(1), atol=1e-12)
    assert search.best_params_["ranker__Cp"] == grid[int(np.argmax(manual.mean(1)))]
    assert search.best_estimator_.ranker_.Cp == search.best_params_["ranker__Cp"]


def test_edge_inputs(tiny_bert_dir):
    X = ["", "cat dog " * 500, "stock market", "fish sea", "cat", "money bank"]
    # An indicator matrix whose last label no text has: kept as a label, never predicted
    # above the labels that have texts.
    Y = np.array(
        [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    )
    clf = make_clf(tiny_bert_dir, max_epochs=1, max_length=10_000, vectorizer=None).fit(X, Y)
    assert list(clf.classes_) == [0, 1, 2, 3]
    assert clf.matcher_._max_length() == clf.matcher_.module_.encoder.config.max_position_embeddings
    labels, _ = clf.predict_topk(["", "cat " * 1000], k=1)
    assert labels.shape == (2, 1)


def test_bad_inputs(tiny_bert_dir, fitted, data, tmp_path):
    (X, Y), _ = data
    with pytest.raises(ValueError, match="X is empty"):
        make_clf(tiny_bert_dir).fit([], [])
    with pytest.raises(TypeError, match="single string"):
        make_clf(tiny_bert_dir).fit("one text", [["a"]])
    with pytest.raises(TypeError, match=r"X\[1\] is int"):
        make_clf(tiny_bert_dir).fit(["a text", 3], [["a"], ["b"]])
    with pytest.raises(TypeError, match="not text pairs"):
        make_clf(tiny_bert_dir).fit([("a", "b"), ("c", "d")], [["a"], ["b"]])
    with pytest.raises(ValueError, match="Y"):
        make_clf(tiny_bert_dir).fit(X, Y[:-3])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_clf(tmp_path / "no-such-encoder").fit(X, Y)
    with pytest.raises(ValueError, match="temperature"):
        make_clf(tiny_bert_dir, temperature=0.0).fit(X, Y)
    with pytest.raises(TypeError, match="single string"):
        fitted.predict("a text")
    unfitted = make_clf(tiny_bert_dir)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        unfitted.predict(["a"])


@pytest.mark.slow
def test_real_minilm_on_reuters_slice(data_dir, minilm_dir):
    """all-MiniLM-L6-v2 through the whole algorithm on 400 Reuters stories."""
    from skxmc.datasets import load_text_jsonl

    texts, labels = load_text_jsonl(data_dir / "reuters21578_allcats" / "train.jsonl.gz")
    X, Y = list(texts[:400]), list(labels[:400])
    X_test, Y_test = list(texts[400:600]), list(labels[400:600])
    clf = make_matchxml(
        encoder=minilm_dir,
        max_length=32,
        max_steps=10,
        sentence_encoder=minilm_dir,
        sentence_max_length=32,
        device="cpu",
    ).fit(X, Y)
    assert clf.matcher_.n_steps_ == 10 * len(clf.matcher_.stage_sizes_)
    assert clf.score(X_test, Y_test) > 0.6


# ---------------------------------------------------------------- defaults = the full method


def test_defaults_are_the_papers_full_method(fitted):
    params = {**MultiStageMatcher().get_params(), **MatchXMLClassifier().get_params()}
    # Table XII, last row: label2vec tree, text-label matching, static sentence embeddings
    assert params["label_embedding"] == "label2vec"
    assert params["final_loss"] == "matching"
    assert params["sentence_encoder"] == "auto"
    assert params["pooling"] == "auto"
    assert params["label_bootstrap"] == "linear"
    assert params["ranker_tree"] == "refined"
    assert type(fitted.matcher_) is MultiStageMatcher
    # eq. 7: the default ranker trains on teacher-forcing + matcher-aware negatives
    assert fitted.ranker_.negative_sampling == "tfn+man"
    assert fitted.ranker_.Cp == 2.0
    assert fitted.ranker_.relevance_weighted
    # the reference's ranker threshold: 0.1 would prune the dense blocks' weights
    assert fitted.ranker_.weight_threshold == 0.001


def test_default_encoder_needs_no_download(monkeypatch):
    import skxmc.matchxml._stages as mx
    from skxmc.text import bundled_minilm_path

    bundled = bundled_minilm_path()
    if bundled is not None:
        assert MultiStageMatcher()._encoder_source() == bundled
    # a user's own encoder is never replaced
    assert MultiStageMatcher(encoder="org/other")._encoder_source() == "org/other"
    # without the bundled copy and offline: a clear error that says how to get one
    monkeypatch.setattr(mx, "bundled_minilm_path", lambda: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-skxmc-test")
    clf = MultiStageMatcher()
    assert clf._encoder_source() == mx.DEFAULT_ENCODER
    with pytest.raises(skxmc.exceptions.EncoderNotFoundError, match=r"skxmc\[models\]"):
        clf._load_encoder()


def test_pooling_auto_reads_the_model(tiny_bert_dir, data, tmp_path, fitted):
    (X, Y), (X_test, _) = data
    assert fitted.matcher_.pooling_ == "cls"  # a plain BERT folder: CLS, as the paper
    mean_dir = sentence_transformers_folder(tiny_bert_dir, tmp_path / "st-mean", "mean")
    clf = make_clf(mean_dir, max_epochs=1).fit(X, Y)
    assert clf.matcher_.pooling_ == "mean" and clf.matcher_.module_.pooling == "mean"
    explicit = make_clf(mean_dir, max_epochs=1, pooling="cls").fit(X, Y)
    assert explicit.matcher_.pooling_ == "cls"
    # the pooling changes the training loss from the first step
    assert clf.matcher_.stage_loss_curves_[0][0] != pytest.approx(
        explicit.matcher_.stage_loss_curves_[0][0]
    )
    # and survives pickling (predict rebuilds the module with it)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(
        again.transform(X_test).toarray(), clf.transform(X_test).toarray(), rtol=1e-5, atol=1e-6
    )


def test_sentence_encoder_auto_is_the_pretrained_encoder(tiny_bert_dir, data):
    from skxmc.text._sentence import sentence_embeddings

    (X, Y), (X_test, _) = data
    clf = make_clf(tiny_bert_dir, max_epochs=1, sentence_encoder="auto").fit(X, Y)
    hidden = clf.matcher_.module_.encoder.config.hidden_size
    n_tfidf = len(clf.vectorizer_.vocabulary_)
    assert clf.n_features_ranker_ == n_tfidf + hidden + hidden
    # the static block is the pretrained (not fine-tuned) encoder's sentence embedding
    static = sentence_embeddings(X_test, str(tiny_bert_dir), device="cpu", max_length=None)
    block = clf.transform(X_test)[:, n_tfidf : n_tfidf + hidden].toarray()
    cos = (block * static).sum(axis=1) / np.linalg.norm(block, axis=1)
    np.testing.assert_allclose(cos, 1.0, rtol=1e-4)


BASE_SWITCH = dict(max_epochs=1, max_steps=2)


@pytest.fixture(scope="module")
def switch_base(tiny_bert_dir, data):
    """The model every switch is compared with, fitted once (same data, seed, batches)."""
    (X, Y), _ = data
    return make_clf(tiny_bert_dir, **BASE_SWITCH).fit(X, Y)


@pytest.mark.parametrize(
    "switch",
    [
        {"final_loss": "hinge"},
        {"final_loss": "matching+hinge"},
        {"matching_weight": 1.0},
        {"temperature": 0.5},
        {"label_bootstrap": "centroid"},
        {"pooling": "mean"},
        {"negative_sampling": "snm", "n_sampled": 3, "n_hard_negatives": 2},
        {"label_embedding": "label2vec"},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()),
)
def test_each_ablation_switch_changes_the_training_loss(tiny_bert_dir, data, switch, switch_base):
    """Same data, seed and batches: a switch that were ignored would give the same losses."""
    (X, Y), (X_test, _) = data
    base = switch_base
    other = make_clf(tiny_bert_dir, **BASE_SWITCH, **switch).fit(X, Y)
    # the switched model trains and predicts (what test_ablation_switches_train checks)
    assert all(np.isfinite(other.matcher_.loss_curve_))
    assert other.predict_topk(X_test, k=1)[0].shape == (len(X_test), 1)
    if set(switch) <= {"final_loss", "matching_weight", "temperature"}:
        # only the last stage's loss changes; the stages before are identical
        before = [v for curve in base.matcher_.stage_loss_curves_[:-1] for v in curve]
        assert [
            v for curve in other.matcher_.stage_loss_curves_[:-1] for v in curve
        ] == pytest.approx(before)
        assert other.matcher_.stage_loss_curves_[-1][0] != pytest.approx(
            base.matcher_.stage_loss_curves_[-1][0]
        )
    else:
        assert other.matcher_.loss_curve_ != pytest.approx(base.matcher_.loss_curve_)


def test_refined_tree_gets_its_own_shape(tiny_bert_dir, data, one_epoch):
    (X, Y), _ = data
    clf = make_clf(
        tiny_bert_dir, max_epochs=1, ranker_branching_factor=4, ranker_max_leaf_size=3
    ).fit(X, Y)
    tree = clf.ranker_.tree_
    assert (tree.branching_factor, tree.max_leaf_size) == (4, 3)
    assert (clf.matcher_.tree_.branching_factor, clf.matcher_.tree_.max_leaf_size) == (2, 2)
    same = one_epoch
    assert (same.ranker_.tree_.branching_factor, same.ranker_.tree_.max_leaf_size) == (2, 2)


def test_one_shot_generator_and_dataset_are_read_once_into_a_list(tiny_bert_dir, fitted, data):
    # MatchXML needs its texts several times (tree, stages, ranker): a stream is read
    # once into a list, and gives the list's model
    from .._helpers import FakeDataset, OneShot

    (X, Y), (X_test, _) = data
    clf = make_clf(tiny_bert_dir).fit(OneShot(X), Y)
    expected = fitted.predict_topk(X_test, k=3)
    np.testing.assert_array_equal(clf.predict_topk(X_test, k=3)[0], expected[0])
    got = fitted.predict_topk(FakeDataset({"label": [0] * len(X_test), "text": X_test}), k=3)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(fitted.predict_topk(iter(X_test), k=3)[1], expected[1])
