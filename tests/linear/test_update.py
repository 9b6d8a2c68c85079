"""Adding rows to a fitted model: ``XRLinearClassifier.update``."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import skxmc
from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import make_xmc_classification

N_OLD = 360  # rows of the base fit; the data set has 400


@pytest.fixture(scope="module")
def data():
    X, Y = make_xmc_classification(400, 300, 48, random_state=0)
    return sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y)


def _clf(**kw):
    # three layers, so that inner nodes, groups and siblings are exercised
    tree = HierarchicalLabelTree(max_leaf_size=4, branching_factor=4)
    return XRLinearClassifier(tree=tree, top_k=5, **kw)


@pytest.fixture(scope="module")
def base(data):
    X, Y = data
    return _clf().fit(X[:N_OLD], Y[:N_OLD])


def _copy(clf):
    return pickle.loads(pickle.dumps(clf))


def _same_weights(a, b):
    return all(
        Wa.shape == Wb.shape
        and np.array_equal(Wa.indptr, Wb.indptr)
        and np.array_equal(Wa.indices, Wb.indices)
        and np.array_equal(Wa.data, Wb.data)
        for Wa, Wb in zip(a.weights_, b.weights_)
    )


def _same_topk(a, b, X):
    la, sa = a.predict_topk(X)
    lb, sb = b.predict_topk(X)
    return np.array_equal(la, lb) and np.array_equal(sa, sb)


def test_fit_stores_the_prints_and_trains_every_node(base):
    chain = base.tree_.cluster_chain_
    assert len(chain) == 3
    assert base.nodes_updated_ == [C.shape[0] for C in chain]
    assert base.update_drift_ == 0.0
    prints = base.training_fingerprints_
    for C, layer in zip(chain, prints["layers"]):
        assert layer["exact"].shape == layer["positives"].shape == (C.shape[0],)
        assert layer["groups"].shape == (C.shape[1],)
        assert layer["exact"].dtype == np.uint64
    assert len(prints["tree_rows"]) == N_OLD


def test_no_change_retrains_nothing_and_predicts_identically(data, base):
    X, Y = data
    clf = _copy(base).update(X[:N_OLD], Y[:N_OLD])
    assert clf.nodes_updated_ == [0, 0, 0]
    assert clf.update_drift_ == 0.0
    assert _same_weights(clf, base) and _same_topk(clf, base, X)
    # the same rows as label collections (another input format, the same problem)
    sets = [clf.classes_[Y[i].indices].tolist() for i in range(N_OLD)]
    assert _copy(base).update(X[:N_OLD], sets).nodes_updated_ == [0, 0, 0]


def test_a_row_for_one_label_retrains_only_its_path(data, base):
    X, Y = data
    j = int(np.argmax(Y[:N_OLD].getnnz(axis=0)))  # a frequent label
    y_new = sp.vstack([Y[:N_OLD], sp.csr_matrix(([1], ([0], [j])), shape=(1, Y.shape[1]))])
    X_new = sp.vstack([X[:N_OLD], X[N_OLD]], format="csr")
    clf = _copy(base).update(X_new, y_new, scope="labels")
    assert clf.nodes_updated_ == [1, 1, 1]  # the label and the two clusters above it
    chain = base.tree_.cluster_chain_
    leaf = chain[-1][j].indices[0]
    path = [chain[1][leaf].indices[0], leaf, j]
    for t, node in enumerate(path):
        same = [
            (clf.weights_[t][:, c] != base.weights_[t][:, c]).nnz == 0
            for c in range(chain[t].shape[0])
        ]
        assert not same[node] or base.weights_[t][:, node].nnz == 0
        assert all(s for c, s in enumerate(same) if c != node)
    assert clf.update_drift_ == pytest.approx(1 / (N_OLD + 1))
    # "groups": the siblings of the path's nodes get the new row as a negative too
    grouped = _copy(base).update(X_new, y_new)
    siblings = [
        chain[0].shape[0],
        *(int(C[:, C[n].indices[0]].nnz) for C, n in zip(chain[1:], path[1:])),
    ]
    assert grouped.nodes_updated_ == siblings


@pytest.mark.parametrize("negative_sampling", ["tfn", "tfn+man"])
def test_groups_scope_equals_retraining_every_node(data, base, negative_sampling):
    # what the algorithm promises: the model of retraining every node of the fixed tree
    X, Y = data
    fitted = (
        base
        if negative_sampling == "tfn"
        else _clf(negative_sampling="tfn+man").fit(X[:N_OLD], Y[:N_OLD])
    )
    clf = _copy(fitted).update(X, Y)
    assert 0 < sum(clf.nodes_updated_)
    every = _copy(fitted)
    every.training_fingerprints_ = None  # as an older model: every node retrained
    every.update(X, Y)
    assert every.nodes_updated_ == [C.shape[0] for C in fitted.tree_.cluster_chain_]
    assert _same_weights(clf, every) and _same_topk(clf, every, X)
    # a "labels" update and then a "groups" one arrive at the same model
    two = _copy(fitted).update(X, Y, scope="labels")
    assert sum(two.nodes_updated_) < sum(clf.nodes_updated_)
    two.update(X, Y)
    assert _same_weights(two, clf)
    assert two.update(X, Y).nodes_updated_ == [0, 0, 0]


def test_changed_solver_settings_equal_a_full_refit(data, base):
    # same rows, same tree (its fit does not depend on Cp): the refit's model, bit for bit
    X, Y = data
    clf = _copy(base).set_params(Cp=2.0).update(X[:N_OLD], Y[:N_OLD])
    assert clf.nodes_updated_ == [C.shape[0] for C in base.tree_.cluster_chain_]
    refit = _clf(Cp=2.0).fit(X[:N_OLD], Y[:N_OLD])
    assert _same_weights(clf, refit) and _same_topk(clf, refit, X)


def test_sample_weights_count_as_a_change(data, base):
    X, Y = data
    w = np.ones(N_OLD)
    clf = _copy(base).update(X[:N_OLD], Y[:N_OLD], sample_weight=w)
    assert sum(clf.nodes_updated_) == sum(base.nodes_updated_)  # weighted: another solver path
    w[0] = 3.0
    again = _copy(clf).update(X[:N_OLD], Y[:N_OLD], sample_weight=w)
    assert 0 < sum(again.nodes_updated_) < sum(base.nodes_updated_)
    refit = _clf().fit(X[:N_OLD], Y[:N_OLD], sample_weight=w)
    assert _copy(refit).update(X[:N_OLD], Y[:N_OLD], sample_weight=w).nodes_updated_ == [0, 0, 0]


def test_update_after_add_labels_retrains_the_added_labels(data):
    X, Y = data
    clf = _clf().fit(X, Y[:, :44]).add_labels(X, Y[:, 44:])
    clf.update(X, Y)
    assert clf.nodes_updated_[-1] >= 4 and len(clf.classes_) == 48
    assert clf.update(X, Y).nodes_updated_ == [0, 0, 0]


def test_a_saved_model_is_updated_in_place(data, base, tmp_path):
    X, Y = data
    path = tmp_path / "model"
    skxmc.save(base, path)
    model = skxmc.load(path)
    assert model.update(X[:N_OLD], Y[:N_OLD]).nodes_updated_ == [0, 0, 0]
    model.update(X, Y)
    skxmc.save(model, path, overwrite=True)
    again = skxmc.load(path)
    ref = _copy(base).update(X, Y)
    for clf in (model, again, skxmc.load(path, mmap=True)):
        assert _same_topk(clf, ref, X)
    assert again.update_drift_ == ref.update_drift_ == pytest.approx(40 / 400)
    assert again.update(X, Y).nodes_updated_ == [0, 0, 0]  # the prints were saved


def test_the_drift_is_logged_with_the_advice(data, base, caplog, capsys):
    X, Y = data
    with caplog.at_level(logging.INFO, logger="skxmc.linear._update"):
        _copy(base).set_params(verbose=1).update(X, Y)
    out = capsys.readouterr().out
    assert "row drift 0.100" in out and "fit again above" in out
    X2 = sp.vstack([X, X[:200] * 0.5], format="csr")
    Y2 = sp.vstack([Y, Y[:200]], format="csr")
    with caplog.at_level(logging.INFO, logger="skxmc.linear._update"):
        _copy(base).update(X2, Y2, scope="labels")
    assert "a full fit on all rows is due" in caplog.text


def test_bad_inputs_raise_naming_the_argument(data, base):
    X, Y = data
    clf = _copy(base)
    sets = [clf.classes_[Y[i].indices].tolist() for i in range(N_OLD)]
    with pytest.raises(ValueError, match=r"not in classes_.*99.*add_labels"):
        clf.update(X[:N_OLD], [[*s, 99] for s in sets])
    with pytest.raises(ValueError, match=r"49 columns.*add_labels"):
        clf.update(X[:N_OLD], sp.hstack([Y[:N_OLD], Y[:N_OLD, :1]]))
    with pytest.raises(ValueError, match="scope"):
        clf.update(X[:N_OLD], Y[:N_OLD], scope="all")
    with pytest.raises(ValueError, match="features"):
        clf.update(X[:N_OLD, :-1], Y[:N_OLD])
    with pytest.raises(ValueError, match="Y"):
        clf.update(X[:N_OLD], Y[: N_OLD - 1])
    with pytest.raises(ValueError, match="sample_weight"):
        clf.update(X[:N_OLD], Y[:N_OLD], sample_weight=np.ones(3))
    assert _same_weights(clf, base)  # nothing above changed the model
    compacted = _copy(base).compact()
    with pytest.raises(AttributeError, match="training_fingerprints_"):
        compacted.training_fingerprints_  # noqa: B018
    with pytest.raises(ValueError, match=r"predict-only.*compact\(\)"):
        compacted.update(X, Y)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        _clf().update(X, Y)
