"""A saved XRLinearClassifier loaded with and without ``mmap=True``, in fresh processes.

Issue 18, point 4: a predict-only model that several serving processes share. One model
is fitted on a generated problem (``make_xmc_classification`` with ``--labels``,
``--rows-per-label`` training rows per label, ``--length`` / ``--labels-per-sample``,
``random_state=--seed``) and saved with ``skxmc.save``; with ``--model-dir`` it is saved
there and kept, and a later run with the same ``--model-dir`` reuses it (and its held-out
rows, kept beside it as ``<model-dir>-queries.npz``) instead of fitting again; a model
directory saved by another script for the same settings is reused too (``--fitted-by``
says where it came from in the results), with held-out rows generated here. Then, for
each mode, ``--repeats`` fresh processes each import skxmc, load the model and predict the
top-10 of ``--rows`` held-out rows; each reports its load and predict times and, after
predicting, its resident memory split into private (``RssAnon``) and file-backed
(``RssFile``: the mapped model's pages, shared with the page cache and with every other
process that maps the file), and the growth of each from just before the load, and its
peak (``VmHWM``); with ``--single-rows N`` it then predicts the first N rows again, one
``predict_topk`` call each (serving latency). The modes:
a full load (``skxmc.load(path)``: sha256 and entry checks), a mapped load with the
default checks (``mmap=True``: entry checks, no sha256) and a trusted mapped load
(``mmap=True, verify=False``: sizes, headers and row pointers only). The model directory's
size is reported beside them. The page cache is warm (the model was just written or read),
as on a serving machine after the first start. ``--cold-cache`` (Linux, root) adds trusted
mapped loads that start with the page cache dropped, as on a machine that has just
received the model: as loaded (the kernel's normal readahead), and with the map advised
``MADV_RANDOM`` after the load (no readahead: fewer pages read and mapped, but one disk
read per touched page), and a trusted mapped load right after that one, whose page cache
holds only the single pages the MADV_RANDOM process read: without large page-cache folios,
the kernel maps around each touched page at most its 64 KiB fault-around window, where
with large folios (a file just written or read in large blocks) recent kernels map whole
folios. ``--shared N`` (default 4) adds rounds of N trusted mapped
processes at once, which measure their memory while all of them map the model: their
proportional set size (PSS) is what each serving process costs when several share it.

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
    import time
    t_start = time.perf_counter()
    import json, sys
    import numpy as np, scipy.sparse as sp
    import skxmc
    from skxmc import XRLinearClassifier  # the estimator's modules (scikit-learn, numba)

    def mem():
        out = {}
        for line in open("/proc/self/status"):
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1]) / 1024
        return out

    imports_s = time.perf_counter() - t_start
    path, queries, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    trusted = {"mmap": True, "verify": False}
    kwargs = {"full": {}, "mmap": {"mmap": True}, "trusted": trusted,
              "trusted-cold": trusted, "trusted-cold-random": trusted,
              "trusted-shared": trusted, "trusted-after-random": trusted}
    z = np.load(queries)
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
    before = mem()
    t0 = time.perf_counter()
    model = skxmc.load(path, **kwargs[mode])
    load_s = time.perf_counter() - t0
    if mode.endswith("-random"):
        # advise the kernel of random reads (no readahead) on the model's map: the buffer
        # under the weights' arrays
        import mmap
        base = model._search_cache.chunks[-1].blocks
        while isinstance(base, np.ndarray):
            base = base.base
        base.obj.madvise(mmap.MADV_RANDOM)
    t0 = time.perf_counter()
    labels, scores = model.predict_topk(X, k=10)
    predict_s = time.perf_counter() - t0
    if mode == "trusted-shared":
        # the other serving processes have loaded and predicted too: measure together
        print("ready", flush=True)
        sys.stdin.readline()
    after = mem()
    # serving latency: the first rows again, one predict_topk call per row, after the
    # batch (so the pages the batch read are in place)
    single_ms = []
    if mode != "trusted-shared":
        for i in range(int(sys.argv[4])):
            t0 = time.perf_counter()
            model.predict_topk(X[i : i + 1], k=10)
            single_ms.append(1000 * (time.perf_counter() - t0))
    print(json.dumps({"imports_s": imports_s, "load_s": load_s, "predict_s": predict_s,
                      "before": before, "after": after, "single_ms": single_ms,
                      "checksum": float(np.nansum(scores))}),
          flush=True)
    if mode == "trusted-shared":
        sys.stdin.readline()  # stay mapped until every process has measured
    """
)


MODES = {
    "full": "full (verify default: sha256 + entries)",
    "mmap": "mmap=True (entries, no sha256)",
    "trusted": "mmap=True, verify=False",
}
# --cold-cache: the page cache is dropped before each of these processes
COLD_MODES = {
    "trusted-cold": "mmap=True, verify=False, cold page cache",
    "trusted-cold-random": "the same, map advised MADV_RANDOM after the load",
    # no drop: the page cache as the previous (MADV_RANDOM) process left it
    "trusted-after-random": "mmap=True, verify=False, page cache filled by the previous row",
}


