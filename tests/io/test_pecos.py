"""libpecos XLinearModel folders in and out (skxmc.io.from_pecos / to_pecos).

The fixture ``tests/data/pecos_tiny`` was made by ``scripts/make_pecos_fixture.py`` with
libpecos: its model folder, test queries and libpecos's own top-k on them. The tests that
run libpecos itself (on folders written by ``to_pecos``) need an interpreter with libpecos:
``$SKXMC_PECOS_PYTHON``, else ``/work/pecos-venv/bin/python``; they skip without one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import skxmc
from skxmc import XRLinearClassifier
from skxmc.cli import main
from skxmc.datasets import make_xmc_classification
from skxmc.io import describe, from_pecos, is_pecos_dir, to_pecos
from skxmc.io._pecos import PECOS_POST_PROCESSORS
from skxmc.linear._beam import POST_PROCESSORS

from .._helpers import TEST_DATA

FIXTURE = TEST_DATA / "pecos_tiny"
MODEL = FIXTURE / "model"


@pytest.fixture(scope="module")
def queries():
    return sp.load_npz(FIXTURE / "queries.npz")


@pytest.fixture(scope="module")
def expected():
    with np.load(FIXTURE / "expected.npz") as f:
        return dict(f)


def _pecos_python() -> str:
    python = os.environ.get("SKXMC_PECOS_PYTHON", "/work/pecos-venv/bin/python")
    if not Path(python).is_file():
        pytest.skip(f"no interpreter with libpecos at {python} (set SKXMC_PECOS_PYTHON)")
    found = subprocess.run([python, "-c", "import pecos.xmc.xlinear.model"], check=False)
    if found.returncode != 0:
        pytest.skip(f"{python} cannot import libpecos")
    return python


def _copy_model(tmp_path: Path) -> Path:
    return Path(shutil.copytree(MODEL, tmp_path / "model"))


def test_post_processors_are_the_beam_searchs():
    assert PECOS_POST_PROCESSORS == POST_PROCESSORS


@pytest.mark.parametrize("post_processor", PECOS_POST_PROCESSORS)
def test_fixture_topk_identical_to_libpecos(post_processor, queries, expected):
    clf = from_pecos(MODEL, post_processor=post_processor)
    labels, scores = clf.predict_topk(queries)
    np.testing.assert_array_equal(labels, expected[f"{post_processor}_indices"])
    np.testing.assert_allclose(scores, expected[f"{post_processor}_scores"], rtol=1e-5, atol=1e-6)
    # decision_function holds the same scores at the same labels
    D = clf.decision_function(queries).toarray()
    rows = np.arange(queries.shape[0])[:, None]
    np.testing.assert_allclose(D[rows, labels], scores, rtol=1e-6)


def test_folder_settings_become_the_estimators(queries):
    clf = from_pecos(MODEL)
    assert (clf.beam_size, clf.top_k, clf.post_processor, clf.bias) == (3, 5, "l3-hinge", 1.0)
    assert clf.n_features_in_ == 300
    np.testing.assert_array_equal(clf.classes_, np.arange(50))
    assert [C.shape for C in clf.tree_.cluster_chain_] == [(4, 1), (16, 4), (50, 16)]
    # a wider beam changes what is reached: the setting is really used
    wide = from_pecos(MODEL, beam_size=16, top_k=7)
    assert wide.predict_topk(queries)[0].shape == (queries.shape[0], 7)


def test_classes_name_the_label_columns(queries):
    names = np.array([f"label{j}" for j in range(50)])
    plain = from_pecos(MODEL)
    named = from_pecos(MODEL, classes=names)
    np.testing.assert_array_equal(
        named.predict_topk(queries)[0], names[plain.predict_topk(queries)[0]]
    )
    with pytest.raises(ValueError, match="one identifier per label"):
        from_pecos(MODEL, classes=names[:3])


def test_to_pecos_then_from_pecos_round_trips_exactly(tmp_path, queries):
    clf = from_pecos(MODEL)
    again = from_pecos(to_pecos(clf, tmp_path / "out"))
    for a, b in zip(
        clf.weights_ + clf.tree_.cluster_chain_, again.weights_ + again.tree_.cluster_chain_
    ):
        assert a.shape == b.shape and (a != b).nnz == 0
    assert again.get_params() == clf.get_params()
    for got, want in zip(again.predict_topk(queries), clf.predict_topk(queries)):
        np.testing.assert_array_equal(got, want)


def _skxmc_model(bias: float = 1.0) -> tuple:
    X, Y = make_xmc_classification(n_samples=300, n_features=400, n_labels=60, random_state=0)
    tree = skxmc.HierarchicalLabelTree(branching_factor=4, max_leaf_size=6)
    clf = XRLinearClassifier(tree=tree, beam_size=4, top_k=6, bias=bias).fit(X[:250], Y[:250])
    return clf, X[250:]


@pytest.mark.parametrize("bias", [1.0, 0.0])
def test_round_trip_of_a_model_fitted_by_skxmc(tmp_path, bias):
    clf, X = _skxmc_model(bias)
    again = from_pecos(to_pecos(clf, tmp_path / "out"), classes=clf.classes_)
    assert again.bias == clf.bias
    for got, want in zip(again.predict_topk(X), clf.predict_topk(X)):
        np.testing.assert_array_equal(got, want)


def test_imported_model_saves_and_loads_as_skxmc(tmp_path, queries):
    clf = from_pecos(MODEL)
    skxmc.save(clf, tmp_path / "skxmc_model")
    loaded = skxmc.load(tmp_path / "skxmc_model")
    for got, want in zip(loaded.predict_topk(queries), clf.predict_topk(queries)):
        np.testing.assert_array_equal(got, want)


_PECOS_PREDICT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, scipy.sparse as sp
    from pecos.xmc.xlinear.model import XLinearModel
    X = sp.load_npz(sys.argv[2]).astype(np.float32).tocsr()
    out = {}
    for predict_only in (False, True):
        model = XLinearModel.load(sys.argv[1], is_predict_only=predict_only)
        P = model.predict(X, threads=1).tocsr()
        rows = []
        for i in range(X.shape[0]):
            r = P[i]
            order = np.argsort(-r.data, kind="stable")
            rows.append([r.indices[order].tolist(), r.data[order].tolist()])
        out[str(predict_only)] = rows
    print(json.dumps(out))
    """
)


