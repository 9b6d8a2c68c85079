"""The benchmark harness: ``python -m benchmarks linear --quick`` writes its results with
their context, and the docs tables and results index are generated, not typed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ._helpers import run_module

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("benchmarks._docs", reason="run from the repository root")


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_module("benchmarks", *args, timeout=timeout)


def _run_here(*args: str) -> None:
    """``python -m benchmarks *args`` in this process: the commands that only read and
    write files need no interpreter of their own (``_run`` tests the entry point)."""
    from benchmarks.__main__ import main

    assert main(list(args)) == 0


def test_linear_quick_writes_results_with_context(tmp_path: Path) -> None:
    _run("linear", "--quick", "--out", str(tmp_path))
    result = json.loads((tmp_path / "linear.json").read_text())
    assert result["suite"] == "linear" and result["quick"] is True
    assert result["command"] == f"python -m benchmarks linear --quick --out {tmp_path}"
    assert len(result["commit"]) == 40 or result["commit"] == "unknown"
    machine = result["machine"]
    assert machine["cores"] >= 1 and machine["cpu"] and "numpy" in machine["versions"]
    assert result["seeds"] == [0]
    (table,) = result["tables"]
    assert table["rows"], "no row measured"
    row = table["rows"][0]
    assert row["n_seeds"] == 1 and row["P@1_std"] is None  # one seed: no std
    assert 0 < row["P@1"] <= 100 and row["fit_s"] > 0
    text = (tmp_path / "linear.md").read_text()
    assert "Commit:" in text and "Machine:" in text and "Seeds: 0" in text
    # one scale for every table and printout, named in the header: percent, PSP normalised
    assert result["psp"] == "normalised"
    assert "## XR-Linear (metrics in percent; PSP normalised)" in text
    assert "| PSP@5 (normalised) |" in text

    # the docs table and the index, from that output, into temporary folders
    out = tmp_path / "generated"
    _run_here("tables", "--results", str(tmp_path), "--out", str(out))
    (inc,) = out.glob("linear-*.inc")
    rst = inc.read_text()
    assert ".. list-table:: XR-Linear (metrics in percent; PSP normalised)" in rst
    assert "- PSP@5 (normalised)" in rst
    _run_here("index", "--results", str(tmp_path))
    assert "`linear.json`" in (tmp_path / "INDEX.md").read_text()


def test_thresholds_quick_compares_the_decision_rules(tmp_path: Path) -> None:
    """Issue 48 item 8: the rules are chosen on dev and reported on test."""
    from skxmc.datasets import get_data_dir

    data = get_data_dir()
    if data is None or not (data / "tibkat_gnd_en" / "dev.jsonl.gz").is_file():
        pytest.skip("tibkat_gnd_en not found (set SKXMC_DATA)")
    _run_here("thresholds", "--quick", "--out", str(tmp_path))
    (table,) = json.loads((tmp_path / "thresholds.json").read_text())["tables"]
    rules = {row["rule"]: row for row in table["rows"]}
    assert {"top_k", "global threshold", "global threshold + top-1"} <= set(rules)
    assert rules["global threshold + top-1"]["test empty rows"] == 0
    assert all(0 <= row["test sample F1"] <= 1 for row in table["rows"])


@pytest.mark.slow  # about 17 s: four fresh interpreters and a skops round trip
def test_persistence_quick_measures_label_names_and_skops(tmp_path: Path) -> None:
    _run("persistence", "--quick", "--out", str(tmp_path))
    tables = {t["id"]: t for t in json.loads((tmp_path / "persistence.json").read_text())["tables"]}
    (row,) = tables["label-names"]["rows"]
    assert row["classes_ dtype"] == "object" and row["model_mb"] > 0
    if "skops" in tables:  # absent without skops
        assert {r["same top-10"] for r in tables["skops"]["rows"]} == {"yes"}


@pytest.mark.slow  # about 20 s of CPU: seven candidate members and two fits of each kind
def test_ensemble_quick_chooses_on_dev_within_the_time_budget(tmp_path: Path) -> None:
    """Issue 49 item 1: feature-diverse members chosen on dev, within 3x the best single
    member's fit time, reported on test."""
    from skxmc.datasets import get_data_dir

    data = get_data_dir()
    if data is None or not (data / "tibkat_gnd_en" / "dev.jsonl.gz").is_file():
        pytest.skip("tibkat_gnd_en not found (set SKXMC_DATA)")
    _run("ensemble", "--quick", "--out", str(tmp_path), timeout=600)
    result = json.loads((tmp_path / "ensemble.json").read_text())
    selection = result["config"]["selection"]
    assert selection["best_single"] == max(
        selection["dev_P@1_single"], key=selection["dev_P@1_single"].get
    )
    assert all(t["fit_s"] <= selection["budget_s"] for t in selection["trials"])
    # The budget is confirmed on the ensemble's own fit: the chosen trial is the best on
    # dev among those whose members' confirmed fit is within it, and every better trial's
    # members were timed over it.
    ratio = {tuple(c["members"]): c["fit_ratio"] for c in selection["confirmations"]}
    chosen = selection["chosen"]
    better = [t for t in selection["trials"] if chosen is None or t["dev_P@1"] > chosen["dev_P@1"]]
    assert all(ratio.get(tuple(t["members"]), 0) > 3 for t in better)
    if chosen is not None:
        assert ratio[tuple(chosen["members"])] <= 3
    (table,) = result["tables"]
    models = {row["model"]: row for row in table["rows"]}
    assert set(models) == {"best single member", "RankerEnsemble"}
    assert all(0 < row["P@1"] <= 100 and row["fit_s"] > 0 for row in table["rows"])


