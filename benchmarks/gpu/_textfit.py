"""The fitting loop of the text classifiers' GPU runs (SharpReCL, KNN-BERT): the suites'
data loading, estimators and scores (:mod:`benchmarks._textclf`), in budget order."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from benchmarks import _data, _textclf
from benchmarks._harness import CACHE, fit_complete, summarise
from benchmarks.gpu._kit import Budget, Recorder

__all__ = ["encoder", "run_passes"]


def encoder(args: argparse.Namespace, texts: list) -> tuple[str, str]:
    """The packed MiniLM, or with ``--tiny`` a tiny random BERT of these texts' words."""
    if args.tiny:
        flat = [t if isinstance(t, str) else " ".join(t) for t in texts]
        folder = CACHE / f"gpu-tiny-bert-{args.method}"
        return _data.tiny_encoder(folder, flat), "tiny random BERT (2x32)"
    if args.encoder_dir is None:
        raise SystemExit("the pack has no encoder: pack it without --tiny")
    return str(args.encoder_dir), "all-MiniLM-L6-v2 (float16 weights, loaded as float32)"


def run_passes(
    args: argparse.Namespace,
    budget: Budget,
    rec: Recorder,
    suite: Any,
    settings: argparse.Namespace,
    passes: list[tuple[list[str], list[str]]],
    extra: dict[str, Any],
    heads: Callable[[Any, str], dict[str, dict]] | None = None,
) -> None:
    """Fit ``passes`` (``(data sets, rows)``, in order) for each seed in turn; before each
    fit, skip it when the budget left is below 1.2 times the longest fit of that data set
    so far. ``extra`` are parameters set on every estimator (``set_params``)."""
    loaded: dict[tuple[str, int], dict] = {}
    longest: dict[str, float] = {}
    enc = None
    for seed in args.seeds:
        for names, rows in passes:
            for name in names:
                folder, ratio = suite.DATASETS[name]
                if not _data.available(folder):
                    rec.skip(f"{name}: not in the pack")
                    continue
                if (name, seed) not in loaded:
                    loaded[name, seed] = _textclf.load(folder, ratio, settings, seed)
                data = loaded[name, seed]
                if enc is None:
                    enc, rec.config["encoder"] = encoder(args, data["X"])
                for row in rows:
                    if budget.left() < 1.2 * longest.get(name, 0.0):
                        rec.skip(f"{name} / {row} / seed {seed} (budget)")
                        continue
                    clf = suite.make_estimator(enc, settings, seed, suite.ROWS[row])
                    clf.set_params(**{k: v for k, v in extra.items() if k in clf.get_params()})
                    start = time.perf_counter()
                    fit_complete(clf, data["X"], data["y"])
                    fit_s = time.perf_counter() - start
                    longest[name] = max(longest.get(name, 0.0), fit_s)
                    for out_row, params in (heads(clf, row) if heads else {row: {}}).items():
                        if params:
                            clf.set_params(**params)
                        record = {"dataset": name, "row": out_row, "seed": seed, "fit_s": fit_s}
                        record["s_per_epoch"] = fit_s / max(settings.epochs, 1)
                        record.update(_textclf.scores(clf, data["X_test"], data["y_test"]))
                        record["n_train"] = len(data["X"])
                        rec.add(record)
                        acc = record["accuracy"]
                        print(f"[{budget.elapsed():.0f} s] {name} / {out_row} / seed {seed}: "
                              f"acc {acc:.2f} in {fit_s:.1f} s", flush=True)  # fmt: skip
                    rec.tables = [
                        {
                            "title": "Accuracy and macro-F1",
                            "caption": "x100 on the test split; seconds per epoch of the fit.",
                            "columns": ["dataset", "row", *_textclf.METRICS, "n_seeds"],
                            "rows": summarise(rec.runs, ["dataset", "row"], _textclf.METRICS),
                        }
                    ]
                    rec.write()
