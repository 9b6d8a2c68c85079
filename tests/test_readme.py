"""The README's quick starts run as written: the short one, then the fuller one."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def _run(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    return namespace


def test_readme_opens_with_install_then_quick_start():
    headings = re.findall(r"^## (.+)$", README.read_text(encoding="utf-8"), re.M)
    assert headings[:2] == ["Install", "Quick start"], headings


def test_readme_short_quick_start_runs():
    namespace = _run(_python_blocks()[0])
    demo, labels = namespace["demo"], namespace["labels"]
    assert labels.shape == (len(demo.test_texts), 5)
    assert namespace["clf"].score(demo.test_texts, demo.test_labels) > 0.1


def test_readme_quick_start_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the quick start saves a model under ./models
    namespace = _run(_python_blocks()[1])
    demo = namespace["demo"]
    assert namespace["clf"].score(demo.test_texts, demo.test_labels) > 0.1
    # the saved and reloaded best model ranks exactly as the search's
    best, loaded = namespace["search"].best_estimator_, namespace["best"]
    np.testing.assert_array_equal(
        best.predict_topk(demo.test_texts[:50])[0], loaded.predict_topk(demo.test_texts[:50])[0]
    )
