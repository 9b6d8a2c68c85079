"""User-supplied hard negatives: ``XRLinearClassifier.fit(X, Y, negatives=...)``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import make_xmc_classification
from skxmc.pipeline import Pipeline

from .._helpers import run_page_examples


def _same_weights(a, b):
    return all((Wa != Wb).nnz == 0 for Wa, Wb in zip(a.weights_, b.weights_))


# Labels a, b, c, d; the tree puts {a, c} in one leaf and {b, d} in the other. Rows of "a"
# share feature 1 with the rows of "b", so b's node, which under teacher forcing trains
# only on the rows of its leaf ({b, d}), never sees an "a" row and scores "a"-like input
# high: the confusion a user negative fixes.
_E = normalize(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.1, 1.0]]))
_KINDS = {
    "a": [0.6, 0.8, 0.0, 0.0],
    "b": [0.0, 1.0, 0.2, 0.0],
    "c": [1.0, 0.0, 0.0, 0.3],
    "d": [0.0, 0.0, 1.0, 0.0],
}


def _toy(seed=0):
    rng = np.random.default_rng(seed)
    names = np.repeat(list(_KINDS), 10)
    X = np.array([_KINDS[k] for k in names]) + rng.uniform(0, 0.05, (len(names), 4))
    return normalize(X), [[k] for k in names]


def _toy_clf():
    # "noop": a label's score is its own node's raw score (l3-hinge would multiply in the
    # leaf cluster's, which the root layer, trained on every row, already gets right)
    tree = HierarchicalLabelTree(label_embedding=_E, max_leaf_size=2)
    return XRLinearClassifier(tree=tree, top_k=4, post_processor="noop")


def test_a_user_negative_fixes_a_confusion():
    X, Y = _toy()
    plain = _toy_clf().fit(X, Y)
    assert [C.shape for C in plain.tree_.cluster_chain_] == [(2, 1), (4, 2)]
    query = normalize(np.array([_KINDS["a"]]))
    assert plain.predict_topk(query, 1)[0][0, 0] == "b"  # the confusion
    negatives = [["b"] if y == ["a"] else [] for y in Y]
    hard = _toy_clf().fit(X, Y, negatives=negatives)
    assert hard.predict_topk(query, 1)[0][0, 0] == "a"
    before = plain.predict_topk(query, labels=["b"])[1][0, 0]
    after = hard.predict_topk(query, labels=["b"])[1][0, 0]
    assert before > 0.5 and after < -0.5
    # the root layer trains on every row anyway: only the leaf layer changes
    assert (plain.weights_[0] != hard.weights_[0]).nnz == 0
    assert (plain.weights_[1] != hard.weights_[1]).nnz > 0
    # input of kind "b" still gets a high score for "b"
    assert hard.predict_topk(normalize(np.array([_KINDS["b"]])), labels=["b"])[1][0, 0] > 0.5


@pytest.fixture(scope="module")
def data():
    X, Y = make_xmc_classification(300, 400, 60, random_state=0)
    return X, sp.csr_matrix(Y)


def _clf(**params):
    tree = HierarchicalLabelTree(branching_factor=4, max_leaf_size=4)
    return XRLinearClassifier(tree=tree, **params)


def _random_negatives(Y, seed=0):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix((rng.random(Y.shape) < 0.02).astype(np.float32))


@pytest.mark.parametrize("sampling", ["tfn", "tfn+man"])
def test_negatives_change_the_trained_nodes(data, sampling):
    X, Y = data
    # beam 2 of 4 first-layer nodes: the matcher alone leaves rows out of some groups
    plain = _clf(negative_sampling=sampling, beam_size=2).fit(X, Y)
    hard = _clf(negative_sampling=sampling, beam_size=2)
    hard.fit(X, Y, negatives=_random_negatives(Y))
    assert (plain.weights_[0] != hard.weights_[0]).nnz == 0  # root: every row already
    assert all((Wa != Wb).nnz > 0 for Wa, Wb in zip(plain.weights_[1:], hard.weights_[1:]))


def test_no_negatives_trains_as_before(data):
    X, Y = data
    plain = _clf().fit(X, Y)
    assert _same_weights(plain, _clf().fit(X, Y, negatives=None))
    assert _same_weights(plain, _clf().fit(X, Y, negatives=sp.csr_matrix(Y.shape)))
    # a negative that is also a positive of its row is ignored: a positive stays one
    assert _same_weights(plain, _clf().fit(X, Y, negatives=Y))


def test_label_collections_and_matrices_are_the_same_negatives(data):
    X, Y = data
    N = _random_negatives(Y, seed=1)
    rows = [list(N[i].indices) for i in range(N.shape[0])]
    assert _same_weights(_clf().fit(X, Y, negatives=N), _clf().fit(X, Y, negatives=rows))
    assert _same_weights(
        _clf().fit(X, Y, negatives=N), _clf().fit(X, Y, negatives=N.toarray().astype(int))
    )


def test_bad_negatives_are_refused(data):
    X, Y = data
    n, n_labels = Y.shape
    with pytest.raises(ValueError, match=r"negatives must have shape \(n_samples, n_labels\)"):
        _clf().fit(X, Y, negatives=sp.csr_matrix((n, n_labels + 1)))
    with pytest.raises(ValueError, match=r"= \(300, 60\) \(columns: classes_\), got \(299, 60\)"):
        _clf().fit(X, Y, negatives=sp.csr_matrix((n - 1, n_labels)))
    with pytest.raises(ValueError, match=r"not in classes_ \(first in row 2\)"):
        _clf().fit(X, Y, negatives=[[]] * 2 + [[n_labels + 5]] + [[]] * (n - 3))
    with pytest.raises(ValueError, match="binary"):
        _clf().fit(X, Y, negatives=2 * _random_negatives(Y))


TEXTS = ["cheap flights to rome", "rome hotel deals", "python sparse matrix"] * 4
LABELS = [["travel", "italy"], ["travel", "italy"], ["programming"]] * 4


def test_pipelines_route_negatives():
    negatives = [["programming"], [], ["italy"]] * 4
    X = TfidfVectorizer().fit_transform(TEXTS)
    direct = XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=2))
    direct.fit(X, LABELS, negatives=negatives)
    plain = XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=2)).fit(X, LABELS)
    assert not _same_weights(direct, plain)
    # sklearn's step__param fit parameters
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("xr", XRLinearClassifier(tree=direct.tree))])
    pipe.fit(TEXTS, LABELS, xr__negatives=negatives)
    assert _same_weights(pipe.named_steps["xr"], direct)
    # metadata routing, requested as sample_weight is
    with sklearn.config_context(enable_metadata_routing=True):
        clf = XRLinearClassifier(tree=direct.tree).set_fit_request(negatives=True)
        routed = Pipeline([("tfidf", TfidfVectorizer()), ("xr", clf)])
        routed.fit(TEXTS, LABELS, negatives=negatives)
        assert _same_weights(routed.named_steps["xr"], direct)
        unrequested = Pipeline([("tfidf", TfidfVectorizer()), ("xr", XRLinearClassifier())])
        with pytest.raises(ValueError, match="set_fit_request"):
            unrequested.fit(TEXTS, LABELS, negatives=negatives)


def test_xrlinear_page_examples_run():
    run_page_examples("xrlinear.rst")
