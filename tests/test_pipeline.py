"""skxmc.pipeline (predict_topk through pipelines and searches) and skxmc.save / skxmc.load
of whole pipelines: the README quick-start model, refusals, file permissions."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline as SklearnPipeline
from sklearn.pipeline import make_pipeline as sklearn_make_pipeline
from sklearn.preprocessing import Normalizer

import skxmc
from skxmc import XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.pipeline import Pipeline, make_pipeline
from skxmc.text import TrainingConfig

N_TRAIN, N_TEST = 800, 100


@pytest.fixture(scope="module")
def demo():
    data = load_demo()
    return (
        data.train_texts[:N_TRAIN],
        data.train_labels[:N_TRAIN],
        data.test_texts[:N_TEST],
    )


@pytest.fixture(scope="module")
def quick_start(demo):
    """The README's quick-start model (scikit-learn's make_pipeline), on a slice of the data."""
    texts, labels, _ = demo
    clf = sklearn_make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
        XRLinearClassifier(n_jobs=2),
    )
    return clf.fit(texts, labels)


def _manual_topk(pipe, texts, k=None):
    return pipe[-1].predict_topk(pipe[:-1].transform(texts), k=k)


def _assert_same_topk(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# -- skxmc.pipeline ---------------------------------------------------------------------------


def test_make_pipeline_adds_predict_topk(demo):
    texts, labels, test = demo
    pipe = make_pipeline(TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier(top_k=3))
    assert isinstance(pipe, Pipeline) and isinstance(pipe, SklearnPipeline)
    assert [name for name, _ in pipe.steps] == ["tfidfvectorizer", "xrlinearclassifier"]
    pipe.fit(texts, labels)
    labels_, scores = pipe.predict_topk(test)
    assert labels_.shape == scores.shape == (N_TEST, 3)
    _assert_same_topk((labels_, scores), _manual_topk(pipe, test))
    _assert_same_topk(pipe.predict_topk(test, k=5), _manual_topk(pipe, test, k=5))
    # as scikit-learn's own pipeline methods, the fitted check comes first
    with pytest.raises(Exception, match="not fitted"):
        make_pipeline(TfidfVectorizer(), XRLinearClassifier()).predict_topk(test)


def test_predict_topk_only_when_the_final_step_has_it():
    pipe = make_pipeline(TfidfVectorizer(), LogisticRegression())
    assert not hasattr(pipe, "predict_topk")
    with pytest.raises(AttributeError, match="predict_topk"):
        pipe.predict_topk(["x"])


def test_make_pipeline_keywords_and_passthrough(demo):
    texts, labels, test = demo
    pipe = make_pipeline(
        TfidfVectorizer(min_df=2), "passthrough", XRLinearClassifier(), verbose=False
    )
    assert pipe.verbose is False and pipe.steps[1] == ("passthrough", "passthrough")
    with pytest.raises(TypeError):
        make_pipeline(TfidfVectorizer(), no_such_option=1)
    pipe.fit(texts, labels)
    _assert_same_topk(pipe.predict_topk(test), _manual_topk(pipe, test))


def test_grid_search_best_estimator_predict_topk(demo):
    # The user's call: a search over an skxmc pipeline, then the top-k of the best model.
    texts, labels, test = demo
    pipe = make_pipeline(TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier())
    search = GridSearchCV(pipe, {"xrlinearclassifier__beam_size": [2, 10]}, cv=KFold(2))
    search.fit(texts, labels)
    top_labels, top_scores = search.best_estimator_.predict_topk(test, k=5)
    assert top_labels.shape == (N_TEST, 5)
    assert np.all(np.diff(top_scores, axis=1) <= 0)
    _assert_same_topk((top_labels, top_scores), _manual_topk(search.best_estimator_, test, k=5))


# -- saving and loading pipelines ---------------------------------------------------------------


# a fresh interpreter importing skxmc (and compiling what its cache lacks): 4-22 s on 2 busy
# cores; test_loaded_pipeline_keeps_steps_and_params is the round trip in the default run,
# and tests/test_cli.py's `python -m skxmc predict` loads a saved pipeline in a new process
@pytest.mark.slow
def test_quick_start_pipeline_saves_and_loads_in_a_fresh_process(quick_start, demo, tmp_path):
    _, _, test = demo
    path = skxmc.save(quick_start, tmp_path / "model")
    assert sorted(p.name for p in path.iterdir()) == ["arrays.npz", "skxmc-model.json"]
    expected = _manual_topk(quick_start, test)
    np.save(tmp_path / "labels.npy", expected[0].astype(str))
    np.save(tmp_path / "scores.npy", expected[1])
    (tmp_path / "test.json").write_text(json.dumps(test), encoding="utf-8")
    code = textwrap.dedent(
        f"""
        import json, numpy as np, skxmc
        from skxmc.pipeline import Pipeline
        clf = skxmc.load({str(path)!r})
        assert type(clf) is Pipeline, type(clf)
        test = json.load(open({str(tmp_path / "test.json")!r}, encoding="utf-8"))
        labels, scores = clf.predict_topk(test)
        np.testing.assert_array_equal(labels.astype(str), np.load({str(tmp_path / "labels.npy")!r}))
        np.testing.assert_array_equal(scores, np.load({str(tmp_path / "scores.npy")!r}))
        print("ok", clf.score(test[:5], [[]] * 5))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_loaded_pipeline_keeps_steps_and_params(quick_start, demo, tmp_path):
    _, _, test = demo
    loaded = skxmc.load(skxmc.save(quick_start, tmp_path / "m"))
    assert [name for name, _ in loaded.steps] == [name for name, _ in quick_start.steps]
    assert loaded.get_params()["tfidfvectorizer__dtype"] is np.float32
    assert loaded[-1].get_params(deep=False) == quick_start[-1].get_params(deep=False)
    np.testing.assert_array_equal(loaded.classes_, quick_start.classes_)
    assert (loaded.decision_function(test) != quick_start.decision_function(test)).nnz == 0


