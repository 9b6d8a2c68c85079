"""What a search of a memory-mapped XRLinearClassifier reads, layer by layer.

Issue 18 asks a mapped 1M-label model to predict 1,000 rows with VmRSS below half of a
full load. VmRSS counts every page of the model file that the process has mapped, and a
search maps the pages of the tree nodes it reaches (the kernel adds up to 64 KiB around
each page first read). This script shows how much of each layer that is: for ``--rows``
counts of held-out rows, a fresh process loads the model with ``skxmc.load(path,
mmap=True, verify=False)``, predicts the top-10 of the first ``n`` rows, then reads
``/proc/self/pagemap`` for the address range of each layer's search layout (the pages
present in the process) and, by searching the same rows again layer by layer, counts the
parents whose children the beam search scored (the blocks it read).

    python benchmarks/mmap_reach.py --model-dir DIR --rows 10 100 1000 --name mmap_reach_1m

``DIR`` is a model directory saved by ``skxmc.save`` and ``DIR-queries.npz`` its held-out
rows, as ``benchmarks/mmap_load.py --model-dir DIR`` leaves them. Linux only (pagemap).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from _common import markdown_table, write_results  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np, scipy.sparse as sp
    import skxmc
    from skxmc.linear._beam import beam_search

    PAGE = os.sysconf("SC_PAGE_SIZE")

    def present_mb(a):
        # pages of the array's address range that are mapped in this process
        addr = a.__array_interface__["data"][0]
        first, last = addr // PAGE, (addr + a.nbytes - 1) // PAGE
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(first * 8)
            entries = np.frombuffer(f.read((last - first + 1) * 8), dtype=np.uint64)
        return float(((entries >> np.uint64(63)) & np.uint64(1)).sum()) * PAGE / 2**20

    path, queries, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    z = np.load(queries)
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))[:n]
    model = skxmc.load(path, mmap=True, verify=False)
    model.predict_topk(X, k=10)
    cache = model._search_cache
    layers = []
    for t, c in enumerate(cache.chunks):
        # what the prediction mapped, before the extra searches below touch anything
        arrays = [c.blocks] if c.feature_major is None else [
            c.feature_major.indptr, c.feature_major.indices, c.feature_major.data]
        layers.append({"layer": t, "parents": int(len(c.children_count)),
                       "nodes": int(c.n_nodes), "dense": c.feature_major is not None,
                       "layout_mb": sum(a.nbytes for a in arrays) / 2**20,
                       "mapped_mb": sum(present_mb(a) for a in arrays)})
    for t, layer in enumerate(layers):
        if t == 0:
            reached = 1
        else:
            P = beam_search(X, cache.chunks, cache.parents, bias=model.bias,
                            beam_size=model.beam_size, top_k=None,
                            post_processor=model.post_processor, n_layers=t)
            reached = int(np.unique(P.indices).size)
        layer["parents_reached"] = reached
    status = {l.split(":")[0]: int(l.split()[1]) / 1024 for l in open("/proc/self/status")
              if l.split(":")[0] in ("VmRSS", "RssFile")}
    print(json.dumps({"rows": n, "layers": layers, **status}))
    """
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--rows", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--name", default="mmap_reach")
    args = p.parse_args()
    queries = args.model_dir.with_name(args.model_dir.name + "-queries.npz")
    env_path = {"PYTHONPATH": str(REPO_ROOT)}
    runs, rows = [], []
    for n in args.rows:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.model_dir), str(queries), str(n)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **env_path},
        )
        run = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append(run)
        print(run, flush=True)
        for layer in run["layers"]:
            rows.append(
                {
                    "rows predicted": n,
                    "layer": layer["layer"],
                    "nodes": layer["nodes"],
                    "parents": layer["parents"],
                    "parents reached": layer["parents_reached"],
                    "share reached": round(layer["parents_reached"] / layer["parents"], 3),
                    "search layout MB": round(layer["layout_mb"], 1),
                    "of it mapped MB": round(layer["mapped_mb"], 1),
                    "share mapped": round(layer["mapped_mb"] / max(layer["layout_mb"], 1e-9), 3),
                    "process VmRSS MB": round(run["VmRSS"], 1),
                }
            )
    argv = ["DIR" if a == str(args.model_dir) else a for a in sys.argv[1:]]
    command = "python benchmarks/mmap_reach.py " + " ".join(argv)
    md = (
        f"Command: `{command}`  \n"
        "One fresh process per row count: `skxmc.load(DIR, mmap=True, verify=False)`, "
        "`predict_topk` of the first n held-out rows (k=10), then the pages of each layer's "
        "search layout present in the process (`/proc/self/pagemap`; small layers are "
        "scored from their feature-major copy, whose arrays are counted instead), and the "
        "number of parents whose children the beam search scored in that layer (the "
        "blocks it read). Layer 0 has one parent, the root.\n\n"
        + markdown_table(rows, list(rows[0]))
    )
    write_results(args.name, {"command": command, "config": {"rows": args.rows}, "runs": runs}, md)
    print(md)


if __name__ == "__main__":
    main()
