"""XRLinearClassifier on bad input, odd hyperparameters, interrupted fits and concurrent use.

One row per case of the reliability sweep (issue 21); the pytest ids start with the sweep
category of ``reliability-cases.md`` ("1-badX", "3-hyper", "7-interrupt",
"11-concurrency"). Each row runs an action on small demo data and states what must come
out: an exception or a warning of a given type whose message names the argument, or
(``None``) no warning at all. Checks of the resulting model sit inside the actions.
"""

from __future__ import annotations

import pickle
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.utils.validation import check_is_fitted

import skxmc
from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.linear import _xrlinear
from skxmc.pipeline import make_pipeline


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    demo = load_demo()
    vec = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
    X = vec.fit_transform(demo.train_texts[:800])
    return {
        "X": X,
        "Y": demo.train_labels[:800],
        "X_test": vec.transform(demo.test_texts[:200]),
        "demo": demo,
    }


def _small(**params: Any) -> XRLinearClassifier:
    # 3 layers on 800 samples: enough for "interrupted during layer 2 of 3"
    tree = HierarchicalLabelTree(max_leaf_size=100, branching_factor=4)
    return XRLinearClassifier(tree=tree, **params)


def _interrupt_on_call(monkeypatch: pytest.MonkeyPatch, n: int, before=None) -> None:
    """Make the ``n``-th call of the per-layer solver raise KeyboardInterrupt (Ctrl-C),
    after running ``before()`` if given (what another thread sees mid-fit)."""
    real = _xrlinear.fit_layer
    calls = []

    def fake(*args: Any, **kwargs: Any) -> sp.csc_matrix:
        calls.append(1)
        if len(calls) == n:
            if before is not None:
                before()
            raise KeyboardInterrupt("simulated Ctrl-C")
        return real(*args, **kwargs)

    monkeypatch.setattr(_xrlinear, "fit_layer", fake)


def _non_canonical(X: sp.csr_matrix) -> sp.csr_matrix:
    """The same matrix with every value stored as two halves (duplicate entries)."""
    X = X.tocsr()
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    coo_rows = np.concatenate([rows, rows])
    cols = np.concatenate([X.indices, X.indices])
    vals = np.concatenate([X.data / 2, X.data / 2]).astype(np.float32)
    # CSR straight from the row-sorted arrays (the (data, (i, j)) constructor would sum)
    order = np.argsort(coo_rows, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(coo_rows, minlength=X.shape[0]))])
    D = sp.csr_matrix((vals[order], cols[order], indptr), shape=X.shape)
    assert not D.has_canonical_format and D.nnz == 2 * X.nnz
    return D


# --- 1-badX ---------------------------------------------------------------------------


