"""The numbers in the sentences of ``docs/benchmarks/scaling.rst``
(:mod:`benchmarks._figures`), by section, each from the results file its section cites.

Times in seconds, memory in MB as the files hold it (GB: MB / 1000, as the page has
always divided), growth and ratios as quotients of the files' unrounded values. A load
average is the 1-minute value at the start and the end of each child process (each
library's of a ``scale.py`` file, the record's of a ``scale_dask.py`` file); a range is
the smallest and the largest of those.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from benchmarks._figures import Expr, Figure, fig, op, val
from benchmarks._legacy_specs_scaling import (
    CHECKED,
    COLD,
    FULL,
    MAPPED,
    RANDOM,
    REFILLED,
    SHARED,
)

PAGE = "benchmarks/scaling.rst"
# A decimal the prose may type after given words: (the number, the words before it), why.
EXEMPT = {
    ("6.18", "Linux"): "a kernel version",
    ("1.4", "average about"): "mmap_load_1m.json holds no load average (its .md does)",
    (
        "0.57",
        "in this run,",
    ): "the previous session's run, of an earlier commit; not in the results",
    ("0.55", "and"): "a run that was not kept (the sentence says so)",
    ("0.45", "not kept, took"): "a first run that was not kept (the sentence says so)",
    ("2.8", "ignores ("): "Amazon-3M's published size, not a result of this page",
    ("1.7", "labels,"): "Amazon-3M's published size, not a result of this page",
}
# Decimals the prose may type anywhere, and why.
TYPED = {
    "0.7": "a setting: the generator's default noise",
    "0.08": "a setting: the generator's default label_share",
    "1.0": "the issue's target: train time at most 1.0x libpecos's",
    "1.5": "the issue's target: peak RSS at most 1.5x libpecos's",
    "0.3": "the issue's target: P@k at most 0.3 below libpecos's",
    "1.3": "the issue's target: a cluster fit at most 1.3x the local one",
}

LIBS = ("skxmc", "libpecos")
PREFETCH, QUIET = "scale_issue_prefetch", "scale_issue_quiet"
ISSUE, ISSUE_1M = "scale_issue", "scale_issue_1m"
K100, M1 = 100_000, 1_000_000


def _lib(file: str, n: int, lib: str, *path: Any):
    """A value of ``lib``'s child at ``n`` labels of a ``scale.py`` file."""
    return val(file, "sizes", {"n_labels": n}, "libraries", lib, *path)


def _p(file: str, n: int, lib: str, k: int):
    return _lib(file, n, lib, "metrics", f"precision@{k}")


def _load_avgs(file: str, sizes: tuple[int, ...]) -> list[Expr]:
    """The 1-minute load averages at the start and the end of every child of a
    ``scale.py`` file."""
    return [
        _lib(file, n, lib, f"load_average_{end}", 0)
        for n in sizes
        for lib in LIBS
        for end in ("start", "end")
    ]


def _dask(file: str, *path: Any):
    return val(file, "records", 0, *path)


def _dask_avgs(*files: str) -> list[Expr]:
    return [_dask(f, f"load_average_{end}") for f in files for end in ("start", "end")]


def _range(name: str, values: list[Expr], spec: str = ".1f") -> list[Figure]:
    return [
        fig(f"{name}-lo", op("min", *values), spec),
        fig(f"{name}-hi", op("max", *values), spec),
    ]


def _intro() -> list[Figure]:
    later = [
        *_load_avgs(ISSUE, (10_000, K100)),
        *_load_avgs(ISSUE_1M, (M1,)),
        *_load_avgs(QUIET, (K100, M1)),
        *_load_avgs(PREFETCH, (K100, M1)),
        *_dask_avgs(
            "scale_dask_100k", "scale_dask_300k", "scale_dask_1m", "scale_dask_1m_prefetch"
        ),
    ]
    earlier = [
        *_load_avgs("scale_rows2", (10_000,)),
        *_load_avgs("scale_30k", (30_000,)),
        *_load_avgs("scale_rows10", (10_000,)),
        *_dask_avgs("scale_dask_10k", "scale_dask_30k"),
    ]
    return [
        *_range("load-issue", later),
        *_range("load-earlier", earlier, ".0f"),
        fig("difficulty-first-p1", val("scale_difficulty", "rows", 0, "P@1"), ".0f"),
    ]


def _growth(file: str, lib: str, key: str = "train_s"):
    return _lib(file, M1, lib, key) / _lib(file, K100, lib, key)


