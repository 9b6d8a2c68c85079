"""Ranking metrics: formulas, agreement with napkinXC on real predictions, invariants, errors."""

from __future__ import annotations

import doctest
import gzip
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, cross_validate
from sklearn.pipeline import make_pipeline

from skxmc import XRLinearClassifier
from skxmc._baselines import knn_label_scores
from skxmc._ranking import topk_from_sparse
from skxmc.datasets import load_demo, load_xc_bow
from skxmc.labels import LabelSpace, encode_labels
from skxmc.metrics import (
    InversePropensities,
    evaluate,
    inverse_propensity,
    make_topk_scorer,
    ndcg_at_k,
    precision_at_k,
    psndcg_at_k,
    psprecision_at_k,
    recall_at_k,
)

from ._helpers import dataset_path

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
    assert psprecision_at_k(Y, S, inv_propensity=w, k=3, normalize=True) == pytest.approx(
        psp / best
    )


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
    for scores in (
        S,
        sp.csr_matrix(S),
        (np.array([[2, 1, 0, 3]]), np.array([[0.5, 0.5, 0.5, 0.1]])),
    ):
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
        assert out[f"psprecision@{k}"] == psprecision_at_k(
            Y, S, inv_propensity=w, k=k, normalize=True
        )
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
                    nxc.psprecision_at_k(truth, ranking, inv_ps=w.values, k=k, normalize=normalize),
                ),
                (
                    psndcg_at_k(Y_true, scores, inv_propensity=w, k=k, normalize=normalize),
                    nxc.psndcg_at_k(truth, ranking, inv_ps=w.values, k=k, normalize=normalize),
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
    train_texts, train_labels = _jsonl(
        dataset_path(data_dir, "tibkat_gnd_en", "train.jsonl.gz"), 6000
    )
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
    w = inverse_propensity(Y).values if len(Y) >= 3 else np.ones(Y.shape[1])
    if has.all():
        assert recall_at_k(Y, perfect, k=Y.shape[1]) == pytest.approx(1.0)
        assert ndcg_at_k(Y, perfect, k=k) == pytest.approx(1.0)
        assert psprecision_at_k(
            Y, Y * w + 0.001 * S, inv_propensity=w, k=k, normalize=True
        ) == pytest.approx(1.0)
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
    with pytest.raises(ValueError, match="inv_propensity must be finite and non-negative"):
        psprecision_at_k(np.eye(2), np.eye(2), inv_propensity=[1.0, -1.0], k=1)
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
    y = (
        Y
        if label_format == "csr"
        else [
            [f"tag{c}" for c in row]
            for row in LabelSpace(np.arange(Y.shape[1])).inverse_transform(Y)
        ]
    )
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


# --- propensities keyed by label ------------------------------------------------------------


def _naive_inverse_propensity(label_lists, A=0.55, B=1.5) -> dict:
    """Jain et al.'s formula, one label at a time, in Python floats (float64)."""
    counts: dict = {}
    for labels in label_lists:
        for label in set(labels):
            counts[label] = counts.get(label, 0) + 1
    c = (math.log(len(label_lists)) - 1.0) * (B + 1.0) ** A
    return {label: 1.0 + c * (n + B) ** (-A) for label, n in counts.items()}


def _naive_psp_at_k(estimator, X_test, Y_test, inv_propensity: dict, k: int) -> float:
    """PSP@k by a plain loop: rank each row's candidates (score desc, column asc), look the
    top k labels up in the row's truth and in the propensities by label."""
    S = estimator.decision_function(X_test)
    total = 0.0
    for i, labels in enumerate(Y_test):
        if sp.issparse(S):
            row = S.getrow(i)
            candidates = list(zip(row.indices.tolist(), row.data.tolist()))
        else:
            candidates = list(enumerate(np.asarray(S[i]).tolist()))
        candidates.sort(key=lambda t: (-t[1], t[0]))
        gain = 0.0
        for column, _ in candidates[:k]:
            label = estimator.classes_[column]
            if label in set(labels):
                gain += inv_propensity[label]
        total += gain / k
    return total / len(Y_test)


def test_psp_scorer_in_cross_validation_looks_propensities_up_by_label():
    demo = load_demo()
    X, Y = demo.train_texts[:1200], demo.train_labels[:1200]
    w = inverse_propensity(Y)
    sc = make_topk_scorer("psprecision", k=5, inv_propensity=w)

    def pipe():
        return make_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier())

    # The user's call, as written in the bug report.
    scores = cross_val_score(pipe(), X, Y, cv=KFold(3), scoring=sc)
    cv = cross_validate(
        pipe(), X, Y, cv=KFold(3), scoring=sc, return_estimator=True, return_indices=True
    )
    np.testing.assert_array_equal(cv["test_score"], scores)
    reference = _naive_inverse_propensity(list(Y))
    n_labels = len(reference)
    for estimator, test_idx, score in zip(cv["estimator"], cv["indices"]["test"], scores):
        # Each fold learns only its training part's labels: column j is not label j of Y.
        assert len(estimator.classes_) < n_labels
        X_test, Y_test = [X[i] for i in test_idx], Y[test_idx]
        assert score == pytest.approx(
            _naive_psp_at_k(estimator, X_test, Y_test, reference, 5), rel=1e-12, abs=1e-15
        )
        # The positional form of the same propensities cannot be mis-aligned any more.
        positional = make_topk_scorer("psprecision", k=5, inv_propensity=np.asarray(w))
        with pytest.raises(
            ValueError,
            match=f"inv_propensity has {n_labels} entries but the scores have "
            f"{len(estimator.classes_)} columns",
        ):
            positional(estimator, X_test, Y_test)


