"""Figures of the guide and benchmark pages recomputed from the raw JSON with numpy,
independently of :mod:`benchmarks._figures` (the MatchXML page's are in
tests/test_bench_figures.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from benchmarks._harness import RESULTS

GENERATED = Path(__file__).resolve().parents[1] / "docs" / "_generated"


def _shown(page: str) -> dict[str, str]:
    text = (GENERATED / f"{page}-figures.inc").read_text()
    return dict(re.findall(r"^\.\. \|([^|]+)\| replace:: (.*)$", text, re.M))


def _load(file: str) -> dict:
    return json.loads((RESULTS / f"{file}.json").read_text())


def test_ensemble_fit_ratios() -> None:
    shown = _shown("ensemble")
    data = _load("ensemble")
    ratios = np.array([r["fit_ratio"] for r in data["runs"] if r["model"] == "RankerEnsemble"])
    assert shown["ens-fit-ratio-min"] == f"{ratios.min():.2f}"
    assert shown["ens-fit-ratio-max"] == f"{ratios.max():.2f}"
    selection = data["config"]["selection"]
    single = selection["member_fit_s"][selection["best_single"]]
    first = selection["confirmations"][0]
    assert shown["ens5-est-ratio-a"] == f"{first['estimated_fit_s'] / single:.2f}" == "2.86"
    earlier = _load("ensemble-by-estimate")["runs"]
    seed0 = [r for r in earlier if r["model"] == "RankerEnsemble" and r["seed"] == 0]
    assert shown["est-fit-ratio-s0"] == f"{seed0[0]['fit_ratio']:.2f}"


def test_persistence_shares() -> None:
    shown = _shown("persistence")
    rows = _load("predict_only/persistence")["runs"]
    size = {(r["dataset"], r["saved"]): r["MiB"] for r in rows}
    share = size["tibkat_gnd_en", "predict_only=True"] / size["tibkat_gnd_en", "full"]
    assert shown["po-tibkat-share"] == f"{share:.2f}" == "0.58"


def test_serving_ratios() -> None:
    shown = _shown("serving")
    runs = _load("onnx_speed")["runs"]
    # the summary's times are the medians of the repeats
    torch_s = np.median(runs[1]["torch s"])
    onnx_s = np.median(runs[1]["onnx s"])
    assert shown["onnx-t2-torch-s"] == f"{torch_s:.3f}"
    assert shown["onnx-t2-ratio"] == f"{torch_s / onnx_s:.2f}"
    rows = _load("serve-throughput")["tables"][0]["rows"]
    (two,) = [
        r
        for r in rows
        if r["server"] == "this checkout" and r["workers"] == 2 and r["batch_wait_ms"] == 0
    ]
    assert shown["serve-cpu-over-model"] == f"{1 / two['cpu ratio']:.1f}"


def test_median_op() -> None:
    from benchmarks import _figures as figures

    assert figures.compute(figures.op("median", 3, 1, 2)) == 2
    assert figures.compute(figures.op("median", 4, 1, 2, 3)) == 2.5


def test_xrlinear_ratios_and_seed_gaps() -> None:
    shown = _shown("benchmarks-xrlinear")

    def row(file: str, dataset: str, library: str) -> dict:
        (found,) = [
            r for r in _load(file)["rows"] if r["dataset"] == dataset and r["library"] == library
        ]
        return found

    ours = row("xmc_linear_quiet_after", "tibkat_gnd_en", "skxmc")["train_s_all"]
    theirs = row("xmc_linear_quiet_after", "tibkat_gnd_en", "libpecos")["train_s_all"]
    ratio = np.median(np.array(ours) / np.array(theirs))
    assert shown["q-t-fit-ratio"] == f"{ratio:.2f}x" == "0.72x"
    per_seed = _load("xmc_linear_seeds_tibkat")["records"][0]["per_seed"]
    gaps = [a["P@5"] - b["P@5"] for a, b in zip(per_seed["skxmc"], per_seed["libpecos"])]
    assert shown["seed-p5-gap-mean"] == f"{np.mean(gaps):+.2f}"
    fused = [
        np.median(
            np.array(row("xmc_linear_s30_small_fused", d, "skxmc")["peak_rss_mb_all"])
            / np.array(row("xmc_linear_s30_small_fused", d, "libpecos")["peak_rss_mb_all"])
        )
        for d in ("reuters21578_allcats", "bibtex_bow")
    ]
    assert shown["s30-bibtex-rss-ratio"] == f"{fused[1]:.2f}x"


def test_snm_dev_and_matchxml_gaps() -> None:
    shown = _shown("benchmarks-snm")
    runs = _load("snm_dev_bibtex")["runs"]

    def dev_p1(method: str) -> np.ndarray:
        return np.array([r["dev_precision@1"] for r in runs if r["method"] == method])

    centroid, random = dev_p1("snm k=1 mean"), dev_p1("snm k=1 mean random")
    assert len(centroid) == len(random) == 3
    assert shown["dev-bibtex-init-gain"] == f"{centroid.mean() - random.mean():.1f}"
    assert shown["dev-bibtex-mean-p1-std"] == f"{np.std(centroid, ddof=1):.1f}"
    with_snm = _load("matchxml_tibkat_ablations")["results"]
    without = _load("matchxml")["results"]

    def p1(results: dict, row: str) -> float:
        (found,) = [r for d in results.values() for r in d["rows"] if r["row"] == row]
        return found["P@1"]

    gap = p1(with_snm, "snm-negatives") - p1(without, "matchxml")
    assert shown["mx-test-p1-gap"] == f"{gap:+.2f}" == "+0.53"


def test_add_labels_and_update() -> None:
    shown = _shown("xrlinear")
    runs = _load("add-labels")["runs"]
    gaps = np.array(
        [
            r["old P@5 gap"]
            for r in runs
            if r["held out"].startswith("5%") and r["model"] == "fit on the rest + add_labels"
        ]
    )
    assert len(gaps) == 3
    assert shown["al-dev-old-p5-below"] == f"{-gaps.mean():.2f}"
    assert shown["al-dev-old-p5-below-worst"] == f"{-gaps.min():.2f}" == "0.35"
    test = [r for r in _load("update")["runs"] if r["model"] == '+ update(scope="labels")']
    cpu = np.array([r["cpu ratio"] for r in test])
    assert shown["up-labels-cpu"] == f"{cpu.mean():.2f}"
    assert shown["up-labels-cpu-std"] == f"{np.std(cpu, ddof=1):.2f}"


def test_sharprecl_pooled_text_matches_its_seeds() -> None:
    """The pooled file's text is the mean and sample std of the per-seed runs."""
    shown = _shown("benchmarks-text_classifiers")
    runs = _load("sharprecl_ir50")["runs"]

    def f1(dataset: str, row: str) -> np.ndarray:
        return 100 * np.array(
            [r["macro_f1"] for r in runs if r["dataset"] == dataset and r["row"] == row]
        )

    la = f1("trec_ir50", "logit-adjusted CE")
    assert len(la) == 3
    assert shown["la-trec"] == f"{la.mean():.2f}"
    assert shown["la-trec-std"] == f"{np.std(la, ddof=1):.2f}"
    gain = f1("cr_ir50", "SharpReCL").mean() - f1("cr_ir50", "plain CE").mean()
    assert shown["sr-over-ce-cr"] == f"{gain:.1f}"
