"""Which estimator when: every skxmc estimator against strong baselines, in one protocol.

Two families of data sets:

- multi-label: reuters21578_allcats, goemotions, tibkat_gnd_en (P@1, P@3, nDCG@5, x100);
- imbalanced multi-class: ir=50 versions of TREC, CR and Biomedical (made with
  :func:`skxmc.datasets.make_imbalanced`, a new draw per seed) and TREC with 100 training
  texts per class (few-shot, a new sample per seed) (accuracy and macro-F1, x100).

Methods: TF-IDF + XR-Linear (``negative_sampling="tfn+man"``), TF-IDF + logistic
regression (one-vs-rest for multi-label), frozen all-MiniLM-L6-v2 sentence embeddings +
logistic regression, a fine-tuned MiniLM with logit-adjusted cross-entropy, SharpReCL,
KNN-BERT (multi-class), TF-IDF + SNM and MatchXML (multi-label).

Protocol, per seed: 20% of the training split (drawn with the seed) is the dev split;
each method fits one model per setting of its small grid (``GRIDS``) on the other 80%,
keeps the best on dev (macro-F1 for multi-class, P@1 for multi-label), and that model is
scored on the test split. Reported: mean ± sample std over the seeds, fit seconds of the
chosen setting, predict milliseconds per test text, and the peak resident memory of the
process that ran the method (one fresh interpreter per data set and method, data loading
included). The numba-backed rows (XR-Linear, SNM) load their compiled kernels
(:func:`skxmc.warmup`) before the first timed fit. The frozen-embedding rows encode each
set's texts once per data set (in a process of their own): their fit and predict times
add the measured encoding time of the texts they read to the logistic regression's, and
their peak memory is the larger of the two processes'.

``--profile cpu`` (default) runs the rows a quiet 2-core CPU affords in about an hour:
the three cheap methods on the multi-class sets and reuters21578_allcats, TF-IDF + SNM
on reuters21578_allcats, XR-Linear and the one-vs-rest LR on goemotions, XR-Linear on
tibkat_gnd_en, and the three fine-tuned methods on the 100-shot TREC set. The
``which-estimator-gpu`` suite (``--profile gpu``) runs the fine-tuned rows everywhere
and the rows left (``--device cuda``) and writes ``which-estimator-gpu.json``. The docs
page (docs/which_estimator.rst) shows both files.

``--checkpoint-dir DIR`` keeps each finished (data set, method, seed) in DIR, so that a
run longer than a session (a fine-tuned row on the CPU) goes on where it stopped when the
same command is run again; a rerun with other settings is refused.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks import _data
from benchmarks._harness import CACHE, FinishedFits, in_child, run_settings, summarise

SEEDS = (0, 1, 2)
# name -> (folder, imbalance ratio, shots per class)
MULTICLASS = {
    "trec_ir50": ("trec", 50, None),
    "cr_ir50": ("cr", 50, None),
    "biomedical_ir50": ("biomedical", 50, None),
    "trec_100shot": ("trec", None, 100),
}
MULTILABEL = {
    "reuters21578_allcats": ("reuters21578_allcats", None, None),
    "goemotions": ("goemotions", None, None),
    "tibkat_gnd_en": ("tibkat_gnd_en", None, None),
}
XRL, TFLR, EMBLR = "TF-IDF + XR-Linear (tfn+man)", "TF-IDF + LR", "MiniLM (frozen) + LR"
FTLA, SHARP, KNN, MXML = "fine-tuned MiniLM, LA-CE", "SharpReCL", "KNN-BERT", "MatchXML"
SNM = "TF-IDF + SNM"
CHEAP = (XRL, TFLR, EMBLR)
# the methods that read TF-IDF features only: they need no encoder
TFIDF_ONLY = (XRL, TFLR, SNM)
NEURAL_MC = (FTLA, SHARP, KNN)
# every method's grid, chosen on dev (one dict of parameters per setting)
GRIDS: dict[str, list[dict[str, Any]]] = {
    XRL: [{"C": 1.0}, {"C": 4.0}],
    TFLR: [{"C": 1.0}, {"C": 10.0}],
    EMBLR: [{"C": 1.0}, {"C": 10.0}],
    FTLA: [{"learning_rate": 2e-5}, {"learning_rate": 5e-5}],
    SHARP: [{"learning_rate": 2e-5}, {"learning_rate": 5e-5}],
    KNN: [{"learning_rate": 2e-5}, {"learning_rate": 5e-5}],
    MXML: [{}],
    SNM: [{"n_hard_negatives": 1}, {"n_hard_negatives": 5}],
}
SNM_EPOCHS = 10
PROFILES = {
    "cpu": {
        # cheapest first
        "datasets": ["trec_ir50", "trec_100shot", "cr_ir50", "biomedical_ir50"],
        "methods": list(CHEAP),
        "extra": {
            "trec_100shot": list(NEURAL_MC),
            "reuters21578_allcats": [*CHEAP, SNM],
            "goemotions": [XRL, TFLR],
            "tibkat_gnd_en": [XRL],
        },
    },
    "gpu": {
        "datasets": [*MULTICLASS, *MULTILABEL],
        "methods": [*NEURAL_MC, MXML],
        # what the CPU profile leaves: goemotions's 49k texts to encode, SNM on goemotions
        # and on tibkat_gnd_en's 27k labels
        "extra": {"goemotions": [EMBLR, SNM], "tibkat_gnd_en": [SNM]},
    },
}
MC_METRICS = ("accuracy", "macro_f1")
ML_METRICS = ("P@1", "P@3", "nDCG@5")
COST = ("fit_s", "predict_ms_per_text", "peak_rss_mb")
QUICK_TRAIN, QUICK_TEST = 300, 100
MAX_LENGTH = 128
# labels with fewer training texts than this are dropped from the one-vs-rest LR's
# targets (they count as misses); tibkat_gnd_en's 27k labels make it unaffordable
LR_MAX_LABELS = 2000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=list(PROFILES), default="cpu")
    parser.add_argument("--datasets", nargs="+", choices=[*MULTICLASS, *MULTILABEL])
    parser.add_argument("--methods", nargs="+", choices=list(GRIDS))
    parser.add_argument("--encoder", help="encoder folder (default: the bundled MiniLM)")
    parser.add_argument("--epochs", type=int, default=3, help="fine-tuned rows")
    parser.add_argument("--batch-size", type=int, default=16, help="fine-tuned rows")
    parser.add_argument("--steps", type=int, default=300, help="MatchXML steps per stage")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--checkpoint-dir", help="resumable run: each finished seed's record is kept here"
    )


# ----------------------------------------------------------------------------- data


def _folder(name: str) -> str:
    return {**MULTICLASS, **MULTILABEL}[name][0]


def is_multilabel(name: str) -> bool:
    return name in MULTILABEL


def load(name: str, seed: int, quick: bool) -> dict[str, Any]:
    """Train (80%), dev (20%, drawn with ``seed``) and test texts and targets of a set."""
    from skxmc.datasets import make_imbalanced

    folder, ratio, shots = {**MULTICLASS, **MULTILABEL}[name]
    d = _data.text_split(folder)
    X, y = list(d["X_train"]), np.asarray(d["y_train"])
    X_test, y_test = list(d["X_test"]), np.asarray(d["y_test"])
    rng = np.random.default_rng(seed)
    if ratio is not None:
        X, y = make_imbalanced(X, y, imbalance_ratio=ratio, random_state=seed)
        y = np.asarray(y)
    if shots is not None:
        idx = np.sort(
            np.concatenate([rng.permutation(np.flatnonzero(y == c))[:shots] for c in np.unique(y)])
        )
        X, y = [X[i] for i in idx], y[idx]
    if quick:
        idx = np.sort(rng.permutation(len(X))[:QUICK_TRAIN])
        X, y = [X[i] for i in idx], y[idx]
        X_test, y_test = X_test[:QUICK_TEST], y_test[:QUICK_TEST]
    order = rng.permutation(len(X))
    n_dev = max(1, len(X) // 5)
    dev, train = np.sort(order[:n_dev]), np.sort(order[n_dev:])
    return {
        "X": [X[i] for i in train],
        "y": y[train],
        "X_dev": [X[i] for i in dev],
        "y_dev": y[dev],
        "X_test": X_test,
        "y_test": y_test,
    }


def _binarise(name: str, data: dict) -> tuple:
    """Indicator matrices of the three splits over the training split's labels (labels
    seen only in dev or test count as misses)."""
    import scipy.sparse as sp
    from sklearn.preprocessing import MultiLabelBinarizer

    mlb = MultiLabelBinarizer(sparse_output=True)
    mlb.fit(list(data["y"]) + list(data["y_dev"]) + list(data["y_test"]))
    return tuple(
        sp.csr_matrix(mlb.transform(list(data[k])), dtype=np.float32)
        for k in ("y", "y_dev", "y_test")
    )


def _embeddings(name: str, encoder: str, quick: bool, seeds: list[int]) -> str:
    """Encode every text of a set once (in a process of its own); the cache's path."""
    tag = f"_quick{'-'.join(map(str, seeds))}" if quick else ""
    path = CACHE / f"which_estimator_emb_{_folder(name)}{tag}.npz"
    if not path.is_file():
        # a fresh checkout has no cache folder: the encoding would be lost at its save
        path.parent.mkdir(parents=True, exist_ok=True)
        in_child(
            "benchmarks.suites.which_estimator:encode_set",
            name=name,
            encoder=encoder,
            path=str(path),
            quick=quick,
            seeds=seeds,
        )
    return str(path)