class _FixedScores(BaseEstimator):
    """A fitted 'fold' estimator: fixed dense scores over a subset of the labels."""

    def __init__(self, classes, scores):
        self.classes = classes
        self.scores = scores

    @property
    def classes_(self):
        return np.asarray(self.classes)

    def decision_function(self, X):
        return np.asarray(self.scores, dtype=float)


@pytest.mark.parametrize("kind", ["str", "int"])
def test_fold_with_a_subset_of_the_labels(kind):
    name = {"str": lambda i: f"L{i}", "int": lambda i: 10 * i + 3}[kind]
    # Label l occurs in 4, 1, 2 and 3 training rows: four different weights.
    Y_full = [[name(0)], [name(0), name(1)], [name(0), name(2)], [name(0), name(3)]]
    Y_full += [[name(2), name(3)], [name(3)]]
    w = inverse_propensity(Y_full)
    weight = dict(zip(w.classes.tolist(), w.values.tolist()))
    assert len(set(weight.values())) == 4
    # The fold knows labels 1 and 3 only: its column 0 is label 1, not the label 0 of w.
    fold = _FixedScores([name(1), name(3)], [[0.9, 0.1], [0.2, 0.8], [0.7, 0.6]])
    Y_test = [[name(1)], [name(3), name(0)], [name(3)]]
    expected = (weight[name(1)] + weight[name(3)] + 0) / 3
    for scorer_w in (w, weight, (w.classes, w.values), (list(w.classes), list(w.values))):
        sc = make_topk_scorer("psprecision", k=1, inv_propensity=scorer_w)
        assert sc(fold, None, Y_test) == pytest.approx(expected, rel=1e-15)
    # Positionally, label 1's column would get label 0's weight: refused.
    with pytest.raises(ValueError, match="inv_propensity has 4 entries but the scores have 2"):
        make_topk_scorer("psprecision", k=1, inv_propensity=w.values)(fold, None, Y_test)


@pytest.mark.parametrize("kind", ["str", "int"])
def test_keyed_inv_propensity_forms_agree(kind, rng):
    classes = np.array([f"c{i:02d}" for i in range(12)]) if kind == "str" else np.arange(12) * 7
    Y = (rng.random((30, 12)) < 0.25).astype(np.float32)
    S = rng.random((30, 12))
    values = rng.uniform(1.0, 5.0, 12)
    label_lists = LabelSpace(classes).inverse_transform(Y)
    perm = rng.permutation(12)
    extra_label = "zz" if kind == "str" else 999
    pd = pytest.importorskip("pandas")
    forms = [
        values,  # positional: exactly one entry per column
        InversePropensities(classes, values),
        InversePropensities(classes[perm], values[perm]),  # any order
        dict(zip(classes[perm].tolist(), values[perm].tolist())),
        {**dict(zip(classes.tolist(), values.tolist())), extra_label: 100.0},  # extra label
        pd.Series(values[perm], index=classes[perm]),
        (classes[perm], values[perm]),
        (classes[perm].tolist(), values[perm].tolist()),
    ]
    for normalize in (False, True):
        ref = evaluate(
            label_lists, S, ks=(1, 3), inv_propensity=values, classes=classes, normalize=normalize
        )
        for form in forms:
            got = evaluate(
                label_lists, S, ks=(1, 3), inv_propensity=form, classes=classes, normalize=normalize
            )
            assert got == pytest.approx(ref, rel=1e-15)
            psndcg = psndcg_at_k(
                label_lists, S, inv_propensity=form, classes=classes, k=3, normalize=normalize
            )
            assert psndcg == pytest.approx(ref["psndcg@3"], rel=1e-15)


