"""KNNBertClassifier and its queue contrastive loss (tiny BERT, CPU)."""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold

import skxmc
from skxmc.knnbert import KNNBertClassifier, _KNNBertModule, _MomentumContrast
from skxmc.losses import (
    batch_contrastive_loss,
    moco_contrastive_loss,
    queue_contrastive_loss,
    select_queue_positives,
)
from skxmc.text import load_encoder

from ._helpers import knnbert_toy_data as toy_data
from ._helpers import make_knnbert as make_clf
from ._helpers import plain_params, topic_texts

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir):
    X, y = toy_data()
    return make_clf(tiny_bert_dir).fit(X, y), X, y


# Loss --------------------------------------------------------------------------------------


def test_loss_known_case():
    # Anchor e1 of class 0; keys: e1 (class 0), e2 (class 1), an empty slot (-1). T = 1:
    # one row [1, 0] -> -log(e / (e + 1)).
    a = torch.tensor([[1.0, 0.0]], requires_grad=True)
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    loss = queue_contrastive_loss(
        a, torch.tensor([0]), keys, torch.tensor([0, 1, -1]), temperature=1.0
    )
    assert float(loss.detach()) == pytest.approx(-np.log(np.e / (np.e + 1)), rel=1e-5)
    loss.backward()
    assert torch.isfinite(a.grad).all() and a.grad.abs().sum() > 0
    # Two positives at cos 1 and 0, one negative at cos 0, T = 0.5: mean of two rows.
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    loss = queue_contrastive_loss(
        a, torch.tensor([0]), keys, torch.tensor([0, 0, 1]), temperature=0.5
    )
    row1 = -np.log(np.exp(2) / (np.exp(2) + 1))
    row2 = -np.log(1 / 2)
    assert float(loss.detach()) == pytest.approx((row1 + row2) / 2, rel=1e-5)
    # Unnormalised inputs are normalised; no negatives -> 0; no positives -> 0 with a graph.
    alone = queue_contrastive_loss(3 * a, torch.tensor([0]), 2 * keys[:1], torch.tensor([0]))
    assert float(alone.detach()) == pytest.approx(0.0, abs=1e-6)
    zero = queue_contrastive_loss(a, torch.tensor([1]), keys[:1], torch.tensor([0]))
    assert float(zero.detach()) == 0.0 and zero.requires_grad
    with pytest.raises(ValueError, match="temperature"):
        queue_contrastive_loss(a, torch.tensor([0]), keys, torch.tensor([0, 0, 1]), temperature=0)


def test_positive_selection_masks():
    sims = torch.tensor([[0.9, 0.1, 0.5, 0.7, -0.2, 0.3]])
    pos = torch.tensor([[True, True, True, False, True, True]])
    sel = select_queue_positives(sims, pos, n_most_similar=2, n_least_similar=1)
    assert sel.tolist() == [[True, False, True, False, True, False]]  # 0.9, 0.5 and -0.2
    # Fewer positives than asked: all of them, and never a non-positive.
    few = torch.tensor([[False, True, False, False, False, False]])
    assert select_queue_positives(sims, few, n_most_similar=3, n_least_similar=2).tolist() == [
        few[0].tolist()
    ]
    assert not select_queue_positives(sims, torch.zeros_like(pos)).any()
    # Gradients are finite with many anchors and an empty-slot queue.
    torch.manual_seed(0)
    a = torch.randn(6, 8, requires_grad=True)
    keys = torch.randn(20, 8)
    key_labels = torch.randint(-1, 3, (20,))
    loss = queue_contrastive_loss(
        a, torch.randint(0, 3, (6,)), keys, key_labels, n_most_similar=3, n_least_similar=1
    )
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(a.grad).all()


# Queue and momentum ------------------------------------------------------------------------


