"""Predict-only XR-Linear models: ``XRLinearClassifier.compact()`` and
``skxmc.save(..., predict_only=True)``."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

import skxmc
from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.cli import main
from skxmc.datasets import make_xmc_classification
from skxmc.io import describe, to_pecos
from skxmc.io._format import ARRAYS_NAME
from skxmc.linear import _beam
from skxmc.pipeline import make_pipeline

from .._helpers import run_page_examples


@pytest.fixture(scope="module")
def data():
    return make_xmc_classification(300, 400, 60, random_state=0)


@pytest.fixture(scope="module", params=[None, 5], ids=["feature-major", "blocks"])
def fitted(data, request):
    """Three layers (4, 16, 60 nodes); with ``DENSE_LAYER_MAX_NODES=5`` the two lower
    ones are searched (and saved) as per-parent blocks, as in a large model."""
    X, Y = data
    tree = HierarchicalLabelTree(branching_factor=4, max_leaf_size=4)
    with pytest.MonkeyPatch.context() as mp:
        if request.param is not None:
            mp.setattr(_beam, "DENSE_LAYER_MAX_NODES", request.param)
        clf = XRLinearClassifier(tree=tree, beam_size=4, top_k=8).fit(X, Y)
    blocks = [c.blocks is not None for c in clf._search_cache.chunks]
    assert blocks == ([False] * 3 if request.param is None else [False, True, True])
    return clf


def _same_predictions(a, b, X):
    la, sa = a.predict_topk(X)
    lb, sb = b.predict_topk(X)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)  # bit-identical, not close
    assert (a.decision_function(X) != b.decision_function(X)).nnz == 0
    picked = a.classes_[:7]
    np.testing.assert_array_equal(
        a.predict_topk(X, labels=picked)[1], b.predict_topk(X, labels=picked)[1]
    )


def test_compact_predicts_bit_identically_and_names_what_it_dropped(data, fitted):
    X, _ = data
    compact = pickle.loads(pickle.dumps(fitted)).compact()
    assert compact.predict_only_ is True and fitted.predict_only_ is False
    _same_predictions(fitted, compact, X)
    for name in ("weights_", "fit_time_per_layer_", "fit_bytes_per_layer_"):
        assert not hasattr(compact, name)
        with pytest.raises(AttributeError, match=rf"predict-only.*no longer holds {name}.*Fit"):
            getattr(compact, name)
    assert "label_embedder_" not in vars(compact.tree_)
    with pytest.raises(AttributeError, match="no attribute 'nope_'"):
        compact.nope_  # noqa: B018 - other names keep Python's message
    # pickled, it keeps its search layout (no weights_ to rebuild it from)
    _same_predictions(fitted, pickle.loads(pickle.dumps(compact)), X)
    with pytest.raises(ValueError, match="predict-only.*weights_"):
        to_pecos(compact, "unused")


def test_refit_after_compact_gives_the_full_model_back(data, fitted):
    X, Y = data
    compact = pickle.loads(pickle.dumps(fitted)).compact()
    compact.fit(X, Y)
    assert compact.predict_only_ is False
    assert all((a != b).nnz == 0 for a, b in zip(compact.weights_, fitted.weights_))


def test_save_predict_only_leaves_the_estimator_whole_and_is_smaller(data, fitted, tmp_path):
    X, _ = data
    tree_before = fitted.tree_
    full = skxmc.save(fitted, tmp_path / "full")
    small = skxmc.save(fitted, tmp_path / "small", predict_only=True)
    assert fitted.predict_only_ is False and fitted.tree_ is tree_before
    assert len(fitted.weights_) == 3 and "label_embedder_" in vars(fitted.tree_)
    full_size = (full / ARRAYS_NAME).stat().st_size
    small_size = (small / ARRAYS_NAME).stat().st_size
    assert small_size < 0.7 * full_size  # the weights' second copy is gone
    for mmap in (False, True):
        loaded = skxmc.load(small, mmap=mmap)
        assert loaded.predict_only_ is True
        _same_predictions(fitted, loaded, X)
        with pytest.raises(AttributeError, match="predict-only"):
            loaded.weights_  # noqa: B018
    assert describe(small)["predict_only"] is True
    assert describe(full)["predict_only"] is False
    # a compacted model saves and loads as it is, predict_only or not
    again = skxmc.save(skxmc.load(small), tmp_path / "again")
    _same_predictions(fitted, skxmc.load(again), X)


def test_predict_only_pipeline_and_info(tmp_path, capsys):
    texts = ["red apple", "green apple", "red car", "fast car", "apple pie", "car race"]
    labels = [["fruit"], ["fruit"], ["vehicle"], ["vehicle"], ["fruit"], ["vehicle"]]
    pipe = make_pipeline(TfidfVectorizer(), XRLinearClassifier(top_k=2)).fit(texts, labels)
    path = skxmc.save(pipe, tmp_path / "pipe", predict_only=True)
    assert pipe[-1].predict_only_ is False and hasattr(pipe[-1], "weights_")
    loaded = skxmc.load(path)
    assert loaded[-1].predict_only_ is True
    queries = ["a fast red car", "apple"]
    np.testing.assert_array_equal(loaded.predict_topk(queries)[1], pipe.predict_topk(queries)[1])
    assert main(["info", str(path)]) == 0
    assert "predict-only" in capsys.readouterr().out
    assert main(["info", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["predict_only"] is True


def test_predict_only_refuses_models_with_nothing_to_drop(data, tmp_path):
    X, Y = data
    tree = HierarchicalLabelTree(max_leaf_size=8).fit(X, Y)
    with pytest.raises(ValueError, match="no part of this HierarchicalLabelTree"):
        skxmc.save(tree, tmp_path / "tree", predict_only=True)
    assert not (tmp_path / "tree").exists()


def test_a_predict_only_model_without_its_layout_is_refused(fitted, tmp_path):
    path = skxmc.save(fitted, tmp_path / "small", predict_only=True)
    config = json.loads((path / "skxmc-model.json").read_text())
    del config["model"]["arrays"]["__dict__"]["_search_layout"]
    (path / "skxmc-model.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="predict-only model must hold its beam-search layout"):
        skxmc.load(path)


def test_persistence_page_examples_run():
    run_page_examples("persistence.rst")
