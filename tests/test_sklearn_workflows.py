"""The scikit-learn workflows of issue 17, each with the user's own call.

Multi-label rankers (``XRLinearClassifier``, ``SNMClassifier``, ``MatchXMLClassifier`` on a
tiny random encoder) under the label formats users bring: label sets from the loaders, a
dense 0/1 ``Y``, a sparse ``Y`` and a 1-D multi-class ``y``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    RandomizedSearchCV,
    cross_val_predict,
    cross_val_score,
    cross_validate,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MultiLabelBinarizer

import skxmc
from skxmc import (
    MatchXMLClassifier,
    MultiStageMatcher,
    SNMClassifier,
    XRLinearClassifier,
    as_label_sets,
)
from skxmc.datasets import load_demo
from skxmc.metrics import make_topk_scorer, precision_at_k
from skxmc.pipeline import make_pipeline as xmc_pipeline
from skxmc.text import TrainingConfig

N_ROWS = 600


@pytest.fixture(scope="module")
def demo():
    d = load_demo()
    return d.train_texts[:N_ROWS], d.train_labels[:N_ROWS]


def xr_pipe(**params):
    return xmc_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier(**params))


def snm_pipe(**params):
    training = TrainingConfig(max_epochs=2, batch_size=64, device="cpu")
    snm = SNMClassifier(hidden_size=32, embedding_size=16, training=training, **params)
    return xmc_pipeline(TfidfVectorizer(dtype=np.float32), snm)


def matchxml(encoder, **params):
    matcher = MultiStageMatcher(
        encoder=str(encoder),
        max_length=16,
        label_embedding="pifa",
        training=TrainingConfig(batch_size=16, max_steps=2),
    )
    return MatchXMLClassifier(matcher=matcher, device="cpu", **params)


# 1. default cv on the loaders' label format --------------------------------------------


def test_gridsearch_default_cv_on_loader_labels(demo):
    X, Y = demo
    search = GridSearchCV(
        xr_pipe(), {"xrlinearclassifier__beam_size": [2, 10]}, error_score="raise"
    ).fit(X, Y)
    assert search.n_splits_ == 5
    assert 0 < search.best_score_ <= 1


def test_cross_val_score_cross_validate_randomized_default_cv(demo):
    X, Y = demo
    scores = cross_val_score(xr_pipe(), X, Y, error_score="raise")
    assert scores.shape == (5,) and np.all(scores > 0)
    res = cross_validate(
        xr_pipe(), X, Y, scoring=make_topk_scorer("ndcg", k=3), error_score="raise"
    )
    assert res["test_score"].shape == (5,)
    search = RandomizedSearchCV(
        xr_pipe(),
        {"xrlinearclassifier__Cp": [0.5, 1.0, 2.0]},
        n_iter=2,
        cv=3,
        random_state=0,
        error_score="raise",
    ).fit(X, Y)
    assert np.isfinite(search.best_score_)


def test_snm_default_cv_on_loader_labels(demo):
    X, Y = demo
    scores = cross_val_score(snm_pipe(), X[:300], Y[:300], cv=3, error_score="raise")
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


def test_matchxml_default_cv_on_label_sets(tiny_bert_dir, demo):
    X, Y = demo
    scores = cross_val_score(matchxml(tiny_bert_dir), X[:90], Y[:90], cv=3, error_score="raise")
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


def test_as_label_sets_round_trip_and_lists_still_fit(demo):
    X, Y = demo
    lists = [sorted(r) for r in Y]
    sets = as_label_sets(lists)
    assert sets.tolist() == list(Y)
    a = xr_pipe().fit(X, lists)
    b = xr_pipe().fit(X, sets)
    np.testing.assert_array_equal(a[-1].classes_, b[-1].classes_)
    np.testing.assert_array_equal(
        a.predict_proba(X[:20]).toarray(), b.predict_proba(X[:20]).toarray()
    )


# 2. cross_val_predict needs one label space -------------------------------------------------


def test_cross_val_predict_with_fixed_classes(demo):
    X, Y = demo
    classes = np.unique(np.concatenate([sorted(r) for r in Y if r]))
    pred = cross_val_predict(xr_pipe(classes=classes), X, Y, cv=3)
    assert sp.issparse(pred) and pred.shape == (len(X), len(classes))
    assert np.all(np.diff(pred.indptr) == 10)


def test_cross_val_predict_scores_want_an_indicator(demo):
    X, Y = demo
    # sklearn re-encodes a 1-D target as classes for the score methods: refused loudly
    with pytest.raises(ValueError, match="MultiLabelBinarizer"):
        cross_val_predict(xr_pipe(), X, Y, cv=3, method="decision_function")
    classes = np.unique(np.concatenate([sorted(r) for r in Y if r]))
    Y_ind = MultiLabelBinarizer(classes=classes).fit_transform(Y)
    scores = cross_val_predict(
        xr_pipe(sparse_output=True), X, Y_ind, cv=3, method="decision_function"
    )
    assert scores.shape == (len(X), len(classes))
    # the stacked out-of-fold scores evaluate against the full label space
    assert precision_at_k(Y, scores, k=1, classes=classes) > 0.05


def test_fixed_classes_ignore_unknown_labels_with_a_warning(demo):
    X, Y = demo
    with pytest.warns(UserWarning, match="not in classes"):
        clf = xr_pipe(classes=["nope", *sorted(Y[0])]).fit(X[:50], Y[:50])
    assert clf[-1].classes_.tolist() == ["nope", *sorted(Y[0])]


# 4. output type follows the input --------------------------------------------------------


@pytest.fixture(scope="module")
def dense_problem(demo):
    X, Y = demo
    keep = MultiLabelBinarizer().fit(Y)
    Y_ind = keep.transform(Y)
    frequent = np.argsort(-Y_ind.sum(0))[:8]
    return X, Y_ind[:, frequent]


@pytest.mark.parametrize(
    "scoring", ["roc_auc", "average_precision", "neg_log_loss", "f1_samples", "accuracy"]
)
# sklearn's log_loss reads a multi-label indicator as classes and warns that the rows of
# predict_proba (independent per-label scores) do not sum to one: its semantics, not a NaN.
@pytest.mark.filterwarnings("ignore:The y_prob values do not sum to one:UserWarning")
def test_sklearn_string_scorers_with_dense_indicator(dense_problem, scoring):
    X, Y = dense_problem
    # shuffled folds: with the file's order a fold can miss a label's positives entirely
    # (sklearn's UndefinedMetricWarning, a NaN that is not the estimator's doing)
    cv = KFold(3, shuffle=True, random_state=0)
    scores = cross_val_score(xr_pipe(top_k=2), X, Y, cv=cv, scoring=scoring, error_score="raise")
    assert np.all(np.isfinite(scores))


def test_dense_in_dense_out_sparse_in_sparse_out(dense_problem):
    X, Y = dense_problem
    # threshold=None: the top-k rule (a dense Y defaults to predict_proba >= 0.5)
    dense = xr_pipe(top_k=2, threshold=None).fit(X, Y)
    pred = dense.predict(X[:5])
    assert isinstance(pred, np.ndarray) and pred.shape == (5, Y.shape[1])
    assert pred.dtype.kind == "i" and np.all(pred.sum(1) == 2)
    assert isinstance(dense.decision_function(X[:5]), np.ndarray)
    proba = dense.predict_proba(X[:5])
    assert isinstance(proba, np.ndarray) and np.all((proba >= 0) & (proba <= 1))
    sparse = xr_pipe(top_k=2).fit(X, sp.csr_matrix(Y))  # sparse Y: top-k by default
    assert sp.issparse(sparse.predict(X[:5])) and sp.issparse(sparse.predict_proba(X[:5]))
    np.testing.assert_array_equal(sparse.predict(X[:5]).toarray(), pred)
    forced = xr_pipe(top_k=2, sparse_output=True, threshold=None).fit(X, Y)
    assert sp.issparse(forced.predict(X[:5])) and sp.issparse(forced.decision_function(X[:5]))
    np.testing.assert_allclose(
        forced.decision_function(X[:5]).toarray(), dense.decision_function(X[:5])
    )


def test_snm_dense_indicator_scores_every_label(dense_problem):
    X, Y = dense_problem
    clf = snm_pipe(top_k=2, threshold=None).fit(X, Y)
    D = clf.decision_function(X[:4])
    assert D.shape == (4, Y.shape[1]) and np.all((D >= -1) & (D <= 1))
    assert clf.predict(X[:4]).sum(1).tolist() == [2] * 4


# 5. 1-D multi-class y ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def multiclass(demo):
    """One label per text: the most frequent of the demo's four commonest labels it has."""
    X, Y = demo
    labels, counts = np.unique(np.concatenate([sorted(r) for r in Y if r]), return_counts=True)
    top = labels[np.argsort(-counts)[:4]]
    rows = [(x, next(lab for lab in top if lab in r)) for x, r in zip(X, Y) if set(top) & r]
    return [x for x, _ in rows], np.array([lab for _, lab in rows])


