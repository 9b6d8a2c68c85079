"""XR-Linear side by side: skxmc's XRLinearClassifier vs libpecos, napkinXC PLT and omikuji.

Every library sees the same features and labels and runs with 2 threads in its own child
process, so the peak resident memory reported is that library's own: the child reads its
own high-water mark (``VmHWM`` in ``/proc/self/status``) right after prediction. The peak
therefore includes the Python interpreter, the library's imports and the child's copy of
the train and test matrices (the same for every library of a dataset).

Features (fitted once per dataset, cached under ``benchmarks/results/cache/``):

* text sets (``tibkat_gnd_en``, ``reuters21578_allcats``): ``TfidfVectorizer(
  sublinear_tf=True, ngram_range=(1, 2), min_df=2, max_features=200000, dtype=float32)``
  fitted on train (rows are L2-normalised by the vectorizer); the labels of train and test
  are binarised together, so test-only labels exist as columns and count as misses;
* bag-of-words sets (``delicious_bow``, ``bibtex_bow``, XC-repository format): the given
  feature values, each row L2-normalised (``--bow-norm l2``, the default; ``none`` keeps
  the raw values). Every peer then sees unit-norm rows, as for the TF-IDF sets; napkinXC
  normalises rows internally anyway (``norm=True``), and libpecos's scores on these sets
  match the design notes' peer table only with normalised rows (see benchmarks/README.md).

CSR indices are sorted once. Libraries and settings (all with 2 threads):

* ``skxmc``: ``XRLinearClassifier(n_jobs=2)`` (defaults: ``negative_sampling="tfn"``);
  train = ``fit(X, Y)`` (Y a CSR 0/1 matrix), predict = ``predict_topk(X, k=10)``.
  ``skxmc-man``: the same with ``negative_sampling="tfn+man"``. The numba kernels are
  compiled once per run in an untimed warm-up child (cache in
  ``benchmarks/results/cache/numba``); the timed children load them from that cache.
  The child fits and predicts twice: round 1 is a fresh process (numba loads its cached
  kernels and initialises its target inside it: ``train s fresh process``), round 2 is
  warm (``train s``, ``predict s``). Peak RSS is read right after round 1. Save and load
  times of the model are measured after round 2 and reported in the JSON only.
* ``libpecos``: PIFA (``LabelEmbeddingFactory.create(Y, X, method="pifa")``) ->
  ``Indexer.gen(..., indexer_type="hierarchicalkmeans", nr_splits=16, max_leaf_size=100)``
  -> ``XLinearModel.train(X, Y, C=chain)`` with defaults, in memory. Round 1 (fresh
  process): train, save the model (``train + save s``, the protocol of the design notes),
  load the predict-only model (``XLinearModel.load(path, is_predict_only=True)``, PECOS's
  fast C++ path; its in-memory ``predict`` on a freshly trained model is 5-9x slower) and
  ``predict(X, beam_size=10, only_topk=10)`` (``predict s fresh process`` includes the
  load); peak RSS read after it. Round 2 (warm): train in memory again (``train s``, no
  save) and predict again with the loaded model (``predict s``).
* Per-stage times of both (PIFA, tree, each layer) come from their log lines (skxmc's
  DEBUG progress lines, PECOS's "Training Layer t" INFO lines) and are printed as a
  second table.
* ``napkinxc``: ``napkinxc.models.PLT(output=dir, threads=2)`` with defaults; train =
  ``fit(X, Y)``, predict = ``predict_proba(X, top_k=10)``.
* ``omikuji``: ``omikuji.Model.train_on_data(path, Model.default_hyper_param(),
  n_threads=2)`` on the training set written in XC format (written once, untimed; parsing
  the file is inside the train time, omikuji's Python API trains from files only); predict
  = one ``model.predict(pairs, beam_size=10, top_k=10)`` call per sample (its Python API
  predicts one sample at a time) on a 2-thread prediction pool.

A library that cannot be imported is reported as missing and the others still run.
The target checks (issue 22) use the warm in-memory train and predict times, as medians
of per-repeat ratios, and the fresh-process peak RSS.
Metrics (x100): ``skxmc.metrics.evaluate(Y_test, (top10_indices, top10_scores),
ks=(1, 3, 5), inv_propensity=inverse_propensity(Y_train))`` (A=0.55, B=1.5; PSP
un-normalised). With ``--repeats > 1`` every number is the median over repeats; the
libraries are interleaved within each repeat so that machine-load drift hits all of them.

libpecos needs numpy<2 and scipy<1.14, so run this from the benchmark environment::

    ../venv-bench/bin/pip install 'numpy<2' 'scipy<1.14' libpecos napkinxc omikuji
    ../venv-bench/bin/pip install -e . --no-deps
    ../venv-bench/bin/python benchmarks/xmc_linear.py            # all four datasets
    ../venv-bench/bin/python benchmarks/xmc_linear.py --datasets tibkat_gnd_en \\
        --repeats 3 --libraries skxmc libpecos

Prints a markdown table and writes ``benchmarks/results/xmc_linear.{md,json}``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.sparse as sp

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from _common import RESULTS, current_rss_mb, markdown_table, peak_rss_mb, write_results  # noqa: E402

CACHE = RESULTS / "cache"
DATA_DIR = Path(os.environ.get("SKXMC_DATA", REPO_ROOT.parent / "shared" / "data"))
THREADS = 2
TOP_K = 10
CACHE_VERSION = "xmc_linear-v1"

TEXT_DATASETS = ("tibkat_gnd_en", "reuters21578_allcats")
BOW_DATASETS = ("delicious_bow", "bibtex_bow")
DEFAULT_DATASETS = TEXT_DATASETS + BOW_DATASETS

TFIDF_PARAMS = dict(sublinear_tf=True, ngram_range=(1, 2), min_df=2, max_features=200000)

LIBRARIES: dict[str, str] = {
    "skxmc": "skxmc XRLinear",
    "skxmc-man": "skxmc XRLinear tfn+man",
    "libpecos": "libpecos XR-Linear",
    "napkinxc": "napkinXC PLT",
    "omikuji": "omikuji",
}
IMPORT_NAME = {
    "skxmc": "skxmc",
    "skxmc-man": "skxmc",
    "libpecos": "pecos",
    "napkinxc": "napkinxc",
    "omikuji": "omikuji",
    "skxmc-warmup": "skxmc",
}


# ----------------------------------------------------------------------------- data


def _file_stamp(paths: list[Path]) -> str:
    return ";".join(f"{p.name}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in paths)


def _save_csr(out: dict[str, np.ndarray], name: str, M: sp.csr_matrix) -> None:
    out[f"{name}_data"] = M.data
    out[f"{name}_indices"] = M.indices
    out[f"{name}_indptr"] = M.indptr
    out[f"{name}_shape"] = np.asarray(M.shape, dtype=np.int64)


def _load_csr(npz: Any, name: str) -> sp.csr_matrix:
    M = sp.csr_matrix(
        (npz[f"{name}_data"], npz[f"{name}_indices"], npz[f"{name}_indptr"]),
        shape=tuple(int(v) for v in npz[f"{name}_shape"]),
    )
    M.has_sorted_indices = True
    return M


def load_cached(
    path: Path, names: tuple[str, ...] = ("X_train", "Y_train", "X_test", "Y_test")
) -> tuple:
    with np.load(path) as npz:
        return tuple(_load_csr(npz, n) for n in names)


def prepare_dataset(name: str, bow_norm: str) -> tuple[Path, dict[str, Any]]:
    """Features and labels of one dataset, computed once and cached as ``.npz``."""
    folder = DATA_DIR / name
    if name in BOW_DATASETS or (folder / "train.txt").is_file():
        kind = "bow"
        files = [folder / "train.txt", folder / "test.txt"]
        settings = f"bow norm={bow_norm}"
    else:
        kind = "text"
        files = [folder / "train.jsonl.gz", folder / "test.jsonl.gz"]
        settings = f"tfidf {sorted(TFIDF_PARAMS.items())} float32, labels train+test"
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing (set SKXMC_DATA to the data folder).")
    key = hashlib.sha1(
        f"{CACHE_VERSION}|{name}|{settings}|{_file_stamp(files)}".encode()
    ).hexdigest()[:10]
    path = CACHE / f"xmc_linear_{name}_{key}.npz"
    info: dict[str, Any] = {
        "kind": kind,
        "features": settings,
        "cache": str(path.relative_to(REPO_ROOT)),
    }
    if path.is_file():
        X_tr, Y_tr, X_te, Y_te = load_cached(path)
        info["prepare_s"] = 0.0
    else:
        start = time.perf_counter()
        if kind == "text":
            X_tr, Y_tr, X_te, Y_te = _prepare_text(files)
        else:
            X_tr, Y_tr, X_te, Y_te = _prepare_bow(files, bow_norm)
        info["prepare_s"] = round(time.perf_counter() - start, 2)
        CACHE.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        for n, M in (("X_train", X_tr), ("Y_train", Y_tr), ("X_test", X_te), ("Y_test", Y_te)):
            _save_csr(arrays, n, M)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **arrays)
        tmp.replace(path)
    info.update(
        n_train=X_tr.shape[0],
        n_test=X_te.shape[0],
        n_features=X_tr.shape[1],
        n_labels=Y_tr.shape[1],
        n_labels_in_train=int(np.count_nonzero(np.bincount(Y_tr.indices, minlength=Y_tr.shape[1]))),
        avg_nnz_train=round(X_tr.nnz / max(X_tr.shape[0], 1), 1),
    )
    return path, info


def _prepare_text(files: list[Path]):
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc.datasets import load_text_jsonl
    from skxmc.labels import encode_labels

    train_texts, train_labels = load_text_jsonl(files[0])
    test_texts, test_labels = load_text_jsonl(files[1])
    vec = TfidfVectorizer(**TFIDF_PARAMS, dtype=np.float32)
    X_tr = sp.csr_matrix(vec.fit_transform(train_texts), dtype=np.float32)
    X_te = sp.csr_matrix(vec.transform(test_texts), dtype=np.float32)
    Y, _ = encode_labels(list(train_labels) + list(test_labels))
    Y = sp.csr_matrix(Y, dtype=np.float32)
    n = len(train_texts)
    Y_tr, Y_te = Y[:n], Y[n:]
    for M in (X_tr, X_te, Y_tr, Y_te):
        M.sort_indices()
    return X_tr, Y_tr, X_te, Y_te


def _prepare_bow(files: list[Path], bow_norm: str):
    from sklearn.preprocessing import normalize

    from skxmc.datasets import load_xc_bow

    X_tr, Y_tr = load_xc_bow(files[0])
    X_te, Y_te = load_xc_bow(files[1])
    if X_tr.shape[1] != X_te.shape[1] or Y_tr.shape[1] != Y_te.shape[1]:
        raise ValueError(f"{files[0].parent.name}: train/test headers disagree on the dimensions.")
    if bow_norm == "l2":
        X_tr = sp.csr_matrix(normalize(X_tr, norm="l2"), dtype=np.float32)
        X_te = sp.csr_matrix(normalize(X_te, norm="l2"), dtype=np.float32)
    for M in (X_tr, X_te, Y_tr, Y_te):
        M.sort_indices()
    return X_tr, Y_tr, X_te, Y_te


def write_xc_file(X: sp.csr_matrix, Y: sp.csr_matrix, path: Path) -> None:
    """Training set in the XC-repository text format (omikuji trains from files only)."""
    if path.is_file():
        return
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n")
        for i in range(X.shape[0]):
            labels = ",".join(map(str, Y.indices[Y.indptr[i] : Y.indptr[i + 1]].tolist()))
            lo, hi = X.indptr[i], X.indptr[i + 1]
            feats = " ".join(
                f"{f}:{v:.7g}" for f, v in zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist())
            )
            fh.write(f"{labels} {feats}\n")
    tmp.replace(path)


# ----------------------------------------------------------------------------- child side


def _pairs_from_csr(P: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (indices, scores) of a sparse score matrix, -1 / -inf in empty slots."""
    P = sp.csr_matrix(P)
    n = P.shape[0]
    rows = np.repeat(np.arange(n), np.diff(P.indptr))
    order = np.lexsort((-P.data, rows))
    pos = np.arange(P.nnz) - P.indptr[rows[order]]
    keep = pos < k
    idx = np.full((n, k), -1, dtype=np.int64)
    sc = np.full((n, k), -np.inf, dtype=np.float32)
    idx[rows[order][keep], pos[keep]] = P.indices[order][keep]
    sc[rows[order][keep], pos[keep]] = P.data[order][keep]
    return idx, sc


