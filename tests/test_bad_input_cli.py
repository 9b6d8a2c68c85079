"""Bad input to the loaders and the command line (reliability sweep, issue 21).

Table-driven: every ``5-loaders`` case must raise an error naming the file (and the line
where one is known), every ``9-cli`` case must print ``skxmc <cmd>: error: ...`` and exit
with the CLI's status for user errors (1; 2 for a bad option value, as argparse does),
never a traceback. Property tests truncate and corrupt real files at random; an
interrupted ``skxmc fit --overwrite`` must leave the previous model working (B14).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skxmc
from skxmc.cli import main
from skxmc.datasets import load_demo, load_text_jsonl, load_xc_bow

N_TRAIN = 200  # enough for a real model with --min-df 1, small enough to fit in a second


def _jsonl_bytes(texts, labels) -> bytes:
    lines = (json.dumps({"text": t, "labels": sorted(y)}) for t, y in zip(texts, labels))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _xc_bytes(seed: int = 0, n: int = 12, n_features: int = 20, n_labels: int = 8) -> bytes:
    rng = np.random.default_rng(seed)
    lines = [f"{n} {n_features} {n_labels}"]
    for _ in range(n):
        labels = sorted(rng.choice(n_labels, size=rng.integers(0, 3), replace=False))
        features = sorted(rng.choice(n_features, size=rng.integers(1, 5), replace=False))
        pairs = " ".join(f"{f}:{rng.random():.4f}" for f in features)
        lines.append(",".join(map(str, labels)) + " " + pairs)
    return ("\n".join(lines) + "\n").encode("ascii")


@pytest.fixture(scope="module")
def demo():
    return load_demo()


@dataclass
class Files:
    """The files a case builds its command line from."""

    root: Path
    train: Path  # plain JSON lines, N_TRAIN records
    test: Path  # plain JSON lines, 30 records with labels
    model: Path  # a model directory written by ``skxmc fit``
    preds: Path  # predictions of ``model`` on ``test``

    def write(self, name: str, data: bytes) -> Path:
        path = self.root / name
        path.write_bytes(data)
        return path


@pytest.fixture(scope="module")
def files(tmp_path_factory, demo) -> Files:
    root = tmp_path_factory.mktemp("bad-input")
    train = root / "train.jsonl"
    train.write_bytes(_jsonl_bytes(demo.train_texts[:N_TRAIN], demo.train_labels[:N_TRAIN]))
    test = root / "test.jsonl"
    test.write_bytes(_jsonl_bytes(demo.test_texts[:30], demo.test_labels[:30]))
    model, preds = root / "model", root / "preds.jsonl"
    fit = ["fit", "--train", str(train), "--model-dir", str(model), "--min-df", "1"]
    assert main([*fit, "--n-jobs", "1"]) == 0
    predict = ["predict", "--model-dir", str(model), "--input", str(test), "--output"]
    assert main([*predict, str(preds)]) == 0
    return Files(root, train, test, model, preds)


def _unwritable_dir(root: Path) -> Path:
    """A folder in which creating anything fails, for root too where possible."""
    if os.geteuid() != 0:
        locked = root / "locked"
        locked.mkdir(exist_ok=True)
        locked.chmod(0o500)
        return locked
    try:  # root ignores permission bits; sysfs refuses new entries to everyone
        os.mkdir("/sys/skxmc-probe")
    except PermissionError:
        return Path("/sys")
    except OSError:
        pass
    else:
        os.rmdir("/sys/skxmc-probe")
    pytest.skip("no folder here refuses writes to this user")


# ---------------------------------------------------------------------------------------
# 5-loaders: errors name the file and the line


def _truncated_gz(data: bytes) -> bytes:
    gz = _gzip(data)
    return gz[: len(gz) // 2]


def _gz_without_trailer(data: bytes) -> bytes:
    return _gzip(data)[:-8]


def _gz_flipped_byte(data: bytes) -> bytes:
    gz = bytearray(_gzip(data))
    gz[-6] ^= 0x55  # in the stored CRC: every line reads, then the CRC check fails
    return bytes(gz)


def _gz_flipped_data_byte(data: bytes) -> bytes:
    gz = bytearray(_gzip(data))
    gz[len(gz) // 2] ^= 0x55  # mid-stream: garbage lines, a zlib error or a CRC failure
    return bytes(gz)


def _latin1_on_line(line_no: int, gz: bool = False) -> Callable[[bytes], bytes]:
    def corrupt(data: bytes) -> bytes:
        lines = data.split(b"\n")
        lines[line_no - 1] = lines[line_no - 1].replace(b'"text": "', b'"text": "caf\xe9 ', 1)
        out = b"\n".join(lines)
        return _gzip(out) if gz else out

    return corrupt


def _xc_edit(line_no: int, edit: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """Apply ``edit`` to line ``line_no`` (1-based, the header is line 1) of an XC file."""

    def corrupt(data: bytes) -> bytes:
        lines = data.split(b"\n")
        lines[line_no - 1] = edit(lines[line_no - 1])
        return b"\n".join(lines)

    return corrupt


def _first_value(value: bytes) -> Callable[[bytes], bytes]:
    """Replace the value of the first ``feature:value`` pair of a line."""

    def edit(line: bytes) -> bytes:
        labels, pair, rest = (
            line.split(b" ", 2) if line.count(b" ") > 1 else (*line.split(b" "), b"")
        )
        return b" ".join(p for p in (labels, pair.split(b":")[0] + b":" + value, rest) if p)

    return edit


JSONL = "jsonl"
XC = "xc"

# (id, format, make the bad bytes from a good file's bytes, regexes the message must match)
LOADER_CASES = [
    ("5-loaders-jsonl-gz-truncated", JSONL, _truncated_gz, [r"truncated or corrupt"]),
    ("5-loaders-jsonl-gz-no-trailer", JSONL, _gz_without_trailer, [r"truncated or corrupt"]),
    ("5-loaders-jsonl-gz-crc", JSONL, _gz_flipped_byte, [r"truncated or corrupt"]),
    (
        "5-loaders-jsonl-gz-bad-data-byte",
        JSONL,
        _gz_flipped_data_byte,
        [r"truncated or corrupt|line \d+ is not valid"],
    ),
    ("5-loaders-jsonl-latin1", JSONL, _latin1_on_line(6), [r"line 6 is not valid UTF-8", "0xe9"]),
    (
        "5-loaders-jsonl-gz-latin1",
        JSONL,
        _latin1_on_line(4, gz=True),
        [r"line 4 is not valid UTF-8"],
    ),
    (
        "5-loaders-jsonl-missing-text",
        JSONL,
        lambda d: d + b'{"title": "x", "labels": ["a"]}\n',
        [r"line 11: the record has no 'text' field"],
    ),
    (
        "5-loaders-jsonl-missing-labels",
        JSONL,
        lambda d: b'{"text": "x", "labels": []}\n{"text": "y"}\n' + d,
        [r"line 2: the record has neither 'labels' nor 'label'"],
    ),
    (
        "5-loaders-jsonl-bad-json",
        JSONL,
        lambda d: d + b"\n" + b'{"text": "x", "labels": [}\n',
        [r"line 12 is not valid JSON"],
    ),
    (
        "5-loaders-xc-nan",
        XC,
        _xc_edit(2, _first_value(b"nan")),
        [r"line 2 has a non-finite", "nan"],
    ),
    (
        "5-loaders-xc-inf",
        XC,
        _xc_edit(4, _first_value(b"-inf")),
        [r"line 4 has a non-finite", "-inf"],
    ),
    (
        "5-loaders-xc-float32-overflow",
        XC,
        _xc_edit(2, _first_value(b"1e39")),
        [r"line 2 has a non-finite or float32-overflowing", "1e"],
    ),
    ("5-loaders-xc-gz-truncated", XC, _truncated_gz, [r"truncated or corrupt"]),
    ("5-loaders-xc-gz-crc", XC, _gz_flipped_byte, [r"truncated or corrupt"]),
    (
        "5-loaders-xc-latin1",
        XC,
        _xc_edit(4, lambda line: line + b" \xe9"),
        [r"line 4 is not valid UTF-8"],
    ),
]


def _good_bytes(kind: str, demo) -> bytes:
    if kind == JSONL:
        return _jsonl_bytes(demo.train_texts[:10], demo.train_labels[:10])
    return _xc_bytes()


@pytest.mark.parametrize(
    ("kind", "make_bad", "patterns"),
    [case[1:] for case in LOADER_CASES],
    ids=[case[0] for case in LOADER_CASES],
)
def test_loader_errors_name_file_and_line(tmp_path, demo, kind, make_bad, patterns):
    path = tmp_path / ("bad.jsonl.gz" if kind == JSONL else "bad.txt")
    path.write_bytes(make_bad(_good_bytes(kind, demo)))
    loader = load_text_jsonl if kind == JSONL else load_xc_bow
    with pytest.raises(ValueError) as exc:
        loader(path)
    message = str(exc.value)
    assert str(path) in message, message
    for pattern in patterns:
        assert re.search(pattern, message), (pattern, message)


def test_5_loaders_crlf_still_reads(tmp_path, demo):
    # Lines are now split on bytes; Windows line ends must still read as before.
    data = _jsonl_bytes(demo.train_texts[:5], demo.train_labels[:5])
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(data.replace(b"\n", b"\r\n"))
    assert load_text_jsonl(path)[0] == demo.train_texts[:5]
    xc = tmp_path / "crlf.txt"
    xc.write_bytes(_xc_bytes().replace(b"\n", b"\r\n"))
    (tmp_path / "lf.txt").write_bytes(_xc_bytes())
    X, Y = load_xc_bow(xc)
    X0, Y0 = load_xc_bow(tmp_path / "lf.txt")
    assert (X != X0).nnz == 0 and (Y != Y0).nnz == 0


# ---------------------------------------------------------------------------------------
# 5-loaders: random truncation and corruption of real files (property tests)

PROPERTY = settings(max_examples=40, deadline=timedelta(seconds=10))


def _load_or_error(loader, path: Path):
    """The loader's result, or None after checking the error is one the contract allows."""
    try:
        return loader(path)
    except (ValueError, OSError) as exc:
        assert str(path) in str(exc), f"{type(exc).__name__} without the file name: {exc}"
        return None