def encode_set(name: str, encoder: str, path: str, quick: bool, seeds: list[int]) -> dict:
    """Child: the sentence embeddings of every distinct text the runs of a set read (all
    seeds, every set drawn from its folder), and the time per text."""
    import torch

    from skxmc.text import SentenceEmbedder

    torch.set_num_threads(2)
    # the texts the runs read: every seed's split of every set drawn from this folder
    sets = [n for n in {**MULTICLASS, **MULTILABEL} if _folder(n) == _folder(name)]
    parts = [load(n, seed, quick) for n in sets for seed in seeds]
    texts = sorted({t for p in parts for k in ("X", "X_dev", "X_test") for t in p[k]})
    emb = SentenceEmbedder(encoder=encoder, max_length=MAX_LENGTH, device="cpu").fit(texts[:2])
    start = time.perf_counter()
    vectors = emb.transform(texts)
    seconds = time.perf_counter() - start
    from benchmarks._harness import peak_rss_mb

    np.savez(
        path,
        texts=np.asarray(texts, dtype=object),
        vectors=np.asarray(vectors, dtype=np.float32),
        s_per_text=seconds / len(texts),
        peak_rss_mb=peak_rss_mb(),
    )
    return {"n_texts": len(texts), "seconds": seconds}


# ----------------------------------------------------------------------------- methods


