"""predict_topk's few-row path (``skxmc/linear/_fast_predict.py``): bit for bit what the
full path predicts, taken only for input that the full path would accept unchanged, and
every invalid input still gets the full path's error."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import TfidfVectorizer

import skxmc
from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.linear import _beam, _fast_predict


@pytest.fixture(scope="module")
def demo():
    data = load_demo()
    vec = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
    X_train = vec.fit_transform(data.train_texts[:1200])
    X_test = vec.transform(data.test_texts[:60])
    X_test.sort_indices()
    return X_train, data.train_labels[:1200], X_test


def _fit(demo, post_processor="l3-hinge", blocks=False):
    X_train, Y_train, _ = demo
    tree = HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)
    clf = XRLinearClassifier(tree=tree, post_processor=post_processor, n_jobs=1)
    with pytest.MonkeyPatch.context() as mp:
        if blocks:  # every layer in the parent-grouped blocks, not the feature-major copy
            mp.setattr(_beam, "DENSE_LAYER_MAX_NODES", 0)
        return clf.fit(X_train, Y_train)


@pytest.fixture(scope="module")
def fitted(demo):
    return _fit(demo)


@pytest.fixture(scope="module")
def fitted_blocks(demo):
    return _fit(demo, blocks=True)


def _full(clf, X, **kwargs):
    """predict_topk through the full path only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_fast_predict, "FAST_MAX_ROWS", 0)
        return clf.predict_topk(X, **kwargs)


def _same(a, b):
    assert a[0].dtype == b[0].dtype and a[1].dtype == b[1].dtype
    assert a[0].tolist() == b[0].tolist()
    assert a[1].tobytes() == b[1].tobytes()


def _count_fast(monkeypatch):
    calls = []
    search = _fast_predict.search_few

    def counting(*args, **kwargs):
        calls.append(1)
        return search(*args, **kwargs)

    monkeypatch.setattr("skxmc.linear._xrlinear.search_few", counting)
    return calls


@pytest.mark.parametrize("post_processor", ["l3-hinge", "sigmoid", "noop"])
@pytest.mark.parametrize("blocks", [False, True])
def test_few_rows_bit_identical_to_full_path(demo, post_processor, blocks, monkeypatch):
    clf = _fit(demo, post_processor, blocks)
    X = demo[2]
    calls = _count_fast(monkeypatch)
    for i in range(0, 40, 3):
        _same(clf.predict_topk(X[i], k=7), _full(clf, X[i], k=7))
    for n in (2, 5, _fast_predict.FAST_MAX_ROWS):
        _same(clf.predict_topk(X[:n]), _full(clf, X[:n]))
    assert len(calls) == 17  # every call above took the few-row path


def test_unsorted_csr_array_and_empty_row(fitted, demo, monkeypatch):
    X = demo[2]
    row = X[3].copy()
    row.indices, row.data = row.indices[::-1].copy(), row.data[::-1].copy()
    row.has_sorted_indices = False
    calls = _count_fast(monkeypatch)
    _same(fitted.predict_topk(row), _full(fitted, X[3]))
    assert not row.has_sorted_indices  # the caller's row is left as it was
    _same(fitted.predict_topk(sp.csr_array(X[3])), _full(fitted, X[3]))
    empty = sp.csr_matrix((1, X.shape[1]), dtype=np.float32)
    _same(fitted.predict_topk(empty, k=4), _full(fitted, empty, k=4))
    assert len(calls) == 3


def test_other_input_takes_the_full_path(fitted, demo, monkeypatch):
    X = demo[2]
    calls = _count_fast(monkeypatch)
    _same(fitted.predict_topk(X[:1].astype(np.float64)), _full(fitted, X[:1]))
    _same(fitted.predict_topk(X[:1].toarray()), _full(fitted, X[:1]))
    n = _fast_predict.FAST_MAX_ROWS + 1
    _same(fitted.predict_topk(X[:n]), _full(fitted, X[:n]))
    labels = fitted.classes_[:5]
    _same(fitted.predict_topk(X[:1], labels=labels), _full(fitted, X[:1], labels=labels))
    assert calls == []


def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


def test_invalid_input_gets_the_full_paths_error(fitted, demo):
    row = demo[2][0].copy()
    bad = row.copy()
    bad.data[0] = np.nan
    inf = row.copy()
    inf.data[-1] = np.inf
    narrow = sp.csr_matrix((1, row.shape[1] - 1), dtype=np.float32)
    for X, k in ((bad, 5), (inf, 5), (narrow, 5), (row, 0), (row, 2.5)):
        fast = _error(lambda X=X, k=k: fitted.predict_topk(X, k=k))
        assert fast == _error(lambda X=X, k=k: _full(fitted, X, k=k))
    assert "NaN" in _error(lambda: fitted.predict_topk(bad))[1]
    assert "features" in _error(lambda: fitted.predict_topk(narrow))[1]
    with pytest.raises(NotFittedError):
        XRLinearClassifier().predict_topk(row)


def test_k_beyond_the_labels_warns_as_before(fitted, demo):
    row = demo[2][0]
    k = len(fitted.classes_) + 3
    with warnings.catch_warnings(record=True) as fast:
        warnings.simplefilter("always")
        got = fitted.predict_topk(row, k=k)
    with warnings.catch_warnings(record=True) as full:
        warnings.simplefilter("always")
        want = _full(fitted, row, k=k)
    _same(got, want)
    assert [str(w.message) for w in fast] == [str(w.message) for w in full]
    assert fast and fast[0].filename == __file__  # points at the caller, as before


def test_memory_mapped_and_pickled_models(fitted_blocks, demo, tmp_path):
    X = demo[2]
    skxmc.save(fitted_blocks, tmp_path / "m", predict_only=True)
    mapped = skxmc.load(tmp_path / "m", mmap=True)
    for i in range(0, 30, 4):
        _same(mapped.predict_topk(X[i]), _full(fitted_blocks, X[i]))
    fitted_blocks.predict_topk(X[0])
    copy = pickle.loads(pickle.dumps(mapped))
    assert all(not any(k.startswith("_fast") for k in vars(c)) for c in copy._search_cache.chunks)
    _same(copy.predict_topk(X[5]), _full(fitted_blocks, X[5]))
