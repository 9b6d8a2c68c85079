"""Where XRLinearClassifier's memory peaks: RSS over one fit and prediction, by stage.

Issue 22 (peak RSS against libpecos). One process loads the features of
``benchmarks/xmc_linear.py`` (computed and cached on first use), then runs
``XRLinearClassifier(n_jobs=2)``'s ``fit`` and ``predict_topk(X_test, k=10)`` while a
thread samples VmRSS every 5 ms. The stages are delimited by skxmc's own DEBUG log lines
(label tree, each layer), the end of ``fit`` (after the last layer it builds the
beam-search structures) and the end of the prediction; each row gives the highest RSS
seen in that stage. A first fit on a tiny problem loads the numba kernels, so
compilation is not in the figures.

    python benchmarks/xmc_linear_memory.py --dataset tibkat_gnd_en --name xmc_linear_memory
    # another checkout's skxmc (e.g. a worktree of an older commit), same data:
    python benchmarks/xmc_linear_memory.py --source ../before --name xmc_linear_memory_before

Writes ``benchmarks/results/<--name>.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class _Events(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(("label tree:", "layer ")):
            self.events.append((time.perf_counter(), message.split(",")[0]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="tibkat_gnd_en")
    p.add_argument("--source", type=Path, help="import skxmc from this checkout")
    p.add_argument("--name", default="xmc_linear_memory")
    args = p.parse_args()
    source = (args.source or BENCH_DIR.parent).resolve()
    sys.path.insert(0, str(BENCH_DIR))
    sys.path.insert(0, str(source))
    from _common import markdown_table, write_results
    from xmc_linear import load_cached, prepare_dataset

    import skxmc
    from skxmc import XRLinearClassifier
    from skxmc.datasets import make_xmc_classification

    assert Path(skxmc.__file__).resolve().is_relative_to(source), skxmc.__file__
    commit = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    path, _ = prepare_dataset(args.dataset, "l2")  # xmc_linear.py's features (cached)
    X_tr, Y_tr, X_te, _ = load_cached(path)
    Xw, Yw = make_xmc_classification(500, 300, 50, random_state=0)
    XRLinearClassifier(n_jobs=2).fit(Xw, Yw).predict_topk(Xw, k=10)  # kernels loaded
    data_mb = _rss_mb()

    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), _rss_mb()))
            time.sleep(0.005)

    handler = _Events()
    logger = logging.getLogger("skxmc")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    clf = XRLinearClassifier(n_jobs=2).fit(X_tr, Y_tr)
    t_fit = time.perf_counter()
    clf.predict_topk(X_te, k=10)
    t_pred = time.perf_counter()
    done.set()
    thread.join()
    bounds = [(t0, "start")]
    bounds += [(t, m) for t, m in handler.events if m.startswith("layer ")]
    bounds += [(t_fit, "end of fit (search structures)"), (t_pred, "predict_topk")]
    tree = [t for t, m in handler.events if m.startswith("label tree:")]
    if tree:
        bounds.insert(1, (tree[0], "label tree (PIFA, k-means)"))
    rows = []
    for (a, _), (b, label) in itertools.pairwise(bounds):
        seen = [r for t, r in samples if a <= t <= b]
        rows.append(
            {
                "stage (ends at)": label,
                "seconds": round(b - a, 2),
                "peak RSS MB": round(max(seen), 0) if seen else None,
            }
        )
    peak = max(r for _, r in samples)
    # no machine paths in results: another checkout is DIR
    argv = ["DIR" if a == str(args.source) else a for a in sys.argv[1:]]
    command = "python benchmarks/xmc_linear_memory.py " + " ".join(argv)
    md = [
        f"Command: `{command}`  ",
        f"skxmc at {commit or 'unknown'}; {args.dataset}: {X_tr.shape[0]} train rows, "
        f"{X_te.shape[0]} test rows, {X_tr.shape[1]} features, {Y_tr.shape[1]} labels. "
        f"RSS with the data loaded and the kernels warm: {data_mb:.0f} MB; highest sample: "
        f"{peak:.0f} MB. VmRSS sampled every 5 ms (a stage shorter than that may be missed).",
        "",
        markdown_table(rows, list(rows[0])),
    ]
    payload = {
        "command": command,
        "commit": commit,
        "dataset": args.dataset,
        "rss_before_fit_mb": data_mb,
        "peak_rss_mb": peak,
        "stages": rows,
    }
    write_results(args.name, payload, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
