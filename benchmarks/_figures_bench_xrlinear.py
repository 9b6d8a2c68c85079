"""The numbers in the sentences of ``docs/benchmarks/xrlinear.rst``
(:mod:`benchmarks._figures`): skxmc's XR-Linear against libpecos, from the
``benchmarks/xmc_linear.py`` files (``rows``: one record per data set and library, with
the medians over its repeats and the per-repeat values in ``<key>_all``).

A ratio "0.72x" is skxmc's over libpecos's. Where the page says "medians of per-repeat
ratios" (the quiet runs and later) it is that median; for the earlier repeats files it is
the ratio of the two medians, as their table shows them.
"""

from __future__ import annotations

from benchmarks._figures import Figure, fig, op, val

PAGE = "benchmarks/xrlinear.rst"
EXEMPT = {
    ("1.2.8", "libpecos"): "a library version",
    ("2.4", "numpy"): "a library version",
}

TIBKAT_REPEATS = "xmc_linear_tibkat_repeats"
SMALL_REPEATS = "xmc_linear_small_repeats"
QUIET = "xmc_linear_quiet_after"
S27 = ("xmc_linear_s27_small", "xmc_linear_s27_small_rerun", "xmc_linear_s27_small_run3")
FUSED = "xmc_linear_s30_small_fused"
S30_TIBKAT = "xmc_linear_s30_tibkat"
S30_BEFORE = "xmc_linear_s30_small"
SEEDS = "xmc_linear_seeds_tibkat"
PROFILE = "xmc_linear_profile_s27"
STARTUP = "startup_cost_vs_pecos"
FIRST, FIRST_BEFORE = "first_run", "first_run_before_s26"

SMALL = ("reuters21578_allcats", "bibtex_bow", "delicious_bow")
T = "tibkat_gnd_en"
# the repeats each file ran (a setting of its command)
REPEATS = {QUIET: 5, **dict.fromkeys(S27, 5), FUSED: 5, S30_TIBKAT: 3, S30_BEFORE: 5}


def _row(file: str, dataset: str, key: str, library: str = "skxmc", *index: int):
    return val(file, "rows", {"dataset": dataset, "library": library}, key, *index)


def _ratio(file: str, dataset: str, key: str):
    """skxmc's median ``key`` over libpecos's."""
    return _row(file, dataset, key) / _row(file, dataset, key, "libpecos")


def _median_ratio(file: str, dataset: str, key: str):
    """The median over the repeats of skxmc's ``key`` over libpecos's."""
    return op(
        "median",
        *(
            _row(file, dataset, f"{key}_all", "skxmc", i)
            / _row(file, dataset, f"{key}_all", "libpecos", i)
            for i in range(REPEATS[file])
        ),
    )


def _p(library: str, seed: int, metric: str):
    return val(SEEDS, "records", 0, "per_seed", library, seed, metric)


def _import(statement: str):
    return val(STARTUP, "imports", {"statement": statement}, "RSS after MB")


def _short(dataset: str) -> str:
    return dataset.split("_")[0].removesuffix("21578")


def _repeats() -> list[Figure]:
    """Medians of three runs, fresh processes (``--repeats 3``)."""
    t = TIBKAT_REPEATS
    small_fit = [_ratio(SMALL_REPEATS, d, "train_s") for d in SMALL]
    return [
        fig("rep-t-train-s", _row(t, T, "train_s"), ".1f"),
        fig("rep-t-train-s-pecos", _row(t, T, "train_s", "libpecos"), ".1f"),
        fig("rep-t-predict-s", _row(t, T, "predict_s")),
        fig("rep-t-predict-s-pecos", _row(t, T, "predict_s", "libpecos")),
        fig("rep-t-rss-ratio", _ratio(t, T, "peak_rss_mb"), ".2f", "x"),
        fig("rep-t-p1", _row(t, T, "precision@1")),
        fig("rep-t-p1-pecos", _row(t, T, "precision@1", "libpecos")),
        fig("rep-small-fit-ratio-min", op("min", *small_fit)),
        fig("rep-small-fit-ratio-max", op("max", *small_fit), ".2f", "x"),
        fig(
            "rep-small-p1-below-max",
            op(
                "max",
                *(
                    _row(SMALL_REPEATS, d, "precision@1", "libpecos")
                    - _row(SMALL_REPEATS, d, "precision@1")
                    for d in SMALL
                ),
            ),
        ),
        fig("rep-startup-min", op("min", *(_row(SMALL_REPEATS, d, "startup_s") for d in SMALL))),
        fig("rep-startup-max", op("max", *(_row(SMALL_REPEATS, d, "startup_s") for d in SMALL))),
        *(
            fig(
                f"rep-small-rss-{how}{'-pecos' if lib == 'libpecos' else ''}",
                op(how, *(_row(SMALL_REPEATS, d, "peak_rss_mb", lib) for d in SMALL)),
                ".0f",
            )
            for lib in ("skxmc", "libpecos")
            for how in ("min", "max")
        ),
    ]