@pytest.mark.parametrize("metric", ["psprecision", "psndcg", "evaluate"])
@pytest.mark.parametrize("n", [3, 5])
def test_positional_inv_propensity_length_must_match_exactly(metric, n):
    Y, S = np.eye(4)[:3], np.eye(4)[:3]
    fn = {
        "psprecision": lambda w: psprecision_at_k(Y, S, inv_propensity=w, k=1),
        "psndcg": lambda w: psndcg_at_k(Y, S, inv_propensity=w, k=1),
        "evaluate": lambda w: evaluate(Y, S, ks=(1,), inv_propensity=w),
    }[metric]
    with pytest.raises(ValueError, match=f"inv_propensity has {n} entries but the scores have 4"):
        fn(np.ones(n))  # too short (3) and too long (5)
    with pytest.raises(ValueError, match=f"inv_propensity has {n} entries but the scores have 4"):
        fn(InversePropensities(None, np.ones(n)))
    result = fn(np.ones(4))  # exactly one entry per column
    assert all(v == 1.0 for v in (result.values() if isinstance(result, dict) else [result]))


def test_keyed_inv_propensity_missing_labels_are_named():
    S = np.eye(3)
    Y = [["a"], ["b"], ["c"]]
    with pytest.raises(ValueError, match=r"no value for 2 of the 3 labels .* \['b', 'c'\]"):
        psprecision_at_k(Y, S, inv_propensity={"a": 1.0}, classes=["a", "b", "c"], k=1)
    with pytest.raises(ValueError, match="keyed by int labels, these are str"):
        psprecision_at_k(
            Y, S, inv_propensity={0: 1.0, 1: 1.0, 2: 1.0}, classes=["a", "b", "c"], k=1
        )
    with pytest.raises(ValueError, match="score columns have no labels; pass classes="):
        psprecision_at_k(np.eye(3), S, inv_propensity={"a": 1.0, "b": 1.0, "c": 1.0}, k=1)


def test_integer_labels_without_classes_are_column_indices():
    # Integer label collections and an (indices, scores) pair: the labels are the columns.
    Y_true = [[0], [2]]
    pair = (np.array([[0, 1], [2, 1]]), np.array([[0.9, 0.1], [0.8, 0.2]]))
    w_keyed = {0: 2.0, 1: 3.0, 2: 4.0, 7: 9.0}
    assert psprecision_at_k(Y_true, pair, inv_propensity=w_keyed, k=1) == 3.0
    # Nothing says how many columns there are: a positional array names them (>= the
    # largest label + 1), a shorter one is refused.
    assert psprecision_at_k(Y_true, pair, inv_propensity=[2.0, 3.0, 4.0, 9.0], k=1) == 3.0
    with pytest.raises(ValueError, match="inv_propensity has 2 entries but the scores have 3"):
        psprecision_at_k(Y_true, pair, inv_propensity=[2.0, 3.0], k=1)
    with pytest.raises(ValueError, match=r"no value for 1 of the 3 labels .* \[1\]"):
        psprecision_at_k(Y_true, pair, inv_propensity={0: 2.0, 2: 4.0}, k=1)


