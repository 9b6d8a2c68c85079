"""XRLinearClassifier.explain and Pipeline.explain: paths that reproduce the predict_topk
scores, feature contributions against a dense computation, feature names, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.linear import FeatureContribution, LabelExplanation, NodeScore
from skxmc.pipeline import make_pipeline


@pytest.fixture(scope="module")
def demo_pipeline():
    data = load_demo()
    pipe = make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
        # small leaves and branching: a tree of three layers or more on 1,500 texts
        XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)),
    )
    pipe.fit(data.train_texts[:1500], data.train_labels[:1500])
    return pipe, data.test_texts[:40]


def _factor(raw: float, post_processor: str) -> float:
    if post_processor == "l3-hinge":
        return float(np.exp(-(max(1.0 - raw, 0.0) ** 3)))
    return float(1.0 / (1.0 + np.exp(-raw)))


@pytest.mark.parametrize("post_processor", ["l3-hinge", "sigmoid", "noop"])
def test_paths_reproduce_predict_topk(demo_pipeline, post_processor):
    pipe, texts = demo_pipeline
    clf = pipe[-1]
    old = clf.post_processor
    clf.set_params(post_processor=post_processor)  # a prediction setting: no refit
    try:
        X = pipe[0].transform(texts)
        labels, scores = clf.predict_topk(X, k=4)
        explained = clf.explain(X, k=4)
    finally:
        clf.set_params(post_processor=old)
    parent_of = [C.indices for C in clf.tree_.cluster_chain_]
    n_layers = len(clf.weights_)
    assert n_layers >= 3
    assert len(explained) == len(texts)
    for row, row_labels, row_scores in zip(explained, labels, scores):
        assert [e.label for e in row] == list(row_labels)
        for e in row:
            assert isinstance(e, LabelExplanation)
            assert [n.layer for n in e.path] == list(range(n_layers))
            assert clf.classes_[e.path[-1].node] == e.label
            for upper, lower in zip(e.path, e.path[1:]):  # each node is its parent's child
                assert parent_of[lower.layer][lower.node] == upper.node
            assert e.score == pytest.approx(float(row_scores[row.index(e)]), rel=1e-6)
            # summed and post-processed as the beam's kernels do: the same float32 score
            assert e.path[-1].path_score == e.score
            if post_processor == "noop":
                assert e.path[-1].score == e.path[-1].path_score
            else:  # the path score is the product of the nodes' post-processed scores
                product = np.prod([_factor(n.score, post_processor) for n in e.path])
                assert product == pytest.approx(e.score, rel=1e-4, abs=1e-7)
                for n in e.path:
                    expected = np.prod(
                        [_factor(m.score, post_processor) for m in e.path[: n.layer + 1]]
                    )
                    assert n.path_score == pytest.approx(expected, rel=1e-4, abs=1e-7)


def test_contributions_match_dense_computation(demo_pipeline):
    pipe, texts = demo_pipeline
    clf = pipe[-1]
    X = pipe[0].transform(texts[:10])
    explained = clf.explain(X, k=3, n_features=4)
    W = clf.weights_[-1]
    for i, row in enumerate(explained):
        x = X[i].toarray().ravel()
        for e in row:
            w = W[:, e.path[-1].node].toarray().ravel()
            contrib = x * w[:-1]
            assert e.bias_contribution == pytest.approx(clf.bias * w[-1], rel=1e-6)
            # every feature's share and the bias term sum to the leaf's linear score
            assert contrib.sum() + e.bias_contribution == pytest.approx(
                e.path[-1].score, rel=1e-4, abs=1e-5
            )
            n_nonzero = int(np.count_nonzero(contrib))
            assert len(e.features) == min(4, n_nonzero)
            expected = np.sort(np.abs(contrib))[::-1][: len(e.features)]
            got = [abs(f.contribution) for f in e.features]
            np.testing.assert_allclose(got, expected, rtol=1e-6)
            for f in e.features:
                assert isinstance(f, FeatureContribution)
                assert f.value == pytest.approx(x[f.feature])
                assert f.weight == pytest.approx(w[f.feature])
                assert f.contribution == pytest.approx(f.value * f.weight, rel=1e-6)
                assert f.name is None  # no names on a bare matrix


def test_node_features_rank_each_inner_node(demo_pipeline):
    pipe, texts = demo_pipeline
    clf = pipe[-1]
    X = pipe[0].transform(texts[:5])
    plain = clf.explain(X, k=2, n_features=3)
    explained = clf.explain(X, k=2, n_features=3, node_features=True)
    for i, (row, plain_row) in enumerate(zip(explained, plain)):
        x = X[i].toarray().ravel()
        for e, p in zip(row, plain_row):
            assert e.features == p.features and e.path[-1].features == ()
            assert [n[:4] for n in e.path] == [n[:4] for n in p.path]
            assert all(n.features == () for n in p.path)
            for n in e.path[:-1]:
                contrib = x * clf.weights_[n.layer][:-1, n.node].toarray().ravel()
                expected = np.sort(np.abs(contrib))[::-1][: min(3, np.count_nonzero(contrib))]
                got = [abs(f.contribution) for f in n.features]
                np.testing.assert_allclose(got, expected, rtol=1e-6)
                assert all(
                    f.contribution == pytest.approx(x[f.feature] * f.weight) for f in n.features
                )


def test_pipeline_passes_feature_names(demo_pipeline):
    pipe, texts = demo_pipeline
    vocabulary = pipe[0].get_feature_names_out()
    explained = pipe.explain(texts[:5], k=2, n_features=3)
    named = [f for row in explained for e in row for f in e.features]
    assert named
    for row, text in zip(explained, texts[:5]):
        for e in row:
            for f in e.features:
                assert f.name == vocabulary[f.feature]
                assert f.name in text.lower()
    # the same explanations as the estimator's on the transformed rows, with names
    bare = pipe[-1].explain(pipe[0].transform(texts[:5]), k=2, n_features=3)
    assert [[e.label for e in row] for row in bare] == [[e.label for e in row] for row in explained]
    # printable and JSON-ready
    first = explained[0][0]
    assert str(first.label) in str(first)
    record = json.loads(json.dumps(first.to_dict()))
    assert record["features"][0]["name"] == first.features[0].name
    assert record["path"][-1] == first.path[-1].to_dict()
    assert NodeScore(**{**record["path"][0], "features": ()}) == first.path[0]


def test_explain_selected_labels(demo_pipeline):
    pipe, texts = demo_pipeline
    clf = pipe[-1]
    X = pipe[0].transform(texts[:3])
    chosen = clf.classes_[[0, 7]]
    labels, scores = clf.predict_topk(X, k=2, labels=chosen)
    explained = clf.explain(X, k=2, labels=chosen)
    for row, row_labels, row_scores in zip(explained, labels, scores):
        assert [e.label for e in row] == list(row_labels)
        for e, s in zip(row, row_scores):
            assert e.path[-1].path_score == float(s)


def test_explain_bad_input(demo_pipeline):
    pipe, texts = demo_pipeline
    clf = pipe[-1]
    X = pipe[0].transform(texts[:2])
    with pytest.raises(ValueError, match="k must be a positive integer"):
        clf.explain(X, k=0)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="n_features must be an int >= 0"):
            clf.explain(X, n_features=bad)
    with pytest.raises(ValueError, match="feature_names must hold one name per feature"):
        clf.explain(X, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="features"):
        clf.explain(X[:, :10])
    with pytest.raises(NotFittedError):
        XRLinearClassifier().explain(X)
    assert all(e.features == () for e in clf.explain(X, k=1, n_features=0)[0])


def test_explain_predict_only_model_names_the_cause(demo_pipeline):
    # compact() drops the node weights that explain reads; the error says so
    pipe, texts = demo_pipeline
    X = pipe[0].transform(texts[:2])
    compacted = pipe[-1]._predict_only_copy()
    with pytest.raises(AttributeError, match=r"predict-only.*explain"):
        compacted.explain(X)
    assert pipe[-1].explain(X, k=1)[0]  # the full model is left whole


def test_pipeline_explain_edge_cases(demo_pipeline):
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import FunctionTransformer

    from skxmc.pipeline import Pipeline

    pipe, texts = demo_pipeline
    # an empty text: ranked by the bias terms alone, no feature to list
    (row,) = pipe.explain([""], k=2)
    labels, scores = pipe.predict_topk([""], k=2)
    assert [e.label for e in row] == list(labels[0])
    assert [e.score for e in row] == scores[0].tolist()
    assert all(e.features == () and e.path[-1].path_score == e.score for e in row)
    assert all(e.bias_contribution == pytest.approx(e.path[-1].score) for e in row)
    # a step that cannot name its output: no names, the same explanation otherwise
    identity = FunctionTransformer(lambda X: X, accept_sparse=True).fit(pipe[0].transform(texts))
    unnamed = Pipeline([("tfidf", pipe[0]), ("same", identity), ("xr", pipe[-1])])
    (row,) = unnamed.explain(texts[:1], k=1, n_features=2)
    (named,) = pipe.explain(texts[:1], k=1, n_features=2)
    assert [f.name for f in row[0].features] == [None, None]
    assert [f.feature for f in row[0].features] == [f.feature for f in named[0].features]
    # explicit names win over the pipeline's
    names = [f"t{j}" for j in range(pipe[-1].n_features_in_)]
    (row,) = pipe.explain(texts[:1], k=1, n_features=1, feature_names=names)
    assert row[0].features[0].name == f"t{row[0].features[0].feature}"
    # only where the final step explains
    assert not hasattr(make_pipeline(TfidfVectorizer(), LogisticRegression()), "explain")