def _quiet() -> list[Figure]:
    """In memory and warm, five repeats on a quiet machine, and the later runs."""
    out = [
        fig("q-t-fit-ratio", _median_ratio(QUIET, T, "train_s"), ".2f", "x"),
        fig("q-t-train-s", _row(QUIET, T, "train_s"), ".1f"),
        fig("q-t-train-s-pecos", _row(QUIET, T, "train_s", "libpecos"), ".1f"),
        fig("q-t-predict-ratio", _median_ratio(QUIET, T, "predict_s"), ".2f", "x"),
        fig("q-t-rss-ratio", _median_ratio(QUIET, T, "peak_rss_mb"), ".2f", "x"),
        fig("q-t-rss", _row(QUIET, T, "peak_rss_mb"), ".0f"),
        fig("q-t-rss-pecos", _row(QUIET, T, "peak_rss_mb", "libpecos"), ".0f"),
        fig("q-t-p1", _row(QUIET, T, "precision@1")),
        fig("q-t-p1-pecos", _row(QUIET, T, "precision@1", "libpecos")),
    ]
    # the small sets, three runs after the solver's layout changes
    for d in SMALL:
        out += [
            fig(f"s27-{_short(d)}-fit-ratio-{i}", _median_ratio(f, d, "train_s"), ".2f", "x")
            for i, f in enumerate(S27, 1)
        ]
    predict = [_median_ratio(f, d, "predict_s") for f in S27 for d in SMALL]
    train = [
        _row(f, d, "train_s", lib) for f in S27 for d in SMALL for lib in ("skxmc", "libpecos")
    ]
    out += [
        fig("s27-predict-ratio-min", op("min", *predict)),
        fig("s27-predict-ratio-max", op("max", *predict), ".2f", "x"),
        fig("s27-train-s-min", op("min", *train), ".1f"),
        fig("s27-train-s-max", op("max", *train), ".0f"),
        *(
            fig(
                f"prof-{_short(d)}-cpu-ratio",
                _row(PROFILE, d, "train CPU s") / _row(PROFILE, d, "train CPU s", "libpecos"),
                ".2f",
                "x",
            )
            for d in ("reuters21578_allcats", "delicious_bow")
        ),
    ]
    # the fused post-processor (de8eab0): the small sets and tibkat, and before it
    fused = [(FUSED, d) for d in SMALL] + [(S30_TIBKAT, T)]
    for key, name in (("train_s", "fit"), ("predict_s", "predict"), ("peak_rss_mb", "rss")):
        out += [
            fig(f"s30-{_short(d)}-{name}-ratio", _median_ratio(f, d, key), ".2f", "x")
            for f, d in fused
        ]
    out += [
        fig(
            f"s30-before-{_short(d)}-predict-ratio",
            _median_ratio(S30_BEFORE, d, "predict_s"),
            ".2f",
            "x",
        )
        for d in SMALL
    ]
    return out


def _seeds() -> list[Figure]:
    """Tree seeds 0, 1 and 2 on tibkat_gnd_en, skxmc minus libpecos."""
    out = [
        fig(
            "s30-t-p1-below",
            _row(S30_TIBKAT, T, "precision@1", "libpecos") - _row(S30_TIBKAT, T, "precision@1"),
        )
    ]
    for metric in ("P@1", "P@5"):
        gaps = [_p("skxmc", s, metric) - _p("libpecos", s, metric) for s in range(3)]
        m = metric.lower().replace("@", "")
        out += [fig(f"seed-{m}-gap-s{s}", g, "+.2f") for s, g in enumerate(gaps)]
        out.append(fig(f"seed-{m}-gap-mean", (gaps[0] + gaps[1] + gaps[2]) / 3, "+.2f"))
    return out


def _memory() -> list[Figure]:
    """Fresh-process peak memory on the small sets (the first of the three runs), the
    imports, and the first fit's compilation."""
    f = S27[0]
    ratios = [_median_ratio(f, d, "peak_rss_mb") for d in SMALL]
    return [
        fig("s27-rss-ratio-min", op("min", *ratios)),
        fig("s27-rss-ratio-max", op("max", *ratios), ".2f", "x"),
        *(
            fig(
                f"s27-rss-{how}{'-pecos' if lib == 'libpecos' else ''}",
                op(how, *(_row(f, d, "peak_rss_mb", lib) for d in SMALL)),
                ".0f",
            )
            for lib in ("skxmc", "libpecos")
            for how in ("min", "max")
        ),
        fig("imp-pecos-mb", _import("libpecos: import pecos.xmc.xlinear.model"), ".0f"),
        fig("imp-sklearn-mb", _import("sklearn.base"), ".0f"),
        fig("imp-skxmc-mb", _import("import skxmc"), ".0f"),
        fig("imp-skxmc-s", val(STARTUP, "imports", {"statement": "import skxmc"}, "import s")),
        fig("imp-xrlinear-mb", _import("from skxmc import XRLinearClassifier"), ".0f"),
        fig("first-fit-cpu-s", val(FIRST, "rows", 0, "first fit CPU s"), ".1f"),
        fig("first-fit-cpu-ratio", val(FIRST, "cold first / warm second, CPU"), ".1f", "x"),
        fig("first-before-fit-cpu-s", val(FIRST_BEFORE, "rows", 0, "first fit CPU s"), ".1f"),
        fig(
            "first-before-fit-cpu-ratio",
            val(FIRST_BEFORE, "cold first / warm second, CPU"),
            ".1f",
            "x",
        ),
    ]


FIGURES: tuple[Figure, ...] = (*_repeats(), *_quiet(), *_seeds(), *_memory())