@pytest.mark.parametrize("make", [xr_pipe, snm_pipe], ids=["xrlinear", "snm"])
def test_one_d_y_is_a_multiclass_classifier(multiclass, make):
    X, y = multiclass
    clf = make().fit(X, y)
    pred = clf.predict(X[:10])
    assert pred.shape == (10,) and set(pred) <= set(y)
    proba = clf.predict_proba(X[:10])
    assert proba.shape == (10, len(np.unique(y)))
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    D = clf.decision_function(X[:10])
    # the best-scored label is the prediction
    np.testing.assert_array_equal(clf[-1].classes_[D.argmax(1)], pred)
    assert clf.score(X, y) == pytest.approx(np.mean(clf.predict(X) == y))
    acc = cross_val_score(make(), X, y, cv=3, scoring="accuracy", error_score="raise")
    assert np.all(np.isfinite(acc))


def test_matchxml_one_d_y(tiny_bert_dir, multiclass):
    X, y = multiclass
    clf = matchxml(tiny_bert_dir).fit(X[:60], y[:60])
    assert clf.predict(X[:5]).shape == (5,)
    np.testing.assert_allclose(clf.predict_proba(X[:5]).sum(1), 1.0, rtol=1e-6)


def test_binary_decision_function_is_one_d(multiclass):
    X, y = multiclass
    two = np.unique(y)[:2]
    keep = np.isin(y, two)
    Xb, yb = [x for x, k in zip(X, keep) if k], y[keep]
    clf = xr_pipe().fit(Xb, yb)
    d = clf.decision_function(Xb)
    assert d.shape == (len(yb),)
    np.testing.assert_array_equal(np.where(d > 0, two[1], two[0]), clf.predict(Xb))


