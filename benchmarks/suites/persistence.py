"""Saved models: long label names (size and memory), and skxmc's format against skops.io.

``label-names`` (issue 48 item 17): 26aef59 saved labels as fixed-width ``<U`` arrays
(4 bytes x the longest label for every class); skxmc.io writes UTF-8 bytes plus offsets
and loads an object array. Each case fits an ``XRLinearClassifier(n_jobs=1)`` on random
L2-normalised sparse features (2,000 columns, density 0.005, ``random_state`` = the seed),
one training row per label (label ``i`` is ``i`` zero-padded to six digits, then ``x`` up
to the name length), saves it, and loads it in a second fresh interpreter. Reported: the
fitted ``classes_`` in memory (dtype, MB: the array plus the ``str`` objects it holds),
the fit process's peak resident memory during ``fit`` and that peak's growth over the
memory before ``fit`` (after the features and label lists are built, and after a
warm-up fit on 50 rows of int labels that loads the compiled kernels and lazy imports,
so that it is the labels' and the model's memory), the model folder's size,
the fit+save process's peak, the load's seconds, its process's peak and that peak's
growth over the imports, and the loaded ``classes_`` (dtype, MB). ``--skxmc DIR [DIR
...]`` measures the skxmc source tree in each ``DIR`` (a checkout of another commit, e.g.
main before a change, and ``.``) instead of this one, one after the other in the same run.

``skops``: the demo pipeline (``TfidfVectorizer`` + ``XRLinearClassifier`` on
``load_demo()``'s training set) written and read back with ``skops.io`` (trusting exactly
the types ``get_untrusted_types`` lists) and with ``skxmc.save`` / ``skxmc.load`` (also
``mmap=True``), in this process, once per seed: seconds, MiB on disk, the types a skops user
must trust, and whether the reloaded pipeline predicts the same top-10 labels on 50 test
texts. Rows are absent when skops is not installed (``pip install skops``).

``predict-only`` (issue 49 item 5): an ``XRLinearClassifier(n_jobs=2, random_state=seed)``
fitted on the cached TF-IDF features of each ``--datasets`` set (``benchmarks/_data.py``),
saved as it is and with ``skxmc.save(..., predict_only=True)``, each loaded back (also
``mmap=True``): MiB on disk (the whole folder and its ``arrays.npz``), the predict-only
folder's share of the full one, the seconds of save and load, and whether the loaded
model's top-10 labels and scores on the test rows are bit-identical to the fitted
model's. Not run by default (it needs ``SKXMC_DATA``); ``--parts predict-only``.

``--quick``: one case of 300 labels x 1,000 characters, and the demo pipeline fitted on
its first 800 texts (``predict-only``: the first 800 training rows of each set).
Replaces ``label_memory.py`` and ``persistence_skops.py``.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._harness import ROOT, Clock, in_child, summarise

SEEDS = (0, 1, 2)
# name: (labels, characters per label name)
CASES = {"1k-x-10k": (1_000, 10_000), "50k-x-2k": (50_000, 2_000)}
QUICK_CASES = {"300-x-1k": (300, 1_000)}
LABEL_KEYS = ("skxmc at", "case", "labels", "name length", "fit classes_ dtype", "classes_ dtype")
LABEL_METRICS = (
    "fit_classes_mb",
    "fit_peak_mb",
    "fit_peak_growth_mb",
    "model_mb",
    "fit_s",
    "save_s",
    "fit_save_peak_mb",
    "load_s",
    "load_peak_mb",
    "load_peak_growth_mb",
    "classes_mb",
)
SKOPS_KEYS = ("format", "types to trust", "same top-10")
SKOPS_METRICS = ("save_s", "load_s", "MiB")
PREDICT_ONLY_DATASETS = ("reuters21578_allcats", "tibkat_gnd_en")
PREDICT_ONLY_KEYS = ("dataset", "labels", "saved", "identical top-10")
PREDICT_ONLY_METRICS = ("MiB", "arrays_MiB", "share_of_full", "save_s", "load_s", "mmap_load_s")
PARTS = ["label-names", "skops", "predict-only"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cases", nargs="+", choices=list(CASES), help="label-name cases (default: all)"
    )
    parser.add_argument(
        "--skxmc",
        type=Path,
        nargs="+",
        help="measure the skxmc source tree in each of these folders, in turn (label names)",
    )
    parser.add_argument("--parts", nargs="+", default=["label-names", "skops"], choices=PARTS)
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=list(PREDICT_ONLY_DATASETS),
        help="the sets of the predict-only part (default: %(default)s)",
    )


def _rss_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return float("nan")


def _use(skxmc_root: str | None) -> None:
    if skxmc_root:
        sys.path.insert(0, skxmc_root)


def _relative_to_tree(path: str, skxmc_root: str | None) -> str:
    """``path`` inside the measured tree, so that results name no machine's folders; an
    absolute path left in a result says that another skxmc was imported."""
    try:
        return str(Path(path).resolve().relative_to(Path(skxmc_root or ROOT).resolve()))
    except ValueError:
        return path


def _reset_peak() -> None:
    """Reset this process's ``VmHWM`` to its current resident memory (Linux)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _classes_mb(classes) -> float:
    """``classes_`` in memory: the array, plus the Python objects of an object array."""
    held = sum(sys.getsizeof(s) for s in classes.tolist()) if classes.dtype == object else 0
    return (classes.nbytes + held) / 2**20