def test_queue_fifo_and_momentum(tiny_bert_loaded):
    import copy

    encoder = copy.deepcopy(tiny_bert_loaded[0])
    model = _KNNBertModule(encoder, "mean", 3, 0.0)
    module = _MomentumContrast(model, 5)  # the fit's key side; the model is untouched
    assert not any(n.startswith(("key_", "queue")) for n in model.state_dict())
    assert module.queue.shape == (5, 32) and (module.queue_labels == -1).all()
    keys = F.normalize(torch.randn(3, 32), dim=1)
    module.enqueue(keys, torch.tensor([0, 1, 2]), torch.tensor([10, 11, 12]))
    assert int(module.queue_ptr) == 3 and module.queue_indices.tolist() == [10, 11, 12, -1, -1]
    module.enqueue(keys, torch.tensor([0, 1, 2]), torch.tensor([13, 14, 15]))
    assert int(module.queue_ptr) == 1 and module.queue_indices.tolist() == [15, 11, 12, 13, 14]
    many = F.normalize(torch.randn(7, 32), dim=1)  # more than fit: the newest 5 stay
    module.enqueue(many, torch.zeros(7, dtype=torch.long), torch.arange(7))
    assert sorted(module.queue_indices.tolist()) == [2, 3, 4, 5, 6]
    assert torch.allclose(module.queue[0], many[-1]) and int(module.queue_ptr) == 1
    # Momentum: the key side moves by (1 - m) of the gap.
    with torch.no_grad():
        for p in module.encoder.parameters():
            p.add_(1.0)
    q = next(module.encoder.parameters()).detach().clone()
    k0 = next(module.key_encoder.parameters()).detach().clone()
    module.momentum_update(0.99)
    k1 = next(module.key_encoder.parameters())
    assert torch.allclose(k1, 0.99 * k0 + 0.01 * q, atol=1e-6)
    assert not torch.allclose(k1, q) and (k1 - k0).abs().max() < 0.02
    # The trained module holds the model's own parts, in the layout of 26aef59's
    # checkpoints (queue buffers first, then the query side, then the key side).
    assert module.encoder is model.encoder and module.projection is model.projection
    names = list(module.state_dict())
    assert names[:4] == ["queue", "queue_labels", "queue_indices", "queue_ptr"]
    assert names.index("projection.1.weight") < names.index(
        "key_encoder.embeddings.word_embeddings.weight"
    )


def test_training_fills_queue_and_updates_key_encoder_slowly(tiny_bert_dir, monkeypatch):
    X, y = toy_data()
    seen = {}
    original = KNNBertClassifier._finish_fit

    def spy(self, task):
        m = task.moco
        seen["labels"] = m.queue_labels.clone()
        seen["ptr"] = int(m.queue_ptr)
        gap = [
            (k - q).abs().max().item()
            for k, q in zip(m.key_encoder.parameters(), m.encoder.parameters())
        ]
        seen["gap"] = max(gap)
        seen["moved"] = max(
            (k - q0).abs().max().item() for k, q0 in zip(m.key_encoder.parameters(), initial)
        )
        seen["query_moved"] = max(
            (q - q0).abs().max().item() for q, q0 in zip(m.encoder.parameters(), initial)
        )
        return original(self, task)

    initial = [p.detach().clone() for p in load_encoder(tiny_bert_dir)[0].parameters()]
    monkeypatch.setattr(KNNBertClassifier, "_finish_fit", spy)
    clf = make_clf(tiny_bert_dir, queue_size=30, max_epochs=1, momentum=0.9).fit(X, y)
    # 18 texts in the initial pass + 3 steps x 6 anchors x 2 enqueued = 54 > 30: full queue.
    assert (seen["labels"] >= 0).all() and seen["ptr"] == (18 + 36) % 30
    # The key side moved, far less than the query side, and lags behind it.
    assert 0 < seen["moved"] < 0.5 * seen["query_moved"] and seen["gap"] > 0
    assert clf.memory_features_.shape == (30, 32) and clf.memory_indices_.max() < len(X)
    assert np.allclose(np.linalg.norm(clf.memory_features_, axis=1), 1, atol=1e-5)
    # Every memory entry's target is its training text's class.
    assert (clf.classes_[clf.memory_targets_] == y[clf.memory_indices_]).all()


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
    assert emb.shape == (5, 32) and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)
    assert len(clf.loss_curve_) == clf.n_steps_ == 6 and np.isfinite(clf.loss_curve_).all()
    assert not hasattr(clf.module_, "key_encoder")  # the key side is not kept
    assert clf.predict([]).shape == (0,) and clf.predict_proba([]).shape == (0, 3)
    tags = clf.__sklearn_tags__()
    assert tags.input_tags.string and not tags.input_tags.two_d_array


