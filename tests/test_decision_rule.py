"""The decision rule of multi-label ``predict`` as parameters (issue 48 items 6 and 7):
``top_k`` and ``threshold``, tunable by ``GridSearchCV``, with a default that follows
sklearn for a dense indicator and XMC's top-k for label collections."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, KFold

from skxmc import SNMClassifier, XRLinearClassifier, as_label_sets


def _training(max_epochs: int):
    """CPU training settings of the SNM estimators of these tests."""
    from skxmc.text import TrainingConfig

    return TrainingConfig(max_epochs=max_epochs, device="cpu")


def _multilabel(n: int = 240, n_labels: int = 12, seed: int = 0):
    """Rows near one or two of ``n_labels`` prototypes; labels = those prototypes."""
    rng = np.random.default_rng(seed)
    protos = rng.normal(size=(n_labels, 40))
    Y = np.zeros((n, n_labels), dtype=int)
    X = np.zeros((n, 40))
    for i in range(n):
        chosen = rng.choice(n_labels, size=1 + (i % 4 == 0), replace=False)
        Y[i, chosen] = 1
        X[i] = protos[chosen].sum(0) + 0.3 * rng.normal(size=40)
    X = np.abs(X)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32), Y


def _rankers():
    return [
        XRLinearClassifier(),
        SNMClassifier(training=_training(20)),
    ]


@pytest.mark.parametrize("clf", _rankers(), ids=lambda c: type(c).__name__)
def test_dense_indicator_default_is_not_top_10(clf):
    X, Y = _multilabel()
    clf.fit(X[:180], Y[:180])
    assert clf.get_params()["threshold"] == "auto"
    pred = clf.predict(X[180:])
    per_row = pred.sum(1).mean()
    # 26aef59: exactly top_k=10 labels per row, f1_samples about 0.2
    assert per_row < 3, per_row
    assert f1_score(Y[180:], pred, average="samples", zero_division=0) > 0.5
    P = clf.predict_proba(X[180:])
    np.testing.assert_array_equal(pred, (P >= 0.5).astype(int))


def test_label_sets_keep_top_k_by_default():
    X, Y = _multilabel()
    clf = XRLinearClassifier(top_k=3).fit(X, as_label_sets(Y))
    assert np.all(np.diff(clf.predict(X).indptr) == 3)
    # and threshold=None is the same top-k rule for a dense Y
    dense = XRLinearClassifier(top_k=3, threshold=None).fit(X, Y)
    assert np.all(dense.predict(X).sum(1) == 3)


def test_threshold_and_top_k_together():
    X, Y = _multilabel()
    clf = XRLinearClassifier(threshold=0.05, top_k=2).fit(X, as_label_sets(Y))
    pred = clf.predict(X)
    P = clf.predict_proba(X)
    rows = np.diff(pred.indptr)
    assert rows.max() <= 2
    # each predicted label reaches the threshold; rows below the cap keep all that reach it
    assert np.all(P[pred.astype(bool)] >= 0.05)
    above = np.diff((P >= 0.05).astype(int).tocsr().indptr)
    np.testing.assert_array_equal(rows, np.minimum(above, 2))
    # the keyword still overrides the parameter for one call (no cap by default)
    assert (clf.predict(X, threshold=0.05) != (P >= 0.05)).nnz == 0


def test_per_label_threshold_parameter():
    X, Y = _multilabel()
    clf = XRLinearClassifier().fit(X, Y)
    P = clf.predict_proba(X)
    thr = np.linspace(0.2, 0.8, Y.shape[1])
    pred = clf.set_params(threshold=thr).predict(X)
    assert (P >= thr).sum(1).max() <= 10  # top_k does not cut here
    np.testing.assert_array_equal(pred, (P >= thr).astype(int))
    with pytest.raises(ValueError, match=r"shape \(n_labels,\)"):
        clf.set_params(threshold=[0.5, 0.5]).predict(X)


def test_threshold_is_tuned_by_grid_search():
    X, Y = _multilabel()
    search = GridSearchCV(
        XRLinearClassifier(),
        {"threshold": [None, 0.02, 0.5, 0.95]},
        scoring="f1_samples",
        cv=KFold(3),
    ).fit(X, Y)
    scores = search.cv_results_["mean_test_score"]
    assert len(set(np.round(scores, 6))) > 1  # the parameter changes the predictions
    assert search.best_params_["threshold"] is not None


def test_threshold_parameter_is_validated():
    X, Y = _multilabel(60)
    with pytest.raises(ValueError, match="threshold"):
        XRLinearClassifier(threshold=1.5).fit(X, Y)
    with pytest.raises(ValueError, match="threshold"):
        XRLinearClassifier(threshold="best").fit(X, Y)


def test_one_d_target_refuses_a_numeric_threshold():
    X, Y = _multilabel(60)
    y = Y.argmax(1)
    clf = XRLinearClassifier().fit(X, y)
    assert clf.predict(X).shape == (60,)  # "auto": the best label
    with pytest.raises(ValueError, match="TunedThresholdClassifierCV"):
        clone(clf).set_params(threshold=0.3).fit(X, y).predict(X)


def test_tuned_threshold_classifier_cv_on_a_binary_target():
    from sklearn.model_selection import TunedThresholdClassifierCV

    X, Y = _multilabel(120)
    y = Y[:, 0]
    tuned = TunedThresholdClassifierCV(XRLinearClassifier(), cv=3).fit(X, y)
    assert 0 <= tuned.best_threshold_ <= 1
    assert set(np.unique(tuned.predict(X))) <= {0, 1}


def test_sparse_target_default_is_top_k():
    X, Y = _multilabel()
    clf = XRLinearClassifier(top_k=2).fit(X, sp.csr_matrix(Y))
    assert np.all(np.diff(clf.predict(X).indptr) == 2)


# ------------------------------------------------ item 7: scores on one scale


def test_snm_predict_proba_is_calibrated_like_xrlinear():
    X, Y = _multilabel()
    Ys = as_label_sets(Y)
    true_per_row = Y[180:].sum(1).mean()
    for clf in (SNMClassifier(training=_training(20)), XRLinearClassifier()):
        clf.fit(X[:180], Ys[:180])
        P = clf.predict_proba(X[180:])  # CSR: the labels each row's search reaches
        row_sums = np.asarray(P.sum(axis=1)).ravel()
        # 26aef59: SNM's rows summed to top_k * ~0.5 (cosines mapped linearly)
        assert 0.5 * true_per_row < row_sums.mean() < 2 * true_per_row, type(clf)
        kept = (P >= 0.5).sum() / len(row_sums)
        assert 0.5 < kept < 2, (type(clf), kept)
    assert clf.predict_proba(X[:1]).max() <= 1


def test_snm_calibration_survives_save_and_load(tmp_path):
    import skxmc

    X, Y = _multilabel(120)
    clf = SNMClassifier(training=_training(5)).fit(X, Y)
    assert clf.proba_calibration_.shape == (2,)
    skxmc.save(clf, tmp_path / "m")
    back = skxmc.load(tmp_path / "m")
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    # a model without the calibration (saved by an older skxmc) keeps the linear map,
    # and its "auto" rule stays top-k (0.5 would keep most labels on that scale)
    del back.proba_calibration_
    P = back.predict_proba(X)
    cos = back.decision_function(X)
    np.testing.assert_allclose(P, np.clip((cos + 1) / 2, 0, 1), atol=1e-6)
    assert np.all(back.predict(X).sum(1) == back.top_k)


def test_snm_calibration_reads_positives_outside_the_top_k(monkeypatch):
    import skxmc.snm

    X, Y = _multilabel(120)
    monkeypatch.setattr(skxmc.snm, "_CALIBRATION_K", 1)  # most positives outside the top 1
    clf = SNMClassifier(top_k=1, training=_training(3)).fit(X, Y)
    a, b = clf.proba_calibration_
    assert np.isfinite([a, b]).all() and a > 0  # a higher cosine: more likely relevant