def test_inverse_propensity_is_keyed_by_label():
    Y_lists = [["b"], ["a", "b"], ["b"], ["c"]]
    w = inverse_propensity(Y_lists)
    np.testing.assert_array_equal(w.classes, ["a", "b", "c"])
    ref = _naive_inverse_propensity(Y_lists)
    np.testing.assert_allclose(w.values, [ref["a"], ref["b"], ref["c"]], rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(w), w.values)
    assert len(w) == 3
    # classes: any order, and labels without training samples get N_l = 0.
    w2 = inverse_propensity(Y_lists, classes=["c", "zz", "a"])
    np.testing.assert_array_equal(w2.classes, ["c", "zz", "a"])
    np.testing.assert_allclose(w2.lookup(["a", "c"]), [ref["a"], ref["c"]], rtol=1e-15)
    assert w2.lookup(["zz"])[0] > w2.lookup(["a"])[0]
    # int labels, and a 1-D multi-class target
    w3 = inverse_propensity([[5], [5, 9], [9], [5]])
    np.testing.assert_array_equal(w3.classes, [5, 9])
    np.testing.assert_array_equal(inverse_propensity(np.array([5, 9, 9, 5])).classes, [5, 9])
    # An indicator matrix has no column names: positional, unless classes names them.
    Y = LabelSpace(np.array(["a", "b", "c"])).transform(Y_lists).Y
    w4 = inverse_propensity(Y)
    assert w4.classes is None
    np.testing.assert_allclose(w4.values, w.values, rtol=1e-15)
    w5 = inverse_propensity(Y, classes=["a", "b", "c"])
    np.testing.assert_array_equal(w5.classes, ["a", "b", "c"])
    np.testing.assert_allclose(w5.values, w.values, rtol=1e-15)
    # Validated, read-only copies.
    with pytest.raises(ValueError):
        w.values[0] = 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"B": -1.2}, "B must be > 0"),
        ({"B": 0}, "B must be > 0"),
        ({"A": -0.5}, "A must be >= 0"),
        ({"A": float("nan")}, "A must be a finite real number"),
        ({"B": float("inf")}, "B must be a finite real number"),
        ({"B": 1 + 2j}, "B must be a finite real number"),
        ({"A": "0.55"}, "A must be a finite real number"),
        ({"A": True}, "A must be a finite real number"),
    ],
)
def test_inverse_propensity_validates_a_and_b(kwargs, match):
    with pytest.raises(ValueError, match=match):
        inverse_propensity([["a"], ["b"], ["a"]], **kwargs)


def test_inverse_propensity_accepts_numpy_constants():
    w = inverse_propensity([["a"], ["b"], ["a"]], A=np.float32(0.5), B=np.int64(2))
    assert np.all(np.isreal(w.values)) and np.all(w.values > 1)


@pytest.mark.parametrize(
    ("classes", "values", "match"),
    [
        (["a", "a"], [1.0, 2.0], "lists the label 'a' more than once"),
        (np.array([3, 1, 3]), [1.0, 2.0, 3.0], "lists the label 3 more than once"),
        (["a", 1], [1.0, 2.0], "mixes str and int labels"),
        (["a", "b"], [1.0], "has 2 labels but 1 values"),
        (["a"], [-1.0], "finite and non-negative"),
        (["a"], [np.nan], "finite and non-negative"),
        (["a"], ["x"], "must hold real numbers"),
        (["a"], [[1.0]], "must be 1-D"),
    ],
)
def test_inverse_propensities_validate(classes, values, match):
    with pytest.raises(ValueError, match=match):
        InversePropensities(classes, values)


def test_scorer_validates_inv_propensity_up_front_and_pickles():
    with pytest.raises(ValueError, match="inv_propensity must be finite"):
        make_topk_scorer("psprecision", k=1, inv_propensity=[1.0, -2.0])
    with pytest.raises(ValueError, match="inv_propensity is required"):
        make_topk_scorer("psndcg", k=1, inv_propensity=None)
    sc = make_topk_scorer("psprecision", k=1, inv_propensity={"x": 2.0, "y": 4.0})
    fold = _FixedScores(["y"], [[1.0], [0.5]])
    assert pickle.loads(pickle.dumps(sc))(fold, None, [["y"], ["x"]]) == 2.0


# --- documentation examples ------------------------------------------------------------------


def test_docstring_examples_run():
    import skxmc.metrics as metrics_module

    result = doctest.testmod(metrics_module)
    assert result.attempted > 10 and result.failed == 0


def test_metrics_page_examples_run():
    page = Path(__file__).resolve().parents[1] / "docs" / "metrics.rst"
    if not page.exists():
        pytest.skip(f"{page} is not in this checkout")
    result = doctest.testfile(str(page), module_relative=False)
    assert result.attempted > 0 and result.failed == 0


def test_topk_to_csr_inverts_topk_from_sparse_and_drops_empty_slots():
    from skxmc._ranking import topk_to_csr

    S = sp.csr_matrix(np.array([[0.0, 0.5, 0.2, 0.0], [0.0, 0.0, 0.0, 0.9]], np.float32))
    idx, val = topk_from_sparse(S, 3)  # row 1 has one entry: two empty (-1) slots
    back = topk_to_csr(idx, val, S.shape[1])
    assert back.dtype == np.float32 and back.has_sorted_indices
    np.testing.assert_array_equal(back.toarray(), S.toarray())
    assert back.nnz == S.nnz