def _shared_run(cmd: list, env: dict, n: int) -> list:
    """``n`` trusted mapped serving processes at once: each loads and predicts, then all
    measure their memory while every one of them still maps the model."""
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(n)
    ]
    try:
        for proc in procs:
            while proc.stdout.readline().strip() != "ready":
                if proc.poll() is not None:
                    raise RuntimeError(f"a serving process exited with {proc.returncode}")
        outs = []
        for proc in procs:
            proc.stdin.write("measure\n")
            proc.stdin.flush()
            outs.append(json.loads(proc.stdout.readline()))
        for proc in procs:
            proc.stdin.write("exit\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
        return outs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def _drop_page_cache() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")  # needs root


def _fit_and_save(args: argparse.Namespace, path: Path, queries: Path) -> float | None:
    """Fits the model and saves it to ``path`` (unless ``path`` already holds a model),
    and saves the held-out rows to ``queries``; returns the fit's seconds (None: reused).

    The generator draws its topics and vocabularies before the rows, so the held-out rows
    come from the distribution of a model fitted on the same settings by another script
    (``benchmarks/scale.py`` at the same size, say)."""
    import numpy as np

    import skxmc
    from skxmc import XRLinearClassifier
    from skxmc.datasets import make_xmc_classification

    n_train = args.rows_per_label * args.labels
    X, Y = make_xmc_classification(
        n_train + args.rows,
        args.n_features,
        args.labels,
        length=args.length,
        labels_per_sample=args.labels_per_sample,
        random_state=args.seed,
    )
    fit_s = None
    if not (path / "skxmc-model.json").is_file():
        t0 = time.perf_counter()
        clf = XRLinearClassifier(n_jobs=2).fit(X[:n_train], Y[:n_train])
        fit_s = time.perf_counter() - t0
        skxmc.save(clf, path)
    Xq = X[n_train:]
    np.savez(queries, data=Xq.data, indices=Xq.indices, indptr=Xq.indptr, shape=Xq.shape)
    return fit_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--labels", type=int, default=100_000)
    p.add_argument("--rows-per-label", type=int, default=2)
    p.add_argument("--n-features", type=int, default=100_000)
    p.add_argument("--length", type=float, default=50.0, help="the generator's tokens per row")
    p.add_argument("--labels-per-sample", type=float, default=3.0)
    p.add_argument("--rows", type=int, default=1000, help="rows predicted per process")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", type=Path, help="save the model here and keep it; reuse it")
    p.add_argument(
        "--fitted-by",
        default="fitted by an earlier run",
        help="where a reused --model-dir came from, for the results",
    )
    p.add_argument(
        "--cold-cache",
        action="store_true",
        help="also run mapped loads after dropping the page cache (Linux, root)",
    )
    p.add_argument(
        "--cold-only",
        action="store_true",
        help="only the full load and the --cold-cache modes (no warm or shared modes, "
        "whose page cache would then hold what the cold modes left in it)",
    )
    p.add_argument(
        "--shared",
        type=int,
        default=4,
        help="also run this many trusted mapped processes at once (their PSS: each one's "
        "share of the pages they map together); 0 or 1: not",
    )
    p.add_argument(
        "--single-rows",
        type=int,
        default=0,
        help="after the batch, predict this many rows one call each (serving latency: "
        "median and 90th percentile per call)",
    )
    p.add_argument("--name", default="mmap_load")
    args = p.parse_args()
    modes = {**MODES, **(COLD_MODES if args.cold_cache else {})}
    if args.cold_only:  # the full load stays: it is what the others are compared with
        modes = {"full": MODES["full"], **COLD_MODES}
    elif args.shared > 1:
        modes["trusted-shared"] = f"mmap=True, verify=False, {args.shared} processes at once"

    tmp = tempfile.TemporaryDirectory()
    path = args.model_dir if args.model_dir is not None else Path(tmp.name) / "model"
    queries = path.with_name(path.name + "-queries.npz")
    fit_s = None
    if (path / "skxmc-model.json").is_file() and queries.is_file():
        print(f"reusing the model in {path}", flush=True)
    else:
        fit_s = _fit_and_save(args, path, queries)
        print(f"model in {path} (fit s: {fit_s})", flush=True)
    size_mb = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    runs: dict[str, list] = {mode: [] for mode in modes}
    try:
        for _ in range(args.repeats):
            for mode in modes:
                if mode in COLD_MODES and mode != "trusted-after-random":
                    _drop_page_cache()
                cmd = [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(path),
                    str(queries),
                    mode,
                    str(args.single_rows),
                ]
                if mode == "trusted-shared":
                    runs[mode].extend(_shared_run(cmd, env, args.shared))
                else:
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
                    runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(mode, runs[mode][-1], flush=True)
    finally:
        tmp.cleanup()
    checks = {r["checksum"] for rs in runs.values() for r in rs}
    rows = []
    full_rss = statistics.median(r["after"]["VmRSS"] for r in runs["full"])
    full_pss = statistics.median(r["after"]["Pss"] for r in runs["full"])
    full_peak = statistics.median(r["after"]["VmHWM"] for r in runs["full"])
    for mode, rs in runs.items():

        def med(f, rs=rs):
            return round(statistics.median(f(r) for r in rs), 3)

        rows.append(
            {
                "load": modes[mode],
                "imports s": med(lambda r: r["imports_s"]),
                "load s": med(lambda r: r["load_s"]),
                f"predict {args.rows} rows s": med(lambda r: r["predict_s"]),
                "load + predict s": med(lambda r: r["load_s"] + r["predict_s"]),
                "imports + load + predict s": med(
                    lambda r: r["imports_s"] + r["load_s"] + r["predict_s"]
                ),
                **(
                    {
                        "single-row predict ms median": med(
                            lambda r: statistics.median(r["single_ms"])
                        ),
                        "single-row predict ms p90": med(
                            lambda r: statistics.quantiles(r["single_ms"], n=10)[-1]
                        ),
                    }
                    if args.single_rows > 1 and mode != "trusted-shared"
                    else {}
                ),
                "RSS after MB": med(lambda r: r["after"]["VmRSS"]),
                "RSS / full load": round(med(lambda r: r["after"]["VmRSS"]) / full_rss, 3),
                "peak RSS MB": med(lambda r: r["after"]["VmHWM"]),
                "peak / full load": round(med(lambda r: r["after"]["VmHWM"]) / full_peak, 3),
                "PSS after MB": med(lambda r: r["after"]["Pss"]),
                "PSS / full load": round(med(lambda r: r["after"]["Pss"]) / full_pss, 3),
                "private (RssAnon) growth MB": med(
                    lambda r: r["after"]["RssAnon"] - r["before"]["RssAnon"]
                ),
                "file-backed (RssFile) growth MB": med(
                    lambda r: r["after"]["RssFile"] - r["before"]["RssFile"]
                ),
            }
        )
    # no machine paths in results: the model directory is DIR
    argv = ["DIR" if a == str(args.model_dir) else a for a in sys.argv[1:]]
    command = "python benchmarks/mmap_load.py " + " ".join(argv)
    n_train = args.rows_per_label * args.labels
    fitted = f"fit {fit_s:.0f} s" if fit_s is not None else args.fitted_by
    md = (
        f"Command: `{command}`  \nModel: XRLinearClassifier(n_jobs=2) fitted on "
        f"make_xmc_classification({n_train + args.rows}, {args.n_features}, {args.labels}, "
        f"length={args.length}, labels_per_sample={args.labels_per_sample}, "
        f"random_state={args.seed}) minus the last {args.rows} rows ({fitted}); model "
        f"directory {size_mb:.0f} MB. Medians of {args.repeats} fresh processes per mode "
        f"(modes interleaved), warm page cache unless the mode says cold (then the page "
        f"cache was dropped just before the process started); same predictions in every "
        f"process: "
        f"{len(checks) == 1}. `imports s`: `import skxmc` and the estimator's modules "
        f"(scikit-learn, numba), from the first statement of the process (interpreter "
        f"start-up not included); `load s`: `skxmc.load` after them. `RSS after`: VmRSS "
        f"after the prediction, private and file-backed pages together (the file-backed "
        f"ones are shared with the page cache and every process that maps the file); "
        f"`single-row predict ms`: after the batch, the first --single-rows rows "
        f"predicted again one `predict_topk` call each (median and 90th percentile per "
        f"process, then the median over processes); "
        f"`peak RSS`: the process's highest VmRSS (VmHWM) from its start to the end of "
        f"the prediction (the load and the prediction's transient buffers included); "
        f"`PSS after`: the proportional set size after the prediction (private pages, plus "
        f"each shared page divided by the number of processes that map it: what a serving "
        f"process costs when several map the same model). `RSS / full load`, `peak / full "
        f"load` and `PSS / full load` divide by the full loads' medians. The "
        f"machine was shared with other jobs (load average {os.getloadavg()[0]:.1f} at "
        f"the end).\n\n" + markdown_table(rows, list(rows[0]))
    )
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config.pop("model_dir")
    payload = {"command": command, "config": config, "model_mb": size_mb, "runs": runs}
    write_results(args.name, {**payload, "fit_s": fit_s, "rows": rows}, md)
    print(md)


if __name__ == "__main__":
    main()
