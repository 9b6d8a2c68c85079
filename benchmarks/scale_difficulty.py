"""Difficulty of make_xmc_classification: P@1 / P@5 of XRLinearClassifier per setting.

Issue 18: the generator's first defaults gave P@1 ~97 on the 10k-label problem, easier
than any public XMC data set (P@1 of linear models: ~45 on Amazon-670K, ~65 on Wiki-500K,
~80 on EURLex-4K). This sweep picks ``noise`` / ``label_share`` (the share of tokens that
are unrelated to the labels / that are words of the sample's own labels) for the new
defaults. It runs on a dev instance (``--seed``, 1 by default: the scale benchmark uses
seed 0), the last ``n // 6`` rows held out, one fit per setting with ``n_jobs=2``.

    python benchmarks/scale_difficulty.py --labels 5000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from _common import markdown_table, write_results  # noqa: E402

SETTINGS = [(0.45, 0.25), (0.6, 0.15), (0.65, 0.1), (0.7, 0.08), (0.75, 0.05)]


def main() -> None:
    from skxmc import XRLinearClassifier
    from skxmc.datasets import make_xmc_classification
    from skxmc.metrics import precision_at_k

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--labels", type=int, default=5000)
    p.add_argument("--rows-per-label", type=int, default=10)
    p.add_argument("--n-features", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default="scale_difficulty")
    args = p.parse_args()
    n = args.rows_per_label * args.labels * 6 // 5
    n_train = n - n // 6
    rows = []
    for noise, share in SETTINGS:
        X, Y = make_xmc_classification(
            n,
            args.n_features,
            args.labels,
            noise=noise,
            label_share=share,
            random_state=args.seed,
        )
        t0 = time.perf_counter()
        clf = XRLinearClassifier(n_jobs=2, top_k=5).fit(X[:n_train], Y[:n_train])
        fit_s = time.perf_counter() - t0
        # classes_ are 0..L-1 (indicator Y), so the labels are the column indices
        scores = clf.predict_topk(X[n_train:], k=5)
        Yte = Y[n_train:]
        row = {
            "noise": noise,
            "label_share": share,
            "P@1": round(100 * precision_at_k(Yte, scores, k=1), 2),
            "P@5": round(100 * precision_at_k(Yte, scores, k=5), 2),
            "fit s": round(fit_s, 1),
        }
        print(row, flush=True)
        rows.append(row)
    command = "python benchmarks/scale_difficulty.py " + " ".join(sys.argv[1:])
    table = markdown_table(rows, list(rows[0]))
    md = (
        f"Command: `{command}`  \nDev instance: seed {args.seed}, {args.labels} labels, "
        f"{n_train} train / {n - n_train} held-out rows, {args.n_features} features; one fit "
        f"per setting (n_jobs=2, 2-core machine shared with other jobs).\n\n{table}"
    )
    write_results(args.name, {"command": command, "config": vars(args), "rows": rows}, md)
    print(md)


if __name__ == "__main__":
    main()
