"""Target forms that sklearn users pass (issue 48 items 1, 9, 10, 11): column vectors,
DataFrame columns, plain lists of label lists, and sklearn's own scorers on label sets."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import DataConversionWarning

from skxmc import SNMClassifier, XRLinearClassifier


def _training(max_epochs: int):
    """CPU training settings of the SNM estimators of these tests."""
    from skxmc.text import TrainingConfig

    return TrainingConfig(max_epochs=max_epochs, device="cpu")


def _blobs(n: int = 90, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three well-separated classes in 6 dimensions, rows L2-normalised."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.random((n, 6)).astype(np.float32) * 0.2
    X[np.arange(n), y] += 1.0
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, y


def _rankers():
    return [
        XRLinearClassifier(),
        SNMClassifier(hidden_size=16, embedding_size=8, training=_training(3)),
    ]


# ---------------------------------------------------------------- item 1: column vectors


@pytest.mark.parametrize("clf", _rankers(), ids=lambda c: type(c).__name__)
def test_column_vector_target_is_raveled_with_a_warning(clf):
    X, y = _blobs()
    yb = (y == 0).astype(int)
    with pytest.warns(DataConversionWarning, match="column-vector Y"):
        clf.fit(X, yb.reshape(-1, 1))
    assert clf.target_type_ == "multiclass"
    assert clf.classes_.tolist() == [0, 1]
    pred = clf.predict(X)
    assert pred.shape == (len(X),)
    # Read as a one-label indicator, every row was predicted 1 (26aef59).
    assert 0 < pred.mean() < 1
    # score() takes the same column vector
    assert clf.score(X, yb.reshape(-1, 1)) > 0.5


def test_dataframe_column_of_strings_is_one_label_per_row():
    pd = pytest.importorskip("pandas")
    X, y = _blobs()
    df = pd.DataFrame({"label": np.array(["a", "b", "c"])[y]})
    with pytest.warns(DataConversionWarning):
        clf = XRLinearClassifier().fit(X, df[["label"]])
    assert clf.target_type_ == "multiclass"
    pred = clf.predict(X[:6])
    assert pred.shape == (6,)  # 26aef59: an indicator with every label in every row
    assert set(pred) <= {"a", "b", "c"}


def test_matchxml_column_vector(tiny_bert_dir):
    from tests.matchxml.test_classifier import make_clf, multilabel_texts

    texts, labels = multilabel_texts(24)
    y = np.array([row[0] for row in labels])[:, None]
    with pytest.warns(DataConversionWarning):
        clf = make_clf(tiny_bert_dir, max_epochs=1).fit(texts, y)
    assert clf.target_type_ == "multiclass"
    assert clf.predict(texts[:3]).shape == (3,)


def test_sparse_column_stays_a_one_label_indicator():
    import scipy.sparse as sp

    from skxmc.labels import encode_target

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Y, _, kind = encode_target(sp.csr_matrix(np.array([[1], [0], [1]])))
    assert kind == "multilabel-sparse" and Y.shape == (3, 1)


# ------------------------------------------------------ item 13: raw text into SNM


def test_snm_on_raw_text_says_to_put_a_vectorizer_first():
    texts = ["cocoa review showers", "bank rates rise", "cocoa prices"]
    with pytest.raises(ValueError, match=r"needs numeric features.*TfidfVectorizer"):
        SNMClassifier(training=_training(1)).fit(texts, [["a"], ["b"], ["a"]])
    X, y = _blobs(30)
    clf = SNMClassifier(hidden_size=8, embedding_size=8, training=_training(1)).fit(X, y)
    with pytest.raises(ValueError, match="make_pipeline"):
        clf.predict(np.array(texts))


# ------------------------------------- item 9: sklearn's string scorers on label sets

_STRING_SCORERS = [
    "f1_samples",
    "f1_micro",
    "accuracy",
    "jaccard_samples",
    "roc_auc",
    "average_precision",
    "neg_log_loss",
]


def _multilabel_data():
    from tests.test_decision_rule import _multilabel

    return _multilabel()


@pytest.mark.parametrize("name", _STRING_SCORERS)
def test_label_set_scorer_equals_sklearn_on_the_indicator(name):
    from sklearn.metrics import get_scorer

    from skxmc import as_label_sets
    from skxmc.metrics import label_set_scorer

    X, Y = _multilabel_data()
    on_sets = XRLinearClassifier(threshold=0.3).fit(X[:180], as_label_sets(Y[:180]))
    on_dense = XRLinearClassifier(threshold=0.3).fit(X[:180], Y[:180])
    got = label_set_scorer(name)(on_sets, X[180:], as_label_sets(Y[180:]))
    assert got == pytest.approx(get_scorer(name)(on_dense, X[180:], Y[180:]))


def test_label_set_scorer_in_cross_validate_and_unseen_labels():
    from sklearn.model_selection import cross_validate

    from skxmc import as_label_sets
    from skxmc.metrics import label_set_scorer

    X, Y = _multilabel_data()
    Ys = as_label_sets(Y)
    scoring = {name: label_set_scorer(name) for name in ("f1_samples", "accuracy", "roc_auc")}
    result = cross_validate(
        XRLinearClassifier(threshold=0.3), X, Ys, cv=3, scoring=scoring, error_score="raise"
    )
    assert np.all(result["test_f1_samples"] > 0.5)  # 26aef59: NaN with a warning
    # a label the fold never saw is a miss, not dropped
    clf = XRLinearClassifier(threshold=0.3).fit(X, Ys)
    extra = as_label_sets([set(row) | {999} for row in Ys[:20]])
    assert label_set_scorer("accuracy")(clf, X[:20], extra) == 0.0
    # a 1-D target goes to sklearn's scorer as it is
    y = Y.argmax(1)
    clf1 = XRLinearClassifier().fit(X, y)
    assert label_set_scorer("accuracy")(clf1, X, y) == clf1.score(X, y)


def test_sklearn_metric_on_label_sets_points_to_label_set_scorer():
    from sklearn.metrics import f1_score, get_scorer

    from skxmc import as_label_sets

    X, Y = _multilabel_data()
    Ys = as_label_sets(Y)
    clf = XRLinearClassifier().fit(X, Ys)
    with pytest.raises(ValueError, match="label_set_scorer") as info:
        get_scorer("f1_samples")(clf, X, Ys)
    assert "cross_val_predict" not in str(info.value)  # 26aef59 blamed cross_val_predict
    with pytest.raises(ValueError, match="label_set_scorer"):
        f1_score(Ys, clf.predict(X), average="samples")


# ------------------------------- item 11: cross_val_predict without classes=


def test_cross_val_predict_on_label_sets_points_to_classes():
    from sklearn.model_selection import cross_val_predict
    from sklearn.preprocessing import MultiLabelBinarizer

    from skxmc import as_label_sets

    X, _ = _blobs(40)
    Y = as_label_sets([[str(i % 7), f"only-{i}"] for i in range(40)])
    with pytest.raises(ValueError, match=r"classes=MultiLabelBinarizer\(\)\.fit\(Y\)\.classes_"):
        cross_val_predict(XRLinearClassifier(), X, Y, cv=3)
    classes = MultiLabelBinarizer().fit(Y).classes_
    pred = cross_val_predict(XRLinearClassifier(classes=classes), X, Y, cv=3)
    assert pred.shape == (40, len(classes))
    # all labels in every fold: no error, as before
    Y_full = as_label_sets([[str(i % 3)] for i in range(40)] + [])
    Y_full[0] = frozenset({"0", "1"})
    cross_val_predict(XRLinearClassifier(), X, Y_full, cv=2)


# ------------------------- item 10: examples and loaders give label sets, not lists


@pytest.mark.parametrize(
    "obj",
    ["skxmc.XRLinearClassifier", "skxmc.MatchXMLClassifier", "skxmc.pipeline.Pipeline"],
)
def test_docstring_examples_fit_on_label_sets(obj):
    """A plain list of label lists breaks sklearn's model selection with its default cv
    ("legacy multi-label data representation", raised before skxmc sees Y), so the
    examples users copy make label sets."""
    import importlib

    module, name = obj.rsplit(".", 1)
    doc = getattr(importlib.import_module(module), name).__doc__
    examples = doc[doc.index("Examples") :]
    assert "as_label_sets(" in examples


def test_plain_lists_and_label_sets_in_cross_val_score():
    from sklearn.model_selection import cross_val_score

    from skxmc import as_label_sets
    from skxmc.datasets import load_demo

    X, y = _blobs(60)
    lists = [["abc"[v]] + (["extra"] if i % 3 == 0 else []) for i, v in enumerate(y)]
    with pytest.raises(ValueError, match="legacy multi-label"):
        cross_val_score(XRLinearClassifier(), X, lists)  # sklearn's own check_cv
    assert cross_val_score(XRLinearClassifier(), X, as_label_sets(lists)).mean() > 0.5
    demo = load_demo()
    assert isinstance(demo.train_labels, np.ndarray) and demo.train_labels.dtype == object
