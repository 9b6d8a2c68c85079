"""The README's quick start runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_quick_start_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the quick start saves a model under ./models
    code = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    demo = namespace["demo"]
    assert namespace["clf"].score(demo.test_texts, demo.test_labels) > 0.1
    # the saved and reloaded best model ranks exactly as the search's
    best, loaded = namespace["search"].best_estimator_, namespace["best"]
    np.testing.assert_array_equal(
        best.predict_topk(demo.test_texts[:50])[0], loaded.predict_topk(demo.test_texts[:50])[0]
    )
