"""Peak memory of fitting SharpReCL on texts from a generator, 20k against 200k texts.

Each measurement is a fresh interpreter (``in_child``): it builds a generator of
synthetic texts (12 to 40 words drawn from a 3,000-word vocabulary; 5 imbalanced
classes, the labels an in-memory array), fits ``SharpReCLClassifier`` on a tiny random
BERT (2 layers of width 32: the model is not what is measured) for a few steps with the
paper's two views, and reports the process's peak RSS (``VmHWM``), its RSS before the
fit (imports, the encoder's folder on disk, the labels) and the fit's seconds. The fit
reads the generator once, tokenising it (and drawing its augmented view) chunk by chunk;
it keeps the token ids, and after training embeds every training text once for
``explain`` (``train_embeddings_``). With ``--list`` the same texts are also given as an
in-memory list, for comparison.

Target (issue 51 item 5): the peak RSS at 200k texts at most 1.2x that at 20k.
"""

from __future__ import annotations

import argparse
import time

from benchmarks._data import CACHE, tiny_encoder
from benchmarks._harness import in_child, summarise

SEEDS = (0,)
SIZES = (20_000, 200_000)
METRICS = ("peak_rss_mb", "rss_before_fit_mb", "fit_s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--steps", type=int, default=5, help="training steps per fit")
    parser.add_argument(
        "--list", action="store_true", help="also fit on the texts as an in-memory list"
    )


def _vocabulary(size: int = 3000) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(12345)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, rng.integers(3, 9))) for _ in range(2 * size)}
    return sorted(words)[:size]


def texts(n: int, seed: int, chunk: int = 4096):
    """``n`` synthetic texts, generated chunk by chunk (never all in memory)."""
    import numpy as np

    vocab = np.array(_vocabulary(), dtype=object)
    rng = np.random.default_rng(seed)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        lengths = rng.integers(12, 41, m)
        words = rng.integers(0, len(vocab), int(lengths.sum()))
        ends = np.cumsum(lengths)
        for end, length in zip(ends, lengths):
            yield " ".join(vocab[words[end - length : end]])


def labels(n: int, seed: int):
    import numpy as np

    prior = np.array([0.5, 0.25, 0.15, 0.07, 0.03])
    return np.random.default_rng(seed + 1).choice(len(prior), n, p=prior)


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(n: int, seed: int, encoder: str, steps: int, source: str) -> dict:
    """In a fresh interpreter: fit on ``n`` texts from a generator (or a list)."""
    from skxmc import SharpReCLClassifier
    from skxmc.text import TrainingConfig

    y = labels(n, seed)
    X = texts(n, seed) if source == "generator" else list(texts(n, seed))
    clf = SharpReCLClassifier(
        encoder=encoder,
        n_views=2,
        max_length=64,
        projection_dim=32,
        training=TrainingConfig(batch_size=32, max_steps=steps, random_state=seed),
    )
    before = _rss_mb()
    start = time.perf_counter()
    clf.fit(X, y)
    return {
        "fit_s": time.perf_counter() - start,
        "rss_before_fit_mb": before,
        "train_embeddings_mb": clf.train_embeddings_.nbytes / 2**20,
    }


def run(args: argparse.Namespace) -> dict:
    sizes = [2_000, 20_000] if args.quick else args.sizes
    sources = ["generator", "list"] if args.list else ["generator"]
    encoder = tiny_encoder(CACHE / "tiny-bert-streaming", list(texts(2000, 0)))
    runs = []
    for seed in args.seeds:
        for source in sources:
            for n in sizes:
                r = in_child(
                    "benchmarks.suites.streaming:measure",
                    n=n,
                    seed=seed,
                    encoder=encoder,
                    steps=args.steps,
                    source=source,
                )
                r.update(seed=seed, source=source, n_texts=n)
                runs.append(r)
                print(
                    f"{source}, {n} texts: peak {r['peak_rss_mb']:.0f} MB "
                    f"(before fit {r['rss_before_fit_mb']:.0f} MB), fit {r['fit_s']:.1f} s",
                    flush=True,
                )
    rows = summarise(runs, ["source", "n_texts"], METRICS)
    ratios = []
    for source in sources:
        peaks = {r["n_texts"]: r["peak_rss_mb"] for r in rows if r["source"] == source}
        small, large = min(sizes), max(sizes)
        ratios.append(
            {
                "source": source,
                "texts": f"{large} vs {small}",
                "peak_rss_ratio": peaks[large] / peaks[small],
                "extra_mb": peaks[large] - peaks[small],
                "extra_bytes_per_text": (peaks[large] - peaks[small]) * 2**20 / (large - small),
            }
        )
    return {
        "config": {
            "estimator": "SharpReCLClassifier(n_views=2, max_length=64, projection_dim=32), "
            f"batch_size=32, max_steps={args.steps}",
            "encoder": "tiny random BERT (2 layers, width 32, word-level vocabulary)",
            "texts": "12-40 words from a 3,000-word vocabulary, 5 classes (prior .5 .25 .15 "
            ".07 .03); labels in memory",
        },
        "tables": [
            {
                "title": "Peak memory of a SharpReCL fit on streamed texts",
                "caption": "One fresh interpreter per row; peak RSS (VmHWM) and RSS before "
                "fit in MB, fit seconds. Measured on a shared machine: compare the rows of "
                "one run.",
                "columns": ["source", "n_texts", *METRICS, "n_seeds"],
                "rows": rows,
                "digits": {"peak_rss_mb": 0, "rss_before_fit_mb": 0, "fit_s": 1},
            },
            {
                "title": "Growth of the peak memory",
                "caption": "Peak RSS at the larger size over that at the smaller (target: at "
                "most 1.2), and the extra memory per extra text.",
                "columns": [
                    "source",
                    "texts",
                    "peak_rss_ratio",
                    "extra_mb",
                    "extra_bytes_per_text",
                ],
                "rows": ratios,
                "digits": {"peak_rss_ratio": 3, "extra_mb": 0, "extra_bytes_per_text": 0},
            },
        ],
        "runs": runs,
    }
