"""Checkpoints of one fit are never resumed by another (issue 21; review B11, B12, cat. 7).

A checkpoint's fingerprint holds the estimator's parameters and a hash of the training
data: a reused ``checkpoint_dir`` (another data set, the folds of a cross-validation) trains
afresh instead of returning the old model, and an interrupted fit resumes to exactly the
model of an uninterrupted one, also after ``kill -9``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold, cross_validate

from skxmc.exceptions import TrainingInterruptedWarning
from skxmc.sharprecl import SharpReCLClassifier
from skxmc.snm import SNMClassifier
from skxmc.text._checkpoint import data_fingerprint, params_fingerprint
from skxmc.text._tokenize import TokenizedTexts
from skxmc.text._training import CheckpointMismatchWarning

from .._helpers import ROOT, with_training
from .._helpers import make_sharprecl as make_clf
from .._helpers import sharprecl_toy_data as toy_data
from ..matchxml.test_classifier import make_clf as make_matchxml
from ..matchxml.test_classifier import multilabel_texts

torch.set_num_threads(1)


def case(name: str) -> pytest.MarkDecorator:
    """One named case, its pytest id prefixed with the review category."""
    return pytest.mark.parametrize("case", [name], ids=[f"7-interrupt-{name}"])


def rotated(y: np.ndarray) -> np.ndarray:
    """Every class renamed to the next one: same size and balance, other labels."""
    classes = np.unique(y)
    return classes[(np.searchsorted(classes, y) + 1) % len(classes)]


def state(clf) -> dict[str, torch.Tensor]:
    module = getattr(clf, "matcher_", clf).module_  # MatchXML's encoder is its matcher's
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def differs(a: dict, b: dict) -> bool:
    return any(not torch.equal(a[k], b[k]) for k in a)


def interrupt_at(monkeypatch, cls, call: int) -> None:
    """Ctrl-C inside the ``call``-th training step, after its forward pass (which already
    moved the BatchNorm statistics)."""
    original = cls._step
    calls = {"n": 0}

    def step(self, batch, task):
        calls["n"] += 1
        out = original(self, batch, task)
        if calls["n"] == call:
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(cls, "_step", step)


# The data fingerprint ---------------------------------------------------------------------


@case("data-fingerprint")
def test_data_fingerprint_sees_every_change(case):
    texts, y = toy_data()
    base = data_fingerprint(texts, y)
    assert base == data_fingerprint(list(texts), y.copy())
    assert base != data_fingerprint(texts, rotated(y))
    assert base != data_fingerprint(texts[::-1], y[::-1])
    assert base != data_fingerprint([*texts[:-1], texts[-1] + "!"], y)
    # Where one text ends matters, not only the concatenation.
    assert data_fingerprint(["ab", "c"]) != data_fingerprint(["a", "bc"])
    assert data_fingerprint([("a", "b")]) != data_fingerprint(["a", "b"])
    X = sp.random(30, 20, density=0.2, format="csr", random_state=0, dtype=np.float32)
    assert data_fingerprint(X) == data_fingerprint(X.tocoo())  # canonical CSR either way
    halves = sp.csr_matrix(
        (np.repeat(X.data / 2, 2), np.repeat(X.indices, 2), X.indptr * 2), shape=X.shape
    )
    assert data_fingerprint(halves) == data_fingerprint(X)  # duplicates summed
    X2 = X.copy()
    X2.data[0] += 1e-6
    assert data_fingerprint(X2) != data_fingerprint(X)
    assert data_fingerprint(X.toarray()) != data_fingerprint(X.toarray().astype(np.float64))
    tok = TokenizedTexts(np.array([2, 7, 3, 2, 8, 3]), np.array([0, 3, 6]))
    tok2 = TokenizedTexts(np.array([2, 7, 3, 2, 9, 3]), np.array([0, 3, 6]))
    assert data_fingerprint(tok) != data_fingerprint(tok2)
    with pytest.raises(TypeError, match="cannot hash a object"):
        data_fingerprint(object())


@case("params-fingerprint")
def test_params_fingerprint_keeps_non_scalar_parameters(case, tiny_bert_dir):
    a = params_fingerprint(make_clf(tiny_bert_dir, augmentation=rotated))
    b = params_fingerprint(make_clf(tiny_bert_dir, augmentation=toy_data))
    assert a["augmentation"] != b["augmentation"]
    assert "checkpoint_dir" not in a and "verbose" not in a and "device" not in a
    assert a["encoder"] == str(tiny_bert_dir)
    assert params_fingerprint(make_clf(tiny_bert_dir, encoder=Path(tiny_bert_dir)))[
        "encoder"
    ] == str(tiny_bert_dir)


# B11, B12: a checkpoint of another fit is not reused ---------------------------------------


@case("cross-validate-folds")
def test_cross_validate_folds_train_their_own_models(case, tiny_bert_dir, tmp_path):
    X, y = toy_data()
    clf = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path / "ckpt")
    with pytest.warns(CheckpointMismatchWarning, match="training data") as record:
        cv = cross_validate(clf, X, y, cv=3, return_estimator=True, error_score="raise")
    mismatches = [w for w in record if issubclass(w.category, CheckpointMismatchWarning)]
    assert len(mismatches) == 2  # folds 2 and 3 replace the previous fold's checkpoint
    assert str(tmp_path / "ckpt") in str(mismatches[0].message)
    states = [state(est) for est in cv["estimator"]]
    assert differs(states[0], states[1]) and differs(states[1], states[2])
    texts = np.asarray(X, dtype=object)
    for (train, _), fold_state in zip(StratifiedKFold(3).split(X, y), states):
        alone = (
            clone(clf)
            .set_params(training__checkpoint_dir=None)
            .fit(texts[train].tolist(), y[train])
        )
        assert_same_state(fold_state, state(alone))


@case("refit-other-labels")
def test_refit_on_other_labels_returns_the_new_model(case, tiny_bert_dir, tmp_path):
    X, y = toy_data()
    y_b = rotated(y)
    make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    with pytest.warns(CheckpointMismatchWarning, match="finished checkpoint of another fit"):
        b = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y_b)
    fresh = make_clf(tiny_bert_dir).fit(X, y_b)
    assert_same_state(state(b), state(fresh))
    np.testing.assert_array_equal(b.predict(X), fresh.predict(X))
    assert b.n_steps_ == fresh.n_steps_ and b.loss_curve_ == fresh.loss_curve_


@case("refit-same-data")
def test_finished_checkpoint_of_the_same_fit_is_reused(case, tiny_bert_dir, tmp_path, monkeypatch):
    X, y = toy_data()
    first = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)

    def no_training(self, batch, task):
        raise AssertionError("the finished checkpoint should have been reused")

    monkeypatch.setattr(SharpReCLClassifier, "_step", no_training)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointMismatchWarning)
        again = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path, verbose=0).fit(X, y)
    assert_same_state(state(again), state(first))
    assert again.loss_curve_ == first.loss_curve_


@case("refit-other-params")
def test_other_parameters_do_not_reuse_a_finished_checkpoint(case, tiny_bert_dir, tmp_path):
    X, y = toy_data()
    make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    with pytest.warns(CheckpointMismatchWarning, match="head_learning_rate"):
        b = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path, head_learning_rate=1e-2).fit(X, y)
    assert_same_state(state(b), state(make_clf(tiny_bert_dir, head_learning_rate=1e-2).fit(X, y)))


@case("unfinished-other-fit")
def test_unfinished_checkpoint_of_another_fit_is_kept(case, tiny_bert_dir, tmp_path, monkeypatch):
    X, y = toy_data()
    with monkeypatch.context() as m:
        interrupt_at(m, SharpReCLClassifier, call=3)
        with pytest.warns(TrainingInterruptedWarning):
            make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    msg = f"checkpoint_dir {tmp_path} holds the unfinished checkpoint of another fit"
    with pytest.raises(ValueError, match="differs in the training data") as err:
        make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, rotated(y))
    assert msg in str(err.value) and "pass another checkpoint_dir" in str(err.value)
    # Refused without touching it: the interrupted fit still resumes.
    resumed = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    assert_same_state(state(resumed), state(make_clf(tiny_bert_dir).fit(X, y)))


@case("unseeded-resume")
def test_unseeded_interrupted_fit_says_how_to_resume(case, tiny_bert_dir, tmp_path, monkeypatch):
    X, y = toy_data()
    with monkeypatch.context() as m:
        interrupt_at(m, SharpReCLClassifier, call=2)
        with pytest.warns(TrainingInterruptedWarning):
            make_clf(tiny_bert_dir, checkpoint_dir=tmp_path, random_state=None).fit(X, y)
    with pytest.raises(ValueError, match="set an int random_state"):
        make_clf(tiny_bert_dir, checkpoint_dir=tmp_path, random_state=None).fit(X, y)


@pytest.mark.parametrize("call", [2, 4, 5])
@case("ctrl-c-mid-step-batchnorm")
def test_ctrl_c_mid_step_resumes_bit_identically(case, call, tiny_bert_dir, tmp_path, monkeypatch):
    # The interrupted step's forward pass already updated the projection head's BatchNorm
    # statistics; the checkpoint must hold those of the last completed step, or the
    # redone step counts them twice (num_batches_tracked off by one).
    X, y = toy_data()
    full = make_clf(tiny_bert_dir).fit(X, y)
    with monkeypatch.context() as m:
        interrupt_at(m, SharpReCLClassifier, call=call)
        with pytest.warns(TrainingInterruptedWarning):
            part = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    assert part.interrupted_ and part.n_steps_ == call - 1
    resumed = make_clf(tiny_bert_dir, checkpoint_dir=tmp_path).fit(X, y)
    assert not resumed.interrupted_
    assert_same_state(state(resumed), state(full))
    np.testing.assert_array_equal(resumed.predict_proba(X), full.predict_proba(X))


# The other estimators ----------------------------------------------------------------------


@case("snm-refit-other-labels")
def test_snm_refit_on_other_labels(case, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(96, 10)).astype(np.float32)
    labels = np.array([int(x[0] > 0) + 2 * int(x[1] > 0) for x in X])
    params = dict(hidden_size=16, embedding_size=8, max_epochs=3, batch_size=32, n_sampled=2)
    params.update(device="cpu", random_state=0)
    SNMClassifier(**with_training(**params, checkpoint_dir=tmp_path)).fit(
        X, labels[:, None].tolist()
    )
    other = rotated(labels)[:, None].tolist()
    with pytest.warns(CheckpointMismatchWarning, match="training data"):
        b = SNMClassifier(**with_training(**params, checkpoint_dir=tmp_path)).fit(X, other)
    fresh = SNMClassifier(**with_training(**params)).fit(X, other)
    assert_same_state(state(b), state(fresh))
    # Sparse input: the same values as CSR are other data (another first layer).
    with pytest.warns(CheckpointMismatchWarning):
        SNMClassifier(**with_training(**params, checkpoint_dir=tmp_path)).fit(
            sp.csr_matrix(X), other
        )


@case("matchxml-refit-other-labels")
@pytest.mark.slow  # two MatchXML fits: 7-14 s on 2 busy cores
def test_matchxml_stages_refit_on_other_labels(case, tiny_bert_dir, tmp_path):
    X, Y = multilabel_texts(24)
    names = sorted({label for row in Y for label in row})
    rename = dict(zip(names, names[1:] + names[:1]))
    Y_b = [[rename[label] for label in row] for row in Y]
    make_matchxml(tiny_bert_dir, max_epochs=1, checkpoint_dir=tmp_path).fit(X, Y)
    with pytest.warns(CheckpointMismatchWarning, match="differs in the training data") as rec:
        b = make_matchxml(tiny_bert_dir, max_epochs=1, checkpoint_dir=tmp_path).fit(X, Y_b)
    # one warning per stage whose training data differs: here the top layer's targets
    # (two clusters) are the same for both label names and its checkpoint is rightly
    # reused, the stages below differ
    warned = sorted(str(w.message).split()[1] for w in rec)
    assert warned == [str(tmp_path / "stage1"), str(tmp_path / "stage2")]
    fresh = make_matchxml(tiny_bert_dir, max_epochs=1).fit(X, Y_b)
    # The reused top stage hands its restored weights to the next stages: the same model
    # as a fresh fit up to float32 rounding (under pytest the later stages' losses differ
    # in the 7th digit; a plain script gives bitwise equality; the cause is not known)
    got, want = state(b), state(fresh)
    assert got.keys() == want.keys()
    for name in got:
        torch.testing.assert_close(got[name], want[name], rtol=1e-3, atol=1e-4)
    assert np.array_equal(b.predict_topk(X, k=2)[0], fresh.predict_topk(X, k=2)[0])


# kill -9 and resume in a new process ------------------------------------------------------

_CHILD = """
import os, sys
os.environ["OMP_NUM_THREADS"] = "1"
import functools
import numpy as np
import torch
torch.set_num_threads(1)
import skxmc.text._classifier as base
from skxmc.sharprecl import SharpReCLClassifier
from skxmc.text import TrainingConfig
from tests._helpers import topic_texts

