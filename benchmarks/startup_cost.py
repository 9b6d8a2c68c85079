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

With ``--imports`` (the default) it also measures, each in a fresh interpreter and
interleaved within every repeat, the wall time and RSS of single import statements:
``import skxmc`` (which loads its estimators lazily) and ``from skxmc import
XRLinearClassifier`` (what a fit imports) against libpecos's ``import
pecos.xmc.xlinear.model`` (what a user of XLinearModel imports) and the bare interpreter,
plus the layers under skxmc (numpy + scipy.sparse, ``sklearn.base``, numba); and it runs
``python -X importtime -c "from skxmc import XRLinearClassifier"`` once to list which
packages' imports dominate (self time summed per top-level package) and which chain pulls
in pandas and scipy.stats.

Usage::

    python benchmarks/startup_cost.py [--repeats 5] [--no-imports]

Run it with the interpreter whose environment you want to measure (for example the
benchmark environment of ``xmc_linear.py``, where scikit-learn also imports pandas and
libpecos is installed). Writes ``benchmarks/results/<name>.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
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

COLUMNS = [
    "import s",
    "RSS after import MB",
    "first fit s",
    "second fit s",
    "first predict s",
    "second predict s",
    "RSS after fits MB",
]

# One import statement per fresh interpreter: wall time of the statement, VmRSS after it.
IMPORT_CHILD = r"""
import sys, time
def rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
rss0 = rss_mb()
t0 = time.perf_counter()
exec(sys.argv[1])
dt = time.perf_counter() - t0
import json
mods = sys.modules
print(json.dumps({"s": dt, "rss": rss_mb(), "rss_before": rss0, "n_modules": len(mods),
                  "pandas": "pandas" in mods, "scipy.stats": "scipy.stats" in mods,
                  "numba": "numba" in mods}))
"""

IMPORTS = {
    "bare interpreter": "pass",
    "numpy + scipy.sparse": "import numpy, scipy.sparse",
    "sklearn.base": "import sklearn.base",
    "numba": "import numba",
    "import skxmc": "import skxmc",
    # what a fit of XR-Linear imports (import skxmc itself loads its modules lazily)
    "from skxmc import XRLinearClassifier": "from skxmc import XRLinearClassifier",
    "libpecos: import pecos.xmc.xlinear.model": "import pecos.xmc.xlinear.model",
}