@pytest.fixture(scope="module")
def prop_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prop")


@pytest.fixture(scope="module")
def jsonl_original(demo):
    texts, labels = demo.train_texts[:20], demo.train_labels[:20]
    return _jsonl_bytes(texts, labels), list(texts), [set(y) for y in labels]


@PROPERTY
@given(gz=st.booleans(), cut=st.floats(0, 1))
def test_5_loaders_jsonl_truncated_is_prefix_or_error(prop_dir, jsonl_original, gz, cut):
    data, texts, labels = jsonl_original
    data = _gzip(data) if gz else data
    path = prop_dir / "trunc.jsonl"
    path.write_bytes(data[: int(cut * len(data))])
    got = _load_or_error(load_text_jsonl, path)
    if got is not None:
        n = len(got[0])
        assert got[0] == texts[:n] and [set(y) for y in got[1]] == labels[:n]
        assert not gz or n in (0, len(texts))  # gzip: nothing, or a complete stream


@PROPERTY
@given(
    gz=st.booleans(),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_5_loaders_jsonl_corrupted_parses_or_names_file(prop_dir, jsonl_original, gz, flips):
    data, texts, labels = jsonl_original
    data = bytearray(_gzip(data) if gz else data)
    for where, xor in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= xor
    path = prop_dir / "corrupt.jsonl"
    path.write_bytes(bytes(data))
    got = _load_or_error(load_text_jsonl, path)
    if got is not None:
        assert len(got[0]) == len(got[1])
        if gz and data[:2] == b"\x1f\x8b":  # the CRC lets only harmless header flips through
            assert got[0] == texts and [set(y) for y in got[1]] == labels


@pytest.fixture(scope="module")
def xc_original(prop_dir):
    data = _xc_bytes(seed=1)
    path = prop_dir / "xc-good.txt"
    path.write_bytes(data)
    X, Y = load_xc_bow(path)
    return data, X.toarray(), Y.toarray()


@PROPERTY
@given(gz=st.booleans(), cut=st.floats(0, 1))
def test_5_loaders_xc_truncated_is_prefix_or_error(prop_dir, xc_original, gz, cut):
    data, X0, Y0 = xc_original
    data = _gzip(data) if gz else data
    path = prop_dir / "trunc.txt"
    path.write_bytes(data[: int(cut * len(data))])
    got = _load_or_error(load_xc_bow, path)
    if got is not None:
        # The header fixes the number of points: only a cut in the last line can parse.
        X, Y = (M.toarray() for M in got)
        assert X.shape == X0.shape and Y.shape == Y0.shape
        assert (X[:-1] == X0[:-1]).all() and (Y[:-1] == Y0[:-1]).all()
        assert not gz or ((X == X0).all() and (Y == Y0).all())


@PROPERTY
@given(
    gz=st.booleans(),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_5_loaders_xc_corrupted_parses_or_names_file(prop_dir, xc_original, gz, flips):
    data, X0, Y0 = xc_original
    data = bytearray(_gzip(data) if gz else data)
    for where, xor in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= xor
    path = prop_dir / "corrupt.txt"
    path.write_bytes(bytes(data))
    got = _load_or_error(load_xc_bow, path)
    if got is not None:
        X, Y = got
        assert X.shape[0] == Y.shape[0] and np.isfinite(X.data).all()
        if gz and data[:2] == b"\x1f\x8b":
            assert (X.toarray() == X0).all() and (Y.toarray() == Y0).all()


# ---------------------------------------------------------------------------------------
# 9-cli: a user error is one line on stderr and exit status 1 (2 for option values)

EXIT_USER_ERROR = 1  # what the CLI has always returned for ValueError / FileNotFoundError
EXIT_USAGE = 2  # argparse's status for a bad option value


def _fit(f: Files, train: Path, model: Path | None = None, *extra: str) -> list[str]:
    model = model if model is not None else f.root / "new-model"
    return ["fit", "--train", str(train), "--model-dir", str(model), "--n-jobs", "1", *extra]


def _predict(f: Files, output: str | Path, input_path: Path | None = None) -> list[str]:
    inp = input_path if input_path is not None else f.test
    return ["predict", "--model-dir", str(f.model), "--input", str(inp), "--output", str(output)]


def _evaluate(f: Files, pred: Path, *extra: str) -> list[str]:
    return ["evaluate", "--true", str(f.test), "--pred", str(pred), *extra]


def _pred_lines(f: Files, edit: Callable[[int, dict], dict]) -> bytes:
    records = [json.loads(line) for line in f.preds.read_text().splitlines()]
    return "".join(json.dumps(edit(i, r)) + "\n" for i, r in enumerate(records)).encode()


def _train_records(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


# (id, build argv from Files, exit status, substrings of stderr; "{root}" is Files.root)
CLI_CASES: list[tuple[str, Callable[[Files], list[str]], int, list[str]]] = [
    (
        "9-cli-fit-model-dir-is-a-file",
        lambda f: _fit(f, f.train, f.write("a-file", b"x"), "--min-df", "1"),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "a-file", "is a file"],
    ),
    (
        "9-cli-fit-model-dir-below-a-file",
        lambda f: _fit(f, f.train, f.write("b-file", b"x") / "model", "--min-df", "1"),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "b-file", "is a file"],
    ),
    (
        "9-cli-fit-truncated-gz",
        lambda f: _fit(f, f.write("t.jsonl.gz", _truncated_gz(f.train.read_bytes()))),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "t.jsonl.gz", "truncated or corrupt"],
    ),
    (
        "9-cli-fit-corrupt-gz",
        lambda f: _fit(f, f.write("c.jsonl.gz", _gz_flipped_byte(f.train.read_bytes()))),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "c.jsonl.gz", "truncated or corrupt"],
    ),
    (
        "9-cli-fit-non-utf8",
        lambda f: _fit(f, f.write("latin.jsonl", _latin1_on_line(3)(f.train.read_bytes()))),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "latin.jsonl", "line 3 is not valid UTF-8"],
    ),
    (
        "9-cli-fit-empty-train",
        lambda f: _fit(f, f.write("empty.jsonl", b"")),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "empty.jsonl", "has no records"],
    ),
    (
        "9-cli-fit-no-usable-text",
        lambda f: _fit(
            f,
            f.write(
                "blank.jsonl",
                _train_records(*({"text": " ", "labels": ["a"]} for _ in range(5))),
            ),
        ),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "blank.jsonl", "has no usable text"],
    ),
    (
        "9-cli-fit-single-record",
        lambda f: _fit(
            f, f.write("one.jsonl", _train_records({"text": "a real title", "labels": ["x"]}))
        ),
        EXIT_USER_ERROR,
        ["skxmc fit: error:", "one.jsonl", "1 record(s), fewer than --min-df 2"],
    ),
    (
        "9-cli-predict-output-is-a-directory",
        lambda f: _predict(f, f.root),
        EXIT_USER_ERROR,
        ["skxmc predict: error:", "--output", "is a directory"],
    ),
    (
        "9-cli-predict-output-is-the-input",
        lambda f: _predict(f, f.test),
        EXIT_USER_ERROR,
        ["skxmc predict: error:", "is the --input file"],
    ),
    (
        "9-cli-predict-output-folder-missing",
        lambda f: _predict(f, f.root / "no-such-folder" / "p.jsonl"),
        EXIT_USER_ERROR,
        ["skxmc predict: error:", "no-such-folder", "does not exist"],
    ),
    (
        "9-cli-predict-input-non-utf8",
        lambda f: _predict(
            f, f.root / "p.jsonl", f.write("in.jsonl", _latin1_on_line(2)(f.test.read_bytes()))
        ),
        EXIT_USER_ERROR,
        ["skxmc predict: error:", "in.jsonl", "line 2 is not valid UTF-8"],
    ),
    (
        "9-cli-predict-truncated-arrays",
        lambda f: [
            "predict",
            "--model-dir",
            str(_truncated_copy(f)),
            "--input",
            str(f.test),
        ],
        EXIT_USER_ERROR,
        ["skxmc predict: error:", "truncated-model"],
    ),
    (
        "9-cli-evaluate-true-truncated-gz",
        lambda f: [
            "evaluate",
            "--true",
            str(f.write("true.jsonl.gz", _truncated_gz(f.test.read_bytes()))),
            "--pred",
            str(f.preds),
        ],
        EXIT_USER_ERROR,
        ["skxmc evaluate: error:", "true.jsonl.gz", "truncated or corrupt"],
    ),
    (
        "9-cli-evaluate-pred-truncated-gz",
        lambda f: _evaluate(f, f.write("pred.jsonl.gz", _truncated_gz(f.preds.read_bytes()))),
        EXIT_USER_ERROR,
        ["skxmc evaluate: error:", "pred.jsonl.gz", "truncated or corrupt"],
    ),
    (
        "9-cli-evaluate-ks-letter",
        lambda f: _evaluate(f, f.preds, "--ks", "a"),
        EXIT_USAGE,
        ["skxmc evaluate: error: argument --ks:", "positive integers", "'a'"],
    ),
    (
        "9-cli-evaluate-ks-empty",
        lambda f: _evaluate(f, f.preds, "--ks", ""),
        EXIT_USAGE,
        ["skxmc evaluate: error: argument --ks:", "''"],
    ),
    (
        "9-cli-evaluate-ks-zero",
        lambda f: _evaluate(f, f.preds, "--ks", "1,0"),
        EXIT_USAGE,
        ["skxmc evaluate: error: argument --ks:", ">= 1"],
    ),
    (
        "9-cli-evaluate-scores-shorter-than-labels",
        lambda f: _evaluate(
            f,
            f.write(
                "short.jsonl",
                _pred_lines(f, lambda i, r: {**r, "scores": r["scores"][:-1]} if i == 0 else r),
            ),
        ),
        EXIT_USER_ERROR,
        ["skxmc evaluate: error:", "short.jsonl: line 1", "one score per label; got 9 for 10"],
    ),
    (
        "9-cli-evaluate-string-scores",
        lambda f: _evaluate(
            f,
            f.write(
                "strings.jsonl",
                _pred_lines(f, lambda i, r: {**r, "scores": ["high"] * 10} if i == 1 else r),
            ),
        ),
        EXIT_USER_ERROR,
        ["skxmc evaluate: error:", "strings.jsonl: line 2", "must be numbers", "'high'"],
    ),
    (
        "9-cli-evaluate-scores-not-a-list",
        lambda f: _evaluate(
            f,
            f.write(
                "scalar.jsonl",
                _pred_lines(f, lambda i, r: {**r, "scores": 1.0} if i == 4 else r),
            ),
        ),
        EXIT_USER_ERROR,
        ["skxmc evaluate: error:", "scalar.jsonl: line 5", "one score per label"],
    ),
]


