"""The core install works without the extras; a missing extra names its pip command.

The subprocess tests make torch, transformers and gensim unimportable (a finder at the front
of ``sys.meta_path`` answers "No module named ..." for them, as on a machine without them)
and then use skxmc as a user of ``pip install skxmc`` would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import skxmc
from skxmc import _optional

ROOT = Path(__file__).resolve().parents[1]

# Runs before anything else in the subprocess: the names in BLOCKED are "not installed".
_BLOCKER = """
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


_EXPECT_IMPORT_ERROR = """
def expect_import_error(statement, command):
    try:
        exec(statement, dict(globals()))
    except ImportError as exc:
        assert command in str(exc), (statement, str(exc))
        print("refused:", statement, "|", exc)
    else:
        raise AssertionError(f"{statement!r} did not raise ImportError")
"""


def _run_without(blocked: tuple[str, ...], code: str) -> str:
    """Run ``code`` in a fresh interpreter where ``blocked`` cannot be imported, with
    ``expect_import_error(statement, command)`` defined; its stdout."""
    script = f"BLOCKED = {blocked!r}\n{_BLOCKER}\n{_EXPECT_IMPORT_ERROR}\n{textwrap.dedent(code)}"
    # The same skxmc as this process: the source checkout or the installed wheel.
    env = {**os.environ, "PYTHONPATH": str(Path(skxmc.__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def test_core_works_without_torch_transformers_and_gensim():
    out = _run_without(
        ("torch", "transformers", "gensim"),
        """
        import numpy as np
        from sklearn.feature_extraction.text import TfidfVectorizer

        import skxmc
        from skxmc import HierarchicalLabelTree, Label2VecTransformer, XRLinearClassifier
        from skxmc.cli import main
        from skxmc.datasets import load_demo
        from skxmc.metrics import evaluate, precision_at_k
        from skxmc.pipeline import make_pipeline

        demo = load_demo()
        texts, labels = demo.train_texts[:600], demo.train_labels[:600]
        clf = make_pipeline(TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier())
        clf.fit(texts, labels)
        top = clf.predict_topk(demo.test_texts[:100], k=3)
        print("metrics:", sorted(evaluate(demo.test_labels[:100], top, ks=(1, 3),
                                          classes=clf.classes_)))
        assert callable(precision_at_k)
        try:
            code = main(["--version"])
        except SystemExit as exc:  # argparse's version action exits
            code = exc.code
        assert code in (0, None), code

        for name in ("SharpReCLClassifier", "KNNBertClassifier", "SNMClassifier",
                     "MatchXMLClassifier"):
            expect_import_error(f"from skxmc import {name}", "pip install 'skxmc[text]'")
        expect_import_error("import skxmc.text", "pip install 'skxmc[text]'")
        expect_import_error("import skxmc.sharprecl", "pip install 'skxmc[text]'")

        Y = [["a", "b"], ["b"], ["a", "c"], ["c"]] * 5
        expect_import_error(
            "from skxmc import Label2VecTransformer as L; L().fit(Y)",
            "pip install 'skxmc[label2vec]'",
        )
        expect_import_error(
            "from skxmc import HierarchicalLabelTree as T; "
            "T(label_embedding='label2vec').fit(None, Y)",
            "pip install 'skxmc[label2vec]'",
        )
        # PIFA needs no gensim.
        X = np.random.default_rng(0).random((20, 5)).astype(np.float32)
        HierarchicalLabelTree(label_embedding="pifa").fit(X, Y)
        for name in ("torch", "transformers", "gensim"):
            assert name not in sys.modules, name
        print("core ok")
        """,
    )
    assert "core ok" in out
    assert "skxmc " + skxmc.__version__ in out  # main(["--version"]) printed it
    refused = [line for line in out.splitlines() if line.startswith("refused:")]
    assert len(refused) == 8, out
    # The message names what needs it and what is missing (safetensors and huggingface-hub
    # too where they are absent as well, as in the wheel check's core-only venv).
    assert re.search(r"SharpReCLClassifier needs torch(,| and) .*not installed", out), out
    assert any("Label2VecTransformer" in r and "gensim" in r for r in refused), out


def test_missing_transformers_alone_is_named():
    # transformers is imported lazily by the engine: the extra check looks it up anyway.
    pytest.importorskip("torch")
    out = _run_without(
        ("transformers",),
        """
        expect_import_error("from skxmc import KNNBertClassifier", "pip install 'skxmc[text]'")
        """,
    )
    assert "KNNBertClassifier needs transformers, which is not installed" in out, out


def test_serve_without_its_extra_names_the_pip_command():
    # All three blocked, so the message does not depend on which of them this
    # environment happens to have (the core-only wheel check has none).
    out = _run_without(
        ("fastapi", "uvicorn", "fastapi_offline"),
        """
        import contextlib, io
        from skxmc.cli import main

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = main(["serve", "no/such/model"])
        print("status", status, err.getvalue())
        expect_import_error("import skxmc._serve", "pip install 'skxmc[serve]'")
        """,
    )
    needs = "skxmc serve needs fastapi, uvicorn and fastapi-offline"
    assert f"status 1 skxmc serve: error: {needs}" in out, out
    assert "pip install 'skxmc[serve]'" in out, out


def test_require_names_the_extra_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setitem(_optional.EXTRAS, "fake", {"skxmc_fake_missing": "skxmc-fake"})
    with pytest.raises(ImportError) as info:
        _optional.require("skxmc_fake_missing.sub", "fake", "FakeEstimator.fit")
    assert str(info.value) == (
        "FakeEstimator.fit needs skxmc-fake, which is not installed. Install skxmc's 'fake' "
        "extra: pip install 'skxmc[fake]'."
    )
    assert info.value.name == "skxmc_fake_missing"
    assert _optional.missing_modules("fake") == ["skxmc_fake_missing"]
    with pytest.raises(ImportError, match=re.escape("pip install 'skxmc[fake]'")):
        with _optional.require_extra("fake", "FakeEstimator"):
            pass


def test_require_keeps_the_error_of_an_installed_but_broken_package(tmp_path, monkeypatch):
    # A package that is there but fails to import must not be reported as "not installed".
    (tmp_path / "skxmc_fake_broken").mkdir()
    (tmp_path / "skxmc_fake_broken" / "__init__.py").write_text("import skxmc_fake_dep_absent\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(_optional.EXTRAS, "fake", {"skxmc_fake_broken": "skxmc-fake"})
    with pytest.raises(ModuleNotFoundError) as info:
        _optional.require("skxmc_fake_broken", "fake", "FakeEstimator")
    assert info.value.name == "skxmc_fake_dep_absent"
    assert "pip install" not in str(info.value)


def test_require_refuses_a_module_outside_its_extra():
    with pytest.raises(ValueError, match="not in the 'knn' extra"):
        _optional.require("gensim", "knn", "x")
    with pytest.raises(ValueError, match="unknown extra 'nope'"):
        _optional.missing_modules("nope")


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="not a source checkout")
def test_extras_of_pyproject_match_the_import_table():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower() for req in requirements}

    for extra, modules in _optional.EXTRAS.items():
        declared = names(extras[extra])
        if extra == "dask":  # dask[distributed] brings distributed
            declared.add("distributed")
        assert declared == set(modules.values()), extra
    assert extras["all"] == [f"skxmc[{','.join(_optional.EXTRAS)}]"]
    core = names(project["dependencies"])
    optional = {dist for modules in _optional.EXTRAS.values() for dist in modules.values()}
    assert not core & optional, core & optional
