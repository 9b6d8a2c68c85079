"""The ``which-estimator`` suite: one protocol for every method, settings chosen on dev."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("benchmarks._docs", reason="run from the repository root")


def _suite():
    from benchmarks.suites import which_estimator

    return which_estimator


def test_profiles_cover_the_issue_rows() -> None:
    """Between them the two profiles run every method on every set it applies to; the
    CPU profile fine-tunes only on the few-shot set, and its SNM rows are multi-label."""
    we = _suite()
    cpu, gpu = we.PROFILES["cpu"], we.PROFILES["gpu"]
    cpu_neural = {name for name, ms in cpu["extra"].items() if set(ms) & {*we.NEURAL_MC, we.MXML}}
    assert cpu_neural == {"trec_100shot"}
    assert not set(cpu["methods"]) & {*we.NEURAL_MC, we.MXML}
    assert {*we.NEURAL_MC, we.MXML} <= set(gpu["methods"])
    for name in [*we.MULTICLASS, *we.MULTILABEL]:
        ran = set()
        for profile in (cpu, gpu):
            if name in profile["datasets"]:
                ran |= set(profile["methods"])
            ran |= set(profile.get("extra", {}).get(name, []))
        # tibkat_gnd_en's 27k labels put the one-vs-rest LRs out of reach (LR_MAX_LABELS)
        cheap = {we.XRL} if name == "tibkat_gnd_en" else set(we.CHEAP)
        assert cheap <= ran, name
        if we.is_multilabel(name):
            assert {we.SNM, we.MXML} <= ran, name
        else:
            assert set(we.NEURAL_MC) <= ran, name
    assert {"trec_ir50", "cr_ir50", "biomedical_ir50", "trec_100shot"} <= set(we.MULTICLASS)
    assert {"reuters21578_allcats", "tibkat_gnd_en"} <= set(we.MULTILABEL)
    assert all(len(grid) >= 1 for grid in we.GRIDS.values())


@pytest.mark.skipif(
    not (Path(os.environ.get("SKXMC_DATA", "/nonexistent")) / "trec").is_dir(),
    reason="needs the reference data (SKXMC_DATA)",
)
def test_load_draws_a_dev_split_per_seed() -> None:
    """Train and dev are disjoint, dev is a fifth, the few-shot set has 100 per class (or
    all a class has) and another seed draws another split."""
    we = _suite()
    a, b = we.load("trec_100shot", 0, False), we.load("trec_100shot", 1, False)
    n = len(a["X"]) + len(a["X_dev"])
    assert 500 < n <= 600  # 6 classes, 100 each (TREC's smallest class has fewer)
    assert len(a["X_dev"]) == n // 5
    assert not set(a["X"]) & set(a["X_dev"])
    assert a["X_dev"] != b["X_dev"]
    counts = np.unique(np.concatenate([a["y"], a["y_dev"]]), return_counts=True)[1]
    assert max(counts) == 100 and sum(counts == 100) == 5


@pytest.mark.slow  # a quick run with a tiny random encoder: 1-3 min on 2 busy cores
@pytest.mark.skipif(
    not (Path(os.environ.get("SKXMC_DATA", "/nonexistent")) / "trec").is_dir(),
    reason="needs the reference data (SKXMC_DATA)",
)
def test_quick_run_reports_accuracy_cost_and_dev_choice(tmp_path: Path) -> None:
    """``--quick`` writes one row per (set, method) with test scores, fit and predict
    time, peak memory and the setting dev chose, from every seed."""
    we = _suite()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "which-estimator",
            "--quick",
            "--out",
            str(tmp_path),
            "--datasets",
            "trec_ir50",
            "--methods",
            we.XRL,
            we.TFLR,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "which-estimator.json").read_text())
    (table,) = result["tables"]
    assert [r["method"] for r in table["rows"]] == [we.XRL, we.TFLR]
    for row in table["rows"]:
        assert 0 <= row["macro_f1"] <= 100 and 0 <= row["accuracy"] <= 100
        assert row["fit_s"] > 0 and row["predict_ms_per_text"] > 0 and row["peak_rss_mb"] > 50
        grid = [", ".join(f"{k}={v}" for k, v in s.items()) for s in we.GRIDS[row["method"]]]
        assert row["chosen_on_dev"] in grid
    for run in result["runs"]:  # dev chose the best of the grid on dev
        assert run["n_dev"] > 0 and "dev_macro_f1" in run


def test_summaries_show_the_which_estimator_results(tmp_path: Path) -> None:
    """The which-estimator page's plot is made from the suite's tables: one point per
    (set, method), the score named in the panel's title."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import _bench_summaries
    finally:
        sys.path.remove(str(ROOT / "docs"))
    table = {
        "title": "Imbalanced multi-class sets",
        "columns": ["dataset", "method", "macro_f1", "fit_s"],
        "rows": [
            {
                "dataset": "cr_ir50",
                "method": "A",
                "macro_f1": 70.0,
                "macro_f1_std": 1.0,
                "fit_s": 2.0,
                "fit_s_std": 0.1,
                "n_seeds": 3,
            },
        ],
    }
    points = _bench_summaries._which_estimator({"tables": [table]})
    assert points == [
        {
            "dataset": "cr_ir50 (macro-F1)",
            "method": "A",
            "acc": 70.0,
            "acc_std": 1.0,
            "time": 2.0,
            "time_std": 0.1,
            "n": 3,
        },
    ]


