"""Time and memory of label encoding (``encode_labels``, ``LabelSpace.transform``).

Cases: 1M label occurrences (250k rows x 4 labels from a pool of 50k, str and int labels)
and one 20,000-character label among 80k occurrences (issue 21, B6). Each revision runs in
its own subprocess with ``PYTHONPATH`` pointing at that revision's ``skxmc/`` (extracted
with ``git archive``), so a before / after comparison happens in one run on one machine.

Usage (from the repository root)::

    .venv/bin/python benchmarks/label_encoding.py --revs ff1325e WORKTREE
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from _common import markdown_table, write_results

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time, tracemalloc
# The venv's editable install of the checkout is a meta-path finder that would win over
# PYTHONPATH: drop it so that the revision under test is the one imported.
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()
                    and "editable" not in getattr(f, "__name__", "").lower()]
sys.path.insert(0, os.environ["SKXMC_TREE"])
import numpy as np
import skxmc
assert skxmc.__file__.startswith(os.environ["SKXMC_TREE"]), skxmc.__file__
from skxmc.labels import LabelSpace, encode_labels

rng = np.random.default_rng(0)
pool = 50_000
codes = rng.integers(0, pool, size=(250_000, 4))
out = {}
for kind in ("str", "int"):
    rows = ([[f"label-{c}" for c in r] for r in codes.tolist()] if kind == "str"
            else codes.tolist())
    best_fit = best_tr = float("inf")
    for _ in range(3):
        t0 = time.perf_counter(); Y, classes = encode_labels(rows)
        best_fit = min(best_fit, time.perf_counter() - t0)
        t0 = time.perf_counter(); LabelSpace(classes).transform(rows)
        best_tr = min(best_tr, time.perf_counter() - t0)
    out[kind] = {"encode_labels_s": best_fit, "transform_s": best_tr}
long_rows = [["x" * 20000]] + [["a", "b"]] * 40000
tracemalloc.start()
try:
    encode_labels(long_rows)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
except MemoryError:
    peak = float("nan")
tracemalloc.stop()
out["long_label_peak_mb"] = peak
print(json.dumps(out))
"""


def _tree_of(rev: str, tmp: Path) -> Path:
    """A folder holding ``skxmc/`` as of ``rev`` (``WORKTREE``: the working tree)."""
    if rev == "WORKTREE":
        return ROOT
    data = subprocess.run(
        ["git", "archive", rev, "skxmc"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    target = tmp / rev
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revs", nargs="+", default=["WORKTREE"])
    parser.add_argument("--repeats", type=int, default=3, help="subprocesses per revision")
    args = parser.parse_args()
    rows, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for rev in args.revs:
            tree = _tree_of(rev, Path(tmp))
            runs = []
            for _ in range(args.repeats):
                proc = subprocess.run(
                    [sys.executable, "-c", CHILD],
                    capture_output=True,
                    text=True,
                    env={"SKXMC_TREE": str(tree), "PATH": "/usr/bin:/bin"},
                    check=False,
                    # the old code may allocate many GB for the long label: cap the child
                    preexec_fn=lambda: __import__("resource").setrlimit(
                        __import__("resource").RLIMIT_AS, (6 << 30, 6 << 30)
                    ),
                )
                if proc.returncode != 0:
                    raise SystemExit(f"{rev}: child failed\n{proc.stderr[-2000:]}")
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            raw[rev] = runs
            med = {
                f"{kind} {what}": statistics.median(r[kind][what] for r in runs)
                for kind in ("str", "int")
                for what in ("encode_labels_s", "transform_s")
            }
            peak = statistics.median(r["long_label_peak_mb"] for r in runs)
            rows.append({"revision": rev, **med, "long label peak MB": peak})
    columns = ["revision", *[c for c in rows[0] if c != "revision"]]
    command = "python benchmarks/label_encoding.py --revs " + " ".join(args.revs)
    table = "\n".join(
        [
            f"Label encoding, 1M occurrences (best of 3 per process, median of "
            f"{args.repeats} processes); long label: tracemalloc peak (nan: MemoryError "
            f"under a 6 GiB address-space cap). `{command}`",
            "",
            markdown_table(rows, columns),
        ]
    )
    print(table)
    write_results("label_encoding", {"command": command, "rows": rows, "runs": raw}, table)


if __name__ == "__main__":
    main()
