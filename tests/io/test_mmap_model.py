"""Memory-mapped models: ``skxmc.load(path, mmap=True)`` (issue 18, point 4).

A saved XRLinearClassifier stores its beam-search layout, so a mapped load predicts from
the file's pages without building anything; the layout is checked like every other array
of a model directory.
"""

from __future__ import annotations

import json
import os
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

from .._helpers import ROOT


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from skxmc.linear import _beam

    X, Y = make_xmc_classification(n_samples=1500, n_features=3000, n_labels=300, random_state=0)
    # several layers, so that the layout of inner and leaf layers is saved; the 300-node
    # leaf layer is searched parent by parent (blocks), the smaller ones from their
    # feature-major copies, as in a model with a leaf layer above DENSE_LAYER_MAX_NODES
    tree = HierarchicalLabelTree(max_leaf_size=8, branching_factor=4, random_state=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_beam, "DENSE_LAYER_MAX_NODES", 100)
        clf = XRLinearClassifier(tree=tree, random_state=0, top_k=5).fit(X[:1200], Y[:1200])
    chunks = clf._search_cache.chunks
    assert chunks[-1].blocks is not None and chunks[0].feature_major is not None
    path = skxmc.save(clf, tmp_path_factory.mktemp("m") / "model")
    return clf, path, X[1200:]


def _mapped(a: np.ndarray) -> bool:
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview)


def _load_and_compare(path: Path, mmap: bool, expected: tuple, X) -> XRLinearClassifier:
    """Loads the model and checks that it predicts ``expected`` (labels and scores)."""
    model = skxmc.load(path, mmap=mmap)
    got = model.predict_topk(X)
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
    return model


def test_mmap_load_predicts_the_same_from_mapped_arrays(fitted):
    clf, path, X = fitted
    expected = clf.predict_topk(X)
    for mmap in (False, True):
        model = _load_and_compare(path, mmap, expected, X)
        chunks = model._search_cache.chunks
        for c in chunks:
            if c.blocks is not None:
                assert _mapped(c.blocks) == mmap
            else:
                assert _mapped(c.feature_major.data) == mmap
        assert _mapped(model.weights_[-1].data) == mmap
    # the loaded layout is the one the fit built, whatever DENSE_LAYER_MAX_NODES is now
    model = skxmc.load(path, mmap=True)
    for a, b in zip(clf._search_cache.chunks, model._search_cache.chunks):
        for name in ("block_start", "feat_count", "blocks"):
            if getattr(a, name) is None:
                assert getattr(b, name) is None
            else:
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_array_equal(a.children_count, b.children_count)
        assert (a.feature_major is None) == (b.feature_major is None)


@pytest.mark.parametrize("budget", [None, 64])
@pytest.mark.parametrize("post_processor", ["l3-hinge", "noop"])
def test_mapped_blocks_are_read_from_the_file_not_through_the_map(
    fitted, monkeypatch, budget, post_processor
):
    # a mapped model's block layers are read with pread, in groups that fit the budget
    # (64 bytes: one parent per group); the compiled kernel never sees a mapped block
    from skxmc.io import mapped_file_span
    from skxmc.linear import _beam

    _, path, X = fitted
    in_memory = skxmc.load(path).set_params(post_processor=post_processor)
    expected = in_memory.predict_topk(X)
    model = skxmc.load(path, mmap=True).set_params(post_processor=post_processor)
    leaf = model._search_cache.chunks[-1]
    fd, offset = mapped_file_span(leaf.blocks)
    assert os.pread(fd, 16, offset) == leaf.blocks[:4].tobytes()
    assert mapped_file_span(in_memory._search_cache.chunks[-1].blocks) is None
    if budget is not None:
        monkeypatch.setattr(_beam, "_READ_BUDGET", budget)
    got, calls = _predict_recording_kernel_calls(monkeypatch, model, X)
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
    assert calls and not any(mapped for mapped, _ in calls)
    if budget is not None:  # one group per reached parent of the leaf layer
        assert len(calls) > 1


def _predict_recording_kernel_calls(monkeypatch, model, X) -> tuple:
    """``model.predict_topk(X)``, and for each call of the block-scoring kernel whether
    the blocks it got were mapped and how many beam entries it scored."""
    from skxmc.linear import _beam

    kernel = _beam._score_chunks_kernel
    calls = []

    def recording(*args):
        calls.append((_mapped(args[12]), len(args[5])))
        return kernel(*args)

    monkeypatch.setattr(_beam, "_score_chunks_kernel", recording)
    return model.predict_topk(X), calls


