"""CPU dry runs of the GPU kit (``python -m benchmarks.gpu``, issue 50 item 4): each
method's pack step and its one-command run with a tiny random encoder and a few steps on
a tiny slice write the harness's JSON with the expected rows; a run past its budget
stops cleanly and keeps what finished."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
import types
from pathlib import Path

import pytest

from ._helpers import run_module

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("benchmarks.gpu", reason="run from the repository root")


def _data_or_skip(*names: str) -> None:
    from skxmc.datasets import get_data_dir

    root = get_data_dir()
    if root is None or not all((root / n).is_dir() for n in names):
        pytest.skip(f"reference data {names} absent (set SKXMC_DATA)")


def _gpu(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    # $OUT is the device tool's return folder: a dry run here must not write into it
    return run_module("benchmarks.gpu", *args, timeout=timeout, unset=("OUT",))


def _dry_run(method: str, tmp_path: Path, *extra: str) -> dict:
    pack = tmp_path / f"{method}.zip"
    _gpu("pack", method, "--tiny", "--path", str(pack))
    _gpu("run", method, "--tiny", "--pack", str(pack), "--out", str(tmp_path / "out"), *extra)
    result = json.loads((tmp_path / "out" / f"gpu-{method}.json").read_text())
    assert result["suite"] == f"gpu-{method}" and result["quick"] is True
    assert result["command"].startswith(f"python -m benchmarks.gpu run {method} --tiny")
    assert (tmp_path / "out" / f"gpu-{method}.md").is_file()
    assert (tmp_path / method / "data").is_dir()  # unpacked beside the pack
    return result


def _rows(table: dict) -> list[str]:
    return [r["row"] for r in table["rows"]]


@pytest.mark.slow
def test_matchxml_dry_run_chooses_lambda_on_dev_and_runs_table_xii(tmp_path: Path) -> None:
    _data_or_skip("tibkat_gnd_en")
    from benchmarks.gpu import matchxml

    result = _dry_run("matchxml", tmp_path)
    assert result["finished"] is True and result["config"]["skipped"] == []
    grid, ablation = result["tables"]
    assert sorted(r["lambda"] for r in grid["rows"]) == sorted(matchxml.LAMBDAS_TINY)
    assert {r["row"] for r in grid["rows"]} == {matchxml.FULL}
    assert sorted(_rows(ablation)) == sorted([*matchxml.ROWS, matchxml.BASELINE])
    chosen = result["config"]["chosen_lambda"]["0"]
    dev = {r["lambda"]: r["P@1"] for r in grid["rows"]}
    assert dev[chosen] == max(dev.values())  # chosen on dev, not test
    by_row = {r["row"]: r for r in ablation["rows"]}
    assert by_row[matchxml.FULL]["lambda"] == chosen
    assert by_row["3: label2vec + matching"]["lambda"] == chosen
    assert by_row["1: PIFA tree + hinge"]["lambda"] is None
    for run in result["runs"]:
        assert 0 <= run["P@1"] <= 100 and run["fit_s"] > 0
        if run["row"] != matchxml.BASELINE:
            assert run["stage_steps"] and all(n == 3 for n in run["stage_steps"])
    assert {r["split"] for r in result["runs"]} == {"dev", "test"}
    logs = (tmp_path / "out" / "gpu-matchxml-logs.txt").read_text()
    assert logs.count("### s0-") == len(result["runs"]) // 2  # one tail per child
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "gpu-matchxml-logs.txt",
        "gpu-matchxml.json",
        "gpu-matchxml.md",
    ]


@pytest.mark.slow
def test_sharprecl_dry_run_writes_the_comparison_rows(tmp_path: Path) -> None:
    _data_or_skip("trec")
    from benchmarks.gpu import sharprecl

    result = _dry_run("sharprecl", tmp_path, "--seeds", "0")
    assert result["finished"] is True
    (table,) = result["tables"]
    assert _rows(table) == sharprecl.MAIN
    assert {r["dataset"] for r in table["rows"]} == {"trec_ir50"}
    assert result["config"]["weight_decay"] == 5e-4 and result["config"]["device"] == "cpu"
    assert all(0 <= r["accuracy"] <= 100 for r in result["runs"])


@pytest.mark.slow
def test_knnbert_dry_run_scores_the_three_heads(tmp_path: Path) -> None:
    _data_or_skip("trec")
    result = _dry_run("knnbert", tmp_path, "--seeds", "0")
    (table,) = result["tables"]
    assert _rows(table) == [
        "plain CE",
        "KNN-BERT linear head",
        "KNN-BERT phi=0.5",
        "kNN only",
    ]
    fits = {r["fit_s"] for r in result["runs"] if r["row"] != "plain CE"}
    assert len(fits) == 1  # one KNN-BERT fit, scored three ways


@pytest.mark.slow
def test_snm_dry_run_writes_snm_uniform_and_xrlinear(tmp_path: Path) -> None:
    _data_or_skip("bibtex_bow")
    result = _dry_run("snm", tmp_path, "--seeds", "0")
    (table,) = result["tables"]
    assert _rows(table) == ["SNM k=1", "uniform", "XR-Linear"]
    assert all(r["dataset"] == "bibtex_bow" and 0 < r["P@1"] <= 100 for r in table["rows"])


@pytest.mark.parametrize("inherited", ["python", "ignored"])
def test_the_watchdog_stops_a_run_and_keeps_what_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inherited: str
) -> None:
    """A method that never ends: the budget's SIGINT stops it, the runs recorded before
    stay in the JSON, which says the run did not finish, and the command returns 0. Also
    when the process inherited SIGINT ignored (started with ``nohup ... &``): the run once
    went on forever there."""
    monkeypatch.setattr(os, "environ", dict(os.environ))  # the runner sets variables
    handler = signal.SIG_IGN if inherited == "ignored" else signal.default_int_handler
    previous = signal.signal(signal.SIGINT, handler)
    try:
        _watchdog_run(tmp_path)
        assert signal.getsignal(signal.SIGINT) == handler  # given back as it was
    finally:
        signal.signal(signal.SIGINT, previous)


def _watchdog_run(tmp_path: Path) -> None:
    from benchmarks.gpu import __main__ as cli
    from benchmarks.gpu import _kit

    pack = _kit.pack("fake", {}, encoder=False, gensim=False, path=tmp_path / "fake.zip")

    def run(args: argparse.Namespace, budget: _kit.Budget, rec: _kit.Recorder) -> None:
        began = time.monotonic()
        # one "fit" every 50 ms, written as it finishes; "never" ends: 10 s, so that a
        # watchdog that fails makes the test fail instead of hanging
        while time.monotonic() - began < 10:
            rec.add({"row": "fit", "seed": 0, "left_s": budget.left()})
            rec.write()
            time.sleep(0.05)

    method = types.SimpleNamespace(SEEDS=(0,), run=run)
    out = str(tmp_path / "out")
    argv = ["run", "snm", "--pack", str(pack), "--out", out, "--budget", "0.5", "--device", "cpu"]
    args = cli._parser().parse_args(argv)
    start = time.monotonic()
    assert cli._run(args, method, ["run", "snm"]) == 0
    assert time.monotonic() - start < 5
    result = json.loads((tmp_path / "out" / "gpu-snm.json").read_text())
    assert result["finished"] is False and "budget ran out" in result["note"]
    assert len(result["runs"]) >= 2 and all(r["left_s"] > -0.5 for r in result["runs"])
    assert (tmp_path / "snm" / "MANIFEST.json").is_file()  # unpacked beside the pack


def test_unpack_makes_folders_of_folder_entries_and_gzips_text_parts(tmp_path: Path) -> None:
    """Wheels hold folder entries (``gensim/``): they become folders, not files, and the
    files under them unpack; text parts come out as the ``.jsonl.gz`` the loaders read."""
    import gzip
    import zipfile

    from benchmarks.gpu import _kit

    pack = tmp_path / "m.zip"
    with zipfile.ZipFile(pack, "w") as z:
        z.writestr("site/pkg/", b"")
        z.writestr("site/pkg/__init__.py", b"X = 1\n")
        z.writestr("data/s/train.jsonl", b'{"text": "a", "labels": ["x"]}\n', zipfile.ZIP_LZMA)
        z.writestr("MANIFEST.json", json.dumps({"gensim": True}))
    assert _kit.unpack(pack, tmp_path / "m") == {"gensim": True}
    assert (tmp_path / "m" / "site" / "pkg" / "__init__.py").read_text() == "X = 1\n"
    with gzip.open(tmp_path / "m" / "data" / "s" / "train.jsonl.gz", "rt") as fh:
        assert json.loads(fh.read())["labels"] == ["x"]
    assert _kit.unpack(pack, tmp_path / "m") == {"gensim": True}  # a second time: no-op