def _ratio(file: str, key: str, n: int = M1):
    return _lib(file, n, "skxmc", key) / _lib(file, n, "libpecos", key)


def _issue() -> list[Figure]:
    """skxmc against libpecos on the issue's problem: after and before prefetching, and
    the earlier run."""
    sk = {k: _lib(PREFETCH, M1, "skxmc", k) for k in ("train_s", "train_cold_s", "peak_rss_mb")}
    lp = {k: _lib(PREFETCH, M1, "libpecos", k) for k in sk}
    out = [
        fig("pf-nnz", _size(PREFETCH, "nnz_per_row"), ".1f"),
        fig("pf-labels-per-row", _size(PREFETCH, "labels_per_train_row"), ".2f"),
        fig("pf-labels-per-row-int", _size(PREFETCH, "labels_per_train_row"), ".0f"),
        *_range("load-pf", _load_avgs(PREFETCH, (K100, M1))),
        fig("pf-train-ratio", sk["train_s"] / lp["train_s"]),
        fig("pf-sk-train", sk["train_s"], ".1f"),
        fig("pf-lp-train", lp["train_s"], ".1f"),
        fig("pf-fresh-ratio", sk["train_cold_s"] / lp["train_cold_s"]),
        fig("pf-sk-fresh", sk["train_cold_s"], ".1f"),
        fig("pf-lp-fresh", lp["train_cold_s"], ".1f"),
        fig("pf-rss-ratio", sk["peak_rss_mb"] / lp["peak_rss_mb"]),
        fig("pf-sk-rss", sk["peak_rss_mb"], ".0f"),
        fig("pf-lp-rss", lp["peak_rss_mb"], ".0f"),
        fig("pf-sk-rss-gb", sk["peak_rss_mb"] / 1000, ".1f"),
        fig("pf-sk-growth", _growth(PREFETCH, "skxmc"), ".1f"),
        fig("pf-lp-growth", _growth(PREFETCH, "libpecos"), ".1f"),
        fig("pf-sk-train-100k", _lib(PREFETCH, K100, "skxmc", "train_s"), ".1f"),
        fig("pf-lp-train-100k", _lib(PREFETCH, K100, "libpecos", "train_s"), ".1f"),
        fig("pf-sk-growth-fresh", _growth(PREFETCH, "skxmc", "train_cold_s"), ".1f"),
        fig("pf-lp-growth-fresh", _growth(PREFETCH, "libpecos", "train_cold_s"), ".1f"),
        *_range("pf-300k-fit-ratio", _prefetch_pairs(), ".2f"),
        *(
            fig(
                f"pf-p{k}-below-{tag}", _p(PREFETCH, n, "libpecos", k) - _p(PREFETCH, n, "skxmc", k)
            )
            for k, n, tag in ((1, M1, "1m"), (5, M1, "1m"), (1, K100, "100k"))
        ),
        fig("pf-p5-above-100k", _p(PREFETCH, K100, "skxmc", 5) - _p(PREFETCH, K100, "libpecos", 5)),
        # before prefetching
        *_range("load-quiet", _load_avgs(QUIET, (K100, M1))),
    ]
    for n, tag in ((K100, "100k"), (M1, "1m")):
        for lib in LIBS:
            for key, name in (("train_s", "train"), ("train_cold_s", "fresh")):
                out.append(fig(f"q-{lib[:2]}-{name}-{tag}", _lib(QUIET, n, lib, key), ".1f"))
            out.append(fig(f"q-{lib[:2]}-rss-{tag}", _lib(QUIET, n, lib, "peak_rss_mb"), ".0f"))
    out += [
        fig("q-sk-growth", _growth(QUIET, "skxmc"), ".1f"),
        fig("q-lp-growth", _growth(QUIET, "libpecos"), ".1f"),
        fig("q-sk-growth-fresh", _growth(QUIET, "skxmc", "train_cold_s"), ".1f"),
        fig("q-lp-growth-fresh", _growth(QUIET, "libpecos", "train_cold_s"), ".1f"),
        # the earlier run: 10k and 100k in one file, 1M in another
        fig("e-train-ratio", _ratio(ISSUE_1M, "train_s")),
        fig("e-rss-ratio", _ratio(ISSUE_1M, "peak_rss_mb")),
        *(
            fig(
                f"e-{lib[:2]}-growth{tag}",
                _lib(ISSUE_1M, M1, lib, key) / _lib(ISSUE, K100, lib, key),
                ".1f",
            )
            for key, tag in (("train_s", ""), ("train_cold_s", "-fresh"))
            for lib in LIBS
        ),
        fig("e-lp-load-100k", _lib(ISSUE, K100, "libpecos", "load_average_start", 0), ".1f"),
    ]
    return out


