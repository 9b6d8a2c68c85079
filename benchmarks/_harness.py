"""Measuring and recording, shared by every suite.

- :class:`Clock` measures wall and CPU seconds of a block (CPU: ``time.process_time``,
  every thread of this process);
- :func:`peak_rss_mb` is this process's own high-water mark of resident memory
  (``VmHWM``; never ``ru_maxrss``, which Linux carries over from the parent), and
  :func:`in_child` runs one measurement in a fresh interpreter so that its peak memory
  and its start-up costs are its own;
- :func:`summarise` turns per-seed runs into mean and sample std (ddof=1) with the seed
  count;
- :class:`FinishedFits` keeps the finished fits of a long run (``--checkpoint-dir``), so
  that the same command run again, in a later session, skips them;
- :func:`write_suite` writes ``SUITE.json`` and ``SUITE.md`` with the command, the git
  commit, the machine and the seeds.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CACHE = RESULTS / "cache"
# Library versions recorded with every result (read from the installed metadata: nothing
# is imported, so that recording them costs no memory in the measuring process).
LIBRARIES = (
    "skxmc",
    "numpy",
    "scipy",
    "scikit-learn",
    "numba",
    "torch",
    "transformers",
    "accelerate",
    "dask",
    "libpecos",
)


# ----------------------------------------------------------------------------- measuring


def peak_rss_mb() -> float:
    """This process's own high-water mark of resident memory (``VmHWM``), in MB."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource  # not Linux: the best there is

    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


class Clock:
    """``with Clock() as c: ...`` then ``c.wall_s`` and ``c.cpu_s``."""

    wall_s: float = float("nan")
    cpu_s: float = float("nan")

    def __enter__(self) -> Clock:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._wall
        self.cpu_s = time.process_time() - self._cpu


def in_child(
    target: str,
    timeout: float | None = None,
    env: dict | None = None,
    python: str | None = None,
    **kwargs,
) -> dict:
    """Run ``module:function(**kwargs)`` in a fresh interpreter (``python``, default this
    one: a peer library's own environment); returns its dict with the child's
    ``peak_rss_mb`` and ``process_wall_s`` (interpreter start to exit) added.

    ``kwargs`` must be JSON values, and so must the function's result.
    """
    cmd = [python or sys.executable, "-m", "benchmarks._child", target, json.dumps(kwargs)]
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{target} failed in its child process:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    return result


def fit_complete(estimator: Any, *args: Any, **kwargs: Any) -> Any:
    """``estimator.fit(...)``, raising :class:`KeyboardInterrupt` when the fit stopped early
    on Ctrl-C (``interrupted_``): a benchmark must not record that model as a finished run."""
    model = estimator.fit(*args, **kwargs)
    if getattr(model, "interrupted_", False):
        raise KeyboardInterrupt(f"{type(model).__name__}.fit was interrupted: run not recorded")
    return model


class FinishedFits:
    """The records of the fits a long run has finished, one JSON line per fit in
    ``folder/records.jsonl``, so that the same command run again skips them: a run stopped
    between fits (a session's end, Ctrl-C) loses only the fit in progress.

    ``settings`` (what the records depend on; not the seeds, rows or data sets, which a
    rerun may extend) is kept in ``folder/settings.json`` on first use; a later run with
    other settings is refused rather than mixing the records of two protocols. Without a
    folder nothing is kept.
    """

    def __init__(self, folder: str | Path | None, settings: dict | None = None) -> None:
        self.folder = None if folder is None else Path(folder)
        self.records: dict[str, list[dict]] = {}
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        kept = self.folder / "settings.json"
        if settings is not None:
            settings = json.loads(json.dumps(settings, default=str))
            if kept.exists():
                before = json.loads(kept.read_text())
                changed = sorted(
                    k for k in {*before, *settings} if before.get(k) != settings.get(k)
                )
                if changed:
                    what = ", ".join(
                        f"{k}: {before.get(k)!r} then, {settings.get(k)!r} now" for k in changed
                    )
                    raise SystemExit(
                        f"--checkpoint-dir {self.folder} holds a run with other settings "
                        f"({what}); use another folder or the same settings"
                    )
            else:
                kept.write_text(json.dumps(settings, indent=1, sort_keys=True))
        path = self.folder / "records.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self.records[entry["key"]] = entry["records"]

    def get(self, key: str) -> list[dict] | None:
        """The records of the finished fit ``key``, or ``None``."""
        return self.records.get(key)

    def save(self, key: str, records: list[dict]) -> None:
        """Keep ``key``'s records (appended and flushed at once)."""
        self.records[key] = records
        if self.folder is not None:
            with open(self.folder / "records.jsonl", "a") as fh:
                fh.write(json.dumps({"key": key, "records": records}, default=str) + "\n")


