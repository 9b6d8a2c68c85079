"""The ``skxmc`` command line: ``demo``, ``fit``, ``predict``, ``evaluate``.

``fit`` trains TF-IDF + :class:`~skxmc.XRLinearClassifier` on a JSON-lines file and saves
both into a model directory (JSON + ``.npz``, no pickle); ``predict`` writes the top-k
labels of a JSON-lines file; ``evaluate`` scores predictions against the true labels.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__

logger = logging.getLogger("skxmc")

VECTORIZER_FILE = "vectorizer.json"
RANKER_DIR = "ranker"


def _vectorizer(args: argparse.Namespace) -> Any:
    from ._vectorizers import default_tfidf

    return default_tfidf(ngram_range=(1, args.max_ngram), min_df=args.min_df,
                         max_features=args.max_features)  # fmt: skip


def _save_vectorizer(vectorizer: Any, path: Path) -> None:
    """Settings, vocabulary and idf weights as JSON (a pickle-free TfidfVectorizer)."""
    from ._vectorizers import vectorizer_to_state

    state, arrays = vectorizer_to_state(vectorizer)
    state["arrays"] = {k: v.tolist() for k, v in arrays.items()}
    path.write_text(json.dumps(state), encoding="utf-8")


def _load_vectorizer(path: Path) -> Any:
    from ._vectorizers import vectorizer_from_state

    state = json.loads(path.read_text(encoding="utf-8"))
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in state.pop("arrays", {}).items()}
    return vectorizer_from_state(state, arrays)


def _print_metrics(result: dict[str, float], ks: Sequence[int]) -> None:
    header = " | ".join(f"@{k}" for k in ks)
    print(f"| metric | {header} |")
    print("|---|" + "---|" * len(ks))
    names = [("P", "precision"), ("R", "recall"), ("nDCG", "ndcg"), ("PSP", "psprecision"),
             ("PSnDCG", "psndcg")]
    for name, key in names:
        if f"{key}@{ks[0]}" in result:
            row = " | ".join(f"{100 * result[f'{key}@{k}']:.2f}" for k in ks)
            print(f"| {name} | {row} |")


def _demo(args: argparse.Namespace) -> int:
    from ._labels import LabelSpace, encode_labels
    from .datasets import load_demo
    from .linear import XRLinearClassifier
    from .metrics import evaluate, inverse_propensity

    demo = load_demo()
    logger.info("loaded %d train / %d test records", len(demo.train_texts), len(demo.test_texts))
    vectorizer = _vectorizer(args)
    clf = XRLinearClassifier(beam_size=args.beam_size, n_jobs=args.n_jobs, verbose=args.verbose)
    t0 = time.perf_counter()
    X_train = vectorizer.fit_transform(demo.train_texts)
    clf.fit(X_train, demo.train_labels)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    predictions = clf.predict_topk(vectorizer.transform(demo.test_texts), k=5)
    predict_s = time.perf_counter() - t0
    Y_train, _ = encode_labels(demo.train_labels, name="train_labels")
    result = evaluate(
        demo.test_labels,
        predictions,
        ks=(1, 3, 5),
        inv_propensity=inverse_propensity(Y_train),
        classes=clf.classes_,
    )
    unseen = LabelSpace(clf.classes_).transform(demo.test_labels, name="test_labels").n_unknown
    print(
        f"skxmc {__version__} demo: TIBKAT/GND subset, {len(demo.train_texts)} train / "
        f"{len(demo.test_texts)} test records, {len(clf.classes_)} labels "
        f"({int(unseen.sum())} test label occurrences unseen in training count as misses)"
    )
    print(
        f"model: TF-IDF ({X_train.shape[1]} features) + XRLinearClassifier "
        f"({clf.tree_.n_layers_} layers, beam {clf.beam_size})"
    )
    _print_metrics({k: v for k, v in result.items() if not k.startswith(("recall", "psndcg"))},
                   (1, 3, 5))
    print(f"fit {fit_s:.2f} s (TF-IDF + tree + ranker), predict {predict_s:.2f} s")
    return 0


def _fit(args: argparse.Namespace) -> int:
    from ._persistence import CONFIG_NAME
    from .datasets import load_text_jsonl
    from .linear import XRLinearClassifier

    model_dir = Path(args.model_dir)
    if model_dir.exists() and any(model_dir.iterdir()) and not args.overwrite:
        raise FileExistsError(
            f"--model-dir {str(model_dir)!r} is not empty; pass --overwrite to replace a model "
            f"saved there (other folders are never replaced)."
        )
    if args.overwrite and model_dir.exists() and any(model_dir.iterdir()):
        if not (model_dir / RANKER_DIR / CONFIG_NAME).is_file():
            raise FileExistsError(
                f"--model-dir {str(model_dir)!r} holds no skxmc model; refusing to overwrite it."
            )
    texts, labels = load_text_jsonl(args.train)
    if isinstance(labels, np.ndarray):
        labels = [[label] for label in labels.tolist()]
    t0 = time.perf_counter()
    vectorizer = _vectorizer(args)
    X = vectorizer.fit_transform(texts)
    clf = XRLinearClassifier(
        beam_size=args.beam_size,
        top_k=args.top_k,
        negative_sampling=args.negative_sampling,
        n_jobs=args.n_jobs,
        verbose=args.verbose,
    ).fit(X, labels)
    fit_s = time.perf_counter() - t0
    model_dir.mkdir(parents=True, exist_ok=True)
    clf.save(model_dir / RANKER_DIR, overwrite=args.overwrite)
    _save_vectorizer(vectorizer, model_dir / VECTORIZER_FILE)
    print(
        f"trained on {len(texts)} samples, {len(clf.classes_)} labels, {X.shape[1]} features "
        f"in {fit_s:.2f} s; saved to {model_dir}"
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    from ._persistence import load

    model_dir = Path(args.model_dir)
    if not (model_dir / VECTORIZER_FILE).is_file():
        raise FileNotFoundError(
            f"--model-dir {str(model_dir)!r} holds no model saved by 'skxmc fit' "
            f"({VECTORIZER_FILE} is missing)."
        )
    vectorizer = _load_vectorizer(model_dir / VECTORIZER_FILE)
    clf = load(model_dir / RANKER_DIR)
    texts = _texts_of(args.input)
    t0 = time.perf_counter()
    labels, scores = clf.predict_topk(vectorizer.transform(texts), k=args.top_k)
    predict_s = time.perf_counter() - t0
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    try:
        for row_labels, row_scores in zip(labels.tolist(), scores.tolist()):
            kept = [(lab, sc) for lab, sc in zip(row_labels, row_scores) if np.isfinite(sc)]
            out.write(json.dumps({"labels": [lab for lab, _ in kept],
                                  "scores": [round(sc, 6) for _, sc in kept]}) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    logger.info("predicted %d samples in %.2f s", len(texts), predict_s)
    return 0


def _texts_of(path: str) -> list[str]:
    """Texts of a JSON-lines file (labels are optional for prediction, so not read)."""
    from .datasets import _records

    texts = []
    for line_no, record in _records(path):
        text = record.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{path}: line {line_no}: field 'text' must be a string.")
        texts.append(text)
    return texts


def _evaluate(args: argparse.Namespace) -> int:
    from ._labels import encode_labels
    from .datasets import _records, load_text_jsonl
    from .metrics import evaluate, inverse_propensity

    _, truth = load_text_jsonl(args.true)
    if isinstance(truth, np.ndarray):
        truth = [[label] for label in truth.tolist()]
    predicted, pred_scores = [], []
    for line_no, record in _records(args.pred):
        if not isinstance(record.get("labels"), list):
            raise ValueError(f"{args.pred}: line {line_no}: 'labels' must be a list.")
        predicted.append(record["labels"])
        pred_scores.append(record.get("scores") or [-float(i) for i in range(len(record["labels"]))])
    if len(predicted) != len(truth):
        raise ValueError(
            f"--pred has {len(predicted)} lines but --true has {len(truth)}; they must "
            f"describe the same samples in the same order."
        )
    ks = sorted({int(k) for k in args.ks.split(",")})
    if args.train:
        _, train_labels = load_text_jsonl(args.train)
        if isinstance(train_labels, np.ndarray):
            train_labels = [[label] for label in train_labels.tolist()]
        _, classes = encode_labels(train_labels, name="--train labels")
        inv_p = inverse_propensity(train_labels, classes=classes)
    else:
        _, classes = encode_labels(truth + predicted, name="labels")
        inv_p = None
    width = max(1, max((len(p) for p in predicted), default=1))
    label_array = np.full((len(predicted), width), None, dtype=object)
    scores = np.full((len(predicted), width), -np.inf)
    for i, (row, row_scores) in enumerate(zip(predicted, pred_scores)):
        label_array[i, : len(row)] = row
        scores[i, : len(row)] = row_scores
    result = evaluate(truth, (label_array, scores), ks=ks, inv_propensity=inv_p, classes=classes)
    _print_metrics(result, ks)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skxmc", description="Extreme multi-label text classification, scikit-learn style."
    )
    parser.add_argument("--version", action="version", version=f"skxmc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def model_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--beam-size", type=int, default=10, help="beam width (default 10)")
        p.add_argument("--n-jobs", type=int, default=2, help="threads (default 2)")
        p.add_argument("--min-df", type=int, default=2, help="TF-IDF min_df (default 2)")
        p.add_argument("--max-ngram", type=int, default=2, help="TF-IDF n-gram order (default 2)")
        p.add_argument("--max-features", type=int, default=200_000,
                       help="TF-IDF vocabulary size (default 200000)")
        p.add_argument("-v", "--verbose", action="count", default=0, help="log progress")

    demo = sub.add_parser("demo", help="fit and evaluate on the shipped TIBKAT demo data")
    model_options(demo)
    demo.set_defaults(func=_demo)

    fit = sub.add_parser("fit", help="train TF-IDF + XRLinearClassifier on a JSON-lines file")
    fit.add_argument("--train", required=True, help='JSON lines {"text", "labels": [...]}')
    fit.add_argument("--model-dir", required=True, help="directory to save the model to")
    fit.add_argument("--top-k", type=int, default=10, help="labels per prediction (default 10)")
    fit.add_argument("--negative-sampling", choices=["tfn", "tfn+man"], default="tfn")
    fit.add_argument("--overwrite", action="store_true", help="replace a saved model")
    model_options(fit)
    fit.set_defaults(func=_fit)

    predict = sub.add_parser("predict", help="write the top-k labels of each text as JSON lines")
    predict.add_argument("--model-dir", required=True)
    predict.add_argument("--input", required=True, help='JSON lines with a "text" field')
    predict.add_argument("--output", default="-", help="output file (default: stdout)")
    predict.add_argument("--top-k", type=int, default=None, help="labels per text")
    predict.add_argument("-v", "--verbose", action="count", default=0)
    predict.set_defaults(func=_predict)

    evaluate = sub.add_parser("evaluate", help="P@k, R@k, nDCG@k (and PS metrics) of predictions")
    evaluate.add_argument("--true", required=True, help="JSON lines with the true labels")
    evaluate.add_argument("--pred", required=True, help="output of skxmc predict")
    evaluate.add_argument("--train", help="training file, for propensity-scored metrics")
    evaluate.add_argument("--ks", default="1,3,5", help="cut-offs (default 1,3,5)")
    evaluate.set_defaults(func=_evaluate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "verbose", 0):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for name in ("beam_size", "n_jobs", "top_k", "min_df", "max_ngram", "max_features"):
        value = getattr(args, name, None)
        if value is not None and value < 1 and not (name == "n_jobs" and value == -1):
            print(f"skxmc: error: --{name.replace('_', '-')} must be >= 1", file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"skxmc {args.command}: error: {exc}", file=sys.stderr)
        return 1