def make_estimator(method: str, setting: dict, multilabel: bool, args: dict, seed: int) -> Any:
    """The only place that builds the estimators (training settings included)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline

    if method == XRL:
        from skxmc import XRLinearClassifier

        ranker = XRLinearClassifier(
            negative_sampling="tfn+man",
            Cp=setting["C"],
            Cn=setting["C"],
            n_jobs=args["threads"],
            random_state=seed,
        )
        return make_pipeline(TfidfVectorizer(**_data.TFIDF, dtype=np.float32), ranker)
    if method == SNM:
        from benchmarks.suites import snm

        k = setting["n_hard_negatives"]
        ranker = snm.make_estimator("snm", k, "auto", SNM_EPOCHS, seed, args["device"])
        return make_pipeline(TfidfVectorizer(**_data.TFIDF, dtype=np.float32), ranker)
    if method in (TFLR, EMBLR):
        lr = LogisticRegression(C=setting["C"], max_iter=1000)
        if multilabel:
            # n_jobs=None: joblib's read-only memory maps break liblinear's sparse input
            lr = OneVsRestClassifier(
                LogisticRegression(C=setting["C"], max_iter=1000, solver="liblinear")
            )
        if method == EMBLR:
            return lr
        return make_pipeline(TfidfVectorizer(**_data.TFIDF, dtype=np.float32), lr)
    return _neural(method, setting, args, seed)


def _neural(method: str, setting: dict, args: dict, seed: int) -> Any:
    if method == MXML:
        from benchmarks.suites import matchxml

        ns = argparse.Namespace(
            steps=args["steps"],
            batch_size=32,
            max_length=64,
            threads=args["threads"],
            device=args["device"],
            quick=args["quick"],
        )
        return matchxml.make_estimator(args["encoder"], ns, seed, "MatchXML")
    from skxmc import KNNBertClassifier, SharpReCLClassifier

    cls = KNNBertClassifier if method == KNN else SharpReCLClassifier
    params: dict[str, Any] = {
        FTLA: {"contrastive_weight": 0.0, "augmentation": None},  # logit adjustment on
        SHARP: {"n_views": 2},
        KNN: {"knn_memory": "queue", **({"queue_size": 256} if args["quick"] else {})},
    }[method]
    training = _data.training_settings(
        cls,
        max_epochs=args["epochs"],
        batch_size=args["batch_size"],
        learning_rate=setting["learning_rate"],
        device=args["device"],
        random_state=seed,
    )
    return cls(encoder=args["encoder"], pooling="mean", max_length=MAX_LENGTH, **training, **params)


def _scores(model: Any, X: Any, y: Any, multilabel: bool, Y: Any = None) -> dict[str, float]:
    if multilabel:
        from skxmc.metrics import evaluate

        scores = model.predict_proba(X) if hasattr(model, "predict_proba") else None
        if scores is None:
            scores = model.decision_function(X)
        res = evaluate(Y, scores, ks=(1, 3, 5))
        return {
            "P@1": 100 * float(res["precision@1"]),
            "P@3": 100 * float(res["precision@3"]),
            "nDCG@5": 100 * float(res["ndcg@5"]),
        }
    from sklearn.metrics import accuracy_score, f1_score

    pred = model.predict(X)
    return {
        "accuracy": 100 * accuracy_score(y, pred),
        "macro_f1": 100 * f1_score(y, pred, average="macro"),
    }


def measure(name: str, method: str, seeds: list[int], args: dict) -> dict:
    """Child: every seed of one (data set, method): dev selection, then test."""
    import scipy.sparse as sp
    import torch

    from benchmarks._harness import fit_complete, peak_rss_mb

    torch.set_num_threads(args["threads"])
    multilabel = is_multilabel(name)
    key = "P@1" if multilabel else "macro_f1"
    emb = None
    if method == EMBLR:
        npz = np.load(args["embeddings"], allow_pickle=True)
        emb = {t: i for i, t in enumerate(npz["texts"])}
        vectors, s_per_text = npz["vectors"], float(npz["s_per_text"])
        encode_peak = float(npz["peak_rss_mb"])
    if method in (XRL, SNM):
        # load the numba kernels' cache before any timed fit, so that seed 0's fit_s is
        # not the only one that pays for it
        from skxmc import warmup

        warmup()
    runs, kept = [], []
    fits = FinishedFits(args.get("checkpoint_dir"))  # its settings checked by the parent
    for seed in seeds:
        fit_key = f"{name}/{method}/seed{seed}"
        if fits.get(fit_key) is not None:
            runs += fits.get(fit_key)
            kept.append(fit_key)
            continue
        data = load(name, seed, args["quick"])
        Y = Y_dev = Y_test = None
        if multilabel:
            Y, Y_dev, Y_test = _binarise(name, data)
        inputs = {k: data[k] for k in ("X", "X_dev", "X_test")}
        if emb is not None:
            inputs = {k: vectors[[emb[t] for t in v]] for k, v in inputs.items()}
        target = Y if multilabel else data["y"]
        if multilabel and method in (TFLR, EMBLR):
            # one-vs-rest over labels with a positive in training (the rest score 0)
            counts = np.asarray(Y.sum(0)).ravel()
            keep = np.flatnonzero(counts > 0)
            if len(keep) > LR_MAX_LABELS:
                return {
                    "runs": [],
                    "kept": [],
                    "skipped": f"{len(keep)} labels: one-vs-rest unaffordable",
                }
            target = Y[:, keep].toarray()
        best = None
        for setting in GRIDS[method]:
            model = make_estimator(method, setting, multilabel, args, seed)
            start = time.perf_counter()
            fit_complete(model, inputs["X"], target)
            fit_s = time.perf_counter() - start
            dev = _score_wrapped(
                model, inputs["X_dev"], data["y_dev"], Y_dev, multilabel, method, Y
            )
            if best is None or dev[key] > best[1][key]:
                best = (setting, dev, model, fit_s)
        setting, dev, model, fit_s = best
        start = time.perf_counter()
        test = _score_wrapped(
            model, inputs["X_test"], data["y_test"], Y_test, multilabel, method, Y
        )
        predict_s = time.perf_counter() - start
        n_test = len(data["X_test"])
        if emb is not None:  # the encoding the pipeline would have done
            fit_s += s_per_text * len(data["X"])
            predict_s += s_per_text * n_test
        record = {
            "dataset": name,
            "method": method,
            "seed": seed,
            "setting": ", ".join(f"{k}={v}" for k, v in setting.items()) or "default",
            **test,
            **{f"dev_{k}": v for k, v in dev.items()},
            "fit_s": fit_s,
            "predict_ms_per_text": 1000 * predict_s / max(n_test, 1),
            "peak_rss_mb": max(peak_rss_mb(), encode_peak if emb is not None else 0.0),
            "n_train": len(data["X"]),
            "n_dev": len(data["X_dev"]),
            "n_test": n_test,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),  # its session
        }
        runs.append(record)
        fits.save(fit_key, [record])
        del model, best
        if sp.issparse(target):
            del target
    return {"runs": runs, "kept": kept}


def _score_wrapped(
    model: Any, X: Any, y: Any, Y_eval: Any, multilabel: bool, method: str, Y_train: Any
) -> dict[str, float]:
    """Scores of a model; the one-vs-rest LR's columns are put back at their labels."""
    if multilabel and method in (TFLR, EMBLR):
        import scipy.sparse as sp

        counts = np.asarray(Y_train.sum(0)).ravel()
        keep = np.flatnonzero(counts > 0)
        proba = model.predict_proba(X)
        full = np.zeros((proba.shape[0], Y_train.shape[1]), dtype=np.float32)
        full[:, keep] = proba
        return _scores(_Fixed(sp.csr_matrix(full)), X, y, True, Y_eval)
    return _scores(model, X, y, multilabel, Y_eval)


