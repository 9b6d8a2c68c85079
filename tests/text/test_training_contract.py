"""Contracts every estimator trained by :class:`skxmc.text.Trainer` shares: the same
``random_state`` gives the same model, and Ctrl-C ends ``fit`` with a warning and a model
that predicts. One parametrized test per contract instead of a copy per estimator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from skxmc.exceptions import TrainingInterruptedWarning
from skxmc.text import Trainer

from .. import test_snm
from .._helpers import knnbert_toy_data, make_knnbert, make_sharprecl, sharprecl_toy_data
from ..matchxml import test_classifier as test_matchxml


def _sharprecl(encoder, **params):
    return make_sharprecl(encoder, **params), sharprecl_toy_data()


def _knnbert(encoder, **params):
    return make_knnbert(encoder, **params), knnbert_toy_data()


def _matchxml(encoder, **params):
    return test_matchxml.make_clf(encoder, **params), test_matchxml.multilabel_texts(48)


def _snm(encoder, **params):

    return test_snm._snm(**{**test_snm.FAST, **params}), test_snm._toy()


# name -> (factory(encoder, **params) -> (estimator, (X, y)), uses the tiny BERT)
ESTIMATORS: dict[str, tuple[Callable[..., tuple[Any, tuple]], bool]] = {
    "SharpReCLClassifier": (_sharprecl, True),
    "KNNBertClassifier": (_knnbert, True),
    "MatchXMLClassifier": (_matchxml, True),
    "SNMClassifier": (_snm, False),
}


# What else must hold after an interrupted fit, per estimator.
AFTER_INTERRUPT: dict[str, Callable[[Any], bool]] = {
    # The momentum key side is dropped and the kNN memory filled, as after a full fit.
    "KNNBertClassifier": lambda clf: (
        not hasattr(clf.module_, "key_encoder") and len(clf.memory_features_) > 0
    ),
    # Training stops at the stage it was in; the ranker is still fitted.
    "MatchXMLClassifier": lambda clf: len(clf.matcher_.stage_sizes_) == 1,
}


def _trained(clf: Any) -> Any:
    """The estimator that ran the training loop: MatchXML's matcher, the others themselves."""
    return getattr(clf, "matcher_", clf)


@pytest.fixture(params=list(ESTIMATORS))
def factory(request):
    build, needs_encoder = ESTIMATORS[request.param]
    encoder = request.getfixturevalue("tiny_bert_dir") if needs_encoder else None

    def make(**params):
        return build(encoder, **params)

    make.name = request.param
    return make


def _scores(clf: Any, X: Any) -> np.ndarray:
    """What the estimator predicts, as a dense array (probabilities or top-k scores)."""
    if hasattr(clf, "predict_topk"):
        return np.asarray(clf.predict_topk(X, k=3)[1])
    return clf.predict_proba(X)


def test_same_random_state_same_model(factory):
    a, (X, y) = factory(max_epochs=1)
    b, _ = factory(max_epochs=1)
    a.fit(X, y)
    b.fit(X, y)
    np.testing.assert_allclose(_trained(a).loss_curve_, _trained(b).loss_curve_, rtol=1e-5)
    np.testing.assert_allclose(_scores(a, X), _scores(b, X), rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:top_k=.*exceeds")  # toy label sets are small
def test_ctrl_c_ends_fit_with_a_model_that_predicts(factory, monkeypatch):
    original_fit = Trainer.fit

    def fit_interrupted_at_second_step(self, step_fn, *args, **kwargs):
        calls = []

        def step(batch):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return step_fn(batch)

        return original_fit(self, step, *args, **kwargs)

    monkeypatch.setattr(Trainer, "fit", fit_interrupted_at_second_step)
    clf, (X, y) = factory(max_epochs=2)
    with pytest.warns(TrainingInterruptedWarning):
        clf.fit(X, y)
    trained = _trained(clf)
    assert trained.interrupted_ and trained.n_steps_ == 1 and len(trained.loss_curve_) == 1
    assert clf.predict(X[:4]).shape[0] == 4
    assert np.all(np.isfinite(_scores(clf, X[:4])))
    assert AFTER_INTERRUPT.get(factory.name, lambda clf: True)(clf)
