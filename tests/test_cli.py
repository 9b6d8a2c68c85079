"""The ``skxmc`` command line: demo, fit / predict / evaluate round trip, model directories
shared with skxmc.save / skxmc.load, standard input and output, Ctrl-C, errors."""

from __future__ import annotations

import gzip
import io
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

import skxmc
from skxmc import XRLinearClassifier, __version__
from skxmc.cli import main
from skxmc.datasets import load_demo
from skxmc.pipeline import Pipeline, make_pipeline

SKXMC = [sys.executable, "-m", "skxmc"]


def _assert_demo_report(out: str) -> None:
    for name in ("| P |", "| nDCG |", "| PSP (normalised) |", "fit ", "predict "):
        assert name in out
    assert "| metric (percent) |" in out  # the header names the scale
    p_at_1 = float(out.split("| P |")[1].split("|")[0])
    assert 10 < p_at_1 <= 100  # a real model on real data, in percent
    psp_at_1 = float(out.split("| PSP (normalised) |")[1].split("|")[0])
    assert 0 < psp_at_1 <= 100 and "normalised by the best achievable ranking" in out


@pytest.mark.slow  # the whole demo data set; `make wheel-check` runs the demo too
def test_demo_prints_metrics(capsys):
    assert main(["demo", "--n-jobs", "2"]) == 0
    _assert_demo_report(capsys.readouterr().out)


