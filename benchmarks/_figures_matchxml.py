"""The numbers in the sentences of ``docs/benchmarks/matchxml.rst``
(:mod:`benchmarks._figures`), by section, each from the results file its section cites.

P@k and PSP@k are in percent, PSP un-normalised (the files predate issue 50). A
difference is written ``later - earlier`` the way the sentence reads it, with ``"+.2f"``
where the page shows the sign.
"""

from __future__ import annotations

from benchmarks._figures import Figure, fig, mean, op, stat, val

PAGE = "benchmarks/matchxml.rst"
# A decimal the prose may type after given words: (the number, the words before it), why.
EXEMPT = {
    ("1.2.8", "libpecos"): "a library version",
    ("4.46.3", "transformers"): "a library version",
    ("0.05", "entries of about"): "1 / sqrt(384), the arithmetic of a unit-norm block",
    ("1.5", "took"): "a time ratio of the .md files' time columns; the JSON has no times",
    ("2.0", "took 1.5-"): "the same ratio's upper end",
    ("4.2", "prediction"): "the same files' prediction-time ratio",
    ("5.7", "prediction 4.2-"): "the same ratio's upper end",
    ("3.5", "for about"): "minutes of the stack dumps in the GPU log, no JSON",
}
# Decimals the prose may type anywhere, and why.
TYPED = {
    **dict.fromkeys(
        ("34.2", "19.0", "17.7", "27.8", "29.9", "23.9", "24.0", "30.0", "30.4", "23.6"),
        "a stage time of benchmarks/results/gpu_profile_h200_2026-12-04.log; no JSON holds it",
    ),
    **dict.fromkeys(
        ("0.1", "0.001", "0.5", "0.25"),
        "a setting: the ranker's weight threshold or the fine-tuned block's weight",
    ),
}

# the first section: full size at the reference's threshold 0.001 (test)
TEST = "matchxml_final_features_test_thr0001"
BASE = "matchxml_tibkat_thr0001_base"
MX_S0 = "matchxml_tibkat_thr0001_mx"
# full size at 0.1 (test)
DEFAULTS = "matchxml_tibkat_defaults"
# dev studies at full size
DEV = "matchxml_final_features_dev_s150"
DEV_THR = "matchxml_final_features_dev_s150_thr0001"
DEV_S1 = "matchxml_final_features_dev_s150_seed1_thr0001"
DEV_W025 = "matchxml_final_features_dev_s150_w025_thr0001"
DEV_300 = "matchxml_final_features_dev_s300"
DEV_300_THR = "matchxml_final_features_dev_s300_thr0001"
DEV_ALL = "matchxml_final_features_dev_all_layers"
DEV_256 = "matchxml_final_features_dev_s150_static256"
DEV_BEAM = "matchxml_final_features_dev_s150_beam50"
OFFICIAL = "matchxml_final_features_officialdev"
WORDLLAMA = "matchxml_final_features_officialdev_s0_wordllama"
# the reduced budget
DEV_A, DEV_B = "matchxml_dev_a", "matchxml_dev_b"
REDUCED = "matchxml_tibkat_reduced"
REDUCED_DEV = "matchxml_tibkat_reduced_dev"
XII_REDUCED = "matchxml_tibkat_table12_reduced"
XII_REDUCED_DEV = "matchxml_tibkat_table12_reduced_dev"
# Table XII at full size
XII_THR = "matchxml_tibkat_table12_thr0001"
XII = "matchxml_tibkat_table12"
# GPU profile
GPU = "matchxml_tibkat_gpu_parts"
GPU_BASE = "matchxml_tibkat_gpu_baselines"
GPU_RANKER = "matchxml_tibkat_gpu_ranker_s0"

FITTED = "MatchXML as fitted"
SENT = "tfidf+sentence"


