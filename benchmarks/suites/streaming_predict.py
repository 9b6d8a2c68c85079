"""Peak memory of ``skxmc predict`` over 100k against 1M lines: flat.

The model is ``skxmc fit`` (TF-IDF + XR-Linear, the defaults) on the demo set's training
records. The input files repeat the demo set's test texts, each line numbered so that no
two are the same, up to ``n`` lines of JSON (``{"text": ...}``), written once into the
results cache. Each measurement is a fresh interpreter running ``skxmc predict --input
FILE --output FILE`` (``skxmc.cli.main``) and reports its peak RSS (``VmHWM``) and
seconds: ``predict`` reads its input in batches of 10,000 lines and writes each batch's
predictions before it reads the next, so the peak should not grow with the input.

Target (issue 51 item 5): the peak at 1M lines that at 100k lines (ratio about 1).
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks._data import CACHE
from benchmarks._harness import in_child, summarise

SEEDS = (0,)
SIZES = (100_000, 1_000_000)
METRICS = ("peak_rss_mb", "predict_s", "lines_per_s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))


def _model() -> str:
    """``skxmc fit`` on the demo training records (once; cached)."""
    from skxmc.cli import main
    from skxmc.datasets import load_demo

    folder = CACHE / "streaming-predict"
    model = folder / "model"
    if (model / "README.md").is_file():
        return str(model)
    folder.mkdir(parents=True, exist_ok=True)
    demo = load_demo()
    train = folder / "train.jsonl"
    with open(train, "w", encoding="utf-8") as fh:
        for text, labels in zip(demo.train_texts, demo.train_labels):
            fh.write(json.dumps({"text": text, "labels": list(labels)}) + "\n")
    main(["fit", "--train", str(train), "--model-dir", str(model), "--overwrite"])
    return str(model)


def _input(n: int) -> str:
    from skxmc.datasets import load_demo

    path = CACHE / "streaming-predict" / f"input-{n}.jsonl"
    if path.is_file():
        return str(path)
    texts = load_demo().test_texts
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"text": f"{texts[i % len(texts)]} {i}"}) + "\n")
    tmp.replace(path)
    return str(path)


def measure(model: str, input: str, output: str) -> dict:
    """In a fresh interpreter: ``skxmc predict`` of one file into another."""
    from skxmc.cli import main

    start = time.perf_counter()
    code = main(["predict", "--model-dir", model, "--input", input, "--output", output])
    seconds = time.perf_counter() - start
    with open(output, "rb") as fh:
        lines = sum(1 for _ in fh)
    return {"exit_code": code, "predict_s": seconds, "lines": lines}


def run(args: argparse.Namespace) -> dict:
    sizes = [2_000, 20_000] if args.quick else args.sizes
    model = _model()
    runs = []
    for seed in args.seeds:
        for n in sizes:
            output = CACHE / "streaming-predict" / f"output-{n}.jsonl"
            r = in_child(
                "benchmarks.suites.streaming_predict:measure",
                model=model,
                input=_input(n),
                output=str(output),
            )
            output.unlink(missing_ok=True)
            if r["lines"] != n:
                raise RuntimeError(f"skxmc predict wrote {r['lines']} lines for {n} inputs")
            r.update(seed=seed, n_lines=n, lines_per_s=n / r["predict_s"])
            runs.append(r)
            print(f"{n} lines: peak {r['peak_rss_mb']:.0f} MB, {r['predict_s']:.1f} s", flush=True)
    rows = summarise(runs, ["n_lines"], METRICS)
    peaks = {r["n_lines"]: r["peak_rss_mb"] for r in rows}
    small, large = min(sizes), max(sizes)
    return {
        "config": {
            "model": "skxmc fit --train demo train records (TF-IDF + XR-Linear defaults)",
            "input": "the demo test texts repeated, each line numbered; JSON lines",
        },
        "tables": [
            {
                "title": "Peak memory of skxmc predict over a growing input",
                "caption": "One fresh interpreter per row (skxmc.cli.main predict, file to "
                "file); peak RSS (VmHWM) in MB, seconds and lines per second. Measured on a "
                "shared machine: compare the rows of one run.",
                "columns": ["n_lines", *METRICS, "n_seeds"],
                "rows": rows,
                "digits": {"peak_rss_mb": 0, "predict_s": 1, "lines_per_s": 0},
            },
            {
                "title": "Growth of the peak memory",
                "caption": "Peak RSS at the larger input over that at the smaller.",
                "columns": ["lines", "peak_rss_ratio"],
                "rows": [
                    {"lines": f"{large} vs {small}", "peak_rss_ratio": peaks[large] / peaks[small]}
                ],
                "digits": {"peak_rss_ratio": 3},
            },
        ],
        "runs": runs,
    }
