"""Ranking metrics: formulas, agreement with napkinXC on real predictions, invariants, errors."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import GridSearchCV, KFold

from skxmc._baselines import knn_label_scores
from skxmc._labels import LabelSpace, encode_labels
from skxmc._ranking import topk_from_sparse
from skxmc.datasets import load_xc_bow
from skxmc.metrics import (
    evaluate,
    inverse_propensity,
    make_topk_scorer,
    ndcg_at_k,
    precision_at_k,
    psndcg_at_k,
    psprecision_at_k,
    recall_at_k,
)

from .conftest import dataset_path

METRICS = [precision_at_k, recall_at_k, ndcg_at_k]


def test_hand_computed_values():
    Y = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    S = np.array([[0.9, 0.8, 0.7, 0.1], [0.1, 0.2, 0.3, 0.4], [1, 2, 3, 4]])
    # Row 0 ranks 0 (hit), 1, 2 (hit); row 1 ranks 3, 2, 1 (hit); row 2 has no labels.
    assert precision_at_k(Y, S, k=1) == pytest.approx(1 / 3)
    assert precision_at_k(Y, S, k=3) == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert recall_at_k(Y, S, k=3) == pytest.approx((1 + 1 + 0) / 3)
    d = 1 / np.log2([2, 3, 4])
    expected = ((d[0] + d[2]) / (d[0] + d[1]) + d[2] / d[0] + 0) / 3
    assert ndcg_at_k(Y, S, k=3) == pytest.approx(expected)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    psp = ((1 + 3) / 3 + 2 / 3 + 0) / 3
    assert psprecision_at_k(Y, S, inv_propensity=w, k=3) == pytest.approx(psp)
    best = ((3 + 1) / 3 + 2 / 3 + 0) / 3
    assert psprecision_at_k(Y, S, inv_propensity=w, k=3, normalize=True) == pytest.approx(psp / best)


def test_all_prediction_formats_agree(rng):
    Y = (rng.random((50, 30)) < 0.1).astype(np.float32)
    S = rng.random((50, 30))
    w = inverse_propensity(Y)
    idx, sc = topk_from_sparse(sp.csr_matrix(S), 10)
    classes = np.array([f"L{i:02d}" for i in range(30)])
    label_lists = LabelSpace(classes).inverse_transform(Y)
    for k in (1, 3, 5):
        ref = evaluate(Y, S, ks=(k,), inv_propensity=w)
        assert evaluate(sp.csr_matrix(Y), sp.csr_matrix(S), ks=(k,), inv_propensity=w) == ref
        assert evaluate(Y, (idx, sc), ks=(k,), inv_propensity=w) == ref
        # label names in the pair and in the truth, mapped through classes
        got = evaluate(label_lists, (classes[idx], sc), ks=(k,), inv_propensity=w, classes=classes)
        assert got == pytest.approx(ref)
        # integer label lists are column indices when no classes are given
        int_lists = [np.flatnonzero(r).tolist() for r in Y]
        assert evaluate(int_lists, S, ks=(k,), inv_propensity=w) == pytest.approx(ref)


def test_ties_break_towards_lower_column_in_every_format():
    Y = np.array([[0, 1, 0, 0]])
    S = np.array([[0.5, 0.5, 0.5, 0.1]])
    # Columns 0, 1, 2 tie: ranking is 0, 1, 2, so P@1 = 0 and P@2 = 1/2 in every format.
    for scores in (S, sp.csr_matrix(S), (np.array([[2, 1, 0, 3]]), np.array([[0.5, 0.5, 0.5, 0.1]]))):
        assert precision_at_k(Y, scores, k=1) == 0.0
        assert precision_at_k(Y, scores, k=2) == 0.5


def test_sparse_scores_rank_only_stored_entries():
    Y = np.array([[0, 0, 1]])
    S = sp.csr_matrix((np.array([-5.0]), np.array([2]), np.array([0, 1])), shape=(1, 3))
    assert precision_at_k(Y, S, k=1) == 1.0  # a stored negative score beats missing entries
    assert precision_at_k(Y, S, k=5) == pytest.approx(0.2)  # fewer than k candidates: still / k


def test_unknown_labels_count_as_misses():
    classes = np.array(["a", "b"])
    Y_true = [["a", "zz"], ["b"]]  # "zz" never seen at fit time
    S = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert precision_at_k(Y_true, S, k=1, classes=classes) == 1.0
    assert recall_at_k(Y_true, S, k=2, classes=classes) == pytest.approx((0.5 + 1) / 2)
    d = 1 / np.log2([2, 3])
    assert ndcg_at_k(Y_true, S, k=2, classes=classes) == pytest.approx((d[0] / d.sum() + 1) / 2)


def test_evaluate_matches_single_metrics(rng):
    Y = sp.csr_matrix((rng.random((40, 25)) < 0.15).astype(np.float32))
    S = sp.csr_matrix(rng.random((40, 25)) * (rng.random((40, 25)) < 0.5))
    w = inverse_propensity(Y)
    out = evaluate(Y, S, ks=(1, 3, 5), inv_propensity=w, normalize=True)
    for k in (1, 3, 5):
        assert out[f"precision@{k}"] == precision_at_k(Y, S, k=k)
        assert out[f"recall@{k}"] == recall_at_k(Y, S, k=k)
        assert out[f"ndcg@{k}"] == ndcg_at_k(Y, S, k=k)
        assert out[f"psprecision@{k}"] == psprecision_at_k(Y, S, inv_propensity=w, k=k, normalize=True)
        assert out[f"psndcg@{k}"] == psndcg_at_k(Y, S, inv_propensity=w, k=k, normalize=True)


# --- agreement with napkinXC ---------------------------------------------------------


def _compare_with_napkinxc(Y_true: sp.csr_matrix, scores: sp.csr_matrix, Y_train: sp.csr_matrix):
    nxc = pytest.importorskip("napkinxc.metrics")
    w = inverse_propensity(Y_train)
    w_ref = nxc.Jain_et_al_inverse_propensity(Y_train)
    np.testing.assert_allclose(w, w_ref, rtol=1e-6)
    # Give napkinXC our ranking as label lists so that both sides rank ties identically: the
    # comparison is of the metric formulas.
    top, _ = topk_from_sparse(scores, 10)
    ranking = [[int(c) for c in row if c >= 0] for row in top]
    truth = [Y_true.indices[a:b].tolist() for a, b in zip(Y_true.indptr[:-1], Y_true.indptr[1:])]
    n_checked = 0
    for k in (1, 3, 5, 10):
        pairs = [
            (precision_at_k(Y_true, scores, k=k), nxc.precision_at_k(truth, ranking, k=k)),
            (recall_at_k(Y_true, scores, k=k), nxc.recall_at_k(truth, ranking, k=k)),
            (ndcg_at_k(Y_true, scores, k=k), nxc.ndcg_at_k(truth, ranking, k=k)),
        ]
        for normalize in (False, True):
            pairs += [
                (
                    psprecision_at_k(Y_true, scores, inv_propensity=w, k=k, normalize=normalize),
                    nxc.psprecision_at_k(truth, ranking, inv_ps=w, k=k, normalize=normalize),
                ),
                (
                    psndcg_at_k(Y_true, scores, inv_propensity=w, k=k, normalize=normalize),
                    nxc.psndcg_at_k(truth, ranking, inv_ps=w, k=k, normalize=normalize),
                ),
            ]
        for ours, theirs in pairs:
            assert ours == pytest.approx(theirs[k - 1], abs=1e-6)
            n_checked += 1
    assert n_checked == 4 * 7
    assert precision_at_k(Y_true, scores, k=1) > 0.05  # real predictions, not noise


def _jsonl(path, n):
    texts, labels = [], []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line, _ in zip(fh, range(n)):
            r = json.loads(line)
            texts.append(r["text"])
            labels.append(r["labels"])
    return texts, labels


def test_metrics_match_napkinxc_on_tibkat_knn(data_dir):
    train_texts, train_labels = _jsonl(dataset_path(data_dir, "tibkat_gnd_en", "train.jsonl.gz"), 6000)
    test_texts, test_labels = _jsonl(dataset_path(data_dir, "tibkat_gnd_en", "test.jsonl.gz"), 800)
    vec = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
    X_train = vec.fit_transform(train_texts)
    Y_train, classes = encode_labels(train_labels)
    scores = knn_label_scores(X_train, Y_train, vec.transform(test_texts), top_k=10)
    Y_test = LabelSpace(classes).transform(test_labels).Y
    _compare_with_napkinxc(Y_test, scores, Y_train)


def test_metrics_match_napkinxc_on_delicious_knn(data_dir):
    X_train, Y_train = load_xc_bow(dataset_path(data_dir, "delicious_bow", "train.txt"))
    X_test, Y_test = load_xc_bow(dataset_path(data_dir, "delicious_bow", "test.txt"))
    scores = knn_label_scores(X_train, Y_train, X_test[:1000], top_k=10)
    _compare_with_napkinxc(Y_test[:1000], scores, Y_train)


# --- invariants -------------------------------------------------------------------------

problems = st.tuples(st.integers(1, 12), st.integers(1, 15), st.integers(0, 2**31 - 1)).map(
    lambda t: (
        (np.random.default_rng(t[2]).random((t[0], t[1])) < 0.3).astype(np.float32),
        np.random.default_rng(t[2] + 1).random((t[0], t[1])),
        t[2],
    )
)


@settings(max_examples=50, deadline=None)
@given(problems, st.integers(1, 6))
def test_metric_invariants(problem, k):
    Y, S, seed = problem
    for metric in METRICS:
        value = metric(Y, S, k=k)
        assert 0.0 <= value <= 1.0
    # A perfect ranking: the relevant labels score highest.
    perfect = Y + 0.01 * S
    has = Y.sum(axis=1) > 0
    w = inverse_propensity(Y) if len(Y) >= 3 else np.ones(Y.shape[1])
    if has.all():
        assert recall_at_k(Y, perfect, k=Y.shape[1]) == pytest.approx(1.0)
        assert ndcg_at_k(Y, perfect, k=k) == pytest.approx(1.0)
        assert psprecision_at_k(Y, Y * w + 0.001 * S, inv_propensity=w, k=k, normalize=True) == pytest.approx(1.0)
    if (Y.sum(axis=1) >= k).all():
        assert precision_at_k(Y, perfect, k=k) == pytest.approx(1.0)
    # Permuting label columns consistently (truth, scores, propensities) changes nothing.
    perm = np.random.default_rng(seed).permutation(Y.shape[1])
    S_dist = S + np.arange(S.shape[1]) * 1e-9  # no ties: tie-breaking depends on column order
    before = evaluate(Y, S_dist, ks=(k,), inv_propensity=w)
    after = evaluate(Y[:, perm], S_dist[:, perm], ks=(k,), inv_propensity=w[perm])
    assert after == pytest.approx(before)


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, 1.5, "3", True])
def test_bad_k(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        precision_at_k(np.eye(2), np.eye(2), k=k)


def test_row_mismatch():
    with pytest.raises(ValueError, match="Y_true has 2 rows but Y_score has 3"):
        precision_at_k(np.eye(2), np.ones((3, 2)), k=1)


def test_column_mismatch():
    with pytest.raises(ValueError, match="Y_true has 2 columns but Y_score has 3"):
        precision_at_k(np.eye(2), np.ones((2, 3)), k=1)


def test_bad_scores():
    with pytest.raises(ValueError, match="Y_score contains NaN"):
        precision_at_k(np.eye(2), np.array([[np.nan, 1], [1, 0]]), k=1)
    with pytest.raises(ValueError, match="Y_score .* same 2-D shape"):
        precision_at_k(np.eye(2), (np.zeros((2, 2), int), np.zeros((2, 3))), k=1)
    with pytest.raises(ValueError, match="same label twice"):
        precision_at_k(np.eye(2), (np.array([[0, 0], [1, 0]]), np.ones((2, 2))), k=1)


def test_label_names_need_classes():
    with pytest.raises(ValueError, match="pass classes="):
        precision_at_k([["a"], ["b"]], np.eye(2), k=1)
    with pytest.raises(ValueError, match="pass classes="):
        precision_at_k([[0], [1]], (np.array([["a"], ["b"]]), np.ones((2, 1))), k=1)


def test_inv_propensity_checks():
    with pytest.raises(ValueError, match="inv_propensity is required"):
        psprecision_at_k(np.eye(2), np.eye(2), inv_propensity=None, k=1)
    with pytest.raises(ValueError, match="inv_propensity has 1 entries"):
        psprecision_at_k(np.eye(2), np.eye(2), inv_propensity=[1.0], k=1)
    with pytest.raises(ValueError, match="Y_train has 0 rows"):
        inverse_propensity(sp.csr_matrix((0, 3)))
    with pytest.raises(ValueError, match="needs at least 3"):
        inverse_propensity([["a"], ["b"]])


def test_bad_truth_is_reported_as_y_true():
    with pytest.raises(ValueError, match="Y_true must be binary"):
        precision_at_k(np.array([[2, 0]]), np.eye(2)[:1], k=1)


# --- scorer ------------------------------------------------------------------------------


class _KNNRanker(ClassifierMixin, BaseEstimator):
    """A minimal multi-label ranker for scorer tests (fit / predict_topk / decision_function)."""

    def __init__(self, *, n_neighbors=5, use_topk=True):
        self.n_neighbors = n_neighbors
        self.use_topk = use_topk

    def fit(self, X, Y):
        self.Y_, self.classes_ = encode_labels(Y, n_samples=X.shape[0])
        self.X_ = sp.csr_matrix(X)
        return self

    def decision_function(self, X):
        return knn_label_scores(self.X_, self.Y_, sp.csr_matrix(X), n_neighbors=self.n_neighbors)

    def __getattr__(self, name):
        if name == "predict_topk" and self.__dict__.get("use_topk", False):
            return self._predict_topk
        raise AttributeError(name)

    def _predict_topk(self, X, k=5):
        idx, sc = topk_from_sparse(self.decision_function(X), k)
        return LabelSpace(self.classes_).labels_of(idx), sc


@pytest.mark.parametrize("use_topk", [True, False])
@pytest.mark.parametrize("label_format", ["csr", "lists"])
def test_topk_scorer_in_grid_search(data_dir, use_topk, label_format):
    X, Y = load_xc_bow(dataset_path(data_dir, "bibtex_bow", "train.txt"))
    X, Y = X[:600], Y[:600]
    y = Y if label_format == "csr" else [[f"tag{c}" for c in row] for row in LabelSpace(np.arange(Y.shape[1])).inverse_transform(Y)]
    search = GridSearchCV(
        _KNNRanker(use_topk=use_topk),
        {"n_neighbors": [1, 10]},
        scoring=make_topk_scorer("precision", k=5),
        cv=KFold(3, shuffle=True, random_state=0),
        error_score="raise",
    )
    search.fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all((scores > 0.05) & (scores <= 1))
    assert search.best_params_ == {"n_neighbors": 10}


def test_scorer_accepts_multiclass_targets():
    class Proba(BaseEstimator):
        classes_ = np.array(["x", "y"])

        def predict_proba(self, X):
            return np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])

    scorer = make_topk_scorer("precision", k=1)
    assert scorer(Proba(), None, np.array(["x", "y", "y"])) == pytest.approx(2 / 3)


def test_make_topk_scorer_validates():
    with pytest.raises(ValueError, match="metric must be one of"):
        make_topk_scorer("accuracy")
    with pytest.raises(ValueError, match="needs inv_propensity"):
        make_topk_scorer("psprecision", k=3)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        make_topk_scorer("ndcg", k=0)
