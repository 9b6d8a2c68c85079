"""XR-Linear predicts bit for bit what it predicted at 26aef59 (before the package was
reorganised into layers), and a model directory saved by 26aef59 loads and predicts the
same. The digests were written by ``benchmarks/check_identity.py`` at 26aef59."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

import skxmc

from .._helpers import ROOT


def _check_identity():
    spec = importlib.util.spec_from_file_location(
        "check_identity", ROOT / "benchmarks" / "check_identity.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _check_identity()


@pytest.mark.parametrize("name", ["demo", "reuters21578_allcats"])
def test_topk_identical_to_26aef59(name, request):
    if name != "demo":
        request.getfixturevalue("data_dir")  # skips when the datasets are absent
    want = json.loads(check.REFERENCE.read_text())[name]
    got = check.fingerprint(name)
    assert got["first_row_indices"] == want["first_row_indices"]
    assert got["first_row_scores"] == want["first_row_scores"]
    assert got == want


def test_model_saved_by_26aef59_predicts_the_same(tmp_path):
    # Load a copy: loading may not write, but the test must not risk the reference files.
    model_dir = shutil.copytree(check.MODEL_DIR, tmp_path / "model")
    clf = skxmc.load(model_dir)
    # Saved as a '<U' array at 26aef59: loaded as the object array of str fit builds now.
    assert clf[-1].classes_.dtype == object
    assert all(type(c) is str for c in clf[-1].classes_.tolist())
    _, _, test_texts = check.model_slice()
    want = json.loads(check.MODEL_EXPECTED.read_text())
    assert check.topk_fingerprint(clf, test_texts) == want
