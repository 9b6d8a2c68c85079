"""Fixed per-process costs of XRLinearClassifier: imports, numba start-up, resident memory.

On small data sets the end-to-end comparison with libpecos (``xmc_linear.py``) is close
to these fixed costs, which do not grow with the data: importing skxmc (scikit-learn,
scipy, numba) and numba's one-time start-up (its typing context is built at the first
compiled call of the process, even when the kernels come from the on-disk cache). Each
repeat runs in a fresh interpreter and reports:

* ``import s`` and ``RSS after import MB`` for ``import skxmc``;
* ``first fit s`` / ``second fit s``: the same tiny fit (300 x 50 sparse, 30 labels) twice;
  their difference is the per-process start-up inside the first ``fit``;
* ``first predict s`` / ``second predict s`` likewise.

Usage::

    python benchmarks/startup_cost.py [--repeats 5]

Run it with the interpreter whose environment you want to measure (for example the
benchmark environment of ``xmc_linear.py``, where scikit-learn also imports pandas).
Writes ``benchmarks/results/<name>.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results

CHILD = r"""
import json, sys, time
def rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
t0 = time.perf_counter()
import numpy as np, scipy.sparse as sp
import skxmc
from skxmc import XRLinearClassifier
out = {"import s": time.perf_counter() - t0, "RSS after import MB": rss_mb(),
       "pandas imported": "pandas" in sys.modules}
X = sp.random(300, 50, density=0.2, format="csr", random_state=0, dtype=np.float32)
Y = sp.random(300, 30, density=0.1, format="csr", random_state=1)
Y.data[:] = 1
for name in ("first", "second"):
    t = time.perf_counter()
    clf = XRLinearClassifier(n_jobs=2).fit(X, Y)
    out[f"{name} fit s"] = time.perf_counter() - t
    t = time.perf_counter()
    clf.predict_topk(X, k=5)
    out[f"{name} predict s"] = time.perf_counter() - t
out["RSS after fits MB"] = rss_mb()
print(json.dumps(out))
"""

COLUMNS = ["import s", "RSS after import MB", "first fit s", "second fit s", "first predict s",
           "second predict s", "RSS after fits MB"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--name", default="startup_cost")
    args = parser.parse_args()
    # one untimed child first, so that every timed one finds the numba cache on disk
    subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True)
    runs = []
    for _ in range(args.repeats):
        res = subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True,
                             text=True)  # fmt: skip
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    median = {"statistic": f"median of {args.repeats}"}
    median.update({c: float(np.median([r[c] for r in runs])) for c in COLUMNS})
    command = f"{Path(sys.executable).as_posix()} benchmarks/startup_cost.py " + " ".join(
        sys.argv[1:])
    header = (f"# Per-process fixed costs of XRLinearClassifier (benchmarks/startup_cost.py)\n\n"
              f"Command: `{command}`  \nscikit-learn imports pandas here: "
              f"{runs[0]['pandas imported']}\n\n")  # fmt: skip
    table = header + markdown_table([median], ["statistic", *COLUMNS])
    print(table)
    write_results(args.name, {"command": command, "runs": runs, "median": median}, table)


if __name__ == "__main__":
    main()
