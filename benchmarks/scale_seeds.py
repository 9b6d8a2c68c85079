"""P@k of XRLinearClassifier and libpecos XR-Linear over tree seeds, generated or real data.

Issue 18's P@k target compares one fit of each library (seed 0) on the generated
problem of ``benchmarks/scale.py``. A difference of a few tenths of a point is only
meaningful against the spread that the label tree's random initialisation alone gives, so
this script fits both libraries with several seeds on the same data: skxmc with
``XRLinearClassifier(random_state=s)``, libpecos with ``Indexer.gen(..., seed=s)``, both
otherwise as ``benchmarks/xmc_linear.py`` runs them (2 threads). Accuracy only: the fits
run one after the other in this process and their times are not reported.

    python benchmarks/scale_seeds.py --sizes 10000 100000 --seeds 0 1 2 3 4 \
        --rows-per-label 1 --length 57 --labels-per-sample 6.3 --name scale_seeds

``--datasets NAME ...`` fits on real data sets instead, with the cached features of
``benchmarks/xmc_linear.py`` (issue 22's P@k target, one fit per library there)::

    python benchmarks/scale_seeds.py --datasets tibkat_gnd_en --seeds 0 1 2 \
        --name xmc_linear_seeds_tibkat

Needs the benchmark environment (libpecos: numpy < 2). ``--merge NAME ...`` fits nothing
and joins the per-seed results of earlier runs into one table (a ``benchmarks/scale.py``
results file gives seed 0, which its fits use in both libraries)::

    python benchmarks/scale_seeds.py --merge scale_issue_1m scale_seeds_1m_s12 \
        --sizes 1000000 --name scale_seeds_1m
 Writes
``benchmarks/results/<--name>.{json,md}``: per size and library, P@1 / P@5 (x100) per seed
and their mean and sample standard deviation (ddof=1), and the paired per-seed
difference skxmc - libpecos.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from _common import markdown_table, write_results  # noqa: E402

THREADS = 2
TOP_K = 10


def _precision(Y_te: Any, idx: np.ndarray, sc: np.ndarray) -> dict[str, float]:
    from skxmc.metrics import precision_at_k

    return {f"P@{k}": 100.0 * float(precision_at_k(Y_te, (idx, sc), k=k)) for k in (1, 5)}


def _skxmc(X_tr, Y_tr, X_te, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from skxmc import XRLinearClassifier

    clf = XRLinearClassifier(n_jobs=THREADS, random_state=seed).fit(X_tr, Y_tr)
    return clf.predict_topk(X_te, k=TOP_K)


def _pecos(X_tr, Y_tr, X_te, seed: int) -> tuple[np.ndarray, np.ndarray]:
    import logging

    from xmc_linear import _capture_logs, _pairs_from_csr, _pecos_train

    model, _, _ = _pecos_train(X_tr, Y_tr, _capture_logs("pecos", logging.INFO), seed=seed)
    P = model.predict(X_te, beam_size=10, only_topk=TOP_K, threads=THREADS)
    return _pairs_from_csr(P, TOP_K)


def _rows(record: dict) -> list[dict[str, Any]]:
    """One size's table rows: per library and the paired difference, P@1 / P@5 per seed
    and mean ± sample std (ddof=1)."""
    per, L, n_test = record["per_seed"], record["n_labels"], record["n_test"]
    rows = []
    for lib in ("skxmc", "libpecos", "skxmc - libpecos"):
        row: dict[str, Any] = {"labels": L, "test rows": n_test, "library": lib}
        if "dataset" in record:
            row = {"dataset": record["dataset"], **row}
        for m in ("P@1", "P@5"):
            if lib == "skxmc - libpecos":
                v = np.array([a[m] - b[m] for a, b in zip(per["skxmc"], per["libpecos"])])
            else:
                v = np.array([r[m] for r in per[lib]])
            row[f"{m} per seed"] = " ".join(f"{x:.2f}" for x in v)
            row[m] = f"{v.mean():.2f} ± {v.std(ddof=1):.2f}" if len(v) > 1 else f"{v[0]:.2f}"
        rows.append(row)
    return rows


def _from_scale(name: str, L: int) -> dict:
    """Seed 0 of one size from a ``benchmarks/scale.py`` results file: its fits use tree
    seed 0 in both libraries (skxmc's default ``random_state=0``, PECOS's default seed)."""
    import json

    payload = json.loads((BENCH_DIR / "results" / f"{name}.json").read_text())
    found = [r for r in payload["sizes"] if r["n_labels"] == L]
    if len(found) != 1:
        raise SystemExit(f"--merge: {name} has no results for {L} labels")
    size = found[0]
    per = {
        lib: [{f"P@{k}": size["libraries"][lib]["metrics"][f"precision@{k}"] for k in (1, 5)}]
        for lib in ("skxmc", "libpecos")
    }
    return {"n_labels": L, "n_train": size["n_train"], "n_test": size["n_test"], "per_seed": per}


def _merge(args: argparse.Namespace, command: str) -> None:
    """Join per-seed results of earlier runs (``--merge``) into one table per size."""
    import json

    records = []
    for L in args.sizes:
        parts = []
        for name in args.merge:
            payload = json.loads((BENCH_DIR / "results" / f"{name}.json").read_text())
            if "sizes" in payload:  # a scale.py file: seed 0
                parts.append(([0], _from_scale(name, L)))
            else:
                found = [r for r in payload["records"] if r["n_labels"] == L]
                if len(found) != 1:
                    raise SystemExit(f"--merge: {name} has no results for {L} labels")
                parts.append((payload["config"]["seeds"], found[0]))
        order = sorted(range(len(parts)), key=lambda i: parts[i][0][0])
        seeds = [s for i in order for s in parts[i][0]]
        if len(set(seeds)) != len(seeds):
            raise SystemExit(f"--merge: seed repeated among {seeds}")
        first = parts[order[0]][1]
        per = {
            lib: [r for i in order for r in parts[i][1]["per_seed"][lib]]
            for lib in first["per_seed"]
        }
        records.append({**first, "per_seed": per, "seeds": seeds})
    rows = [row for rec in records for row in _rows(rec)]
    md = [
        f"Command: `{command}`  ",
        f"Per-seed P@1 / P@5 (x100) of the runs {', '.join(args.merge)} joined by tree seed "
        f"(seeds {records[0]['seeds']}; a `benchmarks/scale.py` file gives seed 0, its "
        "figures rounded to two decimals there). Same generated data and protocol as in "
        "each run's own file; mean ± sample std (ddof=1) over the seeds; the last row of "
        "each size is the per-seed difference (same seed number, not the same tree).",
        "",
        markdown_table(rows, list(rows[0])),
    ]
    write_results(
        args.name, {"command": command, "config": vars(args), "records": records}, "\n".join(md)
    )
    print("\n".join(md), flush=True)


def _problems(args: argparse.Namespace):
    """``(n_labels, dataset name or None, (X_tr, Y_tr, X_te, Y_te))`` per problem."""
    if args.datasets:
        from xmc_linear import load_cached, prepare_dataset

        for name in args.datasets:
            path, _ = prepare_dataset(name, "l2")
            X_tr, Y_tr, X_te, Y_te = load_cached(path)
            yield Y_tr.shape[1], name, (X_tr, Y_tr, X_te, Y_te)
        return
    from scale import generate

    for L in args.sizes:
        X, Y, n_train, _ = generate(L, args)
        yield L, None, (X[:n_train], Y[:n_train], X[n_train:], Y[n_train:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--rows-per-label", type=int, default=10)
    p.add_argument("--max-test", type=int, default=50_000)
    p.add_argument("--n-features", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0, help="random_state of the generator")
    p.add_argument("--length", type=float, default=50.0)
    p.add_argument("--labels-per-sample", type=float, default=3.0)
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="NAME",
        help="fit nothing: join the per-seed results of these earlier runs (results "
        "names; a benchmarks/scale.py file counts as seed 0) into one table per --sizes",
    )
    p.add_argument(
        "--datasets",
        nargs="+",
        metavar="NAME",
        help="real data sets (features of benchmarks/xmc_linear.py) instead of --sizes",
    )
    p.add_argument("--name", default="scale_seeds")
    args = p.parse_args()
    command = "python benchmarks/scale_seeds.py " + " ".join(sys.argv[1:])
    if args.merge:
        _merge(args, command)
        return
    records: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for L, name, (X_tr, Y_tr, X_te, Y_te) in _problems(args):
        n_train, n_test = X_tr.shape[0], X_te.shape[0]
        per = {"skxmc": [], "libpecos": []}
        for s in args.seeds:
            for lib, fit in (("skxmc", _skxmc), ("libpecos", _pecos)):
                per[lib].append(_precision(Y_te, *fit(X_tr, Y_tr, X_te, s)))
                print(f"L={L} seed={s} {lib}: {per[lib][-1]}", flush=True)
        record = {"n_labels": L, "n_train": n_train, "n_test": n_test, "per_seed": per}
        if name is not None:
            record["dataset"] = name
        records.append(record)
        rows.extend(_rows(record))
        data = (
            f"Data: {', '.join(args.datasets)}, the cached features of `benchmarks/xmc_linear.py`."
            if args.datasets
            else f"Data: the generated problem of `benchmarks/scale.py` (generator seed "
            f"{args.seed}, {args.n_features} features, length={args.length}, "
            f"labels_per_sample={args.labels_per_sample}, {args.rows_per_label} train "
            "row(s) per label)."
        )
        md = [
            f"Command: `{command}`  ",
            f"{data} Tree seeds {args.seeds}: skxmc "
            "`XRLinearClassifier(n_jobs=2, random_state=s)`, libpecos "
            "`Indexer.gen(hierarchicalkmeans, nr_splits=16, max_leaf_size=100, seed=s)` "
            "then `XLinearModel.train` defaults; both predict with beam 10. P@k x100; "
            f"mean ± sample std (ddof=1) over the {len(args.seeds)} seeds; the last row of "
            "each size is the per-seed difference (same seed number, not the same tree).",
            "",
            markdown_table(rows, list(rows[0])),
        ]
        payload = {"command": command, "config": vars(args), "records": records}
        write_results(args.name, payload, "\n".join(md))
        print("\n".join(md), flush=True)


if __name__ == "__main__":
    main()