def _truncated_copy(f: Files) -> Path:
    copy = f.root / "truncated-model"
    if not copy.exists():
        shutil.copytree(f.model, copy)
        arrays = copy / "arrays.npz"
        arrays.write_bytes(arrays.read_bytes()[: arrays.stat().st_size // 2])
    return copy


@pytest.mark.parametrize(
    ("build", "status", "expected"),
    [case[1:] for case in CLI_CASES],
    ids=[case[0] for case in CLI_CASES],
)
def test_cli_user_errors(files, capsys, build, status, expected):
    argv = build(files)
    test_before = files.test.read_bytes()
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == status, err
    for text in expected:
        assert text in err, (text, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3, err
    assert files.test.read_bytes() == test_before  # the input is never written to
    assert not (files.root / "new-model").exists()


def test_9_cli_unwritable_model_dir_fails_before_training(files, capsys, monkeypatch):
    from skxmc.pipeline import Pipeline

    def no_fit(*args, **kwargs):
        raise AssertionError("trained although --model-dir cannot be written")

    monkeypatch.setattr(Pipeline, "fit", no_fit)
    target = _unwritable_dir(files.root) / "skxmc-model"
    assert main(_fit(files, files.train, target, "--min-df", "1")) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "skxmc fit: error:" in err and "cannot be written" in err and str(target) in err
    assert "checked before training" in err
    assert not target.exists()


def test_9_cli_unwritable_output(files, capsys):
    target = _unwritable_dir(files.root) / "preds.jsonl"
    assert main(_predict(files, target)) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "skxmc predict: error:" in err and "--output" in err and str(target) in err
    assert "cannot be written" in err and "Traceback" not in err


def test_9_cli_stdin_non_utf8_names_the_line(files, capsys, monkeypatch):
    data = _latin1_on_line(3)(files.test.read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert main(_predict(files, files.root / "p-stdin.jsonl", Path("-"))) == EXIT_USER_ERROR
    assert "<stdin>: line 3 is not valid UTF-8" in capsys.readouterr().err


def test_9_cli_no_traceback_in_a_real_process(files):
    """One case end to end through ``python -m skxmc``: what a shell user sees."""
    bad = files.write("proc.jsonl.gz", _truncated_gz(files.train.read_bytes()))
    proc = subprocess.run(
        [sys.executable, "-m", "skxmc", *_fit(files, bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_USER_ERROR
    assert proc.stderr.startswith("skxmc fit: error:") and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------
# B14: `skxmc fit --overwrite` killed while saving keeps the previous model whole

# Runs `skxmc fit` and kills the process (os._exit: no cleanup, like kill -9) at one point
# of the save, recognised from the calls it makes on the model's folder: before or after the
# arrays are written, or just before the new folder is moved in (a rename, or the atomic
# exchange of skxmc.io._directory where there is one).
_CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import skxmc.io._directory as directory
    from skxmc.cli import main

    point, root, argv = sys.argv[1], sys.argv[2], sys.argv[3:]

    def inside(path):
        return os.path.abspath(os.fspath(path)).startswith(root)

    real_savez = np.savez

    def savez(file, *args, **kwargs):
        if inside(file) and point == "before-arrays":
            os._exit(137)
        real_savez(file, *args, **kwargs)
        if inside(file) and point == "after-arrays":
            os._exit(137)

    np.savez = savez

    def exit_before(real):
        def move(src, dst, *args, **kwargs):
            if inside(src) and point == "before-swap":
                os._exit(137)
            return real(src, dst, *args, **kwargs)

        return move

    os.rename, os.replace = exit_before(os.rename), exit_before(os.replace)
    directory.exchange = exit_before(directory.exchange)
    sys.exit(main(argv))
    """
)


@pytest.mark.parametrize("point", ["before-arrays", "after-arrays", "before-swap"])
def test_b14_fit_overwrite_killed_mid_save_keeps_the_old_model(files, demo, tmp_path, point):
    model = tmp_path / "model"
    shutil.copytree(files.model, model)
    old_labels, old_scores = skxmc.load(model).predict_topk(demo.test_texts[:30], k=5)
    # A different training set: a new ranker with the old vocabulary would mispredict.
    other = tmp_path / "other.jsonl"
    other.write_bytes(
        _jsonl_bytes(demo.train_texts[N_TRAIN : 2 * N_TRAIN], demo.train_labels[N_TRAIN:])
    )
    argv = [*_fit(files, other, model, "--min-df", "1"), "--overwrite"]
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH_SCRIPT, point, str(tmp_path), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 137, proc.stdout + proc.stderr  # killed there, not finished
    labels, scores = skxmc.load(model).predict_topk(demo.test_texts[:30], k=5)
    assert (labels == old_labels).all()
    np.testing.assert_array_equal(scores, old_scores)
    # `skxmc predict` uses it as before, and the next fit replaces it.
    predict = ["predict", "--model-dir", str(model), "--input", str(files.test)]
    assert main([*predict, "--output", str(tmp_path / "p.jsonl")]) == 0
    assert main(argv) == 0
    assert not (skxmc.load(model).predict_topk(demo.test_texts[:30], k=5)[0] == old_labels).all()


def test_9_cli_predict_points_to_a_model_moved_aside(files, tmp_path, capsys):
    # Where the swap is two renames (no atomic exchange), a kill between them leaves the
    # old model in the hidden ``.<name>.old`` folder; predict says so instead of "missing".
    shutil.copytree(files.model, tmp_path / ".model.old")
    argv = ["predict", "--model-dir", str(tmp_path / "model"), "--input", str(files.test)]
    assert main(argv) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "skxmc predict: error:" in err and ".model.old" in err and "rename it back" in err


def test_9_cli_overwrite_with_foreign_files_fails_before_training(files, capsys, monkeypatch):
    import shutil

    from skxmc.pipeline import Pipeline

    target = files.root / "model-with-notes"
    shutil.copytree(files.model, target)
    (target / "notes.txt").write_text("mine")

    def no_fit(*args, **kwargs):
        raise AssertionError("trained although the overwrite would be refused")

    monkeypatch.setattr(Pipeline, "fit", no_fit)
    argv = _fit(files, files.train, target, "--min-df", "1", "--overwrite")
    assert main(argv) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "skxmc fit: error:" in err and "notes.txt" in err
    assert (target / "notes.txt").read_text() == "mine"
