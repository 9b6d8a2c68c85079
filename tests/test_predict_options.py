"""Prediction options of the rankers: ``predict(X, threshold=...)`` (napkinXC) and
predictions restricted to a label subset (PECOS's selected outputs)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.pipeline import make_pipeline

from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.text import TrainingConfig


@pytest.fixture(scope="module")
def demo():
    data = load_demo()
    vec = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
    X = vec.fit_transform(data.train_texts[:1500])
    return X, data.train_labels[:1500], vec.transform(data.test_texts[:120])


@pytest.fixture(scope="module")
def xr(demo):
    """A 5-layer tree with a narrow beam, so that many labels are out of its reach."""
    X, Y, _ = demo
    tree = HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)
    return XRLinearClassifier(tree=tree, beam_size=3, sparse_output=True).fit(X, Y)


@pytest.fixture(scope="module")
def snm():
    pytest.importorskip("torch")
    from skxmc import SNMClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12)).astype(np.float32)
    # 24 labels as a dense indicator: dense outputs over every label
    Y = np.zeros((300, 24), dtype=np.int64)
    Y[np.arange(300), (X[:, 0] > 0) * 12 + np.argmax(X[:, 1:13], axis=1) % 12] = 1
    Y[np.arange(300), (np.argmax(X[:, :6], axis=1) + 3) % 24] = 1
    training = TrainingConfig(max_epochs=3, batch_size=32, random_state=0, device="cpu")
    clf = SNMClassifier(hidden_size=16, embedding_size=8, n_sampled=8, top_k=3, training=training)
    return clf.fit(X, Y), X[:80]


def _pattern(M) -> set[tuple[int, int]]:
    M = sp.coo_matrix(M)
    keep = M.data != 0
    return set(zip(M.row[keep].tolist(), M.col[keep].tolist()))


def _stored(M: sp.csr_matrix) -> set[tuple[int, int]]:
    M = sp.coo_matrix(M)
    return set(zip(M.row.tolist(), M.col.tolist()))


def _cut_points(values: np.ndarray, n: int = 5) -> list[float]:
    """Thresholds halfway between neighbouring distinct scores: no score sits on one, so
    ``>=`` does not depend on the last bit of a float32 product."""
    distinct = np.unique(values)
    mids = (distinct[1:] + distinct[:-1]) / 2
    return [float(m) for m in mids[np.linspace(0, len(mids) - 1, n).astype(int)]]


# threshold -----------------------------------------------------------------------------


def test_xrlinear_threshold_is_predict_proba_cut(xr, demo):
    X = demo[2]
    P = xr.predict_proba(X)  # CSR: the labels the beam reaches
    assert sp.issparse(P)
    P = sp.csr_matrix(P)
    for t in _cut_points(P.data):
        pred = xr.predict(X, threshold=t)
        assert sp.issparse(pred)
        assert _pattern(pred) == _pattern(P >= t) != set()
        assert set(np.unique(pred.data).tolist()) <= {1}


def test_xrlinear_threshold_zero_gives_every_reached_label(xr, demo):
    X = demo[2]
    S = xr.decision_function(X)
    pred = xr.predict(X, threshold=0)
    assert _pattern(pred) == _stored(S)
    # far more than top_k: the top_k parameter does not cap a threshold
    assert np.diff(sp.csr_matrix(pred).indptr).max() > xr.top_k
    # with k the k best of them, which is the plain top-k prediction
    assert _pattern(xr.predict(X, threshold=0.0, k=3)) == _pattern(xr.predict(X, k=3))


def test_threshold_above_every_score_gives_empty_rows(xr, demo):
    X = demo[2]
    top = float(sp.csr_matrix(xr.predict_proba(X)).data.max())
    assert top < 1.0
    pred = xr.predict(X, threshold=np.nextafter(np.float32(top), np.float32(2)))
    assert pred.shape == (X.shape[0], len(xr.classes_)) and pred.nnz == 0
    assert xr.predict(X, threshold=1.0).nnz == 0


def test_threshold_per_label(xr, demo):
    X = demo[2]
    P = sp.csr_matrix(xr.predict_proba(X))
    rng = np.random.default_rng(0)
    thresholds = rng.choice(_cut_points(P.data, 8), size=len(xr.classes_))
    expected = _keep(P, P.data >= thresholds[P.indices])
    assert _pattern(xr.predict(X, threshold=thresholds)) == _pattern(expected)
    assert _pattern(xr.predict(X, threshold=list(thresholds))) == _pattern(expected)


def _keep(P: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    P = P.copy()
    P.data = np.where(keep, 1.0, 0.0)
    P.eliminate_zeros()
    return P


def test_threshold_with_noop_scores_uses_predict_proba(xr, demo):
    X = demo[2]
    raw = copy.copy(xr).set_params(post_processor="noop")
    P = sp.csr_matrix(raw.predict_proba(X))
    assert P.data.min() >= 0 and P.data.max() <= 1  # sigmoids of the raw scores
    for t in _cut_points(P.data, 3):
        assert _pattern(raw.predict(X, threshold=t)) == _pattern(P >= t)


def test_snm_threshold_is_predict_proba_cut(snm):
    clf, X = snm
    P = clf.predict_proba(X)  # dense: every label scored, exact search
    assert isinstance(P, np.ndarray) and P.shape == (len(X), 24)
    for t in _cut_points(P.ravel()):
        pred = clf.predict(X, threshold=t)
        assert isinstance(pred, np.ndarray) and pred.dtype.kind == "i"
        np.testing.assert_array_equal(pred, (P >= t).astype(int))
    assert clf.predict(X, threshold=0).sum() == P.size  # every label is reached
    assert clf.predict(X, threshold=np.nextafter(np.float32(P.max()), np.float32(2))).sum() == 0
    capped = clf.predict(X, threshold=0, k=2)
    top_k_rule = copy.deepcopy(clf).set_params(threshold=None)
    np.testing.assert_array_equal(capped, top_k_rule.predict(X, k=2))


def test_threshold_through_a_pipeline(demo):
    data = load_demo()
    texts, labels = data.train_texts[:600], data.train_labels[:600]
    tree = HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)
    pipe = make_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier(tree=tree))
    pipe.fit(texts, labels)
    P = sp.csr_matrix(pipe.predict_proba(texts[:20]))
    t = _cut_points(P.data, 3)[1]
    assert _pattern(pipe.predict(texts[:20], threshold=t)) == _pattern(P >= t)


# label subsets -------------------------------------------------------------------------


def _combine(v: np.ndarray, parent: np.ndarray, post_processor: str) -> np.ndarray:
    if post_processor == "l3-hinge":
        return np.exp(-(np.maximum(1.0 - v, 0.0) ** 3)) * parent
    if post_processor == "sigmoid":
        return parent / (1.0 + np.exp(-v))
    return v


def _naive_path_scores(clf: XRLinearClassifier, X: sp.csr_matrix, columns) -> np.ndarray:
    """Path score of each label of ``columns`` for every row: walk up ``tree_`` to the
    root, then multiply the node scores down the path, in float64."""
    Xb = sp.hstack([X, np.full((X.shape[0], 1), clf.bias)], format="csr").astype(np.float64)
    chain = clf.tree_.cluster_chain_  # chain[t]: (nodes of layer t, nodes of layer t - 1)
    out = np.empty((X.shape[0], len(columns)))
    for j, label in enumerate(columns):
        path = [int(label)]
        for t in range(len(chain) - 1, 0, -1):
            path.append(int(chain[t][path[-1]].indices[0]))
        score = np.ones(X.shape[0])
        for t, node in enumerate(reversed(path)):
            v = Xb @ clf.weights_[t][:, node].toarray().ravel().astype(np.float64)
            score = _combine(v, score, clf.post_processor)
        out[:, j] = score
    return out


@pytest.mark.parametrize("post_processor", ["l3-hinge", "sigmoid", "noop"])
def test_xrlinear_selected_scores_match_naive_paths(xr, demo, post_processor):
    X = demo[2][:60]
    clf = copy.copy(xr).set_params(post_processor=post_processor)
    rng = np.random.default_rng(1)
    columns = np.sort(rng.choice(len(clf.classes_), size=40, replace=False))
    subset = clf.classes_[columns]
    S = sp.csr_matrix(clf.decision_function(X, labels=subset[::-1]))  # order is irrelevant
    assert S.shape == (X.shape[0], len(clf.classes_))
    assert np.all(np.diff(S.indptr) == len(columns))  # every selected label, every row
    assert set(S.indices.tolist()) == set(columns.tolist())
    expected = _naive_path_scores(clf, X, columns)
    np.testing.assert_allclose(S[:, columns].toarray(), expected, rtol=2e-4, atol=1e-7)
    # many of them lie outside the beam: the scores do not come from it
    beam = _stored(clf.decision_function(X))
    assert len(_stored(S) - beam) > len(_stored(S)) // 2
    # where the beam does reach a label, both give the very same float32 score
    B = sp.csr_matrix(clf.decision_function(X))
    both = sorted(_stored(S) & beam)
    assert both
    r, c = np.array(both).T
    np.testing.assert_array_equal(np.asarray(S[r, c]).ravel(), np.asarray(B[r, c]).ravel())


def test_xrlinear_restricted_topk_and_predict(xr, demo):
    X = demo[2][:60]
    columns = np.arange(0, len(xr.classes_), 27)  # ~90 labels: the naive walk is per label
    subset = xr.classes_[columns]
    labels, scores = xr.predict_topk(X, k=5, labels=subset)
    assert labels.shape == scores.shape == (X.shape[0], 5)
    assert set(labels.ravel().tolist()) <= set(subset.tolist())
    assert np.all(np.diff(scores, axis=1) <= 0)
    naive = _naive_path_scores(xr, X, columns)
    np.testing.assert_allclose(scores, -np.sort(-naive, axis=1)[:, :5], rtol=2e-4, atol=1e-7)
    # predict: the top_k best of the subset, as an indicator over classes_
    pred = xr.predict(X, labels=subset)
    assert pred.shape == (X.shape[0], len(xr.classes_))
    assert set(sp.csr_matrix(pred).indices.tolist()) <= set(columns.tolist())
    assert np.all(np.diff(sp.csr_matrix(pred).indptr) == xr.top_k)
    best = np.searchsorted(xr.classes_, xr.predict_topk(X, labels=subset)[0])
    top = {(i, int(c)) for i, row in enumerate(best) for c in row}
    assert _pattern(pred) == top
    # a subset smaller than k: that many labels per row
    few = subset[:3]
    labels, scores = xr.predict_topk(X, k=10, labels=few)
    assert labels.shape == (X.shape[0], 3) and np.isfinite(scores).all()
    assert np.all(np.diff(sp.csr_matrix(xr.predict(X, labels=few)).indptr) == 3)


def test_xrlinear_restricted_threshold(xr, demo):
    X = demo[2][:60]
    subset = xr.classes_[::5]
    P = sp.csr_matrix(xr.predict_proba(X, labels=subset))
    assert _stored(P) == {(i, j) for i in range(X.shape[0]) for j in range(0, len(xr.classes_), 5)}
    for t in _cut_points(P.data, 3):
        assert _pattern(xr.predict(X, threshold=t, labels=subset)) == _pattern(P >= t)


def test_snm_restricted_is_exact_search_among_the_subset(snm):
    import torch

    clf, X = snm
    columns = np.array([1, 4, 5, 11, 17, 23])
    subset = clf.classes_[columns]
    with torch.inference_mode():
        H = clf.module_.embed((torch.as_tensor(X),)).numpy()
        V = clf.module_.label_vectors().numpy()
    cosines = H @ V[columns].T
    labels, scores = clf.predict_topk(X, k=3, labels=subset)
    order = np.argsort(-cosines, axis=1, kind="stable")[:, :3]
    np.testing.assert_allclose(scores, np.take_along_axis(cosines, order, 1), atol=1e-5)
    assert set(labels.ravel().tolist()) <= set(subset.tolist())
    D = clf.decision_function(X, labels=subset)  # dense: others get the floor, -1
    assert isinstance(D, np.ndarray) and D.shape == (len(X), 24)
    np.testing.assert_allclose(D[:, columns], cosines, atol=1e-5)
    others = np.setdiff1d(np.arange(24), columns)
    assert np.all(D[:, others] == -1.0)
    P = clf.predict_proba(X, labels=subset)
    assert np.all(P[:, others] == 0.0)
    pred = copy.deepcopy(clf).set_params(threshold=None).predict(X, labels=subset)
    assert np.all(pred[:, others] == 0) and np.all(pred.sum(axis=1) == clf.top_k)
    t = _cut_points(P[:, columns].ravel(), 3)[1]
    np.testing.assert_array_equal(
        clf.predict(X, threshold=t, labels=subset), ((P >= t) & (P > 0)).astype(int)
    )


def test_multiclass_subset_and_threshold(demo):
    X, Y, Xt = demo
    y = [min(row) if len(row) else "none" for row in Y]
    tree = HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)
    clf = XRLinearClassifier(tree=tree, beam_size=3).fit(X, y)
    subset = clf.classes_[[0, 3, 8]]
    pred = clf.predict(Xt, labels=subset)
    assert pred.shape == (Xt.shape[0],) and set(pred.tolist()) <= set(subset.tolist())
    P = clf.predict_proba(Xt, labels=subset)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(P[:, np.setdiff1d(np.arange(len(clf.classes_)), [0, 3, 8])] == 0)
    np.testing.assert_array_equal(pred, clf.classes_[np.argmax(P, axis=1)])
    with pytest.raises(ValueError, match="threshold and k apply to multi-label targets"):
        clf.predict(Xt, threshold=0.5)
    with pytest.raises(ValueError, match="threshold and k apply to multi-label targets"):
        clf.predict(Xt, k=2)


# errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [-0.1, 1.5, float("nan"), True, "0.5", [0.5, 0.5]])
def test_bad_threshold(xr, demo, threshold):
    with pytest.raises(ValueError, match=r"threshold must be a number in \[0, 1\]"):
        xr.predict(demo[2][:3], threshold=threshold)


def test_bad_per_label_threshold(xr, demo):
    thresholds = np.full(len(xr.classes_), 0.5)
    thresholds[7] = 2.0
    with pytest.raises(ValueError, match="threshold must .* entry 7 is 2.0"):
        xr.predict(demo[2][:3], threshold=thresholds)


@pytest.mark.parametrize(
    "method", ["predict", "predict_topk", "decision_function", "predict_proba"]
)
def test_unknown_labels(xr, demo, method):
    X = demo[2][:3]
    known = xr.classes_[0]
    unknown = r"labels holds 1 value\(s\) that are not in classes_.*'no such label'"
    with pytest.raises(ValueError, match=unknown):
        getattr(xr, method)(X, labels=[known, "no such label"])
    with pytest.raises(ValueError, match="labels must be a non-empty 1-D array-like"):
        getattr(xr, method)(X, labels=[])
    with pytest.raises(ValueError, match=r"a single label goes in a list"):
        getattr(xr, method)(X, labels=known)


def test_snm_unknown_labels_and_bad_k(snm):
    clf, X = snm
    with pytest.raises(ValueError, match=r"not in classes_.*\[99\]"):
        clf.predict_topk(X, labels=[0, 99])
    with pytest.raises(ValueError, match="k must be a positive integer"):
        clf.predict(X, threshold=0.5, k=0)


def test_matchxml_threshold_and_subset(tiny_bert_dir):
    from skxmc import MatchXMLClassifier, MultiStageMatcher

    data = load_demo()
    texts, Y = data.train_texts[:40], data.train_labels[:40]
    matcher = MultiStageMatcher(
        encoder=str(tiny_bert_dir),
        max_length=16,
        label_embedding="pifa",
        training=TrainingConfig(batch_size=16, max_steps=2),
    )
    clf = MatchXMLClassifier(matcher=matcher, device="cpu").fit(texts, Y)
    P = clf.predict_proba(texts[:6])
    cut = float(np.median(P.data))
    got = clf.predict(texts[:6], threshold=cut)
    assert _pattern(got) == {(i, j) for i, j in _stored(P) if P[i, j] >= cut}
    subset = clf.classes_[[0, 3, 5]]
    labels, scores = clf.predict_topk(texts[:6], k=5, labels=subset)
    assert labels.shape[1] <= 3 and set(labels.ravel().tolist()) <= set(subset.tolist())
    assert np.all(np.isfinite(scores))