def run_settings(args: Any, extendable: Sequence[str] = ()) -> dict:
    """The command line's settings that a resumed run must share: every option but the
    output folder, the checkpoint folder, the time budget, the seeds and ``extendable``."""
    skip = {"out", "checkpoint_dir", "budget", "seeds", *extendable}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip}


# ----------------------------------------------------------------------------- statistics


def mean_std(values: Iterable[float]) -> tuple[float, float | None, int]:
    """Mean, sample std (ddof=1; ``None`` for one value) and count."""
    v = [float(x) for x in values]
    if not v:
        return float("nan"), None, 0
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else None), len(v)


def summarise(runs: list[dict], keys: Sequence[str], metrics: Sequence[str]) -> list[dict]:
    """One row per distinct ``keys`` value, in first-seen order: every metric's mean as
    ``metric``, its sample std (ddof=1) as ``metric_std`` and the number of seeds as
    ``n_seeds`` (with the seeds themselves in ``seeds``)."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault(tuple(run.get(k) for k in keys), []).append(run)
    rows = []
    for key, members in groups.items():
        row: dict[str, Any] = dict(zip(keys, key))
        for m in metrics:
            values = [r[m] for r in members if isinstance(r.get(m), (int, float))]
            if values:
                row[m], row[f"{m}_std"], _ = mean_std(values)
        row["n_seeds"] = len(members)
        row["seeds"] = sorted({r.get("seed") for r in members if r.get("seed") is not None})
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- context


def benchmark_modules(prefix: str) -> list[Any]:
    """The modules of the ``benchmarks`` package whose names start with ``prefix``, by
    name: the declarations of each docs page (their own module each) found, not listed."""
    import importlib
    import pkgutil

    import benchmarks

    names = sorted(i.name for i in pkgutil.iter_modules(benchmarks.__path__))
    return [importlib.import_module(f"benchmarks.{n}") for n in names if n.startswith(prefix)]


def git_commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        except OSError:
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "skxmc"))
    return {"commit": commit or "unknown", "skxmc_dirty": dirty}


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model, load and library versions of this machine."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
    }
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["ram_gb"] = round(int(line.split()[1]) / 1024**2, 1)
    if hasattr(os, "getloadavg"):
        info["load_avg_1m"] = round(os.getloadavg()[0], 2)
    if hasattr(os, "sched_getscheduler"):
        # A run under real-time priority (chrt -f N) keeps niced background work off its
        # cores, so its times are those of a quiet machine even when the load is not 0.
        policy = os.sched_getscheduler(0)
        info["scheduler"] = {os.SCHED_FIFO: "fifo", os.SCHED_RR: "rr"}.get(policy, "normal")
        info["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    info["versions"] = versions
    return info


def command_line(argv: Sequence[str] | None = None) -> str:
    argv = sys.argv[1:] if argv is None else argv
    return "python -m benchmarks " + shlex.join(argv)


# ----------------------------------------------------------------------------- writing


def fmt(value: Any, std: Any = None, digits: int = 2) -> str:
    """A cell: floats with ``digits`` decimals, ``mean ± std`` when a std is given."""
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
        if isinstance(std, float):
            text += f" ± {std:.{digits}f}"
        return text
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return "" if value is None else str(value)


def cells(row: dict, columns: Sequence[str], digits: dict[str, int] | None = None) -> list[str]:
    digits = digits or {}
    return [fmt(row.get(c), row.get(f"{c}_std"), digits.get(c, 2)) for c in columns]


# The scale of the ranking metrics in every table: percent, PSP and PSnDCG normalised by
# the best achievable ranking (``evaluate(..., normalize=True)``), as ``skxmc demo`` and
# ``skxmc evaluate`` print them. The harness marks the files it writes with
# ``"psp": "normalised"``; files without the mark (written before issue 50 item 6) hold
# un-normalised PSP (sums of inverse propensities), and their tables say so.
PSP_SCALE = "normalised"
_METRIC = re.compile(r"^(P|R|nDCG|PSP|PSnDCG)@\d+$")


def psp_scale(result: dict) -> str:
    """``"normalised"`` or ``"un-normalised"``: the PSP scale of a results file."""
    return str(result.get("psp", "un-normalised"))


def header_columns(result: dict, columns: Sequence[str]) -> list[str]:
    """Column headers that name the PSP scale: ``PSP@5 (normalised)``."""
    scale = psp_scale(result)
    return [f"{c} ({scale})" if str(c).startswith(("PSP", "PSnDCG")) else c for c in columns]


def table_heading(result: dict, table: dict) -> str:
    """A table's title with the scale of its ranking metrics: ``(metrics in percent;
    PSP normalised)``; unchanged for a table without P@k, R@k, nDCG@k or PSP@k."""
    columns = [str(c) for c in table["columns"]]
    if any(c.startswith(("PSP", "PSnDCG")) for c in columns):
        return f"{table['title']} (metrics in percent; PSP {psp_scale(result)})"
    if any(_METRIC.match(c) for c in columns):
        return f"{table['title']} (metrics in percent)"
    return str(table["title"])


def markdown_table(
    rows: list[dict],
    columns: Sequence[str],
    digits: dict | None = None,
    headers: Sequence[str] | None = None,
) -> str:
    headers = list(columns) if headers is None else list(headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cells(r, columns, digits)) + " |" for r in rows]
    return "\n".join(lines)


def _priority(m: dict) -> str:
    """How the run was scheduled, when not the default (older results do not say)."""
    if m.get("scheduler") in ("fifo", "rr"):
        return f", real-time priority ({m['scheduler']}): background work kept off its cores"
    return f", nice {m['nice']}" if m.get("nice") else ""


def render_markdown(result: dict) -> str:
    """``SUITE.md``: what ran, where, then the tables."""
    m = result["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items())
    lines = [
        f"# {result['suite']}" + (" (--quick)" if result.get("quick") else ""),
        "",
        f"Command: `{result['command']}`  ",
        f"Commit: {result['commit']}"
        + (" (skxmc/ had uncommitted changes)" if result.get("skxmc_dirty") else "")
        + "  ",
        f"Date: {result['date']}  ",
        f"Machine: {m.get('cores')} cores ({m.get('cores_usable')} usable), "
        f"{m.get('ram_gb')} GB RAM, {m.get('cpu')}, load {m.get('load_avg_1m')}"
        + _priority(m)
        + "  ",
        f"Versions: {versions}  ",
        f"Seeds: {' '.join(map(str, result.get('seeds', []))) or 'none'}"
        " (mean ± sample std, ddof=1, over the seeds; n_seeds per row)",
    ]
    if result.get("note"):
        lines += ["", result["note"]]
    for table in result["tables"]:
        lines += ["", f"## {table_heading(result, table)}", ""]
        if table.get("caption"):
            lines += [table["caption"], ""]
        headers = header_columns(result, table["columns"])
        lines.append(markdown_table(table["rows"], table["columns"], table.get("digits"), headers))
    return "\n".join(lines) + "\n"


def write_suite(result: dict, out_dir: Path) -> Path:
    """Write ``out_dir/SUITE.json`` and ``SUITE.md``; returns the JSON path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{result['suite']}.json"
    path.write_text(json.dumps(result, indent=1, default=_jsonable) + "\n")
    (out_dir / f"{result['suite']}.md").write_text(render_markdown(result))
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_results(name: str, payload: dict, table: str, out_dir: Path = RESULTS) -> Path:
    """``out_dir/<name>.json`` and ``.md`` in the format of the scripts before the harness
    (the GPU kit, ``gpu_engine_bf16.py``, still writes it); returns the JSON path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S"), **payload}
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=_jsonable))
    (out_dir / f"{name}.md").write_text(table + "\n")
    return path
