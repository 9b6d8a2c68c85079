"""RankerEnsemble (issue 49 item 1): combining several rankers' sparse scores."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import GridSearchCV

import skxmc
from skxmc import HierarchicalLabelTree, RankerEnsemble, XRLinearClassifier
from skxmc.datasets import load_demo, make_xmc_classification
from skxmc.ensemble import combine_scores
from skxmc.metrics import make_topk_scorer
from skxmc.pipeline import make_pipeline


@pytest.fixture(scope="module")
def demo():
    d = load_demo()
    # 300 texts: what is tested is sharing, combining and saving, not accuracy
    return list(d.train_texts[:300]), d.train_labels[:300], list(d.test_texts[:100])


@pytest.fixture(scope="module")
def xmc():
    X, Y = make_xmc_classification(n_samples=400, n_features=300, n_labels=40, random_state=0)
    X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y)
    return X[:300], Y[:300], X[300:]


def _members(n=2, **params):
    return [(f"xr{s}", XRLinearClassifier(random_state=s, **params)) for s in range(n)]


# ----------------------------------------------------------------- the user's calls


def test_pipeline_fit_predict_topk_score(demo):
    texts, labels, test_texts = demo
    clf = make_pipeline(
        TfidfVectorizer(dtype=np.float32),
        RankerEnsemble(estimators=_members(), combine="rank", top_k=3),
    )
    clf.fit(texts, labels)
    top_labels, top_scores = clf.predict_topk(test_texts, k=5)
    assert top_labels.shape == top_scores.shape == (100, 5)
    assert np.all(np.diff(top_scores, axis=1) <= 0)  # best first
    Y_pred = clf.predict(test_texts)
    assert sp.issparse(Y_pred) and set(np.diff(Y_pred.indptr)) == {3}
    assert 0.5 < clf.score(texts, labels) <= 1.0
    ens = clf[-1]
    assert list(ens.named_estimators_) == ["xr0", "xr1"]
    assert all(isinstance(e, XRLinearClassifier) for e in ens.estimators_)
    # members are clones: the given estimators stay unfitted
    assert not hasattr(ens.estimators[0][1], "classes_")


def test_grid_search_over_combine_and_a_member_parameter(xmc):
    X, Y, _ = xmc
    search = GridSearchCV(
        RankerEnsemble(estimators=_members()),
        {"combine": ["mean", "softmax"], "xr1__beam_size": [2, 10]},
        scoring=make_topk_scorer("precision", k=3),
        cv=2,
        error_score="raise",
    )
    search.fit(X, Y)
    assert set(search.best_params_) == {"combine", "xr1__beam_size"}
    assert (
        search.best_estimator_.named_estimators_["xr1"].beam_size
        == (search.best_params_["xr1__beam_size"])
    )


def test_get_and_set_params_route_to_members():
    ens = RankerEnsemble(estimators=_members())
    params = ens.get_params()
    assert params["xr0__random_state"] == 0 and params["xr1__random_state"] == 1
    ens.set_params(xr1__Cp=2.0, combine="rank")
    assert ens.named_estimators["xr1"].Cp == 2.0 and ens.combine == "rank"
    cloned = clone(ens)
    assert cloned.named_estimators["xr1"] is not ens.named_estimators["xr1"]
    assert cloned.named_estimators["xr1"].Cp == 2.0


def test_default_members_are_three_tree_seeds(xmc):
    X, Y, _ = xmc
    ens = RankerEnsemble().fit(X, Y)
    assert list(ens.named_estimators_) == ["xr0", "xr1", "xr2"]
    assert [e.random_state for e in ens.estimators_] == [0, 1, 2]


# -------------------------------------------------------- the combination functions


def _dense(S):
    return np.asarray(sp.csr_matrix(S).toarray(), dtype=np.float64)


def _naive(mats, combine, weights, K, T):
    """Row by row, label by label, as the docstring says."""
    n, L = mats[0].shape
    out = np.zeros((n, L))
    for S, w in zip(mats, weights):
        S = sp.csr_matrix(S)
        for i in range(n):
            cols = S.indices[S.indptr[i] : S.indptr[i + 1]]
            vals = S.data[S.indptr[i] : S.indptr[i + 1]].astype(np.float64)
            if combine == "mean":
                contrib = vals
            elif combine == "rank":
                order = sorted(range(len(cols)), key=lambda j: (-vals[j], cols[j]))
                contrib = np.zeros(len(cols))
                for r, j in enumerate(order, start=1):
                    contrib[j] = (K - r + 1) / K
            else:
                e = np.exp(vals / T - np.max(vals / T))
                contrib = e / e.sum()
            for c, v in zip(cols, contrib):
                out[i, c] += w * v
    return out / np.sum(weights)


@pytest.mark.parametrize("combine", ["mean", "rank", "softmax"])
@pytest.mark.parametrize("weights", [None, [1.0, 3.0, 0.5]])
def test_combine_scores_matches_a_naive_reference(combine, weights):
    rng = np.random.default_rng(0)
    mats = []
    for _ in range(3):
        S = sp.random(20, 30, density=0.2, random_state=rng, format="csr", dtype=np.float64)
        S.data = rng.random(S.nnz)
        S.data[:3] = S.data[3]  # ties, broken by the lower column
        mats.append(S)
    K = max(int(np.diff(S.indptr).max()) for S in mats)
    got = combine_scores(mats, combine=combine, weights=weights, n_candidates=K, temperature=0.2)
    w = np.ones(3) if weights is None else np.asarray(weights)
    np.testing.assert_allclose(_dense(got), _naive(mats, combine, w, K, 0.2), atol=1e-6)
    # the union of the candidates is stored, nothing else
    union = sum(sp.csr_matrix((np.ones(S.nnz), S.indices, S.indptr), S.shape) for S in mats)
    assert got.nnz == union.nnz


def test_combine_scores_errors():
    S = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="at least one"):
        combine_scores([])
    with pytest.raises(ValueError, match="combine must be one of"):
        combine_scores([S], combine="max")
    with pytest.raises(ValueError, match="one shape"):
        combine_scores([S, sp.csr_matrix((3, 4))])
    with pytest.raises(ValueError, match="weights must hold 2"):
        combine_scores([S, S], weights=[1.0])
    with pytest.raises(ValueError, match="not all 0"):
        combine_scores([S, S], weights=[0, 0])


@pytest.mark.parametrize("combine", ["mean", "rank", "softmax"])
def test_one_member_gives_that_members_ranking(xmc, combine):
    X, Y, X_te = xmc
    xr = XRLinearClassifier(random_state=0).fit(X, Y)
    ens = RankerEnsemble(estimators=[("xr", XRLinearClassifier(random_state=0))], combine=combine)
    ens.fit(X, Y)
    labels, scores = ens.predict_topk(X_te, k=5)
    want_labels, want_scores = xr.predict_topk(X_te, k=5)
    # Ties of the combined score (a Borda count has none, a softmax keeps the order) aside,
    # the member's ranking; with "mean" its very scores.
    np.testing.assert_array_equal(labels, want_labels)
    if combine == "mean":
        np.testing.assert_allclose(scores, want_scores, rtol=1e-6)


def test_members_scores_are_combined_as_documented(xmc):
    X, Y, X_te = xmc
    ens = RankerEnsemble(estimators=_members(3), combine="softmax", temperature=0.5, candidates=7)
    ens.fit(X, Y)
    raw = [m._rank_scores(X_te, 7) for m in ens.estimators_]
    want = combine_scores(raw, combine="softmax", temperature=0.5)
    np.testing.assert_allclose(_dense(ens.decision_function(X_te)), _dense(want), atol=1e-6)
    ens.set_params(combine="mean", weights=[1, 0, 2])
    probas = [m._proba_of(m._rank_scores(X_te, 7)) for m in ens.estimators_]
    want = combine_scores(probas, weights=[1, 0, 2])
    np.testing.assert_allclose(_dense(ens.predict_proba(X_te)), _dense(want), atol=1e-6)


def test_label_subset_and_dense_target(xmc):
    X, Y, X_te = xmc
    ens = RankerEnsemble(estimators=_members()).fit(X, Y.toarray())
    P = ens.predict_proba(X_te)
    assert isinstance(P, np.ndarray) and P.shape == (100, Y.shape[1])
    assert ((P >= 0) & (P <= 1)).all()
    pred = ens.predict(X_te)  # threshold="auto": predict_proba >= 0.5 for a dense Y
    np.testing.assert_array_equal(pred, (P >= 0.5).astype(int))
    labels, _ = ens.predict_topk(X_te, k=3, labels=[1, 5, 7])
    assert set(labels.ravel()) <= {1, 5, 7}


def test_fixed_classes_reach_the_members(demo):
    texts, labels, _ = demo
    classes = np.array(sorted({lab for row in labels for lab in row} | {"unseen"}))
    clf = make_pipeline(
        TfidfVectorizer(dtype=np.float32),
        RankerEnsemble(estimators=_members(), classes=classes),
    ).fit(texts, labels)
    ens = clf[-1]
    np.testing.assert_array_equal(ens.classes_, classes)
    for member in ens.estimators_:
        np.testing.assert_array_equal(member.classes_, classes)


def test_members_with_their_own_features(demo):
    """A member that is a pipeline of its own (character n-grams) beside word TF-IDF."""
    texts, labels, test_texts = demo
    ens = RankerEnsemble(
        estimators=[
            ("words", make_pipeline(TfidfVectorizer(), XRLinearClassifier())),
            (
                "chars",
                make_pipeline(
                    TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 4)),
                    XRLinearClassifier(tree=HierarchicalLabelTree(random_state=1)),
                ),
            ),
        ],
        top_k=2,
    ).fit(texts, labels)
    top_labels, _ = ens.predict_topk(test_texts)
    assert top_labels.shape == (100, 2)
    assert ens.score(texts, labels) > 0.5


def test_parallel_fit_gives_the_sequential_model(xmc):
    import joblib

    X, Y, X_te = xmc
    one = RankerEnsemble(estimators=_members(), n_jobs=1).fit(X, Y)
    # Threads: loky's worker processes would each load numba's kernels (a minute on CI)
    with joblib.parallel_config(backend="threading"):
        two = RankerEnsemble(estimators=_members(), n_jobs=2).fit(X, Y)
    for a, b in zip(one.predict_topk(X_te), two.predict_topk(X_te)):
        np.testing.assert_array_equal(a, b)


def test_dropped_member_and_its_weight(xmc):
    X, Y, _ = xmc
    ens = RankerEnsemble(estimators=_members(3), weights=[1, 5, 1])
    ens.set_params(xr1="drop").fit(X, Y)
    assert list(ens.named_estimators_) == ["xr0", "xr2"]
    np.testing.assert_array_equal(ens._member_weights(), [1, 1])


def _text_members(tfidf=None, chars=None):
    return [
        ("w0", make_pipeline(tfidf or TfidfVectorizer(dtype=np.float32), XRLinearClassifier())),
        (
            "w1",
            make_pipeline(
                TfidfVectorizer(dtype=np.float32),
                XRLinearClassifier(tree=HierarchicalLabelTree(random_state=1)),
            ),
        ),
        (
            "chars",
            make_pipeline(
                chars or TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 4), dtype=np.float32),
                XRLinearClassifier(),
            ),
        ),
    ]


def test_shared_transforms_are_fitted_once_and_give_the_same_model(demo):
    texts, labels, test_texts = demo
    shared = RankerEnsemble(estimators=_text_members(), top_k=3).fit(texts, labels)
    alone = RankerEnsemble(estimators=_text_members(), top_k=3, share_transforms=False)
    alone.fit(texts, labels)
    w0, w1, chars = shared.estimators_
    assert w0[0] is w1[0]  # one fitted vectoriser for the two members that ask for it
    assert chars[0] is not w0[0]
    assert alone.estimators_[0][0] is not alone.estimators_[1][0]
    for a, b in zip(shared.predict_topk(test_texts), alone.predict_topk(test_texts)):
        np.testing.assert_array_equal(a, b)
    # each member is a whole fitted pipeline of its own, usable alone
    top, _ = w1.predict_topk(test_texts[:5], k=2)
    assert top.shape == (5, 2)


def test_transforms_with_other_parameters_are_not_shared(demo):
    texts, labels, _ = demo
    members = _text_members(tfidf=TfidfVectorizer(sublinear_tf=True, dtype=np.float32))
    ens = RankerEnsemble(estimators=members).fit(texts, labels)
    w0, w1, _ = ens.estimators_
    assert w0[0] is not w1[0]
    assert w0[0].sublinear_tf and not w1[0].sublinear_tf


def test_pipeline_members_save_and_load(demo, tmp_path):
    texts, labels, test_texts = demo
    ens = RankerEnsemble(estimators=_text_members(), combine="rank", top_k=4)
    ens.fit(texts, labels)
    ens.save(tmp_path / "ens")
    loaded = skxmc.load(tmp_path / "ens")
    assert [type(m).__name__ for m in loaded.estimators_] == ["Pipeline"] * 3
    for a, b in zip(ens.predict_topk(test_texts), loaded.predict_topk(test_texts)):
        np.testing.assert_array_equal(a, b)
    assert (ens.predict(test_texts) != loaded.predict(test_texts)).nnz == 0


_DASK_FIT = """
import numpy as np, scipy.sparse as sp
from distributed import Client, LocalCluster
from joblib import parallel_config
from skxmc import RankerEnsemble, XRLinearClassifier
from skxmc.datasets import make_xmc_classification