# 6. silently misread labels ----------------------------------------------------------------


def test_list_of_01_rows_is_refused(dense_problem):
    X, Y = dense_problem
    Xv = TfidfVectorizer(dtype=np.float32).fit_transform(X)
    with pytest.raises(ValueError, match=r"np.asarray\(Y\).*as_label_sets"):
        XRLinearClassifier().fit(Xv, Y.tolist())
    # either explicit meaning works
    XRLinearClassifier().fit(Xv, np.asarray(Y.tolist()))
    XRLinearClassifier().fit(Xv, as_label_sets(Y.tolist(), indicator=False))


# 7. raw text into a numeric estimator -------------------------------------------------------


def test_raw_text_into_xrlinear_says_put_a_vectorizer_first(demo):
    X, Y = demo
    with pytest.raises(ValueError, match="TfidfVectorizer"):
        XRLinearClassifier().fit(X[:20], Y[:20])


# 10. MatchXML has top_k like the other rankers --------------------------------------------


def test_matchxml_top_k(tiny_bert_dir, demo):
    X, Y = demo
    clf = matchxml(tiny_bert_dir, top_k=3).fit(X[:60], Y[:60])
    labels, _scores = clf.predict_topk(X[:4])
    assert labels.shape == (4, 3)
    assert np.all(np.asarray(clf.predict(X[:4]).sum(1)).ravel() == 3)
    clf.set_params(top_k=2)
    assert clf.predict_topk(X[:4])[0].shape == (4, 2)


# 12. random_state defaults -----------------------------------------------------------------


def test_random_state_defaults_are_consistent():
    defaults = {}
    for name in skxmc.__all__:
        obj = getattr(skxmc, name)
        is_estimator = inspect.isclass(obj) and issubclass(obj, BaseEstimator)
        if is_estimator and "random_state" in inspect.signature(obj).parameters:
            defaults[name] = inspect.signature(obj).parameters["random_state"].default
            doc = inspect.getdoc(obj)
            assert "None" in doc[doc.index("random_state :") :][:600], name
    assert set(defaults.values()) == {0}, defaults


def test_no_warnings_in_the_default_workflow(demo):
    X, Y = demo
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = xr_pipe().fit(X[:200], Y[:200])
        clf.score(X[:50], Y[:50])


# 10. MatchXML as a transformer ---------------------------------------------------------------


def test_matchxml_transform_api(tiny_bert_dir, demo):
    X, Y = demo
    clf = matchxml(tiny_bert_dir)
    F = clf.fit_transform(X[:60], Y[:60])
    assert sp.issparse(F) and F.shape == (60, clf.n_features_ranker_)
    names = clf.get_feature_names_out()
    assert len(names) == F.shape[1] and names[0] == "matchxmlclassifier0"
    # predict keeps working under a global pandas output configuration
    from sklearn import config_context

    with config_context(transform_output="default"):
        expected = clf.predict_topk(X[:3])[0]
    pytest.importorskip("pandas")
    with config_context(transform_output="pandas"):
        np.testing.assert_array_equal(clf.predict_topk(X[:3])[0], expected)


# 11. verbose=1 prints ------------------------------------------------------------------------


def test_verbose_prints_without_logging_config(demo, capsys):
    X, Y = demo
    Xv = TfidfVectorizer(dtype=np.float32).fit_transform(X[:200])
    XRLinearClassifier(verbose=0).fit(Xv, Y[:200])
    assert capsys.readouterr().out == ""
    XRLinearClassifier(verbose=1).fit(Xv, Y[:200])
    out = capsys.readouterr().out
    assert "label tree" in out and "layer 1/" in out


