"""A few figures of ``docs/benchmarks/scaling.rst`` recomputed with numpy from the raw
results JSON (:mod:`benchmarks._figures_scaling`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from benchmarks import _figures as figures
from benchmarks._harness import RESULTS

ROOT = Path(__file__).resolve().parents[1]
(PAGE,) = [p for p in figures.page_figures() if p.path == "benchmarks/scaling.rst"]


def _shown() -> dict[str, str]:
    generated = (ROOT / "docs" / "_generated" / PAGE.generated).read_text()
    return dict(re.findall(r"^\.\. \|([^|]+)\| replace:: (.*)$", generated, re.M))


def _load(file: str) -> dict:
    return json.loads((RESULTS / f"{file}.json").read_text())


def test_growth_and_ratio() -> None:
    shown = _shown()
    sizes = {s["n_labels"]: s["libraries"] for s in _load("scale_issue_prefetch")["sizes"]}
    train = {
        lib: np.array([sizes[n][lib]["train_s"] for n in (100_000, 1_000_000)])
        for lib in ("skxmc", "libpecos")
    }
    assert shown["pf-lp-growth"] == f"{train['libpecos'][1] / train['libpecos'][0]:.1f}x"
    assert shown["pf-train-ratio"] == f"{train['skxmc'][1] / train['libpecos'][1]:.2f}x"


def test_seed_std_and_gaps() -> None:
    shown = _shown()
    (record,) = _load("scale_seeds_1m")["records"]
    sk = np.array([r["P@1"] for r in record["per_seed"]["skxmc"]])
    lp = np.array([r["P@1"] for r in record["per_seed"]["libpecos"]])
    assert shown["s1m-sk-p1"] == f"{sk.mean():.2f}"
    assert shown["s1m-sk-p1-std"] == f"{np.std(sk, ddof=1):.2f}"
    assert shown["s1m-p1-gap-s1"] == f"{sk[1] - lp[1]:+.2f}"
    assert shown["s1m-p1-gap"] == f"{(sk - lp).mean():+.2f}"


def test_per_worker_range_and_share() -> None:
    shown = _shown()
    layers = _load("scale_dask_30k")["records"][0]["layers"]
    sent = np.array([layer["broadcast MB"] for layer in layers[1:]]) / 2
    assert (shown["dask30k-sent-lo"], shown["dask30k-sent-hi"]) == (
        f"{sent.min():.1f}",
        f"{sent.max():.1f}",
    )
    runs = {r["rows"]: r["layers"][-1] for r in _load("mmap_reach_1m")["runs"]}
    assert (
        shown["reach-1000-share"]
        == f"{100 * runs[1000]['parents_reached'] / runs[1000]['parents']:.0f}%"
    )
    assert shown["leaf-parents"] == f"{runs[1000]['parents']:,}" == "16,384"


def test_thousands_separator_keeps_its_sign(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"a": -0.2, "b": 3044.2}))
    assert figures.text(figures.fig("b", figures.val("s", "b"), ",.0f"), tmp_path) == "3,044"
    assert figures.text(figures.fig("a", figures.val("s", "a"), ",.0f"), tmp_path) == "0"
