"""Damaged, crafted or incomplete model directories (category 6 of the reliability review):
``skxmc.load`` raises an error naming the file or parameter, never loads a different model
and never crashes; ``save(overwrite=True)`` never deletes a user's file and survives
``kill -9``.

Each row of ``LOAD_CASES`` edits a freshly saved model directory and states the error. Rows
marked ``refresh`` rewrite the file list in ``skxmc-model.json`` after the edit, as someone
crafting a directory would, so that the checks behind the list are what must catch it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

import skxmc
from skxmc.datasets import load_demo
from skxmc.io import ARRAYS_NAME, CONFIG_NAME, MANIFEST_KEY
from skxmc.io._arrays import decode_strings, encode_strings
from skxmc.io._format import build_manifest
from skxmc.text import TrainingConfig

from .._helpers import topic_texts

W0 = "model.attributes.weights_.0"
CLASSES = "model.arrays.classes_"
# String labels are stored as UTF-8 bytes plus offsets (issue 48 item 17).
CLASS_OFFSETS = f"{CLASSES}.offsets"


@pytest.fixture(scope="module")
def xrl():
    """A small fitted XRLinearClassifier, its test matrix and its saved directory."""
    demo = load_demo()
    vectorizer = TfidfVectorizer(max_features=500).fit(demo.train_texts[:300])
    X = vectorizer.transform(demo.train_texts[:300])
    clf = skxmc.XRLinearClassifier().fit(X, demo.train_labels[:300])
    return clf, vectorizer.transform(demo.test_texts[:20])


@pytest.fixture(scope="module")
def sharp(tiny_bert_dir):
    """A tiny fitted neural classifier (encoder/ folder with tokenizer files)."""
    from skxmc.sharprecl import SharpReCLClassifier

    X, y = topic_texts((12, 6, 3), 0)
    clf = SharpReCLClassifier(
        encoder=str(tiny_bert_dir),
        pooling="mean",
        max_length=16,
        n_synthetic_negative=20,
        n_synthetic_positive=4,
        n_hard=4,
        projection_dim=16,
        training=TrainingConfig(batch_size=8, max_epochs=1, random_state=0),
    )
    return clf.fit(X, y), X


# -- editing a saved directory -------------------------------------------------------------


def _config(d: Path) -> dict:
    return json.loads((d / CONFIG_NAME).read_text(encoding="utf-8"))


def _write_config(d: Path, config: dict) -> None:
    (d / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")


def _refresh_manifest(d: Path) -> None:
    config = _config(d)
    config[MANIFEST_KEY] = build_manifest(d)
    _write_config(d, config)


def _edit_npz(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        with np.load(d / ARRAYS_NAME) as npz:
            arrays = {k: npz[k] for k in npz.files}
        edit(arrays)
        np.savez(d / ARRAYS_NAME, **arrays)

    return apply


def _edit_json(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        config = _config(d)
        edit(config["model"])
        _write_config(d, config)

    return apply


def _edit_classes(edit: Callable[[list], list]) -> Callable[[Path], None]:
    """Rewrite the saved string labels (bytes, offsets and the shape in the JSON)."""

    def apply(d: Path) -> None:
        with np.load(d / ARRAYS_NAME) as npz:
            arrays = {k: npz[k] for k in npz.files}
        config = _config(d)
        ref = config["model"]["arrays"]["__dict__"]["classes_"]
        labels = edit(
            decode_strings(
                CLASSES, arrays[CLASS_OFFSETS], arrays[f"{CLASSES}.utf8"], ref["shape"], None
            ).tolist()
        )
        arrays[CLASS_OFFSETS], arrays[f"{CLASSES}.utf8"] = encode_strings(labels)
        ref["shape"] = [len(labels)]
        np.savez(d / ARRAYS_NAME, **arrays)
        _write_config(d, config)

    return apply


def _truncate(name: str, keep: Callable[[int], int]) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        data = (d / name).read_bytes()
        (d / name).write_bytes(data[: keep(len(data))])

    return apply


def _shift_indices(arrays: dict) -> None:
    arrays[f"{W0}.indices"] = arrays[f"{W0}.indices"] + 1000  # the review's B8 repro


def _unsort_indptr(arrays: dict) -> None:
    indptr = arrays[f"{W0}.indptr"].copy()
    indptr[1], indptr[2] = indptr[2], indptr[1]
    arrays[f"{W0}.indptr"] = indptr


def _set_param(name: str, value) -> Callable[[dict], None]:
    def edit(model: dict) -> None:
        model["params"]["__dict__"][name] = value

    return edit


def _weights(model: dict, t: int) -> dict:
    return model["attributes"]["__dict__"]["weights_"]["items"][t]


def _set_weight_shape(t: int, rows: int | None = None, cols: int | None = None):
    def edit(model: dict) -> None:
        shape = _weights(model, t)["shape"]
        _weights(model, t)["shape"] = [rows or shape[0], cols or shape[1]]

    return edit


def _all_weight_rows(rows: int) -> Callable[[dict], None]:
    def edit(model: dict) -> None:
        for item in model["attributes"]["__dict__"]["weights_"]["items"]:
            item["shape"][0] = rows

    return edit


def _foreign_weights(d: Path) -> None:
    import torch

    from skxmc.text._weights import save_module_weights

    save_module_weights(torch.nn.Linear(3, 2), d / "model.safetensors")


def _non_finite_weight(value: float) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        from safetensors.numpy import load_file, save_file

        tensors = load_file(d / "model.safetensors")
        name = sorted(k for k, v in tensors.items() if v.dtype.kind == "f")[-1]
        tensors[name] = tensors[name].copy()
        tensors[name].flat[0] = value
        save_file(tensors, d / "model.safetensors")

    return apply


def _drop_manifest_and(edit: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        edit(d)
        config = _config(d)
        del config[MANIFEST_KEY]
        _write_config(d, config)

    return apply


def _manifest_entry(name: str) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        config = _config(d)
        config[MANIFEST_KEY][name] = {"size": 1, "sha256": "0" * 64}
        _write_config(d, config)

    return apply


class Case(NamedTuple):
    id: str
    model: str  # "xrl" or "sharp"
    edit: Callable[[Path], None]
    refresh: bool  # rewrite the file list after the edit
    error: type[Exception]
    match: str  # the file, array or parameter the message must name


LOAD_CASES = [
    # 1. the file list: missing, changed or added files
    Case(
        "missing-tokenizer",
        "sharp",
        lambda d: (d / "encoder/tokenizer.json").unlink(),
        False,
        FileNotFoundError,
        r"encoder/tokenizer\.json",
    ),
    Case(
        "missing-tokenizer-no-manifest",
        "sharp",
        _drop_manifest_and(lambda d: (d / "encoder/tokenizer.json").unlink()),
        False,
        FileNotFoundError,
        r"encoder.*no tokenizer vocabulary",
    ),
    Case(
        "missing-arrays",
        "xrl",
        lambda d: (d / ARRAYS_NAME).unlink(),
        False,
        FileNotFoundError,
        r"arrays\.npz",
    ),
    Case(
        "changed-size",
        "xrl",
        _truncate(ARRAYS_NAME, lambda n: n - 10),
        False,
        ValueError,
        r"arrays\.npz has \d+ bytes",
    ),
    Case(
        "reversed-classes",
        "xrl",
        _edit_classes(lambda labels: labels[::-1]),
        False,
        ValueError,
        r"arrays\.npz is not the file that was saved",
    ),
    Case(
        "extra-vocab-in-encoder",
        "sharp",
        lambda d: (d / "encoder/vocab.txt").write_text("[PAD]\n[UNK]\n"),
        False,
        ValueError,
        r"encoder/vocab\.txt",
    ),
    Case(
        "manifest-escapes-dir",
        "xrl",
        _manifest_entry("../elsewhere"),
        False,
        ValueError,
        r"skxmc-model\.json.*'\.\./elsewhere'",
    ),
    # 2. sparse structure, checked before compiled code sees it
    Case(
        "indices-shift-1000",
        "xrl",
        _edit_npz(_shift_indices),
        True,
        ValueError,
        rf"{W0}.*arrays\.npz.*indices range",
    ),
    Case(
        "indptr-non-monotone",
        "xrl",
        _edit_npz(_unsort_indptr),
        True,
        ValueError,
        rf"{W0}.*arrays\.npz.*not monotone",
    ),
    Case(
        "indptr-truncated",
        "xrl",
        _edit_npz(lambda a: a.update({f"{W0}.indptr": a[f"{W0}.indptr"][:-3]})),
        True,
        ValueError,
        rf"{W0}.*arrays\.npz.*indptr has",
    ),
    Case(
        "weights-nan",
        "xrl",
        _edit_npz(lambda a: a[f"{W0}.data"].__setitem__(0, np.nan)),
        True,
        ValueError,
        rf"{W0}.*arrays\.npz.*NaN",
    ),
    # shapes and label count against the JSON
    Case(
        "weights-more-columns",
        "xrl",
        _edit_json(_set_weight_shape(1, cols=450)),
        False,
        ValueError,
        r"model\.attributes\.weights_\.1.*arrays\.npz",
    ),
    Case(
        "weights-rows-vs-n-features",
        "xrl",
        _edit_json(_all_weight_rows(700)),
        False,
        ValueError,
        r"skxmc-model\.json.*weights_\[0\].*n_features_in_",
    ),
    Case(
        "classes-shortened",
        "xrl",
        _edit_classes(lambda labels: labels[:-1]),
        True,
        ValueError,
        r"skxmc-model\.json.*classes_ has \d+ labels",
    ),
    # 4. unreadable files and unknown content
    Case(
        "npz-truncated-half",
        "xrl",
        _truncate(ARRAYS_NAME, lambda n: n // 2),
        True,
        ValueError,
        r"arrays\.npz",
    ),
    Case("npz-empty", "xrl", _truncate(ARRAYS_NAME, lambda n: 0), True, ValueError, r"arrays\.npz"),
    Case(
        "json-truncated",
        "xrl",
        _truncate(CONFIG_NAME, lambda n: n // 2),
        False,
        ValueError,
        r"skxmc-model\.json is not valid JSON",
    ),
    Case(
        "missing-array-key",
        "xrl",
        _edit_npz(lambda a: a.pop(CLASS_OFFSETS)),
        True,
        ValueError,
        rf"arrays\.npz has no array '{CLASS_OFFSETS}'",
    ),
    Case(
        "unknown-param",
        "xrl",
        _edit_json(_set_param("evil", 1)),
        False,
        ValueError,
        r"skxmc-model\.json sets unknown parameter.*'evil'",
    ),
    Case(
        "invalid-param",
        "xrl",
        _edit_json(_set_param("beam_size", -5)),
        False,
        ValueError,
        r"skxmc-model\.json.*beam_size",
    ),
    Case(
        "safetensors-truncated",
        "sharp",
        _truncate("model.safetensors", lambda n: n // 2),
        True,
        ValueError,
        r"model\.safetensors",
    ),
    Case(
        "foreign-state-dict",
        "sharp",
        _foreign_weights,
        True,
        RuntimeError,
        r"model\.safetensors.*do not fit",
    ),
    # issue 48 item 2: a diverged run's (or a crafted) NaN / inf weights
    Case(
        "safetensors-nan",
        "sharp",
        _non_finite_weight(float("nan")),
        True,
        ValueError,
        r"model\.safetensors: tensor '.+' holds NaN or infinite values",
    ),
    Case(
        "safetensors-inf",
        "sharp",
        _non_finite_weight(float("-inf")),
        True,
        ValueError,
        r"model\.safetensors: tensor '.+' holds NaN or infinite values",
    ),
]


@pytest.fixture
def saved(request, tmp_path, xrl):
    """``saved(kind)``: a fresh model directory of that kind and its reference output."""

    def make(kind: str):
        if kind == "xrl":
            clf, X = xrl
        else:
            clf, X = request.getfixturevalue("sharp")
        return clf.save(tmp_path / "model"), clf, X

    return make


@pytest.mark.parametrize("case", LOAD_CASES, ids=[f"6-persist-{c.id}" for c in LOAD_CASES])
def test_load_refuses_bad_model_dirs(case, saved):
    directory, _, _ = saved(case.model)
    case.edit(directory)
    if case.refresh:
        _refresh_manifest(directory)
    # A directory without the file list loads (trusted=True) with a warning, then fails on
    # what follows.
    old = case.id.endswith("no-manifest")
    with pytest.warns(UserWarning, match="lists no files") if old else nullcontext():
        with pytest.raises(case.error, match=case.match):
            skxmc.load(directory, trusted=old)


def test_6_persist_without_manifest_is_refused_unless_trusted(saved):
    # Issue 48 item 4: deleting "files" must not switch verification off silently.
    directory, clf, X = saved("xrl")
    config = _config(directory)
    del config[MANIFEST_KEY]
    _write_config(directory, config)
    _edit_classes(lambda labels: labels[::-1])(directory)
    with pytest.raises(ValueError, match=r"lists no files.*trusted=True"):
        skxmc.load(directory)
    with pytest.warns(UserWarning, match=r"skxmc-model\.json lists no files.*trusted=True"):
        loaded = skxmc.load(directory, trusted=True)
    assert loaded.predict_topk(X)[0].shape == clf.predict_topk(X)[0].shape


def test_6_persist_roundtrip_with_manifest(saved):
    directory, clf, X = saved("xrl")
    assert set(_config(directory)[MANIFEST_KEY]) == {ARRAYS_NAME}
    np.testing.assert_array_equal(skxmc.load(directory).predict_topk(X)[0], clf.predict_topk(X)[0])


# -- 3. overwrite never deletes a user's file ---------------------------------------------


def _add_user_files(d: Path) -> None:
    (d / "notes.txt").write_text("precious")
    (d / "plots").mkdir()
    (d / "plots" / "p.png").write_bytes(b"png")


def _add_file_inside_model_folder(d: Path) -> None:
    (d / "encoder" / "my-notes.txt").write_text("precious")


SAVE_CASES = [
    ("notes-and-plots", "xrl", _add_user_files, r"notes\.txt, plots/"),
    ("file-in-encoder", "sharp", _add_file_inside_model_folder, r"encoder/my-notes\.txt"),
    ("notes-no-manifest", "xrl", _drop_manifest_and(_add_user_files), r"notes\.txt, plots/"),
]


@pytest.mark.parametrize(
    ("kind", "add", "match"),
    [case[1:] for case in SAVE_CASES],
    ids=[f"6-persist-overwrite-{case[0]}" for case in SAVE_CASES],
)
def test_overwrite_refuses_dirs_with_user_files(saved, kind, add, match):
    directory, clf, _ = saved(kind)
    add(directory)
    before = sorted(p.relative_to(directory) for p in directory.rglob("*"))
    with pytest.raises(FileExistsError, match=rf"{directory.name}.*{match}.*nothing was written"):
        clf.save(directory, overwrite=True)
    assert sorted(p.relative_to(directory) for p in directory.rglob("*")) == before
    assert not [p for p in directory.parent.iterdir() if p.name != directory.name]


def test_6_persist_overwrite_replaces_own_files_and_stale_temps(saved):
    directory, clf, X = saved("xrl")
    # What a save killed by kill -9 leaves: its hidden working folder (pid long gone).
    dead = directory.with_name(f".{directory.name}.skxmc-999999999-0123456789ab.tmp")
    dead.mkdir()
    (dead / ARRAYS_NAME).write_bytes(b"half")
    running = directory.with_name(f".{directory.name}.skxmc-{os.getpid()}-0123456789ab.tmp")
    running.mkdir()
    clf.save(directory, overwrite=True)
    assert not dead.exists() and running.exists()  # another save of this process: kept
    assert sorted(p.name for p in directory.iterdir()) == [ARRAYS_NAME, CONFIG_NAME]
    np.testing.assert_array_equal(skxmc.load(directory).predict_topk(X)[0], clf.predict_topk(X)[0])


def test_6_persist_interrupted_swap_names_the_old_copy(saved):
    # Where no atomic exchange exists, a crash between the two renames leaves only .old.
    directory, _, _ = saved("xrl")
    directory.rename(directory.with_name(f".{directory.name}.old"))
    with pytest.raises(FileNotFoundError, match=r"interrupted.*\.model\.old"):
        skxmc.load(directory)


# -- 5. kill -9 during save(overwrite=True) -----------------------------------------------

_SAVER = textwrap.dedent(
    """
    import sys
    import skxmc

    a, b, target = sys.argv[1:4]
    models = [skxmc.load(a), skxmc.load(b)]
    print("ready", flush=True)
    i = 0
    while True:
        models[i % 2].save(target, overwrite=True)
        i += 1
    """
)


@pytest.mark.slow
def test_6_persist_kill_9_during_overwrite(tmp_path):
    demo = load_demo()
    vectorizer = TfidfVectorizer(max_features=20000).fit(demo.train_texts[:1500])
    X = vectorizer.transform(demo.train_texts[:1500])
    first = skxmc.XRLinearClassifier(weight_threshold=0.01).fit(X, demo.train_labels[:1500])
    second = skxmc.XRLinearClassifier(weight_threshold=0.01, top_k=3)
    second.fit(X[:1000], demo.train_labels[:1000])
    a, b = first.save(tmp_path / "a"), second.save(tmp_path / "b")
    assert (a / ARRAYS_NAME).stat().st_size > 2_000_000  # a few MB: saves take a while
    expected = {tuple(map(tuple, m.predict_topk(X[:50])[0])) for m in (first, second)}
    work = tmp_path / "work"
    work.mkdir()
    target = work / "model"
    shutil.copytree(a, target)
    rng = np.random.default_rng(0)
    deadline = time.monotonic() + 35
    trials = 0
    while trials < 6 and time.monotonic() < deadline:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SAVER, str(a), str(b), str(target)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.05, 0.6))  # each save takes ~0.1 s: any point of one
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        trials += 1
        loaded = skxmc.load(target)  # always a whole model: the old or the new one
        assert tuple(map(tuple, loaded.predict_topk(X[:50])[0])) in expected
        assert [p.name for p in work.iterdir() if not p.name.startswith(".")] == ["model"]
    assert trials >= 3
    first.save(target, overwrite=True)  # removes the hidden folders the kills left
    assert [p.name for p in work.iterdir()] == ["model"]


def test_6_persist_neural_model_files_follow_the_umask(saved):
    # Issue 48 item 14: model.safetensors was written 0600, unreadable by a server's user.
    previous = os.umask(0o022)
    try:
        directory, _, _ = saved("sharp")
    finally:
        os.umask(previous)
    modes = {
        p.relative_to(directory).as_posix(): p.stat().st_mode & 0o777 for p in directory.rglob("*")
    }
    assert modes["model.safetensors"] == 0o644, modes
    assert set(modes.values()) <= {0o644, 0o755}, modes