def _v(file: str, variant: str, metric: str = "P@1", seeds: tuple[int, ...] | None = None):
    """The mean of ``metric`` over the records of ``variant`` (a ``variant`` of the
    ``matchxml_final_features.py`` files)."""
    return mean(file, metric, seeds=seeds, variant=variant)


def _r(file: str, row: str, metric: str = "P@1", seeds: tuple[int, ...] | None = None):
    """The same for a ``row`` of the ``matchxml.py`` files."""
    return mean(file, metric, seeds=seeds, row=row)


def _dev(config: str, metric: str, ranker: str = "tfn+man:2:10:refined"):
    """A row of the dev study at the reduced budget (``matchxml_dev.py``)."""
    file = DEV_B if config in ("matchxml cls:linear", "matchxml mean:centroid") else DEV_A
    return mean(file, metric, config=config, ranker=ranker)


def _se(p1, n: int):
    """The standard error of a P@1 (in percent) on ``n`` texts."""
    return op("sqrt", p1 * (100 - p1) / n)


MX = "matchxml mean:linear"


def _first() -> list[Figure]:
    """Full size at the reference's ranker threshold (current defaults)."""
    p1 = {name: _v(TEST, v) for name, v in (("def", FITTED), ("w05", "0.5:refined"))}
    p1["w025"] = _v(TEST, "0.25:refined")
    p1["row3"] = _v(TEST, "1:refined:nosent")
    base = _r(BASE, SENT)
    seeds = (0, 1, 2)
    out = [
        fig("mx-s0-p1-3dp", _r(MX_S0, "matchxml"), ".3f"),
        fig("thr-gain-p1-base", base - _r(DEFAULTS, SENT), "+.2f"),
        fig("thr-gain-p1-def", p1["def"] - _r(DEFAULTS, "matchxml"), "+.2f"),
        fig("test-def-p1-gap", p1["def"] - base, "+.2f"),
        fig("test-w05-p1-gap", p1["w05"] - base, "+.2f"),
        fig("test-def-p5-gap", _v(TEST, FITTED, "P@5") - _r(BASE, SENT, "P@5"), "+.2f"),
        fig("test-w05-p5-gap", _v(TEST, "0.5:refined", "P@5") - _r(BASE, SENT, "P@5"), "+.2f"),
        fig(
            "test01-def-p5-gap",
            _r(DEFAULTS, "matchxml", "P@5") - _r(DEFAULTS, SENT, "P@5"),
            "+.2f",
        ),
        fig("test-def-psp1-gap", _v(TEST, FITTED, "PSP@1") - _r(BASE, SENT, "PSP@1"), "+.1f"),
        fig("dev-def-p1-gap", _v(DEV_THR, "1:refined") - _v(DEV_THR, "0:pifa"), "+.2f"),
        fig("dev-w05-p1-gap", _v(DEV_THR, "0.5:refined") - _v(DEV_THR, "0:pifa"), "+.2f"),
        *(
            fig(
                f"test-w05-p1-gap-s{s}",
                _v(TEST, "0.5:refined", seeds=(s,)) - _r(BASE, SENT, seeds=(s,)),
                "+.2f",
            )
            for s in seeds
        ),
        fig("dev-w025-p1-gap-s0", _v(DEV_W025, "0.25:refined") - _v(DEV_THR, "0:pifa"), "+.2f"),
        fig("dev-w025-p1-gap-s1", _v(DEV_S1, "0.25:refined") - _v(DEV_S1, "0:pifa"), "+.2f"),
        fig("test-w025-p1-below-base", base - p1["w025"]),
        fig("test-w025-p1-below-w05", p1["w05"] - p1["w025"]),
        fig("off-w05-p1-gap", _v(OFFICIAL, "0.5:refined") - _v(OFFICIAL, "0:pifa")),
        fig("test-w05-p1-below-base", base - p1["w05"]),
        fig("test-row3-p1", p1["row3"]),
        fig("test-row3-p1-std", stat(TEST, "P@1", how="std", variant="1:refined:nosent")),
        fig("test-base-p1", base),
        fig("test-base-p1-std", stat(BASE, "P@1", how="std", row=SENT)),
        *(
            fig(
                f"test-row3-p1-gap-s{s}",
                _v(TEST, "1:refined:nosent", seeds=(s,)) - _r(BASE, SENT, seeds=(s,)),
                "+.2f",
            )
            for s in seeds
        ),
        fig("test-def-p1", p1["def"]),
    ]
    return out


