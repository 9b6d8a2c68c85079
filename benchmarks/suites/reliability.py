"""Bad inputs and interrupted fits: every case ends in a clear error or a clean exit.

Two parts:

- **sweep**: the table-driven bad-input tests ``tests/**/test_bad_input_*.py`` (issue 21;
  the slow fault tests, kill -9 during ``fit`` and ``save``, included unless ``--quick``),
  run by pytest and counted per category of the reliability review;
- **ctrl-c**: ``skxmc fit`` on the first 2,000 demo texts (TF-IDF + XR-Linear) in a fresh
  process, SIGINT sent ``delay`` seconds after it logged that it read the training
  records. A fit that handles Ctrl-C exits 130 and prints ``interrupted``; a signal after
  the save ends the finished process (-2 or 0); anything else (a ``SystemError``, -11) is
  the failure the interruptible kernels prevent.

``--quick`` runs the sweep's file on XR-Linear without the slow tests and two Ctrl-C
moments. Replaces ``bad_input_sweep.py`` and ``ctrl_c_sweep.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

from benchmarks._harness import ROOT

SEEDS = (0,)  # nothing random: the seed is recorded for the format's sake
CATEGORIES = {
    "1-badX": "bad X",
    "2-bady": "bad y",
    "3-hyper": "hyperparameters",
    "4-metrics": "metrics",
    "5-loaders": "loaders",
    "6-persist": "persistence",
    "7-interrupt": "interruption",
    "9-cli": "CLI",
    "11-concurrency": "concurrency",
    "import": "import",
}
# Files whose cases carry no prefix: the category they all belong to.
FILE_DEFAULTS = {
    "test_bad_input_checkpoints.py": "7-interrupt",
    "test_bad_input_hyper.py": "3-hyper",
    "test_bad_input_persistence.py": "6-persist",
}
_PREFIX = re.compile(
    r"(?<![0-9])(1-badX|2-bady|3-hyper|4-metrics|5-loaders|6-persist|"
    r"7-interrupt|9-cli|11-concurrency|import)",
    re.IGNORECASE,
)
OUTCOMES = ("passed", "failed", "skipped", "xfailed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--parts", nargs="+", default=["sweep", "ctrl-c"], choices=["sweep", "ctrl-c"]
    )
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2], help="ctrl-c: threads")
    parser.add_argument(
        "--delays",
        type=float,
        nargs=3,
        default=[0.9, 2.2, 14],
        metavar=("LO", "HI", "N"),
        help="ctrl-c",
    )


def category(file: str, name: str) -> str:
    """The review category of one test case (``file``, and ``name`` with its parameter id)."""
    match = _PREFIX.search(name.replace("_", "-"))
    if match:
        found = match.group(1).lower()
        return next(key for key in CATEGORIES if key.lower() == found)
    if file == "test_bad_input_cli.py":
        return "5-loaders" if "loader" in name else "9-cli"
    if file == "test_bad_input_linear.py":
        return "7-interrupt" if "interrupt" in name else "1-badX"
    return FILE_DEFAULTS.get(file, "other")


def sweep(quick: bool) -> tuple[list[dict], float, str]:
    pattern = "tests/**/test_bad_input_linear.py" if quick else "tests/**/test_bad_input_*.py"
    files = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(pattern))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        marker = "not slow" if quick else "slow or not slow"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker]
        start = time.perf_counter()
        subprocess.run(
            [*cmd, f"--junitxml={report}", *files], cwd=ROOT, check=False, capture_output=True
        )
        seconds = time.perf_counter() - start
        counts: dict[str, Counter] = defaultdict(Counter)
        if report.is_file():
            for case in ET.parse(report).getroot().iter("testcase"):
                file = Path(case.get("classname", "").replace(".", "/")).name + ".py"
                outcome = "passed"
                for child in case:
                    if child.tag in ("failure", "error"):
                        outcome = "failed"
                    elif child.tag == "skipped":
                        outcome = "xfailed" if "xfail" in child.get("type", "") else "skipped"
                counts[category(file, case.get("name", ""))][outcome] += 1
    rows, total = [], Counter()
    for key in [*CATEGORIES, "other"]:
        if counts.get(key):
            total.update(counts[key])
            label = f"{key} ({CATEGORIES.get(key, 'other')})"
            rows.append({"category": label, "cases": sum(counts[key].values()), **counts[key]})
    rows.append({"category": "total", "cases": sum(total.values()), **total})
    for row in rows:
        for outcome in OUTCOMES:
            row.setdefault(outcome, 0)
    return rows, seconds, "pytest -m " + repr(marker) + " " + " ".join(files)


def ctrl_c_once(train: Path, model: Path, n_jobs: int, delay: float) -> dict:
    cmd = [sys.executable, "-m", "skxmc", "fit", "--train", str(train), "--model-dir", str(model)]
    cmd += ["--min-df", "1", "--n-jobs", str(n_jobs), "-v"]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for line in proc.stderr:
        if "training records" in line:
            break
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if proc.returncode == 130 and "interrupted" in last:
        outcome = "130 interrupted"
    elif "saved" in err and proc.returncode in (0, -2):
        outcome = "finished and saved before the signal"
    elif "SystemError" in err:
        outcome = "SystemError"
    else:
        outcome = f"exit {proc.returncode}"
    return {
        "n_jobs": n_jobs,
        "delay_s": round(delay, 3),
        "exit_code": proc.returncode,
        "outcome": outcome,
    }


def ctrl_c(n_jobs: list[int], delays: list[float]) -> list[dict]:
    from skxmc.datasets import load_demo

    demo = load_demo()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        train = Path(tmp) / "train.jsonl.gz"
        with gzip.open(train, "wt", encoding="utf-8") as fh:
            for text, labels in zip(demo.train_texts[:2000], demo.train_labels[:2000]):
                fh.write(json.dumps({"text": text, "labels": sorted(labels)}) + "\n")
        for jobs in n_jobs:
            for i, delay in enumerate(delays):
                runs.append(ctrl_c_once(train, Path(tmp) / f"model-{jobs}-{i}", jobs, delay))
                print(runs[-1], flush=True)
    return runs


def run(args: argparse.Namespace) -> dict:
    tables, runs, config = [], [], {}
    if "sweep" in args.parts:
        rows, seconds, command = sweep(args.quick)
        config["sweep"] = {"command": command, "seconds": round(seconds, 1)}
        tables.append(
            {
                "id": "sweep",
                "title": "Bad-input and fault sweep",
                "columns": ["category", "cases", *OUTCOMES],
                "rows": rows,
            }
        )
    if "ctrl-c" in args.parts:
        lo, hi, n = args.delays
        n_jobs = args.n_jobs
        if args.quick:
            lo, hi, n, n_jobs = 0.5, 0.5, 1, [2]
        delays = [lo + (hi - lo) * i / max(int(n) - 1, 1) for i in range(int(n))]
        runs = ctrl_c(n_jobs, delays)
        counts = Counter((r["n_jobs"], r["outcome"]) for r in runs)
        summary = [{"n_jobs": j, "outcome": o, "runs": c} for (j, o), c in sorted(counts.items())]
        tables.append(
            {
                "id": "ctrl-c",
                "title": "Ctrl-C during skxmc fit",
                "caption": "SIGINT sent delay_s s after `skxmc fit` read its 2,000 demo texts.",
                "columns": ["n_jobs", "outcome", "runs"],
                "rows": summary,
            }
        )
        config["ctrl_c"] = {"delays": delays, "n_jobs": n_jobs}
    return {"config": config, "tables": tables, "runs": runs}
