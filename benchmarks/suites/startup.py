"""Per-process fixed costs: ``import skxmc``, and the first fit against the second.

Each repeat is a fresh interpreter (the seed numbers the repeat) measuring:

- ``import_s`` / ``import_rss_mb``: ``import skxmc`` (lazy: estimators load on first use);
- ``estimator_import_s`` / ``estimator_rss_mb``: ``from skxmc import XRLinearClassifier``
  (scikit-learn, scipy, numba);
- ``first_fit_s`` / ``second_fit_s`` and the predictions likewise: the same tiny fit
  (300 x 50 sparse, 30 labels) twice; the difference is the per-process start-up inside the
  first ``fit`` (numba loading its cached kernels and initialising its target).

Rows: ``warm cache`` (numba's on-disk cache filled by an untimed child first) and ``cold
cache`` (an empty ``NUMBA_CACHE_DIR``: the first fit after an install, which compiles the
kernels; ``skxmc warmup`` does that ahead of time). Replaces ``startup_cost.py`` and
``first_run.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from benchmarks._harness import Clock, in_child, summarise

SEEDS = (0, 1, 2, 3, 4)
METRICS = (
    "import_s",
    "import_rss_mb",
    "estimator_import_s",
    "estimator_rss_mb",
    "first_fit_s",
    "second_fit_s",
    "first_fit_cpu_s",
    "first_predict_s",
    "second_predict_s",
    "peak_rss_mb",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--caches", nargs="+", default=["warm", "cold"], choices=["warm", "cold"])


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(seed: int) -> dict:
    """In a fresh interpreter (nothing of skxmc imported before)."""
    assert "skxmc" not in sys.modules
    out = {}
    start = time.perf_counter()
    import skxmc  # noqa: F401

    out["import_s"], out["import_rss_mb"] = time.perf_counter() - start, _rss_mb()
    start = time.perf_counter()
    from skxmc import XRLinearClassifier

    out["estimator_import_s"], out["estimator_rss_mb"] = time.perf_counter() - start, _rss_mb()
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.random(300, 50, density=0.2, format="csr", dtype=np.float32, random_state=rng)
    Y = sp.csr_matrix((rng.random((300, 30)) < 0.1).astype(np.float32))
    for which in ("first", "second"):
        with Clock() as fit:
            clf = XRLinearClassifier(random_state=seed).fit(X, Y)
        with Clock() as predict:
            clf.predict_topk(X, k=5)
        out[f"{which}_fit_s"], out[f"{which}_fit_cpu_s"] = fit.wall_s, fit.cpu_s
        out[f"{which}_predict_s"] = predict.wall_s
    return out


def run(args: argparse.Namespace) -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        in_child("benchmarks.suites.startup:measure", seed=0)  # fill the warm cache, untimed
        # --quick: the warm cache only (a cold run compiles every kernel, about 15 s)
        caches = ["warm"] if args.quick else args.caches
        for seed in args.seeds:
            for cache in caches:
                env = {"NUMBA_CACHE_DIR": f"{tmp}/numba-{seed}"} if cache == "cold" else None
                r = in_child("benchmarks.suites.startup:measure", env=env, seed=seed)
                r.update(cache=f"{cache} cache", seed=seed)
                runs.append(r)
                print(
                    f"{cache} cache, repeat {seed}: first fit {r['first_fit_s']:.2f} s", flush=True
                )
            if args.quick:
                break
    digits = {m: (3 if m.endswith("_s") else 0) for m in METRICS}
    return {
        "config": {
            "tiny fit": "300 x 50 sparse (density 0.2), 30 labels, XRLinearClassifier defaults"
        },
        "tables": [
            {
                "title": "Fixed costs of a fresh process",
                "caption": "Seconds and resident MB; one fresh interpreter per repeat (seed).",
                "columns": ["cache", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["cache"], METRICS),
                "digits": digits,
            }
        ],
        "runs": runs,
    }
