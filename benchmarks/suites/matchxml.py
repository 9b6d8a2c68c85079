"""MatchXML on CPU: TF-IDF + XR-Linear, then ``MatchXMLClassifier`` and its ablations,
with the same TF-IDF and ranker in every row.

Rows: ``TF-IDF + XR-Linear`` (the ranker alone), ``MatchXML`` (fine-tuned encoder,
refined tree, static sentence embeddings), ``PIFA tree`` (the ranker on PIFA's tree),
``hinge final loss``, ``no sentence embeddings``, and ``PECOS XR-Transformer`` (libpecos's
XR-Transformer with the same encoder, texts, TF-IDF and budget, run in libpecos's own
interpreter: ``--pecos-python`` or ``$SKXMC_PECOS_PYTHON``; see ``_xtransformer.py``;
skipped, and said so, without one). P@1/3/5, nDCG@5, PSP@5 (in percent, mean ± sample
std over the seeds; PSP normalised by the best ranking), fit and predict seconds.
``--quick`` uses a tiny random encoder and no sentence embeddings on the first 800 texts
of reuters21578_allcats. ``--dev-fraction`` scores on a part of train held out (a dev
split), ``--label-prefix`` keeps some labels only (texts left without one stay in
training: the case where eq. 4's 1/N_b matters) and ``--max-train`` caps the training
texts. ``--checkpoint-dir DIR`` keeps each finished fit's record in DIR, so that a run of
hours (tibkat_gnd_en's XR-Transformer and MatchXML rows on a CPU) can span sessions: the
same command again skips the fits it finished and writes the results at its end.
Replaces ``matchxml.py``, ``matchxml_dev.py`` and ``matchxml_final_features.py`` (the
paper-budget GPU profile, ``gpu_profile.sh``, still runs those from commit 26aef59).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks import _data
from benchmarks._harness import FinishedFits, fit_complete, run_settings, summarise
from benchmarks.suites import _xtransformer

SEEDS = (0, 1, 2)
DATASETS = ("reuters21578_allcats", "tibkat_gnd_en")
ROWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # row -> (MatchXMLClassifier parameters, MultiStageMatcher parameters)
    "MatchXML": ({}, {}),
    "PIFA tree": ({"ranker_tree": "pifa"}, {}),
    "hinge final loss": ({}, {"final_loss": "hinge"}),
    "no sentence embeddings": ({"sentence_encoder": None}, {}),
}
BASELINE, PEER = "TF-IDF + XR-Linear", "PECOS XR-Transformer"
METRICS = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@5", "fit_s", "predict_s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", nargs="+", help=f"default: {' '.join(DATASETS)}")
    parser.add_argument("--rows", nargs="+", choices=[BASELINE, *ROWS, PEER])
    parser.add_argument("--encoder", help="encoder folder (default: the bundled MiniLM)")
    parser.add_argument("--steps", type=int, default=150, help="fine-tuning steps per stage")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pecos-python", help="libpecos's interpreter (XR-Transformer row)")
    parser.add_argument(
        "--dev-fraction",
        type=float,
        help="score on this seeded fraction of train held out (a dev split), not on test",
    )
    parser.add_argument(
        "--label-prefix",
        help="keep only the labels that start with this (e.g. 'topic:' on reuters); texts "
        "left without a label stay in training and leave the scored split",
    )
    parser.add_argument("--max-train", type=int, help="the first N training texts only")
    parser.add_argument(
        "--checkpoint-dir",
        help="keep finished fits here; the same command again skips them (a resumable run)",
    )


def make_ranker(seed: int, threads: int) -> Any:
    from skxmc import XRLinearClassifier

    return XRLinearClassifier(Cp=2.0, beam_size=10, n_jobs=threads, random_state=seed)


class TfidfRanker:
    """TF-IDF + XR-Linear with ``predict_topk`` (a Pipeline has none)."""

    def __init__(self, ranker: Any) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer, self.ranker = TfidfVectorizer(**_data.TFIDF), ranker

    def fit(self, X: list, y: Any) -> TfidfRanker:
        self.ranker.fit(self.vectorizer.fit_transform(X), y)
        self.classes_ = self.ranker.classes_
        return self

    def predict_topk(self, X: list, k: int) -> Any:
        return self.ranker.predict_topk(self.vectorizer.transform(X), k=k)


def make_estimator(encoder: str, args: argparse.Namespace, seed: int, row: str) -> Any:
    """The only place that builds a MatchXML estimator (training settings included)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc import MatchXMLClassifier, MultiStageMatcher

    outer, inner = ROWS[row]
    training = _data.training_settings(
        MultiStageMatcher,
        max_steps=args.steps,
        batch_size=args.batch_size,
        device=args.device,
        random_state=seed,
    )
    matcher = MultiStageMatcher(
        encoder=encoder, max_length=args.max_length, n_jobs=args.threads, **training, **inner
    )
    params: dict[str, Any] = {
        "matcher": matcher,
        "vectorizer": TfidfVectorizer(**_data.TFIDF),
        "device": args.device,
        "random_state": seed,
    }
    if args.quick:
        params["sentence_encoder"] = None  # the static embeddings need the MiniLM model
    # MatchXML's own ranker (eq. 7, weight threshold 0.001): the TF-IDF baseline's
    # default 0.1 would prune most weights of the dense blocks.
    clf = MatchXMLClassifier(**{**params, **outer})
    return clf.set_params(ranker__n_jobs=args.threads, ranker__random_state=seed)


