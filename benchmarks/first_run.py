"""First run after a fresh install: the README demo's fit with an empty numba cache.

numba compiles skxmc's kernels the first time a process calls them and caches the machine
code on disk; the first ``fit`` after an install (or after a package upgrade, which
invalidates the cache) pays that compilation. Each repeat points ``NUMBA_CACHE_DIR`` at a
new empty folder and runs two fresh interpreters one after the other:

* ``cold``: the first process after the install (empty cache);
* ``warm``: the next process (the cache written by ``cold``).

Each process times ``import`` (numpy, scikit-learn, skxmc, the pipeline helpers), loading
the demo data, then the README demo's ``fit`` twice: ``make_pipeline(TfidfVectorizer(
sublinear_tf=True, min_df=2, dtype=np.float32), XRLinearClassifier(n_jobs=2))`` on
``skxmc.datasets.load_demo()``. ``compile s`` is the time numba spent compiling during the
first fit (the outermost ``numba:compile`` events, see ``numba.core.event``; loading from
the cache is not compilation), ``compiled`` the number of (kernel, signature) pairs it
compiled, ``cache hits`` the pairs it loaded from the cache. ``first / second`` is the
ratio of the two fits of one process; ``cold first / warm second`` compares the first fit
after the install with a fit of a process whose kernels are ready, the issue's target
(at most 2). ``message`` says whether skxmc printed its "compiling" line on stderr.
``CPU s`` columns are the process's CPU time during each fit: on a shared machine the wall
times stretch with the load, CPU times much less (compilation is single-threaded, the
fit's solver uses two threads).

Usage::

    python benchmarks/first_run.py [--repeats 3] [--name first_run]

Writes ``benchmarks/results/<name>.json`` / ``.md`` (medians over the repeats; the JSON
also keeps every run and the kernels compiled, with their signatures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
import skxmc
from skxmc import XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.pipeline import make_pipeline
import numba
from numba.core import event
out = {"import s": time.perf_counter() - t0}

class CompileTimer(event.Listener):
    # compilations nest (a kernel compiles the kernels it calls): count the outermost only
    def __init__(self):
        self.depth, self.start, self.total, self.n, self.kernels = 0, 0.0, 0.0, 0, []
    def on_start(self, ev):
        self.n += 1
        d = ev.data["dispatcher"]
        self.kernels.append(f"{d.py_func.__module__}.{d.py_func.__name__}{ev.data['args']}")
        if self.depth == 0:
            self.start = time.perf_counter()
        self.depth += 1
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            self.total += time.perf_counter() - self.start

timer = CompileTimer()
event.register("numba:compile", timer)

def dispatchers():
    seen = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("skxmc"):
            for obj in vars(mod).values():
                if isinstance(obj, numba.core.registry.CPUDispatcher):
                    seen[id(obj)] = obj
    return list(seen.values())

t = time.perf_counter()
demo = load_demo()
out["load s"] = time.perf_counter() - t
for name in ("first", "second"):
    before = (timer.total, timer.n)
    clf = make_pipeline(TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
                        XRLinearClassifier(n_jobs=2))
    t = time.perf_counter()
    c = time.process_time()
    clf.fit(demo.train_texts, demo.train_labels)
    out[f"{name} fit s"] = time.perf_counter() - t
    out[f"{name} fit CPU s"] = time.process_time() - c
    out[f"{name} compile s"] = timer.total - before[0]
    out[f"{name} compiled"] = timer.n - before[1]
    if name == "first":
        out["cache hits"] = sum(sum(d._cache_hits.values()) for d in dispatchers())
out["kernels compiled"] = timer.kernels
out["signatures per kernel"] = {
    d.py_func.__name__: len(d.signatures) for d in dispatchers() if d.signatures}
print(json.dumps(out))
"""

COLUMNS = [
    "process",
    "import s",
    "first fit s",
    "first compile s",
    "compiled",
    "cache hits",
    "second fit s",
    "first / second",
    "first fit CPU s",
    "second fit CPU s",
    "message",
]
MESSAGE = "skxmc: compiling"


def run_child(cache_dir: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    res = subprocess.run(
        [sys.executable, "-c", CHILD], check=True, capture_output=True, text=True, env=env
    )
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["message"] = MESSAGE in res.stderr
    out["stderr"] = res.stderr.strip()[-2000:]
    out["first / second"] = out["first fit s"] / out["second fit s"]
    out["compiled"] = out["first compiled"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="first_run")
    parser.add_argument(
        "--note", default="", help="what was measured, e.g. which code (put in the results)"
    )
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    for r in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="skxmc-numba-cache-") as cache_dir:
            for process in ("cold", "warm"):
                out = run_child(cache_dir)
                runs[process].append(out)
                print(
                    f"repeat {r} {process}: first fit {out['first fit s']:.2f} s "
                    f"(compile {out['first compile s']:.2f} s, {out['compiled']} compiled), "
                    f"second fit {out['second fit s']:.2f} s",
                    flush=True,
                )
    rows = []
    for process, outs in runs.items():
        row: dict = {"process": f"{process} (median of {args.repeats})"}
        for c in COLUMNS[1:-1]:
            row[c] = float(np.median([o[c] for o in outs]))
        row["compiled"] = int(row["compiled"])
        row["cache hits"] = int(row["cache hits"])
        row["message"] = "/".join("yes" if o["message"] else "no" for o in outs)
        rows.append(row)
    # the target: each cold first fit against the second fit of the warm process that
    # followed it (same repeat), median over the repeats
    target = float(
        np.median(
            [c["first fit s"] / w["second fit s"] for c, w in zip(runs["cold"], runs["warm"])]
        )
    )
    target_cpu = float(
        np.median(
            [
                c["first fit CPU s"] / w["second fit CPU s"]
                for c, w in zip(runs["cold"], runs["warm"])
            ]
        )
    )
    load_end = os.getloadavg()[0]
    command = "python benchmarks/first_run.py " + " ".join(sys.argv[1:])
    header = (
        "# First run after a fresh install (benchmarks/first_run.py)\n\n"
        f"Command: `{command.strip()}`  \nREADME demo pipeline (TF-IDF + "
        "XRLinearClassifier(n_jobs=2)) on `load_demo()`; `NUMBA_CACHE_DIR` an empty folder "
        "per repeat; `cold` is the first process, `warm` the next one. 'CPU s': the "
        "process's CPU time during the fit (all threads; time spent waiting for a core "
        f"does not count). Load average {load_start:.2f} at start, {load_end:.2f} at end."
        "\n\n"
    )
    if args.note:
        header += f"Note: {args.note}\n\n"
    table = header + markdown_table(rows, COLUMNS)
    table += (
        f"\n\nTarget (first fit after install / a later fit, at most 2): median over "
        f"repeats of cold first fit / warm second fit = {target:.2f} (wall time), "
        f"{target_cpu:.2f} (CPU time)\n"
    )
    print(table)
    payload = {
        "command": command.strip(),
        "note": args.note,
        "rows": rows,
        "cold first / warm second": target,
        "cold first / warm second, CPU": target_cpu,
        "load": [load_start, load_end],
        "runs": runs,
    }
    write_results(args.name, payload, table)


if __name__ == "__main__":
    main()
