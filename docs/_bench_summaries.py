"""The summary at the top of every benchmark page: a table and a plot, from results files.

``write(results, out)`` reads the results JSON named in :data:`PAGES` and writes
``docs/_generated/summary-<page>.inc`` for each page of ``docs/benchmarks/``: a table of
one row per (data set, method) with the accuracy measure and the training time (mean,
sample std where the file has several seeds or runs), then a ``.. plot::`` directive that
draws accuracy against training time, one panel per data set, one marker per method (the
data are written into the include, so the docs build reads no results file). It runs
with ``python -m benchmarks tables`` (:mod:`benchmarks._docs`); tests/test_docs.py checks
that the includes are current and that every benchmark page shows its summary before its
first section.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["PAGES", "plot", "summary", "write"]

Point = dict[str, Any]


def _pm(value: Any) -> tuple[float | None, float | None]:
    """``(mean, std)`` of a number or of a ``"12.34 ± 0.56"`` string."""
    if value is None or value == "":
        return None, None
    if isinstance(value, (int, float)):
        return float(value), None
    match = re.match(r"\s*(-?[\d.]+)\s*(?:±\s*([\d.]+))?", str(value))
    if not match:
        return None, None
    return float(match.group(1)), (float(match.group(2)) if match.group(2) else None)


def _std(values: list[float] | None) -> float | None:
    return statistics.stdev(values) if values and len(values) > 1 else None


def _xmc_linear(d: dict) -> list[Point]:
    names = {"skxmc-man": "skxmc (tfn+man)", "libpecos": "PECOS XR-Linear"}
    return [
        {
            "dataset": r["dataset"],
            "method": names.get(r["library"], r["library"]),
            "acc": r["precision@1"],
            "time": r["train_s"],
            "time_std": _std(r.get("train_s_all")),
            "n": r.get("n_runs"),
        }
        for r in d["rows"]
        if r.get("status") == "ok"
    ]


def _suite_table(title: str, acc: str, time: str, method: str = "method") -> Callable:
    def adapter(d: dict) -> list[Point]:
        table = next(t for t in d["tables"] if t["title"] == title)
        return [
            {
                "dataset": r["dataset"],
                "method": r[method],
                "acc": r[acc],
                "acc_std": r.get(f"{acc}_std"),
                "time": r[time],
                "time_std": r.get(f"{time}_std"),
                "n": r.get("n_seeds"),
            }
            for r in table["rows"]
        ]

    return adapter


def _summary_pm(acc: str, time: str) -> Callable:
    def adapter(d: dict) -> list[Point]:
        points = []
        for r in d["summary"]:
            mean, std = _pm(r.get(acc))
            if mean is None or r.get(time) is None:
                continue
            name = r["dataset"] if "setting" not in r else f"{r['dataset']} {r['setting']}"
            points.append(
                {"dataset": name, "method": r["row"], "acc": mean, "acc_std": std, "time": r[time]}
            )
        return points

    return adapter


def _snm(d: dict) -> list[Point]:
    points = []
    for r in d["rows"]:
        method = r["method"] + (f" k={r['k']}" if r.get("k") not in ("", None) else "")
        points.append(
            {"dataset": r["dataset"], "method": method, "acc": r["precision@1"], "time": r["fit_s"]}
        )
    return points


def _find(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for value in obj.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def _scale(d: dict) -> list[Point]:
    points = []
    for size in d["sizes"]:
        for name, lib in size["libraries"].items():
            p1 = _find(lib, "precision@1")
            if lib.get("status") != "ok" or p1 is None:
                continue
            points.append(
                {
                    "dataset": f"{size['n_labels']:,} labels",
                    "method": name,
                    "acc": p1,
                    "time": lib["train_s"],
                    "n": 1,
                }
            )
    return points


def _knn_search(d: dict) -> list[Point]:
    rows = d["tables"][0]["rows"]
    return [
        {
            "dataset": "384-d vectors, k = 10",
            "method": f"approximate, {r['vectors']} vectors",
            "acc": 100 * r["recall@10"],
            "time": r["approx ms/query"],
        }
        for r in rows
    ]


def _engine(d: dict) -> list[Point]:
    d_rows = d["rows"]
    return [
        {
            "dataset": "TREC, one epoch, 256 texts",
            "method": r["configuration"],
            "acc": r.get("accuracy"),
            "time": r["median s/epoch"],
            "n": len(str(r.get("runs", "")).split(",")),
        }
        for r in d_rows
    ]


def _which_estimator(d: dict) -> list[Point]:
    # the GPU profile reruns rows that CPU runs also have: its times are another machine's
    device = d.get("config", {}).get("device") or "cpu"
    tag = "" if device == "cpu" else f" ({device})"
    points = []
    for table in d["tables"]:
        acc = "macro_f1" if "macro_f1" in table["columns"] else "P@1"
        label = {"macro_f1": "macro-F1"}.get(acc, acc)
        for r in table["rows"]:
            points.append(
                {
                    "dataset": f"{r['dataset']} ({label})",
                    "method": r["method"] + tag,
                    "acc": r[acc],
                    "acc_std": r.get(f"{acc}_std"),
                    "time": r["fit_s"],
                    "time_std": r.get("fit_s_std"),
                    "n": r.get("n_seeds"),
                }
            )
    return points


# page -> (results files under benchmarks/results, adapter, accuracy label, time label,
# note); a page whose suite ran in parts names every part's file, the first one required
PAGES: dict[str, tuple[tuple[str, ...], Callable, str, str, str]] = {
    # docs/which_estimator.rst (the others are the pages of docs/benchmarks/)
    "which_estimator": (
        (
            "which-estimator.json",
            "which-estimator-finetuned-trec-cr.json",
            "which-estimator-finetuned-biomedical.json",
            "which-estimator-finetuned-biomedical-sharprecl.json",
            "which-estimator-goemotions.json",
            "which-estimator-snm-tibkat.json",
            "which-estimator-gpu.json",
        ),
        _which_estimator,
        "test score (x100)",
        "fit seconds",
        "The rows of the ``which-estimator`` suite's runs (the CPU profile, then the "
        "rows run set by set): macro-F1 on the multi-class sets, "
        "P@1 on the multi-label ones, mean ± sample std over 3 seeds, against the fit "
        "seconds of the setting chosen on dev.",
    ),
    "index": (
        ("linear.json",),
        _suite_table("XR-Linear", "P@1", "fit_s", method="library"),
        "P@1 (test, x100)",
        "fit seconds",
        "The newest run of the ``linear`` suite: skxmc's XR-Linear beside libpecos's on the "
        "reference sets, mean ± sample std over the tree seeds.",
    ),
    "xrlinear": (
        ("xmc_linear.json",),
        _xmc_linear,
        "P@1 (test, x100)",
        "train seconds",
        "skxmc's XR-Linear (teacher-forcing negatives, and ``tfn+man``) against PECOS "
        "XR-Linear, napkinXC and omikuji on the same features and machine; one run each "
        "(train seconds: the median of the file's runs).",
    ),
    "matchxml": (
        ("matchxml-xtransformer.json", "matchxml-xtransformer-tibkat.json"),
        _suite_table("MatchXML", "P@1", "fit_s", method="row"),
        "P@1 (test, x100)",
        "fit seconds",
        "MatchXML against libpecos's XR-Transformer and TF-IDF + XR-Linear in one suite "
        "(same encoder, texts, TF-IDF and fine-tuning budget; CPU, two cores), mean ± "
        "sample std over the seeds in the runs column.",
    ),
    "text_classifiers": (
        ("sharprecl_ir50.json",),
        _summary_pm("macro-F1", "s/epoch"),
        "macro-F1 (test, x100)",
        "seconds per epoch",
        "SharpReCL against plain and logit-adjusted fine-tuning on the ir=50 sets, mean ± "
        "sample std over 3 seeds.",
    ),
    "snm": (
        ("snm.json",),
        _snm,
        "P@1 (test, x100)",
        "fit seconds",
        "The single run of the SNM script (one seed, test sets).",
    ),
    "scaling": (
        ("scale_issue_prefetch.json",),
        _scale,
        "P@1 (test, x100)",
        "train seconds",
        "Generated problems of 100k and 1M labels, skxmc against libpecos (one fit each).",
    ),
    "knn_search": (
        ("converted/knn_search.json",),
        _knn_search,
        "recall@10 of the exact top 10 (x100)",
        "ms per query",
        "The approximate (faiss) search against the exact one's neighbours; the exact "
        "search's times are in the table below.",
    ),
    "engine": (
        ("bare_hf_loop_quiet.json",),
        _engine,
        "test accuracy",
        "seconds per epoch (median)",
        "The training engine against a bare transformers loop; this run measured time "
        "only (no accuracy), so the plot shows the epoch time of each configuration.",
    ),
}


def _fmt(mean: float | None, std: float | None, digits: int = 2) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "--"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def summary(page: str, results: Path) -> str:
    """The RST of one page's summary (table and plot), from its results files (the first
    one must exist; the others join it where present)."""
    files, adapter, acc_label, time_label, note = PAGES[page]
    names = [n for n in files if (results / n).is_file()]
    points = [p for n in names for p in adapter(json.loads((results / n).read_text()))]
    sources = ", ".join(f"``benchmarks/results/{n}``" for n in names)
    if len(names) > 1:  # a data set's rows together, whichever part ran them
        order = list(dict.fromkeys(p["dataset"] for p in points))
        points.sort(key=lambda p: order.index(p["dataset"]))
    for p in points:
        for key in ("acc_std", "time_std", "n"):
            p.setdefault(key, None)
    lines = [
        ".. This file is generated by docs/_bench_summaries.py (python -m benchmarks tables)",
        "   from " + ", ".join(f"benchmarks/results/{n}" for n in names) + "; do not edit it.",
        "",
        ".. rubric:: Summary",
        "",
        note + f" From {sources}; the detail follows below.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - data set",
        "     - method",
        f"     - {acc_label}",
        f"     - {time_label}",
        "     - runs",
    ]
    for p in points:
        lines += [
            f"   * - {p['dataset']}",
            f"     - {p['method']}",
            f"     - {_fmt(p['acc'], p['acc_std'])}",
            f"     - {_fmt(p['time'], p['time_std'])}",
            f"     - {p['n'] if p['n'] is not None else '--'}",
        ]
    payload = json.dumps(
        {"points": points, "acc": acc_label, "time": time_label}, separators=(",", ":")
    )
    lines += [
        "",
        ".. plot::",
        "",
        "   import _bench_summaries",
        f"   _bench_summaries.plot({payload!r})",
        "",
    ]
    return "\n".join(lines)


def plot(payload: str) -> Any:
    """Accuracy against training time, one panel per data set (time only where no
    accuracy was measured)."""
    import matplotlib.pyplot as plt

    spec = json.loads(payload)
    points = spec["points"]
    datasets = list(dict.fromkeys(p["dataset"] for p in points))
    methods = list(dict.fromkeys(p["method"] for p in points))
    colours = {m: f"C{i % 10}" for i, m in enumerate(methods)}
    markers = "osD^v<>pXh*"
    ncols = min(len(datasets), 4)
    nrows = math.ceil(len(datasets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols + 1.5, 2.9 * nrows), squeeze=False)
    has_acc = any(p["acc"] is not None for p in points)
    for ax, dataset in zip(axes.flat, datasets):
        part = [p for p in points if p["dataset"] == dataset]
        for p in part:
            k = methods.index(p["method"])
            if has_acc:
                ax.errorbar(
                    p["time"],
                    p["acc"],
                    xerr=p["time_std"],
                    yerr=p["acc_std"],
                    fmt=markers[k % len(markers)],
                    color=colours[p["method"]],
                    label=p["method"],
                    capsize=2,
                )
            else:
                ax.barh(k, p["time"], xerr=p["time_std"], color=colours[p["method"]])
        if has_acc:
            times = [p["time"] for p in part if p["time"]]
            if times and max(times) / max(min(times), 1e-12) > 20:
                ax.set_xscale("log")
            ax.set_ylabel(spec["acc"], fontsize=8)
        else:
            ax.set_yticks(range(len(methods)), methods, fontsize=7)
        ax.set_xlabel(spec["time"], fontsize=8)
        ax.set_title(dataset, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(datasets) :]:
        ax.set_visible(False)
    if has_acc:
        handles = [
            plt.Line2D([], [], ls="", marker=markers[k % len(markers)], color=colours[m])
            for k, m in enumerate(methods)
        ]
        fig.legend(handles, methods, loc="center right", fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0, 0.86 if len(methods) > 1 else 1, 1))
    else:
        fig.tight_layout()
    return fig


def write(results: Path, out: Path) -> list[Path]:
    """Write every page's ``summary-<page>.inc`` into ``out``; the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for page in PAGES:
        if not (results / PAGES[page][0][0]).is_file():
            continue
        path = out / f"summary-{page}.inc"
        text = summary(page, results)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