def _dev_reduced() -> list[Figure]:
    """Settings chosen on a dev split, and the reduced budget's test and dev runs."""
    d = _dev(MX, "P@1")
    old = "tfn:1:10:refined"
    tree = "tfn+man:2:10:refined8x16"
    cen = "matchxml mean:centroid"
    r_mx, r_base, r_sent = (_r(REDUCED, r) for r in ("matchxml", "tfidf", SENT))
    return [
        fig("dev-se-p1", _se(d, 1000), ".1f"),
        fig("dev-old-p1-below", d - _dev(MX, "P@1", old), ".1f"),
        fig("dev-old-psp1-below", _dev(MX, "PSP@1") - _dev(MX, "PSP@1", old), ".1f"),
        fig("dev-man-p1-gain", d - _dev(MX, "P@1", "tfn:2:10:refined"), "+.1f"),
        fig("dev-tree-p1-gain", _dev(MX, "P@1", tree) - d, ".1f"),
        fig("dev-tree-psp1-gain", _dev(MX, "PSP@1", tree) - _dev(MX, "PSP@1"), ".0f"),
        fig("dev-tree-p3-loss", _dev(MX, "P@3") - _dev(MX, "P@3", tree), ".1f"),
        fig("dev-tree-p5-loss", _dev(MX, "P@5") - _dev(MX, "P@5", tree), ".1f"),
        fig("dev-tree-ndcg5-loss", _dev(MX, "nDCG@5") - _dev(MX, "nDCG@5", tree), ".1f"),
        fig("dev-cls-p1-gap", abs(d - _dev("matchxml cls:linear", "P@1")), ".1f"),
        fig("dev-cen-p1-gain", _dev(cen, "P@1") - d, "+.1f"),
        fig("dev-cen-psp1-gain", _dev(cen, "PSP@1") - _dev(MX, "PSP@1"), "+.1f"),
        *(
            fig(f"dev-lin-{m.lower().replace('@', '')}-gain", _dev(MX, m) - _dev(cen, m), "+.1f")
            for m in ("P@3", "P@5", "nDCG@5", "PSP@5")
        ),
        fig("dev-mx-p1-over-sent", d - _dev("tfidf+sentence", "P@1"), "+.1f"),
        fig("dev-mx-p1-over-tfidf", d - _dev("tfidf", "P@1"), "+.1f"),
        fig("dev-mx-p5-below-sent", _dev("tfidf+sentence", "P@5") - _dev(MX, "P@5"), ".1f"),
        fig("dev-mx-psp5-below-sent", _dev("tfidf+sentence", "PSP@5") - _dev(MX, "PSP@5"), ".1f"),
        # test and dev at the reduced size
        fig("rdev-mx-p1-gap", _r(REDUCED_DEV, "matchxml") - _r(REDUCED_DEV, SENT), "+.1f"),
        fig("rdev-mx-p1-std", stat(REDUCED_DEV, "P@1", how="std", row="matchxml"), ".1f"),
        fig("red-mx-p1-over-tfidf", r_mx - r_base, ".1f"),
        fig("red-mx-p1-below-sent", r_sent - r_mx, ".1f"),
        fig("rdev-mx-p1-s0", _r(REDUCED_DEV, "matchxml", seeds=(0,)), ".1f"),
        fig("dev-mx-p1", d, ".1f"),
        fig("rdev-thread-p1-move", abs(d - _r(REDUCED_DEV, "matchxml", seeds=(0,))), ".1f"),
    ]