encoder, checkpoint_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
if checkpoint_dir != "-":
    # Checkpoints every 2 steps, so that kills land mid-epoch as well as at epoch ends.
    base.Trainer = functools.partial(base.Trainer, checkpoint_every=2)
original = SharpReCLClassifier._step

def step(self, batch, task):
    print("step", flush=True)
    return original(self, batch, task)

SharpReCLClassifier._step = step
X, y = topic_texts((12, 6, 3), 0)
training = TrainingConfig(
    batch_size=8, max_epochs=4, head_learning_rate=3e-2, learning_rate=3e-3,
    checkpoint_dir=None if checkpoint_dir == "-" else checkpoint_dir,
)
clf = SharpReCLClassifier(
    encoder=encoder, pooling="mean", max_length=16, n_synthetic_negative=20,
    n_synthetic_positive=4, n_hard=4, projection_dim=16, random_state=0, training=training,
).fit(X, y)
arrays = {"w/" + k: v.cpu().numpy() for k, v in clf.module_.state_dict().items()}
np.savez(out, proba=clf.predict_proba(X), n_steps=clf.n_steps_, **arrays)
print("done", flush=True)
"""


@case("kill-9-resume")
@pytest.mark.slow
def test_kill_9_then_resume_in_a_new_process(case, tiny_bert_dir, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(_CHILD), encoding="utf-8")
    root = ROOT
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}

    def run(checkpoint_dir: str, out: Path, kill_after: int | None) -> int | None:
        """Run the child; kill -9 it at its ``kill_after``-th step. The number of steps it
        ran when it finished, None when killed."""
        cmd = [sys.executable, str(script), str(tiny_bert_dir), checkpoint_dir, str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=root)
        steps = 0
        try:
            for line in proc.stdout:
                steps += line.startswith("step")
                if kill_after is not None and steps >= kill_after:
                    proc.kill()  # SIGKILL: no handler runs, no last checkpoint is written
                    break
        finally:
            proc.stdout.close()
            rc = proc.wait(timeout=120)
        return steps if rc == 0 else None

    reference = tmp_path / "reference.npz"
    total = run("-", reference, None)
    assert total == 12  # 4 epochs of 3 batches
    rng = np.random.default_rng()
    checkpoint_dir, out = tmp_path / "ckpt", tmp_path / "resumed.npz"
    kills = 0
    for _ in range(3):  # kill at a random step (killing a save at times), resume, ...
        if run(str(checkpoint_dir), out, int(rng.integers(3, 8))) is not None:
            break
        kills += 1
    else:
        last = run(str(checkpoint_dir), out, None)
        assert last is not None and last < total  # the last run resumed
    assert kills >= 1
    want, got = np.load(reference), np.load(out)
    assert set(want.files) == set(got.files)
    assert int(got["n_steps"]) == int(want["n_steps"]) == total
    np.testing.assert_array_equal(got["proba"], want["proba"])
    for name in want.files:  # every tensor, BatchNorm's num_batches_tracked included
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
