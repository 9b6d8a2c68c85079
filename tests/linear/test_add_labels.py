"""Adding labels to a fitted model: ``XRLinearClassifier.add_labels``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import skxmc
from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import make_xmc_classification

N_NEW = 6  # labels held out of the base fit and added afterwards


@pytest.fixture(scope="module")
def data():
    X, Y = make_xmc_classification(400, 300, 48, random_state=0)
    Y = sp.csr_matrix(Y)
    names = np.array([f"L{j:02d}" for j in range(Y.shape[1])], dtype=object)
    sets = [names[Y.indices[a:b]].tolist() for a, b in zip(Y.indptr[:-1], Y.indptr[1:])]
    new = set(names[::8][:N_NEW].tolist())  # spread over the label range: sorted merge
    old_sets = [[lab for lab in s if lab not in new] for s in sets]
    new_sets = [[lab for lab in s if lab in new] for s in sets]
    return X, old_sets, new_sets, sorted(new)


def _clf(**kw):
    # three layers, so that the inner layers and the routing are exercised
    tree = HierarchicalLabelTree(max_leaf_size=4, branching_factor=4)
    return XRLinearClassifier(tree=tree, top_k=5, **kw)


@pytest.fixture(scope="module")
def base(data):
    X, old_sets, _, _ = data
    return _clf().fit(X, old_sets)


@pytest.fixture(scope="module")
def added(data, base):
    X, _, new_sets, _ = data
    return pickle.loads(pickle.dumps(base)).add_labels(X, new_sets)


def test_classes_grow_sorted_and_the_state_stays_consistent(data, base, added):
    _, _, _, new = data
    assert len(base.tree_.cluster_chain_) == 3
    assert added.classes_.dtype == object
    assert added.classes_.tolist() == sorted(base.classes_.tolist() + new)
    assert added.tree_.classes_ is added.classes_
    assert added.tree_.n_labels_ == len(added.classes_)
    C = added.tree_.cluster_chain_[-1]
    assert C.shape == (len(added.classes_), base.tree_.cluster_chain_[-1].shape[1])
    assert np.array_equal(C.indices, added.tree_.leaf_assignment_)
    assert added.weights_[-1].shape == (base.n_features_in_ + 1, len(added.classes_))
    # the inner layers are the base model's, untouched
    for Wa, Wb in zip(added.weights_[:-1], base.weights_[:-1]):
        assert (Wa != Wb).nnz == 0
    for Ca, Cb in zip(added.tree_.cluster_chain_[:-1], base.tree_.cluster_chain_[:-1]):
        assert (Ca != Cb).nnz == 0
    # the old labels' columns are the base model's, under their new column numbers
    cols = np.searchsorted(added.classes_, base.classes_)
    assert (added.weights_[-1][:, cols] != base.weights_[-1]).nnz == 0
    assert np.array_equal(added.tree_.leaf_assignment_[cols], base.tree_.leaf_assignment_)
    assert (added.n_labels_added_, added.label_drift_) == (N_NEW, N_NEW / len(added.classes_))
    assert (base.n_labels_added_, base.label_drift_) == (0, 0.0)  # base was not changed
    added._check_complete()


def test_old_labels_score_exactly_as_before(data, base, added):
    X, _, _, new = data
    # every old label keeps its exact path score (beam or not): no old node was retrained
    old = base.classes_
    before = base.predict_topk(X[:50], k=len(old), labels=old)
    after = added.predict_topk(X[:50], k=len(old), labels=old)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    # the beam's top-k among the old labels is the base model's top-k: the new labels can
    # only enter it, never reorder or drop old ones
    k = 5
    base_top = base.predict_topk(X, k=k)
    wide_labels, wide_scores = added.predict_topk(X, k=k + N_NEW)
    for i in range(X.shape[0]):
        keep = [j for j, lab in enumerate(wide_labels[i]) if lab not in new][:k]
        assert wide_labels[i][keep].tolist() == base_top[0][i].tolist()
        assert np.array_equal(wide_scores[i][keep], base_top[1][i])


@pytest.fixture(scope="module")
def full(data):
    X, old_sets, new_sets, _ = data
    return _clf().fit(X, [a + b for a, b in zip(old_sets, new_sets)])


def test_rows_with_only_old_labels_keep_their_top_k_nearly(data, base, added, full):
    X, _, new_sets, new = data
    rows = [i for i, s in enumerate(new_sets) if not s]

    # their top 5 changes only where a new label enters it (exactly so, see the test
    # above), and less often than a full refit on all labels puts one there
    def share_with_new(clf):
        top = clf.predict_topk(X[rows], k=5)[0]
        return np.mean([bool(set(t) & set(new)) for t in top.tolist()])

    b = base.predict_topk(X[rows], k=5)[0]
    a = added.predict_topk(X[rows], k=5)[0]
    changed = np.mean([set(x) != set(y) for x, y in zip(a.tolist(), b.tolist())])
    assert changed == share_with_new(added)
    assert changed <= share_with_new(full) + 0.05, (changed, share_with_new(full))


def _new_hits(clf, X, new_sets):
    """Share of the rows carrying a new label that get one of theirs in the top 5."""
    rows = [i for i, s in enumerate(new_sets) if s]
    top = clf.predict_topk(X[rows], k=5)[0]
    return np.mean([bool(set(new_sets[i]) & set(t)) for i, t in zip(rows, top.tolist())])


def test_new_labels_are_predicted_for_the_rows_that_carry_them(data, added, full):
    X, _, new_sets, new = data
    hits, full_hits = _new_hits(added, X, new_sets), _new_hits(full, X, new_sets)
    assert hits >= 0.8 * full_hits, (hits, full_hits)
    assert hits >= 0.5
    # each new label is placed where the beam of its rows goes: its leaf cluster is in
    # the beam of most of the rows that carry it
    leaf_scores = added._search(
        added._validate_X(X), top_k=added.beam_size, n_layers=len(added.tree_.cluster_chain_) - 1
    )
    cols = np.searchsorted(added.classes_, new)
    for label, col in zip(new, cols):
        leaf = added.tree_.leaf_assignment_[col]
        carriers = [i for i, s in enumerate(new_sets) if label in s]
        reached = np.mean([leaf in leaf_scores[i].indices for i in carriers])
        assert reached >= 0.5, (label, reached)


def test_integer_indicator_labels_are_appended(data):
    X, _, _, _ = data
    Y = sp.csr_matrix(make_xmc_classification(400, 300, 48, random_state=0)[1])
    clf = _clf().fit(X, Y[:, :40])
    clf.add_labels(X, Y[:, 40:])
    assert clf.classes_.tolist() == list(range(48)) and clf.classes_.dtype.kind == "i"
    out = clf.predict(X[:3])
    assert out.shape == (3, 48)  # the indicator output has the new columns
    clf.add_labels(X, Y[:, 40:42], classes=[100, 101])
    assert clf.classes_[-2:].tolist() == [100, 101]
    assert clf.n_labels_added_ == 10 and clf.label_drift_ == 10 / 50
    clf.fit(X, Y[:, :40])
    assert (clf.n_labels_added_, clf.label_drift_) == (0, 0.0)


def test_a_user_given_class_order_keeps_the_new_labels_at_the_end(data):
    X, old_sets, new_sets, new = data
    order = sorted({lab for s in old_sets for lab in s}, reverse=True)
    clf = _clf(classes=order).fit(X, old_sets).add_labels(X, new_sets)
    assert clf.classes_.tolist() == order + new


def test_one_leaf_tree(data):
    X, old_sets, new_sets, new = data
    tree = HierarchicalLabelTree(max_leaf_size=100)
    clf = XRLinearClassifier(tree=tree, top_k=5).fit(X, old_sets)
    assert len(clf.tree_.cluster_chain_) == 1
    clf.add_labels(X, new_sets)
    assert set(new) <= set(clf.classes_.tolist())
    rows = [i for i, s in enumerate(new_sets) if s]
    top = clf.predict_topk(X[rows], k=5)[0]
    assert np.mean([bool(set(new_sets[i]) & set(t)) for i, t in zip(rows, top.tolist())]) > 0.8


def test_save_load_add_labels_and_save_in_place(data, base, added, tmp_path):
    X, _, new_sets, _ = data
    path = tmp_path / "model"
    skxmc.save(base, path)
    model = skxmc.load(path)
    model.add_labels(X, new_sets)
    skxmc.save(model, path, overwrite=True)
    again = skxmc.load(path)
    for clf in (model, again, skxmc.load(path, mmap=True), pickle.loads(pickle.dumps(added))):
        labels, scores = clf.predict_topk(X[:40])
        ref_labels, ref_scores = added.predict_topk(X[:40])
        assert np.array_equal(labels, ref_labels) and np.array_equal(scores, ref_scores)
    assert (again.n_labels_added_, again.label_drift_) == (
        added.n_labels_added_,
        added.label_drift_,
    )


def test_a_saved_pipeline_is_updated_in_place(tmp_path):
    # the recipe of the docs: load, add_labels on the last step, save over the folder
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc.pipeline import make_pipeline

    texts = [
        "cheap flights rome",
        "rome hotel deals",
        "python sparse matrix",
        "numpy matrix product",
        "hotel in paris",
        "flights to paris",
    ] * 3
    labels = [["travel"], ["travel"], ["code"], ["code"], ["travel"], ["travel"]] * 3
    path = tmp_path / "pipe"
    skxmc.save(
        make_pipeline(TfidfVectorizer(), XRLinearClassifier(top_k=2)).fit(texts, labels), path
    )
    model = skxmc.load(path)
    new = [["france"] if "paris" in t else [] for t in texts]
    model[-1].add_labels(model[:-1].transform(texts), new)
    skxmc.save(model, path, overwrite=True)
    again = skxmc.load(path)
    assert again[-1].classes_.tolist() == ["code", "france", "travel"]
    assert "france" in again.predict_topk(["hotel in paris"], k=2)[0][0].tolist()


def test_verbose_prints_the_drift(data, base, capsys):
    X, _, new_sets, _ = data
    clf = pickle.loads(pickle.dumps(base))
    clf.set_params(verbose=1).add_labels(X, new_sets)
    out = capsys.readouterr().out
    assert "add_labels: 6 new labels" in out and "label drift 0.125" in out


def test_bad_inputs_raise_naming_the_argument(data, base):
    X, _, new_sets, _ = data
    clf = pickle.loads(pickle.dumps(base))
    with pytest.raises(ValueError, match=r"already in classes_.*'L01'"):
        clf.add_labels(X, [[*s, "L01"] for s in new_sets])
    with pytest.raises(ValueError, match="Y"):
        clf.add_labels(X, new_sets[:-1])
    with pytest.raises(ValueError, match="features"):
        clf.add_labels(X[:, :-1], new_sets)
    with pytest.raises(ValueError, match="classes=.*name the columns"):
        clf.add_labels(X, np.ones((X.shape[0], 2), dtype=int))
    with pytest.raises(ValueError, match="pass classes=None"):
        clf.add_labels(X, new_sets, classes=["x"])
    with pytest.raises(ValueError, match="classes has 1 labels but .* 2 columns"):
        clf.add_labels(X, np.ones((X.shape[0], 2), dtype=int), classes=["x"])
    with pytest.raises(ValueError, match="no positive row in Y.*'zz'"):
        clf.add_labels(X, np.eye(X.shape[0], 2, dtype=int)[:, ::-1] * [0, 1], classes=["zz", "yy"])
    with pytest.raises(ValueError, match="kind of classes_"):
        clf.add_labels(X, [[7] if i == 0 else [] for i in range(X.shape[0])])
    with pytest.raises(ValueError, match="no label at all"):
        clf.add_labels(X, [[] for _ in range(X.shape[0])])
    with pytest.raises(ValueError, match="sample_weight"):
        clf.add_labels(X, new_sets, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="text"):
        clf.add_labels(["some text"] * X.shape[0], new_sets)
    # nothing above changed the model
    assert clf.classes_.tolist() == base.classes_.tolist() and clf.n_labels_added_ == 0
    with pytest.raises(ValueError, match=r"predict-only.*compact\(\)"):
        clf.compact().add_labels(X, new_sets)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        _clf().add_labels(X, new_sets)