def _xii_reduced() -> list[Figure]:
    row = {r: _r(XII_REDUCED, r) for r in ("xii-1", "xii-2", "xii-3", "matchxml")}
    dev = {r: _r(XII_REDUCED_DEV, r) for r in ("xii-3", "matchxml")}
    return [
        fig("xiir-loss-p1-gain", row["xii-3"] - row["xii-2"], "+.1f"),
        fig("xiir-sent-p1-loss", row["xii-3"] - row["matchxml"], ".1f"),
        fig("xiir-row3-p1", row["xii-3"]),
        fig("red-sent-p1", _r(REDUCED, SENT)),
        fig("xiird-sent-p1-loss", dev["xii-3"] - dev["matchxml"], ".1f"),
        fig("rdev-tfidf-p1", _r(REDUCED_DEV, "tfidf")),
        fig("rdev-sent-p1", _r(REDUCED_DEV, SENT)),
        *(
            fig(f"xiir-mx-p1-s{s}", _r(XII_REDUCED, "matchxml", seeds=(s,)), ".1f")
            for s in range(3)
        ),
        *(fig(f"red-mx-p1-s{s}", _r(REDUCED, "matchxml", seeds=(s,)), ".1f") for s in range(3)),
    ]


def _full01() -> list[Figure]:
    """Full size at 0.1 (test), its dev split, the static block's length, the beam."""
    mx = {m: _r(DEFAULTS, "matchxml", m) for m in ("P@1", "P@3", "P@5", "PSP@1", "PSP@5")}
    sent = {m: _r(DEFAULTS, SENT, m) for m in mx}

    def std(row: str, metric: str):
        return stat(DEFAULTS, metric, how="std", row=row)

    base = _v(DEV, "0:pifa")
    variants = ("1:refined", "1:refined:nosent", "0.5:refined", "1:pifa")
    return [
        fig("full-mx-p1-over-tfidf", mx["P@1"] - _r(DEFAULTS, "tfidf"), ".1f"),
        fig("full-mx-p1-below-sent", sent["P@1"] - mx["P@1"]),
        fig("full-mx-psp1-below-sent", sent["PSP@1"] - mx["PSP@1"], ".1f"),
        fig("full-p1-std-min", op("min", std(SENT, "P@1"), std("matchxml", "P@1"))),
        fig("full-p1-std-max", op("max", std(SENT, "P@1"), std("matchxml", "P@1"))),
        fig("full-psp1-std-min", op("min", std(SENT, "PSP@1"), std("matchxml", "PSP@1"))),
        fig("full-psp1-std-max", op("max", std(SENT, "PSP@1"), std("matchxml", "PSP@1"))),
        fig("full-mx-p3-below-sent", sent["P@3"] - mx["P@3"], ".1f"),
        fig("full-mx-p5-below-sent", sent["P@5"] - mx["P@5"], ".1f"),
        fig("full-mx-psp5-below-sent", sent["PSP@5"] - mx["PSP@5"], ".1f"),
        fig("full-mx-p1-below-sent-1dp", sent["P@1"] - mx["P@1"], ".1f"),
        # fit minutes: seeds 0 and 2 ran in the contended processes, seed 1 alone
        fig("full-mx-fit-min", _r(DEFAULTS, "matchxml", "fit s", (0, 2)) / 60, ".0f"),
        fig("full-sent-fit-min-lo", _min_fit(SENT, "min"), ".0f"),
        fig("full-sent-fit-min-hi", _min_fit(SENT, "max"), ".0f"),
        fig("full-mx-fit-min-s1", _r(DEFAULTS, "matchxml", "fit s", (1,)) / 60, ".0f"),
        # the dev split at full size
        fig("fdev-p1-within", op("max", *(abs(_v(DEV, v) - base) for v in variants)), ".1f"),
        fig("fdev-se-p1", _se(base, 4133), ".1f"),
        fig("fdev-p1-above-max", op("max", *(_v(DEV, v) - base for v in variants))),
        fig("fdev-s300-p1-gain", _v(DEV_300, "1:refined") - _v(DEV, "1:refined"), "+.2f"),
        fig("fdev-all-p1-loss", _v(DEV, "1:refined") - _v(DEV_ALL, "1:refined"), ".1f"),
        # the static block at 256 tokens
        fig("s256-mx-p1-gain", _v(DEV_256, "1:refined") - _v(DEV_256, "0:pifa")),
        fig(
            "s256-mx-psp1-gain",
            _v(DEV_256, "1:refined", "PSP@1") - _v(DEV_256, "0:pifa", "PSP@1"),
            ".1f",
        ),
        fig("s256-base-p1-loss", base - _v(DEV_256, "0:pifa")),
        fig("fdev-base-p1", base),
        fig("s256-base-p1", _v(DEV_256, "0:pifa")),
        fig("s256-base-p5-gain", _v(DEV_256, "0:pifa", "P@5") - _v(DEV, "0:pifa", "P@5"), "+.2f"),
        fig(
            "s256-base-psp5-gain",
            _v(DEV_256, "0:pifa", "PSP@5") - _v(DEV, "0:pifa", "PSP@5"),
            "+.2f",
        ),
        fig("fdev-mx-p1", _v(DEV, "1:refined")),
        fig("s256-mx-p1", _v(DEV_256, "1:refined")),
        fig("s256-w05-p1-gap", _v(DEV_256, "0.5:refined") - base, "+.2f"),
        # the beam
        *(
            fig(f"beam50-{who}-{m.lower().replace('@', '')}", _v(DEV_BEAM, v, m))
            for who, v in (("base", "0:pifa"), ("mx", "1:refined"))
            for m in ("P@1", "P@5", "PSP@5")
        ),
        *(
            fig(f"beam10-{who}-{m.lower().replace('@', '')}", _v(DEV, v, m))
            for who, v in (("base", "0:pifa"), ("mx", "1:refined"))
            for m in ("P@1", "P@5", "PSP@5")
        ),
        fig("beam50-base-p1-gap", _v(DEV_BEAM, "0:pifa") - base, "+.2f"),
        fig("beam50-mx-p1-gap", _v(DEV_BEAM, "1:refined") - _v(DEV, "1:refined"), "+.2f"),
    ]