def _pairs_from_lists(preds: list, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.full((n, k), -1, dtype=np.int64)
    sc = np.full((n, k), -np.inf, dtype=np.float32)
    for i, row in enumerate(preds):
        for j, (label, score) in enumerate(row[:k]):
            idx[i, j] = label
            sc[i, j] = score
    return idx, sc


def _skxmc_tiny_runs(negative_sampling: tuple[str, ...], n_rows: int) -> float:
    """Seconds for fit + predict_topk of XRLinearClassifier on a random sparse problem.

    Big enough for a 3-layer tree and grown buffers, so that every code path (and numba
    specialisation) of the real runs is exercised (the untimed warm-up child).
    """
    from skxmc import XRLinearClassifier

    rng = np.random.default_rng(0)
    X = sp.random(n_rows, 2000, density=0.01, format="csr", dtype=np.float32, random_state=rng)
    Y = sp.random(n_rows, 2000, density=0.002, format="csr", dtype=np.float32, random_state=rng)
    Y.data[:] = 1.0
    X.sort_indices()
    Y.sort_indices()
    start = time.perf_counter()
    for ns in negative_sampling:
        clf = XRLinearClassifier(n_jobs=THREADS, negative_sampling=ns)
        clf.fit(X, Y).predict_topk(X, k=TOP_K)
    return time.perf_counter() - start


class _LogTimes(logging.Handler):
    """Records (perf_counter, logger name, message) of every log record: the per-layer
    progress both libraries log (skxmc at DEBUG, PECOS's "Training Layer t" at INFO)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[tuple[float, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((time.perf_counter(), record.name, record.getMessage()))


def _capture_logs(name: str, level: int) -> _LogTimes:
    handler = _LogTimes()
    log = logging.getLogger(name)
    log.addHandler(handler)
    log.setLevel(level)
    return handler


def _skxmc_stages(clf: Any, logs: _LogTimes, fit_start: float, fit_end: float) -> dict:
    """Stage times of one skxmc fit from its DEBUG log lines (2 decimals): set-up before
    the tree (validation, sorted copy, row norms, label encoding), PIFA, the k-means
    tree, each layer (``fit_time_per_layer_``) and the rest (search structures)."""
    layers = [float(v) for v in getattr(clf, "fit_time_per_layer_", [])]
    tree = [
        (t, m)
        for t, name, m in logs.records
        if fit_start <= t <= fit_end and name == "skxmc.tree" and m.startswith("label tree")
    ]
    if not tree:
        return {"layers": layers}
    t_tree, msg = tree[0]
    pifa = float(msg.split("embeddings ")[1].split("s")[0])
    kmeans = float(msg.split("clustering ")[1].split("s")[0])
    return {
        "setup": max(t_tree - pifa - kmeans - fit_start, 0.0),
        "pifa": pifa,
        "tree": kmeans,
        "layers": layers,
        "rest": fit_end - t_tree - sum(layers),
    }


def _run_skxmc(lib, X_tr, Y_tr, X_te, workdir, extra):
    """Fit + predict twice in this process: the first pair is a fresh process (numba
    loads its cached kernels and initialises its target inside it; peak RSS is read right
    after it), the second is warm (what a user fitting again, or a long-running service,
    pays)."""
    import skxmc
    from skxmc import XRLinearClassifier

    logs = _capture_logs("skxmc", logging.DEBUG)
    params = {"n_jobs": THREADS}
    if lib == "skxmc-man":
        params["negative_sampling"] = "tfn+man"
    times: dict[str, list[float]] = {"train": [], "predict": []}
    stages = []
    for round_ in range(2):
        clf = XRLinearClassifier(**params)
        start = time.perf_counter()
        clf.fit(X_tr, Y_tr)
        end = time.perf_counter()
        times["train"].append(end - start)
        stages.append(_skxmc_stages(clf, logs, start, end))
        start = time.perf_counter()
        idx, sc = clf.predict_topk(X_te, k=TOP_K)
        times["predict"].append(time.perf_counter() - start)
        if round_ == 0:
            peak = peak_rss_mb()
            first = (np.asarray(idx, dtype=np.int64), np.asarray(sc, dtype=np.float32))
            del clf
    if not (np.array_equal(first[0], idx) and np.array_equal(first[1], sc)):
        extra["warning"] = "the warm fit predicted differently from the fresh one"
    extra["settings"] = f"XRLinearClassifier({', '.join(f'{k}={v!r}' for k, v in params.items())})"
    extra["version"] = skxmc.__version__
    extra["train_cold_s"] = times["train"][0]
    extra["predict_cold_s"] = times["predict"][0]
    extra["stages_cold"], extra["stages"] = stages
    extra["fit_time_per_layer"] = [round(t, 3) for t in stages[1]["layers"]]
    # Save / load, measured after the peak reading (not part of the table).
    start = time.perf_counter()
    clf.save(workdir / "model")
    extra["save_s"] = time.perf_counter() - start
    del clf
    start = time.perf_counter()
    skxmc.load(workdir / "model")
    extra["load_s"] = time.perf_counter() - start
    return times["train"][1], times["predict"][1], peak, first[0], first[1]


def _pecos_train(X_tr, Y_tr, logs: _LogTimes, seed: int = 0):
    """PIFA -> hierarchical k-means (``seed``: PECOS's default 0) -> XLinearModel.train, in
    memory, with stage times (PECOS logs "Training Layer t" at INFO when each layer
    starts)."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    t0 = time.perf_counter()
    label_feat = LabelEmbeddingFactory.create(Y_tr, X_tr, method="pifa", threads=THREADS)
    t1 = time.perf_counter()
    chain = Indexer.gen(
        label_feat,
        indexer_type="hierarchicalkmeans",
        nr_splits=16,
        max_leaf_size=100,
        seed=seed,
        threads=THREADS,
    )
    t2 = time.perf_counter()
    n_before = len(logs.records)
    model = XLinearModel.train(X_tr, Y_tr, C=chain, threads=THREADS)
    t3 = time.perf_counter()
    starts = [t for t, _, m in logs.records[n_before:] if m.startswith("Training Layer")]
    bounds = [*starts, t3]
    stages = {
        "pifa": t1 - t0,
        "tree": t2 - t1,
        "setup": (starts[0] if starts else t3) - t2,
        "layers": [b - a for a, b in itertools.pairwise(bounds)],
        "n_layers": len(chain),
    }
    return model, t3 - t0, stages


def _run_pecos(X_tr, Y_tr, X_te, workdir, extra):
    """Round 1 (fresh process): train in memory, save, load the predict-only model,
    predict; peak RSS read after it. Round 2 (warm): train in memory again, predict again
    with the loaded predict-only model. ``train_s`` is round 2's in-memory train (no save),
    ``predict_s`` round 2's predict with the model already loaded."""
    import gc

    import pecos
    from pecos.xmc.xlinear.model import XLinearModel

    logs = _capture_logs("pecos", logging.INFO)
    model_dir = str(workdir / "pecos-model")
    model, train_cold, stages_cold = _pecos_train(X_tr, Y_tr, logs)
    start = time.perf_counter()
    model.save(model_dir)
    save_s = time.perf_counter() - start
    del model
    gc.collect()
    start = time.perf_counter()
    model = XLinearModel.load(model_dir, is_predict_only=True)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    P = model.predict(X_te, beam_size=10, only_topk=TOP_K, threads=THREADS)
    predict_cold = time.perf_counter() - start
    peak = peak_rss_mb()
    idx, sc = _pairs_from_csr(P, TOP_K)
    # warm round
    trained, train_warm, stages = _pecos_train(X_tr, Y_tr, logs)
    del trained
    gc.collect()
    start = time.perf_counter()
    model.predict(X_te, beam_size=10, only_topk=TOP_K, threads=THREADS)
    predict_warm = time.perf_counter() - start
    extra["settings"] = (
        "PIFA -> Indexer.gen(hierarchicalkmeans, nr_splits=16, max_leaf_size=100) -> "
        "XLinearModel.train defaults, in memory; predict with load(is_predict_only=True); "
        "beam_size=10, only_topk=10"
    )
    extra["version"] = getattr(pecos, "__version__", "?")
    extra.update(
        train_cold_s=train_cold,
        save_s=save_s,
        train_save_cold_s=train_cold + save_s,
        load_s=load_s,
        predict_cold_s=predict_cold,
        predict_load_cold_s=load_s + predict_cold,
        stages_cold=stages_cold,
        stages=stages,
    )
    return train_warm, predict_warm, peak, idx, sc


def _run_napkinxc(X_tr, Y_tr, X_te, workdir, extra):
    import napkinxc
    from napkinxc.models import PLT

    model = PLT(output=str(workdir / "napkinxc-model"), threads=THREADS)
    start = time.perf_counter()
    model.fit(X_tr, Y_tr)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    preds = model.predict_proba(X_te, top_k=TOP_K)
    predict_s = time.perf_counter() - start
    peak = peak_rss_mb()
    extra["settings"] = "PLT(threads=2) defaults; predict_proba(top_k=10)"
    extra["version"] = getattr(napkinxc, "__version__", "?")
    idx, sc = _pairs_from_lists(preds, X_te.shape[0], TOP_K)
    return train_s, predict_s, peak, idx, sc


def _run_omikuji(X_te, train_file, extra):
    import omikuji

    start = time.perf_counter()
    hyper = omikuji.Model.default_hyper_param()
    model = omikuji.Model.train_on_data(str(train_file), hyper, n_threads=THREADS)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    model.init_prediction_thread_pool(THREADS)
    preds = []
    indptr, indices, data = X_te.indptr, X_te.indices, X_te.data
    for i in range(X_te.shape[0]):
        lo, hi = indptr[i], indptr[i + 1]
        pairs = list(zip(indices[lo:hi].tolist(), data[lo:hi].tolist()))
        preds.append(model.predict(pairs, beam_size=10, top_k=TOP_K))
    predict_s = time.perf_counter() - start
    peak = peak_rss_mb()
    extra["settings"] = (
        "train_on_data(XC file, default_hyper_param(), n_threads=2); "
        "predict per sample, beam_size=10, top_k=10"
    )
    try:
        from importlib.metadata import version

        extra["version"] = version("omikuji")
    except Exception:  # pragma: no cover
        extra["version"] = "?"
    idx, sc = _pairs_from_lists(preds, X_te.shape[0], TOP_K)
    return train_s, predict_s, peak, idx, sc


def child_main(args: argparse.Namespace) -> int:
    """Runs one library on one dataset; writes its timings, peak RSS and top-k to files."""
    lib = args.child
    out = Path(args.out)
    result: dict[str, Any] = {"library": lib, "status": "ok"}
    try:
        __import__(IMPORT_NAME.get(lib, lib))
    except Exception as exc:  # missing or broken install
        result.update(status="missing", error=f"{type(exc).__name__}: {exc}")
        out.write_text(json.dumps(result))
        return 0
    if lib == "skxmc-warmup":
        # compiles every kernel of both negative-sampling modes into the on-disk cache
        result["warmup_s"] = _skxmc_tiny_runs(("tfn", "tfn+man"), n_rows=3000)
        out.write_text(json.dumps(result))
        return 0
    result["rss_after_import_mb"] = current_rss_mb()
    if lib == "omikuji":  # trains from its own file: only the test features are needed
        (X_te,) = load_cached(Path(args.data), ("X_test",))
    else:
        X_tr, Y_tr, X_te = load_cached(Path(args.data), ("X_train", "Y_train", "X_test"))
    result["rss_after_data_mb"] = current_rss_mb()
    workdir = Path(args.workdir)
    extra: dict[str, Any] = {}
    if lib in ("skxmc", "skxmc-man"):
        res = _run_skxmc(lib, X_tr, Y_tr, X_te, workdir, extra)
    elif lib == "libpecos":
        res = _run_pecos(X_tr, Y_tr, X_te, workdir, extra)
    elif lib == "napkinxc":
        res = _run_napkinxc(X_tr, Y_tr, X_te, workdir, extra)
    elif lib == "omikuji":
        res = _run_omikuji(X_te, Path(args.train_file), extra)
    else:
        raise ValueError(f"unknown library {lib!r}")
    train_s, predict_s, peak, idx, sc = res
    np.savez(Path(args.preds), indices=idx, scores=sc)
    result.update(train_s=train_s, predict_s=predict_s, peak_rss_mb=peak, **extra)
    out.write_text(json.dumps(result))
    return 0


# ----------------------------------------------------------------------------- parent side


def skxmc_fingerprint() -> str:
    """Hash of skxmc's Python sources: the editable install follows the working tree, so a
    run records exactly which code it measured (other edits may land mid-run)."""
    h = hashlib.sha1()
    for f in sorted((REPO_ROOT / "skxmc").rglob("*.py")):
        h.update(f.relative_to(REPO_ROOT).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _numba_cache_stamp() -> float:
    files = list((CACHE / "numba").rglob("*.nb[ic]"))
    return max((f.stat().st_mtime for f in files), default=0.0)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMBA_NUM_THREADS",
        "RAYON_NUM_THREADS",
    ):
        env[var] = str(THREADS)
    env["NUMBA_CACHE_DIR"] = str(CACHE / "numba")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def run_child(
    lib: str, data: Path | None, train_file: Path | None, timeout: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"xmc_linear_{lib}_") as tmp:
        tmp_path = Path(tmp)
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            lib,
            "--out",
            str(tmp_path / "result.json"),
            "--preds",
            str(tmp_path / "preds.npz"),
            "--workdir",
            str(tmp_path),
        ]
        if data is not None:
            cmd += ["--data", str(data)]
        if train_file is not None:
            cmd += ["--train-file", str(train_file)]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, env=_child_env(), capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return {"library": lib, "status": "failed", "error": f"timed out after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        result_file = tmp_path / "result.json"
        if proc.returncode != 0 or not result_file.is_file():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-15:]
            return {
                "library": lib,
                "status": "failed",
                "error": f"exit code {proc.returncode}: " + "\n".join(tail),
            }
        result = json.loads(result_file.read_text())
        result["child_wall_s"] = wall
        if result.get("status") == "ok" and (tmp_path / "preds.npz").is_file():
            with np.load(tmp_path / "preds.npz") as npz:
                result["_indices"], result["_scores"] = npz["indices"], npz["scores"]
        return result


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _evaluate(
    Y_te: sp.csr_matrix, Y_tr: sp.csr_matrix, idx: np.ndarray, sc: np.ndarray
) -> dict[str, float]:
    from skxmc.metrics import evaluate, inverse_propensity

    m = evaluate(Y_te, (idx, sc), ks=(1, 3, 5), inv_propensity=inverse_propensity(Y_tr))
    return {k: 100.0 * v for k, v in m.items()}


def _fmt(v: float, digits: int = 2) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


# Issue 22's targets: skxmc's warm in-memory train time over libpecos's, its predict time
# over libpecos's (model loaded), its fresh-process peak RSS over libpecos's.
TRAIN_RATIO_MAX = {"tibkat_gnd_en": 0.8}
TRAIN_RATIO_MAX_DEFAULT = 1.0
PREDICT_RATIO_MAX = 1.0
RSS_RATIO_MAX = {"tibkat_gnd_en": 1.2}
RSS_RATIO_MAX_DEFAULT = 1.3
METRIC_SLACK = 0.3


def _repeat_ratios(r: dict[str, Any], ref: dict[str, Any], key: str) -> list[float]:
    """skxmc's value / libpecos's value in each repeat (the libraries are interleaved
    within a repeat, so a ratio sees the same machine load); empty without repeats."""
    a, b = r.get(key + "_all", []), ref.get(key + "_all", [])
    return [x / y for x, y in zip(a, b) if y > 0] if len(a) == len(b) else []


def _paired_ratio(r: dict[str, Any], ref: dict[str, Any], key: str) -> float:
    """Median over repeats of the per-repeat ratios (:func:`_repeat_ratios`)."""
    ratios = _repeat_ratios(r, ref, key)
    return _median(ratios) if ratios else r[key] / ref[key]


def target_checks(rows: list[dict[str, Any]]) -> list[str]:
    """skxmc vs libpecos against issue 22's targets (see the constants above)."""
    lines = []
    by_ds: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok":
            by_ds.setdefault(r["dataset"], {})[r["library"]] = r
    for ds, libs in by_ds.items():
        ref = libs.get("libpecos")
        if ref is None:
            continue
        for lib in ("skxmc", "skxmc-man"):
            r = libs.get(lib)
            if r is None:
                continue
            misses, met = [], []
            for m, label in (("precision@1", "P@1"), ("precision@5", "P@5")):
                d = r[m] - ref[m]
                (misses if d < -METRIC_SLACK else met).append(f"{label} {d:+.2f} pts")
            checks = (
                (
                    "train_s",
                    "train (warm, in memory)",
                    TRAIN_RATIO_MAX.get(ds, TRAIN_RATIO_MAX_DEFAULT),
                ),
                ("predict_s", "predict (warm)", PREDICT_RATIO_MAX),
                (
                    "peak_rss_mb",
                    "peak RSS (fresh process)",
                    RSS_RATIO_MAX.get(ds, RSS_RATIO_MAX_DEFAULT),
                ),
            )
            for key, label, limit in checks:
                ratio = _paired_ratio(r, ref, key)
                spread = _repeat_ratios(r, ref, key)
                # a target near 1.0x is only readable against the repeats' own spread
                rng = f"; repeats {min(spread):.2f}-{max(spread):.2f}x" if len(spread) > 1 else ""
                (misses if ratio > limit else met).append(
                    f"{label} {ratio:.2f}x (<= {limit}x{rng})"
                )
            info = []
            if "train_cold_s" in r and "train_cold_s" in ref:
                info.append(f"fresh-process train {_paired_ratio(r, ref, 'train_cold_s'):.2f}x")
            if "train_save_cold_s" in ref and "train_cold_s" in r:
                info.append(
                    f"fresh-process train vs libpecos train + save "
                    f"{r['train_cold_s'] / ref['train_save_cold_s']:.2f}x"
                )
            if "predict_load_cold_s" in ref and "predict_cold_s" in r:
                info.append(
                    f"fresh predict vs libpecos load + predict "
                    f"{r['predict_cold_s'] / ref['predict_load_cold_s']:.2f}x"
                )
            verdict = "all targets met" if not misses else "MISSED: " + "; ".join(misses)
            lines.append(
                f"- {ds} / {lib} vs libpecos: {verdict}"
                + (f" (met: {'; '.join(met)})" if met and misses else f" ({'; '.join(met)})")
                + (f"; for information: {', '.join(info)}" if info else "")
            )
    return lines


def _stage_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median stage times (warm round) per dataset and library, for the profile table."""
    out = []
    n_layers = max(
        (len(st["layers"]) for r in rows for st in r.get("stages_all") or [] if st), default=0
    )
    for r in rows:
        stages = [st for st in r.get("stages_all") or [] if st and "layers" in st]
        if r["status"] != "ok" or not stages:
            continue
        row = {"dataset": r["dataset"], "library": LIBRARIES[r["library"]]}
        for key in ("setup", "pifa", "tree"):
            vals = [st[key] for st in stages if key in st]
            row[key] = _fmt(_median(vals)) if vals else ""
        for t in range(n_layers):
            vals = [st["layers"][t] for st in stages if len(st["layers"]) > t]
            row[f"layer {t + 1}"] = _fmt(_median(vals)) if vals else ""
        vals = [st["rest"] for st in stages if "rest" in st]
        row["rest"] = _fmt(_median(vals)) if vals else ""
        row["train s"] = _fmt(r["train_s"])
        out.append(row)
    return out


def _git_state() -> dict[str, str]:
    def git(*a: str) -> str:
        try:
            return subprocess.run(
                ["git", *a], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except Exception:
            return "?"

    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "skxmc_uncommitted": git("status", "--short", "--", "skxmc"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=list(DEFAULT_DATASETS),
        help="dataset folders under $SKXMC_DATA (comma or space separated)",
    )
    parser.add_argument(
        "--libraries",
        nargs="+",
        default=list(LIBRARIES),
        help=f"any of {', '.join(LIBRARIES)} (comma or space separated)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per library; medians reported")
    parser.add_argument(
        "--bow-norm",
        choices=("l2", "none"),
        default="l2",
        help="row normalisation of the bag-of-words sets' features",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per child run")
    parser.add_argument(
        "--name", default="xmc_linear", help="results file name (results/<name>.md/json)"
    )
    # child mode (internal)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--preds", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--train-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_main(args)

    datasets = [d for item in args.datasets for d in item.split(",") if d]
    libraries = [lib for item in args.libraries for lib in item.split(",") if lib]
    unknown = [lib for lib in libraries if lib not in LIBRARIES]
    if unknown:
        parser.error(f"unknown libraries {unknown}; choose from {list(LIBRARIES)}")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")

    print(
        f"python {sys.executable}; numpy {np.__version__}; threads per library {THREADS}; "
        f"CPUs {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    payload: dict[str, Any] = {
        # no machine paths: "python" is the benchmark environment's interpreter
        "command": " ".join(["python", "benchmarks/xmc_linear.py", *sys.argv[1:]]),
        "threads": THREADS,
        "repeats": args.repeats,
        "top_k": TOP_K,
        "bow_norm": args.bow_norm,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "git": _git_state(),
        "skxmc_source_at_start": skxmc_fingerprint(),
        "cpus": os.cpu_count(),
        "datasets": {},
        "missing": {},
        "rows": [],
        "load_average": {"start": os.getloadavg()},
    }

    missing: dict[str, str] = {}
    if any(lib.startswith("skxmc") for lib in libraries):
        warm = run_child("skxmc-warmup", None, None, args.timeout)
        payload["skxmc_warmup_s"] = warm.get("warmup_s")
        if warm.get("status") != "ok":
            print(f"skxmc warm-up: {warm.get('status')}: {warm.get('error')}", flush=True)
        else:
            print(
                f"skxmc numba warm-up (untimed for the table): {warm['warmup_s']:.1f} s", flush=True
            )

    rows: list[dict[str, Any]] = []
    for ds in datasets:
        data_path, info = prepare_dataset(ds, args.bow_norm)
        X_tr, Y_tr, _, Y_te = load_cached(data_path)
        train_file = None
        if "omikuji" in libraries:
            train_file = data_path.with_name(data_path.stem + "_train.xc.txt")
            write_xc_file(X_tr, Y_tr, train_file)
        info["load_average_start"] = os.getloadavg()
        payload["datasets"][ds] = info
        print(
            f"\n== {ds}: {info['n_train']} train / {info['n_test']} test, "
            f"{info['n_features']} features, "
            f"{info['n_labels']} labels ({info['n_labels_in_train']} in train); load average "
            f"{info['load_average_start'][0]:.2f}",
            flush=True,
        )
        runs: dict[str, list[dict[str, Any]]] = {lib: [] for lib in libraries}
        for rep in range(args.repeats):
            for lib in libraries:
                if lib in missing:
                    continue
                if lib.startswith("skxmc"):
                    # Compile (or load) the numba kernels right before the timed child, so
                    # that source edits made by others mid-run do not land in the timings.
                    warm = run_child("skxmc-warmup", None, None, args.timeout)
                    stamp = _numba_cache_stamp()
                    fingerprint = skxmc_fingerprint()
                res = run_child(lib, data_path, train_file, args.timeout)
                if lib.startswith("skxmc") and res["status"] == "ok":
                    res["warmup_s"] = warm.get("warmup_s")
                    res["skxmc_source"] = fingerprint
                    if skxmc_fingerprint() != fingerprint:
                        res["skxmc_source"] += "+changed-during-run"
                    res["compiled_during_timing"] = _numba_cache_stamp() > stamp
                    if res["compiled_during_timing"] or "changed" in res["skxmc_source"]:
                        print(
                            f"  WARNING: skxmc sources changed or numba compiled during the "
                            f"timed {lib} run; its times include compilation",
                            flush=True,
                        )
                if res["status"] == "missing":
                    missing[lib] = res["error"]
                    print(
                        f"  {LIBRARIES[lib]}: MISSING - cannot import "
                        f"{IMPORT_NAME[lib]!r} ({res['error']}); continuing without it",
                        flush=True,
                    )
                    continue
                if res["status"] != "ok":
                    print(
                        f"  {LIBRARIES[lib]} [repeat {rep + 1}]: FAILED - {res['error']}",
                        flush=True,
                    )
                    runs[lib].append(res)
                    continue
                res["metrics"] = _evaluate(Y_te, Y_tr, res.pop("_indices"), res.pop("_scores"))
                res.pop("_scores", None)
                runs[lib].append(res)
                print(
                    f"  {LIBRARIES[lib]} [repeat {rep + 1}]: "
                    f"P@1 {res['metrics']['precision@1']:.2f} "
                    f"P@5 {res['metrics']['precision@5']:.2f}  train {res['train_s']:.2f} s  "
                    f"predict {res['predict_s']:.2f} s  peak RSS {res['peak_rss_mb']:.0f} MB  "
                    f"(load avg {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
        for lib in libraries:
            ok = [r for r in runs[lib] if r["status"] == "ok"]
            if lib in missing and not runs[lib]:
                rows.append(
                    {"dataset": ds, "library": lib, "status": "missing", "error": missing[lib]}
                )
                continue
            if not ok:
                rows.append(
                    {
                        "dataset": ds,
                        "library": lib,
                        "status": "failed",
                        "error": runs[lib][0]["error"] if runs[lib] else "no run",
                    }
                )
                continue
            row: dict[str, Any] = {"dataset": ds, "library": lib, "status": "ok", "n_runs": len(ok)}
            for m in ok[0]["metrics"]:
                row[m] = _median([r["metrics"][m] for r in ok])
            for t in (
                "train_s",
                "predict_s",
                "peak_rss_mb",
                "rss_after_import_mb",
                "rss_after_data_mb",
                "train_cold_s",
                "predict_cold_s",
                "train_save_cold_s",
                "predict_load_cold_s",
                "save_s",
                "load_s",
            ):
                if t in ok[0]:
                    row[t] = _median([r[t] for r in ok])
                    row[t + "_all"] = [round(r[t], 4) for r in ok]
            row["stages_all"] = [r.get("stages") for r in ok]
            row["stages_cold_all"] = [r.get("stages_cold") for r in ok]
            warnings_seen = sorted({r["warning"] for r in ok if "warning" in r})
            if warnings_seen:
                row["warnings"] = warnings_seen
            row["settings"] = ok[0].get("settings")
            row["version"] = ok[0].get("version")
            for key in ("fit_time_per_layer", "skxmc_source"):
                if key in ok[0]:
                    row[key] = ok[0][key]
            if lib.startswith("skxmc"):
                row["skxmc_sources_seen"] = sorted({r.get("skxmc_source", "?") for r in ok})
                row["compiled_during_timing"] = [bool(r.get("compiled_during_timing")) for r in ok]
            rows.append(row)
        info["load_average_end"] = os.getloadavg()

    payload["load_average"]["end"] = os.getloadavg()
    payload["missing"] = missing
    payload["rows"] = rows

    columns = [
        "dataset",
        "library",
        "P@1",
        "P@3",
        "P@5",
        "nDCG@5",
        "PSP@5",
        "train s",
        "train s fresh process",
        "train + save s",
        "predict s",
        "predict s fresh process",
        "peak RSS MB",
        "RSS after import MB",
    ]
    table_rows = []
    for r in rows:
        label = LIBRARIES[r["library"]]
        if r["status"] != "ok":
            table_rows.append(
                {"dataset": r["dataset"], "library": label, "P@1": r["status"].upper()}
            )
            continue
        cold_predict = r.get("predict_load_cold_s", r.get("predict_cold_s"))
        table_rows.append(
            {
                "dataset": r["dataset"],
                "library": label,
                "P@1": _fmt(r["precision@1"]),
                "P@3": _fmt(r["precision@3"]),
                "P@5": _fmt(r["precision@5"]),
                "nDCG@5": _fmt(r["ndcg@5"]),
                "PSP@5": _fmt(r["psprecision@5"]),
                "train s": _fmt(r["train_s"]),
                "train s fresh process": _fmt(r["train_cold_s"]) if "train_cold_s" in r else "",
                "train + save s": _fmt(r["train_save_cold_s"]) if "train_save_cold_s" in r else "",
                "predict s": _fmt(r["predict_s"]),
                "predict s fresh process": _fmt(cold_predict) if cold_predict else "",
                "peak RSS MB": _fmt(r["peak_rss_mb"], 0),
                "RSS after import MB": _fmt(r.get("rss_after_import_mb", float("nan")), 0),
            }
        )
    stage_rows = _stage_rows(rows)
    la = payload["load_average"]
    sources = sorted({x for r in rows for x in r.get("skxmc_sources_seen", [])})
    header = [
        "# XR-Linear side by side (benchmarks/xmc_linear.py)",
        "",
        f"Command: `{payload['command']}`  ",
        f"{payload['cpus']} CPUs, {THREADS} threads per library, "
        "each library in its own child process; "
        f"{'median of ' + str(args.repeats) + ' repeats' if args.repeats > 1 else 'one run'}; "
        f"numpy {payload['numpy']}, scipy {payload['scipy']}; skxmc at {payload['git']['head']}"
        f"{' + uncommitted changes' if payload['git']['skxmc_uncommitted'] else ''}; "
        f"load average {la['start'][0]:.2f} at start, {la['end'][0]:.2f} at end (shared machine). "
        f"skxmc sources (sha1 of skxmc/**/*.py): "
        f"{', '.join(sources) or 'n/a'}.",
        "",
        "Metrics x100 (PSP@5 un-normalised, A=0.55, B=1.5), from the first (fresh-process) "
        "round. skxmc and libpecos train and predict twice in their child: round 1 is a fresh "
        "process ('fresh process' columns; skxmc's includes numba loading its cached kernels "
        "and initialising its target; libpecos's 'predict s fresh process' includes loading "
        "the predict-only model, `is_predict_only=True`, its fast path), round 2 is warm "
        "('train s', 'predict s': libpecos in memory, no save, predicting with the loaded "
        "predict-only model). 'train + save s': libpecos's round-1 train plus saving the "
        "model (the protocol of earlier runs of this script). Peak RSS: the child's own "
        "VmHWM read right after round 1 (interpreter, imports and its copy of the data "
        "included); 'RSS after import': VmRSS after `import skxmc` / `import pecos`, "
        "before the data. napkinXC and omikuji run once ('train s', 'predict s'); omikuji's "
        "train time includes parsing its XC-format training file and it predicts one sample "
        "per call (its Python API).",
        "",
    ]
    for ds, info in payload["datasets"].items():
        la_ds = info.get("load_average_start", (float("nan"),))[0]
        la_end = info.get("load_average_end", (float("nan"),))[0]
        header.append(
            f"- {ds}: {info['n_train']} train / {info['n_test']} test, {info['n_features']} "
            f"features ({info['features']}), {info['n_labels']} labels "
            f"({info['n_labels_in_train']} seen in train); load average {la_ds:.2f} at its "
            f"start, {la_end:.2f} at its end"
        )
    if missing:
        header.append("")
        for lib, err in missing.items():
            header.append(
                f"- MISSING: {LIBRARIES[lib]} could not be imported ({err}); not measured."
            )
    checks = target_checks(rows)
    body = markdown_table(table_rows, columns)
    text = "\n".join(header) + "\n\n" + body
    if checks:
        text += (
            "\n\nskxmc targets vs libpecos (issue 22: P@1/P@5 not more than 0.3 below; "
            "warm in-memory train at most 0.8x on tibkat_gnd_en and 1.0x elsewhere; warm "
            "predict at most 1.0x; fresh-process peak RSS at most 1.2x on tibkat_gnd_en and "
            "1.3x elsewhere; time ratios are medians of per-repeat ratios):\n\n" + "\n".join(checks)
        )
    if stage_rows:
        text += (
            "\n\nWhere the train time goes (warm round, medians over repeats, seconds). "
            "skxmc (from its DEBUG log lines, 10 ms resolution): set-up = validation, "
            "sorted float32 copy, row norms and label encoding before PIFA; tree = "
            "hierarchical k-means; layer t = `fit_time_per_layer_[t]` (node targets, "
            "groups, solver, pruning; the MAN beam with tfn+man); rest = cluster-label "
            "matrices, search structures and attributes. libpecos: PIFA "
            "and tree are timed around `LabelEmbeddingFactory.create` and `Indexer.gen`; "
            "set-up = `XLinearModel.train` up to its first 'Training Layer' log line; "
            "layer t = from its 'Training Layer t' line to the next (the last one to the "
            "end of train).\n\n" + markdown_table(stage_rows, list(stage_rows[0]))
        )
    payload["target_checks"] = checks
    print("\n" + text)
    path = write_results(args.name, payload, text)
    print(f"\nwrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