def test_nested_pipeline_passthrough_and_count_vectorizer(demo, tmp_path):
    texts, labels, test = demo
    inner = SklearnPipeline([("counts", CountVectorizer(min_df=2)), ("skip", "passthrough")])
    pipe = SklearnPipeline([("features", inner), ("ranker", XRLinearClassifier(top_k=4))])
    pipe.fit(texts, labels)
    loaded = skxmc.load(skxmc.save(pipe, tmp_path / "m"))
    assert isinstance(loaded[0], Pipeline) and loaded[0].steps[1] == ("skip", "passthrough")
    _assert_same_topk(loaded.predict_topk(test), _manual_topk(pipe, test))


def test_pipeline_step_with_weight_files(demo, tmp_path):
    # SNM keeps torch weights in files of its own: as a step they go to parts/<n>/.
    pytest.importorskip("torch")
    texts, labels, test = demo
    snm = skxmc.SNMClassifier(
        hidden_size=32,
        embedding_size=16,
        n_sampled=4,
        top_k=3,
        training=TrainingConfig(max_epochs=2, batch_size=64, device="cpu", random_state=0),
    )
    # a slice of the slice: what is tested is where the weights go, not the model
    pipe = make_pipeline(TfidfVectorizer(min_df=2, dtype=np.float32), snm)
    pipe.fit(texts[:300], labels[:300])
    path = skxmc.save(pipe, tmp_path / "m")
    assert any((path / "parts" / "0").iterdir())
    _assert_same_topk(skxmc.load(path).predict_topk(test), pipe.predict_topk(test))


def test_save_refuses_other_steps_naming_them(demo, tmp_path):
    texts, labels, _ = demo
    target = tmp_path / "m"
    pipe = SklearnPipeline(
        [("tfidf", TfidfVectorizer()), ("scale", Normalizer()), ("xr", XRLinearClassifier())]
    )
    pipe.fit(texts[:200], labels[:200])
    with pytest.raises(TypeError, match=r"step 'scale' \(Normalizer\).*pickle"):
        skxmc.save(pipe, target)
    pipe = make_pipeline(
        TfidfVectorizer(tokenizer=str.split, token_pattern=None), XRLinearClassifier()
    )
    pipe.fit(texts[:200], labels[:200])
    with pytest.raises(TypeError, match="step 'tfidfvectorizer'.*callables are code"):
        skxmc.save(pipe, target)
    with pytest.raises(TypeError, match="LogisticRegression does not support save"):
        skxmc.save(LogisticRegression(), target)
    with pytest.raises(ValueError, match="not fitted"):
        skxmc.save(make_pipeline(TfidfVectorizer(), XRLinearClassifier()), target)
    assert not target.exists() and not list(tmp_path.glob(".m*"))


def test_save_pipeline_never_clobbers_user_files(quick_start, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="holds no skxmc model"):
        skxmc.save(quick_start, folder, overwrite=True)
    assert (folder / "notes.txt").read_text() == "precious"
    target = skxmc.save(quick_start, tmp_path / "model")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        skxmc.save(quick_start, target)
    skxmc.save(quick_start, target, overwrite=True)
    assert isinstance(skxmc.load(target), Pipeline)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "model"]


def test_models_are_written_with_the_lowest_format_version(quick_start, tmp_path):
    # Older skxmc releases read version 1 only: a lone estimator without string arrays is
    # still written as version 1; pipelines need 2, string labels (bytes + offsets) 3.
    def version(path):
        return json.loads((path / "skxmc-model.json").read_text(encoding="utf-8"))["format_version"]

    ranker = quick_start[-1]
    assert version(ranker.save(tmp_path / "ranker")) == 3  # its labels are strings
    X = quick_start[0].transform(["red apple", "green apple", "red car", "fast car"])
    numeric = skxmc.XRLinearClassifier().fit(X, [[0], [0], [1], [1]])
    assert version(numeric.save(tmp_path / "numeric")) == 1
    assert version(skxmc.save(quick_start, tmp_path / "pipe")) == 3


def test_load_refuses_parts_outside_the_model_directory(tmp_path):
    from skxmc.io._codec import instantiate

    spec = {"__estimator__": "XRLinearClassifier", "params": {"__dict__": {}}, "files": "../x"}
    with pytest.raises(ValueError, match="invalid part"):
        instantiate(spec, {}, tmp_path)


# -- permissions --------------------------------------------------------------------------------


def _modes(root: Path) -> dict[str, int]:
    modes = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        modes[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return modes


@pytest.mark.parametrize(
    ("umask", "dir_mode", "file_mode"), [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)]
)
def test_saved_files_follow_the_umask(quick_start, tmp_path, umask, dir_mode, file_mode):
    previous = os.umask(umask)
    try:
        pipe_dir = skxmc.save(quick_start, tmp_path / "pipe")
        ranker_dir = quick_start[-1].save(tmp_path / "ranker")
        skxmc.save(quick_start, pipe_dir, overwrite=True)
    finally:
        os.umask(previous)
    for root in (pipe_dir, ranker_dir):
        modes = _modes(root)
        assert modes["."] == dir_mode
        assert modes["skxmc-model.json"] == modes["arrays.npz"] == file_mode, modes
