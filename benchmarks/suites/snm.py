"""Top-k stochastic negative mining against uniform negative sampling (Reddi et al. 2019,
Table 2), beside XR-Linear on the same features.

``SNMClassifier`` with top-k SNM for every ``k`` of ``--ks`` and with uniform sampling,
the same ``B`` (``n_sampled``), epochs and seeds, default parameters otherwise (BOWL
hinge, 512-512 network, batch 256, class vectors at the untrained network's centroids).
P@1/3/5, nDCG@5, PSP@5 (x100, mean ± sample std over the seeds). Features as in the
``linear`` suite. Replaces ``snm.py`` (its dev-split study of the settings is not ported:
git history keeps it).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks import _data
from benchmarks._harness import fit_complete, summarise

SEEDS = (0, 1, 2)
DATASETS = ("bibtex_bow", "delicious_bow", "tibkat_gnd_en")
B = {"bibtex_bow": 64, "delicious_bow": 256, "tibkat_gnd_en": 1024}
EPOCHS = {"bibtex_bow": 20, "delicious_bow": 10, "tibkat_gnd_en": 3}
METRICS = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@5", "fit_s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", nargs="+", help=f"default: {' '.join(DATASETS)}")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 5, 10, 50])
    parser.add_argument("--epochs", type=int, help="default: per data set (20, 10, 3)")
    parser.add_argument("--no-xrlinear", action="store_true")


def make_estimator(
    sampling: str, k: int, n_sampled: int | str, epochs: int, seed: int, device: str = "cpu"
) -> Any:
    """The only place that builds an SNM estimator (training settings included)."""
    from skxmc import SNMClassifier

    training = _data.training_settings(
        SNMClassifier, max_epochs=epochs, device=device, random_state=seed
    )
    return SNMClassifier(
        negative_sampling=sampling, n_hard_negatives=k, n_sampled=n_sampled, **training
    )


def run(args: argparse.Namespace) -> dict:
    names = args.datasets or (("bibtex_bow",) if args.quick else DATASETS)
    ks = [1] if args.quick else args.ks
    runs = []
    for name in names:
        if not _data.available(name):
            print(f"{name}: data absent, skipped")
            continue
        X_tr, Y_tr, X_te, Y_te = _data.xmc_features(name, args.quick)
        epochs = 1 if args.quick else (args.epochs or EPOCHS.get(name, 10))
        n_sampled = min(B.get(name, 256), Y_tr.shape[1] - 1)
        rows = [(f"SNM k={k}", "snm", k) for k in ks if k <= n_sampled]
        rows.append(("uniform", "uniform", 1))
        for seed in args.seeds:
            for row, sampling, k in rows:
                clf = make_estimator(sampling, k, n_sampled, epochs, seed)
                start = time.perf_counter()
                fit_complete(clf, X_tr, Y_tr)
                r = {"dataset": name, "row": row, "seed": seed}
                r["fit_s"] = time.perf_counter() - start
                r.update(_data.ranking_metrics(clf, X_te, Y_te, Y_tr))
                runs.append(r)
                print(f"{name} / {row} / seed {seed}: P@1 {r['P@1']:.2f}", flush=True)
            if not args.no_xrlinear:
                from skxmc import XRLinearClassifier

                clf = XRLinearClassifier(n_jobs=2, random_state=seed)
                start = time.perf_counter()
                clf.fit(X_tr, Y_tr)
                r = {"dataset": name, "row": "XR-Linear", "seed": seed}
                r["fit_s"] = time.perf_counter() - start
                r.update(_data.ranking_metrics(clf, X_te, Y_te, Y_tr))
                runs.append(r)
    return {
        "config": {"n_sampled": B, "epochs": args.epochs or EPOCHS, "ks": ks},
        "tables": [
            {
                "title": "SNM against uniform sampling",
                "caption": "x100 on the test split; fit seconds.",
                "columns": ["dataset", "row", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["dataset", "row"], METRICS),
            }
        ],
        "runs": runs,
    }