def fit_and_save(n_labels: int, length: int, seed: int, path: str, skxmc_root=None) -> dict:
    """In a fresh interpreter: fit on ``n_labels`` long label names and save."""
    _use(skxmc_root)
    import numpy as np
    import scipy.sparse as sp

    import skxmc

    X = sp.random(n_labels, 2000, density=0.005, format="csr", random_state=seed, dtype=np.float32)
    X.data[:] = 1.0
    X = sp.csr_matrix(X.multiply(1 / np.sqrt(np.maximum(X.getnnz(axis=1), 1))[:, None]))
    labels = [[f"{i:06d}".ljust(length, "x")] for i in range(n_labels)]
    # A warm-up fit on 50 rows of int labels first: it loads the compiled kernels and the
    # lazy imports, whose memory would otherwise hide the labels' in the fit's growth.
    skxmc.XRLinearClassifier(n_jobs=1).fit(X[:50], [[i % 5] for i in range(50)])
    start_peak = _rss_mb("VmHWM:")
    _reset_peak()
    base = _rss_mb("VmRSS:")
    with Clock() as fit:
        clf = skxmc.XRLinearClassifier(n_jobs=1, random_state=seed).fit(X, labels)
    fit_peak = _rss_mb("VmHWM:")
    del labels
    with Clock() as save:
        clf.save(path)
    return {
        "fit_s": fit.wall_s,
        "save_s": save.wall_s,
        "fit classes_ dtype": str(clf.classes_.dtype),
        "fit_classes_mb": _classes_mb(clf.classes_),
        "fit_peak_mb": fit_peak,
        "fit_peak_growth_mb": fit_peak - base,
        "rss_before_fit_mb": base,
        "fit_save_peak_mb": max(start_peak, _rss_mb("VmHWM:")),
        "skxmc_file": _relative_to_tree(skxmc.__file__, skxmc_root),
    }


def load_saved(path: str, skxmc_root=None) -> dict:
    """In a fresh interpreter: load what :func:`fit_and_save` wrote."""
    _use(skxmc_root)
    import skxmc
    import skxmc.linear  # imported before the baseline, as the estimator's module

    base = _rss_mb("VmRSS:")
    with Clock() as load:
        clf = skxmc.load(path)
    return {
        "load_s": load.wall_s,
        "load_peak_mb": _rss_mb("VmHWM:"),
        "load_peak_growth_mb": _rss_mb("VmHWM:") - base,
        "classes_ dtype": str(clf.classes_.dtype),
        "classes_mb": _classes_mb(clf.classes_),
    }