def test_libpecos_reads_what_to_pecos_writes(tmp_path):
    python = _pecos_python()
    clf, X = _skxmc_model()
    clf.set_params(post_processor="sigmoid")
    folder = to_pecos(clf, tmp_path / "pecos")
    sp.save_npz(tmp_path / "X.npz", sp.csr_matrix(X, dtype=np.float32))
    script = tmp_path / "predict.py"
    script.write_text(_PECOS_PREDICT)
    done = subprocess.run(
        [python, str(script), str(folder), str(tmp_path / "X.npz")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    got = json.loads(done.stdout)
    want_idx, want_val = clf.predict_topk(X)
    columns = np.searchsorted(clf.classes_, want_idx)
    for mode in ("False", "True"):
        for i, (idx, val) in enumerate(got[mode]):
            assert idx == columns[i].tolist()
            np.testing.assert_allclose(val, want_val[i], rtol=1e-5, atol=1e-6)


def test_skxmc_info_describes_a_pecos_folder(capsys, monkeypatch):
    assert is_pecos_dir(MODEL) and not is_pecos_dir(TEST_DATA / "model_26aef59_xrlinear")

    def no_loading(*args, **kwargs):
        raise AssertionError("info must not load the weights")

    monkeypatch.setattr(np, "load", no_loading)
    info = describe(MODEL)
    assert (info["n_labels"], info["n_features"]) == (50, 300)
    assert info["pecos"]["layers"] == [4, 16, 50]
    assert main(["info", str(MODEL)]) == 0
    out = capsys.readouterr().out
    assert "libpecos" in out and "1 -> 4 -> 16 -> 50" in out
    assert "beam_size=3" in out and "top_k=5" in out


# Bad folders -----------------------------------------------------------------------------


def _edit_param(path: Path, **changes) -> None:
    param = json.loads(path.read_text())
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            param[outer][inner] = value
        else:
            param[key] = value
    path.write_text(json.dumps(param))


def test_missing_file_is_named(tmp_path):
    model = _copy_model(tmp_path)
    (model / "ranker" / "1.model" / "W.npz").unlink()
    with pytest.raises(FileNotFoundError, match=r"1\.model/W\.npz is missing"):
        from_pecos(model)
    with pytest.raises(FileNotFoundError, match="no libpecos model folder"):
        from_pecos(tmp_path / "nowhere")


def test_wrong_weight_shape_is_named(tmp_path):
    model = _copy_model(tmp_path)
    W = sp.random(301, 5, density=0.1, format="csc", dtype=np.float32, random_state=0)
    sp.save_npz(model / "ranker" / "0.model" / "W.npz", W, compressed=False)
    with pytest.raises(
        ValueError, match=r"0\.model/W\.npz: shape \(301, 5\); expected .*\(301, 4\)"
    ):
        from_pecos(model)


def test_cluster_matrix_with_two_parents_is_refused(tmp_path):
    model = _copy_model(tmp_path)
    path = model / "ranker" / "1.model" / "C.npz"
    C = sp.load_npz(path).tolil()
    C[0, :] = 1.0
    sp.save_npz(path, C.tocsc(), compressed=False)
    with pytest.raises(ValueError, match="exactly one parent"):
        from_pecos(model)


def _garbage(path):
    path.write_bytes(b"not a matrix")


def _pickled(path):
    np.savez(path, format=np.array(["csc"], dtype=object), shape=np.array([50, 16]))


def _out_of_bounds(path):
    indptr = np.r_[0, np.full(16, 2)]
    np.savez(
        path,
        format=np.array("csc"),
        shape=np.array([50, 16]),
        data=np.ones(2),
        indices=np.array([0, 99]),
        indptr=indptr,
    )


def _dia(path):
    sp.save_npz(path, sp.dia_matrix(np.ones((50, 16), dtype=np.float32)))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_garbage, "not a numpy .npz or .npy file"),
        (_pickled, "Object arrays cannot be loaded"),
        (_out_of_bounds, "indices must be < 50"),
        (_dia, "'dia' sparse matrix; expected csc, csr or coo"),
    ],
)
def test_damaged_matrices_are_refused(tmp_path, damage, message):
    model = _copy_model(tmp_path)
    damage(model / "ranker" / "2.model" / "C.npz")
    with pytest.raises(ValueError, match=r"2\.model/C\.npz: .*" + re.escape(message)):
        from_pecos(model)


