"""Tests for skxmc.label2vec: Label2VecTransformer (MatchXML's label2vec)."""

from __future__ import annotations

import doctest
import hashlib
import logging
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

import skxmc.label2vec as label2vec_module
from skxmc.io import load
from skxmc.label2vec import GENSIM_LOGGER_NAME, Label2VecTransformer

ROOT = Path(__file__).resolve().parents[1]
FAST = {"vector_size": 16, "epochs": 5}


def _topics(n_per_topic: int = 80, n_labels: int = 20, seed: int = 0) -> list[list[str]]:
    """Labels t0..t9 only co-occur among themselves, and so do t10..t19."""
    rng = np.random.RandomState(seed)
    half = n_labels // 2
    rows = []
    for topic in (0, 1):
        for _ in range(n_per_topic):
            k = rng.randint(2, 5)
            rows.append([f"t{topic * half + j:02d}" for j in rng.choice(half, k, replace=False)])
    order = rng.permutation(len(rows))
    return [rows[i] for i in order]


def _as_csr(rows: list[list[str]], classes: np.ndarray) -> sp.csr_matrix:
    index = {c: i for i, c in enumerate(classes.tolist())}
    Y = sp.lil_matrix((len(rows), len(classes)), dtype=np.float32)
    for i, row in enumerate(rows):
        Y[i, [index[c] for c in row]] = 1
    return Y.tocsr()


def test_fit_attributes_and_co_occurrence_structure():
    Y = _topics()
    l2v = Label2VecTransformer(**FAST).fit(Y)
    assert l2v.classes_.tolist() == [f"t{j:02d}" for j in range(20)]
    E = l2v.embeddings_
    assert E.shape == (20, 16) and E.dtype == np.float32 and E.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, rtol=1e-5)
    assert l2v.unseen_labels_.size == 0 and l2v.n_epochs_ == 5
    assert l2v.window_ == 4  # the largest label set
    S = E @ E.T
    topic = np.arange(20) < 10
    same = topic[:, None] == topic[None, :]
    across = ~same
    np.fill_diagonal(same, False)
    assert S[same].min() > S[across].max()


def test_reproducible_for_a_seed_with_one_worker():
    Y = _topics()
    a = Label2VecTransformer(**FAST, random_state=3).fit(Y).embeddings_
    b = Label2VecTransformer(**FAST, random_state=3).fit(Y).embeddings_
    c = Label2VecTransformer(**FAST, random_state=4).fit(Y).embeddings_
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # Shuffling is seeded too, and it changes the training (order of the updates).
    s1 = Label2VecTransformer(**FAST, random_state=3, shuffle=True).fit(Y).embeddings_
    s2 = Label2VecTransformer(**FAST, random_state=3, shuffle=True).fit(Y).embeddings_
    np.testing.assert_array_equal(s1, s2)
    assert not np.array_equal(s1, a)
    # A RandomState instance is accepted.
    rs = np.random.RandomState(0)
    assert Label2VecTransformer(**FAST, random_state=rs).fit(Y).embeddings_.shape == (20, 16)


_DIGEST_SCRIPT = """
import hashlib, sys
sys.path.insert(0, {root!r})
from tests.test_label2vec import _topics
from skxmc.label2vec import Label2VecTransformer
E = Label2VecTransformer(vector_size=8, epochs=2, shuffle=True).fit(_topics()).embeddings_
print(hashlib.sha256(E.tobytes()).hexdigest())
"""


def test_reproducible_across_interpreters_whatever_pythonhashseed():
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST_SCRIPT.format(root=str(ROOT))],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        digests.add(out.stdout.strip())
    here = Label2VecTransformer(vector_size=8, epochs=2, shuffle=True).fit(_topics())
    digests.add(hashlib.sha256(here.embeddings_.tobytes()).hexdigest())
    assert len(digests) == 1


def test_label_formats_give_the_same_embeddings():
    rows = _topics()
    ref = Label2VecTransformer(**FAST).fit(rows)
    Y = _as_csr(rows, ref.classes_)
    for Y_in in (Y, Y.toarray(), Y.astype(np.int64), sp.csr_array(Y)):
        other = Label2VecTransformer(**FAST).fit(Y_in)
        np.testing.assert_array_equal(other.classes_, np.arange(20))
        np.testing.assert_array_equal(other.embeddings_, ref.embeddings_)
    # tuples / sets per row, integer labels
    as_ints = [[int(c[1:]) for c in row] for row in rows]
    ints = Label2VecTransformer(**FAST).fit([tuple(r) for r in as_ints])
    np.testing.assert_array_equal(ints.classes_, np.arange(20))
    np.testing.assert_array_equal(ints.embeddings_, ref.embeddings_)


