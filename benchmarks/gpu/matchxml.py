"""MatchXML on one GPU in 10 minutes: lambda chosen on tibkat_gnd_en's official dev split,
then the rows 1-4 of the paper's Table XII and the same without the bootstrap.

Paper (Eurlex-4K, its set nearest in size to the packed subset; Tables II-IV): BERT,
three stages of 480, 620 and 600 steps of batch 128, 128 tokens, lr 5e-5 for the encoder
and 1e-3 for the label table, temperature 0.05, weight decay 0.1, lambda tuned per set
(1.0, 0, 1.0, 0.67, 0.5, 0.9 on the six sets), label2vec trees, Sentence-T5 static
embeddings, XR-Linear ranker (eq. 7). Here, through the ``matchxml`` suite's
``make_estimator`` with MatchXML's default ranker (eq. 7, on the machine's cores) and
batch 128, 128 tokens, at most 600 steps per stage (the engine applies one cap to every
stage), every layer fine-tuned, with these reductions:

- data: a seeded subset of tibkat_gnd_en, 15,000 training texts (Eurlex-4K has 15,449),
  2,000 of the official dev split and 3,000 of the test split, so that the texts, the
  encoder and gensim travel in one 64 MiB call;
- encoder: all-MiniLM-L6-v2 (mean pooling) for both the fine-tuned and the static block
  (the paper: BERT and Sentence-T5), its weights carried as float16;
- time: each stage also stops at a time cap (``max_time``) set from the budget, so a fit
  may run fewer than 600 steps; the results give each stage's steps;
- lambda: chosen from (0, 0.5, 1) on dev by P@1, one seed.

Fits run in child processes, several at once (one fit leaves an H200 mostly idle):
phase 1 the lambda grid (full MatchXML, Table XII row 4), rows 1 and 2 (hinge: no
lambda) and TF-IDF + XR-Linear; phase 2 row 3 and row 4 without the bootstrap
(``label_bootstrap="centroid"``) at the chosen lambda. Each child is killed at its
phase's deadline; a killed fit is listed as not run. Test figures of row 4 are those of
the dev-chosen lambda's fit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._harness import ROOT, fit_complete, summarise
from benchmarks.gpu._kit import GPU, Budget, Recorder

__all__ = ["ENCODER", "GENSIM", "PACK", "PACK_TINY", "SEEDS", "fit_one", "run"]

SEEDS = (0,)
ENCODER, GENSIM = True, True
DATASET = "tibkat_gnd_en"
PACK = {DATASET: {"train": 15000, "dev": 2000, "test": 3000}}
PACK_TINY = {DATASET: {"train": 200, "dev": 60, "test": 60}}
LAMBDAS, LAMBDAS_TINY = (0.0, 0.5, 1.0), (0.5, 1.0)
STEPS, BATCH, MAX_LENGTH = 600, 128, 128
BASELINE = "TF-IDF + XR-Linear"
FULL = "4: label2vec + matching + sentence (MatchXML)"
ROWS: dict[str, dict[str, Any]] = {
    # Table XII: l2v (label2vec tree, else PIFA of TF-IDF), tlm (matching loss, else the
    # squared hinge), sen (static sentence embeddings)
    "1: PIFA tree + hinge": {
        "matcher__label_embedding": "pifa",
        "matcher__final_loss": "hinge",
        "sentence_encoder": None,
    },
    "2: label2vec + hinge": {"matcher__final_loss": "hinge", "sentence_encoder": None},
    "3: label2vec + matching": {"sentence_encoder": None},
    FULL: {},
    "4 without bootstrap": {"matcher__label_bootstrap": "centroid"},
}
METRICS = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@5", "fit_s", "predict_s")
# Seconds of a fit besides the stages' training (features, label2vec, tree, bootstraps,
# encoding, the ranker on its share of the cores, dev and test predictions) when six
# (phase 1) and two (phase 2) fits share a GPU and 16 cores: the stage caps leave this.
# An estimate (the 2026-12-04 H200 log: ranker 46 s on 16 threads for 41k texts,
# bootstrap minutes on one core); ``--stage-seconds`` sets the caps instead.
OVERHEAD_S = (180.0, 120.0)


def fit_one(
    encoder: str,
    seed: int,
    row: str,
    params: dict[str, Any],
    steps: int,
    batch_size: int,
    max_length: int,
    threads: int,
    device: str,
) -> dict[str, Any]:
    """One fit (in a child process): scores on the dev and test splits."""
    from benchmarks import _data
    from benchmarks.suites import matchxml as suite

    parts = _data.text_parts(DATASET, ("train", "dev", "test"))
    (X, y), (X_dev, y_dev), (X_test, y_test) = parts["train"], parts["dev"], parts["test"]
    settings = argparse.Namespace(
        steps=steps,
        batch_size=batch_size,
        max_length=max_length,
        threads=threads,
        device=device,
        quick=False,
    )
    if row == BASELINE:
        clf = suite.TfidfRanker(suite.make_ranker(seed, threads))
    else:
        clf = suite.make_estimator(encoder, settings, seed, "MatchXML")
        clf.set_params(ranker=None)  # MatchXML's own ranker (eq. 7), not the suite's
        clf.set_params(ranker__n_jobs=threads, verbose=1, **params)
    start = time.perf_counter()
    fit_complete(clf, X, y)
    out: dict[str, Any] = {"fit_s": time.perf_counter() - start, "n_train": len(X)}
    for split, (Xs, ys) in (("dev", (X_dev, y_dev)), ("test", (X_test, y_test))):
        out[split] = suite._score(clf, Xs, ys, y)
    matcher = getattr(clf, "matcher_", None)
    if matcher is not None:
        out["stage_sizes"] = [int(n) for n in matcher.stage_sizes_]
        out["stage_steps"] = [len(c) for c in matcher.stage_loss_curves_]
        out["fit_times"] = {k: round(float(v), 1) for k, v in clf.fit_times_.items()}
    return out


def _child(job: dict, timeout: float, logs: Path, summary: Path) -> dict | None:
    """``fit_one(**job)`` in a fresh interpreter, its log in ``logs`` and the log's tail
    appended to ``summary``; None when it failed or ran past ``timeout`` (then killed)."""
    name = f"s{job['seed']}-{job['row'].split(':')[0].replace(' ', '_')}"
    if "matcher__matching_weight" in job["params"]:
        name += f"-lambda{job['params']['matcher__matching_weight']}"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "benchmarks._child", f"{__name__}:fit_one", json.dumps(job)]
    with open(logs / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            stdout, _ = proc.communicate(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            print(f"{name}: killed at its phase's deadline", flush=True)
            stdout = None
    # One file of every child's log tail: a device call returns few files.
    summary.parent.mkdir(parents=True, exist_ok=True)
    with open(summary, "a") as out:
        lines = (logs / f"{name}.log").read_text(errors="replace").splitlines()
        out.write(f"\n### {name} (rc {proc.returncode})\n" + "\n".join(lines[-150:]) + "\n")
    if stdout is None:
        return None
    if proc.returncode != 0:
        print(f"{name}: failed (rc {proc.returncode}), see gpu-matchxml-logs.txt", flush=True)
        return None
    return json.loads(stdout.strip().splitlines()[-1])


def _phase(jobs: list[dict], seconds: float, workers: int, logs: Path, rec: Recorder) -> list:
    """Run ``jobs`` at most ``workers`` at once, each killed ``seconds`` from now."""
    deadline = time.monotonic() + seconds
    results: list[dict | None] = [None] * len(jobs)
    lock = threading.Lock()

    def one(i: int) -> None:
        summary = rec.out / "gpu-matchxml-logs.txt"
        results[i] = _child(jobs[i], deadline - time.monotonic(), logs, summary)
        if results[i] is not None:
            with lock:  # one writer of the results file at a time
                _record(jobs[i], results[i], rec)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, range(len(jobs))))
    for job, result in zip(jobs, results):
        if result is None:
            lam = job["params"].get("matcher__matching_weight")
            rec.skip(f"{job['row']}" + (f" (lambda {lam})" if lam is not None else "")
                     + f" / seed {job['seed']}: did not finish in its phase")  # fmt: skip
    return results


def _record(job: dict, result: dict, rec: Recorder) -> None:
    lam = job["params"].get("matcher__matching_weight")
    extra = {k: result[k] for k in ("stage_sizes", "stage_steps", "fit_times") if k in result}
    for split in ("dev", "test"):
        record = {"dataset": DATASET, "row": job["row"], "lambda": lam, "seed": job["seed"]}
        record.update({"split": split, "fit_s": result["fit_s"], "n_train": result["n_train"]})
        record.update(result[split])
        rec.add({**record, **extra})
    dev, test = result["dev"]["P@1"], result["test"]["P@1"]
    print(f"{job['row']} (lambda {lam}), seed {job['seed']}: dev P@1 {dev:.2f}, test P@1 "
          f"{test:.2f}, fit {result['fit_s']:.0f} s, steps {result.get('stage_steps')}",
          flush=True)  # fmt: skip
    _tables(rec)
    rec.write()


def _chosen(rec: Recorder, seed: int) -> float | None:
    """The lambda whose full MatchXML fit has the best dev P@1 (seed ``seed``)."""
    dev = [r for r in rec.runs if r["row"] == FULL and r["split"] == "dev" and r["seed"] == seed]
    return max(dev, key=lambda r: (r["P@1"], r["nDCG@5"]))["lambda"] if dev else None


def _tables(rec: Recorder) -> None:
    grid = [r for r in rec.runs if r["row"] == FULL and r["split"] == "dev"]
    chosen = {s: _chosen(rec, s) for s in {r["seed"] for r in rec.runs}}
    rec.config["chosen_lambda"] = {str(s): lam for s, lam in chosen.items()}
    test = [
        r
        for r in rec.runs
        if r["split"] == "test" and (r["row"] != FULL or r["lambda"] == chosen[r["seed"]])
    ]
    columns = ["dataset", "row", "lambda", *METRICS, "n_seeds"]
    rec.tables = [
        {
            "title": "Choosing lambda on the dev split",
            "caption": "MatchXML (Table XII row 4) per lambda of eq. 6; x100 on the official "
            "dev split of the packed subset; fit and predict seconds.",
            "columns": columns,
            "rows": summarise(grid, ["dataset", "row", "lambda"], METRICS),
        },
        {
            "title": "Table XII rows 1-4, without the bootstrap, and TF-IDF + XR-Linear",
            "caption": "x100 on the test split of the packed subset, at the dev-chosen lambda "
            "(rows 1-2 use the hinge: no lambda); fit and predict seconds.",
            "columns": columns,
            "rows": summarise(test, ["dataset", "row", "lambda"], METRICS),
        },
    ]


def _job(args: argparse.Namespace, base: dict, row: str, lam: float | None, stage_s: float,
         n: int) -> dict:  # fmt: skip
    """``fit_one``'s arguments for one row; ``n`` fits share the machine's threads."""
    params = dict(ROWS.get(row, {}))
    if lam is not None:
        params["matcher__matching_weight"] = lam
    if not args.tiny:
        stage_s = args.stage_seconds or stage_s
        params["matcher__training__max_time"] = max(5.0, stage_s)
    return {**base, "row": row, "params": params, "threads": max(1, args.threads // n)}


def run(args: argparse.Namespace, budget: Budget, rec: Recorder) -> None:
    if args.tiny:
        from benchmarks import _data
        from benchmarks.gpu._textfit import encoder as _encoder

        X = _data.text_parts(DATASET, ("train",))["train"][0]
        encoder, rec.config["encoder"] = _encoder(args, X)
        steps, batch, max_length = 3, 16, 32
    else:
        encoder = str(args.encoder_dir)
        rec.config["encoder"] = "all-MiniLM-L6-v2 (float16 weights, loaded as float32)"
        steps, batch, max_length = STEPS, BATCH, MAX_LENGTH
    lambdas = LAMBDAS_TINY if args.tiny else LAMBDAS
    workers = args.workers or (2 if args.tiny else 6)
    logs = Path(args.pack or GPU / "matchxml.zip").parent / "matchxml-logs"  # not in $OUT
    (rec.out / "gpu-matchxml-logs.txt").unlink(missing_ok=True)
    rec.config.update(
        {"steps_per_stage": steps, "batch_size": batch, "max_length": max_length}
        | {"lambdas": list(lambdas), "workers": workers, "pack": PACK_TINY if args.tiny else PACK}
        | {"overhead_s": OVERHEAD_S, "stage_seconds": args.stage_seconds}
    )
    for i, seed in enumerate(args.seeds):
        share = budget.left() / (len(args.seeds) - i)
        phase1 = 0.58 * share - 5
        base = {"encoder": encoder, "seed": seed, "steps": steps, "batch_size": batch}
        base |= {"max_length": max_length, "device": args.device}
        n1 = min(len(lambdas) + 3, workers)
        stage1 = (phase1 - OVERHEAD_S[0]) / 3
        jobs = [_job(args, base, FULL, lam, stage1, n1) for lam in lambdas]
        jobs += [_job(args, base, r, None, stage1, n1) for r in list(ROWS)[:2]]
        jobs.append(_job(args, base, BASELINE, None, stage1, n1))
        print(f"seed {seed} phase 1: {len(jobs)} fits, {phase1:.0f} s, stages capped at "
              f"{jobs[0]['params'].get('matcher__training__max_time')} s", flush=True)  # fmt: skip
        _phase(jobs, phase1, workers, logs, rec)
        lam = _chosen(rec, seed)
        if lam is None:
            rec.skip(f"seed {seed} phase 2: no lambda fit finished")
            continue
        phase2 = min(share - phase1 - 10, budget.left() - 5)
        stage2 = (phase2 - OVERHEAD_S[1]) / 3
        rows = ("3: label2vec + matching", "4 without bootstrap")
        jobs = [_job(args, base, r, lam, stage2, min(2, workers)) for r in rows]
        print(f"seed {seed} phase 2 (lambda {lam}): {len(jobs)} fits, {phase2:.0f} s", flush=True)
        _phase(jobs, phase2, workers, logs, rec)
    _tables(rec)
