"""Speed of the per-layer binary linear solver of XR-Linear (``skxmc.linear._solver``).

Workload: TF-IDF of tibkat_gnd_en's training texts (``TfidfVectorizer(sublinear_tf=True,
ngram_range=(1, 2), min_df=2, max_features=200000, dtype=float32)``, indices sorted) and
one flat layer: the training labels split into ``--groups`` random groups (about 90 labels
each for 250 groups); every label of a group trains on the group's rows, the instances
positive for any label of the group (teacher-forcing negatives). PECOS defaults: squared
hinge, Cp = Cn = 1, tol 0.1, max_iter 100, bias 1, weight threshold 0.1.

Reported, as medians of ``--repeats`` runs taken in the same process (timing noise on
shared machines is about 10%; process CPU seconds are reported too, since wall times of
2 threads mean little while other jobs share the 2 cores):

* ``fit_layer`` with 1 and 2 threads (and the logistic loss with ``--losses``);
* when ``pecos`` (libpecos) is importable, PECOS's own solver on the same layer
  (``MLModel.train`` on ``MLProblem(X, Y, C)``, ``M = Y C``), interleaved with ours, and
  the relative difference of the two weight matrices, next to the difference between two
  of our runs with different ``random_state`` (the noise floor at tol 0.1);
* a sanity reference against liblinear: scikit-learn's ``LinearSVC`` (same loss, C,
  tol, max_iter and regularised intercept) on a few of the layer's binary problems, next
  to :func:`~skxmc.linear._solver.fit_binary` on the same problems, with the relative gap
  of their primal objectives.

For scale: libpecos XR-Linear trains the whole tibkat model (PIFA, tree and all layers)
in about 34 s on 2 threads (reference notes).

PECOS needs numpy<2 / scipy<1.14, so run it from the bench environment (see
``benchmarks/tree_speed.py``)::

    ../venv-bench/bin/python benchmarks/solver_speed.py

or without PECOS from the project's environment. Prints a markdown table and writes
``benchmarks/results/solver_speed.json``. The TF-IDF matrix is cached under
``benchmarks/results/cache/`` (git-ignored; ``--no-cache`` to rebuild).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

from skxmc.datasets import load_text_jsonl
from skxmc.labels import encode_labels
from skxmc.linear._solver import (
    LayerGroups,
    fit_binary,
    fit_layer,
    label_seeds,
    row_squared_norms,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SKXMC_DATA", REPO_ROOT.parent / "shared" / "data"))
RESULTS = REPO_ROOT / "benchmarks" / "results"

try:  # optional peer
    from pecos.xmc.base import MLModel, MLProblem
except ImportError:  # pragma: no cover - depends on the environment
    MLModel = MLProblem = None


def load_features(train: Path, use_cache: bool) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    cache = RESULTS / "cache" / f"solver_speed_{train.parent.name}.npz"
    if use_cache and cache.exists():
        z = np.load(cache)
        X = sp.csr_matrix((z["xd"], z["xi"], z["xp"]), shape=tuple(z["xs"]))
        Y = sp.csr_matrix((z["yd"], z["yi"], z["yp"]), shape=tuple(z["ys"]))
        return X, Y
    texts, labels = load_text_jsonl(train)
    X = TfidfVectorizer(
        sublinear_tf=True,
        ngram_range=(1, 2),
        min_df=2,
        max_features=200_000,
        dtype=np.float32,
    ).fit_transform(texts)
    X = X.tocsr()
    X.sort_indices()  # TfidfVectorizer leaves them unsorted
    Y, _ = encode_labels(labels)
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            cache,
            xd=X.data,
            xi=X.indices,
            xp=X.indptr,
            xs=X.shape,
            yd=Y.data,
            yi=Y.indices,
            yp=Y.indptr,
            ys=Y.shape,
        )
    return X, Y


def squared_hinge_primal(X, y, w, b, bias=1.0) -> float:
    margin = np.maximum(0.0, 1.0 - y * (X @ w + bias * b))
    return 0.5 * (w @ w + b * b) + float(margin @ margin)


def liblinear_reference(X, Y, groups, n_groups: int, n_labels: int) -> dict:
    """Time LinearSVC vs fit_binary on the first labels of the first groups."""
    Yc = Y.tocsc()
    t_sk = t_ours = 0.0
    gaps, sizes = [], []
    seeds = label_seeds(0, Y.shape[1])
    for g in range(n_groups):
        rows = groups.row_indices[groups.row_indptr[g] : groups.row_indptr[g + 1]]
        Xg = X[rows]
        Xg.sort_indices()
        Xg64 = Xg.astype(np.float64)  # what liblinear gets after sklearn's conversion
        labs = groups.label_indices[groups.label_indptr[g] : groups.label_indptr[g + 1]]
        for c in labs[:n_labels]:
            y = np.where(Yc[:, [c]].toarray().ravel()[rows] > 0, 1.0, -1.0)
            svc = LinearSVC(
                loss="squared_hinge",
                dual=True,
                C=1.0,
                tol=0.1,
                max_iter=100,
                fit_intercept=True,
                intercept_scaling=1.0,
            )
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter 100
                svc.fit(Xg64, y)
            t_sk += time.perf_counter() - t0
            t0 = time.perf_counter()
            w, b, _ = fit_binary(Xg, y, seed=int(seeds[c]))
            t_ours += time.perf_counter() - t0
            f_ours = squared_hinge_primal(Xg64, y, w, b)
            f_sk = squared_hinge_primal(Xg64, y, svc.coef_.ravel(), svc.intercept_[0])
            gaps.append((f_ours - f_sk) / f_sk)
            sizes.append(Xg.nnz)
    return {
        "n_problems": len(gaps),
        "mean_nnz_per_problem": float(np.mean(sizes)),
        "liblinear_s": t_sk,
        "skxmc_fit_binary_s": t_ours,
        "primal_rel_gap_mean": float(np.mean(gaps)),
        "primal_rel_gap_max_abs": float(np.max(np.abs(gaps))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=DATA_DIR / "tibkat_gnd_en" / "train.jsonl.gz")
    parser.add_argument("--groups", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--losses", nargs="+", default=["squared_hinge"], choices=["squared_hinge", "logistic"]
    )
    parser.add_argument("--no-pecos", action="store_true", help="skip PECOS even if installed")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument(
        "--ref-groups", type=int, default=3, help="groups used for the liblinear reference"
    )
    parser.add_argument(
        "--ref-labels",
        type=int,
        default=10,
        help="labels per group used for the liblinear reference",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "solver_speed.json")
    args = parser.parse_args()
    use_pecos = MLModel is not None and not args.no_pecos

    t0 = time.perf_counter()
    X, Y = load_features(args.train, use_cache=not args.no_cache)
    t_features = time.perf_counter() - t0
    n, d = X.shape
    L = Y.shape[1]
    parent = np.random.RandomState(0).permutation(L) % args.groups
    groups = LayerGroups.from_matrices(Y, parent)
    rows_per_group = np.diff(groups.row_indptr)
    group_nnz = (
        np.add.reduceat(np.diff(X.indptr)[groups.row_indices], groups.row_indptr[:-1])
        if groups.row_indices.size
        else 0
    )
    work = float(np.sum(group_nnz * np.diff(groups.label_indptr)))
    print(
        f"X {X.shape} nnz {X.nnz}, {L} labels in {args.groups} groups: "
        f"{rows_per_group.mean():.0f} rows/group (max {rows_per_group.max()}), "
        f"sum_g nnz(rows_g) * labels_g = {work:.3g} (features {t_features:.1f} s)"
    )

    # compile (or load the numba cache) outside the timings
    t0 = time.perf_counter()
    small = LayerGroups.from_matrices(Y[:50], parent)
    for loss in args.losses:
        fit_layer(X[:50], Y[:50], small, loss=loss)
    fit_binary(X[:50], np.r_[1, -np.ones(49)])
    t_warm = time.perf_counter() - t0
    sqn = row_squared_norms(X)

    pecos_problem = None
    if use_pecos:
        C = sp.csc_matrix((np.ones(L, np.float32), (np.arange(L), parent)), shape=(L, args.groups))
        pecos_problem = MLProblem(X, Y.astype(np.float32), C=C)

    rows: list[dict] = []
    weights: dict[tuple, sp.spmatrix] = {}
    for loss in args.losses:
        for threads in args.threads:
            cases = [("skxmc", loss)]
            if use_pecos and loss == "squared_hinge":
                cases.append(("pecos", loss))
            times: dict[str, list[float]] = {lib: [] for lib, _ in cases}
            cpu: dict[str, list[float]] = {lib: [] for lib, _ in cases}
            for _ in range(args.repeats):
                for lib, _loss in cases:  # interleaved: same machine state for both
                    t0, c0 = time.perf_counter(), time.process_time()
                    if lib == "skxmc":
                        W = fit_layer(
                            X, Y, groups, loss=loss, n_jobs=threads, row_sqnorms=sqn, random_state=0
                        )
                    else:
                        W = MLModel.train(pecos_problem, threads=threads).W
                    times[lib].append(time.perf_counter() - t0)
                    cpu[lib].append(time.process_time() - c0)
                    weights[(lib, loss, threads)] = W
            for lib, _loss in cases:
                med = statistics.median(times[lib])
                W = weights[(lib, loss, threads)]
                rows.append(
                    {
                        "solver": lib,
                        "loss": loss,
                        "threads": threads,
                        "median_s": med,
                        "times_s": times[lib],
                        "median_cpu_s": statistics.median(cpu[lib]),
                        "labels_per_s": L / med,
                        "nnz_W": int(W.nnz),
                    }
                )

    def rel_diff(A, B) -> float:
        A = sp.csc_matrix(A, dtype=np.float64)
        B = sp.csc_matrix(B, dtype=np.float64)
        return float(scipy.sparse.linalg.norm(A - B) / scipy.sparse.linalg.norm(B))

    agreement = None
    if "squared_hinge" in args.losses:
        # noise floor: the same solver with another coordinate order (tol 0.1 stops early)
        W0 = weights[("skxmc", "squared_hinge", args.threads[0])]
        W_seed1 = fit_layer(X, Y, groups, n_jobs=-1, row_sqnorms=sqn, random_state=1)
        agreement = {"skxmc_seed0_vs_seed1_rel_fro_diff": rel_diff(W0, W_seed1)}
        if use_pecos:
            Wp = weights[("pecos", "squared_hinge", args.threads[0])]
            agreement["skxmc_vs_pecos_rel_fro_diff"] = rel_diff(W0, Wp)

    ref = liblinear_reference(X, Y, groups, args.ref_groups, args.ref_labels)

    print()
    print("| solver | loss | threads | median wall s | median CPU s | labels/s | nnz(W) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['solver']} | {r['loss']} | {r['threads']} | {r['median_s']:.2f} | "
            f"{r['median_cpu_s']:.2f} | {r['labels_per_s']:.0f} | {r['nnz_W']:,} |"
        )
    if agreement is not None:
        print(
            "\nweights, relative Frobenius difference (tol 0.1 stops early, so the coordinate "
            "order shows):"
        )
        print(f"- skxmc random_state 0 vs 1: {agreement['skxmc_seed0_vs_seed1_rel_fro_diff']:.2e}")
        if "skxmc_vs_pecos_rel_fro_diff" in agreement:
            print(f"- skxmc vs PECOS: {agreement['skxmc_vs_pecos_rel_fro_diff']:.2e}")
    print(
        f"\nliblinear reference, {ref['n_problems']} binary problems of the layer "
        f"(mean nnz {ref['mean_nnz_per_problem']:.0f}), one thread:"
    )
    print("| solver | total s | ms / problem |")
    print("|---|---|---|")
    print(
        f"| sklearn LinearSVC (liblinear) | {ref['liblinear_s']:.3f} | "
        f"{1000 * ref['liblinear_s'] / ref['n_problems']:.2f} |"
    )
    print(
        f"| skxmc fit_binary | {ref['skxmc_fit_binary_s']:.3f} | "
        f"{1000 * ref['skxmc_fit_binary_s'] / ref['n_problems']:.2f} |"
    )
    one = [
        r
        for r in rows
        if r["solver"] == "skxmc" and r["threads"] == 1 and r["loss"] == "squared_hinge"
    ]
    if one:
        print(
            f"| skxmc fit_layer (whole layer, per label) | - | "
            f"{1000 * one[0]['median_s'] / L:.2f} |"
        )
    print(
        f"primal objective, skxmc vs liblinear: mean relative gap "
        f"{ref['primal_rel_gap_mean']:+.2e}, max |gap| {ref['primal_rel_gap_max_abs']:.2e}"
    )

    result = {
        "dataset": args.train.parent.name,
        "n_samples": n,
        "n_features": d,
        "n_labels": L,
        "n_groups": args.groups,
        "rows_per_group_mean": float(rows_per_group.mean()),
        "rows_per_group_max": int(rows_per_group.max()),
        "work_nnz_times_labels": work,
        "repeats": args.repeats,
        "numba_warmup_s": t_warm,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "rows": rows,
        "weight_agreement": agreement,
        "liblinear_reference": ref,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    shown = args.out.relative_to(REPO_ROOT) if args.out.is_relative_to(REPO_ROOT) else args.out
    print(f"\nwrote {shown}")


if __name__ == "__main__":
    main()
