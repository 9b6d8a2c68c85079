"""Label-tree construction speed: skxmc's HierarchicalLabelTree vs PECOS's HierarchicalKMeans.

Both cluster the same PIFA label embeddings (TF-IDF features of the training texts; as in
the peer measurements of the design notes, the labels of train and test are binarised
together, so test-only labels have zero embeddings: 24,931 labels on tibkat_gnd_en), with
PECOS's defaults: ``nr_splits=16`` / ``branching_factor=16``, ``max_leaf_size=100``, seed 0,
20 iterations. Timings are medians of ``--repeats`` runs, the two libraries interleaved in
the same process (timing noise between identical runs is about 10% on shared machines).
Tree quality is reported as the spherical k-means objective at the leaves,
``sum_leaf |sum_{label in leaf} e_label|`` (higher = tighter leaves).

PECOS (``libpecos``) needs numpy<2 and scipy<1.14, so run it from a separate environment::

    python3 -m venv ../venv-bench
    ../venv-bench/bin/pip install torch==2.13.0 'numpy<2' 'scipy<1.14' libpecos \\
        scikit-learn numba joblib tqdm transformers gensim
    ../venv-bench/bin/pip install -e . --no-deps
    ../venv-bench/bin/python benchmarks/tree_speed.py

Without ``pecos`` installed only skxmc is timed. Prints a markdown table and writes
``benchmarks/results/tree_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc.datasets import load_text_jsonl
from skxmc.labels import encode_labels
from skxmc.tree import build_label_tree, pifa_embeddings

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SKXMC_DATA", REPO_ROOT.parent / "shared" / "data"))


def leaf_objective(E: sp.csr_matrix, codes: np.ndarray) -> float:
    """Spherical k-means objective of a leaf assignment: sum of norms of leaf sums."""
    n_leaves = int(codes.max()) + 1
    C = sp.csr_matrix(
        (np.ones(len(codes)), (codes, np.arange(len(codes)))), shape=(n_leaves, len(codes))
    )
    S = C @ E
    return float(np.sqrt(np.asarray(S.multiply(S).sum(axis=1))).sum())


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=DATA_DIR / "tibkat_gnd_en" / "train.jsonl.gz")
    parser.add_argument(
        "--test",
        type=Path,
        default=DATA_DIR / "tibkat_gnd_en" / "test.jsonl.gz",
        help="its labels join the label space (zero embeddings); "
        "pass 'none' for training labels only",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, -1],
        help="thread counts to time (-1: all cores)",
    )
    parser.add_argument(
        "--output", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "tree_speed.json"
    )
    args = parser.parse_args()

    try:
        from pecos.xmc import Indexer, LabelEmbeddingFactory
    except ImportError:
        Indexer = LabelEmbeddingFactory = None
        print("pecos not importable: timing skxmc only")

    texts, labels = load_text_jsonl(args.train)
    vectorizer = TfidfVectorizer(
        sublinear_tf=True, ngram_range=(1, 2), min_df=2, max_features=200000, dtype=np.float32
    )
    t_tfidf, X = timed(vectorizer.fit_transform, texts)
    X = X.tocsr()
    X.sort_indices()
    test_labels = [] if str(args.test) == "none" else load_text_jsonl(args.test)[1]
    Y, _ = encode_labels(labels + test_labels, name="Y")
    Y = Y[: X.shape[0]]
    print(
        f"{args.train.parent.name}: {X.shape[0]} samples, {X.shape[1]} features, "
        f"{Y.shape[1]} labels ({(Y.getnnz(axis=0) == 0).sum()} without training "
        f"positives); TF-IDF {t_tfidf:.1f}s"
    )

    rows: list[dict] = []

    def record(task: str, library: str, threads: int, times: list[float], **extra) -> None:
        rows.append(
            {
                "task": task,
                "library": library,
                "threads": threads,
                "median_s": statistics.median(times),
                "times_s": times,
                **extra,
            }
        )

    # PIFA: ours (l1 instance weights, the default) and PECOS's (l2, same product).
    pifa_times, pecos_pifa_times = [], []
    for _ in range(args.repeats):
        t, E = timed(pifa_embeddings, X, Y)
        pifa_times.append(t)
        if LabelEmbeddingFactory is not None:
            t, _ = timed(LabelEmbeddingFactory.create, Y, X, method="pifa")
            pecos_pifa_times.append(t)
    record("pifa", "skxmc", 1, pifa_times, nnz=int(E.nnz))
    if pecos_pifa_times:
        record("pifa", "pecos", -1, pecos_pifa_times)

    # Compile (or load from numba's cache) before timing.
    t_warm, _ = timed(build_label_tree, E[:2000], max_leaf_size=50, n_jobs=2)

    for threads in args.threads:
        ours, theirs = [], []
        for _ in range(args.repeats):
            t, (chain, codes) = timed(
                build_label_tree,
                E,
                branching_factor=16,
                max_leaf_size=100,
                max_iter=20,
                random_state=0,
                n_jobs=threads,
            )
            ours.append(t)
            if Indexer is not None:
                t, pecos_chain = timed(
                    Indexer.gen,
                    E,
                    indexer_type="hierarchicalkmeans",
                    nr_splits=16,
                    max_leaf_size=100,
                    max_iter=20,
                    seed=0,
                    threads=threads,
                )
                theirs.append(t)
        record(
            "tree",
            "skxmc",
            threads,
            ours,
            shapes=[list(C.shape) for C in chain],
            leaf_objective=leaf_objective(E, codes),
        )
        if theirs:
            pecos_codes = pecos_chain.chain[-1].tocsr().indices
            record(
                "tree",
                "pecos",
                threads,
                theirs,
                shapes=[list(C.shape) for C in pecos_chain.chain],
                leaf_objective=leaf_objective(E, pecos_codes),
            )

    print()
    print("| task | library | threads | median s | runs s | leaf objective |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        runs = ", ".join(f"{t:.2f}" for t in r["times_s"])
        obj = f"{r['leaf_objective']:.1f}" if "leaf_objective" in r else ""
        threads = "all" if r["threads"] == -1 else r["threads"]
        print(
            f"| {r['task']} | {r['library']} | {threads} | {r['median_s']:.2f} | {runs} | {obj} |"
        )
    ratios = {}
    for threads in args.threads:
        ours = [
            r
            for r in rows
            if r["task"] == "tree" and r["library"] == "skxmc" and r["threads"] == threads
        ]
        theirs = [
            r
            for r in rows
            if r["task"] == "tree" and r["library"] == "pecos" and r["threads"] == threads
        ]
        if ours and theirs:
            ratios[str(threads)] = ours[0]["median_s"] / theirs[0]["median_s"]
            print(f"\nskxmc / pecos tree time, threads={threads}: {ratios[str(threads)]:.2f}x")

    import numba
    import scipy
    import sklearn

    result = {
        "dataset": args.train.parent.name,
        "n_samples": X.shape[0],
        "n_features": X.shape[1],
        "n_labels": Y.shape[1],
        "n_labels_without_positives": int((Y.getnnz(axis=0) == 0).sum()),
        "repeats": args.repeats,
        "numba_warmup_s": t_warm,
        "rows": rows,
        "tree_time_ratio_skxmc_over_pecos": ratios,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__,
            "numba": numba.__version__,
            "pecos": None if Indexer is None else __import__("pecos").__version__,
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