class _Fixed:
    """Precomputed scores behind ``decision_function``."""

    def __init__(self, scores: Any) -> None:
        self.scores = scores

    def decision_function(self, X: Any) -> Any:
        return self.scores


# ----------------------------------------------------------------------------- the suite


def run(args: argparse.Namespace) -> dict:
    profile = PROFILES[args.profile]
    names = args.datasets or (profile["datasets"][:1] if args.quick else profile["datasets"])
    methods = args.methods or (profile["methods"][:2] if args.quick else profile["methods"])
    extra = {} if (args.datasets or args.methods) else profile.get("extra", {})
    encoder = None
    runs, notes, kept = [], [], []
    # The data sets, methods and profile may change between the sessions of one run (what
    # to run); everything else must not.
    checkpoint = getattr(args, "checkpoint_dir", None)
    FinishedFits(checkpoint, run_settings(args, extendable=("datasets", "methods", "profile")))
    order = names + [n for n in extra if n not in names]
    for name in order:
        folder = {**MULTICLASS, **MULTILABEL}[name][0]
        if not _data.available(folder):
            notes.append(f"{name}: data absent, skipped")
            continue
        todo = [m for m in methods if name in names] + extra.get(name, [])
        for method in todo:
            if method in NEURAL_MC and is_multilabel(name):
                continue  # multi-class methods
            if method in (MXML, SNM) and not is_multilabel(name):
                continue
            child_args = {
                "threads": args.threads,
                "device": args.device,
                "quick": args.quick,
                "epochs": 1 if args.quick else args.epochs,
                "batch_size": args.batch_size,
                "steps": 2 if args.quick else args.steps,
                "checkpoint_dir": checkpoint,
            }
            if method not in TFIDF_ONLY:
                if encoder is None:
                    d = _data.text_split(folder, quick=True)
                    encoder, encoder_name = _data.encoder_for(args, list(d["X_train"]))
                child_args["encoder"] = encoder
            if method == EMBLR:
                child_args["embeddings"] = _embeddings(name, encoder, args.quick, list(args.seeds))
            out = in_child(
                "benchmarks.suites.which_estimator:measure",
                name=name,
                method=method,
                seeds=list(args.seeds),
                args=child_args,
            )
            if out.get("skipped"):
                notes.append(f"{name} / {method}: {out['skipped']}")
            for key in out["kept"]:
                print(f"{key}: finished in an earlier session, kept", flush=True)
            kept += out["kept"]
            for record in out["runs"]:
                print(
                    f"{name} / {method} / seed {record['seed']}: "
                    + ", ".join(
                        f"{m} {record[m]:.2f}" for m in (*MC_METRICS, *ML_METRICS) if m in record
                    )
                    + f", fit {record['fit_s']:.1f} s",
                    flush=True,
                )
            runs += out["runs"]
    mc = [r for r in runs if not is_multilabel(r["dataset"])]
    ml = [r for r in runs if is_multilabel(r["dataset"])]
    tables = []
    for title, part, metrics in (
        ("Imbalanced multi-class sets", mc, MC_METRICS),
        ("Multi-label sets", ml, ML_METRICS),
    ):
        if not part:
            continue
        rows = summarise(part, ["dataset", "method"], (*metrics, *COST))
        for row in rows:
            chosen = [
                r["setting"]
                for r in part
                if (r["dataset"], r["method"]) == (row["dataset"], row["method"])
            ]
            row["chosen_on_dev"] = "; ".join(sorted(set(chosen)))
        tables.append(
            {
                "title": title,
                "caption": (
                    "x100 on the test split, mean ± sample std over the seeds; each seed "
                    "draws its own dev split (20% of train) on which the setting is chosen. "
                    "Fit seconds of the chosen setting, predict ms per test text, peak RSS "
                    "(MB) of the method's process. Timings on a 2-core machine, one method "
                    "at a time: compare them within one run."
                ),
                "columns": ["dataset", "method", *metrics, *COST, "chosen_on_dev", "n_seeds"],
                "rows": rows,
                "digits": {"fit_s": 1, "predict_ms_per_text": 2, "peak_rss_mb": 0},
            }
        )
    return {
        "config": {
            "profile": args.profile,
            "encoder": encoder_name if encoder else None,
            "max_length": MAX_LENGTH,
            "grids": GRIDS,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "device": args.device,
            "threads": args.threads,
            "notes": notes,
            # The header's machine, load and scheduler are this session's; each kept fit's
            # end is its record's "finished".
            "fits_kept_from_earlier_sessions": kept,
        },
        "tables": tables,
        "runs": runs,
    }