def _size(file: str, key: str, n: int = M1):
    return val(file, "sizes", {"n_labels": n}, key)


def _prefetch_pairs() -> list[Expr]:
    """After / before of each pair of XR-Linear fits at 300k labels (prefetch.py)."""

    def run(i: int, side: str):
        where = {"kind": "xrlinear", "n": 300_000, "repeat": i, "side": side}
        return val("prefetch_min_bytes", "runs", where, "seconds")

    return [run(i, "after") / run(i, "before") for i in range(3)]


def _seeds() -> list[Figure]:
    """P@k over tree seeds (``scale_seeds.py``): mean ± sample std, per-seed gaps."""
    out = []
    sizes = (("scale_seeds", 10_000, "10k"), ("scale_seeds", K100, "100k"))
    for file, n, tag in (*sizes, ("scale_seeds_1m", M1, "1m")):
        for k in (1, 5):

            def per(lib: str, i: int, file=file, n=n, k=k):
                return val(file, "records", {"n_labels": n}, "per_seed", lib, i, f"P@{k}")

            for lib in LIBS:
                values = [per(lib, i) for i in range(3)]
                out.append(fig(f"s{tag}-{lib[:2]}-p{k}", (values[0] + values[1] + values[2]) / 3))
                out.append(fig(f"s{tag}-{lib[:2]}-p{k}-std", op("std", *values)))
            gaps = [per("skxmc", i) - per("libpecos", i) for i in range(3)]
            if tag == "100k":
                out += [
                    fig(f"s{tag}-p{k}-gap-lo", op("min", *gaps), "+.2f"),
                    fig(f"s{tag}-p{k}-gap-hi", op("max", *gaps), "+.2f"),
                ]
            if tag == "1m":
                out += [fig(f"s{tag}-p{k}-gap-s{i}", g, "+.2f") for i, g in enumerate(gaps)]
                out.append(fig(f"s{tag}-p{k}-gap", (gaps[0] + gaps[1] + gaps[2]) / 3, "+.2f"))
    return out


def _earlier() -> list[Figure]:
    """The runs with the generator's defaults, before the issue's setting."""
    files = (("scale_rows2", 10_000), ("scale_30k", 30_000), ("scale_rows10", 10_000))
    rss = [_ratio(f, "peak_rss_mb", n) for f, n in files]
    return [
        fig("d-nnz", _size("scale_rows2", "nnz_per_row", 10_000), ".0f"),
        fig("d-labels-per-row", _size("scale_rows2", "labels_per_train_row", 10_000), ".1f"),
        *(
            fig(f"d30k-{lib[:2]}-{name}", _lib("scale_30k", 30_000, lib, key), ".1f")
            for key, name in (("train_cold_s", "fresh"), ("train_s", "train"))
            for lib in LIBS
        ),
        *_range("d-rss-ratio", rss),
    ]


