"""The ``skxmc`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

from . import __version__

logger = logging.getLogger("skxmc")


def _demo(args: argparse.Namespace) -> int:
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    from ._baselines import knn_label_scores
    from ._labels import LabelSpace, encode_labels
    from .datasets import load_demo
    from .metrics import evaluate, inverse_propensity

    t0 = time.perf_counter()
    demo = load_demo()
    logger.info("loaded %d train / %d test records", len(demo.train_texts), len(demo.test_texts))
    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, dtype=np.float32)
    Y_train, classes = encode_labels(demo.train_labels, name="train_labels")
    t_fit = time.perf_counter()
    X_train = vectorizer.fit_transform(demo.train_texts)
    fit_s = time.perf_counter() - t_fit
    t_pred = time.perf_counter()
    X_test = vectorizer.transform(demo.test_texts)
    scores = knn_label_scores(X_train, Y_train, X_test, n_neighbors=args.neighbors, top_k=10)
    predict_s = time.perf_counter() - t_pred
    inv_p = inverse_propensity(Y_train)
    result = evaluate(
        demo.test_labels, scores, ks=(1, 3, 5), inv_propensity=inv_p, classes=classes
    )
    unseen = LabelSpace(classes).transform(demo.test_labels, name="test_labels").n_unknown.sum()
    print(
        f"skxmc {__version__} demo: TIBKAT/GND subset, {len(demo.train_texts)} train / "
        f"{len(demo.test_texts)} test records, {len(classes)} labels "
        f"({unseen} test label occurrences unseen in training count as misses)"
    )
    print(f"model: TF-IDF + {args.neighbors}-nearest-neighbour label voting")
    print("| metric | @1 | @3 | @5 |")
    print("|---|---|---|---|")
    for name, key in (("P", "precision"), ("nDCG", "ndcg"), ("PSP", "psprecision")):
        row = " | ".join(f"{100 * result[f'{key}@{k}']:.2f}" for k in (1, 3, 5))
        print(f"| {name} | {row} |")
    print(f"fit {fit_s:.2f} s, predict {predict_s:.2f} s, total {time.perf_counter() - t0:.2f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skxmc", description="Extreme multi-label text classification, scikit-learn style."
    )
    parser.add_argument("--version", action="version", version=f"skxmc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit and evaluate on the shipped TIBKAT demo data")
    demo.add_argument("--neighbors", type=int, default=20, help="neighbours that vote (default 20)")
    demo.add_argument("-v", "--verbose", action="store_true", help="log progress")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "verbose", False):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if getattr(args, "neighbors", 1) < 1:
        print("skxmc: error: --neighbors must be >= 1", file=sys.stderr)
        return 2
    return args.func(args)