@pytest.mark.parametrize("why", ["large blocks", "no preadv"])
def test_mapped_layers_of_large_blocks_are_read_through_the_map(fitted, monkeypatch, why):
    # above _READ_MAX_MEAN_BLOCK bytes per block on average a layer is scored from the map,
    # and so is every layer where os.preadv is missing (Windows)
    from skxmc.linear import _beam

    _, path, X = fitted
    expected = skxmc.load(path).predict_topk(X)
    model = skxmc.load(path, mmap=True)
    if why == "large blocks":
        monkeypatch.setattr(_beam, "_READ_MAX_MEAN_BLOCK", 0)
    else:
        monkeypatch.setattr(_beam, "_CAN_PREAD", False)
    got, calls = _predict_recording_kernel_calls(monkeypatch, model, X)
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
    assert calls and all(mapped for mapped, _ in calls)


def test_mapped_model_reads_its_own_file_after_the_path_is_replaced(fitted, tmp_path):
    # the blocks are read through the map's own descriptor: saving another model over
    # the directory changes nothing for a process that mapped the first one
    clf, path, X = fitted
    target = shutil.copytree(path, tmp_path / "model")
    expected = clf.predict_topk(X)
    model = skxmc.load(target, mmap=True)
    other = _fitted_on_other_data(clf)
    skxmc.save(other, target, overwrite=True)
    got = model.predict_topk(X)
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
    assert not np.array_equal(skxmc.load(target).predict_topk(X)[0], expected[0])


def _fitted_on_other_data(clf: XRLinearClassifier) -> XRLinearClassifier:
    """``clf``'s settings fitted on the fixture's problem drawn with another seed."""
    from sklearn.base import clone

    from skxmc.linear import _beam

    X, Y = make_xmc_classification(n_samples=1500, n_features=3000, n_labels=300, random_state=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_beam, "DENSE_LAYER_MAX_NODES", 100)
        return clone(clf).fit(X[:1200], Y[:1200])


def test_each_layer_is_saved_in_one_search_form(fitted):
    # blocks for the layers searched parent by parent, the feature-major copy alone for
    # the small ones: never both
    _, path, _ = fitted
    with zipfile.ZipFile(path / "arrays.npz") as z:
        names = [n for n in z.namelist() if "_search_layout" in n]
    layers = {}
    for name in names:
        t, field = name.split("_search_layout.")[1].split(".")[:2]
        layers.setdefault(int(t), set()).add(field)
    assert len(layers) >= 3
    for t, fields in layers.items():
        assert fields in ({"feature_major"}, {"block_start", "feat_count", "blocks"}), (t, fields)
    assert fields == {"block_start", "feat_count", "blocks"}  # the leaf layer


def _saved_with(clf, path: Path, edit) -> Path:
    """Saves ``clf`` to ``path`` with ``edit(clf, arrays)`` applied to the arrays its
    ``_save_state`` gives (a directory of an older version, or a crafted one)."""
    original = XRLinearClassifier._save_state

    def edited(self):
        attributes, arrays = original(self)
        edit(self, arrays)
        return attributes, arrays

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(XRLinearClassifier, "_save_state", edited)
        return skxmc.save(clf, path)


def _with_blocks_everywhere(clf: XRLinearClassifier, layout: list) -> list:
    """Adds the blocks of the layers scored from their feature-major copies to a saved
    layout (in place), as older skxmc versions stored them."""
    from skxmc.linear._beam import ChunkedWeights

    for lay, W, P in zip(layout, clf.weights_, clf._search_cache.parents):
        if "blocks" not in lay:
            c = ChunkedWeights(W, P, dense=False)
            lay.update(block_start=c.block_start, feat_count=c.feat_count, blocks=c.blocks)
    return layout


def test_first_block_layout_with_blocks_of_small_layers_still_loads(fitted, tmp_path):
    # the first block layout stored the blocks of feature-major layers too: they are not read
    clf, _, X = fitted
    path = _saved_with(
        clf, tmp_path / "first", lambda self, a: _with_blocks_everywhere(self, a["_search_layout"])
    )
    expected = clf.predict_topk(X)
    for mmap in (False, True):
        model = _load_and_compare(path, mmap, expected, X)
        for c in model._search_cache.chunks:
            assert (c.blocks is None) == (c.feature_major is not None)


def test_mapped_model_cannot_change_the_file(fitted):
    _, path, _ = fitted
    before = (path / "arrays.npz").read_bytes()
    model = skxmc.load(path, mmap=True)
    model.weights_[0].data[:] = 123.0  # copy-on-write: this process's pages only
    assert (path / "arrays.npz").read_bytes() == before
    assert skxmc.load(path).weights_[0].data.max() != 123.0


def test_model_without_a_saved_layout_still_loads(fitted, tmp_path):
    clf, _, X = fitted
    path = _saved_with(clf, tmp_path / "old", lambda self, arrays: arrays.pop("_search_layout"))
    model = skxmc.load(path, mmap=True)
    np.testing.assert_array_equal(clf.predict_topk(X)[0], model.predict_topk(X)[0])


