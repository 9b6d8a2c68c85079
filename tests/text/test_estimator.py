"""The engine parameters of the neural estimators: ``history_``, ``validation_fraction``
with ``n_iter_no_change``, ``callbacks``, ``accumulation_steps``, ``max_time``; per-fit
state stays off the estimator."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.base import clone

from skxmc import KNNBertClassifier, SharpReCLClassifier, SNMClassifier
from skxmc.matchxml import MultiStageMatcher
from skxmc.text import Callback

from .. import test_snm
from .._helpers import knnbert_toy_data, make_knnbert, make_sharprecl, sharprecl_toy_data
from ..matchxml import test_classifier as test_matchxml
from .test_bad_input_checkpoints import assert_same_state, state


class _Epochs(Callback):
    def __init__(self):
        self.seen = []

    def on_epoch_end(self, trainer):
        self.seen.append(dict(trainer.epoch_history[-1]))


def test_history_records_each_epoch_and_the_validation_score(tiny_bert_dir):
    X, y = sharprecl_toy_data()
    clf = make_sharprecl(tiny_bert_dir, max_epochs=3, validation_fraction=0.3)
    clf.fit(X, y)
    assert [h["epoch"] for h in clf.history_] == [1, 2, 3]
    scores = [h["valid_score"] for h in clf.history_]
    # 21 texts, 30 % held out: 7 validation texts, so scores are multiples of 1/7.
    assert all(0 <= s <= 1 and abs(7 * s - round(7 * s)) < 1e-9 for s in scores)
    steps = [h["step"] for h in clf.history_]
    assert steps == [2, 4, 6]  # 14 training texts in batches of 8
    first = clf.loss_curve_[: steps[0]]
    assert clf.history_[0]["loss"] == pytest.approx(np.mean(first))
    assert not any(k.startswith("_") and k not in ("_sklearn_output_config",) for k in vars(clf))


def test_early_stopping_stops_when_the_validation_score_is_flat(tiny_bert_dir):
    """With rates too small to change a prediction, the validation accuracy never
    improves after the first epoch: n_iter_no_change=2 stops after epoch 3 of 5."""
    X, y = sharprecl_toy_data()
    flat = dict(learning_rate=1e-12, head_learning_rate=1e-12, max_epochs=5)
    clf = make_sharprecl(tiny_bert_dir, validation_fraction=0.3, n_iter_no_change=2, **flat)
    clf.fit(X, y)
    assert clf.n_iter_ == 3 and len(clf.history_) == 3
    assert len({h["valid_score"] for h in clf.history_}) == 1
    full = make_sharprecl(tiny_bert_dir, validation_fraction=0.3, **flat).fit(X, y)
    assert full.n_iter_ == 5


def test_n_iter_no_change_needs_a_validation_split(tiny_bert_dir):
    X, y = sharprecl_toy_data()
    with pytest.raises(ValueError, match="validation_fraction"):
        make_sharprecl(tiny_bert_dir, n_iter_no_change=2).fit(X, y)


def test_user_callbacks_run_and_survive_clone(tiny_bert_dir):
    X, y = knnbert_toy_data()
    epochs = _Epochs()
    clf = make_knnbert(tiny_bert_dir, callbacks=[epochs], max_epochs=2).fit(X, y)
    assert [e["epoch"] for e in epochs.seen] == [1, 2]
    assert epochs.seen == clf.history_
    assert clone(clf).get_params()["training__callbacks"][0] is not epochs  # deep-copied


def test_accumulation_steps_makes_fewer_larger_steps(tiny_bert_dir):
    X, y = knnbert_toy_data()  # 18 texts, batches of 6: 3 batches an epoch
    plain = make_knnbert(tiny_bert_dir, max_epochs=2).fit(X, y)
    acc = make_knnbert(tiny_bert_dir, max_epochs=2, accumulation_steps=3).fit(X, y)
    assert plain.n_steps_ == 6 and acc.n_steps_ == 2
    assert acc.predict(X).shape == (len(X),)


def _fit(name, tiny_bert_dir, **params):
    """One small fit of each neural estimator with ``params``."""
    if name == "sharprecl":
        X, y = sharprecl_toy_data()
        return make_sharprecl(tiny_bert_dir, **params).fit(X, y), X
    if name == "knnbert":
        X, y = knnbert_toy_data()
        return make_knnbert(tiny_bert_dir, **params).fit(X, y), X
    if name == "snm":
        X, Y = test_snm._toy()
        return test_snm._snm(**{**test_snm.FAST, **params}).fit(X, Y), X
    X, Y = test_matchxml.multilabel_texts(24)
    return test_matchxml.make_clf(tiny_bert_dir, **params).fit(X, Y), X


@pytest.mark.filterwarnings("ignore:top_k=")  # the toy sets have fewer labels than top_k
@pytest.mark.parametrize("name", ["sharprecl", "knnbert", "snm", "matchxml"])
def test_max_time_stops_training_after_the_step_that_reaches_it(name, tiny_bert_dir):
    # the limit is checked after every optimiser step: a tiny one stops after the first
    full, _ = _fit(name, tiny_bert_dir)
    short, X = _fit(name, tiny_bert_dir, max_time=1e-9)
    if name == "matchxml":  # the matcher's limit holds for each stage
        stages = [len(curve) for curve in short.matcher_.stage_loss_curves_]
        assert stages == [1] * len(full.matcher_.stage_loss_curves_)
        assert all(len(curve) > 1 for curve in full.matcher_.stage_loss_curves_)
    else:
        assert short.n_steps_ == 1 < full.n_steps_
        assert len(short.loss_curve_) == 1
    assert not getattr(short, "matcher_", short).interrupted_  # a limit, not a Ctrl-C
    assert short.predict(X).shape[0] == len(X)


@pytest.mark.parametrize("bad", [0, -1.0, "60"])
def test_max_time_must_be_a_positive_number(bad, tiny_bert_dir):
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = sharprecl_toy_data()
    with pytest.raises(InvalidParameterError, match="'max_time' parameter"):
        make_sharprecl(tiny_bert_dir, max_time=bad).fit(X, y)


def test_a_fit_stopped_by_max_time_resumes_to_the_uninterrupted_model(tiny_bert_dir, tmp_path):
    # max_time is not part of the checkpoint's fingerprint: the next fit, with another
    # limit or none, resumes the stopped one and ends with the uninterrupted model
    X, y = sharprecl_toy_data()
    full = make_sharprecl(tiny_bert_dir).fit(X, y)
    part = make_sharprecl(tiny_bert_dir, checkpoint_dir=tmp_path, max_time=1e-9)
    part.fit(X, y)
    assert part.n_steps_ == 1 and not part.interrupted_
    resumed = make_sharprecl(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    assert resumed.n_steps_ == full.n_steps_
    assert_same_state(state(resumed), state(full))
    np.testing.assert_array_equal(resumed.predict_proba(X), full.predict_proba(X))


def test_knnbert_memory_rows_are_positions_in_X_with_a_validation_split(tiny_bert_dir):
    X, y = knnbert_toy_data()
    clf = make_knnbert(tiny_bert_dir, knn_memory="train", validation_fraction=0.3)
    clf.fit(X, y)
    rows = clf.memory_indices_
    assert len(rows) == 12 and len(set(rows.tolist())) == 12 and rows.max() < len(X)
    codes = np.searchsorted(clf.classes_, np.asarray(y))
    np.testing.assert_array_equal(clf.memory_targets_, codes[rows])


def test_snm_takes_callbacks_and_keeps_no_trainer():
    X, Y = test_snm._toy()
    epochs = _Epochs()
    clf = test_snm._snm(**{**test_snm.FAST, "callbacks": [epochs]}).fit(X, Y)
    assert len(epochs.seen) == clf.n_iter_ == len(clf.history_)
    assert "_trainer" not in vars(clf)


@pytest.mark.parametrize(
    "cls", [SharpReCLClassifier, KNNBertClassifier, SNMClassifier, MultiStageMatcher]
)
def test_engine_parameters_are_documented_once(cls):
    doc = cls.__doc__
    # one parameter, documented once (TrainingConfig), with this estimator's defaults
    assert "training : skxmc.text.TrainingConfig or None, default=None" in doc
    assert f"``max_epochs={cls._training_defaults['max_epochs']}``" in doc
    assert "accumulation_steps" not in doc.split("Attributes")[0]
    # every shared block is substituted: no placeholder is left in the rendered docs
    assert re.search(r"\{\w+_params\}", doc) is None
    from skxmc.text import TrainingConfig

    assert "max_time : float or None, default=None" in TrainingConfig.__doc__
    assert "callbacks : list of skxmc.text.Callback" in TrainingConfig.__doc__


def test_snm_validation_score_is_precision_at_1_and_early_stopping_keeps_the_best():
    from sklearn.utils import check_random_state

    from skxmc.metrics import precision_at_k
    from skxmc.text._estimator import validation_rows

    X, Y = test_snm._toy()
    params = {**test_snm.FAST, "validation_fraction": 0.25, "n_iter_no_change": 3}
    clf = test_snm._snm(**params).fit(X, Y)
    scores = [h["valid_score"] for h in clf.history_]
    assert len(scores) == clf.n_iter_ <= test_snm.FAST["max_epochs"]
    # the held-out rows, drawn as fit draws them; the kept weights are the best epoch's,
    # so a naive P@1 of the fitted model on those rows is the best validation score
    rs = check_random_state(params["random_state"] if "random_state" in params else 0)
    rs.randint(np.iinfo(np.int32).max)
    _, valid = validation_rows(len(X), 0.25, 3, rs)
    top = clf.predict_topk(X[valid], k=1)
    naive = precision_at_k([Y[i] for i in valid], top, k=1, classes=clf.classes_)
    assert naive == pytest.approx(max(scores))
    with pytest.raises(ValueError, match="validation_fraction"):
        test_snm._snm(**{**test_snm.FAST, "n_iter_no_change": 2}).fit(X, Y)
