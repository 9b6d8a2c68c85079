"""The training engine against a bare torch + transformers loop (skeleton; issue 50 adds
the published neural baselines).

Each configuration trains one epoch on the same texts (TREC), encoder, batch size and
token limit, in its own fresh interpreter with one torch thread:

- ``bare``: a plain loop over ``transformers.AutoModel``, texts tokenised once and padded
  per batch, mean pooling, a linear head, AdamW with a linear schedule, gradient clipping;
- ``sharprecl-plain`` / ``knnbert-plain``: the estimators with their contrastive parts off
  (one view, cross-entropy), the configuration the bare loop matches.

Reported: the epoch's wall seconds from the start of training (loading the encoder
included, for all alike) and test accuracy (x100). ``--quick`` uses a tiny random encoder
on 120 texts: it shows the suite runs, its numbers say nothing about a real encoder.
Replaces ``bare_hf_loop.py`` (its comparison with an older checkout is not ported).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks import _data
from benchmarks._harness import Clock, in_child, summarise

SEEDS = (0, 1, 2)
CONFIGS = ("bare", "sharprecl-plain", "knnbert-plain")
PLAIN = {
    "sharprecl-plain": {"contrastive_weight": 0.0, "augmentation": None},
    "knnbert-plain": {"contrastive_weight": 0.0, "dropout": 0.1},
}
METRICS = ("epoch_s", "accuracy")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    parser.add_argument("--encoder", help="encoder folder (default: the bundled MiniLM)")
    parser.add_argument("--n-texts", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=64)


def make_estimator(config: str, encoder: str, max_length: int, batch_size: int, seed: int) -> Any:
    """The only place that builds the estimators (training settings included)."""
    from skxmc import KNNBertClassifier, SharpReCLClassifier

    cls = KNNBertClassifier if config.startswith("knnbert") else SharpReCLClassifier
    training = _data.training_settings(
        cls, max_epochs=1, batch_size=batch_size, device="cpu", random_state=seed
    )
    return cls(encoder=encoder, pooling="mean", max_length=max_length, **training, **PLAIN[config])


def bare_loop(encoder: str, texts: list, y: list, max_length: int, batch_size: int, seed: int):
    import numpy as np
    import torch
    from torch import nn
    from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(encoder)
    model = AutoModel.from_pretrained(encoder)
    classes, codes = np.unique(np.asarray(y), return_inverse=True)
    head = nn.Linear(model.config.hidden_size, len(classes))
    enc = tokenizer(texts, truncation=True, max_length=max_length)
    features = [{k: enc[k][i] for k in enc} for i in range(len(texts))]
    labels = torch.as_tensor(codes)
    order = np.random.default_rng(seed).permutation(len(texts))
    batches = [order[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    params = [*model.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=5e-5)
    schedule = get_linear_schedule_with_warmup(opt, 0, len(batches))

    def encode(batch_texts: list) -> Any:
        inputs = tokenizer(
            batch_texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt"
        )
        states = model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        return head((states * mask).sum(1) / mask.sum(1).clamp(min=1e-9))

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
    model.eval()

    def predict(test_texts: list) -> list:
        with torch.no_grad():
            out = [encode(test_texts[i : i + 64]).argmax(1) for i in range(0, len(test_texts), 64)]
        return list(classes[torch.cat(out).numpy()])

    return predict


def measure(
    config: str,
    encoder: str,
    n_texts: int,
    quick: bool,
    max_length: int,
    batch_size: int,
    seed: int,
) -> dict:
    """One configuration, in its child process."""
    import torch

    torch.set_num_threads(1)
    from benchmarks._textclf import QUICK_TEST

    d = _data.text_split("trec")
    X, y = d["X_train"][:n_texts], list(d["y_train"][:n_texts])
    X_test, y_test = d["X_test"], list(d["y_test"])
    if quick:
        X_test, y_test = X_test[:QUICK_TEST], y_test[:QUICK_TEST]
    with Clock() as epoch:
        if config == "bare":
            predict = bare_loop(encoder, X, y, max_length, batch_size, seed)
        else:
            predict = (
                make_estimator(config, encoder, max_length, batch_size, seed).fit(X, y).predict
            )
    pred = predict(X_test)
    accuracy = 100 * sum(str(a) == str(b) for a, b in zip(pred, y_test)) / len(y_test)
    return {"epoch_s": epoch.wall_s, "accuracy": accuracy}


def run(args: argparse.Namespace) -> dict:
    n_texts = 120 if args.quick else args.n_texts
    runs: list[dict] = []
    if not _data.available("trec"):
        print("trec: data absent, skipped")
        encoder_name = None
    else:
        texts = _data.text_split("trec")["X_train"][:n_texts]
        encoder, encoder_name = _data.encoder_for(args, texts)
        # --quick: two fresh interpreters, not three (each loads torch and transformers)
        configs = args.configs[:2] if args.quick else args.configs
        for seed in args.seeds:
            for config in configs:
                r = in_child(
                    "benchmarks.suites.neural_baselines:measure",
                    env={"OMP_NUM_THREADS": "1"},
                    config=config,
                    encoder=encoder,
                    n_texts=n_texts,
                    quick=args.quick,
                    max_length=args.max_length,
                    batch_size=args.batch_size,
                    seed=seed,
                )
                r.update(config=config, seed=seed)
                runs.append(r)
                print(f"{config} seed {seed}: {r['epoch_s']:.1f} s", flush=True)
    return {
        "config": {
            "encoder": encoder_name,
            "n_texts": n_texts,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
        },
        "tables": [
            {
                "title": "One epoch: engine against a bare loop",
                "caption": "Wall seconds of one epoch (encoder loading included); accuracy x100.",
                "columns": ["config", *METRICS, "n_seeds"],
                "rows": summarise(runs, ["config"], METRICS),
            }
        ],
        "runs": runs,
    }
