"""skxmc.io: the model-file items of issue 48 (2 load side, 4, 14, 15, 16, 17) and the
on-disk format of 26aef59 (``tests/data/model_26aef59``, saved by that commit)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import skxmc
from skxmc.io import ARRAYS_NAME, CONFIG_NAME, MANIFEST_KEY
from skxmc.io._format import build_manifest

from .._helpers import TEST_DATA as DATA


@pytest.fixture(scope="module")
def pipe():
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc.pipeline import make_pipeline

    texts = ["red apple", "green apple", "red car", "fast car", "apple pie", "car oil"]
    labels = [["fruit"], ["fruit"], ["vehicle"], ["vehicle"], ["fruit"], ["vehicle"]]
    return make_pipeline(TfidfVectorizer(), skxmc.XRLinearClassifier(top_k=2)).fit(texts, labels)


def _rehash(d: Path) -> None:
    config = json.loads((d / CONFIG_NAME).read_text(encoding="utf-8"))
    config[MANIFEST_KEY] = build_manifest(d)
    (d / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")


# -- the format of 26aef59 -----------------------------------------------------------------


def test_model_saved_by_26aef59_loads_and_predicts_the_same(tmp_path):
    expected = json.loads((DATA / "model_26aef59_expected.json").read_text(encoding="utf-8"))
    model = skxmc.load(DATA / "model_26aef59")
    labels, scores = model.predict_topk(expected["texts"])
    assert labels.tolist() == expected["labels"]
    np.testing.assert_array_equal(scores, np.asarray(expected["scores"], dtype=np.float32))
    # saved again (new layout), it still predicts the same
    again = skxmc.load(skxmc.save(model, tmp_path / "again"))
    labels2, scores2 = again.predict_topk(expected["texts"])
    assert labels2.tolist() == expected["labels"]
    np.testing.assert_array_equal(scores2, scores)


# -- item 17: labels as UTF-8 bytes plus offsets -----------------------------------------------


def test_string_labels_are_stored_compactly(tmp_path):
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(40, 8))).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    long = ["x" * 3000, "é" * 5, "short", "☕ label"]
    y = [[long[i % 4]] for i in range(40)]
    clf = skxmc.XRLinearClassifier(top_k=4).fit(X, y)
    assert clf.classes_.dtype == object  # in memory too: not 4 bytes x 3000 per label
    path = clf.save(tmp_path / "m")
    with np.load(path / ARRAYS_NAME) as npz:
        kinds = {npz[k].dtype.kind for k in npz.files}
        size = sum(npz[k].nbytes for k in npz.files if k.startswith("model.arrays.classes_"))
        assert "model.arrays.classes_.utf8" in npz.files  # bytes + offsets, not JSON
    assert "U" not in kinds  # no fixed-width strings on disk
    assert size < 3000 + 200  # the bytes of the labels, not 4 x 3000 x 4
    loaded = skxmc.load(path)
    assert loaded.classes_.dtype == object
    assert loaded.classes_.tolist() == clf.classes_.tolist()
    a, b = clf.predict_topk(X[:5]), loaded.predict_topk(X[:5])
    assert a[0].tolist() == b[0].tolist()
    np.testing.assert_array_equal(a[1], b[1])
    assert skxmc.describe(path)["n_labels"] == 4


def test_bad_string_offsets_are_refused(pipe, tmp_path):
    path = skxmc.save(pipe, tmp_path / "m")
    key = "model.steps.1.arrays.classes_.offsets"
    with np.load(path / ARRAYS_NAME) as npz:
        arrays = {k: npz[k] for k in npz.files}
    assert key in arrays
    arrays[key] = arrays[key][::-1].copy()
    np.savez(path / ARRAYS_NAME, **arrays)
    _rehash(path)
    with pytest.raises(ValueError, match="string array .*offsets must rise"):
        skxmc.load(path)


# -- item 16: deep JSON, the path of skxmc-model.json ------------------------------------------


def test_deeply_nested_json_gives_a_clear_error(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    depth = 100_000
    (d / CONFIG_NAME).write_text('{"__dict__": ' * depth + "1" + "}" * depth, encoding="utf-8")
    (d / ARRAYS_NAME).write_bytes(b"")
    with pytest.raises(ValueError, match=r"skxmc-model\.json nests deeper"):
        skxmc.load(d)
    with pytest.raises(ValueError, match=r"skxmc-model\.json nests deeper"):
        skxmc.describe(d)


def test_load_accepts_the_config_file(pipe, tmp_path):
    path = skxmc.save(pipe, tmp_path / "m")
    model = skxmc.load(path / CONFIG_NAME)
    assert model.predict_topk(["red car"])[0].tolist() == pipe.predict_topk(["red car"])[0].tolist()
    assert skxmc.describe(str(path / CONFIG_NAME))["n_labels"] == 2
    with pytest.raises(NotADirectoryError, match="pass the model's folder"):
        skxmc.load(path / ARRAYS_NAME)


# -- item 14: permissions --------------------------------------------------------------------


def test_every_written_file_follows_the_umask(pipe, tmp_path, monkeypatch):
    import skxmc.io._api as api

    real = api.build_manifest

    def write_private(root):  # a writer that creates its file 0600, as safetensors does
        (root / "private.bin").write_bytes(b"x")
        os.chmod(root / "private.bin", 0o600)
        return real(root)

    monkeypatch.setattr(api, "build_manifest", write_private)
    previous = os.umask(0o022)
    try:
        path = skxmc.save(pipe, tmp_path / "m")
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.iterdir()}
    assert modes == {"private.bin": 0o644, ARRAYS_NAME: 0o644, CONFIG_NAME: 0o644}
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


# -- item 15: symbolic links, stale temporaries, concurrent loads -------------------------------


def test_overwrite_through_a_symlink_writes_the_target(pipe, tmp_path):
    real = skxmc.save(pipe[-1], tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    assert skxmc.save(pipe, link, overwrite=True) == link
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert type(skxmc.load(real)).__name__ == "Pipeline"  # the target holds the new model
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_of_dead_or_zombie_processes_are_removed(pipe, tmp_path):
    # a killed save's parent may not have reaped it yet: a zombie is gone as well
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(400):  # until it has exited (a loaded machine may take seconds)
            with open(f"/proc/{zombie.pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    break
            time.sleep(0.05)
        else:
            pytest.skip("the child process did not exit in 20 s")
        stale = [
            tmp_path / f".m.skxmc-{zombie.pid}-abc123.tmp",
            tmp_path / f".m.skxmc-{_dead_pid()}-def456.tmp",
        ]
        alive = tmp_path / f".m.skxmc-{os.getpid()}-0a0a0a.tmp"
        for d in (*stale, alive):
            d.mkdir()
            (d / ARRAYS_NAME).write_bytes(b"partial")
        skxmc.save(pipe, tmp_path / "m")
        assert not any(d.exists() for d in stale)
        assert alive.exists()  # a running save's folder is left alone
    finally:
        zombie.wait()


def test_load_during_a_concurrent_overwrite_reads_one_version(pipe, tmp_path, monkeypatch):
    import skxmc.io._api as api

    path = skxmc.save(pipe[-1], tmp_path / "m")
    real = api.verify_files
    replaced = []

    def replace_first(directory, manifest, source, **kwargs):
        if not replaced:  # another process saves while this load reads
            replaced.append(True)
            skxmc.save(pipe, path, overwrite=True)
        return real(directory, manifest, source, **kwargs)

    monkeypatch.setattr(api, "verify_files", replace_first)
    assert type(skxmc.load(path)).__name__ == "Pipeline"  # the new version, whole

    def replace_always(directory, manifest, source, **kwargs):
        replaced.append(True)  # the two models in turn: each read sees another one
        skxmc.save(pipe if len(replaced) % 2 else pipe[-1], path, overwrite=True)
        return real(directory, manifest, source, **kwargs)

    monkeypatch.setattr(api, "verify_files", replace_always)
    with pytest.raises(ValueError, match="was replaced while loading"):
        skxmc.load(path)


# -- item 2 (load side): non-finite safetensors ------------------------------------------------


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, offset, blobs = {}, 0, []
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {
            "dtype": names[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    head = json.dumps(header).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_check_finite_names_the_tensor(tmp_path, dtype, bad):
    from skxmc.io._tensors import check_finite

    good = np.ones((3, 4), dtype=dtype)
    weight = good.copy()
    weight[1, 2] = bad
    path = tmp_path / "model.safetensors"
    _write_safetensors(path, {"a.bias": good, "ids": np.arange(3), "classifier.weight": weight})
    with pytest.raises(ValueError, match=r"model\.safetensors: tensor 'classifier\.weight'"):
        check_finite(path)
    _write_safetensors(path, {"a.bias": good, "ids": np.arange(3)})
    check_finite(path)


def test_bfloat16_non_finite_is_found(tmp_path):
    from skxmc.io._tensors import check_finite

    bits = np.array([0x3F80, 0x7FC0], dtype=np.uint16)  # 1.0, NaN in bfloat16
    head = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    path = tmp_path / "w.safetensors"
    path.write_bytes(len(head).to_bytes(8, "little") + head + bits.tobytes())
    with pytest.raises(ValueError, match="tensor 'w' holds NaN"):
        check_finite(path)
