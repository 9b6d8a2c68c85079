"""The numbers in the sentences of ``docs/benchmarks/snm.rst`` (:mod:`benchmarks._figures`):
the dev-split studies (``snm_dev_*.json``, whose ``summary`` holds the mean and sample
std over seeds per data set and method), the earlier single run (``snm.json``) and the
MatchXML rows with and without SNM negatives. Values x100; PSP un-normalised.
"""

from __future__ import annotations

from benchmarks._figures import Figure, fig, mean, stat, val

PAGE = "benchmarks/snm.rst"
EXEMPT = {
    ("2.5", "weighs the negatives"): "(K - 1) / (k B) of the settings (158 / 64), arithmetic",
    ("3.8", "on delicious ("): "the same arithmetic for delicious (982 / 256)",
    ("0.01", "uniform sampling of"): (
        "benchmarks/results/snm.md at commit 0155fb8; only git history holds that run"
    ),
    ("0.57", "of 0.01-"): "the same earlier run's upper end",
    ("0.95", "ratios of"): "the same earlier run's delicious P@3 ratio",
    ("0.86", "0.95 /"): "the same earlier run's delicious P@5 ratio",
}
TYPED = {"0.1": "the --dev-fraction setting of the quoted commands"}

BIBTEX, DELICIOUS, TIBKAT = "bibtex_bow", "delicious_bow", "tibkat_gnd_en"
DEV = {BIBTEX: "snm_dev_bibtex", DELICIOUS: "snm_dev_delicious", TIBKAT: "snm_dev_tibkat"}
RANDOM_TIBKAT = "snm_dev_tibkat_random_init"
SNM = "snm"
MX_DEV, MX_SNM, MX_BASE = "matchxml_tibkat_dev", "matchxml_tibkat_ablations", "matchxml"


def _dev(dataset: str, method: str, key: str = "dev_precision@1", file: str | None = None):
    """A value of the dev study's summary (mean over seeds, or ``<key>_std``)."""
    return val(file or DEV[dataset], "summary", {"dataset": dataset, "method": method}, key)


def _run(dataset: str, method: str, metric: str = "precision@1", **where):
    """A value of the earlier single run (one record per data set, method and ``k``)."""
    return mean(SNM, metric, dataset=dataset, method=method, **where)


def _dev_studies() -> list[Figure]:
    paper, mean_, rand = "snm k=1 paper", "snm k=1 mean", "snm k=1 mean random"
    return [
        *(
            f
            for d, name in ((BIBTEX, "bibtex"), (DELICIOUS, "delicious"), (TIBKAT, "tibkat"))
            for f in (
                fig(f"dev-{name}-paper-p1", _dev(d, paper), ".1f"),
                fig(f"dev-{name}-mean-p1", _dev(d, mean_), ".1f"),
            )
        ),
        fig("dev-tibkat-random-p1", _dev(TIBKAT, rand, file=RANDOM_TIBKAT)),
        fig("dev-tibkat-mean-p1-2dp", _dev(TIBKAT, mean_)),
        fig("dev-bibtex-init-gain", _dev(BIBTEX, mean_) - _dev(BIBTEX, rand), ".1f"),
        fig("dev-bibtex-mean-p1-std", _dev(BIBTEX, mean_, "dev_precision@1_std"), ".1f"),
        fig("dev-bibtex-random-p1", _dev(BIBTEX, rand), ".1f"),
        fig("dev-bibtex-random-p1-std", _dev(BIBTEX, rand, "dev_precision@1_std"), ".1f"),
        fig(
            "dev-bibtex-paper-init-gain",
            _dev(BIBTEX, paper) - _dev(BIBTEX, "snm k=1 paper random"),
            ".1f",
        ),
        fig("dev-bibtex-p1-ratio", _dev(BIBTEX, mean_) / _dev(BIBTEX, "uniform")),
        fig(
            "dev-bibtex-p5-ratio",
            _dev(BIBTEX, mean_, "dev_precision@5") / _dev(BIBTEX, "uniform", "dev_precision@5"),
        ),
    ]


def _single_run() -> list[Figure]:
    sets = (("bibtex", BIBTEX), ("delicious", DELICIOUS), ("tibkat", TIBKAT))
    out = [
        fig(f"run-{name}-k{k}-{m}-ratio", _run(d, "snm", f"ratio_precision@{m[1]}", k=k))
        for k, metrics in ((1, ("p1", "p5")), (5, ("p1",)))
        for m in metrics
        for name, d in sets
    ]
    for name, d in (("bibtex", BIBTEX), ("tibkat", TIBKAT)):
        out += [
            fig(f"run-{name}-uniform-p1", _run(d, "uniform"), ".1f"),
            fig(f"run-{name}-start-p1", _run(d, "untrained start"), ".1f"),
            fig(f"run-{name}-k1-p1", _run(d, "snm", k=1), ".1f"),
        ]
    out += [
        f
        for name, d in sets
        for f in (
            fig(
                f"run-{name}-best-p1",
                stat(SNM, "precision@1", how="max", dataset=d, method="snm"),
                ".1f",
            ),
            fig(f"run-{name}-xr-p1", _run(d, "XRLinear"), ".1f"),
        )
    ]
    return out


def _matchxml() -> list[Figure]:
    """With SNM negatives and without: dev (one run) and test (two runs)."""
    out = []
    for split, with_, without in (("dev", MX_DEV, MX_DEV), ("test", MX_SNM, MX_BASE)):
        for metric in ("P@1", "P@5", "PSP@1"):
            m = metric.lower().replace("@", "")
            a, b = mean(with_, metric, row="snm-negatives"), mean(without, metric, row="matchxml")
            out += [
                fig(f"mx-{split}-{m}-snm", a),
                fig(f"mx-{split}-{m}-base", b),
                fig(f"mx-{split}-{m}-gap", a - b, "+.2f"),
            ]
    return out


FIGURES: tuple[Figure, ...] = (*_dev_studies(), *_single_run(), *_matchxml())