def test_integer_labels_and_text_pairs(tiny_bert_dir):
    X, y = toy_data()
    y_int = np.array([{"pet": 10, "econ": -3, "sport": 7}[v] for v in y])
    clf = make_clf(tiny_bert_dir, max_epochs=1).fit(X, y_int)
    assert clf.classes_.tolist() == [-3, 7, 10] and set(clf.predict(X)) <= {-3, 7, 10}
    pairs = [(t, "label text") for t in X]
    clf = make_clf(tiny_bert_dir, max_epochs=1).fit(pairs, y)
    assert clf.predict(pairs[:3]).shape == (3,) and clf.text_pairs_
    rows = clf.kneighbors(pairs[:2], return_distance=False)
    assert rows.shape == (2, 3)
    with pytest.raises(ValueError, match="text pairs"):
        clf.predict(X[:2])


def test_baseline_switches(tiny_bert_dir, monkeypatch):
    X, y = toy_data()
    calls = []
    import skxmc.knnbert as mod

    original = mod.queue_contrastive_loss
    monkeypatch.setattr(
        mod, "queue_contrastive_loss", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    base = make_clf(tiny_bert_dir, max_epochs=1, contrastive_weight=0.0, knn_weight=0.0).fit(X, y)
    assert not calls and not hasattr(base.module_, "key_encoder")
    logits = base._logits_and_embeddings(X)[0]
    softmax = torch.softmax(torch.as_tensor(logits, dtype=torch.float64), dim=1).numpy()
    np.testing.assert_allclose(base.predict_proba(X), softmax, rtol=1e-6)
    # Without a queue the kNN memory is the training texts (queue_size of them at most).
    assert base.memory_features_.shape == (len(X), 32)
    small = make_clf(tiny_bert_dir, max_epochs=1, contrastive_weight=0.0, queue_size=5).fit(X, y)
    assert small.memory_indices_.shape == (5,)
    make_clf(tiny_bert_dir, max_epochs=1).fit(X, y)
    assert len(calls) == 3


def test_batch_contrastive_loss_matches_its_definition():
    torch.manual_seed(0)
    f = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1, 1, 2])
    loss = batch_contrastive_loss(f, y, temperature=0.5)
    z = F.normalize(f, dim=1)
    expected = []
    for i in range(6):
        others = [a for a in range(6) if a != i]
        positives = [p for p in others if y[p] == y[i]]
        if not positives:
            continue
        denom = torch.logsumexp(torch.stack([z[i] @ z[a] / 0.5 for a in others]), 0)
        expected.append(torch.stack([denom - z[i] @ z[p] / 0.5 for p in positives]).mean())
    torch.testing.assert_close(loss.double(), torch.stack(expected).mean(), rtol=1e-5, atol=1e-6)
    loss.backward()
    assert torch.isfinite(f.grad).all() and f.grad.abs().sum() > 0
    lone = batch_contrastive_loss(torch.randn(3, 4, requires_grad=True), torch.tensor([0, 1, 2]))
    assert float(lone) == 0.0 and lone.requires_grad
    with pytest.raises(ValueError, match="temperature"):
        batch_contrastive_loss(f, y, temperature=0.0)