def _cluster() -> list[Figure]:
    d10, d30, d100, d300 = (f"scale_dask_{s}" for s in ("10k", "30k", "100k", "300k"))
    d1m, dpf = "scale_dask_1m", "scale_dask_1m_prefetch"

    def layer(file: str, i: int, key: str):
        return _dask(file, "layers", {"layer": i}, key)

    def per_worker(file: str, layers: range):
        return [layer(file, i, "broadcast MB") / 2 for i in layers]

    return [
        fig("load-dask-early-lo", op("min", *_dask_avgs(d10, d30)), ".0f"),
        fig("load-dask-early-hi", op("max", *_dask_avgs(d10, d30)), ".0f"),
        *_range("load-dask-issue", _dask_avgs(d100, d300)),
        *_range("load-dask-1m", _dask_avgs(d1m)),
        *_range("load-dask-pf", _dask_avgs(dpf)),
        fig("dask30k-x-mb", _dask(d30, "X_train_mb"), ".1f"),
        fig("dask300k-x-mb", _dask(d300, "X_train_mb"), ".1f"),
        *_range("dask30k-sent", per_worker(d30, range(2, 5))),
        *_range("dask300k-sent", per_worker(d300, range(2, 5)), ".0f"),
        fig("dask10k-fit-ratio", _dask(d10, "fit_ratio")),
        fig("dask30k-fit-ratio", _dask(d30, "fit_ratio")),
        fig("dask100k-fit-ratio", _dask(d100, "fit_ratio")),
        fig("dask300k-fit-ratio", _dask(d300, "fit_ratio")),
        fig("dask1m-fit-ratio", _dask(d1m, "fit_ratio"), ".3f"),
        fig("dask1m-dask-fit", _dask(d1m, "dask_fit_s"), ".0f"),
        fig("dask1m-local-fit", _dask(d1m, "local_fit_s"), ".0f"),
        fig("daskpf-fit-ratio", _dask(dpf, "fit_ratio"), ".3f"),
        fig("daskpf-dask-fit", _dask(dpf, "dask_fit_s"), ".1f"),
        fig("daskpf-local-fit", _dask(dpf, "local_fit_s"), ".1f"),
        fig("daskpf-first-broadcast", layer(dpf, 1, "broadcast MB"), ".0f"),
        fig("daskpf-first-extra", layer(dpf, 1, "dask s") - layer(dpf, 1, "local s"), ".1f"),
        fig("daskpf-client-gb", _dask(dpf, "client_peak_rss_mb") / 1000, ".1f"),
        *(
            fig(f"daskpf-worker{i}-gb", _dask(dpf, "worker_peak_rss_mb", i) / 1000, ".1f")
            for i in range(2)
        ),
        fig("dask1m-x-mb", _dask(d1m, "X_train_mb"), ".0f"),
        fig("dask1m-first-broadcast", layer(d1m, 1, "broadcast MB"), ".0f"),
        *_range("dask1m-sent", [layer(d1m, i, "broadcast MB") for i in range(2, 6)], ".0f"),
        *_range("dask1m-weights", [layer(d1m, i, "results MB") for i in range(1, 6)], ".0f"),
        fig("dask1m-p1", _dask(d1m, "precision", "dask", "P@1")),
        fig("dask1m-p5", _dask(d1m, "precision", "dask", "P@5")),
        fig("dask1m-client-gb", _dask(d1m, "client_peak_rss_mb") / 1000, ".1f"),
        *(
            fig(f"dask1m-worker{i}-gb", _dask(d1m, "worker_peak_rss_mb", i) / 1000, ".1f")
            for i in range(2)
        ),
        fig("dask10k-predict-ratio", _dask(d10, "predict_ratio"), ".1f"),
        fig("dask30k-predict-ratio", _dask(d30, "predict_ratio"), ".1f"),
        fig("dask100k-predict-ratio", _dask(d100, "predict_ratio"), ".2f"),
        fig("dask300k-predict-ratio", _dask(d300, "predict_ratio"), ".2f"),
    ]


BEFORE, PREAD, HYBRID = "mmap_load_1m_pread_before", "mmap_load_1m_pread", "mmap_load_1m_hybrid"
HYBRID_COLD, FIRST = "mmap_load_1m_hybrid_cold", "mmap_load_1m"
S28_BEFORE, S28, S28_COLD, S29 = (
    "mmap_load_1m_s28_before",
    "mmap_load_1m_s28",
    "mmap_load_1m_s28_cold",
    "mmap_load_1m_s29",
)
REACH = "mmap_reach_1m"


def _m(file: str, load: str, key: str):
    """A median of ``mmap_load.py``'s summary row ``load``."""
    return val(file, "rows", {"load": load}, key)


def _reach(rows: int, layer: int, key: str):
    return val(REACH, "runs", {"rows": rows}, "layers", {"layer": layer}, key)