X, Y = make_xmc_classification(n_samples=300, n_features=200, n_labels=30, random_state=0)
X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y)
members = lambda: [(f"xr{s}", XRLinearClassifier(random_state=s)) for s in range(2)]
local = RankerEnsemble(estimators=members()).fit(X, Y)
with LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster:
    with Client(cluster) as client, parallel_config(backend="dask"):
        remote = RankerEnsemble(estimators=members(), n_jobs=2).fit(X, Y)
        ran = sum(1 for key in client.run_on_scheduler(
            lambda dask_scheduler: list(dask_scheduler.task_prefixes)) if "fit_member" in key)
for a, b in zip(local.predict_topk(X), remote.predict_topk(X)):
    np.testing.assert_array_equal(a, b)
print("members on the cluster:", ran)
"""


@pytest.mark.slow  # a fresh interpreter and a LocalCluster: about 10 s
def test_fit_through_a_dask_client_does_not_hang():
    """Members sent to Dask workers fit there (their own node problems are not sent back
    to the cluster from inside a task, which deadlocked), in a subprocess with a timeout."""
    pytest.importorskip("distributed")
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _DASK_FIT], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "members on the cluster:" in proc.stdout
    assert not proc.stdout.strip().endswith(": 0")


# ------------------------------------------------------------------- persistence


def test_save_load_round_trip_and_info(demo, tmp_path, capsys):
    from skxmc.cli import main

    texts, labels, test_texts = demo
    clf = make_pipeline(
        TfidfVectorizer(dtype=np.float32),
        RankerEnsemble(estimators=_members(), combine="softmax", top_k=4),
    ).fit(texts, labels)
    skxmc.save(clf, tmp_path / "model")
    loaded = skxmc.load(tmp_path / "model")
    for a, b in zip(clf.predict_topk(test_texts), loaded.predict_topk(test_texts)):
        np.testing.assert_array_equal(a, b)
    assert (clf.predict(test_texts) != loaded.predict(test_texts)).nnz == 0
    assert loaded[-1].get_params()["combine"] == "softmax"
    X, X_te = clf[0].transform(texts), clf[0].transform(test_texts)
    ens = RankerEnsemble(estimators=_members()).fit(X, labels)
    ens.save(tmp_path / "ens")
    again = skxmc.load(tmp_path / "ens")
    np.testing.assert_array_equal(again.classes_, ens.classes_)
    assert main(["info", str(tmp_path / "ens")]) == 0
    assert "RankerEnsemble" in capsys.readouterr().out
    restored = pickle.loads(pickle.dumps(ens))
    np.testing.assert_array_equal(restored.predict_topk(X_te)[0], ens.predict_topk(X_te)[0])


# ------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("estimators", "match"),
    [
        ([], "non-empty list"),
        ([("a", XRLinearClassifier()), ("a", XRLinearClassifier())], "unique"),
        ([XRLinearClassifier()], r"\(name, estimator\) tuples"),
        ([("a", TfidfVectorizer())], "multi-label ranker"),
        ([("a", "drop")], "keep at least one"),
    ],
)
def test_bad_estimators(xmc, estimators, match):
    X, Y, _ = xmc
    with pytest.raises(ValueError, match=match):
        RankerEnsemble(estimators=estimators).fit(X, Y)


def test_unknown_combine_and_bad_weights(xmc):
    X, Y, _ = xmc
    with pytest.raises(ValueError, match="combine"):
        RankerEnsemble(estimators=_members(), combine="max").fit(X, Y)
    with pytest.raises(ValueError, match="weights must hold 2"):
        RankerEnsemble(estimators=_members(), weights=[1, 2, 3]).fit(X, Y)


def test_members_with_different_classes_are_refused(xmc):
    X, Y, _ = xmc
    members = [
        ("all", XRLinearClassifier()),
        ("some", XRLinearClassifier(classes=np.arange(Y.shape[1]) + 100)),
    ]
    with pytest.raises(ValueError, match="share one label space"):
        RankerEnsemble(estimators=members).fit(X, Y)
