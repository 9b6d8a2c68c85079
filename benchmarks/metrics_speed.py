"""Time P@k / nDCG@k / PSP@k on 1,000,000 rows x 1,000,000 labels of top-10 predictions.

Run: ``python benchmarks/metrics_speed.py [--rows N] [--labels L] [--repeats R]``.
Prints a markdown table and writes ``benchmarks/results/metrics_speed.{json,md}``.
The truth has a long-tailed label distribution (Zipf-like, 5.3 labels per row on average);
half of each row's true labels are planted among its 10 predictions so that hits occur.
The first call includes numba compilation (cached on disk afterwards); we report the
median of the repeats after one warm-up call.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import scipy.sparse as sp
from _common import current_rss_mb, markdown_table, peak_rss_mb, write_results

from skxmc.metrics import evaluate, inverse_propensity


def make_problem(n: int, L: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    per_row = rng.integers(1, 11, size=n)
    # Long tail: label ids drawn from a Zipf-like distribution over the label space.
    cols = (rng.pareto(1.2, size=per_row.sum()) * 50).astype(np.int64) % L
    indptr = np.concatenate([[0], np.cumsum(per_row)])
    Y = sp.csr_matrix((np.ones(len(cols), np.float32), cols, indptr), shape=(n, L))
    Y.sum_duplicates()
    Y.data[:] = 1
    # Ten distinct labels per row: an arithmetic progression with a random start and stride.
    start = rng.integers(0, L, size=(n, 1))
    stride = rng.integers(1, L // 10, size=(n, 1))
    pred = (start + np.arange(10) * stride) % L
    first_true = Y.indices[Y.indptr[:-1]]
    plant = (rng.random(n) < 0.5) & ~(pred[:, 1:] == first_true[:, None]).any(axis=1)
    pred[plant, 0] = first_true[plant]
    scores = np.sort(rng.random((n, 10)), axis=1)[:, ::-1].copy()
    return Y, pred, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    Y, pred, scores = make_problem(args.rows, args.labels)
    w = inverse_propensity(Y)
    S_csr = sp.csr_matrix(
        (scores.ravel(), pred.ravel(), np.arange(0, pred.size + 1, 10)), shape=Y.shape
    )
    rss_inputs = current_rss_mb()
    rows = []
    for fmt, Y_score in (("(indices, scores)", (pred, scores)), ("CSR scores", S_csr)):
        evaluate(
            Y[:1000],
            (pred[:1000], scores[:1000]) if fmt != "CSR scores" else S_csr[:1000],
            ks=(1, 3, 5),
            inv_propensity=w,
        )  # warm-up: numba compilation
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            result = evaluate(Y, Y_score, ks=(1, 3, 5), inv_propensity=w)
            times.append(time.perf_counter() - t)
        rows.append(
            {
                "predictions": fmt,
                "rows": args.rows,
                "labels": args.labels,
                "median s (P, R, nDCG, PSP, PSnDCG @1,3,5)": statistics.median(times),
                "peak RSS MB": peak_rss_mb(),
                "inputs RSS MB": rss_inputs,
                "P@1": result["precision@1"],
                "P@5": result["precision@5"],
            }
        )
    cols = list(rows[0])
    table = markdown_table(rows, cols)
    print(table)
    path = write_results("metrics_speed", {"rows": rows}, table)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