def test_unseen_labels_get_zero_rows():
    rows = _topics()
    classes = np.array([f"t{j:02d}" for j in range(20)])
    Y = sp.hstack([_as_csr(rows, classes), sp.csr_matrix((len(rows), 3))], format="csr")
    l2v = Label2VecTransformer(**FAST).fit(Y)  # a label space wider than the labels seen
    assert l2v.embeddings_.shape == (23, 16)
    np.testing.assert_array_equal(l2v.unseen_labels_, [20, 21, 22])
    assert not l2v.embeddings_[20:].any()
    # Labels below min_count get no vector either.
    rare = [["a", "b"], ["a", "b"], ["a", "c"]]
    l2v = Label2VecTransformer(**FAST, min_count=2).fit(rare)
    assert l2v.unseen_labels_.tolist() == ["c"] and not l2v.embeddings_[2].any()
    with pytest.raises(ValueError, match="min_count=5"):
        Label2VecTransformer(**FAST, min_count=5).fit(rare)


def test_single_label_instances_and_a_single_label():
    # No instance has two labels: no training pair, the vectors stay at their random
    # initial values (normalised), whatever the number of epochs.
    one_each = [["a"], ["b"], ["c"], ["a"]]
    short = Label2VecTransformer(vector_size=8, epochs=1).fit(one_each)
    long = Label2VecTransformer(vector_size=8, epochs=7).fit(one_each)
    np.testing.assert_allclose(np.linalg.norm(short.embeddings_, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(short.embeddings_, long.embeddings_)
    assert short.window_ == 1
    # A 1-D numeric target is one label per sample (a 1-D one of strings looks like texts).
    target = Label2VecTransformer(vector_size=8, epochs=1).fit(np.array([0, 1, 2, 0]))
    np.testing.assert_array_equal(target.embeddings_, short.embeddings_)
    # A label set with one label.
    single = Label2VecTransformer(vector_size=8).fit([["x"], ["x"], []])
    assert single.classes_.tolist() == ["x"] and single.embeddings_.shape == (1, 8)
    np.testing.assert_allclose(np.linalg.norm(single.embeddings_), 1.0, rtol=1e-5)
    np.testing.assert_allclose(single.transform([["x"], []]), [single.embeddings_[0], np.zeros(8)])


@pytest.mark.parametrize(
    "param",
    [
        {"window": 1},
        {"shrink_windows": True},
        {"shuffle": True},
        {"negative": 3},
        {"ns_exponent": -0.5},
        {"sample": 1e-3},
        {"alpha": 0.05},
        {"min_alpha": 0.01},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()),
)
def test_each_gensim_parameter_reaches_gensim_and_changes_the_embeddings(param, monkeypatch):
    """A parameter that were dropped on its way to gensim would leave the model's setting
    at the default and the embeddings equal to the default fit's (same seed, one worker:
    reproducible, see above)."""
    Y = _topics()
    models = []
    original = Label2VecTransformer._word2vec

    def spy(self, Word2Vec, **kwargs):
        models.append(original(self, Word2Vec, **kwargs))
        return models[-1]

    monkeypatch.setattr(Label2VecTransformer, "_word2vec", spy)
    base = Label2VecTransformer(**FAST, n_jobs=1).fit(Y)
    l2v = Label2VecTransformer(**FAST, n_jobs=1, **param).fit(Y)
    ((name, value),) = param.items()
    if name != "shuffle":  # the corpus order: ours, not gensim's
        assert getattr(models[-1], name) == value and getattr(models[0], name) != value
    assert l2v.window_ == (1 if name == "window" else 4)
    assert np.abs(l2v.embeddings_ - base.embeddings_).max() > 1e-3
    assert np.isfinite(l2v.embeddings_).all()


def test_n_jobs_keeps_the_shape_and_the_structure():
    Y = _topics()
    l2v = Label2VecTransformer(**FAST, n_jobs=2).fit(Y)
    assert l2v.embeddings_.shape == (20, 16)
    topic = np.arange(20) < 10
    S = l2v.embeddings_ @ l2v.embeddings_.T
    same = topic[:, None] == topic[None, :]
    np.fill_diagonal(same, False)
    assert S[same].mean() > S[~(topic[:, None] == topic[None, :])].mean()


def test_transform_is_the_normalised_mean():
    Y = _topics()
    l2v = Label2VecTransformer(**FAST).fit(Y)
    E = l2v.embeddings_
    Z = l2v.transform([["t00", "t03"], ["t15"], [], ["t01", "unknown"]])
    assert Z.shape == (4, 16) and Z.dtype == np.float32
    mean = (E[0] + E[3]) / 2
    np.testing.assert_allclose(Z[0], mean / np.linalg.norm(mean), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Z[1], E[15], rtol=1e-5)
    assert not Z[2].any()
    np.testing.assert_allclose(Z[3], E[1], rtol=1e-5)  # unknown labels are ignored
    np.testing.assert_allclose(l2v.fit_transform(Y), l2v.transform(Y), rtol=1e-6)
    # a matrix over the fitted label space
    np.testing.assert_allclose(l2v.transform(_as_csr(Y, l2v.classes_)), l2v.transform(Y), rtol=1e-6)
    with pytest.raises(ValueError, match="20 labels"):
        l2v.transform(sp.csr_matrix((2, 5)))
    names = l2v.get_feature_names_out()
    assert names.tolist() == [f"label2vectransformer{i}" for i in range(16)]


def test_in_a_pipeline_as_a_feature():
    Y = _topics()
    pipe = make_pipeline(Label2VecTransformer(**FAST), FunctionTransformer(np.abs))
    assert pipe.fit_transform(Y).shape == (160, 16)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"vector_size": 0}, "'vector_size' parameter"),
        ({"window": 0}, "'window' parameter"),
        ({"window": 2.5}, "'window' parameter"),
        ({"negative": 0}, "'negative' parameter"),
        ({"epochs": 0}, "'epochs' parameter"),
        ({"alpha": 0}, "'alpha' parameter"),
        ({"sample": -1}, "'sample' parameter"),
        ({"min_count": 0}, "'min_count' parameter"),
        ({"shuffle": "yes"}, "'shuffle' parameter"),
        ({"random_state": "seed"}, "'random_state' parameter"),
    ],
)
def test_bad_params(params, match):
    with pytest.raises(ValueError, match=match):
        Label2VecTransformer(**params).fit([["a", "b"]])