def _tree_commit(root: Path) -> str:
    """The tree's commit, with ``+changes`` when its ``skxmc/`` differs from it."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)

    out = git("rev-parse", "--short=7", "HEAD")
    if out.returncode != 0:
        return str(root)
    changed = git("status", "--porcelain", "--", "skxmc").stdout.strip()
    return out.stdout.strip() + ("+changes" if changed else "")


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*"))


def label_names(args: argparse.Namespace) -> list[dict]:
    cases = QUICK_CASES if args.quick else {c: CASES[c] for c in args.cases or CASES}
    trees = [tree.resolve() for tree in args.skxmc] if args.skxmc else [None]
    runs = []
    for seed, tree, (name, (n_labels, length)) in itertools.product(
        args.seeds, trees, cases.items()
    ):
        root, at = (str(tree), _tree_commit(tree)) if tree else (None, _tree_commit(ROOT))
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "model")
            run = {"skxmc at": at, "case": name, "labels": n_labels, "name length": length}
            run.update(
                in_child(
                    "benchmarks.suites.persistence:fit_and_save",
                    n_labels=n_labels,
                    length=length,
                    seed=seed,
                    path=path,
                    skxmc_root=root,
                )
            )
            run["model_mb"] = _size(Path(path)) / 2**20
            run.update(
                in_child("benchmarks.suites.persistence:load_saved", path=path, skxmc_root=root)
            )
        run["seed"] = seed
        runs.append(run)
        print(
            f"{at} {name}, seed {seed}: classes_ {run['fit_classes_mb']:.1f} MB, fit peak "
            f"{run['fit_peak_mb']:.0f} MB, model {run['model_mb']:.1f} MB, fit+save peak "
            f"{run['fit_save_peak_mb']:.0f} MB, load peak {run['load_peak_mb']:.0f} MB",
            flush=True,
        )
    return runs


def skops_vs_skxmc(args: argparse.Namespace) -> tuple[list[dict], dict]:
    try:
        import skops
        import skops.io as sio
    except ImportError:
        print("skops not installed: the skops rows are skipped", flush=True)
        return [], {"skops": "not installed: rows skipped"}
    from sklearn.feature_extraction.text import TfidfVectorizer

    import skxmc
    from skxmc.datasets import load_demo
    from skxmc.pipeline import make_pipeline

    demo = load_demo()
    n_train = 800 if args.quick else len(demo.train_texts)
    queries = demo.test_texts[:50]
    runs, trusted = [], set()
    for seed in args.seeds:
        pipe = make_pipeline(TfidfVectorizer(), skxmc.XRLinearClassifier(random_state=seed))
        pipe.fit(demo.train_texts[:n_train], demo.train_labels[:n_train])
        expected = pipe.predict_topk(queries)[0]
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / "model.skops"
            with Clock() as save:
                sio.dump(pipe, file)
            untrusted = sio.get_untrusted_types(file=file)
            trusted.update(untrusted)
            with Clock() as load:
                loaded = sio.load(file, trusted=untrusted)
            same = bool((loaded.predict_topk(queries)[0] == expected).all())
            runs.append(
                {
                    "format": "skops.io",
                    "types to trust": len(untrusted),
                    "same top-10": "yes" if same else "no",
                    "save_s": save.wall_s,
                    "load_s": load.wall_s,
                    "MiB": _size(file) / 2**20,
                    "seed": seed,
                }
            )
            for name, options in (("skxmc", {}), ("skxmc, mmap=True", {"mmap": True})):
                with Clock() as save:
                    path = skxmc.save(pipe, Path(tmp) / name, overwrite=True)
                with Clock() as load:
                    loaded = skxmc.load(path, **options)
                same = bool((loaded.predict_topk(queries)[0] == expected).all())
                runs.append(
                    {
                        "format": name,
                        "types to trust": 0,
                        "same top-10": "yes" if same else "no",
                        "save_s": save.wall_s,
                        "load_s": load.wall_s,
                        "MiB": _size(Path(path)) / 2**20,
                        "seed": seed,
                    }
                )
        print(f"skops vs skxmc, seed {seed}: done", flush=True)
    config = {
        "skops": skops.__version__,
        "demo train texts": n_train,
        "types skops asked to trust": sorted(trusted),
    }
    return runs, config


def _same_topk(a: tuple, b: tuple) -> bool:
    return bool((a[0] == b[0]).all() and (a[1] == b[1]).all())


def predict_only(args: argparse.Namespace) -> list[dict]:
    """Full against predict-only model folders of XR-Linear on reference sets."""
    import skxmc
    from benchmarks import _data

    runs = []
    for dataset, seed in itertools.product(args.datasets, args.seeds):
        if not _data.available(dataset):
            print(f"{dataset}: not in SKXMC_DATA, skipped", flush=True)
            continue
        X_tr, Y_tr, X_te, _ = _data.xmc_features(dataset, args.quick)
        clf = skxmc.XRLinearClassifier(n_jobs=2, random_state=seed).fit(X_tr, Y_tr)
        expected = clf.predict_topk(X_te, k=10)
        sizes = {}
        with tempfile.TemporaryDirectory() as tmp:
            for saved, options in (("full", {}), ("predict_only=True", {"predict_only": True})):
                with Clock() as save:
                    path = skxmc.save(clf, Path(tmp) / saved, **options)
                with Clock() as load:
                    loaded = skxmc.load(path)
                same = _same_topk(loaded.predict_topk(X_te, k=10), expected)
                with Clock() as mmap_load:
                    mapped = skxmc.load(path, mmap=True)
                same = same and _same_topk(mapped.predict_topk(X_te, k=10), expected)
                del loaded, mapped
                sizes[saved] = _size(Path(path))
                runs.append(
                    {
                        "dataset": dataset,
                        "labels": int(Y_tr.shape[1]),
                        "saved": saved,
                        "identical top-10": "yes" if same else "no",
                        "MiB": sizes[saved] / 2**20,
                        "arrays_MiB": _size(Path(path) / "arrays.npz") / 2**20,
                        "share_of_full": sizes[saved] / sizes["full"],
                        "save_s": save.wall_s,
                        "load_s": load.wall_s,
                        "mmap_load_s": mmap_load.wall_s,
                        "seed": seed,
                    }
                )
        print(
            f"predict-only, {dataset}, seed {seed}: full {sizes['full'] / 2**20:.1f} MiB, "
            f"predict-only {sizes['predict_only=True'] / 2**20:.1f} MiB",
            flush=True,
        )
    return runs


def run(args: argparse.Namespace) -> dict:
    tables, runs, config = [], [], {}
    if "label-names" in args.parts:
        label_runs = label_names(args)
        runs += label_runs
        config["label-names features"] = "2000 columns, density 0.005, L2-normalised rows"
        config["skxmc measured"] = (
            [str(tree.resolve()) for tree in args.skxmc] if args.skxmc else "this tree"
        )
        tables.append(
            {
                "id": "label-names",
                "title": "Long label names: model size and memory",
                "caption": (
                    "One training row per label; MB are 2^20 bytes. Fit+save and load each "
                    "in a fresh interpreter; fit growth is the fit process's peak during fit "
                    "over its resident memory before fit (after a warm-up fit), load growth "
                    "the load process's peak over its resident memory after the imports."
                ),
                "columns": [*LABEL_KEYS, *LABEL_METRICS, "n_seeds"],
                "rows": summarise(label_runs, LABEL_KEYS, LABEL_METRICS),
                "digits": {
                    "fit_classes_mb": 1,
                    "fit_peak_mb": 0,
                    "fit_peak_growth_mb": 0,
                    "model_mb": 1,
                    "classes_mb": 1,
                    "fit_save_peak_mb": 0,
                    "load_peak_mb": 0,
                    "load_peak_growth_mb": 0,
                },
            }
        )
    if "skops" in args.parts:
        skops_runs, skops_config = skops_vs_skxmc(args)
        runs += skops_runs
        config.update(skops_config)
        if skops_runs:
            types = ", ".join(skops_config["types skops asked to trust"])
            n_texts = skops_config["demo train texts"]
            tables.append(
                {
                    "id": "skops",
                    "title": "skops.io against skxmc.save / skxmc.load, demo pipeline",
                    "caption": (
                        f"TfidfVectorizer + XRLinearClassifier on {n_texts} demo texts, skops "
                        f"{skops_config['skops']}; same top-10 on 50 test texts as the pipeline "
                        f"before saving. The types skops asked to trust: {types}."
                    ),
                    "columns": [*SKOPS_KEYS, *SKOPS_METRICS, "n_seeds"],
                    "rows": summarise(skops_runs, SKOPS_KEYS, SKOPS_METRICS),
                    "digits": {"save_s": 2, "load_s": 2, "MiB": 1},
                }
            )
    if "predict-only" in args.parts:
        po_runs = predict_only(args)
        runs += po_runs
        config["predict-only estimator"] = "XRLinearClassifier(n_jobs=2), default tree"
        tables.append(
            {
                "id": "predict-only",
                "title": "XR-Linear saved in full and predict-only (skxmc.save(predict_only=True))",
                "caption": (
                    "Cached TF-IDF features of each set (benchmarks/_data.py); MiB are 2^20 "
                    "bytes of the model folder and of its arrays.npz; share_of_full is the "
                    "folder's size over the full folder's. Identical top-10: the loaded "
                    "model's (read and mapped) labels and scores on the test rows equal "
                    "the fitted model's, bit for bit."
                ),
                "columns": [*PREDICT_ONLY_KEYS, *PREDICT_ONLY_METRICS, "n_seeds"],
                "rows": summarise(po_runs, PREDICT_ONLY_KEYS, PREDICT_ONLY_METRICS),
                "digits": {
                    "MiB": 1,
                    "arrays_MiB": 1,
                    "share_of_full": 3,
                    "save_s": 2,
                    "load_s": 2,
                    "mmap_load_s": 3,
                },
            }
        )
    return {"config": config, "tables": tables, "runs": runs}