# 3. PSP in CV with the default cv --------------------------------------------------------------


def test_psp_scorer_default_cv_uses_each_labels_own_propensity(demo):
    from skxmc.metrics import inverse_propensity

    X, Y = demo
    w = inverse_propensity(Y)
    scorer = make_topk_scorer("psprecision", k=5, inv_propensity=w)
    res = cross_validate(
        xr_pipe(),
        X,
        Y,
        scoring=scorer,
        return_estimator=True,
        return_indices=True,
        error_score="raise",
    )
    lookup = dict(zip(w.classes.tolist(), w.values.tolist()))
    for est, test, got in zip(res["estimator"], res["indices"]["test"], res["test_score"]):
        labels, _ = est.predict_topk([X[i] for i in test], k=5)
        # naive reference: sum of the propensities of the hits, over k, mean over rows
        ref = np.mean(
            [
                sum(lookup[lab] for lab in row if lab is not None and lab in Y[i]) / 5
                for i, row in zip(test, labels.tolist())
            ]
        )
        assert got == pytest.approx(ref, rel=1e-9)
        assert len(est[-1].classes_) < len(w.classes)  # the fold's labels are a subset


# 8, 9, 13. pipelines: predict_topk, safe save, umask ---------------------------------------


def test_best_estimator_ranks_and_saves_without_pickle(demo, tmp_path):
    import os

    X, Y = demo
    pipe = xmc_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier())
    search = GridSearchCV(pipe, {"xrlinearclassifier__beam_size": [5, 10]}, cv=3).fit(X, Y)
    labels, scores = search.best_estimator_.predict_topk(X[:5], k=3)
    assert labels.shape == scores.shape == (5, 3)
    old = os.umask(0o022)
    try:
        skxmc.save(search.best_estimator_, tmp_path / "model")
    finally:
        os.umask(old)
    assert (tmp_path / "model").stat().st_mode & 0o777 == 0o755
    assert not list((tmp_path / "model").rglob("*.pkl"))
    loaded = skxmc.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_topk(X[:5], k=3)[0], labels)


# 4, 5, 7, 10 for the multi-class neural estimators, with DataFrame input -------------------


@pytest.fixture(scope="module")
def topic_frame():
    pd = pytest.importorskip("pandas")
    from ._helpers import topic_texts

    texts, y = topic_texts((10, 10, 10))
    return pd.DataFrame({"text": texts, "n_words": [len(t.split()) for t in texts]}), y


def _neural(kind, encoder):
    from skxmc import KNNBertClassifier, SharpReCLClassifier

    common = dict(
        encoder=str(encoder),
        pooling="mean",
        max_length=16,
        training=TrainingConfig(batch_size=8, max_epochs=1, device="cpu"),
    )
    if kind == "sharprecl":
        return SharpReCLClassifier(
            n_synthetic_negative=8, n_synthetic_positive=2, n_hard=2, projection_dim=8, **common
        )
    return KNNBertClassifier(
        queue_size=16,
        n_enqueue_per_anchor=1,
        n_most_similar=2,
        n_least_similar=1,
        n_neighbors=3,
        **common,
    )


@pytest.mark.parametrize("kind", ["sharprecl", "knnbert"])
def test_multiclass_neural_estimators_in_dataframe_workflows(kind, tiny_bert_dir, topic_frame):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression

    df, y = topic_frame
    clf = _neural(kind, tiny_bert_dir)
    acc = cross_val_score(clf, df["text"], y, cv=3, scoring="accuracy", error_score="raise")
    assert np.all(np.isfinite(acc))
    clf.fit(df[["text"]], y)
    pred = clf.predict(df[["text"]])  # one column: that column, one prediction per row
    assert pred.shape == (len(df),)
    np.testing.assert_array_equal(pred, clf.predict(df["text"]))
    np.testing.assert_allclose(clf.predict_proba(df["text"]).sum(1), 1.0, rtol=1e-5)
    features = ColumnTransformer(
        [("emb", _neural(kind, tiny_bert_dir), "text")], remainder="passthrough"
    ).set_output(transform="pandas")
    model = make_pipeline(features, LogisticRegression(max_iter=200)).fit(df, y)
    out = model[0].transform(df)
    assert list(out.columns)[-1] == "remainder__n_words"
    assert model.predict(df).shape == (len(df),)


def test_shared_parameter_docs_are_filled_in():
    for cls in (XRLinearClassifier, SNMClassifier, MatchXMLClassifier):
        doc = cls.__doc__
        assert "{ranker_output_params}" not in doc
        assert "    classes : array-like" in doc and "    sparse_output : bool" in doc
