"""The method guides' figures (``benchmarks/_figures_guide_*.py``) are the results
files' numbers: a few recomputed with numpy from the raw JSON. The generic checks (no
typed measured decimal, every figure defined and used, the generated file current) are
in tests/test_bench_figures.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import _figures as figures
from benchmarks._harness import RESULTS

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = {p.path: p for p in figures.page_figures()}


def _shown(path: str) -> dict[str, str]:
    generated = (DOCS / "_generated" / PAGES[path].generated).read_text()
    return dict(re.findall(r"^\.\. \|([^|]+)\| replace:: (.*)$", generated, re.M))


def _json(file: str) -> dict:
    return json.loads((RESULTS / f"{file}.json").read_text())


@pytest.mark.parametrize("path", ["knnbert.rst", "matchxml.rst"])
def test_guide_has_figures(path: str) -> None:
    assert path in PAGES
    assert f".. include:: _generated/{PAGES[path].generated}" in (DOCS / path).read_text()


def test_knnbert_table_and_prose() -> None:
    shown = _shown("knnbert.rst")

    def accuracy(file: str, row: str) -> np.ndarray:
        return 100 * np.array([r["accuracy"] for r in _json(file)["runs"] if r["row"] == row])

    ce = accuracy("knnbert_scl_moco_imdb", "plain CE")
    assert len(ce) == 3
    assert shown["imdb-ce"] == f"{ce.mean():.2f}" == "56.89"
    assert shown["imdb-ce-std"] == f"{np.std(ce, ddof=1):.2f}" == "7.75"
    knn = accuracy("knnbert_scl_moco", "KNN-BERT phi=0.5")
    gain = knn.mean() - accuracy("knnbert_scl_moco", "plain CE").mean()
    assert shown["sst2-knnbert-gain"] == f"{gain:.1f}"
    # the file's own summary, rounded as it prints it
    summary = {s["row"]: s for s in _json("knnbert_scl_moco")["summary"]}
    for name, row in (("moco", "SCL-MoCo"), ("knn-q", "kNN only (queue memory)")):
        assert summary[row]["accuracy"] == f"{shown[f'sst2-{name}']} ± {shown[f'sst2-{name}-std']}"
    assert shown["queue-buffers-mb"] == f"{summary['SCL-MoCo']['queue MB']:.2f}"
    assert shown["mem-queue-mb"] == f"{summary['kNN only (queue memory)']['memory MB']:.2f}"


def test_matchxml_guide_sentence_block() -> None:
    shown = _shown("matchxml.rst")
    for steps in (300, 150):
        rows = _json(f"matchxml_final_features_dev_s{steps}_thr0001")["rows"]
        p1 = {r["variant"]: r["P@1"] for r in rows}
        assert shown[f"s{steps}-sent-p1"] == f"{p1['1:refined']:.2f}"
        assert shown[f"s{steps}-nosent-p1"] == f"{p1['1:refined:nosent']:.2f}"