def test_summarise_uses_sample_std() -> None:
    from benchmarks._harness import summarise

    runs = [{"row": "a", "seed": s, "x": v} for s, v in enumerate([1.0, 2.0, 4.0])]
    (row,) = summarise(runs, ["row"], ["x"])
    assert row["x"] == pytest.approx(7 / 3)
    assert row["x_std"] == pytest.approx(1.5275252, rel=1e-6)  # ddof=1
    assert row["n_seeds"] == 3 and row["seeds"] == [0, 1, 2]


def test_table_headers_name_the_psp_scale_of_old_files() -> None:
    """Files written before the harness marked them hold un-normalised PSP: their headers
    say so; tables without ranking metrics keep their title."""
    from benchmarks._harness import header_columns, render_markdown, table_heading

    table = {"title": "T", "columns": ["row", "P@1", "PSP@5", "PSnDCG@3", "fit_s"], "rows": []}
    old, new = {}, {"psp": "normalised"}
    assert header_columns(old, table["columns"]) == [
        "row",
        "P@1",
        "PSP@5 (un-normalised)",
        "PSnDCG@3 (un-normalised)",
        "fit_s",
    ]
    assert header_columns(new, table["columns"])[2] == "PSP@5 (normalised)"
    assert table_heading(old, table) == "T (metrics in percent; PSP un-normalised)"
    assert table_heading(new, {**table, "columns": ["row", "P@1"]}) == "T (metrics in percent)"
    assert table_heading(new, {**table, "columns": ["row", "accuracy"]}) == "T"
    result = {"suite": "s", "command": "c", "commit": "x", "date": "d", "machine": {}}
    text = render_markdown({**result, "tables": [table]})
    assert "## T (metrics in percent; PSP un-normalised)" in text
    assert "| row | P@1 | PSP@5 (un-normalised) |" in text


def test_docs_tables_are_generated_and_current(tmp_path: Path) -> None:
    """Every committed docs include is what ``python -m benchmarks tables`` writes from the
    results JSON today (and every suite's ``.md`` is current), and every include a page
    names exists."""
    from benchmarks._docs import GENERATED, includes, write_tables

    written = write_tables(out=tmp_path)
    stale = [p.name for p in written if p.suffix == ".md"]
    assert not stale, f"run: python -m benchmarks tables ({stale})"
    fresh = {p.name: p.read_text() for p in written}
    committed = {p.name: p.read_text() for p in GENERATED.glob("*.inc")}
    assert fresh == committed, "run: python -m benchmarks tables"
    missing = sorted(set(includes()) - set(committed))
    assert not missing, f"pages include missing tables: {missing}"


def test_index_is_current() -> None:
    from benchmarks._docs import RESULTS, kept

    listed = (RESULTS / "INDEX.md").read_text()
    keep = kept()
    for name in keep:
        assert f"`{name}`" in listed, f"{name}: run python -m benchmarks index"
    uncited = [
        p.name
        for p in RESULTS.iterdir()
        if p.is_file() and p.name != "INDEX.md" and p.name not in keep
    ]
    assert not uncited, f"results no page cites (python -m benchmarks index --prune): {uncited}"


