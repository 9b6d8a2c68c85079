"""Exact vs approximate (faiss IVF) top-k inner-product search, as used by KNN-BERT's kNN
vote and SNM's label search (``skxmc._search.InnerProductIndex``).

Data: L2-normalised 384-d vectors (MiniLM's width) drawn around 1,000 random class
centres, as a contrastively trained memory is; queries are fresh draws from the same
mixture. Per memory size: build time, ms per query (batches of 1,000 queries, one
thread) and recall@k of the approximate search against the exact one. The size at which
the index starts to pay off sets ``skxmc._search.APPROXIMATE_MIN_VECTORS``.

    OMP_NUM_THREADS=1 python benchmarks/knn_search.py

Writes ``benchmarks/results/knn_search.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import markdown_table, write_results

from skxmc._search import InnerProductIndex


def clustered(n: int, dim: int, centres: np.ndarray, spread: float, rng) -> np.ndarray:
    labels = rng.integers(len(centres), size=n)
    x = centres[labels] + spread * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", nargs="+", type=int, default=[20_000, 100_000, 300_000, 1_000_000]
    )
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--n-centres", type=int, default=1000)
    parser.add_argument(
        "--spread", type=float, default=1.0, help="noise norm relative to the unit centre"
    )
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="knn_search")
    args = parser.parse_args(argv)
    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((args.n_centres, args.dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    queries = clustered(args.queries, args.dim, centres, args.spread, rng)
    rows = []
    for n in args.sizes:
        memory = clustered(n, args.dim, centres, args.spread, rng)
        result: dict = {"vectors": n}
        for method in ("exact", "approximate"):
            t = time.perf_counter()
            index = InnerProductIndex(memory, method=method)
            build = time.perf_counter() - t
            index.search(queries[:10], args.k)  # warm-up
            t = time.perf_counter()
            _, found = index.search(queries, args.k)
            per_query = (time.perf_counter() - t) * 1000 / len(queries)
            if method == "exact":
                exact = found
                result["exact ms/query"] = per_query
            else:
                hits = sum(len(set(a) & set(b)) for a, b in zip(found, exact))
                result.update(
                    {
                        "approx build s": build,
                        "approx ms/query": per_query,
                        "recall@k": hits / exact.size,
                        "cells": index.n_cells,
                        "probe": index.n_probe,
                    }
                )
        result["speed-up"] = result["exact ms/query"] / result["approx ms/query"]
        rows.append(result)
        print(result, flush=True)
        columns = [
            "vectors",
            "exact ms/query",
            "approx ms/query",
            "speed-up",
            "recall@k",
            "approx build s",
            "cells",
            "probe",
        ]
        table = (
            f"# Exact vs approximate inner-product search (benchmarks/knn_search.py)\n\n"
            f"Command: `python benchmarks/knn_search.py {' '.join(sys.argv[1:])}`  \n"
            f"{args.dim}-d normalised vectors around {args.n_centres} centres (spread "
            f"{args.spread}), {args.queries} queries, k={args.k}, {args.threads} "
            f"thread(s), faiss {faiss.__version__}.\n\n" + markdown_table(rows, columns)
        )
        write_results(
            args.name,
            {
                "command": "python benchmarks/knn_search.py " + " ".join(sys.argv[1:]),
                "args": vars(args),
                "results": rows,
            },
            table,
        )


if __name__ == "__main__":
    main()
