"""Memory and model size of long label names (issue 48 item 17), before and after.

Labels were saved as fixed-width ``<U`` arrays (4 bytes x the longest label for every
class); skxmc.io now writes UTF-8 bytes plus offsets and loads an object array. Each case
fits an XRLinearClassifier on random L2-normalised sparse features, one training row per
label (label ``i`` is ``i`` zero-padded, then ``x`` up to ``--length`` characters), saves
it, and loads it in a fresh process. Reported per case: the fit+save process's peak
resident memory, the model folder's size, the load process's peak and its growth over the
imports, and the loaded ``classes_`` (dtype, bytes).

``--skxmc DIR`` runs the cases against the skxmc in ``DIR`` (for example a checkout of
26aef59 for "before"); both runs go into one results file, keyed by ``--label``.

    python benchmarks/label_memory.py --label before --skxmc /work/main
    python benchmarks/label_memory.py --label after
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "label_memory.json"
REPO_ROOT = Path(__file__).resolve().parent.parent
CASES = {"1k-x-10k": (1_000, 10_000), "50k-x-2k": (50_000, 2_000)}

_RSS = """
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
"""

FIT = _RSS + textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, scipy.sparse as sp
    import skxmc
    n_labels, length, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(0)
    X = sp.random(n_labels, 2000, density=0.005, format="csr", random_state=0, dtype=np.float32)
    X.data[:] = 1.0
    X = sp.csr_matrix(X.multiply(1 / np.sqrt(np.maximum(X.getnnz(axis=1), 1))[:, None]))
    labels = [[f"{i:06d}".ljust(length, "x")] for i in range(n_labels)]
    base = rss("VmRSS:")
    t = time.perf_counter()
    clf = skxmc.XRLinearClassifier(n_jobs=1).fit(X, labels)
    fit_s = time.perf_counter() - t
    del labels
    t = time.perf_counter()
    clf.save(path)
    save_s = time.perf_counter() - t
    print(json.dumps({"fit_s": fit_s, "save_s": save_s, "rss_before_fit_mb": base,
                      "fit_save_peak_mb": rss("VmHWM:"), "skxmc": skxmc.__file__}))
    """
)

LOAD = _RSS + textwrap.dedent(
    """
    import json, sys, time
    import skxmc, skxmc.linear
    base = rss("VmRSS:")
    t = time.perf_counter()
    clf = skxmc.load(sys.argv[1])
    load_s = time.perf_counter() - t
    c = clf.classes_
    nbytes = c.nbytes + (sum(sys.getsizeof(s) for s in c.tolist()) if c.dtype == object else 0)
    print(json.dumps({"load_s": load_s, "load_peak_mb": rss("VmHWM:"),
                      "load_peak_growth_mb": rss("VmHWM:") - base,
                      "classes_dtype": str(c.dtype), "classes_mb": nbytes / 2**20}))
    """
)


def run(code: str, args: list[str], skxmc_root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=skxmc_root,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="results key: before / after")
    parser.add_argument("--skxmc", type=Path, default=REPO_ROOT, help="skxmc source root")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    rows = {}
    for name in args.cases:
        n_labels, length = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "model")
            row = run(FIT, [str(n_labels), str(length), path], args.skxmc)
            row["model_mb"] = sum(p.stat().st_size for p in Path(path).rglob("*")) / 2**20
            row.update(run(LOAD, [path], args.skxmc))
        rows[name] = {"labels": n_labels, "length": length, **row}
        print(name, json.dumps(rows[name]), flush=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": {}}
    command = "python benchmarks/label_memory.py " + " ".join(sys.argv[1:])
    results["runs"][args.label] = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": sys.version.split()[0],
        "cases": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
