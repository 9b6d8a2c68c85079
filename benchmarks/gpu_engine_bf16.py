"""The training engine on a GPU: a MatchXML fine-tuning stage in bfloat16, in steps/s.

Usage (on a machine with a CUDA GPU)::

    python benchmarks/gpu_engine_bf16.py [--dataset reuters21578_allcats] [--steps 60]

Two checks, in one process:

1. float16 with loss scaling: a small regression trained by :class:`skxmc.text.Trainer`
   with ``mixed_precision="fp16"`` must use ``accelerate``'s gradient scaler, end with
   finite weights and lower its loss;
2. MatchXML's fine-tuning stages (all-MiniLM-L6-v2, no static sentence embeddings) with
   the trainer's precision set to ``"bf16"`` and to ``"no"`` (float32), in alternating
   order: optimiser steps per second of each stage (the trainer's own clock), and the
   ratio.

Writes ``benchmarks/results/gpu_engine_bf16.json`` and ``.md``. ``--device cpu`` runs the
same code on a CPU (a smoke test of the script; check 1 is skipped there).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from skxmc.text import TrainingConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def fp16_check(device: str) -> dict:
    import torch
    from torch import nn

    from skxmc.text import Trainer

    torch.manual_seed(0)
    X = torch.randn(512, 16)
    y = X @ torch.randn(16, 1)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))

    def step(idx):
        return nn.functional.mse_loss(model(X[idx].to(device)).float(), y[idx].to(device))

    def data(epoch, rng):
        return [torch.as_tensor(b) for b in np.array_split(rng.permutation(512), 8)]

    trainer = Trainer(model, lr=1e-2, n_epochs=20, device=device, mixed_precision="fp16")
    result = trainer.fit(step, data)
    finite = all(torch.isfinite(p).all().item() for p in model.parameters())
    return {
        "scaler": trainer.accelerator.scaler is not None,
        "first loss": result.loss_curve[0],
        "last loss": result.loss_curve[-1],
        "finite weights": finite,
        "ok": finite and result.loss_curve[-1] < 0.5 * result.loss_curve[0],
    }


def matchxml_stages(args: argparse.Namespace, precision: str) -> list[dict]:
    import skxmc.text._training as training
    from skxmc import MatchXMLClassifier, MultiStageMatcher
    from skxmc.datasets import get_data_dir, load_text_jsonl
    from skxmc.text import bundled_minilm_path

    texts, Y = load_text_jsonl(get_data_dir(required=True) / args.dataset / "train.jsonl.gz")
    texts, Y = list(texts)[: args.max_train], list(Y)[: args.max_train]
    results = []
    fit = training.Trainer.fit

    def recording_fit(self, *a, **kw):
        out = fit(self, *a, **kw)
        results.append((self.accelerator.mixed_precision, out))
        return out

    training.Trainer.fit = recording_fit
    try:
        matcher = MultiStageMatcher(
            encoder=args.encoder or bundled_minilm_path(),
            max_length=args.max_length,
            training=TrainingConfig(
                batch_size=args.batch_size, max_steps=args.steps, mixed_precision=precision
            ),
        )
        MatchXMLClassifier(
            matcher=matcher, sentence_encoder=None, device=args.device, random_state=0
        ).fit(texts, Y)
    finally:
        training.Trainer.fit = fit
    return [
        {
            "stage": i + 1,
            "precision": mp,
            "steps": r.n_steps,
            "seconds": r.history[-1]["seconds"],
            "steps/s": r.n_steps / r.history[-1]["seconds"],
        }
        for i, (mp, r) in enumerate(results)
    ]


def main(argv: list[str] | None = None) -> None:
    from benchmarks._harness import markdown_table, write_results

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="reuters21578_allcats")
    parser.add_argument("--max-train", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=60, help="optimiser steps per stage")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--encoder", default=None)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--name", default="gpu_engine_bf16")
    args = parser.parse_args(argv)
    import torch

    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    fp16 = fp16_check(args.device) if args.device.startswith("cuda") else {"ok": "skipped"}
    rows = []
    for r in range(args.rounds):
        for precision in ["bf16", "no"] if r % 2 == 0 else ["no", "bf16"]:
            t0 = time.perf_counter()
            stages = matchxml_stages(args, precision)
            for s in stages:
                rows.append({"round": r + 1, **s, "fit s": time.perf_counter() - t0})
            print(stages, flush=True)
    summary = []
    for precision in ("bf16", "no"):
        per_stage: dict[int, list[float]] = {}
        for row in rows:
            if row["precision"] == precision:
                per_stage.setdefault(row["stage"], []).append(row["steps/s"])
        for stage, values in sorted(per_stage.items()):
            summary.append(
                {
                    "precision": precision,
                    "stage": stage,
                    "median steps/s": float(np.median(values)),
                    "rounds": len(values),
                }
            )
    command = "python benchmarks/gpu_engine_bf16.py " + " ".join(sys.argv[1:])
    head = (
        f"Command: `{command}`\n\nDevice: {device_name}. MatchXML stages, all-MiniLM-L6-v2, "
        f"{args.steps} steps per stage of batch {args.batch_size}, max_length "
        f"{args.max_length}; median over {args.rounds} alternating rounds.\n\n"
        f"fp16 with loss scaling: {fp16}\n\n"
    )
    table = head + markdown_table(summary, ["precision", "stage", "median steps/s", "rounds"])
    print(table)
    write_results(
        args.name,
        {
            "command": command,
            "device": device_name,
            "fp16_check": fp16,
            "summary": summary,
            "runs": rows,
        },
        table,
    )


if __name__ == "__main__":
    main()
