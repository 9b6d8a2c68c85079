"""Before / after one change of the linear solver: two git revisions, the same problems.

Written for the prefetching of the dual coordinate descent solvers
(``skxmc.linear._solver._prefetch_ahead``), which changes no value, only the order in
which the CPU asks memory for it: so the weights of both revisions must be bit-identical,
and the times say what the change is worth. Each measurement runs in a child process that
imports skxmc from the revision under test (``--base`` is checked out with ``git worktree``
into a temporary folder, the working tree is the other side); children of the two sides
alternate, ``--repeats`` times, so that both see the same machine load. The kernels are
compiled (or loaded from numba's cache) by a small warm-up fit before the timed ones.

Problems, all from ``make_xmc_classification`` with the setting of ``benchmarks/scale.py``
(100,000 features, ``length=57``, ``labels_per_sample=6.3``, seed 0):

* ``binary``: one binary problem on all ``n`` rows, the target one of 16 topic labels (the
  shape of the first layer of an XR-Linear tree, whose nodes train on every row),
  ``fit_binary`` with PECOS's defaults, 1 thread;
* ``xrlinear``: a whole ``XRLinearClassifier(n_jobs=2)`` fit with ``n`` labels and ``n``
  rows (scale.py's ``--rows-per-label 1``), per-layer times.

Commands (``results/prefetch.md``: prefetching every problem, at c19a252;
``results/prefetch_min_bytes.md``: only problems over 512 KiB of row entries)::

    python benchmarks/prefetch.py --base b74038c --binary 100000 1000000 --xrlinear 100000 \
        --repeats 3 --name prefetch
    python benchmarks/prefetch.py --base b74038c --binary 100000 1000000 \
        --xrlinear 100000 300000 --repeats 3 --name prefetch_min_bytes

Writes ``benchmarks/results/<name>.{json,md}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results

ROOT = Path(__file__).resolve().parent.parent
GEN = {"n_features": 100_000, "length": 57.0, "labels_per_sample": 6.3, "random_state": 0}


def child(kind: str, n: int) -> dict[str, Any]:
    """Run one measurement with the skxmc found first on ``sys.path``."""
    import numpy as np

    import skxmc
    from skxmc.datasets import make_xmc_classification
    from skxmc.linear import XRLinearClassifier
    from skxmc.linear._solver import fit_binary

    out: dict[str, Any] = {"skxmc_file": str(Path(skxmc.__file__).parent.parent.name)}
    if kind == "binary":
        X, Y = make_xmc_classification(n, n_labels=16, **GEN)[:2]
        Yc = Y.tocsc()
        col = int(np.argmax(np.diff(Yc.indptr)))
        y = -np.ones(n)
        y[Yc.indices[Yc.indptr[col] : Yc.indptr[col + 1]]] = 1.0
        fit_binary(X[:2000], y[:2000], seed=1)  # compile or load the kernel
        t = time.perf_counter()
        w, b, it = fit_binary(X, y, seed=12345)
        out.update(
            seconds=time.perf_counter() - t,
            iterations=int(it),
            positives=float((y > 0).mean()),
            weights_sha1=hashlib.sha1(
                np.ascontiguousarray(w).tobytes() + repr(b).encode()
            ).hexdigest(),
        )
    else:
        X, Y = make_xmc_classification(n, n_labels=n, **GEN)[:2]
        XRLinearClassifier(n_jobs=2).fit(X[:2000], Y[:2000])  # compile or load the kernels
        t = time.perf_counter()
        clf = XRLinearClassifier(n_jobs=2).fit(X, Y)
        seconds = time.perf_counter() - t
        digest = hashlib.sha1()
        for W in clf.weights_:
            digest.update(W.indptr.tobytes() + W.indices.tobytes() + W.data.tobytes())
        out.update(
            seconds=seconds,
            layers=[round(s, 3) for s in clf.fit_time_per_layer_],
            weights_sha1=digest.hexdigest(),
        )
    return out


def run_child(src: Path, kind: str, n: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(n)],
        env=env,
        cwd=src,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {kind} {n} in {src} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="git revision to compare against (required)")
    parser.add_argument("--binary", type=int, nargs="*", default=[], help="rows of 'binary'")
    parser.add_argument("--xrlinear", type=int, nargs="*", default=[], help="labels = rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="prefetch")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return 0
    if not args.base:
        parser.error("--base is required")

    base_sha = subprocess.run(
        ["git", "rev-parse", "--short", args.base],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    head_sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "status", "--porcelain", "--", "skxmc"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    after = f"{head_sha}{'+changes' if dirty else ''}"
    command = "python benchmarks/prefetch.py " + " ".join(sys.argv[1:])
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base_dir), args.base],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            jobs = [("binary", n) for n in args.binary] + [("xrlinear", n) for n in args.xrlinear]
            for kind, n in jobs:
                for rep in range(args.repeats):
                    for side, src in (("before", base_dir), ("after", ROOT)):
                        load = os.getloadavg()[0]
                        r = run_child(src, kind, n)
                        r.update(kind=kind, n=n, repeat=rep, side=side, load_avg=round(load, 1))
                        runs.append(r)
                        print(
                            f"{kind} n={n} repeat {rep} {side}: {r['seconds']:.2f} s "
                            f"(load {load:.1f})",
                            flush=True,
                        )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base_dir)], cwd=ROOT, check=False
            )

    summary = []
    for kind, n in dict.fromkeys((r["kind"], r["n"]) for r in runs):
        cell = {
            s: [r for r in runs if (r["kind"], r["n"], r["side"]) == (kind, n, s)]
            for s in ("before", "after")
        }
        t_before = statistics.median(r["seconds"] for r in cell["before"])
        t_after = statistics.median(r["seconds"] for r in cell["after"])
        ratios = [a["seconds"] / b["seconds"] for a, b in zip(cell["after"], cell["before"])]
        same = {r["weights_sha1"] for r in cell["before"] + cell["after"]}
        row = {
            "problem": kind,
            "n": n,
            "before s (median)": round(t_before, 2),
            "after s (median)": round(t_after, 2),
            "after / before, per pair": " ".join(f"{x:.2f}" for x in ratios),
            "weights identical": "yes" if len(same) == 1 else "NO",
            "load avg": " ".join(str(r["load_avg"]) for r in cell["before"] + cell["after"]),
        }
        if kind == "xrlinear":
            layers = list(zip(*(r["layers"] for r in cell["before"])))
            layers_after = list(zip(*(r["layers"] for r in cell["after"])))
            row["layer s before / after (medians)"] = " ".join(
                f"{statistics.median(b):.1f}/{statistics.median(a):.1f}"
                for b, a in zip(layers, layers_after)
            )
        summary.append(row)
    columns = list(dict.fromkeys(k for row in summary for k in row))
    text = (
        f"Command: `{command}`  \n"
        f"Before: skxmc at {base_sha}; after: {after}. Children alternate (before, after) per "
        f"repeat, {args.repeats} repeats; `binary`: `fit_binary` on all n rows, 1 thread; "
        f"`xrlinear`: `XRLinearClassifier(n_jobs=2).fit` with n labels and n rows. Generated "
        f"data: `make_xmc_classification(n, {GEN})`. Wall times on a shared 2-core machine "
        f"(load averages per run in the table): compare the ratios within a pair.\n\n"
        + markdown_table(summary, columns)
    )
    print(text)
    write_results(
        args.name,
        {"command": command, "base": base_sha, "after": after, "summary": summary, "runs": runs},
        text,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