def test_training_settings_follow_the_estimator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suites' estimators get one ``training=TrainingConfig(...)`` where they take it
    (the settings the config has; the rest stay flat) and flat keywords otherwise."""
    import dataclasses

    import skxmc.text
    from benchmarks._data import training_settings

    @dataclasses.dataclass
    class Config:
        max_epochs: int = 1
        batch_size: int = 8

    monkeypatch.setattr(skxmc.text, "TrainingConfig", Config, raising=False)

    class New:
        def __init__(self, training=None, device="cpu", random_state=0) -> None: ...

    class Old:
        def __init__(self, max_epochs=1, device="cpu") -> None: ...

    new = training_settings(New, max_epochs=3, batch_size=4, device="cpu", random_state=1)
    assert new == {"training": Config(3, 4), "device": "cpu", "random_state": 1}
    assert training_settings(Old, max_epochs=3, device="cpu") == {"max_epochs": 3, "device": "cpu"}


@pytest.mark.slow  # about 15 s: libpecos fine-tunes a tiny encoder in its own interpreter
def test_matchxml_quick_runs_pecos_xtransformer_as_peer(tmp_path: Path) -> None:
    """Issue 50 item 2: XR-Transformer beside TF-IDF + XR-Linear on the same data; without
    a libpecos interpreter the row is skipped and the results say so."""
    from skxmc.datasets import get_data_dir

    data = get_data_dir()
    if data is None or not (data / "reuters21578_allcats").is_dir():
        pytest.skip("reuters21578_allcats not found (set SKXMC_DATA)")
    rows = ("--rows", "TF-IDF + XR-Linear", "PECOS XR-Transformer", "--out", str(tmp_path))
    python = os.environ.get("SKXMC_PECOS_PYTHON")
    _run("matchxml", "--quick", *rows, *(["--pecos-python", python] if python else []))
    result = json.loads((tmp_path / "matchxml.json").read_text())
    measured = {row["row"]: row for row in result["tables"][0]["rows"]}
    if not python:
        assert set(measured) == {"TF-IDF + XR-Linear"}
        assert "PECOS XR-Transformer" in result["config"]["skipped"][0]
        return
    peer = measured["PECOS XR-Transformer"]
    assert 0 < peer["P@1"] <= 100 and peer["fit_s"] > 0 and peer["predict_s"] > 0
    assert abs(peer["P@1"] - measured["TF-IDF + XR-Linear"]["P@1"]) < 30  # same labels


@pytest.mark.slow
def test_text_suite_resumes_a_run_stopped_by_its_budget(tmp_path: Path) -> None:
    ck, out = tmp_path / "ck", tmp_path / "out"
    args = ("sharprecl", "--quick", "--seeds", "0", "--rows", "plain CE")
    first = run_module(
        "benchmarks",
        *args,
        "--checkpoint-dir",
        str(ck),
        "--budget",
        "0.001",
        "--out",
        str(out),
        timeout=600,
        check=False,
    )
    # the budget stops the fit after its first step, keeps its checkpoint, writes nothing
    assert first.returncode != 0 and "run the same command again" in first.stderr
    assert "stopped by --budget after 1 steps" in first.stdout
    assert not (out / "sharprecl.json").exists() and any(ck.iterdir())
    run_module("benchmarks", *args, "--checkpoint-dir", str(ck), "--out", str(out), timeout=600)
    (row,) = json.loads((out / "sharprecl.json").read_text())["tables"][0]["rows"]
    spent = json.loads((ck / "seconds.json").read_text())
    # the fit's seconds are those of both sessions
    assert row["fit_s"] == pytest.approx(sum(spent.values())) and len(spent) == 1
    assert [json.loads(line)["key"] for line in (ck / "records.jsonl").open()] == [
        "sharprecl_ohsumed_titles/plain CE/seed0"
    ]


def test_results_name_the_commit_checked_out_when_the_run_started(tmp_path, monkeypatch):
    # A long run whose checkout moves (a merge mid-run) must not be credited to the
    # new commit: the start commit is the record, the end one is kept beside it.
    import types

    from benchmarks import __main__ as cli
    from benchmarks import _harness

    commits = iter(["a" * 40, "b" * 40, "b" * 40])
    monkeypatch.setattr(
        _harness, "git_commit", lambda: {"commit": next(commits), "skxmc_dirty": False}
    )
    suite = types.SimpleNamespace(SEEDS=(0,), add_arguments=lambda parser: None)
    suite.run = lambda args: {"tables": []}
    monkeypatch.setattr(cli, "load", lambda name: suite)
    assert cli.main(["linear", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "linear.json").read_text())
    assert result["commit"] == "a" * 40 and result["commit_at_end"] == "b" * 40


def test_results_say_how_the_run_was_scheduled():
    from benchmarks import _harness

    assert _harness.machine()["scheduler"] in ("normal", "fifo", "rr")
    result = {"suite": "s", "command": "c", "commit": "x", "date": "d", "tables": []}
    fifo = _harness.render_markdown({**result, "machine": {"scheduler": "fifo", "nice": 0}})
    assert "real-time priority (fifo)" in fifo
    niced = _harness.render_markdown({**result, "machine": {"scheduler": "normal", "nice": 19}})
    assert ", nice 19" in niced and "real-time" not in niced


def test_finished_fits_are_kept_and_a_run_with_other_settings_refused(tmp_path: Path) -> None:
    from benchmarks._harness import FinishedFits

    first = FinishedFits(tmp_path, {"steps": 150, "max_length": 64})
    assert first.get("tibkat/MatchXML/seed0") is None
    first.save("tibkat/MatchXML/seed0", [{"P@1": 45.0}])
    again = FinishedFits(tmp_path, {"max_length": 64, "steps": 150})  # order is no setting
    assert again.get("tibkat/MatchXML/seed0") == [{"P@1": 45.0}]
    assert again.get("tibkat/MatchXML/seed1") is None
    with pytest.raises(SystemExit, match=r"steps: 150 then, 30 now"):
        FinishedFits(tmp_path, {"steps": 30, "max_length": 64})
    assert FinishedFits(None, {"steps": 1}).get("tibkat/MatchXML/seed0") is None


@pytest.mark.slow  # two quick TF-IDF + XR-Linear runs of the matchxml suite
def test_matchxml_run_resumes_from_its_finished_fits(tmp_path: Path) -> None:
    from skxmc.datasets import get_data_dir

    data = get_data_dir()
    if data is None or not (data / "reuters21578_allcats").is_dir():
        pytest.skip("reuters21578_allcats not found (set SKXMC_DATA)")
    ck, out = tmp_path / "ck", tmp_path / "out"
    args = ("matchxml", "--quick", "--rows", "TF-IDF + XR-Linear", "--checkpoint-dir", str(ck))
    _run(*args, "--seeds", "0", "--out", str(out), timeout=600)
    # a later session asks for one more seed: seed 0's fit is kept, not run again
    second = _run(*args, "--seeds", "0", "1", "--out", str(out), timeout=600)
    assert "reuters21578_allcats/TF-IDF + XR-Linear/seed0: finished in an earlier" in second.stdout
    result = json.loads((out / "matchxml.json").read_text())
    assert [r["seed"] for r in result["runs"]] == [0, 1]
    assert result["config"]["fits_kept_from_earlier_sessions"] == [
        "reuters21578_allcats/TF-IDF + XR-Linear/seed0"
    ]
    kept = [json.loads(line)["key"] for line in (ck / "records.jsonl").open()]
    assert kept == [f"reuters21578_allcats/TF-IDF + XR-Linear/seed{s}" for s in (0, 1)]
    other = run_module("benchmarks", *args, "--max-train", "500", timeout=600, check=False)
    assert other.returncode != 0 and "holds a run with other settings" in other.stderr


@pytest.mark.slow  # one quick SharpReCL fit
def test_text_suite_scores_a_dev_split_held_out_of_train(tmp_path: Path) -> None:
    from skxmc.datasets import get_data_dir

    data = get_data_dir()
    if data is None or not (data / "sharprecl_ohsumed_titles").is_dir():
        pytest.skip("sharprecl_ohsumed_titles not found (set SKXMC_DATA)")
    args = ("sharprecl", "--quick", "--seeds", "0", "--rows", "plain CE", "--out", str(tmp_path))
    _run(*args, "--dev-fraction", "0.25", timeout=600)
    result = json.loads((tmp_path / "sharprecl.json").read_text())
    (run,) = result["runs"]
    # the quick slice's 120 training texts: 90 train, 30 scored, none of the test split's
    assert (run["n_train"], run["n_scored"]) == (90, 30)
    assert result["config"]["dev_fraction"] == 0.25
    assert "dev" in result["tables"][0]["caption"] and "dev" in result["config"]["scored_split"]
    refused = run_module("benchmarks", *args, "--dev-fraction", "1.5", timeout=600, check=False)
    assert refused.returncode != 0 and "--dev-fraction must be between 0 and 1" in refused.stderr
