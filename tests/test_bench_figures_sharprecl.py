"""The "mean ± std" summary value of :mod:`benchmarks._figures`, and a few figures of
``docs/sharprecl.rst`` recomputed with numpy from the raw results files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import _figures as figures
from benchmarks._harness import RESULTS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_summary_reads_mean_and_std(tmp_path: Path) -> None:
    rows = [{"row": "a", "f1": "43.13 \u00b1 7.17"}, {"row": "b", "f1": "49.74 \u00b1 n/a"}]
    (tmp_path / "s.json").write_text(json.dumps({"summary": rows}))
    mean = figures.summary("s", "summary", {"row": "a"}, "f1")
    std = figures.summary("s", "summary", {"row": "a"}, "f1", part="std")
    assert figures.compute(mean, tmp_path) == 43.13
    assert figures.compute(std, tmp_path) == 7.17
    assert figures.text(figures.fig("d", mean - std, "+.2f"), tmp_path) == "+35.96"
    assert figures.sources(mean - std) == ["s", "s"]
    with pytest.raises(LookupError):  # no std
        figures.compute(figures.summary("s", "summary", {"row": "b"}, "f1", part="std"), tmp_path)
    with pytest.raises(LookupError):  # not a summary text
        figures.compute(figures.summary("s", "summary", {"row": "a"}, "row"), tmp_path)
    with pytest.raises(LookupError):
        figures.compute(figures.summary("s", "summary", {"row": "a"}, "f1", part="min"), tmp_path)


def _shown() -> dict[str, str]:
    text = (DOCS / "_generated" / "sharprecl-figures.inc").read_text()
    return dict(re.findall(r"^\.\. \|([^|]+)\| replace:: (.*)$", text, re.M))


def _runs(file: str) -> list[dict]:
    return json.loads((RESULTS / f"{file}.json").read_text())["runs"]


def test_figures_are_the_files_numbers() -> None:
    shown = _shown()
    ir50 = _runs("sharprecl_ir50")

    def f1(rows: list[dict], data: str, row: str) -> np.ndarray:
        found = sorted(
            (r["seed"], r["macro_f1"]) for r in rows if r["dataset"] == data and r["row"] == row
        )
        return 100 * np.array([v for _, v in found])

    sharp = f1(ir50, "cr_ir50", "SharpReCL")
    assert shown["cr-s2-f1"] == f"{sharp.mean():.2f}" == "60.16"
    assert shown["cr-s2-f1-s1"] == f"{sharp[1]:.2f}"
    # the seeds the tuned model lost on trec against mu = 1
    tuned = _runs("sharprecl_ir50_tuned_mu_cr_trec")
    lost = f1(ir50, "trec_ir50", "SharpReCL") - f1(tuned, "trec_ir50", "SharpReCL")
    assert shown["tuned-trec-s1-loss"] == f"{lost[1]:.1f}" == "4.7"
    # the linear probe's dev gain over SharpReCL, and the unit-norm logits' on cr
    weighting = {r["row"]: r for r in _runs("sharprecl_dev_weighting_cr")}
    gain = 100 * (weighting["w/o CLS"]["dev_macro_f1"] - weighting["SharpReCL"]["dev_macro_f1"])
    assert shown["dw-cr-probe-gain"] == f"{gain:+.1f}"
    (norm,) = _runs("sharprecl_dev_normlogits_cr")
    (lace,) = _runs("sharprecl_dev_lace_cr")
    assert shown["nl-cr-test-vs-la"] == f"{100 * (norm['macro_f1'] - lace['macro_f1']):+.1f}"
    # negatives predicted: the paper weighting's record counts no negative at all
    screen = {r["variant"]: r for r in _runs("sharprecl_cr_ir50_dev_screen")}
    paper = screen['s1+p:contrastive_weighting="paper"']
    assert shown["screen-paper-neg"] == str(paper["pred"].get("negative", 0)) == "0"


def test_summary_figures_and_their_means() -> None:
    shown = _shown()

    def dev(file: str, row: str) -> float:
        (found,) = [
            r
            for r in json.loads((RESULTS / f"{file}.json").read_text())["summary"]
            if r["row"] == row
        ]
        return float(found["dev macro-F1"].split("\u00b1")[0])

    row = "SharpReCL, contrastive_weight=0.1"
    means = [dev(f"sharprecl_baldev_{s}", row) for s in ("trec", "cr", "bio")]
    assert shown["bd-mu01-dev-mean"] == f"{np.mean(means):.2f}" == "72.01"
    assert shown["bd-cr-mu1-dev"] == "43.13"
    assert shown["probe-cr-gap-std"] == "1.13"