def test_input_errors():
    with pytest.raises(ValueError, match="no positive labels"):
        Label2VecTransformer().fit([[], []])
    with pytest.raises(ValueError, match="no positive labels"):
        Label2VecTransformer().fit(sp.csr_matrix((3, 4)))
    with pytest.raises(ValueError, match="binary"):
        Label2VecTransformer().fit(np.array([[0.5, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="None"):
        Label2VecTransformer().fit(None)
    with pytest.raises(NotFittedError):
        Label2VecTransformer().transform([["a"]])


def test_clone_pickle_and_save_load(tmp_path):
    Y = _topics()
    l2v = Label2VecTransformer(**FAST, random_state=7).fit(Y)
    cloned = clone(l2v)
    assert cloned.get_params() == l2v.get_params() and not hasattr(cloned, "embeddings_")
    np.testing.assert_array_equal(cloned.fit(Y).embeddings_, l2v.embeddings_)
    for restored in (pickle.loads(pickle.dumps(l2v)), load(l2v.save(tmp_path / "l2v"))):
        assert type(restored) is Label2VecTransformer
        assert restored.get_params() == l2v.get_params()
        for name in ("classes_", "embeddings_", "unseen_labels_"):
            np.testing.assert_array_equal(getattr(restored, name), getattr(l2v, name))
        assert (restored.window_, restored.n_epochs_) == (l2v.window_, l2v.n_epochs_)
        np.testing.assert_array_equal(restored.transform(Y[:5]), l2v.transform(Y[:5]))


def test_tags_describe_label_input():
    tags = Label2VecTransformer().__sklearn_tags__()
    assert not tags.input_tags.two_d_array and tags.input_tags.sparse
    assert tags.target_tags.two_d_labels and tags.target_tags.one_d_labels
    assert not tags.target_tags.required and tags.requires_fit


def test_verbose_progress_and_gensim_logging(caplog, capsys):
    gensim_logger = logging.getLogger("gensim")
    before = (gensim_logger.level, gensim_logger.propagate, list(gensim_logger.handlers))
    with caplog.at_level(logging.DEBUG, logger="skxmc"):
        Label2VecTransformer(**FAST).fit(_topics())
    # verbose=0: nothing printed, nothing at INFO or above (the summary is a DEBUG record)
    assert capsys.readouterr().out == ""
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="skxmc"):
        Label2VecTransformer(**FAST, verbose=1).fit(_topics())
    assert "label2vec: 20 labels" in capsys.readouterr().out  # verbose=1 prints
    summary = [r for r in caplog.records if r.name == "skxmc.label2vec"]
    assert summary and "label2vec: 20 labels" in summary[0].getMessage()
    assert not [r for r in caplog.records if r.name == GENSIM_LOGGER_NAME]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="skxmc"):
        Label2VecTransformer(**FAST, verbose=2).fit(_topics())
    routed = [r for r in caplog.records if r.name == GENSIM_LOGGER_NAME]
    assert routed and any("EPOCH" in r.getMessage() for r in routed)
    assert not [r for r in caplog.records if r.name.startswith("gensim")]
    # gensim's logger is left as it was.
    assert (gensim_logger.level, gensim_logger.propagate, list(gensim_logger.handlers)) == before


def test_gensim_warnings_are_routed_at_verbose_0(caplog):
    gensim_logger = logging.getLogger("gensim")
    stop = label2vec_module.threading.Event()
    with caplog.at_level(logging.INFO, logger="skxmc"):
        with label2vec_module._gensim_logging_routed(0, stop):
            gensim_logger.info("chatty")
            gensim_logger.warning("something odd")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (GENSIM_LOGGER_NAME, "something odd")
    ]


