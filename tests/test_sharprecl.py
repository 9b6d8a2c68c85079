"""SharpReCLClassifier, its losses, augmentations and make_imbalanced (tiny BERT, CPU)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import skxmc
from skxmc._augment import WordNet, WordNetNotFoundError, augment_texts, delete_swap
from skxmc.datasets import make_imbalanced
from skxmc.losses import (
    effective_number_weights,
    logit_adjusted_cross_entropy,
    rebalanced_contrastive_loss,
    rebalanced_targets,
)
from skxmc.sharprecl import SharpReCLClassifier
from skxmc.text import TrainingConfig

from ._helpers import make_sharprecl as make_clf
from ._helpers import plain_params, with_training
from ._helpers import sharprecl_toy_data as toy_data

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir):
    X, y = toy_data()
    return make_clf(tiny_bert_dir).fit(X, y), X, y


# Losses -----------------------------------------------------------------------------------


def test_logit_adjusted_ce_matches_shifted_ce():
    logits = torch.randn(5, 3)
    y = torch.tensor([0, 1, 2, 0, 1])
    log_prior = torch.tensor([0.6, 0.3, 0.1]).log()
    got = logit_adjusted_cross_entropy(logits, y, log_prior)
    assert torch.allclose(got, F.cross_entropy(logits + log_prior, y))
    assert torch.allclose(
        logit_adjusted_cross_entropy(logits, y, log_prior, tau=0.0), F.cross_entropy(logits, y)
    )


def test_effective_number_weights():
    w = effective_number_weights([1000, 100, 10])
    assert w.shape == (3,) and np.isclose(w.mean(), 1.0)
    assert w[0] < w[1] < w[2]
    with pytest.raises(ValueError):
        effective_number_weights([0, 3])


def test_rebalanced_targets_shapes_membership_and_ratio():
    torch.manual_seed(0)
    z = F.normalize(torch.randn(10, 8), dim=1)
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 0, 0, 0, 1])  # class 2 only through its prototype
    protos = F.normalize(torch.randn(3, 8), dim=1)
    feats = torch.cat([z, protos]).requires_grad_()
    all_labels = torch.cat([labels, torch.arange(3)])
    pos, neg = rebalanced_targets(
        feats, all_labels, protos, n_positive=6, n_negative=9, n_hard=3, synthetic_ratio=0.0
    )
    assert pos.shape == (3, 6, 8) and neg.shape == (3, 9, 8)
    # Simple-sampling only: every target is one of the class's (non-)members.
    for c in range(3):
        members = feats[all_labels == c].detach()
        others = feats[all_labels != c].detach()
        assert all(torch.isclose(members @ p, torch.tensor(1.0), atol=1e-5).any() for p in pos[c])
        assert all(torch.isclose(others @ q, torch.tensor(1.0), atol=1e-5).any() for q in neg[c])
    # Hard-mixup only: unit vectors; class 2's positives can only come from its prototype.
    pos, neg = rebalanced_targets(
        feats, all_labels, protos, n_positive=4, n_negative=5, synthetic_ratio=1.0
    )
    assert torch.allclose(pos.norm(dim=-1), torch.ones(3, 4), atol=1e-5)
    assert torch.allclose(pos[2], protos[2].expand(4, -1), atol=1e-5)
    (pos.sum() + neg.sum()).backward()
    assert torch.isfinite(feats.grad).all()
    empty_pos, empty_neg = rebalanced_targets(
        feats, all_labels, protos, simple_sampling=False, hard_mixup=False
    )
    assert empty_pos.shape == (3, 0, 8) and empty_neg.shape == (3, 0, 8)


def test_hard_candidates_are_the_far_positives():
    # Class 0 members at growing angles from its prototype; with n_hard=1 every mixup
    # target is the farthest member.
    angles = torch.tensor([0.0, 0.3, 1.2])
    z = torch.stack([angles.cos(), angles.sin()], dim=1)
    proto = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    feats = torch.cat([z, proto])
    labels = torch.tensor([0, 0, 0, 0, 1])
    pos, _ = rebalanced_targets(
        feats, labels, proto, n_positive=3, n_negative=2, n_hard=1, synthetic_ratio=1.0
    )
    assert torch.allclose(pos[0], z[2].expand(3, -1), atol=1e-5)


def test_contrastive_loss_known_case_and_gradients():
    # Two anchors of one class, nothing else: each has one positive and no negative, so
    # softmax over one column = 1 and the loss is 0.
    z = F.normalize(torch.randn(2, 4), dim=1)
    assert float(rebalanced_contrastive_loss(z, torch.tensor([0, 0]))) == pytest.approx(
        0.0, abs=1e-6
    )
    # Known value: anchors e1, e1 (class 0), e2 (class 1), T = 1.
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    loss = rebalanced_contrastive_loss(a, torch.tensor([0, 0, 1]), temperature=1.0)
    expected = -np.log(np.e / (np.e + 1))  # anchors 0 and 1; anchor 2 has no positive
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert torch.isfinite(a.grad).all()
    # Targets and class weights.
    torch.manual_seed(0)
    anchors = F.normalize(torch.randn(7, 5), dim=1).requires_grad_()
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    pos, neg = rebalanced_targets(anchors, labels, anchors[-3:], n_positive=3, n_negative=4)
    weights = torch.tensor([1.0, 2.0, 3.0])
    loss = rebalanced_contrastive_loss(anchors, labels, pos, neg, class_weights=weights)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(anchors.grad).all()
    with pytest.raises(ValueError, match="temperature"):
        rebalanced_contrastive_loss(anchors, labels, temperature=0)


# Augmentation and make_imbalanced -----------------------------------------------------------


def test_augmentations():
    texts = ["one two three four five six", ("a b c", "d e f")]
    out = augment_texts(texts, "delete_swap", random_state=0)
    assert len(out) == 2 and isinstance(out[1], tuple)
    assert out == augment_texts(texts, "delete_swap", random_state=0)
    assert delete_swap("single", np.random.default_rng(0)) == "single"
    assert augment_texts(texts, None) == texts
    assert augment_texts(["x"], lambda ts: [t.upper() for t in ts]) == ["X"]
    with pytest.raises(ValueError, match="returned"):
        augment_texts(["x"], lambda ts: [])
    with pytest.raises(ValueError, match="augmentation must be"):
        augment_texts(["x"], "backtranslate")


def test_synonym_augmentation_or_clear_error(tmp_path):
    with pytest.raises(WordNetNotFoundError, match="apt-get install wordnet-base"):
        WordNet(tmp_path)
    try:
        wn = WordNet()
    except WordNetNotFoundError:
        pytest.skip("WordNet database files not installed")
    assert "automobile" in wn.synonyms("car")
    out = augment_texts(["the car is red"], "synonym", random_state=0, wordnet=wn)
    assert out[0] != "the car is red"


def test_make_imbalanced():
    y = np.repeat(np.array([3, 1, 2, 0]), [100, 90, 95, 100])
    texts = [f"t{i}" for i in range(len(y))]
    X_small, y_small = make_imbalanced(texts, y, imbalance_ratio=10, random_state=0)
    counts = {c: int((y_small == c).sum()) for c in (0, 1, 2, 3)}
    # Sorted by size (ties by label): 0, 3, 2, 1 -> 100, 100 * 10^(-1/3), ..., 10.
    assert counts == {0: 100, 3: 46, 2: 21, 1: 10}
    assert [int(t[1:]) for t in X_small] == sorted(int(t[1:]) for t in X_small)
    again = make_imbalanced(texts, y, imbalance_ratio=10, random_state=0)
    assert again[0] == X_small
    with pytest.raises(ValueError):
        make_imbalanced(texts, y, imbalance_ratio=0.5)


# The estimator -----------------------------------------------------------------------------


def test_fit_predict_contracts(fitted):
    clf, X, y = fitted
    assert list(clf.classes_) == ["econ", "pet", "sport"]
    pred = clf.predict(X)
    assert pred.shape == (len(X),) and set(pred) <= set(clf.classes_)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 3) and np.allclose(proba.sum(axis=1), 1)
    assert (clf.classes_[proba.argmax(1)] == pred).all()
    assert 0 <= clf.score(X, y) <= 1
    emb = clf.transform(X[:5])
    assert emb.shape == (5, 32) and emb.dtype == np.float32
    assert len(clf.loss_curve_) == clf.n_steps_ == 6 and clf.n_iter_ == 2
    assert np.isfinite(clf.loss_curve_).all()
    assert np.allclose(clf.class_prior_, [6 / 21, 12 / 21, 3 / 21])
    tags = clf.__sklearn_tags__()
    assert tags.input_tags.string and not tags.input_tags.two_d_array
    assert clf.predict([]).shape == (0,)


def test_learns_separable_toy_data(tiny_bert_dir):
    X, y = toy_data((8, 8, 8))
    clf = make_clf(tiny_bert_dir, max_epochs=6).fit(X, y)
    assert clf.score(X, y) >= 0.9


def test_input_validation(tiny_bert_dir, fitted):
    clf = make_clf(tiny_bert_dir)
    X, y = toy_data()
    with pytest.raises(TypeError, match="single string"):
        clf.fit("a text", y)
    with pytest.raises(ValueError, match="1-D"):
        clf.fit(X, np.stack([y, y], axis=1))
    with pytest.raises(ValueError, match="at least 2"):
        clf.fit(X, ["a"] * len(X))
    with pytest.raises(ValueError, match="different lengths"):
        clf.fit(X, y[:-1])
    with pytest.raises(ValueError, match="temperature"):
        make_clf(tiny_bert_dir, temperature=0).fit(X, y)
    with pytest.raises(TypeError, match="single string"):
        fitted[0].predict("a text")


def test_integer_labels_and_text_pairs(tiny_bert_dir):
    X, y = toy_data()
    y_int = np.array([{"pet": 10, "econ": -3, "sport": 7}[v] for v in y])
    clf = make_clf(tiny_bert_dir, max_epochs=1).fit(X, y_int)
    assert clf.classes_.tolist() == [-3, 7, 10] and set(clf.predict(X)) <= {-3, 7, 10}
    pairs = [(t, "label text") for t in X]
    clf = make_clf(tiny_bert_dir, max_epochs=1).fit(pairs, y)
    assert clf.predict(pairs[:3]).shape == (3,)
    with pytest.raises(ValueError, match="text pairs"):
        clf.predict(X[:2])


@pytest.mark.slow  # six tiny-BERT fits: 35-42 s on 2 busy cores
def test_logit_adjustment_balances_the_prior(tiny_bert_dir):
    # Identical texts: the model can only learn the class bias. Plain CE learns the
    # training prior; logit-adjusted CE learns uniform raw logits (the prior is in the loss).
    X = ["the same text"] * 40
    y = np.array([0] * 30 + [1] * 8 + [2] * 2)
    kw = dict(
        contrastive_weight=0.0,
        augmentation=None,
        max_epochs=150,
        batch_size=40,
        head_learning_rate=0.1,
        learning_rate=1e-6,
    )
    plain = make_clf(tiny_bert_dir, logit_adjustment=0.0, **kw).fit(X, y)
    adjusted = make_clf(tiny_bert_dir, logit_adjustment=1.0, **kw).fit(X, y)
    p_plain = plain.predict_proba(X[:1])[0]
    p_adj = adjusted.predict_proba(X[:1])[0]
    assert np.allclose(p_plain, [0.75, 0.2, 0.05], atol=0.06)
    assert np.allclose(p_adj, [1 / 3] * 3, atol=0.06)


@pytest.mark.parametrize(
    "params",
    [
        {"contrastive_weight": 0.0},
        {"contrastive_weight": 0.0, "augmentation": None},
        {"simple_sampling": False},
        {"hard_mixup": False},
        {"simple_sampling": False, "hard_mixup": False},
        {"prior_weighting": False, "logit_adjustment": 0.0},
        {"augmentation": None},
        {"augmentation": lambda texts: [t + " !" for t in texts]},
    ],
)
def test_options_and_ablations_train(tiny_bert_dir, params):
    X, y = toy_data()
    clf = make_clf(tiny_bert_dir, max_epochs=1, **params).fit(X, y)
    assert np.isfinite(clf.loss_curve_).all() and clf.predict(X[:2]).shape == (2,)


def test_single_view_modes_cost_one_pass_per_text(tiny_bert_dir, monkeypatch):
    X, y = toy_data()
    widths, terms = [], []
    original = SharpReCLClassifier._step

    def spy(self, batch, task):
        widths.append(len(batch))
        out = original(self, batch, task)
        terms.append(set(out))
        return out

    monkeypatch.setattr(SharpReCLClassifier, "_step", spy)
    make_clf(tiny_bert_dir, max_epochs=1, contrastive_weight=0.0, augmentation=None).fit(X, y)
    assert sum(widths) == len(X)
    widths.clear()
    make_clf(tiny_bert_dir, max_epochs=1).fit(X, y)
    assert sum(widths) == 2 * len(X)
    # the single-view SharpReCL: contrastive loss on, one encoder pass per text
    widths.clear()
    terms.clear()
    clf = make_clf(tiny_bert_dir, max_epochs=1, n_views=1).fit(X, y)
    assert sum(widths) == len(X)
    assert all("contrastive" in t for t in terms)
    assert np.isfinite(clf.loss_curve_).all()
    # ... which is the estimator's default (chosen on dev splits, docs/sharprecl.rst)
    assert SharpReCLClassifier().n_views == 1
    widths.clear()
    params = make_clf(tiny_bert_dir).get_params(deep=False)
    del params["n_views"]
    SharpReCLClassifier(**with_training(**{**params, "max_epochs": 1})).fit(X, y)
    assert sum(widths) == len(X)
    with pytest.raises(ValueError, match="n_views=1"):
        make_clf(tiny_bert_dir, max_epochs=1, n_views=1).fit(X, y, X_augmented=X)


def test_precomputed_augmented_views(tiny_bert_dir, monkeypatch):
    X, y = toy_data()
    X_aug = [t.upper() for t in X]
    seen = []
    import skxmc.sharprecl as mod

    def no_augmentation(*args, **kwargs):
        raise AssertionError("augmentation must not run when X_augmented is given")

    monkeypatch.setattr(mod, "augment_texts", no_augmentation)
    original = SharpReCLClassifier._prepare_fit

    def spy(self, texts, y_, rng, **kw):
        seen.append(kw["X_augmented"])
        return original(self, texts, y_, rng, **kw)

    monkeypatch.setattr(SharpReCLClassifier, "_prepare_fit", spy)
    clf = make_clf(tiny_bert_dir, max_epochs=1).fit(X, y, X_augmented=X_aug)
    assert seen[0] is X_aug and clf.n_steps_ == 3
    with pytest.raises(ValueError, match="X_augmented"):
        make_clf(tiny_bert_dir).fit(X, y, X_augmented=X_aug[:-1])


def test_pickle_and_save_load_roundtrip(fitted, tmp_path):
    clf, X, _ = fitted
    expected = clf.predict_proba(X)
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(restored.predict_proba(X), expected, rtol=1e-5, atol=1e-6)
    clf.save(tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").is_file()
    assert not list((tmp_path / "model").rglob("*.pkl")) and not list(
        (tmp_path / "model").rglob("*.bin")
    )
    loaded = skxmc.load(tmp_path / "model")
    assert type(loaded) is SharpReCLClassifier and plain_params(loaded) == plain_params(clf)
    np.testing.assert_allclose(loaded.predict_proba(X), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loaded.transform(X[:3]), clf.transform(X[:3]), rtol=1e-5, atol=1e-5)
    assert loaded.classes_.tolist() == clf.classes_.tolist()


def test_pickled_cuda_model_loads_on_cpu(fitted, monkeypatch):
    # A CUDA model cannot be built here; check the hook that moves tensors: __getstate__
    # must hand pickle CPU tensors whatever device the module is on.
    clf = fitted[0]
    state = clf.__getstate__()
    assert all(t.device.type == "cpu" for t in state["module_"].state_dict().values())
    assert "_trainer" not in state


def test_unavailable_device_falls_back_to_cpu(fitted):
    clf = pickle.loads(pickle.dumps(fitted[0]))
    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    clf.set_params(training__device="cuda")
    with pytest.warns(RuntimeWarning, match="predicting on CPU"):
        assert clf.predict(fitted[1][:2]).shape == (2,)


def test_clone_and_grid_search(tiny_bert_dir):
    X, y = toy_data((6, 6, 6))
    clf = make_clf(tiny_bert_dir, max_epochs=1)
    cloned = clone(clf)
    assert plain_params(cloned) == plain_params(clf) and not hasattr(cloned, "classes_")
    search = GridSearchCV(clf, {"temperature": [0.3, 0.5]}, cv=2, error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y)
    assert search.best_params_["temperature"] in (0.3, 0.5)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_choose_contrastive_weight_on_a_separate_dev_split(tiny_bert_dir):
    # The documented workflow: a dev split with the balance of the texts to predict,
    # scored by GridSearchCV through PredefinedSplit; the chosen value is refitted on the
    # training texts alone, so the dev texts never shift the training prior.
    from sklearn.model_selection import PredefinedSplit

    X, y = toy_data((12, 6, 3))
    X_dev, y_dev = toy_data((4, 4, 4), seed=1)
    search = GridSearchCV(
        make_clf(tiny_bert_dir, max_epochs=1),
        {"contrastive_weight": [0.1, 0.3]},
        scoring="f1_macro",
        cv=PredefinedSplit([-1] * len(X) + [0] * len(X_dev)),
        refit=False,
        error_score="raise",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(list(X) + list(X_dev), np.concatenate([y, y_dev]))
    assert search.n_splits_ == 1 and len(search.cv_results_["params"]) == 2
    chosen = search.best_params_["contrastive_weight"]
    scores = search.cv_results_["mean_test_score"]
    assert chosen == [0.1, 0.3][int(np.argmax(scores))]
    clf = make_clf(tiny_bert_dir, max_epochs=1, contrastive_weight=chosen).fit(X, y)
    assert np.allclose(np.sort(clf.class_prior_), np.array([3, 6, 12]) / 21)


def test_input_independent_sklearn_checks():
    from sklearn.utils.estimator_checks import (
        check_estimator_cloneable,
        check_estimator_repr,
        check_estimator_tags_renamed,
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
        check_set_params,
        check_valid_tag_types,
    )

    for check in (
        check_no_attributes_set_in_init,
        check_get_params_invariance,
        check_set_params,
        check_estimator_repr,
        check_estimator_cloneable,
        check_valid_tag_types,
        check_estimator_tags_renamed,
        check_parameters_default_constructible,
    ):
        check("SharpReCLClassifier", SharpReCLClassifier())


@pytest.mark.slow
def test_minilm_on_trec(minilm_dir):
    from skxmc.datasets import get_data_dir, load_text_jsonl

    data = get_data_dir()
    if data is None or not (data / "trec" / "train.jsonl.gz").is_file():
        pytest.skip("trec data set not found")
    X, y = load_text_jsonl(data / "trec" / "train.jsonl.gz")
    X_test, y_test = load_text_jsonl(data / "trec" / "test.jsonl.gz")
    X, y = make_imbalanced(X[:1500], y[:1500], imbalance_ratio=10, random_state=0)
    clf = SharpReCLClassifier(
        encoder=minilm_dir,
        pooling="mean",
        max_length=32,
        n_synthetic_negative=100,
        training=TrainingConfig(
            batch_size=32, max_epochs=3, head_learning_rate=1e-3, learning_rate=1e-4, random_state=0
        ),
    )
    clf.fit(X[:400], y[:400])
    assert clf.score(X_test[:200], y_test[:200]) > 0.5
    assert clf.transform(X_test[:2]).shape == (2, 384)


# Feature-step API: fit_transform, get_feature_names_out, set_output ------------------------


def test_column_transformer_with_pandas_output(tiny_bert_dir):
    pd = pytest.importorskip("pandas")
    from sklearn.compose import ColumnTransformer

    X, y = toy_data()
    df = pd.DataFrame({"text": X, "n": np.arange(len(X))}, index=np.arange(len(X)) + 100)
    ct = ColumnTransformer([("emb", make_clf(tiny_bert_dir, max_epochs=1), "text")])
    out = ct.set_output(transform="pandas").fit_transform(df, y)
    expected = [f"emb__sharpreclclassifier{i}" for i in range(32)]
    assert isinstance(out, pd.DataFrame) and out.columns.tolist() == expected
    assert out.index.tolist() == df.index.tolist()
    assert ct.get_feature_names_out().tolist() == expected
    # fit_transform is fit then transform, with the same seed.
    alone = make_clf(tiny_bert_dir, max_epochs=1).fit(df["text"], y)
    np.testing.assert_array_equal(out.to_numpy(), alone.transform(df["text"]))
    np.testing.assert_array_equal(ct.transform(df).to_numpy(), out.to_numpy())


def test_fit_transform_get_feature_names_out_and_set_output(tiny_bert_dir):
    pd = pytest.importorskip("pandas")
    from sklearn.exceptions import NotFittedError

    X, y = toy_data()
    views = [t + " ." for t in X]
    clf = make_clf(tiny_bert_dir, max_epochs=1)
    with pytest.raises(NotFittedError):
        clf.get_feature_names_out()
    # Fit parameters go through to fit.
    Z = clf.fit_transform(X, y, X_augmented=views)
    assert isinstance(Z, np.ndarray) and Z.shape == (len(X), 32) and Z.dtype == np.float32
    ref = make_clf(tiny_bert_dir, max_epochs=1).fit(X, y, X_augmented=views)
    np.testing.assert_array_equal(Z, ref.transform(X))
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    names = clf.get_feature_names_out()
    assert names.tolist() == [f"sharpreclclassifier{i}" for i in range(32)]
    # An iterator is read once.
    again = make_clf(tiny_bert_dir, max_epochs=1).fit_transform(iter(X), y, X_augmented=views)
    np.testing.assert_array_equal(again, Z)
    assert clf.set_output(transform="pandas") is clf
    out = clf.transform(pd.Series(X, index=np.arange(len(X)) * 2))
    assert isinstance(out, pd.DataFrame) and out.columns.tolist() == names.tolist()
    assert out.index.tolist() == list(range(0, 2 * len(X), 2))
    # The classifier side is unchanged by the output container.
    assert clf.predict(X).shape == (len(X),) and 0 <= clf.score(X, y) <= 1
    with pytest.raises(ValueError, match="y is required"):
        make_clf(tiny_bert_dir).fit_transform(X)


def test_still_a_classifier_with_transformer_tags():
    from sklearn.base import ClassifierMixin, is_classifier
    from sklearn.exceptions import SkipTestWarning
    from sklearn.utils import get_tags
    from sklearn.utils.estimator_checks import check_estimator

    clf = SharpReCLClassifier()
    tags = get_tags(clf)
    assert is_classifier(clf) and tags.estimator_type == "classifier"
    assert tags.classifier_tags is not None and tags.transformer_tags is not None
    assert tags.transformer_tags.preserves_dtype == []  # text in, float32 out
    assert SharpReCLClassifier.score is ClassifierMixin.score  # accuracy
    # String input: sklearn runs only its input-independent checks (the others are in
    # test_input_independent_sklearn_checks).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkipTestWarning)
        results = check_estimator(clf, on_skip=None, on_fail=None)
    assert results and all(r["status"] == "passed" for r in results)


def test_one_view_with_a_one_row_last_batch_trains(tiny_bert_dir):
    # 33 texts, batch_size=32, one view: the last batch would hold one row, on which the
    # heads' BatchNorm raises ("Expected more than 1 value per channel when training").
    X, y = toy_data((11, 11, 11))
    clf = make_clf(tiny_bert_dir, batch_size=32, n_views=1, max_epochs=1).fit(X, y)
    assert clf.predict(X).shape == (33,)


# Paper switches, the synthetic-ratio schedule, prototypes, the anchor mask -----------------

SWITCHES = [
    {"contrastive_weighting": "paper"},
    {"classifier_loss": "focal"},
    {"classifier_loss": "dice"},
    {"classifier_loss": "linear_probe"},
    {"prior_weighting": False},
    {"simple_sampling": False},
    {"hard_mixup": False},
    {"logit_adjustment": 0.0},
    {"contrastive_weight": 0.5},
    {"prototype_norm": "none"},
    {"normalize_logits": True},
]


@pytest.fixture(scope="module")
def first_step_loss(tiny_bert_dir):
    X, y = toy_data()
    return make_clf(tiny_bert_dir, max_steps=1).fit(X, y).loss_curve_[0]


@pytest.mark.parametrize(
    "switch", SWITCHES, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items())
)
def test_each_switch_changes_the_loss_on_the_same_batch(tiny_bert_dir, first_step_loss, switch):
    # Same seed, so the same initial weights, batch and sampled targets: the first step's
    # loss can differ only through the switch (it would be equal if it were ignored).
    X, y = toy_data()
    loss = make_clf(tiny_bert_dir, max_steps=1, **switch).fit(X, y).loss_curve_[0]
    assert np.isfinite(loss)
    assert abs(loss - first_step_loss) > 1e-4 * abs(first_step_loss)
    again = make_clf(tiny_bert_dir, max_steps=1, **switch).fit(X, y).loss_curve_[0]
    assert again == loss  # and not by chance: the run is deterministic


def test_normalize_logits_scores_with_unit_rows_and_the_raw_argmax(tiny_bert_dir):
    X, y = toy_data()
    clf = make_clf(tiny_bert_dir, max_steps=2, normalize_logits=True).fit(X, y)
    scores = clf.decision_function(X)
    np.testing.assert_allclose(np.linalg.norm(scores, axis=1), 1.0, rtol=1e-5)
    module = clf.module_
    module.normalize_logits = False  # the same weights, raw logits
    try:
        raw = clf.decision_function(X)
    finally:
        module.normalize_logits = True
    assert not np.allclose(raw, scores)
    np.testing.assert_array_equal(raw.argmax(axis=1), scores.argmax(axis=1))
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[raw.argmax(axis=1)])


def test_synthetic_ratio_schedule(tiny_bert_dir, monkeypatch):
    from skxmc import sharprecl

    assert sharprecl._synthetic_ratio(0, 10) == 0.5
    assert sharprecl._synthetic_ratio(5, 10) == 0.75
    assert sharprecl._synthetic_ratio(10, 10) == 1.0
    assert sharprecl._synthetic_ratio(15, 10) == 1.0  # capped
    seen = []
    original = sharprecl.rebalanced_targets

    def spy(*args, **kwargs):
        seen.append(kwargs["synthetic_ratio"])
        return original(*args, **kwargs)

    monkeypatch.setattr(sharprecl, "rebalanced_targets", spy)
    X, y = toy_data()  # 21 texts, batches of 8: 3 steps per epoch, 6 in all
    clf = make_clf(tiny_bert_dir).fit(X, y)
    assert clf.n_steps_ == 6
    np.testing.assert_allclose(seen, [0.5 + 0.5 * t / 6 for t in range(6)])


def test_prototypes_are_the_head_applied_to_the_classifier_weights(fitted):
    module = fitted[0].module_
    module.train()
    try:
        w = module.classifier.weight.detach().clone()
        with torch.no_grad():
            want = F.normalize(module.prototype_head(w), dim=1)
            got = module.prototypes()
        torch.testing.assert_close(got, want)
        assert got.shape == (3, 16)
        np.testing.assert_allclose(got.norm(dim=1).numpy(), 1.0, rtol=1e-5)
    finally:
        module.eval()


def test_the_anchor_mask_reaches_the_loss(tiny_bert_dir, monkeypatch):
    from skxmc import sharprecl

    seen = []
    original = sharprecl.rebalanced_contrastive_loss

    def spy(anchors, labels, positives, negatives, **kwargs):
        index = kwargs["positive_index"]
        assert index is not None and index.shape == positives.shape[:2]
        # every non-negative index names an anchor of the target's class
        for c in range(index.shape[0]):
            rows = index[c][index[c] >= 0]
            assert (labels[rows] == c).all()
        seen.append(kwargs["normalization"])
        return original(anchors, labels, positives, negatives, **kwargs)

    monkeypatch.setattr(sharprecl, "rebalanced_contrastive_loss", spy)
    X, y = toy_data()
    make_clf(tiny_bert_dir, max_steps=2).fit(X, y)
    make_clf(tiny_bert_dir, max_steps=1, contrastive_weighting="paper").fit(X, y)
    assert seen == ["mean", "mean", "sum"]


def test_linear_probe_is_the_minimiser_on_frozen_features(tiny_bert_dir, monkeypatch):
    terms = []
    original = SharpReCLClassifier._step

    def spy(self, batch, task):
        out = original(self, batch, task)
        terms.append(set(out))
        return out

    monkeypatch.setattr(SharpReCLClassifier, "_step", spy)
    X, y = toy_data()
    clf = make_clf(tiny_bert_dir, max_epochs=1, classifier_loss="linear_probe").fit(X, y)
    assert terms and all(t == {"loss", "contrastive"} for t in terms)  # no CE while training
    # The probe: logit-adjusted CE + ||W||^2 / (2n) on the frozen embeddings, at its minimum.
    feats = torch.as_tensor(clf.transform(X), dtype=torch.float64)
    targets = torch.as_tensor(np.searchsorted(clf.classes_, y))
    w = clf.module_.classifier.weight.detach().double().requires_grad_()
    b = clf.module_.classifier.bias.detach().double().requires_grad_()
    log_prior = torch.as_tensor(np.log(clf.class_prior_))
    loss = F.cross_entropy(feats @ w.T + b + log_prior, targets) + w.pow(2).sum() / (2 * len(X))
    loss.backward()
    assert float(w.grad.abs().max()) < 1e-3 and float(b.grad.abs().max()) < 1e-3
    np.testing.assert_allclose(
        clf.decision_function(X), (feats @ w.T + b).detach().numpy(), rtol=1e-4, atol=1e-4
    )
    with pytest.raises(ValueError, match="contrastive_weight > 0"):
        make_clf(tiny_bert_dir, classifier_loss="linear_probe", contrastive_weight=0).fit(X, y)


def test_linear_probe_reads_a_one_shot_generator_once(tiny_bert_dir):
    # The probe embeds the training texts after training: a generator, read by the
    # training loop, used to leave it nothing ("X and y have different lengths").
    X, y = toy_data()
    a = make_clf(tiny_bert_dir, max_steps=2, classifier_loss="linear_probe").fit(X, y)
    b = make_clf(tiny_bert_dir, max_steps=2, classifier_loss="linear_probe")
    b.fit((text for text in X), y)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-5)


def test_prototype_head_with_and_without_batch_norm():
    from skxmc.sharprecl import _projection_head

    torch.manual_seed(0)
    w = torch.randn(2, 8, requires_grad=True)  # two classes' weight rows
    with_bn, without = _projection_head(8, 4), _projection_head(8, 4, batch_norm=False)
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in with_bn)
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in without)
    # BatchNorm over two rows: the two prototypes' hidden units are exact opposites, about
    # +-1 unless the rows nearly agree, whatever the weights' size.
    hidden = with_bn[1](with_bn[0](w)).detach()
    torch.testing.assert_close(hidden[0], -hidden[1])
    assert (hidden.abs() > 0.99).float().mean() > 0.5
    scaled = with_bn[1](with_bn[0](10 * w)).detach()
    assert (scaled.abs() > 0.99).float().mean() >= (hidden.abs() > 0.99).float().mean()
    # Without it, the prototypes follow the weights' scale: the head is the plain MLP.
    x = w.detach()
    want = without[2](torch.relu(without[0](x)))
    torch.testing.assert_close(without(x), want)