def test_demo_prints_metrics_on_a_slice(monkeypatch, capsys):
    # The demo command on a third of its data: the same report, a few times faster.
    from sklearn.utils import Bunch

    import skxmc.datasets

    demo = load_demo()
    n_train, n_test = len(demo.train_texts) // 3, len(demo.test_texts) // 3
    small = Bunch(
        **{
            **demo,
            "train_texts": demo.train_texts[:n_train],
            "train_labels": demo.train_labels[:n_train],
            "test_texts": demo.test_texts[:n_test],
            "test_labels": demo.test_labels[:n_test],
        }
    )
    monkeypatch.setattr(skxmc.datasets, "load_demo", lambda: small)
    assert main(["demo", "--n-jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{n_train} train / {n_test} test records" in out  # the slice was used
    _assert_demo_report(out)


@pytest.fixture(scope="module")
def jsonl_files(tmp_path_factory):
    demo = load_demo()
    root = tmp_path_factory.mktemp("cli")
    train, test = root / "train.jsonl.gz", root / "test.jsonl"
    with gzip.open(train, "wt", encoding="utf-8") as fh:
        for text, labels in zip(demo.train_texts[:2000], demo.train_labels[:2000]):
            fh.write(json.dumps({"text": text, "labels": sorted(labels)}) + "\n")
    with open(test, "w", encoding="utf-8") as fh:
        for text, labels in zip(demo.test_texts[:300], demo.test_labels[:300]):
            fh.write(json.dumps({"text": text, "labels": sorted(labels)}) + "\n")
    return root, train, test


@pytest.fixture(scope="module")
def cli_model(jsonl_files):
    """A model directory written by ``skxmc fit``."""
    root, train, _ = jsonl_files
    model = root / "cli-model"
    args = ["fit", "--train", str(train), "--model-dir", str(model), "--min-df", "1"]
    assert main([*args, "--n-jobs", "1"]) == 0
    return model


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_fit_predict_evaluate_round_trip(jsonl_files, capsys):
    root, train, test = jsonl_files
    model = root / "model"
    assert main(["fit", "--train", str(train), "--model-dir", str(model), "--min-df", "1"]) == 0
    preds = root / "preds.jsonl"
    assert (
        main(
            [
                "predict",
                "--model-dir",
                str(model),
                "--input",
                str(test),
                "--output",
                str(preds),
                "--top-k",
                "5",
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert len(lines) == 300
    assert all(
        len(r["labels"]) == 5 and r["scores"] == sorted(r["scores"], reverse=True) for r in lines
    )
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                "--true",
                str(test),
                "--pred",
                str(preds),
                "--train",
                str(train),
                "--ks",
                "1,5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| metric (percent) |" in out and "| P |" in out and "| PSP (normalised) |" in out
    p_at_1 = float(out.split("| P |")[1].split("|")[0])
    assert 5 < p_at_1 <= 100
    psp = out.split("| PSP (normalised) |")[1].split("\n")[0].strip(" |").split("|")
    psp = [float(v) for v in psp]
    assert all(0 <= v <= 100 for v in psp)  # normalised, as the XMC literature prints it
    assert (
        main(
            [
                "evaluate",
                "--true",
                str(test),
                "--pred",
                str(preds),
                "--train",
                str(train),
                "--ks",
                "1,5",
                "--unnormalized",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| PSP (un-normalised) |" in out and "can exceed 100" in out
    assert "| metric (percent) |" in out


def test_fit_directory_loads_with_skxmc_load(cli_model, jsonl_files, capsys):
    # The user's call: skxmc fit on the command line, then skxmc.load in Python.
    root, _, test = jsonl_files
    clf = skxmc.load(cli_model)
    assert isinstance(clf, Pipeline)
    assert isinstance(clf[0], TfidfVectorizer) and isinstance(clf[-1], XRLinearClassifier)
    texts = [r["text"] for r in _read_jsonl(test)]
    labels, scores = clf.predict_topk(texts, k=3)
    preds = root / "preds-loaded.jsonl"
    assert (
        main(
            [
                "predict",
                "--model-dir",
                str(cli_model),
                "--input",
                str(test),
                "--output",
                str(preds),
                "--top-k",
                "3",
            ]
        )
        == 0
    )
    lines = _read_jsonl(preds)
    assert [r["labels"] for r in lines] == labels.tolist()
    np.testing.assert_allclose([r["scores"] for r in lines], scores, atol=1e-6)


def test_predict_reads_a_pipeline_saved_by_skxmc_save(jsonl_files, tmp_path, capsys):
    _, _, test = jsonl_files
    demo = load_demo()
    pipe = make_pipeline(TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier(top_k=4))
    pipe.fit(demo.train_texts[:800], demo.train_labels[:800])
    model = skxmc.save(pipe, tmp_path / "saved")
    preds = tmp_path / "preds.jsonl"
    assert (
        main(["predict", "--model-dir", str(model), "--input", str(test), "--output", str(preds)])
        == 0
    )
    texts = [r["text"] for r in _read_jsonl(test)]
    assert [r["labels"] for r in _read_jsonl(preds)] == pipe.predict_topk(texts)[0].tolist()
    # a lone ranker has no text front end: a clear error, not a traceback
    pipe[-1].save(tmp_path / "ranker")
    assert main(["predict", "--model-dir", str(tmp_path / "ranker"), "--input", str(test)]) == 1


def test_explain_writes_paths_and_named_features(
    cli_model, jsonl_files, tmp_path, monkeypatch, capsys
):
    import io

    _, _, test = jsonl_files
    records = _read_jsonl(test)[:12]
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "explained.jsonl"
    args = ["explain", "--model-dir", str(cli_model), "--input", str(small)]
    assert main([*args, "--output", str(out), "--k", "2", "--features", "3"]) == 0
    lines = _read_jsonl(out)
    model = skxmc.load(cli_model)
    texts = [r["text"] for r in records]
    expected = model.explain(texts, 2, n_features=3)
    assert len(lines) == len(texts)
    for line, row, text in zip(lines, expected, texts):
        assert [e["label"] for e in line["explanations"]] == [e.label for e in row]
        for e in line["explanations"]:
            assert e["path"][-1]["path_score"] == pytest.approx(e["score"], rel=1e-5)
            assert 0 < len(e["features"]) <= 3
            assert all(f["name"] in text.lower() for f in e["features"])  # TF-IDF terms
    # labels as predict gives them
    assert [[e["label"] for e in line["explanations"]] for line in lines] == model.predict_topk(
        texts, k=2
    )[0].tolist()
    # standard input to standard output
    monkeypatch.setattr("sys.stdin", io.StringIO(small.read_text(encoding="utf-8")))
    capsys.readouterr()
    assert main(["explain", "--model-dir", str(cli_model), "--input", "-", "--top-k", "1"]) == 0
    piped = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [len(r["explanations"]) for r in piped] == [1] * len(texts)
    # the clusters' features too
    assert main([*args, "--output", str(out), "--k", "1", "--node-features"]) == 0
    for line in _read_jsonl(out):
        (e,) = line["explanations"]
        assert all(n["features"] for n in e["path"][:-1]) and e["path"][-1]["features"] == []
    assert main([*args, "--features", "-1"]) == 1
    assert main([*args, "--k", "0"]) == 2
    assert main([*args, "--neighbors", "2"]) == 1
    assert "--neighbors does not apply" in capsys.readouterr().err
    # a predict-only model keeps no node weights: the reason, not a traceback
    lean = tmp_path / "lean"
    skxmc.save(model, lean, predict_only=True)
    assert main(["explain", "--model-dir", str(lean), "--input", str(small)]) == 1
    assert "predict-only" in capsys.readouterr().err


def test_old_cli_layout_still_predicts_and_is_replaced_by_fit(jsonl_files, tmp_path, capsys):
    # ranker/ + vectorizer.json: what skxmc fit wrote before it saved a pipeline.
    from skxmc._vectorizers import vectorizer_to_state

    _, train, test = jsonl_files
    demo = load_demo()
    pipe = make_pipeline(TfidfVectorizer(min_df=2, dtype=np.float32), XRLinearClassifier(top_k=3))
    pipe.fit(demo.train_texts[:800], demo.train_labels[:800])
    old = tmp_path / "old"
    pipe[-1].save(old / "ranker")
    state, arrays = vectorizer_to_state(pipe[0])
    state["arrays"] = {k: v.tolist() for k, v in arrays.items()}
    (old / "vectorizer.json").write_text(json.dumps(state), encoding="utf-8")

    texts = [r["text"] for r in _read_jsonl(test)]
    assert skxmc.load(old).predict_topk(texts)[0].tolist() == pipe.predict_topk(texts)[0].tolist()
    preds = tmp_path / "preds.jsonl"
    assert (
        main(["predict", "--model-dir", str(old), "--input", str(test), "--output", str(preds)])
        == 0
    )
    assert [r["labels"] for r in _read_jsonl(preds)] == pipe.predict_topk(texts)[0].tolist()
    capsys.readouterr()
    assert main(["info", str(old)]) == 0  # describes the old layout too
    out = capsys.readouterr().out
    assert "XRLinearClassifier" in out and f"labels:     {len(pipe[-1].classes_)}" in out
    assert "vectorizer.json" in out
    # an old model directory counts as a model: --overwrite replaces it with the new layout
    assert main(["fit", "--train", str(train), "--model-dir", str(old)]) == 1
    assert main(["fit", "--train", str(train), "--model-dir", str(old), "--overwrite"]) == 0
    assert sorted(p.name for p in old.iterdir()) == ["README.md", "arrays.npz", "skxmc-model.json"]


def test_predict_reads_stdin_and_writes_stdout(cli_model, jsonl_files, monkeypatch, capsys):
    _, _, test = jsonl_files
    out = subprocess.run(
        [
            *SKXMC,
            "predict",
            "--model-dir",
            str(cli_model),
            "--input",
            "-",
            "--output",
            "-",
            "--top-k",
            "2",
        ],
        stdin=open(test, encoding="utf-8"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 300 and all(len(r["labels"]) == 2 for r in lines)
    # and the predictions go on to evaluate from standard input (in this process: the
    # real pipe out of a process is the part above)
    stdin = io.TextIOWrapper(io.BytesIO(out.stdout.encode("utf-8")), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["evaluate", "--true", str(test), "--pred", "-"]) == 0
    assert "| P |" in capsys.readouterr().out


def test_closed_stdout_exits_quietly(cli_model, jsonl_files, tmp_path):
    # `skxmc predict ... | head -1`, with far more output than a pipe buffers.
    _, _, test = jsonl_files
    many = tmp_path / "many.jsonl"
    many.write_text(test.read_text(encoding="utf-8") * 10, encoding="utf-8")
    command = " ".join(
        [*SKXMC, "predict", "--model-dir", str(cli_model), "--input", str(many), "--top-k", "10"]
    )
    out = subprocess.run(
        ["bash", "-c", f'{command} | head -1; echo "status ${{PIPESTATUS[0]}}" >&2'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0
    assert len(out.stdout.splitlines()) == 1 and json.loads(out.stdout)["labels"]
    assert "Traceback" not in out.stderr and "Error" not in out.stderr, out.stderr
    assert out.stderr.strip() in ("status 0", "status 141")  # 141: the shell's SIGPIPE code


def test_ctrl_c_exits_130_without_traceback(jsonl_files, tmp_path):
    _, train, _ = jsonl_files
    model = tmp_path / "model"
    proc = subprocess.Popen(
        [
            *SKXMC,
            "fit",
            "--train",
            str(train),
            "--model-dir",
            str(model),
            "--min-df",
            "1",
            "--n-jobs",
            "1",
            "-v",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell without job control starts background jobs with SIGINT ignored, and
        # Python keeps an inherited SIG_IGN: reset it, so that the test does not depend on
        # how pytest was started.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    stderr = []
    try:
        for line in proc.stderr:  # wait until training has started
            stderr.append(line)
            if "training records" in line:
                break
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = "".join(stderr) + rest
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "interrupted" in stderr
    # nothing half-written is left behind
    assert not model.exists() and not [p for p in tmp_path.iterdir() if p.name != "model"]


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


def test_predict_streams_in_batches_and_leaves_no_partial_output(
    cli_model, jsonl_files, tmp_path, monkeypatch
):
    # batches of 7 texts give the predictions of one call; a bad record after the first
    # batches leaves no --output file (written aside, moved in at the end)
    from skxmc import cli

    _, _, test = jsonl_files
    whole = tmp_path / "whole.jsonl"
    args = ["predict", "--model-dir", str(cli_model), "--input", str(test), "--output"]
    assert main([*args, str(whole)]) == 0
    from skxmc.pipeline import Pipeline

    sizes = []
    original = Pipeline.predict_topk

    def counted(self, X, *a, **kw):
        sizes.append(len(X))
        return original(self, X, *a, **kw)

    monkeypatch.setattr(Pipeline, "predict_topk", counted)
    monkeypatch.setattr(cli, "_PREDICT_BATCH", 7)
    batched = tmp_path / "batched.jsonl"
    assert main([*args, str(batched)]) == 0
    assert batched.read_text() == whole.read_text()
    assert max(sizes) == 7 and sum(sizes) == len(whole.read_text().splitlines())
    bad = tmp_path / "bad.jsonl"
    lines = test.read_text(encoding="utf-8").splitlines()
    bad.write_text("\n".join([*lines[:20], '{"text": 3}', *lines[20:]]) + "\n")
    out = tmp_path / "out.jsonl"
    args[4] = str(bad)
    assert main([*args, str(out)]) == 1
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if "skxmc" in p.name] == []


# ------------------------------------------------------------ issue 48 item 16 (CLI)


def _six_label_file(path):
    words = {"a": "cat dog", "b": "bank money", "c": "sea fish", "d": "ball game"}
    words |= {"e": "car road", "f": "sun rain"}
    names = sorted(words)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(30):
            chosen = [names[i % 6], names[(i + 2) % 6]]
            fh.write(json.dumps({"text": " ".join(words[c] for c in chosen), "labels": chosen}))
            fh.write("\n")
    return path


def test_fit_reads_the_training_file_from_stdin(tmp_path, monkeypatch, capsys):
    import io

    train = _six_label_file(tmp_path / "t.jsonl")
    monkeypatch.setattr(sys, "stdin", io.StringIO(train.read_text(encoding="utf-8")))
    model = tmp_path / "m"
    assert main(["fit", "--train", "-", "--model-dir", str(model), "--min-df", "1"]) == 0
    assert "trained XRLinearClassifier on 30 samples, 6 labels" in capsys.readouterr().out
    assert sorted(skxmc.load(model).classes_) == list("abcdef")
    assert "standard input" in (model / "README.md").read_text(encoding="utf-8")
    # a bad line is named as a line of <stdin>
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "x", "labels": ["a"]}\n{bad\n'))
    assert main(["fit", "--train", "-", "--model-dir", str(tmp_path / "m2")]) == 1
    assert "<stdin>: line 2" in capsys.readouterr().err


def test_warnings_are_one_clean_line(tmp_path, capsys):
    train = _six_label_file(tmp_path / "t.jsonl")
    model = tmp_path / "m"
    assert main(["fit", "--train", str(train), "--model-dir", str(model), "--min-df", "1"]) == 0
    capsys.readouterr()
    assert main(["predict", "--model-dir", str(model), "--input", str(train)]) == 0
    err = capsys.readouterr().err
    # 26aef59: ".../pipeline.py:95: UserWarning: top_k=10 exceeds ..." and the source line
    assert "skxmc predict: warning: top_k=10 exceeds the 6 labels" in err
    assert "UserWarning" not in err and ".py:" not in err


def test_verbose_progress_is_one_log_style_on_stderr(tmp_path, capsys):
    train = _six_label_file(tmp_path / "t.jsonl")
    model = tmp_path / "m"
    args = ["fit", "--train", str(train), "--model-dir", str(model), "--min-df", "1", "-v"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    # stdout: the command's result only; 26aef59 printed XR-Linear's layer lines there
    assert out.splitlines() == [line for line in out.splitlines() if line.startswith("trained")]
    assert "skxmc.linear._xrlinear: layer 1/1" in err
    assert "skxmc.cli: read 30 training records" in err
    # the estimators print again outside the command line
    from skxmc._logging import _PRINT

    assert _PRINT[0] is True


def test_predict_writes_each_batch_before_reading_the_next(cli_model, jsonl_files, monkeypatch):
    # standard input to standard output: when line 15 is read, the predictions of the
    # first two batches of 7 are written already (memory holds one batch, not the input)
    import io

    from skxmc import cli

    _, _, test = jsonl_files
    lines = test.read_text(encoding="utf-8").splitlines(keepends=True)
    out = io.StringIO()
    written_when_read = {}

    class Stdin:  # no .buffer: read line by line as text
        def __iter__(self):
            for i, line in enumerate(lines):
                written_when_read[i] = out.getvalue().count("\n")
                yield line

    monkeypatch.setattr(cli, "_PREDICT_BATCH", 7)
    monkeypatch.setattr("sys.stdin", Stdin())
    monkeypatch.setattr("sys.stdout", out)
    assert main(["predict", "--model-dir", str(cli_model), "--input", "-"]) == 0
    assert out.getvalue().count("\n") == len(lines)
    assert written_when_read[14] == 14 and written_when_read[7] == 7