def test_ctrl_c_stops_training_and_keeps_a_usable_model(monkeypatch):
    calls = []

    def interrupt_once(thread):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        thread.join(0.1)

    monkeypatch.setattr(label2vec_module, "_join", interrupt_once)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        l2v = Label2VecTransformer(vector_size=8, epochs=50).fit(_topics(n_per_topic=2000))
    assert any("interrupted" in str(w.message) for w in caught)
    assert l2v.n_epochs_ < 50
    assert l2v.embeddings_.shape == (20, 8) and np.isfinite(l2v.embeddings_).all()


def test_long_sentences_warn_at_the_caller(monkeypatch):
    monkeypatch.setattr(label2vec_module, "_MAX_SENTENCE_LENGTH", 3)
    with pytest.warns(UserWarning, match="gensim trains on the first 3 labels") as caught:
        Label2VecTransformer(vector_size=8, epochs=1).fit(_topics())
    assert caught[0].filename == __file__


def test_fit_checks_run_before_gensim_is_needed(monkeypatch):
    def missing(*args, **kwargs):
        raise ImportError("no gensim")

    monkeypatch.setattr(label2vec_module, "require", missing)
    with pytest.raises(ValueError, match="label sets as y"):
        Label2VecTransformer().fit(_topics(), [["a"]] * 160)
    with pytest.raises(ValueError, match="bare strings"):
        Label2VecTransformer().fit(["a text", "another"])
    with pytest.raises(ImportError, match="no gensim"):
        Label2VecTransformer().fit(_topics())


def test_errors_in_gensim_reach_the_caller(monkeypatch):
    from gensim.models import Word2Vec

    def broken(self, *args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(Word2Vec, "train", broken)
    with pytest.raises(RuntimeError, match="boom"):
        Label2VecTransformer(**FAST).fit(_topics())


def test_docstring_examples():
    result = doctest.testmod(label2vec_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.slow
def test_gallery_example_runs(tmp_path):
    pytest.importorskip("matplotlib")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plot_label2vec_projection.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "leaf clusters" in proc.stdout


def test_texts_and_label_sets_as_y_are_rejected():
    texts = ["the cat sat on the mat", "stock market news", "a football game"]
    Y = [["pet", "animal"], ["economy"], ["sport", "game"]]
    # The user's call: a text pipeline fitted on texts and label sets.
    with pytest.raises(ValueError, match="got label sets as y.*fit it on the labels"):
        make_pipeline(Label2VecTransformer(**FAST)).fit(texts, Y)
    with pytest.raises(ValueError, match="got label sets as y"):
        Label2VecTransformer(**FAST).fit(Y, Y)
    with pytest.raises(ValueError, match="got label sets as y"):
        Label2VecTransformer(**FAST).fit(Y, sp.csr_matrix(np.eye(3)))
    # Texts as Y, with or without y, as a list, array or pandas Series.
    for X in (texts, np.array(texts), np.array(texts, dtype=object)):
        with pytest.raises(ValueError, match=r"Y holds bare strings \(Y\[0\] = 'the cat"):
            Label2VecTransformer(**FAST).fit(X)
    with pytest.raises(ValueError, match="bare strings"):
        make_pipeline(Label2VecTransformer(**FAST)).fit(texts, ["a", "b", "c"])
    l2v = Label2VecTransformer(**FAST).fit(Y)
    with pytest.raises(ValueError, match="bare strings"):
        l2v.transform(texts)
    # A 1-D target y (what pipelines pass to every step) is ignored, as documented.
    with_y = Label2VecTransformer(**FAST).fit(Y, np.array(["x", "y", "x"]))
    np.testing.assert_array_equal(with_y.embeddings_, l2v.embeddings_)
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="bare strings"):
        Label2VecTransformer(**FAST).fit(pd.Series(texts))
    with pytest.raises(ValueError, match="got label sets as y"):
        Label2VecTransformer(**FAST).fit(Y, pd.Series(Y))


def test_a_generator_of_label_sets_is_read_once():
    # word2vec needs several epochs over all the label sets: a generator is read once
    # into memory and gives the list's vectors
    rows = [["a", "b"], ["b", "c"], ["a", "c", "d"]] * 20
    kw = dict(vector_size=8, random_state=0, n_jobs=1)
    a = Label2VecTransformer(**kw).fit(rows)
    b = Label2VecTransformer(**kw).fit(iter(rows))
    np.testing.assert_array_equal(a.embeddings_, b.embeddings_)