IMPORT_COLUMNS = [
    "statement",
    "import s",
    "RSS after MB",
    "modules loaded",
    "pandas",
    "scipy.stats",
    "numba",
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH", "")]))
    return env


def measure_imports(repeats: int) -> tuple[list[dict], dict[str, list[dict]]]:
    runs: dict[str, list[dict]] = {k: [] for k in IMPORTS}
    for _ in range(repeats):  # interleaved: every repeat runs every statement once
        for label, stmt in IMPORTS.items():
            res = subprocess.run(
                [sys.executable, "-c", IMPORT_CHILD, stmt],
                capture_output=True,
                text=True,
                env=_env(),
            )
            if res.returncode != 0:
                runs[label].append({"error": res.stderr.strip().splitlines()[-1:]})
                continue
            runs[label].append(json.loads(res.stdout.strip().splitlines()[-1]))
    rows = []
    for label, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            rows.append({"statement": label, "import s": "FAILED"})
            continue
        rows.append(
            {
                "statement": label,
                "import s": float(np.median([r["s"] for r in ok])),
                "RSS after MB": float(np.median([r["rss"] for r in ok])),
                "modules loaded": int(np.median([r["n_modules"] for r in ok])),
                "pandas": ok[0]["pandas"],
                "scipy.stats": ok[0]["scipy.stats"],
                "numba": ok[0]["numba"],
            }
        )
    return rows, runs


_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_profile(stmt: str = "import skxmc", top: int = 12) -> dict:
    """``-X importtime`` of one statement: self time per top-level package, and the chain
    of importers of a few heavy packages (who pulls them in)."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", stmt],
        capture_output=True,
        text=True,
        env=_env(),
    )
    rows = []
    for line in res.stderr.splitlines():
        m = _IMPORTTIME.match(line)
        if m:
            rows.append((int(m[1]), int(m[2]), len(m[3]) // 2, m[4]))
    per_package: collections.Counter = collections.Counter()
    for self_us, _, _, name in rows:
        per_package[name.split(".")[0]] += self_us
    total = sum(per_package.values())

    def chain(i: int) -> str:
        # importtime prints a module after the modules it imported (deeper indentation)
        out = [f"{rows[i][3]} ({rows[i][1] / 1e3:.0f} ms)"]
        depth = rows[i][2]
        for j in range(i + 1, len(rows)):
            if rows[j][2] < depth:
                out.append(f"{rows[j][3]} ({rows[j][1] / 1e3:.0f} ms)")
                depth = rows[j][2]
        return " <- ".join(out)

    chains = {}
    for target in ("pandas", "scipy.stats", "numba", "sklearn.base", "sklearn.pipeline"):
        for i, r in enumerate(rows):
            if r[3] == target:
                chains[target] = chain(i)
                break
    return {
        "statement": stmt,
        "total_self_ms": total / 1e3,
        "per_package_ms": [(k, v / 1e3) for k, v in per_package.most_common(top)],
        "importer_chains": chains,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--name", default="startup_cost")
    parser.add_argument(
        "--no-imports",
        dest="imports",
        action="store_false",
        help="skip the import-statement comparison and the -X importtime profile",
    )
    args = parser.parse_args()
    load_start = os.getloadavg()
    # one untimed child first, so that every timed one finds the numba cache on disk
    subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True, env=_env())
    runs = []
    for _ in range(args.repeats):
        res = subprocess.run(
            [sys.executable, "-c", CHILD], check=True, capture_output=True, text=True, env=_env()
        )
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    median = {"statistic": f"median of {args.repeats}"}
    median.update({c: float(np.median([r[c] for r in runs])) for c in COLUMNS})
    # no machine paths: "python" is the interpreter of the environment measured
    command = "python benchmarks/startup_cost.py " + " ".join(sys.argv[1:])
    payload = {"command": command, "runs": runs, "median": median}
    parts = [
        "# Per-process fixed costs of XRLinearClassifier (benchmarks/startup_cost.py)\n",
        f"Command: `{command}`  ",
        f"scikit-learn imports pandas here: {runs[0]['pandas imported']}\n",
        markdown_table([median], ["statistic", *COLUMNS]),
    ]
    if args.imports:
        import_rows, import_runs = measure_imports(args.repeats)
        profile = import_profile("from skxmc import XRLinearClassifier")
        payload.update(imports=import_rows, import_runs=import_runs, importtime=profile)
        parts += [
            "",
            f"## Import statements, each in a fresh interpreter (median of {args.repeats}, "
            "interleaved)\n",
            "'import s': wall time of the statement; 'RSS after': VmRSS after it (the "
            "interpreter included); the last three columns: whether the statement loaded "
            "that package.\n",
            markdown_table(import_rows, IMPORT_COLUMNS),
            "",
            f'## `python -X importtime -c "{profile["statement"]}"` (one run)\n',
            f"Self time of all modules: {profile['total_self_ms']:.0f} ms (importtime's own "
            "overhead included); per top-level package:\n",
            markdown_table(
                [{"package": k, "self ms": round(v, 1)} for k, v in profile["per_package_ms"]],
                ["package", "self ms"],
            ),
            "",
            "Who imports what (cumulative ms, importer to the right):\n",
            *[f"- {k}: {v}" for k, v in profile["importer_chains"].items()],
        ]
    load_end = os.getloadavg()
    payload["load_average"] = {"start": load_start, "end": load_end}
    parts.insert(2, f"Load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end.  ")
    table = "\n".join(parts)
    print(table)
    write_results(args.name, payload, table)


if __name__ == "__main__":
    main()
