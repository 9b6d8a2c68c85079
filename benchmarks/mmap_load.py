"""A saved XRLinearClassifier loaded with and without ``mmap=True``, in fresh processes.

Issue 18, point 4: a predict-only model that several serving processes share. One model
is fitted on a generated problem (``make_xmc_classification`` defaults, ``--labels``,
``--rows-per-label`` training rows per label, ``random_state=--seed``) and saved with
``skxmc.save``. Then, for each mode, ``--repeats`` fresh processes each import skxmc, load
the model and predict the top-10 of ``--rows`` held-out rows; each reports its load and
predict times and, after predicting, its resident memory split into private (``RssAnon``)
and file-backed (``RssFile``: the mapped model's pages, shared with the page cache and with
every other process that maps the file), and the growth of each from just before the
load. The model directory's size is reported beside them. The page cache is warm (the
model was just written), as on a serving machine after the first start.

    python benchmarks/mmap_load.py --labels 100000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(BENCH_DIR))

from _common import markdown_table, write_results  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, scipy.sparse as sp
    import skxmc

    def mem():
        out = {}
        for line in open("/proc/self/status"):
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
        return out

    path, queries, mmap = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    z = np.load(queries)
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
    before = mem()
    t0 = time.perf_counter()
    model = skxmc.load(path, mmap=mmap)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    labels, scores = model.predict_topk(X, k=10)
    predict_s = time.perf_counter() - t0
    after = mem()
    print(json.dumps({"load_s": load_s, "predict_s": predict_s, "before": before,
                      "after": after, "checksum": float(np.nansum(scores))}))
    """
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--labels", type=int, default=100_000)
    p.add_argument("--rows-per-label", type=int, default=2)
    p.add_argument("--n-features", type=int, default=100_000)
    p.add_argument("--rows", type=int, default=1000, help="rows predicted per process")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="mmap_load")
    args = p.parse_args()

    import numpy as np

    import skxmc
    from skxmc import XRLinearClassifier
    from skxmc.datasets import make_xmc_classification

    n_train = args.rows_per_label * args.labels
    X, Y = make_xmc_classification(
        n_train + args.rows, args.n_features, args.labels, random_state=args.seed
    )
    t0 = time.perf_counter()
    clf = XRLinearClassifier(n_jobs=2).fit(X[:n_train], Y[:n_train])
    fit_s = time.perf_counter() - t0
    Xq = X[n_train:]
    with tempfile.TemporaryDirectory() as tmp:
        path = skxmc.save(clf, Path(tmp) / "model")
        size_mb = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
        queries = Path(tmp) / "queries.npz"
        np.savez(queries, data=Xq.data, indices=Xq.indices, indptr=Xq.indptr, shape=Xq.shape)
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        runs: dict[str, list] = {"0": [], "1": []}
        for _ in range(args.repeats):
            for mode in ("0", "1"):
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(path), str(queries), mode],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                )
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    checks = {r["checksum"] for rs in runs.values() for r in rs}
    rows = []
    for mode, rs in runs.items():

        def med(f, rs=rs):
            return round(statistics.median(f(r) for r in rs), 3)

        rows.append(
            {
                "load": "mmap=True" if mode == "1" else "full",
                "load s": med(lambda r: r["load_s"]),
                f"predict {args.rows} rows s": med(lambda r: r["predict_s"]),
                "RSS after MB": med(lambda r: r["after"]["VmRSS"]),
                "private (RssAnon) growth MB": med(
                    lambda r: r["after"]["RssAnon"] - r["before"]["RssAnon"]
                ),
                "file-backed (RssFile) growth MB": med(
                    lambda r: r["after"]["RssFile"] - r["before"]["RssFile"]
                ),
            }
        )
    command = "python benchmarks/mmap_load.py " + " ".join(sys.argv[1:])
    md = (
        f"Command: `{command}`  \nModel: XRLinearClassifier(n_jobs=2) fitted on "
        f"make_xmc_classification({n_train + args.rows}, {args.n_features}, {args.labels}, "
        f"random_state={args.seed}) minus the last {args.rows} rows (fit {fit_s:.0f} s); model "
        f"directory {size_mb:.0f} MB. Medians of {args.repeats} fresh processes per mode, warm "
        f"page cache; same predictions in every process: {len(checks) == 1}. The machine was "
        f"shared with other jobs (load average {os.getloadavg()[0]:.1f} at the end).\n\n"
        + markdown_table(rows, list(rows[0]))
    )
    payload = {"command": command, "config": vars(args), "model_mb": size_mb, "runs": runs}
    write_results(args.name, {**payload, "fit_s": fit_s, "rows": rows}, md)
    print(md)


if __name__ == "__main__":
    main()
