"""The ``skxmc`` command line: demo, fit / predict / evaluate round trip, errors."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from skxmc import __version__
from skxmc.cli import main
from skxmc.datasets import load_demo


def test_demo_prints_metrics(capsys):
    assert main(["demo", "--n-jobs", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("| P |", "| nDCG |", "| PSP |", "fit ", "predict ", "XRLinearClassifier"):
        assert name in out
    p_at_1 = float(out.split("| P |")[1].split("|")[0])
    assert 10 < p_at_1 <= 100  # a real model on real data, in percent


@pytest.fixture(scope="module")
def jsonl_files(tmp_path_factory):
    demo = load_demo()
    root = tmp_path_factory.mktemp("cli")
    train, test = root / "train.jsonl.gz", root / "test.jsonl"
    with gzip.open(train, "wt", encoding="utf-8") as fh:
        for text, labels in zip(demo.train_texts[:2000], demo.train_labels[:2000]):
            fh.write(json.dumps({"text": text, "labels": labels}) + "\n")
    with open(test, "w", encoding="utf-8") as fh:
        for text, labels in zip(demo.test_texts[:300], demo.test_labels[:300]):
            fh.write(json.dumps({"text": text, "labels": labels}) + "\n")
    return root, train, test


def test_fit_predict_evaluate_round_trip(jsonl_files, capsys):
    root, train, test = jsonl_files
    model = root / "model"
    assert main(["fit", "--train", str(train), "--model-dir", str(model), "--min-df", "1"]) == 0
    preds = root / "preds.jsonl"
    assert main(["predict", "--model-dir", str(model), "--input", str(test),
                 "--output", str(preds), "--top-k", "5"]) == 0
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert len(lines) == 300
    assert all(len(r["labels"]) == 5 and r["scores"] == sorted(r["scores"], reverse=True)
               for r in lines)
    capsys.readouterr()
    assert main(["evaluate", "--true", str(test), "--pred", str(preds),
                 "--train", str(train), "--ks", "1,5"]) == 0
    out = capsys.readouterr().out
    assert "| P |" in out and "| PSP |" in out
    p_at_1 = float(out.split("| P |")[1].split("|")[0])
    assert 5 < p_at_1 <= 100


def test_fit_refuses_to_clobber(jsonl_files, capsys):
    root, train, _ = jsonl_files
    mine = root / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("precious")
    assert main(["fit", "--train", str(train), "--model-dir", str(mine)]) == 1
    assert main(["fit", "--train", str(train), "--model-dir", str(mine), "--overwrite"]) == 1
    assert (mine / "keep.txt").read_text() == "precious"
    err = capsys.readouterr().err
    assert "not empty" in err and "holds no skxmc model" in err


def test_evaluate_line_mismatch(jsonl_files, tmp_path, capsys):
    _, _, test = jsonl_files
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"labels": ["x"]}\n')
    assert main(["evaluate", "--true", str(test), "--pred", str(preds)]) == 1
    assert "--pred has 1 lines but --true has 300" in capsys.readouterr().err


def test_python_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "skxmc", "--version"], capture_output=True, text=True, check=True
    )
    assert __version__ in out.stdout


def test_bad_arguments_exit_nonzero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert main(["demo", "--beam-size", "0"]) == 2
    assert "--beam-size must be >= 1" in capsys.readouterr().err
    assert main(["predict", "--model-dir", "/no/such", "--input", "/no/such.jsonl"]) == 1