def make_peer(encoder: str, args: argparse.Namespace, seed: int, python: str) -> Any:
    """libpecos's XR-Transformer at MatchXML's budget: the same encoder, TF-IDF, token
    limit, batch size and learning rate, ``--steps`` per level as MatchXML's per stage."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc import MultiStageMatcher

    settings = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "learning_rate": MultiStageMatcher._training_defaults["learning_rate"],
        "seed": seed,
        "threads": args.threads,
    }
    return _xtransformer.PecosXTransformer(
        TfidfVectorizer(**_data.TFIDF), encoder, settings, python
    )


def _score(clf: Any, X_test: Any, y_test: Any, y_train: Any) -> dict[str, float]:
    from sklearn.preprocessing import MultiLabelBinarizer

    from skxmc.metrics import evaluate, inverse_propensity

    start = time.perf_counter()
    labels, scores = clf.predict_topk(X_test, k=10)
    # The peer's own prediction time, without its child interpreter's start and load.
    seconds = getattr(clf, "predict_s_", time.perf_counter() - start)
    mlb = MultiLabelBinarizer(classes=list(clf.classes_), sparse_output=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # labels only in the test split
        Y_train, Y_test = mlb.fit_transform(y_train), mlb.transform(y_test)
    inv = inverse_propensity(Y_train)
    res = evaluate(
        Y_test,
        (labels, scores),
        ks=(1, 3, 5),
        inv_propensity=inv,
        normalize=True,  # PSP in skxmc's one convention: normalised, in percent
        classes=clf.classes_,
    )
    out = {f"P@{k}": 100 * res[f"precision@{k}"] for k in (1, 3, 5)}
    out.update({"nDCG@5": 100 * res["ndcg@5"], "PSP@5": 100 * res["psprecision@5"]})
    out["predict_s"] = seconds
    return out


def _split(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The train and scored texts: the test split, or with ``--dev-fraction`` a seeded
    part of train (seed 0, the same for every seed of the run); ``--label-prefix`` and
    ``--max-train`` as their help says."""
    import numpy as np

    d = _data.text_split(name, args.quick)
    if getattr(args, "max_train", None):
        d["X_train"], d["y_train"] = d["X_train"][: args.max_train], d["y_train"][: args.max_train]
    if getattr(args, "dev_fraction", None):
        n = len(d["X_train"])
        order = np.random.default_rng(0).permutation(n)
        n_dev = round(args.dev_fraction * n)
        dev, train = np.sort(order[:n_dev]), np.sort(order[n_dev:])
        X, y = d["X_train"], d["y_train"]  # y: the loader's array of label sets
        d = {
            "X_train": [X[i] for i in train],
            "y_train": y[train],
            "X_test": [X[i] for i in dev],
            "y_test": y[dev],
        }
    if getattr(args, "label_prefix", None):
        keep = args.label_prefix

        def only(labels: Any) -> list:
            return [label for label in labels if str(label).startswith(keep)]

        d["y_train"] = [only(labels) for labels in d["y_train"]]
        scored = [(x, only(labels)) for x, labels in zip(d["X_test"], d["y_test"])]
        scored = [(x, labels) for x, labels in scored if labels]
        d["X_test"], d["y_test"] = [x for x, _ in scored], [labels for _, labels in scored]
    return d