def _min_fit(row: str, how: str):
    """The shortest or longest fit of ``row`` in minutes, over seeds 0 and 2."""
    return stat(DEFAULTS, "fit s", (0, 2), how, row=row) / 60


def _threshold() -> list[Figure]:
    """The ranker's weight threshold on the dev split, a second fine-tuning, 300 steps."""
    variants = ("1:refined", "1:refined:nosent", "0.5:refined", "1:pifa")
    base = _v(DEV_THR, "0:pifa")

    def gains(metric: str):
        return [_v(DEV_THR, v, metric) - _v(DEV_THR, "0:pifa", metric) for v in variants]

    lift = [_v(DEV_THR, v) - _v(DEV, v) for v in variants]
    at01_p5 = [_v(DEV, "0:pifa", "P@5") - _v(DEV, v, "P@5") for v in variants]
    return [
        fig("thr-base-p1-lift", base - _v(DEV, "0:pifa"), "+.2f"),
        fig("thr-mx-p1-lift-min", op("min", *lift), "+.2f"),
        fig("thr-mx-p1-lift-max", op("max", *lift), "+.2f"),
        fig("thr-mx-p1-gap-min", op("min", *gains("P@1")), "+.2f"),
        fig("thr-mx-p1-gap-max", op("max", *gains("P@1")), "+.2f"),
        fig("thr-mx-psp1-gap-min", op("min", *gains("PSP@1")), "+.1f"),
        fig("thr-mx-psp1-gap-max", op("max", *gains("PSP@1")), "+.1f"),
        fig("thr-mx-p5-within", op("max", *(abs(g) for g in gains("P@5"))), ".1f"),
        fig("thr01-mx-p5-below-max", op("max", *at01_p5), ".1f"),
        fig(
            "thr-mx-p1-margin",
            op("max", *(_v(DEV_THR, v) for v in variants))
            - op("min", *(_v(DEV_THR, v) for v in variants)),
            ".1f",
        ),
        # a second dev fine-tuning and the weight 0.25
        fig(
            "w025-p1-over-w05-s0", _v(DEV_W025, "0.25:refined") - _v(DEV_THR, "0.5:refined"), "+.2f"
        ),
        fig("w025-p1-over-w05-s1", _v(DEV_S1, "0.25:refined") - _v(DEV_S1, "0.5:refined"), "+.2f"),
        fig("dev-base-p1-seed-move", abs(_v(DEV_S1, "0:pifa") - base)),
        *(
            fig(f"s300-{v.replace(':', '-').replace('.', '')}-p1", _v(DEV_300_THR, v))
            for v in ("0.5:refined", "1:refined", "1:refined:nosent")
        ),
        *(
            fig(f"s150-{v.replace(':', '-').replace('.', '')}-p1", _v(DEV_THR, v))
            for v in ("0.5:refined", "1:refined", "1:refined:nosent")
        ),
    ]