def _mmap() -> list[Figure]:
    warm = [
        _m(f, load, "imports s")
        for f in (BEFORE, PREAD, HYBRID)
        for load in (FULL, CHECKED, MAPPED)
    ]
    new = [_m(HYBRID, load, "imports s") for load in (FULL, CHECKED, MAPPED)] + [
        _m(HYBRID_COLD, load, "imports s") for load in (FULL, COLD)
    ]
    leaves = _reach(1000, 4, "layout_mb")
    parents = _reach(1000, 4, "parents")
    above = _reach(1000, 3, "layout_mb") / _reach(1000, 3, "parents")
    private = [_m(S28, load, "private (RssAnon) growth MB") for load in (MAPPED, SHARED)] + [
        _m(S28_COLD, load, "private (RssAnon) growth MB") for load in (COLD, RANDOM, REFILLED)
    ]
    first_private = [
        _m(FIRST, load, "private (RssAnon) growth MB") for load in (CHECKED, MAPPED, COLD, RANDOM)
    ]
    return [
        # the current code
        fig("hy-fit-s", val(PREAD, "fit_s"), ".0f"),
        fig("hy-model-mb", val(PREAD, "model_mb"), ",.0f"),
        fig("hy-full-rss", _m(HYBRID, FULL, "RSS after MB"), ",.0f"),
        fig("hy-cold-full-rss", _m(HYBRID_COLD, FULL, "RSS after MB"), ",.0f"),
        *_range("hy-imports", warm),
        fig("leaf-block-kb", leaves / parents * 1000, ".0f"),
        fig("pread-row-ms", _m(PREAD, MAPPED, "single-row predict ms median")),
        fig("before-row-ms", _m(BEFORE, MAPPED, "single-row predict ms median")),
        fig("above-block-kb", above * 1000, ".0f"),
        fig("above-reached", _reach(1000, 3, "parents_reached"), ",.0f"),
        fig("hy-row-ms", _m(HYBRID, MAPPED, "single-row predict ms median")),
        fig("hy-rss-ratio", _m(HYBRID, MAPPED, "RSS / full load"), ".3f"),
        fig("hy-predict-s", _m(HYBRID, MAPPED, "predict 1000 rows s")),
        fig("hy-total-s", _m(HYBRID, MAPPED, "load + predict s")),
        fig("hy-peak-ratio", _m(HYBRID, MAPPED, "peak / full load"), ".3f"),
        fig("hy-cold-rss-ratio", _m(HYBRID_COLD, COLD, "RSS / full load"), ".3f"),
        fig("hy-cold-total-s", _m(HYBRID_COLD, COLD, "load + predict s")),
        *_range("hy-new-imports", new),
        # the first measurement
        fig("first-model-mb", val(FIRST, "model_mb"), ",.0f"),
        *_range(
            "first-imports", [_m(FIRST, load, "imports s") for load in (FULL, CHECKED, MAPPED)]
        ),
        fig("first-cold-imports", _m(FIRST, COLD, "imports s"), ".1f"),
        fig("first-total-s", _m(FIRST, MAPPED, "load + predict s")),
        fig("first-all-s", _m(FIRST, MAPPED, "imports + load + predict s")),
        fig("first-cold-total-s", _m(FIRST, COLD, "load + predict s")),
        fig("first-checked-load-s", _m(FIRST, CHECKED, "load s"), ".1f"),
        fig("first-full-load-s", _m(FIRST, FULL, "load s"), ".1f"),
        *_range("first-private", first_private, ".0f"),
        fig("first-full-private", _m(FIRST, FULL, "private (RssAnon) growth MB"), ",.0f"),
        fig("first-rss-ratio", _m(FIRST, MAPPED, "RSS / full load")),
        fig("first-random-ratio", _m(FIRST, RANDOM, "RSS / full load")),
        fig(
            "first-random-slower",
            _m(FIRST, RANDOM, "predict 1000 rows s") / _m(FIRST, COLD, "predict 1000 rows s"),
            ".0f",
        ),
        fig("first-random-predict", _m(FIRST, RANDOM, "predict 1000 rows s"), ".1f"),
        fig("first-cold-predict", _m(FIRST, COLD, "predict 1000 rows s"), ".1f"),
        # one block per parent
        fig("s28-before-model-mb", val(S28_BEFORE, "model_mb"), ",.0f"),
        fig("s28-model-mb", val(S28, "model_mb"), ",.0f"),
        fig("reach-1000", _reach(1000, 4, "parents_reached"), ",.0f"),
        fig("leaf-parents", parents, ",.0f"),
        fig("reach-1000-share", _reach(1000, 4, "parents_reached") / parents * 100, ".0f"),
        fig("reach-1000-mapped-share", _reach(1000, 4, "mapped_mb") / leaves * 100, ".0f"),
        fig("reach-1000-mapped", _reach(1000, 4, "mapped_mb"), ".0f"),
        fig("leaf-layout-mb", leaves, ",.0f"),
        fig("reach-10", _reach(10, 4, "parents_reached"), ".0f"),
        fig("reach-10-share", _reach(10, 4, "parents_reached") / parents * 100, ".1f"),
        fig("reach-10-mapped", _reach(10, 4, "mapped_mb"), ".0f"),
        fig("reach-10-mapped-share", _reach(10, 4, "mapped_mb") / leaves * 100, ".1f"),
        fig(
            "reach-10-per-parent",
            _reach(10, 4, "mapped_mb") / _reach(10, 4, "parents_reached"),
            ".1f",
        ),
        fig("s28-single-ratio", _m(S28_COLD, REFILLED, "RSS / full load"), ".3f"),
        fig("s28-cold-ratio", _m(S28_COLD, COLD, "RSS / full load"), ".3f"),
        fig("s28-saved-ratio", _m(S28, MAPPED, "RSS / full load"), ".3f"),
        *_range("s28-private", private, ".0f"),
        fig("s28-full-private", _m(S28, FULL, "private (RssAnon) growth MB"), ",.0f"),
        fig("s28-pss-ratio", _m(S28, SHARED, "PSS / full load")),
        # one search form per layer
        fig("s29-model-mb", val(S29, "model_mb"), ",.0f"),
        fig("s28-full-rss", _m(S28, FULL, "RSS after MB"), ",.0f"),
        fig("s29-full-rss", _m(S29, FULL, "RSS after MB"), ",.0f"),
        fig("s29-rss", _m(S29, MAPPED, "RSS after MB"), ",.0f"),
        fig("s29-rss-ratio", _m(S29, MAPPED, "RSS / full load"), ".3f"),
        fig("s29-pss-ratio", _m(S29, SHARED, "PSS / full load"), ".3f"),
        fig("m100k-mapped-load", val("mmap_load", "rows", {"load": "mmap=True"}, "load s"), ".1f"),
        fig("m100k-full-load", val("mmap_load", "rows", {"load": "full"}, "load s"), ".1f"),
    ]