def test_ranker_folder_reads_too_and_arguments_are_checked(queries, expected):
    clf = from_pecos(MODEL / "ranker")
    np.testing.assert_array_equal(clf.predict_topk(queries)[0], expected["l3-hinge_indices"])
    with pytest.raises(ValueError, match="beam_size must be an int >= 1"):
        from_pecos(MODEL, beam_size=0)
    with pytest.raises(ValueError, match="post_processor must be one of"):
        from_pecos(MODEL, post_processor="l1-hinge")


def test_unsupported_post_processor(tmp_path, queries, expected):
    model = _copy_model(tmp_path)
    for d in range(3):
        _edit_param(
            model / "ranker" / f"{d}.model" / "param.json",
            **{"pred_kwargs.post_processor": "log-l1-hinge"},
        )
    with pytest.raises(ValueError, match="'log-l1-hinge' is not supported.*pass post_processor="):
        from_pecos(model)
    clf = from_pecos(model, post_processor="l3-hinge")  # overridden, as PECOS's predict
    np.testing.assert_array_equal(clf.predict_topk(queries)[0], expected["l3-hinge_indices"])
    assert "unsupported" in describe(model)["steps"][0]["params"]


def test_layers_with_different_beams_need_beam_size(tmp_path):
    model = _copy_model(tmp_path)
    _edit_param(model / "ranker" / "0.model" / "param.json", **{"pred_kwargs.only_topk": 2})
    with pytest.raises(ValueError, match="different beams.*pass beam_size="):
        from_pecos(model)
    assert from_pecos(model, beam_size=3).beam_size == 3


def test_memory_mapped_and_foreign_folders_are_refused(tmp_path):
    model = _copy_model(tmp_path)
    _edit_param(model / "ranker" / "param.json", is_mmap=True)
    with pytest.raises(ValueError, match="memory-mapped model"):
        from_pecos(model)
    other = tmp_path / "xtransformer"
    other.mkdir()
    (other / "param.json").write_text(
        json.dumps({"__meta__": {"class_fullname": "pecos.xmc.xtransformer.model###XTransformer"}})
    )
    with pytest.raises(ValueError, match="XTransformer.*are not read"):
        from_pecos(other)
    with pytest.raises(ValueError, match="skxmc model directory.*skxmc.load"):
        from_pecos(TEST_DATA / "model_26aef59_xrlinear")


def test_to_pecos_refuses_what_it_cannot_write(tmp_path):
    clf = from_pecos(MODEL)
    with pytest.raises(TypeError, match="XRLinearClassifier"):
        to_pecos(skxmc.load(TEST_DATA / "model_26aef59_xrlinear"), tmp_path / "p")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        to_pecos(clf, busy, overwrite=True)  # not a PECOS folder: never replaced
    target = to_pecos(clf, tmp_path / "pecos")
    with pytest.raises(FileExistsError):
        to_pecos(clf, target)
    assert to_pecos(clf, target, overwrite=True) == target
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers
