"""The ``skxmc`` command line: ``demo``, ``fit``, ``predict``, ``explain``, ``evaluate``,
``info``, ``serve``, ``warmup``.

``fit`` trains one of skxmc's estimators (``--estimator``: XR-Linear by default, MatchXML,
SharpReCL, KNN-BERT, SNM; constructor parameters from a ``--params`` JSON file) on a
JSON-lines file and saves it with :func:`skxmc.save` (JSON + ``.npz`` + safetensors, no
pickle) together with a model card, so ``skxmc.load`` opens it. XR-Linear and SNM read
TF-IDF features (the model is a TF-IDF pipeline), the others the texts. ``predict`` writes
the top-k labels of a JSON-lines file (``-``: standard input) with any model directory of
:func:`skxmc.save` whose model has ``predict_topk`` or ``predict_proba`` on texts;
``explain`` writes why (the tree path and top features of each label of an XR-Linear
model); ``evaluate`` scores predictions against the true labels; ``info`` describes a model
directory without loading its weights; ``warmup`` compiles the numba kernels ahead of
time. A closed standard output (``| head``) ends a command quietly, Ctrl-C exits with
status 130.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import itertools
import json
import logging
import logging.config
import os
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._cli_estimators import (
    ESTIMATORS,
    TFIDF_DEFAULTS,
    build_estimator,
    fit_targets,
    label_lists,
    tfidf_vectorizer,
)
from ._cli_serve import add_serve_parser, serve
from ._version import __version__

__all__ = ["build_parser", "main"]

logger = logging.getLogger(__name__)

STDIN = "-"

# Labels per text that ``predict`` writes for a multi-class model without --top-k.
_MULTICLASS_TOP_K = 10


def _print_metrics(result: dict[str, float], ks: Sequence[int], *, normalized: bool) -> None:
    """The metrics as a Markdown table in percent, its header naming the scale and the
    rows naming the propensity-scored metrics' convention (the one skxmc prints
    everywhere: percent, PSP / PSnDCG normalised; ``--unnormalized`` says so)."""
    header = " | ".join(f"@{k}" for k in ks)
    print(f"| metric (percent) | {header} |")
    print("|---|" + "---|" * len(ks))
    ps = " (normalised)" if normalized else " (un-normalised)"
    names = [
        ("P", "precision"),
        ("R", "recall"),
        ("nDCG", "ndcg"),
        (f"PSP{ps}", "psprecision"),
        (f"PSnDCG{ps}", "psndcg"),
    ]
    for name, key in names:
        if f"{key}@{ks[0]}" in result:
            row = " | ".join(f"{100 * result[f'{key}@{k}']:.2f}" for k in ks)
            print(f"| {name} | {row} |")
    if "psprecision@" + str(ks[0]) in result:
        if normalized:
            print(
                "PSP, PSnDCG: propensity-scored (Jain et al., 2016), normalised by the best "
                "achievable ranking, as the XMC literature reports them."
            )
        else:
            print(
                "PSP, PSnDCG (un-normalised): sums of inverse propensities, in percent; "
                "they can exceed 100."
            )


def _demo(args: argparse.Namespace) -> int:
    from .datasets import load_demo
    from .labels import LabelSpace, encode_labels
    from .linear import XRLinearClassifier
    from .metrics import evaluate, inverse_propensity

    demo = load_demo()
    logger.info("loaded %d train / %d test records", len(demo.train_texts), len(demo.test_texts))
    vectorizer = tfidf_vectorizer(args)
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
        normalize=True,
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
    shown = {k: v for k, v in result.items() if not k.startswith(("recall", "psndcg"))}
    _print_metrics(shown, (1, 3, 5), normalized=True)
    print(f"fit {fit_s:.2f} s (TF-IDF + tree + ranker), predict {predict_s:.2f} s")
    return 0


def _fit(args: argparse.Namespace) -> int:
    from .io import holds_model, refuse_foreign_entries, save
    from .pipeline import make_pipeline

    model_dir = Path(args.model_dir)
    # Checked before training too, so that a wrong --model-dir does not cost a fit.
    if model_dir.exists() and not model_dir.is_dir():
        raise FileExistsError(f"--model-dir {str(model_dir)!r} exists and is a file.")
    if model_dir.exists() and any(model_dir.iterdir()):
        if not args.overwrite:
            raise FileExistsError(
                f"--model-dir {str(model_dir)!r} is not empty; pass --overwrite to replace a "
                f"model saved there (other folders are never replaced)."
            )
        if not holds_model(model_dir):
            raise FileExistsError(
                f"--model-dir {str(model_dir)!r} holds no skxmc model; refusing to overwrite it."
            )
        refuse_foreign_entries(model_dir)  # before training, not after
    _check_can_create(model_dir)
    clf = build_estimator(args)
    texts, labels = _read_train(args.train)
    logger.info("read %d training records from %s", len(texts), _source(args.train))
    if not texts:
        raise ValueError(
            f"--train {args.train!r} has no records; it needs JSON lines such as "
            f'{{"text": "...", "labels": ["..."]}}.'
        )
    multi_label_file = isinstance(labels[0], frozenset)
    y = fit_targets(labels, args)
    tfidf = ESTIMATORS[args.estimator][1] == "tfidf"
    min_df = TFIDF_DEFAULTS["min_df"] if args.min_df is None else args.min_df
    if tfidf and len(texts) < min_df:
        # TF-IDF would fail with "max_df corresponds to < documents than min_df".
        raise ValueError(
            f"--train {args.train!r} has {len(texts)} record(s), fewer than --min-df "
            f"{min_df}, so no term can be kept; use more records or a lower --min-df."
        )
    t0 = time.perf_counter()
    if tfidf:
        vectorizer = tfidf_vectorizer(args)
        try:
            model = make_pipeline(vectorizer, clf).fit(texts, y)
        except ValueError as exc:
            if hasattr(vectorizer, "vocabulary_"):
                raise  # the ranker's error, which says what is wrong itself
            # sklearn says "empty vocabulary; perhaps the documents only contain stop words".
            raise ValueError(
                f"--train {args.train!r} has no usable text: TF-IDF found no terms that occur "
                f"in at least --min-df {min_df} records ({exc}). Check the 'text' fields, or "
                f"lower --min-df."
            ) from None
        features = f", {len(vectorizer.vocabulary_)} features"
    else:
        try:
            model = clf.fit(texts, y)
        except ValueError as exc:
            raise ValueError(
                f"cannot fit {type(clf).__name__} on --train {args.train!r}: {exc}"
            ) from None
        features = ""
    fit_s = time.perf_counter() - t0
    n_labels = len(clf.classes_)
    kind = "multi-label" if multi_label_file else "single-label"
    description = (
        f"Trained with `skxmc fit --estimator {args.estimator}` on "
        f"`{Path(args.train).name if args.train != STDIN else 'standard input'}`: "
        f"{len(texts)} records ({kind} JSON lines), {n_labels} labels; the fit took "
        f"{fit_s:.1f} s."
    )
    save(model, model_dir, overwrite=args.overwrite, model_card={"data_description": description})
    print(
        f"trained {type(clf).__name__} on {len(texts)} samples, {n_labels} labels{features} "
        f"in {fit_s:.2f} s; saved to {model_dir}"
    )
    return 0


def _source(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def _read_train(path: str) -> tuple[list, np.ndarray]:
    """``load_text_jsonl`` of a file, or of standard input for ``-`` (as ``predict --input
    -`` reads it)."""
    from .datasets import _text_label_records, load_text_jsonl

    if path != STDIN:
        return load_text_jsonl(path)
    return _text_label_records(_records_of(STDIN), "<stdin>", "text", "text_pair")


def _check_can_create(model_dir: Path) -> None:
    """Fail now, not after training, when ``model_dir`` cannot be created or replaced.

    ``save`` writes a sibling directory and renames it into place, so what must be writable
    is the parent, or the nearest folder that exists above a missing one.
    """
    folder = model_dir.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise FileExistsError(
            f"--model-dir {str(model_dir)!r} cannot be created: {str(folder)!r} is a file."
        )
    try:
        # A real attempt, as os.access() says yes to root even where mkdir fails (/sys).
        probe = tempfile.mkdtemp(prefix=f".{model_dir.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise OSError(
            f"--model-dir {str(model_dir)!r} cannot be written: {exc.strerror or exc} in "
            f"{str(folder)!r} (checked before training)."
        ) from None
    os.rmdir(probe)


def _check_output(output: str, input_path: str) -> None:
    """Refuse an ``--output`` that cannot be written, before the model is loaded and run."""
    if output == STDIN:
        return
    out = Path(output)
    if out.is_dir():
        raise ValueError(f"--output {output!r} is a directory; give a file name.")
    if input_path != STDIN and out.exists() and Path(input_path).exists():
        if os.path.samefile(out, input_path):
            raise ValueError(
                f"--output {output!r} is the --input file; writing the predictions would "
                f"destroy it. Choose another --output."
            )
    if not out.parent.is_dir():
        raise FileNotFoundError(
            f"--output {output!r}: the folder {str(out.parent)!r} does not exist."
        )


def _load_model(model_dir: str, *, mmap: bool = False, option: str = "--model-dir") -> Any:
    """``skxmc.load`` with errors that name ``--model-dir`` (``option``)."""
    from .io import load

    path = Path(model_dir)
    old = path.with_name(f".{path.name}.old")
    if not path.exists() and old.is_dir():
        # skxmc.save moves the previous model there just before moving the new one in.
        raise FileNotFoundError(
            f"{option} {model_dir!r} does not exist, but {str(old)!r} holds the model "
            f"an interrupted save moved aside; rename it back to use it."
        )
    try:
        # load() reads skxmc.save directories, the older ranker/ + vectorizer.json layout,
        # and "user/repo" from the local Hugging Face cache.
        return load(model_dir, mmap=mmap)
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        if model_dir in str(exc):
            raise
        raise ValueError(
            f"{option} {model_dir!r} holds a model that cannot be read "
            f"({type(exc).__name__}: {exc})."
        ) from None


def _write_predictions(
    out: Any, labels: np.ndarray, scores: np.ndarray, *, single_label: bool = False
) -> None:
    for row_labels, row_scores in zip(labels.tolist(), scores.tolist()):
        kept = [(lab, sc) for lab, sc in zip(row_labels, row_scores) if np.isfinite(sc)]
        record = {"labels": [lab for lab, _ in kept], "scores": [round(sc, 6) for _, sc in kept]}
        if single_label:  # the class predict() gives, first: the most probable one
            record = {"label": row_labels[0], **record}
        out.write(json.dumps(record) + "\n")
    out.flush()


def _topk_proba(model: Any, texts: list, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A multi-class model's ``k`` most probable classes per text, best first, with their
    probabilities."""
    proba = np.asarray(model.predict_proba(texts))
    classes = np.asarray(model.classes_)
    k = min(k or _MULTICLASS_TOP_K, len(classes))
    # A stable sort of the negated probabilities: ties keep the order of classes_, as argmax.
    order = np.argsort(-proba, axis=1, kind="stable")[:, :k]
    return classes[order], np.take_along_axis(proba, order, axis=1)


def _predict(args: argparse.Namespace) -> int:
    _check_output(args.output, args.input)
    model = _load_model(args.model_dir)
    multi_class = not hasattr(model, "predict_topk")
    if multi_class and not (hasattr(model, "predict_proba") and hasattr(model, "classes_")):
        raise ValueError(
            f"--model-dir {args.model_dir!r} holds a {type(model).__name__}, which has neither "
            f"predict_topk nor predict_proba; save a pipeline ending in an skxmc ranker, or a "
            f"text classifier."
        )
    batches = _text_batches(args.input, _PREDICT_BATCH)
    first = next(batches, None)
    if first is None:  # as other filters: no input, no output
        logger.info("no records in %s; nothing to predict", args.input)
        return 0
    n_texts, predict_s = 0, 0.0

    def write_all(out: Any) -> None:
        # one batch at a time: memory stays that of a batch, whatever the input's length
        nonlocal n_texts, predict_s
        for texts in itertools.chain([first], batches):
            t0 = time.perf_counter()
            if multi_class:
                labels, scores = _topk_proba(model, texts, args.top_k)
            else:
                labels, scores = model.predict_topk(texts, k=args.top_k)
            predict_s += time.perf_counter() - t0
            _write_predictions(out, labels, scores, single_label=multi_class)
            n_texts += len(texts)

    _write_output(args.output, write_all)
    logger.info("predicted %d samples in %.2f s", n_texts, predict_s)
    return 0


def _write_output(output: str, write_all: Any) -> None:
    """``write_all(stream)`` into ``--output`` (standard output for ``-``)."""
    if output == STDIN:
        write_all(sys.stdout)
        return
    # written next to --output and moved there at the end: a bad record further down
    # the input leaves no partial file
    target = Path(output)
    tmp = target.with_name(f".{target.name}.skxmc-{os.getpid()}.tmp")
    try:
        try:
            out = open(tmp, "w", encoding="utf-8")  # closed by the with below
        except OSError as exc:
            raise OSError(
                f"--output {output!r} cannot be written: {exc.strerror or exc}."
            ) from None
        with out:
            write_all(out)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


# Texts per call of ``skxmc explain``: an explanation holds a path and features per label,
# far more per text than a prediction.
_EXPLAIN_BATCH = 1_000


def _explain(args: argparse.Namespace) -> int:
    if args.features is not None and args.features < 0:
        raise ValueError(f"--features must be >= 0, got {args.features}.")
    if args.neighbors is not None and args.neighbors < 1:
        raise ValueError(f"--neighbors must be >= 1, got {args.neighbors}.")
    _check_output(args.output, args.input)
    model = _load_model(args.model_dir)
    if not hasattr(model, "explain"):
        raise ValueError(
            f"--model-dir {args.model_dir!r} holds a {type(model).__name__}, which has no "
            f"explain; save a pipeline ending in an XRLinearClassifier (skxmc fit's "
            f"default), a MatchXMLClassifier, a SharpReCLClassifier or a KNNBertClassifier."
        )
    options: dict[str, Any] = {} if args.features is None else {"n_features": args.features}
    if args.node_features:
        options["node_features"] = True
    if options and not _explain_takes(model, "n_features"):
        option = "--features" if args.features is not None else "--node-features"
        raise ValueError(
            f"{option} does not apply to a {type(model).__name__}: it explains a class by "
            f"its nearest training texts, not by features."
        )
    if args.neighbors is not None:
        if not _explain_takes(model, "n_neighbors"):
            what = (
                "by features, not by training texts"
                if _explain_takes(model, "n_features")
                else "by the neighbours that vote for a text (n_neighbors, set in fit)"
            )
            raise ValueError(
                f"--neighbors does not apply to a {type(model).__name__}: it explains a "
                f"label {what}."
            )
        options["n_neighbors"] = args.neighbors
    batches = _text_batches(args.input, _EXPLAIN_BATCH)

    def explain(texts: list) -> list:
        try:
            return model.explain(texts, args.top_k, **options)
        except AttributeError as exc:
            # a model without what explain reads (a predict-only XR-Linear, a SharpReCL
            # fitted without its training embeddings): the message says how to get it
            raise ValueError(str(exc)) from exc

    def write_all(out: Any) -> None:
        for texts in batches:
            for row in explain(texts):
                record = {"explanations": [item.to_dict() for item in row]}
                out.write(json.dumps(record, default=_json_default) + "\n")
        out.flush()

    _write_output(args.output, write_all)
    return 0


def _explain_takes(model: Any, option: str) -> bool:
    """Whether the ``explain`` of the model (or of a pipeline's final step) takes
    ``option`` (``n_features``: it explains labels by features; ``n_neighbors``: by the
    nearest training texts of each class)."""
    final = model.steps[-1][1] if hasattr(model, "steps") else model
    return option in inspect.signature(final.explain).parameters


def _json_default(value: Any) -> Any:
    """numpy scalars (labels of numpy arrays) as Python values in JSON output."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _size(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n_bytes} B"  # not reached


def _info(args: argparse.Namespace) -> int:
    from .io import describe

    info = describe(args.model_dir)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    unknown = "?"
    rows = [
        ("model", info["path"]),
        ("estimator", info["estimator"]),
        ("task", info["task"] or unknown),
        ("labels", unknown if info["n_labels"] is None else str(info["n_labels"])),
        (
            "features",
            info["features"]
            if info["n_features"] is None
            else f"{info['n_features']} ({info['features']})",
        ),
        ("saved with", f"skxmc {info['skxmc_version']} (format {info['format_version']})"),
    ]
    if info.get("predict_only"):
        rows.append(
            (
                "state",
                "predict-only (saved compacted: predicts as the full model; fit again to train)",
            )
        )
    pecos = info.get("pecos")
    if pecos is not None:  # a libpecos folder: no skxmc version; its tree and settings
        rows[-1] = ("saved with", "libpecos (XLinearModel.save; read by skxmc.io.from_pecos)")
        rows.append(("layers", " -> ".join(str(n) for n in [1, *pecos["layers"]])))
        beams, posts = pecos["only_topk"], sorted(set(pecos["post_processors"]))
        rows.append(("predict", f"only_topk per layer {beams}, post-processor {', '.join(posts)}"))
    for key, value in rows:
        print(f"{key + ':':<11} {value}")
    print("parameters (non-default):")
    for step in info["steps"]:
        title = step["class"] if step["name"] is None else f"{step['name']} ({step['class']})"
        params = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(step["params"].items()))
        print(f"  {title}: {params or '(all defaults)'}")
    files = info["files"]
    print(f"files ({len(files)}, {_size(info['total_size'])}):")
    width = max(len(name) for name in files)
    for name, size in sorted(files.items()):
        print(f"  {name:<{width}}  {_size(size):>10}")
    return 0


def _warmup(args: argparse.Namespace) -> int:
    import inspect

    from . import _warmup

    # Looked up at run time: the command line does not break where it is missing.
    warmup = getattr(_warmup, "warmup", None)
    if not callable(warmup):
        raise ValueError(
            "this skxmc has no skxmc.warmup(), so its kernels cannot be compiled "
            "ahead of time; they compile on first use instead (nothing was done)."
        )
    kwargs = {"verbose": args.verbose} if "verbose" in inspect.signature(warmup).parameters else {}
    t0 = time.perf_counter()
    result = warmup(**kwargs)
    seconds = time.perf_counter() - t0
    counts = ""
    if isinstance(result, dict) and all(
        isinstance(result.get(k), int) for k in ("compiled", "loaded")
    ):
        counts = (
            f": {result['compiled']} signature(s) compiled, {result['loaded']} loaded from "
            f"numba's cache"
        )
    print(f"skxmc's numba kernels are ready in {seconds:.1f} s{counts}")
    return 0


def _records_of(path: str) -> Iterator[tuple[int, dict]]:
    """JSON-lines records of a file (plain or gzip), or of standard input for ``-``."""
    from .datasets import _decoded_lines, _json_records, _records

    if path != STDIN:
        return _records(path)
    # The bytes, decoded line by line, so that bad UTF-8 is reported with its line;
    # a replaced sys.stdin (tests, embedding) may have no .buffer.
    buffer = getattr(sys.stdin, "buffer", None)
    lines = (
        _decoded_lines(buffer, "<stdin>") if buffer is not None else enumerate(sys.stdin, start=1)
    )
    return _json_records(lines, "<stdin>")


# Texts per prediction call of ``skxmc predict``: input of any length streams through in
# batches of this size (large enough that the per-call overhead does not show).
_PREDICT_BATCH = 10_000


def _text_batches(path: str, size: int) -> Iterator[list[str]]:
    """Texts of a JSON-lines file in lists of ``size`` (labels are optional for prediction,
    so not read); the file is read as the batches are consumed."""
    where = "<stdin>" if path == STDIN else path
    texts: list[str] = []
    for line_no, record in _records_of(path):
        text = record.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{where}: line {line_no}: field 'text' must be a string.")
        texts.append(text)
        if len(texts) == size:
            yield texts
            texts = []
    if texts:
        yield texts


def _evaluate(args: argparse.Namespace) -> int:
    from .datasets import load_text_jsonl
    from .labels import encode_labels
    from .metrics import evaluate, inverse_propensity

    _, truth = load_text_jsonl(args.true)
    truth = label_lists(truth)
    predicted, pred_scores = [], []
    for line_no, record in _records_of(args.pred):
        where = f"--pred {args.pred}: line {line_no}"
        row = record.get("labels")
        if not isinstance(row, list):
            raise ValueError(f"{where}: 'labels' must be a list.")
        row_scores = record.get("scores")
        if row_scores is None:  # a ranking without scores: rank order
            row_scores = [-float(i) for i in range(len(row))]
        elif not isinstance(row_scores, list) or len(row_scores) != len(row):
            n = len(row_scores) if isinstance(row_scores, list) else type(row_scores).__name__
            raise ValueError(
                f"{where}: 'scores' must be a list with one score per label; got {n} for "
                f"{len(row)} labels."
            )
        bad = [v for v in row_scores if not _is_number(v)]
        if bad:
            raise ValueError(f"{where}: 'scores' must be numbers, got {bad[0]!r:.40}.")
        predicted.append(row)
        pred_scores.append(row_scores)
    if len(predicted) != len(truth):
        raise ValueError(
            f"--pred has {len(predicted)} lines but --true has {len(truth)}; they must "
            f"describe the same samples in the same order."
        )
    ks = args.ks
    if args.train:
        _, train_labels = load_text_jsonl(args.train)
        train_labels = label_lists(train_labels)
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
    normalized = not args.unnormalized
    result = evaluate(
        truth,
        (label_array, scores),
        ks=ks,
        inv_propensity=inv_p,
        normalize=normalized,
        classes=classes,
    )
    _print_metrics(result, ks, normalized=normalized)
    return 0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ks(value: str) -> list[int]:
    """``--ks``: comma-separated positive cut-offs; an ``argparse`` type, so that a bad
    value is a usage error (exit 2) naming the option."""
    try:
        ks = sorted({int(k) for k in value.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers such as 1,3,5, got {value!r}"
        ) from None
    if ks[0] < 1:
        raise argparse.ArgumentTypeError(f"cut-offs must be >= 1, got {value!r}")
    return ks


def _model_options(p: argparse.ArgumentParser, fit: bool = False) -> None:
    """The options of the commands that build a model (demo, fit)."""

    # fit: defaults of None tell an option that was not given (it may not apply to
    # the --estimator); the effective defaults are the ones in the help.
    def default(value: Any) -> Any:
        return None if fit else value

    p.add_argument("--beam-size", type=int, default=default(10), help="beam width (default 10)")
    p.add_argument("--n-jobs", type=int, default=default(2), help="threads (default 2; xrlinear)")
    p.add_argument("--min-df", type=int, default=default(2), help="TF-IDF min_df (default 2)")
    p.add_argument(
        "--max-ngram", type=int, default=default(2), help="TF-IDF n-gram order (default 2)"
    )
    p.add_argument(
        "--max-features",
        type=int,
        default=default(200_000),
        help="TF-IDF vocabulary size (default 200000)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="show progress (verbose=1)")


def _add_fit_parser(sub: Any) -> None:
    """``skxmc fit``: train an estimator on a JSON-lines file and save it."""
    fit = sub.add_parser(
        "fit",
        help="train an estimator on a JSON-lines file and save it",
        description="Train an skxmc estimator on a JSON-lines file and save it (with a model "
        "card, README.md) for skxmc predict and skxmc.load. xrlinear and snm read TF-IDF "
        "features (--min-df, --max-ngram, --max-features), the others the texts; sharprecl "
        "and knnbert are multi-class and need one label per record.",
    )
    fit.add_argument(
        "--train",
        required=True,
        help='JSON lines {"text", "labels": [...]} (multi-label) or {"text", "label"}; '
        "- reads standard input",
    )
    fit.add_argument("--model-dir", required=True, help="directory to save the model to")
    fit.add_argument(
        "--estimator",
        choices=list(ESTIMATORS),
        default="xrlinear",
        help="xrlinear (TF-IDF + XRLinearClassifier, the default), matchxml "
        "(MatchXMLClassifier), sharprecl (SharpReCLClassifier), knnbert (KNNBertClassifier), "
        "snm (TF-IDF + SNMClassifier)",
    )
    fit.add_argument(
        "--params",
        metavar="PARAMS_JSON",
        help='JSON file of constructor parameters, e.g. {"encoder": "path/to/encoder", '
        '"max_epochs": 1}; options given on the command line win',
    )
    fit.add_argument("--top-k", type=int, default=None, help="labels per prediction (default 10)")
    fit.add_argument(
        "--negative-sampling",
        choices=["tfn", "tfn+man"],
        default=None,
        help="xrlinear's negative sampling (default tfn)",
    )
    fit.add_argument("--overwrite", action="store_true", help="replace a saved model")
    _model_options(fit, fit=True)
    fit.set_defaults(func=_fit)


def _add_predict_parser(sub: Any) -> None:
    """``skxmc predict``: the top-k labels of each text as JSON lines."""
    predict = sub.add_parser("predict", help="write the top-k labels of each text as JSON lines")
    predict.add_argument(
        "--model-dir",
        required=True,
        help="directory of skxmc fit or skxmc.save, user/repo in the Hugging Face cache, or a "
        "libpecos XLinearModel folder",
    )
    predict.add_argument(
        "--input", required=True, help='JSON lines with a "text" field; - for standard input'
    )
    predict.add_argument("--output", default="-", help="output file (default: stdout)")
    predict.add_argument("--top-k", type=int, default=None, help="labels per text")
    predict.add_argument("-v", "--verbose", action="count", default=0)
    predict.set_defaults(func=_predict)


def _add_explain_parser(sub: Any) -> None:
    """``skxmc explain``: why each text got its top-k labels, as JSON lines."""
    explain = sub.add_parser(
        "explain",
        help="write, per text, its top-k labels with their tree paths and top features "
        "(XR-Linear, MatchXML) or nearest training texts (SharpReCL, KNN-BERT) as JSON lines",
    )
    explain.add_argument("--model-dir", required=True, help="directory of skxmc fit or skxmc.save")
    explain.add_argument(
        "--input", required=True, help='JSON lines with a "text" field; - for standard input'
    )
    explain.add_argument("--output", default="-", help="output file (default: stdout)")
    explain.add_argument(
        "--top-k", "--k", type=int, default=5, help="labels explained per text (default 5)"
    )
    explain.add_argument(
        "--features",
        type=int,
        default=None,
        help="features listed per label of an XR-Linear or MatchXML model (default 5)",
    )
    explain.add_argument(
        "--neighbors",
        type=int,
        default=None,
        help="training texts listed per class of a SharpReCL model (default 5)",
    )
    explain.add_argument(
        "--node-features",
        action="store_true",
        help="also list the top features of every cluster on a label's path (XR-Linear, MatchXML)",
    )
    explain.add_argument("-v", "--verbose", action="count", default=0)
    explain.set_defaults(func=_explain)


def _add_evaluate_parser(sub: Any) -> None:
    """``skxmc evaluate``: ranking metrics of saved predictions."""
    evaluate = sub.add_parser("evaluate", help="P@k, R@k, nDCG@k (and PS metrics) of predictions")
    evaluate.add_argument("--true", required=True, help="JSON lines with the true labels")
    evaluate.add_argument(
        "--pred", required=True, help="output of skxmc predict; - for standard input"
    )
    evaluate.add_argument("--train", help="training file, for propensity-scored metrics")
    evaluate.add_argument("--ks", type=_ks, default="1,3,5", help="cut-offs (default 1,3,5)")
    evaluate.add_argument(
        "--unnormalized",
        action="store_true",
        help="print PSP / PSnDCG as sums of inverse propensities instead of normalised by the "
        "best achievable ranking (the default, as the XMC literature reports them)",
    )
    evaluate.set_defaults(func=_evaluate)


def _add_model_tools(sub: Any) -> None:
    """``skxmc info`` and ``skxmc warmup``."""
    info = sub.add_parser("info", help="describe a model directory (without loading its weights)")
    info.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        help="directory of skxmc fit or skxmc.save, user/repo in the Hugging Face cache, or a "
        "libpecos XLinearModel folder",
    )
    info.add_argument("--json", action="store_true", help="print the description as JSON")
    info.set_defaults(func=_info)

    warmup = sub.add_parser(
        "warmup", help="compile the numba kernels now (cached for later processes)"
    )
    warmup.add_argument("-v", "--verbose", action="count", default=0)
    warmup.set_defaults(func=_warmup)


def build_parser() -> argparse.ArgumentParser:
    """The ``skxmc`` command line: one sub-command per job."""
    parser = argparse.ArgumentParser(
        prog="skxmc", description="Extreme multi-label text classification, scikit-learn style."
    )
    parser.add_argument("--version", action="version", version=f"skxmc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit and evaluate on the shipped TIBKAT demo data")
    _model_options(demo)
    demo.set_defaults(func=_demo)
    _add_fit_parser(sub)
    _add_predict_parser(sub)
    _add_explain_parser(sub)
    _add_evaluate_parser(sub)
    _add_model_tools(sub)
    add_serve_parser(sub, functools.partial(serve, load_model=_load_model))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings(), _progress_as_log(getattr(args, "verbose", 0)):
        warnings.showwarning = _warning_printer(args.command)
        return _run(args)


def _warning_printer(command: str) -> Any:
    """``warnings.showwarning`` for the command line: ``skxmc <command>: warning: ...`` on
    standard error, without Python's file name, line number and source line."""

    def show(message: Any, category: type, filename: str, lineno: int, *_: Any) -> None:
        print(f"skxmc {command}: warning: {message}", file=sys.stderr, flush=True)

    return show


@contextlib.contextmanager
def _progress_as_log(verbose: int) -> Iterator[None]:
    """``-v``: every progress line (the command's and the estimators') as one log line on
    standard error, ``time name: message``, instead of plain lines printed to standard
    output among the command's results; none without ``-v``."""
    if not verbose:
        yield
        return
    from ._logging import progress_printing

    root = logging.getLogger(__package__)  # "skxmc": every module's logger under it
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    level, propagate = root.level, root.propagate
    root.addHandler(handler)
    # The estimators' progress lines are DEBUG records (see skxmc._logging).
    root.setLevel(logging.DEBUG)
    root.propagate = False
    try:
        with progress_printing(False):
            yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        root.propagate = propagate


def _run(args: argparse.Namespace) -> int:
    for name in ("beam_size", "n_jobs", "top_k", "min_df", "max_ngram", "max_features"):
        value = getattr(args, name, None)
        if value is not None and value < 1 and not (name == "n_jobs" and value == -1):
            print(f"skxmc: error: --{name.replace('_', '-')} must be >= 1", file=sys.stderr)
            return 2
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below and not at exit
        return status
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"skxmc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, and point stdout at /dev/null so
        # that the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool killed by the closed pipe
    except OSError as exc:  # after BrokenPipeError, a subclass; str(exc) names the file
        print(f"skxmc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"skxmc {args.command}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, the shell's convention