def _projection() -> list[Figure]:
    def proj(file: str, lib: str, quantity: str, key: str = "projected"):
        return val(file, "projections", {"library": lib, "quantity": quantity}, key)

    pf, quiet = "scale_issue_prefetch_projection", "scale_issue_quiet_projection"
    return [
        fig("proj-sk-min", proj(pf, "skxmc", "train_s") / 60, ".0f"),
        fig("proj-lp-min", proj(pf, "libpecos", "train_s") / 60, ".0f"),
        fig("proj-sk-gb", proj(pf, "skxmc", "peak_rss_mb") / 1000, ".0f"),
        fig("projq-sk-slope", proj(quiet, "skxmc", "train_s", "slope")),
        fig("projq-lp-slope", proj(quiet, "libpecos", "train_s", "slope")),
        fig("projq-sk-s", proj(quiet, "skxmc", "train_s"), ",.0f"),
        fig("proje-sk-s", proj("scale_issue_projection", "skxmc", "train_s"), ",.0f"),
        fig("proje-sk-gb", proj("scale_issue_projection", "skxmc", "peak_rss_mb") / 1000, ".1f"),
    ]


# the figures the page shows as a ratio ("0.49x"; of a range "0.75-0.85x", the upper end)
RATIOS = frozenset(
    {
        *("pf-train-ratio", "pf-fresh-ratio", "pf-rss-ratio", "pf-300k-fit-ratio-hi"),
        *("pf-sk-growth", "pf-lp-growth", "pf-sk-growth-fresh", "pf-lp-growth-fresh"),
        *("q-sk-growth", "q-lp-growth", "q-sk-growth-fresh", "q-lp-growth-fresh"),
        *("e-train-ratio", "e-rss-ratio", "e-sk-growth", "e-li-growth"),
        *("e-sk-growth-fresh", "e-li-growth-fresh", "d-rss-ratio-hi"),
        *(f"dask{s}-fit-ratio" for s in ("10k", "30k", "100k", "300k", "1m", "pf")),
        *(f"dask{s}-predict-ratio" for s in ("10k", "30k", "100k", "300k")),
        *("first-rss-ratio", "first-random-ratio", "first-random-slower"),
    }
)
# and as a percentage
PERCENT = frozenset(
    {"reach-1000-share", "reach-1000-mapped-share", "reach-10-share", "reach-10-mapped-share"}
)


def _suffixed(figure: Figure) -> Figure:
    suffix = "x" if figure.name in RATIOS else "%" if figure.name in PERCENT else ""
    return replace(figure, suffix=suffix)


FIGURES: tuple[Figure, ...] = tuple(
    _suffixed(f)
    for f in (
        *_intro(),
        *_issue(),
        *_seeds(),
        *_earlier(),
        *_cluster(),
        *_mmap(),
        *_projection(),
    )
)