def _five_array_layout(layer: dict) -> dict:
    """A layer's layout as skxmc stored it before the one-block-per-parent layout."""
    out = {"features": [], "entry_start": [0], "entry_local": [], "entry_value": []}
    feat_start = [0]
    blocks, values = layer["blocks"], layer["blocks"].view(np.float32)
    for b, n, e in zip(layer["block_start"][:-1], layer["feat_count"], layer["block_start"][1:]):
        out["features"] += blocks[b : b + n].tolist()
        offsets = blocks[b + n : b + 2 * n + 1]
        out["entry_start"] += (out["entry_start"][-1] + offsets[1:]).tolist()
        out["entry_local"] += blocks[b + 2 * n + 1 : e : 2].tolist()
        out["entry_value"] += values[b + 2 * n + 2 : e : 2].tolist()
        feat_start.append(len(out["features"]))
    dtypes = {"features": np.int32, "entry_start": np.int64, "entry_local": np.int32}
    old = {k: np.asarray(v, dtype=dtypes.get(k, np.float32)) for k, v in out.items()}
    old["feat_start"] = np.asarray(feat_start, dtype=np.int64)
    if "feature_major" in layer:
        old["feature_major"] = layer["feature_major"]
    return old


def test_model_with_the_older_five_array_layout_still_loads(fitted, tmp_path):
    # model directories saved before the block layout: the layout is rebuilt from the
    # weights, with the same predictions, mapped or not
    clf, _, X = fitted

    def older(self, arrays):
        layout = _with_blocks_everywhere(self, arrays["_search_layout"])  # every layer's entries
        arrays["_search_layout"] = [_five_array_layout(lay) for lay in layout]

    path = _saved_with(clf, tmp_path / "older", older)
    expected = clf.predict_topk(X)
    for mmap in (False, True):
        model = _load_and_compare(path, mmap, expected, X)
        # rebuilt in memory, each layer in the form this version gives it: every layer
        # has at most DENSE_LAYER_MAX_NODES nodes, so all are scored from their copies
        for c in model._search_cache.chunks:
            assert c.blocks is None and not _mapped(c.feature_major.data)


def _last_feature_word(layer: dict) -> int:
    p = int(np.flatnonzero(layer["feat_count"])[-1])
    return int(layer["block_start"][p])


def _first_offset_word(layer: dict) -> int:
    p = int(np.flatnonzero(layer["feat_count"])[-1])
    return int(layer["block_start"][p] + layer["feat_count"][p])


_NAN_BITS = int(np.array(np.nan, dtype=np.float32).view(np.int32))

# (array, word index from the layer, new value, error); the last entry of the last block is
# a (child position, weight) pair at words -2 and -1
_CRAFTED = {
    "child position": ("blocks", lambda lay: -2, 10_000, "child positions beyond"),
    "feature id": ("blocks", _last_feature_word, 10**6, "feature ids outside"),
    "weight": ("blocks", lambda lay: -1, _NAN_BITS, "NaN or infinite"),
    "feature order": ("blocks", lambda lay: _last_feature_word(lay) + 1, 0, "not increasing"),
    "offsets": ("blocks", _first_offset_word, 1, "unordered entry offsets"),
    "feature count": ("feat_count", lambda lay: -1, 10_000, "does not match"),
    "block start": ("block_start", lambda lay: 1, -5, "does not match"),
}


@pytest.mark.parametrize("case", sorted(_CRAFTED))
def test_crafted_layout_is_refused(fitted, tmp_path, case):
    clf, _, _ = fitted
    name, where, value, message = _CRAFTED[case]

    def crafted(self, arrays):
        layer = dict(arrays["_search_layout"][-1])
        a = layer[name].copy()
        a[where(layer)] = value
        layer[name] = a
        arrays["_search_layout"] = [*arrays["_search_layout"][:-1], layer]

    path = _saved_with(clf, tmp_path / "crafted", crafted)
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
    from skxmc.io import _format

    clf, path, _ = copied
    _overwrite_entry(path, LAYER2_INDICES, 0, clf.weights_[2].shape[0] + 5)
    with pytest.raises(ValueError, match="indices range over"):
        skxmc.load(path, mmap=True)

    def no_hash(path):
        raise AssertionError(f"hashed {path}")

    monkeypatch.setattr(_format, "sha256", no_hash)
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


def test_blocks_read_past_the_end_of_the_file_raise(tmp_path):
    # a file cut after the load (verify=False trusts sizes checked at load time) must raise,
    # not score from a half-filled buffer
    from skxmc.linear._beam import _pread_into

    path = tmp_path / "short.bin"
    path.write_bytes(np.arange(4, dtype=np.int32).tobytes())
    out = np.zeros(8, dtype=np.int32)
    fd = os.open(path, os.O_RDONLY)
    try:
        _pread_into(fd, out[:4], 0)
        np.testing.assert_array_equal(out[:4], np.arange(4))
        with pytest.raises(OSError, match="ended before its beam-search blocks"):
            _pread_into(fd, out, 4)
    finally:
        os.close(fd)