def test_in_batch_contrastive_keys_train_without_a_queue(tiny_bert_dir, monkeypatch):
    import skxmc.knnbert as mod

    X, y = topic_texts((12, 12, 12))
    calls = []
    original = mod.batch_contrastive_loss
    monkeypatch.setattr(
        mod, "batch_contrastive_loss", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    clf = make_clf(tiny_bert_dir, max_epochs=1, contrastive_keys="batch").fit(X, y)
    assert calls and len(calls) == clf.n_steps_
    assert not hasattr(clf.module_, "key_encoder") and np.isfinite(clf.loss_curve_).all()
    # No queue: the kNN memory holds training texts encoded by the final model.
    assert clf.memory_features_.shape[0] == min(len(X), clf.queue_size)
    assert clf.predict(X).shape == (len(X),)


def test_knn_only_matches_kneighbors(fitted):
    clf, X, y = fitted
    knn = clone(clf).set_params(knn_weight=1.0)
    knn.__dict__.update({k: v for k, v in vars(clf).items() if k.endswith("_")})
    proba = knn.predict_proba(X)
    sims, rows, labels = knn.kneighbors(X, return_labels=True)
    assert sims.shape == rows.shape == labels.shape == (len(X), 3)
    assert (np.diff(sims, axis=1) <= 1e-6).all()  # decreasing similarity
    for i in range(len(X)):
        votes = np.array([(labels[i] == c).mean() for c in knn.classes_])
        np.testing.assert_allclose(proba[i], votes)
    assert (labels == y[rows]).all()
    # The nearest neighbour of a training text is that text (its own feature).
    train_clf = clone(clf).set_params(knn_memory="train", knn_weight=1.0, training__max_epochs=1)
    train_clf.fit(X, y)
    sims, rows = train_clf.kneighbors(X, n_neighbors=1)
    assert (rows[:, 0] == np.arange(len(X))).mean() > 0.8 and sims.max() <= 1 + 1e-5
    assert train_clf.kneighbors(X[:2], n_neighbors=50, return_distance=False).shape == (2, len(X))
    for bad in (0, True, 2.0):  # True is an int to Python, not a count to a user
        with pytest.raises(ValueError, match="n_neighbors must be a positive int"):
            train_clf.kneighbors(X[:2], n_neighbors=bad)


def test_learns_separable_toy_data(tiny_bert_dir):
    X, y = toy_data((8, 8, 8))
    clf = make_clf(tiny_bert_dir, max_epochs=5, knn_memory="train").fit(X, y)
    assert clf.score(X, y) >= 0.9


def test_pickle_and_save_load_roundtrip(fitted, tmp_path):
    clf, X, _ = fitted
    expected = clf.predict_proba(X)
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(restored.predict_proba(X), expected, rtol=1e-5, atol=1e-6)
    clf.save(tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").is_file()
    assert not list((tmp_path / "model").rglob("*.pkl"))
    loaded = skxmc.load(tmp_path / "model")
    assert type(loaded) is KNNBertClassifier and plain_params(loaded) == plain_params(clf)
    np.testing.assert_allclose(loaded.predict_proba(X), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(loaded.memory_targets_, clf.memory_targets_)
    np.testing.assert_array_equal(loaded.kneighbors(X[:3])[1], clf.kneighbors(X[:3])[1])


def test_clone_grid_search_and_validation(tiny_bert_dir):
    X, y = toy_data((6, 6, 6))
    clf = make_clf(tiny_bert_dir, max_epochs=1)
    cloned = clone(clf)
    assert plain_params(cloned) == plain_params(clf) and not hasattr(cloned, "classes_")
    grid = [0.0, 1.0]  # the classifier alone, the kNN vote alone
    search = GridSearchCV(clf, {"knn_weight": grid}, cv=2, error_score="raise")
    # The same folds by hand (a classifier's cv=2 is an unshuffled StratifiedKFold): the
    # search's scores must be these fits' accuracies, and its choice their best.
    # knn_weight only weighs the prediction, so one fit per fold scores every value.
    manual = np.zeros((len(grid), 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y)
        for f, (train, test) in enumerate(StratifiedKFold(2).split(X, y)):
            model = clone(clf).fit([X[i] for i in train], y[train])
            for g, value in enumerate(grid):
                model.set_params(knn_weight=value)
                manual[g, f] = model.score([X[i] for i in test], y[test])
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], manual.mean(1), atol=1e-12)
    assert search.best_params_["knn_weight"] == grid[int(np.argmax(manual.mean(1)))]
    # the two values score apart on these folds: a search that ignored the parameter
    # could not give both means
    assert manual.mean(1)[0] != manual.mean(1)[1]
    assert search.best_estimator_.knn_weight == search.best_params_["knn_weight"]
    for bad in (
        {"knn_weight": 1.5},
        {"contrastive_weight": -0.1},
        {"temperature": 0},
        {"knn_memory": "all"},
    ):
        with pytest.raises(ValueError):
            make_clf(tiny_bert_dir, **bad).fit(X, y)


def test_input_independent_sklearn_checks():
    from sklearn.utils.estimator_checks import (
        check_estimator_cloneable,
        check_estimator_repr,
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
        check_set_params,
    )

    for check in (
        check_no_attributes_set_in_init,
        check_get_params_invariance,
        check_set_params,
        check_estimator_repr,
        check_estimator_cloneable,
        check_parameters_default_constructible,
    ):
        check("KNNBertClassifier", KNNBertClassifier())


# pandas and 2-D inputs, feature-step API ----------------------------------------------------


def test_one_column_dataframe_and_2d_array_give_one_prediction_per_row(fitted):
    pd = pytest.importorskip("pandas")
    knn, X, y = fitted
    df = pd.DataFrame({"text": X, "other": X, "n": np.arange(len(X))})
    pred = knn.predict(df[["text"]])
    assert len(pred) == len(df)
    np.testing.assert_array_equal(pred, knn.predict(df["text"]))
    np.testing.assert_array_equal(knn.predict(np.asarray(X)[:, None]), pred)
    np.testing.assert_allclose(knn.predict_proba(df[["text"]]), knn.predict_proba(X))
    assert knn.score(df[["text"]], y) == knn.score(X, y)
    with pytest.raises(ValueError, match=r"X is a DataFrame with 3 columns.*X\['text'\]"):
        knn.predict(df)
    with pytest.raises(ValueError, match=r"different lengths \(18 and 17\)"):  # not 3 rows
        make_clf(knn.encoder).fit(df[["text"]], y[:-1])
    # A two-column table holds text pairs, which this model was not trained on.
    with pytest.raises(ValueError, match="trained on single texts; X holds text pairs"):
        knn.predict(df[["text", "other"]])


def test_transform_as_a_feature_step_with_pandas_output(fitted):
    pd = pytest.importorskip("pandas")
    from sklearn import config_context

    knn, X, _ = fitted
    names = knn.get_feature_names_out()
    assert names.tolist() == [f"knnbertclassifier{i}" for i in range(32)]
    series = pd.Series(X[:4], index=[7, 8, 9, 10])
    with config_context(transform_output="pandas"):
        out = knn.transform(series)
        # Internal users of the embeddings are not affected by the output container.
        sims, rows = knn.kneighbors(X[:2])
        np.testing.assert_array_equal(knn.predict(X[:4]), knn.predict(series))
    assert isinstance(out, pd.DataFrame) and out.columns.tolist() == names.tolist()
    assert out.index.tolist() == [7, 8, 9, 10]
    np.testing.assert_allclose(out.to_numpy(), knn.transform(X[:4]))
    np.testing.assert_array_equal(rows, knn.kneighbors(X[:2])[1])
    assert isinstance(sims, np.ndarray)


# SCL-MoCo (contrastive_keys="moco") ---------------------------------------------------------


def _naive_moco_loss(anchors, labels, positives, keys, key_labels, temperature):
    """SCL-MoCo's loss anchor by anchor, in float64: -log of the positive's softmax share
    among [positive, other-class queue keys]."""
    total = []
    for i in range(len(anchors)):
        a = anchors[i] / anchors[i].norm()
        s_pos = a @ (positives[i] / positives[i].norm()) / temperature
        s_neg = []
        for j in range(len(keys)):
            if key_labels[j] >= 0 and key_labels[j] != labels[i]:
                s_neg.append(a @ (keys[j] / keys[j].norm()) / temperature)
        if not s_neg:
            total.append(a.sum() * 0.0)
            continue
        denom = torch.exp(s_pos) + sum(torch.exp(v) for v in s_neg)
        total.append(-torch.log(torch.exp(s_pos) / denom))
    return torch.stack(total).mean()


def test_moco_contrastive_loss_matches_a_naive_float64_loop():
    g = torch.Generator().manual_seed(0)
    anchors = torch.randn(7, 5, generator=g, dtype=torch.float64)
    positives = torch.randn(7, 5, generator=g, dtype=torch.float64)
    keys = torch.randn(12, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 0, 1, 3, 2])
    key_labels = torch.tensor([0, 1, 1, 2, -1, 0, 2, 1, 0, -1, 2, 1])  # class 3: none in queue
    a_fast = anchors.clone().requires_grad_(True)
    a_naive = anchors.clone().requires_grad_(True)
    fast = moco_contrastive_loss(a_fast, labels, positives, keys, key_labels, temperature=0.3)
    naive = _naive_moco_loss(a_naive, labels, positives, keys, key_labels, 0.3)
    assert float(fast.detach()) == pytest.approx(float(naive.detach()), rel=1e-5)
    fast.backward()
    naive.backward()
    np.testing.assert_allclose(a_fast.grad.numpy(), a_naive.grad.numpy(), rtol=1e-4, atol=1e-6)
    # Queue keys of the anchor's own class are neither positives nor negatives.
    moved = keys.clone()
    moved[0] = torch.randn(5, generator=g, dtype=torch.float64)  # a class-0 key
    only_class_0 = labels == 0
    a, p = anchors[only_class_0], positives[only_class_0]
    before = moco_contrastive_loss(a, labels[only_class_0], p, keys, key_labels)
    after = moco_contrastive_loss(a, labels[only_class_0], p, moved, key_labels)
    assert float(before) == pytest.approx(float(after), rel=1e-6)
    # Gradients reach the anchors only; an anchor without negatives gives 0 and finite grads.
    p = positives.clone().requires_grad_(True)
    lone = anchors[:1].clone().requires_grad_(True)
    out = moco_contrastive_loss(lone, torch.tensor([0]), p[:1], keys[:1], torch.tensor([0]))
    out.backward()
    assert float(out.detach()) == 0.0 and torch.isfinite(lone.grad).all() and p.grad is None
    with pytest.raises(ValueError, match="positive_keys"):
        moco_contrastive_loss(anchors, labels, positives[:3], keys, key_labels)
    with pytest.raises(ValueError, match="temperature"):
        moco_contrastive_loss(anchors, labels, positives, keys, key_labels, temperature=0)


def test_scl_moco_switch_changes_the_loss_on_the_same_batch(tiny_bert_dir, monkeypatch):
    import skxmc.knnbert as mod

    X, y = toy_data()
    calls = {"moco": 0, "queue": 0}
    moco, queue = mod.moco_contrastive_loss, mod.queue_contrastive_loss

    def spy(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(mod, "moco_contrastive_loss", spy("moco", moco))
    monkeypatch.setattr(mod, "queue_contrastive_loss", spy("queue", queue))
    ptr = {}
    original = KNNBertClassifier._finish_fit

    def record_ptr(self, task):
        ptr["value"] = int(task.moco.queue_ptr)
        return original(self, task)

    monkeypatch.setattr(KNNBertClassifier, "_finish_fit", record_ptr)
    # One step each, same seed: same initial weights, same first batch, same queue.
    knn = make_clf(tiny_bert_dir, max_steps=1).fit(X, y)
    assert calls == {"moco": 0, "queue": 1}
    again = make_clf(tiny_bert_dir, max_steps=1).fit(X, y)
    assert again.loss_curve_ == knn.loss_curve_  # the control: same switch, same loss
    scl_moco = make_clf(tiny_bert_dir, max_steps=1, contrastive_keys="moco").fit(X, y)
    assert calls == {"moco": 1, "queue": 2}
    assert scl_moco.loss_curve_[0] != pytest.approx(knn.loss_curve_[0], rel=1e-4)
    # ... and so do the gradients: the weights after that one step differ.
    moved = [
        (a - b).abs().max().item()
        for a, b in zip(
            knn.module_.projection.parameters(), scl_moco.module_.projection.parameters()
        )
    ]
    assert max(moved) > 0
    # The positive keys drawn for the 6 anchors (2 per anchor) were enqueued after the
    # initial pass over the 18 texts; with none to enqueue, one positive is still drawn.
    assert ptr["value"] == 18 + 6 * 2
    make_clf(tiny_bert_dir, max_steps=1, contrastive_keys="moco", n_enqueue_per_anchor=0).fit(X, y)
    assert ptr["value"] == 18 and calls["moco"] == 2
    # Positive selection is not part of SCL-MoCo: n_most_similar does not change it.
    other = make_clf(tiny_bert_dir, max_steps=1, contrastive_keys="moco", n_most_similar=1).fit(
        X, y
    )
    assert other.loss_curve_ == scl_moco.loss_curve_


@pytest.fixture(scope="module")
def three_steps(tiny_bert_dir):
    """The default model after three steps: the momentum update first changes the keys
    enqueued at step 2, which first enter the loss at step 3."""
    X, y = toy_data()
    return make_clf(tiny_bert_dir, max_steps=3).fit(X, y), X, y


def test_a_refit_with_the_same_settings_gives_the_same_loss_curve(three_steps, tiny_bert_dir):
    # The control of the switch tests below, run once rather than once per switch.
    default, X, y = three_steps
    assert make_clf(tiny_bert_dir, max_steps=3).fit(X, y).loss_curve_ == default.loss_curve_


@pytest.mark.parametrize(
    "switch",
    [
        {"contrastive_keys": "batch"},
        {"contrastive_keys": "moco"},
        {"contrastive_weight": 0.2},
        {"n_most_similar": 1},
        {"n_least_similar": 0},
        {"temperature": 0.5},
        {"momentum": 0.5},
        {"n_enqueue_per_anchor": 1},
    ],
)
def test_each_training_switch_changes_the_loss(three_steps, tiny_bert_dir, switch):
    # Same seed: same initial weights and batches; the losses must change with the switch
    # (they would not if it were ignored; the refit control is the test above).
    default, X, y = three_steps
    switched = make_clf(tiny_bert_dir, max_steps=3, **switch).fit(X, y)
    assert not np.allclose(switched.loss_curve_, default.loss_curve_, rtol=1e-6, atol=0)


def test_each_prediction_switch_changes_the_prediction(three_steps):
    default, X, _ = three_steps
    proba = default.predict_proba(X)  # knn_weight=0.5, the 3 nearest of 40 entries vote
    for switch in ({"knn_weight": 0.0}, {"knn_weight": 1.0}, {"n_neighbors": 30}):
        other = clone(default).set_params(**switch)
        other.__dict__.update({k: v for k, v in vars(default).items() if k.endswith("_")})
        assert not np.allclose(other.predict_proba(X), proba), switch


def test_stopped_fit_resumes_with_the_key_side_and_queue(tiny_bert_dir, fitted, tmp_path):
    # The key side and the queue live in the fit's task, not on the model; the trainer
    # checkpoints them with the model, so a resumed fit ends with the uninterrupted one
    # (the module's fitted model: make_clf's defaults on toy_data()).
    full, X, y = fitted
    part = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path, max_time=1e-9).fit(X, y)
    assert part.n_steps_ == 1 and not hasattr(part.module_, "key_encoder")
    resumed = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    assert resumed.n_steps_ == full.n_steps_
    np.testing.assert_array_equal(resumed.memory_features_, full.memory_features_)
    np.testing.assert_array_equal(resumed.predict_proba(X), full.predict_proba(X))


def test_explain_gives_probabilities_votes_and_neighbors(fitted):
    clf, X, y = fitted
    proba = clf.predict_proba(X[:4])
    sims, rows, labels = clf.kneighbors(X[:4], return_labels=True)
    explained = clf.explain(X[:4], k=2)
    assert len(explained) == 4
    for i, row in enumerate(explained):
        assert len(row) == 2
        order = np.argsort(-proba[i], kind="stable")[:2]
        assert [e.label for e in row] == list(clf.classes_[order])
        for e in row:
            c = list(clf.classes_).index(e.label)
            assert e.score == pytest.approx(proba[i, c], rel=1e-5, abs=1e-7)
            phi = clf.knn_weight
            assert e.score == pytest.approx(phi * e.vote + (1 - phi) * e.classifier, rel=1e-6)
            # its neighbours are the voters of its class, nearest first
            same = labels[i] == e.label
            assert [n.training_row for n in e.neighbors] == rows[i][same].tolist()
            assert [n.similarity for n in e.neighbors] == pytest.approx(sims[i][same].tolist())
            assert e.vote == pytest.approx(len(e.neighbors) / clf.n_neighbors)
            assert all(y[n.training_row] == e.label for n in e.neighbors)
            assert json.loads(json.dumps(e.to_dict()))["label"] == e.label
    with pytest.raises(ValueError, match="k must be a positive int"):
        clf.explain(X[:1], k=0)
    assert len(clf.explain(X[:1], k=50)[0]) == len(clf.classes_)
