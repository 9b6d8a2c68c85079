"""Epoch time of the training engine against a bare Hugging Face loop, and before/after.

Usage::

    python benchmarks/bare_hf_loop.py --rounds 5 --before <checkout of the older skxmc>

Every measurement is one fresh process (``--worker``) training one epoch on the same
encoder (all-MiniLM-L6-v2, mean pooling), the same TREC texts, the same batch size and
token limit:

- ``bare``: a plain PyTorch loop over ``transformers.AutoModel``, pre-tokenised texts
  padded per batch (what ``DataCollatorWithPadding`` does), a linear head, AdamW with
  ``get_linear_schedule_with_warmup`` and gradient clipping;
- ``sharprecl-plain`` / ``knnbert-plain``: the estimators with their contrastive parts
  off (one view, cross-entropy), the configuration the bare loop matches;
- ``sharprecl``: SharpReCL's defaults (two views, rebalanced contrastive loss);
- ``...@before``: the same with the package found under ``--before`` (the code before
  the engine moved to accelerate), imported in place of this checkout.

The epoch time is the trainer's own clock (``seconds`` of its last step record: optimiser
set-up and every step; not loading, tokenising nor the kNN memory); the bare loop's is
timed the same way. Configurations run in a rotated order in each round (the machine is
shared: rounds interleave so that load changes hit every configuration alike) and the
table reports the median over rounds. torch uses one thread (``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CONFIGS = ["bare", "sharprecl-plain", "knnbert-plain", "sharprecl"]
PLAIN = {"sharprecl-plain": {"contrastive_weight": 0.0, "augmentation": None}}
PLAIN["knnbert-plain"] = {"contrastive_weight": 0.0, "dropout": 0.1}


def load_texts(n: int) -> tuple[list[str], np.ndarray]:
    from skxmc.datasets import get_data_dir

    path = get_data_dir(required=True) / "trec" / "train.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    rows = rows[:n]
    return [r["text"] for r in rows], np.asarray([r["label"] for r in rows])


def bare_loop(args: argparse.Namespace, texts: list[str], y: np.ndarray) -> dict:
    import torch
    from torch import nn
    from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.encoder_path)
    model = AutoModel.from_pretrained(args.encoder_path)
    classes, codes = np.unique(y, return_inverse=True)
    head = nn.Linear(model.config.hidden_size, len(classes))
    features = tokenizer(texts, truncation=True, max_length=args.max_length)
    features = [{k: features[k][i] for k in features} for i in range(len(texts))]
    labels = torch.as_tensor(codes)
    order = np.random.default_rng(0).permutation(len(texts))
    batches = [order[i : i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    start = time.perf_counter()
    params = [*model.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=5e-5)
    schedule = get_linear_schedule_with_warmup(opt, 0, len(batches))
    model.train()
    for idx in batches:
        inputs = tokenizer.pad([features[i] for i in idx], return_tensors="pt")
        states = model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        loss = nn.functional.cross_entropy(head(pooled), labels[idx])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)
    return {"seconds": time.perf_counter() - start, "steps": len(batches)}


def estimator_epoch(args: argparse.Namespace, name: str, texts: list[str], y: np.ndarray) -> dict:
    import skxmc.text._training as training
    from skxmc import KNNBertClassifier, SharpReCLClassifier

    results = []
    fit = training.Trainer.fit

    def recording_fit(self, *a, **kw):
        out = fit(self, *a, **kw)
        results.append(out)
        return out

    training.Trainer.fit = recording_fit
    cls = KNNBertClassifier if name.startswith("knnbert") else SharpReCLClassifier
    params = dict(
        encoder=args.encoder_path,
        pooling="mean",
        max_length=args.max_length,
        batch_size=args.batch_size,
        max_epochs=1,
        device="cpu",
        random_state=0,
    )
    cls(**params, **PLAIN.get(name, {})).fit(texts, y)
    result = results[-1]
    return {"seconds": result.history[-1]["seconds"], "steps": result.n_steps}


def worker(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    texts, y = load_texts(args.n_texts)
    name = args.worker.split("@")[0]
    out = bare_loop(args, texts, y) if name == "bare" else estimator_epoch(args, name, texts, y)
    print("RESULT " + json.dumps(out), flush=True)


def measure(args: argparse.Namespace, config: str) -> dict:
    here = Path(__file__).resolve().parents[1]
    root = args.before if config.endswith("@before") else str(here)
    from skxmc.datasets import get_data_dir

    data = str(get_data_dir(required=True))  # the older checkout looks elsewhere
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": root, "SKXMC_DATA": data}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        config,
        "--n-texts",
        str(args.n_texts),
        "--batch-size",
        str(args.batch_size),
        "--max-length",
        str(args.max_length),
        "--encoder-path",
        args.encoder_path,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        raise RuntimeError(f"{config} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[-1][len("RESULT ") :])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n-texts", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--before", default=None, help="folder holding the older skxmc")
    parser.add_argument("--before-commit", default=None, help="its commit, for the record")
    parser.add_argument("--encoder-path", default=None)
    parser.add_argument("--name", default="bare_hf_loop")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--report-only", action="store_true", help="re-render results/<name>.json's runs"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        saved = json.loads(
            (Path(__file__).resolve().parent / "results" / f"{args.name}.json").read_text()
        )
        for key, value in saved["config"].items():
            setattr(args, key, value)
        return report(args, list(saved["runs"]), saved["runs"], command=saved["command"])
    if args.encoder_path is None:
        from skxmc.text import bundled_minilm_path

        args.encoder_path = bundled_minilm_path()
    if args.worker:
        return worker(args)
    configs = CONFIGS + ([f"{c}@before" for c in CONFIGS[1:]] if args.before else [])
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    for r in range(args.rounds):
        order = configs[r % len(configs) :] + configs[: r % len(configs)]
        for config in order:
            runs[config].append(measure(args, config))
            print(f"round {r + 1}: {config} {runs[config][-1]}", flush=True)
    report(args, configs, runs)


def report(
    args: argparse.Namespace,
    configs: list[str],
    runs: dict[str, list[dict]],
    command: str | None = None,
) -> None:
    from _common import markdown_table, write_results

    median = {c: statistics.median(x["seconds"] for x in runs[c]) for c in configs}
    rows = []
    for c in configs:
        base = c.split("@")[0]
        row = {
            "configuration": c,
            "steps": runs[c][0]["steps"],
            "median s/epoch": median[c],
            "runs": ", ".join(f"{x['seconds']:.1f}" for x in runs[c]),
            "vs bare loop": median[c] / median["bare"],
        }
        if c.endswith("@before"):
            row["after vs before"] = median[base] / median[c]
            # Paired by round (both ran minutes apart under the same load).
            ratios = [a["seconds"] / b["seconds"] for a, b in zip(runs[base], runs[c])]
            row["paired after/before"] = statistics.median(ratios)
        rows.append(row)
    if command is None:
        command = "python benchmarks/bare_hf_loop.py " + " ".join(
            a if not args.before or a != args.before else "<checkout of --before-commit>"
            for a in sys.argv[1:]
        )
    columns = [
        "configuration",
        "steps",
        "median s/epoch",
        "vs bare loop",
        "after vs before",
        "paired after/before",
        "runs",
    ]
    head = (
        f"Command: `{command}`\n\nOne epoch of {args.n_texts} TREC texts, batch "
        f"{args.batch_size}, max_length {args.max_length}, all-MiniLM-L6-v2, CPU, one torch "
        f"thread; median of {args.rounds} interleaved rounds on a shared, noisy machine. "
        f"before = commit {args.before_commit or '?'}. 'paired after/before': median over "
        f"rounds of the ratio of the two runs of one round.\n\n"
    )
    drop = ("before", "encoder_path", "worker", "report_only")
    config = {k: v for k, v in vars(args).items() if k not in drop}
    table = head + markdown_table(rows, columns)
    print(table)
    write_results(
        args.name, {"command": command, "config": config, "rows": rows, "runs": runs}, table
    )


if __name__ == "__main__":
    main()
