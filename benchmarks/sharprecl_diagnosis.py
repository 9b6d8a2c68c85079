"""Why SharpReCL trails logit-adjusted CE on cr_ir50: small diagnostic runs.

Two modes, one process per call, one CPU thread, MiniLM (mean pooling), the settings of
the ``sharprecl_ir50`` benchmark (length 32, batch 32, 2 epochs, rates 5e-5 / 1e-3):

``fit VARIANT SEED [DATASET] [DEV_FRACTION]``
    Trains one variant and prints a JSON line: macro-F1, accuracy and the predicted class
    counts, on the dev split (a stratified ``DEV_FRACTION`` of the training texts, seeded
    by ``SEED``) when given, else on the test split. ``VARIANT`` joins parts with ``+``:
    ``la`` (logit-adjusted CE alone), ``s1`` (SharpReCL, one view), ``nobn`` (the
    prototype head without BatchNorm, patched in after the model is built), or
    ``p:NAME=JSON`` (any ``SharpReCLClassifier`` parameter).

``gradients VARIANT [DATASET]``
    The first optimiser steps of SharpReCL (one view, seed 0): the loss terms and the
    norms of their gradients with respect to the encoder and to the classifier weights.
    ``VARIANT`` is ``bn`` or ``nobn``.

``collect NAME SPLIT FILE...``
    Gathers the JSON lines that ``fit`` printed (saved stdout files) into
    ``results/NAME.{json,md}``, one row per run, with the command of each; ``SPLIT``
    (``dev``, i.e. a dev fraction of 0.25, or ``test``) names the split of lines that
    do not say it.

Example::

    python benchmarks/sharprecl_diagnosis.py fit s1+nobn 0 cr_ir50 0.25
    python benchmarks/sharprecl_diagnosis.py gradients bn cr_ir50
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.metrics import accuracy_score, f1_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import encoder_path, markdown_table, write_results
from sharprecl import load

import skxmc.sharprecl as mod
from skxmc.sharprecl import SharpReCLClassifier

BASE = dict(
    pooling="mean",
    max_length=32,
    batch_size=32,
    max_epochs=2,
    learning_rate=5e-5,
    head_learning_rate=1e-3,
    augmentation="synonym",
    # the defaults when these runs were made; the diagnosis is of these settings
    contrastive_weight=1.0,
    n_views=2,
)
VARIANTS: dict[str, dict[str, Any]] = {
    "la": dict(contrastive_weight=0.0, augmentation=None),
    "s2": {},
    "s1": dict(n_views=1, augmentation=None),
}


def patch_no_prototype_bn() -> None:
    """Replace the prototype head by Linear-ReLU-Linear after the model is built."""
    original = mod._SharpReCLModule.__init__

    def init(self, encoder, pooling, n_classes, projection_dim, *args):
        original(self, encoder, pooling, n_classes, projection_dim, *args)
        h = self.hidden_size
        self.prototype_head = torch.nn.Sequential(
            torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, projection_dim)
        )

    mod._SharpReCLModule.__init__ = init


def fit(variant: str, seed: int, dataset: str, dev: float | None) -> None:
    params: dict[str, Any] = dict(BASE, encoder=encoder_path(None), random_state=seed)
    for part in variant.split("+"):
        if part in VARIANTS:
            params.update(VARIANTS[part])
        elif part.startswith("p:"):
            key, value = part[2:].split("=")
            params[key] = json.loads(value)
        elif part == "nobn":
            patch_no_prototype_bn()
        else:
            raise SystemExit(f"unknown variant part {part!r}")
    data = load(dataset, None, None, seed, dev)
    X_eval, y_eval = (data["X_dev"], data["y_dev"]) if dev else (data["X_test"], data["y_test"])
    clf = SharpReCLClassifier(**SharpReCLClassifier._upgrade_params(params))
    start = time.perf_counter()
    clf.fit(data["X"], data["y"])
    seconds = time.perf_counter() - start
    pred = clf.predict(X_eval)
    labels, counts = np.unique(pred, return_counts=True)
    true_labels, true_counts = np.unique(y_eval, return_counts=True)
    print(
        json.dumps(
            {
                "variant": variant,
                "seed": seed,
                "dataset": dataset,
                "split": "dev" if dev else "test",
                "f1": round(100 * f1_score(y_eval, pred, average="macro"), 2),
                "acc": round(100 * accuracy_score(y_eval, pred), 2),
                "pred": dict(zip(map(str, labels), map(int, counts))),
                "true": dict(zip(map(str, true_labels), map(int, true_counts))),
                "sec": round(seconds),
            }
        ),
        flush=True,
    )


def gradients(variant: str, dataset: str) -> None:
    if variant == "nobn":
        patch_no_prototype_bn()
    captured = {}
    original_ce = mod.logit_adjusted_cross_entropy

    def ce_spy(*args, **kwargs):
        captured["ce"] = original_ce(*args, **kwargs)
        return captured["ce"]

    mod.logit_adjusted_cross_entropy = ce_spy
    original_step = SharpReCLClassifier._step

    def norm(grads):
        return float(torch.sqrt(sum((g.float() ** 2).sum() for g in grads)))

    def step(self, batch):
        out = original_step(self, batch)
        encoder = [p for p in self.module_.encoder.parameters() if p.requires_grad]
        weight = self.module_.classifier.weight
        ce = captured["ce"]
        cl = out["loss"] - ce
        terms = {}
        for name, loss in (("CE", ce), ("CL", cl)):
            grads = torch.autograd.grad(
                loss, [*encoder, weight], retain_graph=True, allow_unused=True
            )
            grads = [
                torch.zeros_like(p) if g is None else g for g, p in zip(grads, [*encoder, weight])
            ]
            terms[name] = (float(loss.detach()), norm(grads[:-1]), norm(grads[-1:]))
        print(
            f"{dataset} {variant} step {self._trainer.state.step}: "
            + " | ".join(
                f"{k} loss {v[0]:.4f}, |grad encoder| {v[1]:.4f}, |grad w| {v[2]:.4f}"
                for k, v in terms.items()
            ),
            flush=True,
        )
        return out

    SharpReCLClassifier._step = step
    data = load(dataset, None, None, 0)
    params = dict(BASE, encoder=encoder_path(None), random_state=0, max_steps=4)
    params.update(VARIANTS["s1"])
    SharpReCLClassifier(**SharpReCLClassifier._upgrade_params(params)).fit(data["X"], data["y"])


def collect(name: str, split: str, files: list[str]) -> None:
    runs = []
    for path in files:
        for line in Path(path).read_text().splitlines():
            if line.startswith("{"):
                run = json.loads(line)
                run.setdefault("split", split)
                dev = f" {0.25 if run['split'] == 'dev' else ''}".rstrip()
                run["command"] = (
                    "python benchmarks/sharprecl_diagnosis.py fit "
                    f"'{run['variant']}' {run['seed']} {run['dataset']}{dev}"
                )
                runs.append(run)
    columns = ["variant", "seed", "dataset", "split", "f1", "acc", "pred", "true", "command"]
    rows = [{**r, "pred": json.dumps(r["pred"]), "true": json.dumps(r["true"])} for r in runs]
    text = (
        "One process per run, `--threads 1`-equivalent (one torch thread), on a two-core "
        "machine shared with other jobs; f1 = macro-F1, acc = accuracy (x100).\n\n"
        + markdown_table(rows, columns)
    )
    write_results(name, {"runs": runs}, text)
    print(text)


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    if argv and argv[0] == "fit":
        dev = float(argv[4]) if len(argv) > 4 else None
        fit(argv[1], int(argv[2]), argv[3] if len(argv) > 3 else "cr_ir50", dev)
    elif argv and argv[0] == "collect":
        collect(argv[1], argv[2], argv[3:])
    elif argv and argv[0] == "gradients":
        gradients(argv[1], argv[2] if len(argv) > 2 else "cr_ir50")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