def run(args: argparse.Namespace) -> dict:
    if args.quick:
        args.steps = 3
    names = args.datasets or (DATASETS[:1] if args.quick else DATASETS)
    rows = args.rows or ([BASELINE, "MatchXML"] if args.quick else [BASELINE, *ROWS, PEER])
    python, skipped = _xtransformer.pecos_python(args.pecos_python), []
    if PEER in rows and python is None:
        rows = [r for r in rows if r != PEER]
        skipped.append(f"{PEER} (no libpecos interpreter: --pecos-python or SKXMC_PECOS_PYTHON)")
        print(f"skipped: {skipped[-1]}")
    runs = []
    # The interpreter's path and the rows or data sets asked for may change between the
    # sessions of one run; everything else must not.
    done = FinishedFits(
        getattr(args, "checkpoint_dir", None),
        run_settings(args, extendable=("datasets", "rows", "pecos_python")),
    )
    kept: list[str] = []  # fits whose records an earlier session of this run wrote
    encoder_name = None
    unlabelled: dict[str, int] = {}
    for name in names:
        if not _data.available(name):
            print(f"{name}: data absent, skipped")
            continue
        d = _split(name, args)
        unlabelled[name] = sum(1 for labels in d["y_train"] if len(labels) == 0)
        encoder, encoder_name = _data.encoder_for(args, d["X_train"])
        for seed in args.seeds:
            for row in rows:
                key = f"{name}/{row}/seed{seed}"
                if done.get(key) is not None:
                    runs += done.get(key)
                    kept.append(key)
                    print(f"{key}: finished in an earlier session, kept", flush=True)
                    continue
                if row == BASELINE:
                    clf = TfidfRanker(make_ranker(seed, args.threads))
                elif row == PEER:
                    clf = make_peer(encoder, args, seed, python)
                else:
                    clf = make_estimator(encoder, args, seed, row)
                start = time.perf_counter()
                fit_complete(clf, d["X_train"], d["y_train"])
                r = {"dataset": name, "row": row, "seed": seed}
                r["fit_s"] = time.perf_counter() - start
                r["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")  # its session
                r.update(_score(clf, d["X_test"], d["y_test"], d["y_train"]))
                runs.append(r)
                done.save(key, [r])
                print(f"{name} / {row} / seed {seed}: P@1 {r['P@1']:.2f}", flush=True)
    split = "dev" if getattr(args, "dev_fraction", None) else "test"
    return {
        "config": {
            "encoder": encoder_name,
            "steps": args.steps,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "threads": args.threads,
            "ranker": "TF-IDF row: XRLinearClassifier(Cp=2, beam_size=10); MatchXML rows: "
            "the estimator's default (eq. 7)",
            "skipped": skipped,
            "scored_split": (
                f"dev: {args.dev_fraction} of train held out (seed 0)"
                if getattr(args, "dev_fraction", None)
                else "test"
            ),
            "label_prefix": getattr(args, "label_prefix", None),
            "max_train": getattr(args, "max_train", None),
            "unlabelled_train_texts": unlabelled,
            # The header's machine, load and scheduler are this session's; each kept fit's
            # end is its record's "finished".
            "fits_kept_from_earlier_sessions": kept,
        },
        "tables": [
            {
                "title": "MatchXML",
                "caption": (
                    f"Percent (PSP@5 normalised) on the {split} split; fit and predict seconds."
                ),
                "columns": ["dataset", "row", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["dataset", "row"], METRICS),
            }
        ],
        "runs": runs,
    }
