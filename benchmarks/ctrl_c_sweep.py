"""Ctrl-C at many moments of ``skxmc fit``: how the process ends.

Usage::

    python benchmarks/ctrl_c_sweep.py --n-jobs 1 2 --delays 0.9 2.2 14

Each run starts ``skxmc fit`` on the first 2,000 texts of the demo data (TF-IDF +
XRLinearClassifier, as ``tests/test_cli.py`` does) in a fresh process, waits for the log
line that says the training records were read, sleeps ``delay`` seconds and sends SIGINT.
A fit that handles Ctrl-C exits with 130 and prints ``skxmc fit: interrupted``; a signal
that arrives after the model was saved ends the finished process (-2 or 0). Anything else
(1 with a ``SystemError``, -11) is the failure ``skxmc._numba.interruptible`` prevents.
Writes ``benchmarks/results/<--name>.{json,md}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def one_run(train: Path, model: Path, n_jobs: int, delay: float) -> dict:
    cmd = [sys.executable, "-m", "skxmc", "fit", "--train", str(train), "--model-dir", str(model)]
    cmd += ["--min-df", "1", "--n-jobs", str(n_jobs), "-v"]
    proc = subprocess.Popen(
        cmd,
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
    return {"n_jobs": n_jobs, "delay": round(delay, 3), "rc": proc.returncode, "outcome": outcome}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument(
        "--delays", type=float, nargs=3, default=[0.9, 2.2, 14], metavar=("LO", "HI", "N")
    )
    p.add_argument("--name", default="ctrl_c_sweep")
    args = p.parse_args()
    from skxmc.datasets import load_demo

    lo, hi, n = args.delays
    delays = [lo + (hi - lo) * i / max(int(n) - 1, 1) for i in range(int(n))]
    demo = load_demo()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        train = Path(tmp) / "train.jsonl.gz"
        with gzip.open(train, "wt", encoding="utf-8") as fh:
            for text, labels in zip(demo.train_texts[:2000], demo.train_labels[:2000]):
                fh.write(json.dumps({"text": text, "labels": sorted(labels)}) + "\n")
        for n_jobs in args.n_jobs:
            for i, delay in enumerate(delays):
                run = one_run(train, Path(tmp) / f"model-{n_jobs}-{i}", n_jobs, delay)
                print(run, flush=True)
                runs.append(run)
    command = "python benchmarks/ctrl_c_sweep.py " + " ".join(sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"command": command, "runs": runs}, indent=1)
    )
    counts = Counter((r["n_jobs"], r["outcome"]) for r in runs)
    lines = [
        f"Command: `{command}`  ",
        "SIGINT sent `delay` s after `skxmc fit` logged that it read the training records "
        "(2,000 demo texts, TF-IDF + XRLinearClassifier).",
        "",
        "| n_jobs | outcome | runs |",
        "|---|---|---|",
        *[f"| {nj} | {outcome} | {c} |" for (nj, outcome), c in sorted(counts.items())],
        "",
        "| n_jobs | delay s | exit code | outcome |",
        "|---|---|---|---|",
        *[f"| {r['n_jobs']} | {r['delay']} | {r['rc']} | {r['outcome']} |" for r in runs],
    ]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
