"""``sample_weight`` in XR-Linear (issue 48 item 12): liblinear's instance weights in the
solver, PIFA sums of weighted rows in the tree, a weighted ``score``, and sklearn's
metadata routing through Pipeline and GridSearchCV.

The rule everything follows: a sample of weight ``w`` counts as ``w`` copies of itself, and
weight 0 as no sample at all. Weight 0 equals dropping the row bit for bit (the rows leave
every sub-problem, as liblinear's ``remove_zero_weight`` does); integer weights equal
repeated rows up to the solver's tolerance, so those tests converge the solver (``tol``
tiny) and keep every weight (``weight_threshold=0``).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import normalize
from sklearn.svm import LinearSVC

from skxmc import XRLinearClassifier
from skxmc.linear._solver import LayerGroups, fit_binary, fit_layer
from skxmc.tree import HierarchicalLabelTree, pifa_embeddings

CONVERGED = {"tol": 1e-8, "max_iter": 100_000}


def _problem(n=120, d=40, n_labels=24, seed=0):
    """Normalised sparse X and a dense 0/1 Y with two labels per row: every label keeps
    positives whichever rows a test drops, so ``classes_`` does not change."""
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    X.data += 0.1
    X = normalize(X).astype(np.float32)
    Y = np.zeros((n, n_labels), dtype=np.int64)
    for i in range(n):
        Y[i, [i % n_labels, (3 * i + 1) % n_labels]] = 1
    return X, Y


def _xr(**params):
    # a four-layer tree on 24 labels: every layer's node problems see the weights
    tree = HierarchicalLabelTree(max_leaf_size=4, branching_factor=2)
    return XRLinearClassifier(tree=tree, top_k=5, **params)


def _same_model(a, b):
    assert len(a.weights_) == len(b.weights_)
    for Wa, Wb in zip(a.weights_, b.weights_):
        assert (Wa != Wb).nnz == 0
    for Ca, Cb in zip(a.tree_.cluster_chain_, b.tree_.cluster_chain_):
        assert (Ca != Cb).nnz == 0


VARIANTS = [
    pytest.param({"negative_sampling": "tfn", "loss": "squared_hinge"}, id="tfn-sqhinge"),
    pytest.param({"negative_sampling": "tfn+man", "loss": "squared_hinge"}, id="man-sqhinge"),
    pytest.param({"negative_sampling": "tfn", "loss": "logistic"}, id="tfn-logistic"),
    pytest.param({"negative_sampling": "tfn+man", "loss": "logistic"}, id="man-logistic"),
    pytest.param({"relevance_weighted": True}, id="relevance"),
]


# ---------------------------------------------------------------- XR-Linear, whole model


@pytest.mark.parametrize("params", VARIANTS)
def test_weight_zero_is_dropping_the_row(params):
    X, Y = _problem()
    w = (np.random.RandomState(1).rand(X.shape[0]) > 0.3).astype(float)
    keep = w > 0
    weighted = _xr(**params).fit(X, Y, sample_weight=w)
    dropped = _xr(**params).fit(X[keep], Y[keep])
    _same_model(weighted, dropped)  # default tol: the very same computation
    ia, sa = weighted.predict_topk(X)
    ib, sb = dropped.predict_topk(X)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(sa, sb)


@pytest.mark.parametrize("params", VARIANTS)
def test_integer_weight_is_repeating_the_row(params):
    X, Y = _problem()
    w = np.random.RandomState(2).randint(0, 4, X.shape[0])
    rep = np.repeat(np.arange(X.shape[0]), w)
    weighted = _xr(**params, weight_threshold=0.0, **CONVERGED).fit(X, Y, sample_weight=w)
    repeated = _xr(**params, weight_threshold=0.0, **CONVERGED).fit(X[rep], Y[rep])
    for Ca, Cb in zip(weighted.tree_.cluster_chain_, repeated.tree_.cluster_chain_):
        assert (Ca != Cb).nnz == 0  # PIFA summed the weighted rows as the repeated ones
    ia, sa = weighted.predict_topk(X)
    ib, sb = repeated.predict_topk(X)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_allclose(sa, sb, rtol=1e-5, atol=1e-6)


def test_weights_of_one_are_the_unweighted_fit():
    X, Y = _problem()
    plain = _xr(negative_sampling="tfn+man").fit(X, Y)
    ones = _xr(negative_sampling="tfn+man").fit(X, Y, sample_weight=np.ones(X.shape[0]))
    _same_model(plain, ones)


def test_weights_change_the_model_and_label_sets_work():
    X, Y = _problem()
    labels = [list(np.flatnonzero(row)) for row in Y]
    w = np.random.RandomState(3).uniform(0.1, 5.0, X.shape[0])
    plain = _xr().fit(X, labels)
    weighted = _xr().fit(X, labels, sample_weight=list(w))  # a list is fine
    assert any((Wa != Wb).nnz for Wa, Wb in zip(plain.weights_, weighted.weights_))
    # a scalar weight scales every cost: the same as multiplying Cp and Cn
    scaled = _xr(Cp=2.0, Cn=2.0).fit(X, labels)
    scalar = _xr().fit(X, labels, sample_weight=2.0)
    for Wa, Wb in zip(scaled.weights_, scalar.weights_):
        np.testing.assert_array_equal(Wa.toarray(), Wb.toarray())


def test_sklearns_equivalence_check_data_with_positional_y():
    """sklearn's check_sample_weight_equivalence (xfailed in test_common: it passes y= by
    keyword), run here on its own data with Y positional and the solver converged."""
    rng = np.random.RandomState(42)
    X = rng.rand(15, 30)
    y = rng.randint(0, 3, size=15)
    sw = rng.randint(0, 5, size=15)
    X_rep, y_rep = X.repeat(sw, axis=0), y.repeat(sw)
    params = {"weight_threshold": 0.0, "random_state": 0, **CONVERGED}
    repeated = XRLinearClassifier(**params).fit(X_rep, y_rep)
    weighted = XRLinearClassifier(**params).fit(X, y, sample_weight=sw)
    for method in ("predict_proba", "decision_function", "predict"):
        a, b = getattr(repeated, method)(X), getattr(weighted, method)(X)
        if method == "predict":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_distributed_fit_takes_the_weights():
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster
    from joblib import parallel_config

    X, Y = _problem()
    w = np.random.RandomState(4).randint(0, 3, X.shape[0]).astype(float)
    local = _xr(negative_sampling="tfn+man").fit(X, Y, sample_weight=w)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster:
        with Client(cluster), parallel_config(backend="dask"):
            remote = _xr(negative_sampling="tfn+man").fit(X, Y, sample_weight=w)
    assert remote.fit_bytes_per_layer_ is not None  # the layers ran on the cluster
    _same_model(local, remote)


# ---------------------------------------------------------------- bad weights


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda n: -np.ones(n), "non-negative"),
        (lambda n: np.r_[np.nan, np.ones(n - 1)], "finite"),
        (lambda n: np.r_[np.inf, np.ones(n - 1)], "finite"),
        (lambda n: np.ones(n - 1), r"shape \(40,\)"),
        (lambda n: np.ones((n, 1)), r"shape \(40,\)"),
        (lambda n: ["a"] * n, "numbers"),
        (lambda n: np.zeros(n), "zero for every sample"),
    ],
    ids=["negative", "nan", "inf", "short", "2d", "strings", "all-zero"],
)
def test_bad_weights_raise_naming_sample_weight(bad, message):
    X, Y = _problem(n=40)
    with pytest.raises(ValueError, match="sample_weight") as info:
        _xr().fit(X, Y, sample_weight=bad(40))
    assert info.match(message)
    with pytest.raises(ValueError, match="sample_weight"):
        fit_binary(X, Y[:, 0], sample_weight=bad(40))


@pytest.mark.parametrize("embedding", ["label2vec", "pifa+label2vec"])
def test_label2vec_trees_drop_rows_of_weight_zero(embedding):
    pytest.importorskip("gensim")
    X, Y = _problem()
    keep = np.arange(X.shape[0]) % 4 != 0
    tree = HierarchicalLabelTree(label_embedding=embedding, max_leaf_size=4)
    weighted = tree.fit(X, Y, sample_weight=keep.astype(float))
    chain = [C.copy() for C in weighted.cluster_chain_]
    dropped = tree.fit(X[keep], Y[keep])
    for Ca, Cb in zip(chain, dropped.cluster_chain_):
        assert (Ca != Cb).nnz == 0


def test_custom_tree_without_sample_weight_is_refused():
    class PlainTree(HierarchicalLabelTree):
        def fit(self, X, Y=None):  # no sample_weight
            return super().fit(X, Y)

    X, Y = _problem(n=40)
    XRLinearClassifier(tree=PlainTree(max_leaf_size=4)).fit(X, Y)  # fine without weights
    with pytest.raises(ValueError, match="does not accept sample_weight"):
        XRLinearClassifier(tree=PlainTree(max_leaf_size=4)).fit(X, Y, sample_weight=np.ones(40))


# ---------------------------------------------------------------- solver and PIFA


def _binary(seed, n=80, d=15):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.4, format="csr", random_state=rng, dtype=np.float32)
    X.data += 0.1
    X = normalize(X).astype(np.float32)
    y = np.where(X @ rng.randn(d) + 0.2 * rng.randn(n) > 0, 1, -1)
    return X, y


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_fit_binary_matches_liblinear_instance_weights(loss):
    """The weighted solver is liblinear's: sklearn's LinearSVC / LogisticRegression (dual
    liblinear, sample_weight) give the same weights, zeros included."""
    X, y = _binary(5)
    sw = np.random.RandomState(6).uniform(0.0, 3.0, y.shape[0])
    sw[::7] = 0.0
    w, b, _ = fit_binary(X, y, loss=loss, Cp=1.3, Cn=0.6, sample_weight=sw, **CONVERGED)
    # liblinear's weighted C: C_i = sample_weight_i * C * class_weight[y_i]
    common = {"dual": True, "C": 1.0, "class_weight": {1: 1.3, -1: 0.6}, "max_iter": 100_000}
    if loss == "squared_hinge":
        ref = LinearSVC(loss="squared_hinge", tol=1e-8, **common)
    else:
        ref = LogisticRegression(solver="liblinear", tol=1e-10, **common)
    ref.fit(X, y, sample_weight=sw)
    scale = np.abs(ref.coef_).max()
    np.testing.assert_allclose(w, ref.coef_.ravel(), atol=1e-3 * scale, rtol=0)
    assert abs(b - ref.intercept_[0]) <= 1e-3 * scale


def test_fit_binary_weight_zero_and_repeats():
    X, y = _binary(7)
    sw = np.random.RandomState(8).randint(0, 4, y.shape[0])
    keep = sw > 0
    w0, b0, _ = fit_binary(X, y, sample_weight=keep.astype(float), seed=3)
    w1, b1, _ = fit_binary(X[keep], y[keep], seed=3)
    np.testing.assert_array_equal(w0, w1)  # the same problem, the same coordinate order
    assert b0 == b1
    rep = np.repeat(np.arange(y.shape[0]), sw)
    wa, ba, _ = fit_binary(X, y, sample_weight=sw, **CONVERGED)
    wb, bb, _ = fit_binary(X[rep], y[rep], **CONVERGED)
    np.testing.assert_allclose(wa, wb, atol=1e-6)
    assert abs(ba - bb) < 1e-6


def test_fit_layer_weights_do_not_depend_on_n_jobs():
    X, Y = _problem()
    Ys = sp.csr_matrix(Y)
    groups = LayerGroups.from_matrices(Ys, np.arange(Y.shape[1]) % 3)
    w = np.random.RandomState(9).uniform(0.0, 2.0, X.shape[0])
    w[::5] = 0.0
    one = fit_layer(X, Ys, groups, sample_weight=w, n_jobs=1)
    two = fit_layer(X, Ys, groups, sample_weight=w, n_jobs=2)
    assert (one != two).nnz == 0
    assert (one != fit_layer(X, Ys, groups)).nnz > 0


def test_pifa_sums_weighted_rows():
    X, Y = _problem()
    sw = np.random.RandomState(10).randint(0, 4, X.shape[0])
    rep = np.repeat(np.arange(X.shape[0]), sw)
    weighted = pifa_embeddings(X, Y, sample_weight=sw)
    repeated = pifa_embeddings(X[rep], Y[rep])
    np.testing.assert_allclose(weighted.toarray(), repeated.toarray(), rtol=1e-5, atol=1e-7)
    keep = sw > 0
    kept = pifa_embeddings(X, Y, sample_weight=keep)
    assert (kept != pifa_embeddings(X[keep], Y[keep])).nnz == 0  # dropped rows, bit for bit


# ---------------------------------------------------------------- score


def test_score_weights_precision_at_1_per_row():
    X, Y = _problem()
    clf = _xr().fit(X, Y)
    top1 = clf.predict_topk(X, k=1)[0][:, 0]
    hits = Y[np.arange(X.shape[0]), top1].astype(float)
    sw = np.random.RandomState(11).uniform(0.0, 3.0, X.shape[0])
    assert clf.score(X, Y, sample_weight=sw) == pytest.approx(np.average(hits, weights=sw))
    assert clf.score(X, Y, sample_weight=np.ones(X.shape[0])) == clf.score(X, Y)
    ints = np.random.RandomState(12).randint(0, 3, X.shape[0])
    rep = np.repeat(np.arange(X.shape[0]), ints)
    assert clf.score(X, Y, sample_weight=ints) == pytest.approx(clf.score(X[rep], Y[rep]))
    with pytest.raises(ValueError, match="sample_weight"):
        clf.score(X, Y, sample_weight=np.ones(3))


# ---------------------------------------------------------------- metadata routing

TEXTS = [
    "cheap flights to rome",
    "rome hotel deals",
    "python sparse matrix",
    "numpy matrix product",
    "hotel in paris",
    "flights to paris",
    "sparse numpy arrays",
    "weekend in rome",
    "python numpy tutorial",
    "paris museum tickets",
    "matrix algebra in python",
    "train to rome and paris",
]
TOPICS = ["travel", "travel", "code", "code", "travel", "travel"] * 2


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


def test_pipeline_routes_sample_weight_to_fit(routing):
    sw = np.arange(len(TEXTS)) % 3  # zeros included
    clf = XRLinearClassifier(top_k=1).set_fit_request(sample_weight=True)
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("xr", clf)]).fit(
        TEXTS, TOPICS, sample_weight=sw
    )
    X = TfidfVectorizer().fit_transform(TEXTS)
    direct = XRLinearClassifier(top_k=1).fit(X, TOPICS, sample_weight=sw)
    _same_model(pipe.named_steps["xr"], direct)
    # weights reach the model: they differ from the unweighted fit
    plain = XRLinearClassifier(top_k=1).fit(X, TOPICS)
    assert any((Wa != Wb).nnz for Wa, Wb in zip(plain.weights_, direct.weights_))
    # without the request, passing weights is an error (sklearn's, naming the fix)
    unrequested = Pipeline([("tfidf", TfidfVectorizer()), ("xr", XRLinearClassifier())])
    with pytest.raises(ValueError, match="set_fit_request"):
        unrequested.fit(TEXTS, TOPICS, sample_weight=sw)


def test_gridsearch_routes_sample_weight_to_fit_and_score(routing):
    sw = 1.0 + np.arange(len(TEXTS)) % 2
    clf = (
        XRLinearClassifier(top_k=1)
        .set_fit_request(sample_weight=True)
        .set_score_request(sample_weight=True)
    )
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("xr", clf)])
    cv = KFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(pipe, {"xr__Cp": [0.5, 2.0]}, cv=cv).fit(TEXTS, TOPICS, sample_weight=sw)
    # the test folds' scores are the weighted accuracies of models fitted with weights
    for i, (train, test) in enumerate(cv.split(TEXTS)):
        Cp = search.cv_results_["param_xr__Cp"][0]
        X = TfidfVectorizer().fit(np.take(TEXTS, train))
        model = XRLinearClassifier(top_k=1, Cp=Cp).fit(
            X.transform(np.take(TEXTS, train)), np.take(TOPICS, train), sample_weight=sw[train]
        )
        want = model.score(
            X.transform(np.take(TEXTS, test)), np.take(TOPICS, test), sample_weight=sw[test]
        )
        assert search.cv_results_[f"split{i}_test_score"][0] == pytest.approx(want)
    # the refit on all rows is the weighted fit
    best = search.best_estimator_.named_steps["xr"]
    X = TfidfVectorizer().fit_transform(TEXTS)
    _same_model(best, XRLinearClassifier(top_k=1, Cp=best.Cp).fit(X, TOPICS, sample_weight=sw))


def test_drop_zero_weight_samples_cuts_every_row_aligned_input():
    from skxmc._sample_weight import drop_zero_weight_samples

    texts, Y = ["a", "b", "c"], sp.csr_matrix(np.eye(3, dtype=np.float32))
    w, t, y, f = drop_zero_weight_samples([1.0, 0.0, 2.0], 3, texts, Y, None)
    np.testing.assert_array_equal(w, [1.0, 2.0])
    assert t == ["a", "c"] and f is None
    np.testing.assert_array_equal(y.toarray(), np.eye(3)[[0, 2]])
    # nothing dropped (or no weights): the inputs themselves come back
    w, t, y = drop_zero_weight_samples(None, 3, texts, Y)
    assert w is None and t is texts and y is Y
    w, t = drop_zero_weight_samples([1.0, 1.0, 3.0], 3, texts)
    assert t is texts
