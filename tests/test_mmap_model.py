"""Memory-mapped models: ``skxmc.load(path, mmap=True)`` (issue 18, point 4).

A saved XRLinearClassifier stores its beam-search layout, so a mapped load predicts from
the file's pages without building anything; the layout is checked like every other array
of a model directory.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

import skxmc
from skxmc import XRLinearClassifier
from skxmc.datasets import make_xmc_classification
from skxmc.tree import HierarchicalLabelTree

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    X, Y = make_xmc_classification(n_samples=1500, n_features=3000, n_labels=300, random_state=0)
    # several layers, so that the layout of inner and leaf layers is saved
    tree = HierarchicalLabelTree(max_leaf_size=8, branching_factor=4, random_state=0)
    clf = XRLinearClassifier(tree=tree, random_state=0, top_k=5).fit(X[:1200], Y[:1200])
    path = skxmc.save(clf, tmp_path_factory.mktemp("m") / "model")
    return clf, path, X[1200:]


def _mapped(a: np.ndarray) -> bool:
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview)


def test_mmap_load_predicts_the_same_from_mapped_arrays(fitted):
    clf, path, X = fitted
    expected = clf.predict_topk(X)
    for mmap in (False, True):
        model = skxmc.load(path, mmap=mmap)
        got = model.predict_topk(X)
        np.testing.assert_array_equal(expected[0], got[0])
        np.testing.assert_array_equal(expected[1], got[1])
        chunks = model._search_cache.chunks
        for c in chunks:
            assert _mapped(c.entry_value) == mmap and _mapped(c.features) == mmap
        assert _mapped(model.weights_[-1].data) == mmap
    # the loaded layout is the one a fresh build gives
    model = skxmc.load(path, mmap=True)
    for a, b in zip(clf._search_cache.chunks, model._search_cache.chunks):
        for name in ("features", "feat_start", "entry_start", "entry_local", "entry_value"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_array_equal(a.children_count, b.children_count)
        assert (a.feature_major is None) == (b.feature_major is None)


def test_layout_of_large_layers_without_a_feature_major_copy(fitted, tmp_path, monkeypatch):
    # layers above DENSE_LAYER_MAX_NODES keep no feature-major copy; the saved layout
    # must say so and load as such
    from skxmc.linear import _beam, _xrlinear

    clf, _, X = fitted
    monkeypatch.setattr(_beam, "DENSE_LAYER_MAX_NODES", 100)
    monkeypatch.setattr(_xrlinear, "DENSE_LAYER_MAX_NODES", 100)
    clf._build_search_structures()
    try:
        assert clf._search_cache.chunks[-1].feature_major is None
        expected = clf.predict_topk(X)
        path = skxmc.save(clf, tmp_path / "m")
        model = skxmc.load(path, mmap=True)
        assert model._search_cache.chunks[-1].feature_major is None
        np.testing.assert_array_equal(expected[0], model.predict_topk(X)[0])
    finally:
        monkeypatch.undo()
        clf._build_search_structures()


def test_mapped_model_cannot_change_the_file(fitted):
    _, path, _ = fitted
    before = (path / "arrays.npz").read_bytes()
    model = skxmc.load(path, mmap=True)
    model.weights_[0].data[:] = 123.0  # copy-on-write: this process's pages only
    assert (path / "arrays.npz").read_bytes() == before
    assert skxmc.load(path).weights_[0].data.max() != 123.0


def test_model_without_a_saved_layout_still_loads(fitted, tmp_path, monkeypatch):
    clf, _, X = fitted
    original = XRLinearClassifier._save_state

    def without_layout(self):
        attributes, arrays = original(self)
        arrays.pop("_search_layout")
        return attributes, arrays

    monkeypatch.setattr(XRLinearClassifier, "_save_state", without_layout)
    path = skxmc.save(clf, tmp_path / "old")
    monkeypatch.undo()
    model = skxmc.load(path, mmap=True)
    np.testing.assert_array_equal(clf.predict_topk(X)[0], model.predict_topk(X)[0])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("entry_local", "child positions beyond"),
        ("features", "feature ids outside"),
        ("feat_start", "does not match"),
    ],
)
def test_crafted_layout_is_refused(fitted, tmp_path, monkeypatch, edit, message):
    clf, _, _ = fitted
    original = XRLinearClassifier._save_state

    def crafted(self):
        attributes, arrays = original(self)
        layer = dict(arrays["_search_layout"][-1])
        a = layer[edit].copy()
        a[-1] = a[-1] + 10_000  # past the children / features / entries
        layer[edit] = a
        arrays["_search_layout"] = [*arrays["_search_layout"][:-1], layer]
        return attributes, arrays

    monkeypatch.setattr(XRLinearClassifier, "_save_state", crafted)
    path = skxmc.save(clf, tmp_path / "crafted")
    monkeypatch.undo()
    for mmap in (False, True):
        with pytest.raises(ValueError, match=message):
            skxmc.load(path, mmap=mmap)


def test_mapped_load_in_a_new_process_maps_instead_of_reading(fitted):
    # a mapped load's pages belong to the page cache (shared, file-backed); its private
    # (anonymous) memory holds no weights and no built search layout
    _, path, _ = fitted
    code = textwrap.dedent(
        f"""
        import json, sys, numpy as np, skxmc
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        skxmc.load({str(path)!r}, mmap=True)  # warm the imports and the page cache
        base = rss()
        models = [skxmc.load({str(path)!r}, mmap=sys.argv[1] == "1") for _ in range(5)]
        print(json.dumps(rss() - base))
        """
    )
    growth = {}
    for mmap in ("0", "1"):
        out = subprocess.run(
            [sys.executable, "-c", code, mmap],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        growth[mmap] = json.loads(out.stdout.strip().splitlines()[-1])
    # 5 private copies against 5 maps of one file
    assert growth["1"] < growth["0"] / 2, growth


def _overwrite_entry(directory: Path, key: str, index: int, value: float) -> None:
    """Overwrite entry ``index`` of the saved array ``key`` in place: same file size, valid
    archive headers, only the array's bytes change (as a damaged disk block would)."""
    npz = directory / "arrays.npz"
    with zipfile.ZipFile(npz) as z:
        info = z.getinfo(f"{key}.npy")
    assert info.compress_type == zipfile.ZIP_STORED
    with open(npz, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        f.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            _, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            _, _, dtype = np.lib.format.read_array_header_2_0(f)
        f.seek(f.tell() + index * dtype.itemsize)
        f.write(np.array([value], dtype=dtype).tobytes())


@pytest.fixture
def copied(fitted, tmp_path):
    clf, path, X = fitted
    return clf, Path(shutil.copytree(path, tmp_path / "model")), X


LAYER2_DATA = "model.attributes.weights_.2.data"
LAYER2_INDICES = "model.attributes.weights_.2.indices"


def test_changed_value_is_caught_by_the_hash(copied):
    # a finite weight changed in place: only the sha256 can tell
    clf, path, _ = copied
    _overwrite_entry(path, LAYER2_DATA, 0, 0.123)
    for mmap in (False, True):
        with pytest.raises(ValueError, match="sha256 differs"):
            skxmc.load(path, mmap=mmap, verify=True)
    with pytest.raises(ValueError, match="sha256 differs"):
        skxmc.load(path)  # the default without mmap hashes
    # a mapped load hashes only when asked, and maps what the file holds
    for verify in (None, False):
        model = skxmc.load(path, mmap=True, verify=verify)
        assert model.weights_[2].data[0] == np.float32(0.123) != clf.weights_[2].data[0]


def test_out_of_range_index_is_caught_without_the_hash(copied, monkeypatch):
    # the entry checks that keep compiled code in bounds run by default with mmap too
    from skxmc import _persistence

    clf, path, _ = copied
    _overwrite_entry(path, LAYER2_INDICES, 0, clf.weights_[2].shape[0] + 5)
    with pytest.raises(ValueError, match="indices range over"):
        skxmc.load(path, mmap=True)

    def no_hash(path):
        raise AssertionError(f"hashed {path}")

    monkeypatch.setattr(_persistence, "_sha256", no_hash)
    with pytest.raises(ValueError, match="indices range over"):
        skxmc.load(path, mmap=True, verify=None)
    # verify=False trusts the entries: the load reads neither the hash nor the index
    model = skxmc.load(path, mmap=True, verify=False)
    assert model.weights_[2].indices[0] == clf.weights_[2].shape[0] + 5
    with pytest.raises(AssertionError, match="hashed"):
        skxmc.load(path, mmap=True, verify=True)


@pytest.mark.parametrize("verify", [True, None, False])
@pytest.mark.parametrize("change", ["truncated", "extended"])
def test_resized_file_is_caught_with_every_verify(copied, verify, change):
    _, path, _ = copied
    npz = path / "arrays.npz"
    data = npz.read_bytes()
    npz.write_bytes(data[:-1] if change == "truncated" else data + b"\0")
    for mmap in (True, False):
        with pytest.raises(ValueError, match="bytes where"):
            skxmc.load(path, mmap=mmap, verify=verify)


def test_trusted_mapped_load_predicts_the_same(copied):
    clf, path, X = copied
    model = skxmc.load(path, mmap=True, verify=False)
    assert _mapped(model.weights_[-1].data)
    for a, b in zip(clf.predict_topk(X), model.predict_topk(X)):
        np.testing.assert_array_equal(a, b)


def test_verify_must_be_a_bool_or_none(fitted):
    _, path, _ = fitted
    with pytest.raises(ValueError, match="verify must be True, False or None"):
        skxmc.load(path, verify="yes")