def test_summary_joins_the_parts_of_a_suite_run(tmp_path: Path) -> None:
    """A page whose suite ran in parts shows every part present, a data set's rows
    together, and names each file it read."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import _bench_summaries
    finally:
        sys.path.remove(str(ROOT / "docs"))
    files = _bench_summaries.PAGES["which_estimator"][0]
    assert files[0] == "which-estimator.json" and len(files) > 2

    def part(rows: list[tuple[str, str, float]]) -> dict:
        return {
            "tables": [
                {
                    "columns": ["dataset", "method", "macro_f1", "fit_s"],
                    "rows": [
                        {"dataset": d, "method": m, "macro_f1": f1, "fit_s": 1.0, "n_seeds": 3}
                        for d, m, f1 in rows
                    ],
                }
            ]
        }

    (tmp_path / files[0]).write_text(json.dumps(part([("trec", "A", 1.0), ("cr", "A", 2.0)])))
    (tmp_path / files[1]).write_text(json.dumps(part([("trec", "B", 3.0)])))
    gpu = {**part([("trec", "A", 4.0)]), "config": {"device": "cuda"}}
    (tmp_path / files[-1]).write_text(json.dumps(gpu))
    text = _bench_summaries.summary("which_estimator", tmp_path)
    lines = text.splitlines()
    rows = [line.split("- ", 1)[1] for line in lines if line.startswith("   * - ")]
    assert rows[1:] == ["trec (macro-F1)"] * 3 + ["cr (macro-F1)"]
    # each row's method, the GPU run's tagged with its device
    methods = [
        lines[i + 1].split("- ", 1)[1]
        for i, x in enumerate(lines)
        if x in {f"   * - {r}" for r in rows[1:]}
    ]
    assert methods == ["A", "B", "A (cuda)", "A"]
    (tmp_path / files[-1]).unlink()
    assert f"``benchmarks/results/{files[1]}``" in text
    assert files[2] not in text  # absent parts are left out
    # the first part alone: the page as before
    (tmp_path / files[1]).unlink()
    text = _bench_summaries.summary("which_estimator", tmp_path)
    assert files[1] not in text and text.count("(macro-F1)") >= 2


@pytest.mark.slow  # three quick TF-IDF + XR-Linear runs on 2 busy cores
@pytest.mark.skipif(
    not (Path(os.environ.get("SKXMC_DATA", "/nonexistent")) / "trec").is_dir(),
    reason="needs the reference data (SKXMC_DATA)",
)
def test_run_resumes_from_the_seeds_it_finished(tmp_path: Path) -> None:
    """``--checkpoint-dir``: a later session asking for another seed keeps the finished
    one (its record, not a refit), and a rerun with other settings is refused."""
    we = _suite()
    ck, out = tmp_path / "ck", tmp_path / "out"

    def run(*extra: str) -> subprocess.CompletedProcess:
        command = ["which-estimator", "--quick", "--datasets", "trec_ir50", "--methods", we.XRL]
        resume = ["--checkpoint-dir", str(ck), "--out", str(out)]
        return subprocess.run(
            [sys.executable, "-m", "benchmarks", *command, *resume, *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    first = run("--seeds", "0")
    assert first.returncode == 0, first.stderr[-3000:]
    seed0 = json.loads((out / "which-estimator.json").read_text())["runs"][0]
    second = run("--seeds", "0", "1")
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"trec_ir50/{we.XRL}/seed0: finished in an earlier session" in second.stdout
    result = json.loads((out / "which-estimator.json").read_text())
    assert [r["seed"] for r in result["runs"]] == [0, 1]
    assert result["runs"][0] == seed0  # the record, not a second fit's timings
    assert result["config"]["fits_kept_from_earlier_sessions"] == [f"trec_ir50/{we.XRL}/seed0"]
    assert result["tables"][0]["rows"][0]["n_seeds"] == 2
    other = run("--seeds", "0", "--threads", "1")
    assert other.returncode != 0 and "threads: 2 then, 1 now" in other.stderr


def test_embeddings_cache_folder_is_made_before_encoding(tmp_path: Path, monkeypatch) -> None:
    """A fresh checkout has no cache folder: the encoding child must find one to save to
    (it once encoded goemotions for minutes, then failed at the save)."""
    we = _suite()
    cache = tmp_path / "results" / "cache"
    monkeypatch.setattr(we, "CACHE", cache)

    def child(target: str, **kwargs) -> dict:
        Path(kwargs["path"]).write_bytes(b"saved")  # as np.savez would
        return {}

    monkeypatch.setattr(we, "in_child", child)
    path = we._embeddings("goemotions", "encoder", False, [0])
    assert Path(path).read_bytes() == b"saved" and Path(path).parent == cache
