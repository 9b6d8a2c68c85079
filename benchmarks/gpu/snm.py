"""SNM on one GPU in 10 minutes: top-k stochastic negative mining against uniform
sampling (Reddi et al. 2019, Table 2), beside XR-Linear on the same features.

Paper: the BOWL setting with the hinge loss, SGD with a large learning rate for the
embedding layers and SGD with momentum for the linear map, B = 1,024 sampled labels on
the small AmazonCat and 32,768 elsewhere, several k. Here the ``snm`` suite's estimator
(``make_estimator``: those defaults, 512-512 network, batch 256) and settings on a GPU:
k in (1, 5, 10, 50), the suite's B per set (64, 256, 1,024: bibtex and delicious have
159 and 983 labels, tibkat_gnd_en's 1,024 is the paper's AmazonCat value) and epochs
(20, 10, 3), XR-Linear on the machine's cores. The reductions are the data sets (the
paper's AmazonCat, WikiLSHTC and Amazon-670K are not packed: bibtex, delicious and
tibkat_gnd_en are, 25 MiB) and tibkat's 3 epochs. Order: every row of each set for
seed 0, the sets from the smallest, then the next seed; a fit starts only when the
budget still holds it.
"""

from __future__ import annotations

import argparse
import time

from benchmarks import _data
from benchmarks._harness import fit_complete, summarise
from benchmarks.gpu._kit import Budget, Recorder
from benchmarks.suites import snm as suite

__all__ = ["ENCODER", "GENSIM", "PACK", "PACK_TINY", "SEEDS", "run"]

SEEDS = (0, 1, 2)
ENCODER, GENSIM = False, False
PACK = {
    "bibtex_bow": {"train": None, "test": None},
    "delicious_bow": {"train": None, "test": None},
    "tibkat_gnd_en": {"train": None, "test": None},
}
PACK_TINY = {"bibtex_bow": {"train": None, "test": None}}
KS = (1, 5, 10, 50)


def _fit(clf: object, data: tuple, name: str, row: str, seed: int, rec: Recorder) -> float:
    X_tr, Y_tr, X_te, Y_te = data
    start = time.perf_counter()
    fit_complete(clf, X_tr, Y_tr)
    record = {"dataset": name, "row": row, "seed": seed, "fit_s": time.perf_counter() - start}
    record.update(_data.ranking_metrics(clf, X_te, Y_te, Y_tr))
    rec.add(record)
    print(f"{name} / {row} / seed {seed}: P@1 {record['P@1']:.2f} in {record['fit_s']:.1f} s",
          flush=True)  # fmt: skip
    rec.tables = [
        {
            "title": "SNM against uniform sampling",
            "caption": "x100 on the test split; fit seconds.",
            "columns": ["dataset", "row", *suite.METRICS, "n_seeds"],
            "rows": summarise(rec.runs, ["dataset", "row"], suite.METRICS),
        }
    ]
    rec.write()
    return record["fit_s"]


def run(args: argparse.Namespace, budget: Budget, rec: Recorder) -> None:
    from skxmc import XRLinearClassifier

    names = list(PACK_TINY if args.tiny else PACK)
    ks = [1] if args.tiny else list(KS)
    rec.config.update({"n_sampled": suite.B, "epochs": suite.EPOCHS, "ks": ks})
    longest: dict[tuple[str, str], float] = {}
    cache: dict[str, tuple] = {}
    for seed in args.seeds:
        for name in names:
            if name not in cache:
                cache[name] = _data.xmc_features(name, args.tiny)
            data = cache[name]
            epochs = 1 if args.tiny else suite.EPOCHS.get(name, 10)
            n_sampled = min(suite.B.get(name, 256), data[1].shape[1] - 1)
            rows = [(f"SNM k={k}", "snm", k) for k in ks if k <= n_sampled]
            rows.append(("uniform", "uniform", 1))
            for row, sampling, k in rows:
                if budget.left() < 1.2 * longest.get((name, sampling), 0.0):
                    rec.skip(f"{name} / {row} / seed {seed} (budget)")
                    continue
                clf = suite.make_estimator(sampling, k, n_sampled, epochs, seed, args.device)
                seconds = _fit(clf, data, name, row, seed, rec)
                longest[name, sampling] = max(longest.get((name, sampling), 0.0), seconds)
            clf = XRLinearClassifier(n_jobs=args.threads, random_state=seed)
            _fit(clf, data, name, "XR-Linear", seed, rec)
