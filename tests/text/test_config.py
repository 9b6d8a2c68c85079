"""The training settings of the neural estimators, declared once (issue 47 item 3).

:class:`~skxmc.text.TrainingConfig` is each estimator's ``training`` parameter; its fields
route as ``training__<field>`` (grids, ``set_params``, ``clone``); the old flat names
raise a :class:`TypeError` that names the new place; models saved with the flat names
are upgraded on load.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skxmc.knnbert import KNNBertClassifier
from skxmc.matchxml import MatchXMLClassifier, MultiStageMatcher
from skxmc.sharprecl import SharpReCLClassifier
from skxmc.snm import SNMClassifier
from skxmc.text import TrainingConfig

NEURAL = [SharpReCLClassifier, KNNBertClassifier, SNMClassifier, MultiStageMatcher]


@pytest.mark.parametrize("cls", NEURAL)
def test_at_most_20_constructor_parameters(cls):
    assert len(cls._get_param_names()) <= 20
    assert "training" in cls._get_param_names()


@pytest.mark.parametrize("cls", NEURAL)
def test_routed_setting_clone_round_trip(cls):
    est = cls()
    assert est.training is None  # no shared default instance
    est.set_params(training__max_epochs=7, training__batch_size=4)
    assert isinstance(est.training, TrainingConfig)
    assert est.get_params()["training__max_epochs"] == 7
    twin = clone(est)
    assert twin.training is not est.training
    assert twin.get_params()["training__max_epochs"] == 7
    assert twin._train.batch_size == 4
    # Another estimator's set_params does not leak into a fresh one.
    assert (
        cls().training is None and cls()._train.max_epochs == cls._training_defaults["max_epochs"]
    )


@pytest.mark.parametrize("cls", NEURAL)
def test_flat_names_raise_type_error_naming_the_new_place(cls):
    with pytest.raises(
        TypeError, match=r"training=TrainingConfig\(max_epochs=2\).*training__max_epochs"
    ):
        cls(max_epochs=2)
    with pytest.raises(TypeError, match=r"training__device"):
        cls().set_params(device="cpu")


def test_sharprecl_ablation_flags_name_ablate():
    with pytest.raises(TypeError, match=r"ablate=\('hard_mixup',\)"):
        SharpReCLClassifier(hard_mixup=False)


def test_unsupported_training_field_is_an_error():
    X = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    y = [[i % 2] for i in range(20)]
    clf = SNMClassifier(training=TrainingConfig(max_steps=3, device="cpu"))
    with pytest.raises(ValueError, match="does not use training.max_steps"):
        clf.fit(X, y)


def test_invalid_training_field_is_checked_at_fit():
    X = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    y = [[i % 2] for i in range(20)]
    with pytest.raises(ValueError, match="max_epochs"):
        SNMClassifier(training=TrainingConfig(max_epochs=0)).fit(X, y)


def test_grid_search_over_a_routed_training_setting():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6)).astype(np.float32)
    y = [[int(x[0] > 0), 2 + int(x[1] > 0)] for x in X]
    base = SNMClassifier(hidden_size=8, embedding_size=4, n_sampled=2, top_k=2)
    base.set_params(training__batch_size=16, training__device="cpu")
    search = GridSearchCV(base, {"training__max_epochs": [1, 2]}, cv=2).fit(X, y)
    assert search.best_params_["training__max_epochs"] in (1, 2)
    assert search.best_estimator_.n_iter_ == search.best_params_["training__max_epochs"]
    assert base.training.max_epochs is None  # the template is never fitted nor mutated


def test_matchxml_routes_matcher_training():
    clf = MatchXMLClassifier().set_params(matcher__training__max_epochs=3)
    assert clf.matcher.training.max_epochs == 3
    assert clone(clf).get_params()["matcher__training__max_epochs"] == 3


@pytest.mark.parametrize("cls", NEURAL)
def test_saved_flat_params_upgrade(cls):
    # A model saved by 26aef59 holds the flat names; loading replays them through this.
    params = {"max_epochs": 4, "batch_size": cls._training_defaults["batch_size"], "verbose": 0}
    upgraded = cls._upgrade_params(params)
    est = cls(**upgraded)
    assert est.training.get_params(deep=False)["max_epochs"] == 4
    assert est.training.batch_size is None  # equal to the estimator's default: left None
    assert est._train.batch_size == cls._training_defaults["batch_size"]


def test_saved_sharprecl_ablation_flags_upgrade():
    upgraded = SharpReCLClassifier._upgrade_params(
        {"simple_sampling": True, "hard_mixup": False, "prior_weighting": False}
    )
    assert upgraded == {"ablate": ("hard_mixup", "prior_weighting")}


def test_text_exports_at_most_15_names_and_old_ones_warn():
    import skxmc.text

    assert len(skxmc.text.__all__) <= 15
    assert all(hasattr(skxmc.text, name) for name in skxmc.text.__all__)
    with pytest.warns(FutureWarning, match=r"skxmc\.text\._classifier"):
        softmax = skxmc.text.softmax
    from skxmc.text._classifier import softmax as private

    assert softmax is private
    with pytest.raises(AttributeError):
        skxmc.text.no_such_name  # noqa: B018


def test_model_saved_with_flat_training_settings_loads(tmp_path):
    """A model directory of skxmc 26aef59 holds the flat names; the loader passes the
    saved parameters through ``cls._upgrade_params`` before ``cls(**params)``."""
    import json

    import skxmc

    X = np.random.default_rng(0).normal(size=(40, 6)).astype(np.float32)
    y = [[i % 3] for i in range(40)]
    training = TrainingConfig(max_epochs=2, batch_size=8, device="cpu")
    clf = SNMClassifier(hidden_size=8, embedding_size=4, n_sampled=2, training=training)
    clf.fit(X, y).save(tmp_path / "m")
    config_path = tmp_path / "m" / "skxmc-model.json"
    config = json.loads(config_path.read_text())
    params = config["model"]["params"]["__dict__"]
    nested = params.pop("training")["params"]["__dict__"]
    params.update(nested)  # the flat form of 26aef59
    config_path.write_text(json.dumps(config))
    loaded = skxmc.load(tmp_path / "m")
    assert loaded.training.max_epochs == 2 and loaded._train.batch_size == 8
    np.testing.assert_array_equal(loaded.predict_topk(X, 2)[0], clf.predict_topk(X, 2)[0])


def test_pickle_of_flat_training_settings_unpickles():
    """A pickled estimator of skxmc 26aef59 holds the flat settings as attributes."""
    import pickle

    clf = SharpReCLClassifier(training=TrainingConfig(max_epochs=5, device="cpu"))
    state = clf.__getstate__()
    del state["training"]
    state.update(max_epochs=5, device="cpu", batch_size=32, hard_mixup=False, simple_sampling=True)
    old = SharpReCLClassifier.__new__(SharpReCLClassifier)
    old.__setstate__(state)
    assert old.training.max_epochs == 5 and old.training.device == "cpu"
    assert old.ablate == ("hard_mixup",) and not hasattr(old, "max_epochs")
    again = pickle.loads(pickle.dumps(old))
    assert again.get_params()["training__max_epochs"] == 5