def _official() -> list[Figure]:
    w05, base = _v(OFFICIAL, "0.5:refined"), _v(OFFICIAL, "0:pifa")
    gaps = [
        _v(OFFICIAL, "0.5:refined", seeds=(s,)) - _v(OFFICIAL, "0:pifa", seeds=(s,))
        for s in range(3)
    ]
    per_seed_base = [_v(OFFICIAL, "0:pifa", seeds=(s,)) for s in range(3)]

    def wl(variant: str, metric: str, file: str = WORDLLAMA):
        return _v(file, variant, metric, seeds=(0,))

    return [
        fig("off-w05-p1-over-def", w05 - _v(OFFICIAL, FITTED), "+.2f"),
        fig("off-w05-p1-over-base", w05 - base, "+.2f"),
        *(fig(f"off-w05-p1-gap-s{s}", g, "+.2f") for s, g in enumerate(gaps)),
        fig("off-base-p1-span", op("max", *per_seed_base) - op("min", *per_seed_base)),
        fig("off-w05-p1-gap-std", op("std", *gaps)),
        # a second static model (seed 0, official dev)
        fig("wl-base-p1", wl("0:pifa", "P@1")),
        fig("wl-base-p5", wl("0:pifa", "P@5")),
        fig("off-base-p1-s0", wl("0:pifa", "P@1", OFFICIAL)),
        fig("off-base-p5-s0", wl("0:pifa", "P@5", OFFICIAL)),
        fig("wl-mx-p1", wl("1:refined", "P@1")),
        fig("wl-mx-p5", wl("1:refined", "P@5")),
        fig("wl-w05-p1", wl("0.5:refined", "P@1")),
        fig("wl-w05-p5", wl("0.5:refined", "P@5")),
        fig("off-mx-p1-s0", wl(FITTED, "P@1", OFFICIAL)),
        fig("off-mx-p5-s0", wl(FITTED, "P@5", OFFICIAL)),
        fig("off-w05-p1-s0", wl("0.5:refined", "P@1", OFFICIAL)),
        fig("off-w05-p5-s0", wl("0.5:refined", "P@5", OFFICIAL)),
    ]