def duplicate_entries_fit(d: dict) -> None:
    X, Y = d["X"], d["Y"]
    X2 = _non_canonical(X)
    saved = (X2.data.copy(), X2.indices.copy(), X2.indptr.copy())
    a = _small().fit(X, Y)
    b = _small().fit(X2, Y)
    for Wa, Wb in zip(a.weights_, b.weights_):
        np.testing.assert_allclose(Wa.toarray(), Wb.toarray(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(a.predict_topk(d["X_test"])[0], b.predict_topk(d["X_test"])[0])
    for before, after in zip(saved, (X2.data, X2.indices, X2.indptr)):
        np.testing.assert_array_equal(before, after)  # the caller's matrix is untouched


def duplicate_entries_predict(d: dict) -> None:
    clf = _small().fit(d["X"], d["Y"])
    Xt2 = _non_canonical(d["X_test"])
    saved = (Xt2.data.copy(), Xt2.indices.copy())
    expected = clf.predict_topk(d["X_test"])
    got = clf.predict_topk(Xt2)
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_allclose(expected[1], got[1], rtol=1e-5)
    np.testing.assert_array_equal(saved[0], Xt2.data)
    np.testing.assert_array_equal(saved[1], Xt2.indices)


def scaled_tfidf(d: dict) -> None:
    # 26aef59 returned a fitted model without a single weight (after two warnings)
    clf = _small()
    try:
        clf.fit(d["X"] * 100, d["Y"])
    finally:
        assert not hasattr(clf, "weights_")  # no empty model left behind


def huge_values(d: dict, value: float = 1e10) -> None:
    X = d["X"].copy()
    X.data[:] = value
    _small().fit(X, d["Y"])


def unnormalised_but_threshold_lowered(d: dict) -> None:
    # the explicit way to train on unnormalised rows: a weight_threshold that keeps weights
    clf = _small(weight_threshold=0.0).fit(d["X"] * 100, d["Y"])
    assert any(W[:-1].nnz for W in clf.weights_)


def readme_pipeline_quiet(d: dict) -> None:
    demo = d["demo"]
    clf = make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
        XRLinearClassifier(n_jobs=2),
    )
    clf.fit(demo.train_texts, demo.train_labels)
    assert clf.score(demo.test_texts, demo.test_labels) > 0.15


# --- 3-hyper --------------------------------------------------------------------------


def fit_with(**params: Any) -> Callable[[dict], None]:
    def action(d: dict) -> None:
        _small(**params).fit(d["X"], d["Y"])

    return action


# --- 7-interrupt ----------------------------------------------------------------------


def interrupted_first_fit(d: dict, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    clf = _small()
    _interrupt_on_call(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(d["X"], d["Y"])
    assert not [k for k in vars(clf) if k.endswith("_")]  # nothing half-set
    with pytest.raises(NotFittedError):
        clf.predict_topk(d["X_test"])
    clf.save(tmp_path / "model")  # must refuse: not fitted


def interrupted_refit(d: dict, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    clf = _small().fit(d["X"], d["Y"])
    before = clf.predict_topk(d["X_test"])
    old = {k: v for k, v in vars(clf).items() if k.endswith("_")}
    # a refit on other labels and a narrower X, interrupted in layer 2 of 3
    _interrupt_on_call(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(d["X"][:, :-5], [[f"new{lab}" for lab in row] for row in d["Y"]])
    assert {k: v for k, v in vars(clf).items() if k.endswith("_")}.keys() == old.keys()
    for k, v in old.items():
        assert getattr(clf, k) is v, k
    after = clf.predict_topk(d["X_test"])
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    loaded = skxmc.load(clf.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict_topk(d["X_test"])[0], before[0])
    assert clf.n_features_in_ == d["X"].shape[1]  # the old model's width is still expected


def half_fitted_save(d: dict, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # What an older version left after Ctrl-C: fewer layers of weights than the tree has.
    clf = _small().fit(d["X"], d["Y"])
    clf.weights_ = clf.weights_[:1]
    clf.save(tmp_path / "model")


def half_fitted_unpickle(d: dict, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    clf = _small().fit(d["X"], d["Y"])
    clf.weights_ = clf.weights_[:1]
    pickle.loads(pickle.dumps(clf))


# --- 11-concurrency -------------------------------------------------------------------


def predict_during_refit(d: dict, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    clf = _small().fit(d["X"], d["Y"])
    expected = clf.predict_topk(d["X_test"])
    seen: dict[str, Any] = {}

    def predict_in_thread() -> None:
        def run() -> None:
            try:
                seen["result"] = clf.predict_topk(d["X_test"])
            except Exception as exc:  # reported below, in the test's thread
                seen["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    # mid-refit (layer 2 of 3, other labels) another thread predicts
    _interrupt_on_call(monkeypatch, 2, before=predict_in_thread)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(d["X"], [[f"new{lab}" for lab in row] for row in d["Y"]])
    if "error" in seen:
        raise seen["error"]
    np.testing.assert_array_equal(seen["result"][0], expected[0])
    np.testing.assert_array_equal(seen["result"][1], expected[1])


def refit_swaps_model_whole(d: dict, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    clf = _small().fit(d["X"], d["Y"])
    clf.fit(d["X"], [[f"new{lab}" for lab in row] for row in d["Y"]])
    labels, _ = clf.predict_topk(d["X_test"])
    assert all(str(lab).startswith("new") for lab in labels.ravel() if lab is not None)
    assert clf._search_cache.classes is clf.classes_


CASES = [
    # (action, expected exception / warning type or None, message must match)
    pytest.param(duplicate_entries_fit, None, None, id="1-badX-duplicate-csr-entries-fit"),
    pytest.param(duplicate_entries_predict, None, None, id="1-badX-duplicate-csr-entries-predict"),
    pytest.param(scaled_tfidf, ValueError, r"normalize\(X\)", id="1-badX-tfidf-x100"),
    pytest.param(huge_values, ValueError, "kept no feature weight in any", id="1-badX-values-1e10"),
    pytest.param(
        lambda d: huge_values(d, 1e30),
        ValueError,
        "L2-normalise the rows of X",
        id="1-badX-values-1e30",
    ),
    pytest.param(
        unnormalised_but_threshold_lowered,
        UserWarning,
        "expects L2-normalised rows",
        id="1-badX-tfidf-x100-weight-threshold-0",
    ),
    pytest.param(readme_pipeline_quiet, None, None, id="1-badX-readme-tfidf-no-warning"),
    pytest.param(fit_with(bias=1e39), ValueError, "'bias' parameter", id="3-hyper-bias-1e39"),
    pytest.param(fit_with(bias=1e4), ValueError, "'bias' parameter", id="3-hyper-bias-1e4"),
    pytest.param(
        fit_with(bias=500.0, max_iter=5), UserWarning, r"bias=500\.0", id="3-hyper-bias-500-warns"
    ),
    pytest.param(
        fit_with(weight_threshold=1e9),
        UserWarning,
        r"weight_threshold=1000000000\.0",
        id="3-hyper-weight-threshold-1e9",
    ),
    pytest.param(fit_with(n_jobs=0), ValueError, "'n_jobs' parameter", id="3-hyper-n-jobs-0"),
    pytest.param(fit_with(n_jobs=-1), None, None, id="3-hyper-n-jobs-minus-1-ok"),
    pytest.param(interrupted_first_fit, ValueError, "not fitted", id="7-interrupt-first-fit"),
    pytest.param(interrupted_refit, None, None, id="7-interrupt-refit-keeps-old-model"),
    pytest.param(half_fitted_save, ValueError, "incomplete.*weights_", id="7-interrupt-save-half"),
    pytest.param(
        half_fitted_unpickle, ValueError, "incomplete.*weights_", id="7-interrupt-unpickle-half"
    ),
    pytest.param(predict_during_refit, None, None, id="11-concurrency-predict-during-refit"),
    pytest.param(refit_swaps_model_whole, None, None, id="11-concurrency-refit-swaps-whole"),
]


@pytest.mark.parametrize(("action", "expected", "match"), CASES)
def test_bad_input(action, expected, match, data, monkeypatch, tmp_path):
    def run() -> None:
        if action.__code__.co_argcount == 3:
            action(data, monkeypatch, tmp_path)
        else:
            action(data)

    if expected is None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # silent cases must stay silent
            run()
    elif issubclass(expected, Warning):
        with pytest.warns(expected, match=match):
            run()
    else:
        with pytest.raises(expected, match=match):
            run()


def test_unfitted_after_interrupt_is_reported_by_check_is_fitted(data, monkeypatch):
    clf = _small(negative_sampling="tfn+man")
    _interrupt_on_call(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(data["X"], data["Y"])
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    monkeypatch.undo()
    clf.fit(data["X"], data["Y"])  # and a later fit works
    check_is_fitted(clf)