def _xii_full() -> list[Figure]:
    row3 = _v(TEST, "1:refined:nosent")
    r3 = {m: _r(XII, "xii-3", m) for m in ("P@1", "PSP@1")}
    return [
        fig("xiit-loss-p1-gain", row3 - _r(XII_THR, "xii-2"), "+.2f"),
        fig("xiit-l2v-p1-gap", _r(XII_THR, "xii-2") - _r(XII_THR, "xii-1"), "+.2f"),
        fig("xiit-sent-p1-loss", row3 - _v(TEST, FITTED)),
        fig(
            "xiit-sent-psp1-gain",
            _v(TEST, FITTED, "PSP@1") - _v(TEST, "1:refined:nosent", "PSP@1"),
            "+.1f",
        ),
        fig("xiit-row3-p1-gap", row3 - _r(BASE, SENT), "+.2f"),
        fig(
            "xiit-row3-p5-gap", _v(TEST, "1:refined:nosent", "P@5") - _r(BASE, SENT, "P@5"), "+.2f"
        ),
        # at 0.1
        fig("xii-loss-p1-gain", r3["P@1"] - _r(XII, "xii-2"), "+.1f"),
        fig("xii-l2v-p1-loss", _r(XII, "xii-1") - _r(XII, "xii-2"), ".1f"),
        fig("xii-sent-p1-loss", r3["P@1"] - _r(XII, "matchxml"), ".1f"),
        fig("xii-p1-std-min", op("min", *_stds())),
        fig("xii-p1-std-max", op("max", *_stds())),
        fig("xii-row3-p1-gap", r3["P@1"] - _r(XII, SENT), "+.2f"),
        fig("xii-row3-psp1-gap", r3["PSP@1"] - _r(XII, SENT, "PSP@1"), "+.1f"),
        fig("fdev-nosent-p1-over-def", _v(DEV, "1:refined:nosent") - _v(DEV, "1:refined"), "+.2f"),
        fig("fdev-nosent-p1-over-base", _v(DEV, "1:refined:nosent") - _v(DEV, "0:pifa"), "+.2f"),
    ]


def _stds():
    return [stat(XII, "P@1", how="std", row=r) for r in ("xii-3", "matchxml")]


def _gpu() -> list[Figure]:
    def g(variant: str, metric: str = "P@1", seeds: tuple[int, ...] | None = None):
        return _v(GPU, variant, metric, seeds=seeds)

    return [
        *(
            fig(f"gpu-mx-p1-gap-s{s}", g("1:refined", seeds=(s,)) - g("0:pifa", seeds=(s,)), "+.2f")
            for s in range(3)
        ),
        fig("gpu-mx-p3-s0", g("1:refined", "P@3", (0,))),
        fig("gpu-sent-p3-s0", g("0:pifa", "P@3", (0,))),
        fig("gpu-mx-psp1-gap", g("1:refined", "PSP@1") - g("0:pifa", "PSP@1"), "+.1f"),
        fig("gpu-base-sent-p1-s0", _r(GPU_BASE, SENT)),
        fig("gpu-base-tfidf-p1-s0", _r(GPU_BASE, "tfidf")),
        fig("gpu-ranker-p1", _v(GPU_RANKER, "1:refined")),
        fig("gpu-mx-p1-s0", g("1:refined", seeds=(0,))),
        fig("gpu-ranker-fit-s", _v(GPU_RANKER, "1:refined", "ranker fit s"), ".1f"),
        fig("gpu-ranker-cpu-s", _v(GPU_RANKER, "1:refined", "ranker fit cpu s"), ".0f"),
        fig(
            "gpu-ranker-cores",
            _v(GPU_RANKER, "1:refined", "ranker fit cpu s")
            / _v(GPU_RANKER, "1:refined", "ranker fit s"),
            ".0f",
        ),
        fig("gpu-mx-fit-s-s0", g("1:refined", "ranker fit s", (0,)), ".1f"),
        *(
            fig(f"gpu-{phase}-s", val(GPU_RANKER, "parts", "fit_times", phase), ".1f")
            for phase in ("features", "tree", "encoding")
        ),
    ]


FIGURES: tuple[Figure, ...] = (
    *_first(),
    *_dev_reduced(),
    *_xii_reduced(),
    *_full01(),
    *_threshold(),
    *_official(),
    *_xii_full(),
    *_gpu(),
)
