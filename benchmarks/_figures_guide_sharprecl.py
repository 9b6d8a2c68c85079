"""The numbers in the sentences and tables of ``docs/sharprecl.rst``
(:mod:`benchmarks._figures`).

Two kinds of results files back the page. The older studies keep per-seed records under
``runs``: ``sharprecl_ir50``, ``sharprecl_ir50_single_view_*``, ``sharprecl_ir50_tuned_mu_*``,
``sharprecl_dev_weighting_*``, ``sharprecl_dev_normlogits_*``, ``sharprecl_dev_lace_cr`` and
the ``*_1view_wo_cls_seed0`` files (metrics as fractions, shown here in percent), and the
diagnosis files ``sharprecl_cr_ir50_{diagnosis,dev_screen,dev_batch128}`` (``f1`` already in
percent). The pooled and ``--select`` files (``sharprecl_ir50_sample_std``,
``sharprecl_{cr,trec}_ir50_mu0.1``, ``sharprecl_baldev_*``) keep only ``"mean ± std"`` text
per row, their per-seed sources being gone, so those figures read that text
(:func:`~benchmarks._figures.summary`) and a mean over data sets is the mean of the
rounded means the files show.

Not figures, and why (``EXEMPT``): the gradient study kept only its .md
(``sharprecl_gradients.md``); the per-seed values of the balanced dev split (the trec
``mu = 1`` test values, the per-seed cr gaps) and the one-view-minus-two-views pairing
(``sharprecl_baldev_S_1view_vs_2view``) have no results file; the memory sizes of the
explanations are arithmetic on the stated byte count, not measurements.
"""

from __future__ import annotations

from benchmarks._figures import Expr, Figure, fig, summary, val

PAGE = "sharprecl.rst"
# Decimals the prose may type anywhere, and why.
TYPED = {
    "0.1": "a setting: a value of mu (contrastive_weight)",
    "0.3": "a setting: a value of mu (contrastive_weight)",
    "0.5": "a setting: Beta(0.5, 0.5), the mixed share's start",
    "0.7": "a setting: the top of the paper's mu range",
    "0.9999": "a setting: the effective-number weights' beta",
}
GONE = "the per-seed source files of the balanced dev split are gone"
PAIRED = "the one view minus two views pairing kept no results file"
GRADIENTS = "the gradient study kept only its .md"
MEMORY = "arithmetic on the stated bytes per text, not a measurement"
# (a decimal, the words before it) -> why the prose may type it there
EXEMPT = {
    ("3.5", "section"): "a section number of the paper",
    ("0.2", "per data set ("): "a setting: the bottom of the paper's mu range",
    ("0.02", "have a CE of about"): GRADIENTS,
    ("0.2", "about"): GRADIENTS,
    ("1.2", "the CE is about"): GRADIENTS,
    ("0.177", "weights is"): GRADIENTS,
    ("0.040", "and"): GRADIENTS,
    ("0.042", "against"): GRADIENTS,
    ("8.5", "that is"): MEMORY,
    ("16.8", "and"): MEMORY,
    ("0.1", "seeds, by"): GONE + " (0.1 is also a typed setting)",
    ("0.8", "by 0.1,"): GONE,
    ("1.1", "and"): GONE,
    ("91.51", "gives"): GONE,
    ("81.21", "91.51,"): GONE,
    ("88.76", "and"): GONE,
    ("1.48", "dev: cr"): PAIRED,
    ("1.24", "1.48 ±"): PAIRED,
    ("0.45", "trec"): PAIRED,
    ("0.11", "0.45 ±"): PAIRED,
    ("0.70", "biomedical"): PAIRED,
    ("0.63", "0.70 ±"): PAIRED,
    ("0.42", "on test"): PAIRED,
    ("1.26", "0.42 ±"): PAIRED,
    ("1.55", "1.26,"): PAIRED,
    ("1.45", "1.55 ±"): PAIRED,
    ("0.24", "and"): PAIRED,
    ("0.72", "0.24 ±"): PAIRED,
}

SET = {"trec": "trec_ir50", "cr": "cr_ir50", "bio": "biomedical_ir50"}
WEIGHTING = {"trec": "trec", "cr": "cr", "bio": "biomedical"}  # dev_weighting_S names
MU = {"mu1": "1", "mu03": "0.3", "mu01": "0.1"}


def run(file: str, data: str, row: str, seed: int, metric: str = "macro_f1") -> Expr:
    """One seed's metric of a ``runs`` file, in percent."""
    return val(file, "runs", {"dataset": SET[data], "row": row, "seed": seed}, metric) * 100


def diag(file: str, variant: str, metric: str = "f1") -> Expr:
    """A diagnosis run's value (``f1`` is in percent there)."""
    return val(f"sharprecl_cr_ir50_{file}", "runs", {"variant": variant}, metric)


def negatives(file: str, variant: str) -> Expr:
    """The negative reviews a diagnosis run predicted: the texts less its positives."""
    where = ("sharprecl_cr_ir50_" + file, "runs", {"variant": variant})
    return (
        val(*where, "true", "negative")
        + val(*where, "true", "positive")
        - val(*where, "pred", "positive")
    )


def summ(file: str, data: str, row: str, column: str = "macro-F1", part: str = "mean"):
    return summary(file, "summary", {"dataset": SET[data], "row": row}, column, part=part)


def pm(name: str, file: str, data: str, row: str, column: str, spec: str = ".2f"):
    """``name`` and ``name-std``: the mean and std of a ``"mean ± std"`` text."""
    return [
        fig(name, summ(file, data, row, column), spec),
        fig(f"{name}-std", summ(file, data, row, column, "std")),
    ]


def _diagnosis() -> list[Figure]:
    ir50, one = "sharprecl_ir50", "sharprecl_ir50_single_view_cr_bio"
    out = [
        fig("cr-s2-f1", summ(ir50, "cr", "SharpReCL")),
        fig("cr-la-f1", summ(ir50, "cr", "logit-adjusted CE")),
    ]
    for seed in (0, 1, 2):
        out += [
            fig(f"cr-s2-f1-s{seed}", run(ir50, "cr", "SharpReCL", seed)),
            fig(f"cr-la-f1-s{seed}", run(ir50, "cr", "logit-adjusted CE", seed)),
            fig(f"cr-s1-f1-s{seed}", run(one, "cr", "SharpReCL 1 view", seed)),
        ]
    out += [
        fig("diag-la-f1", diag("diagnosis", "la")),
        fig("diag-s1-f1", diag("diagnosis", "s1")),
        fig(
            "diag-la-neg",
            val("sharprecl_cr_ir50_diagnosis", "runs", {"variant": "la"}, "pred", "negative"),
            ".0f",
        ),
        fig(
            "diag-s1-neg",
            val("sharprecl_cr_ir50_diagnosis", "runs", {"variant": "s1"}, "pred", "negative"),
            ".0f",
        ),
    ]
    screen = {
        "la": "la",
        "s1": "s1",
        "nobn": "s1+nobn",
        "paper": 's1+p:contrastive_weighting="paper"',
        "mu01": "s1+p:contrastive_weight=0.1",
    }
    for name, variant in screen.items():
        out += [
            fig(f"screen-{name}", diag("dev_screen", variant)),
            fig(f"screen-{name}-neg", negatives("dev_screen", variant), ".0f"),
        ]
    batch = {
        "la-32": ("dev_batch128", "la"),
        "la-128": ("dev_batch128", "la+p:batch_size=128"),
        "s1-32": ("dev_screen", "s1"),
        "s1-128": ("dev_batch128", "s1+p:batch_size=128"),
        "s2-32": ("dev_batch128", "s2"),
        "s2-128": ("dev_batch128", "s2+p:batch_size=128"),
    }
    for name, (file, variant) in batch.items():
        out += [
            fig(f"batch-{name}", diag(file, variant)),
            fig(f"batch-{name}-neg", negatives(file, variant), ".0f"),
        ]
    loss = diag("dev_batch128", "la") - diag("dev_batch128", "la+p:batch_size=128")
    out.append(fig("batch-la-loss", loss, ".0f"))
    paper, ref = 's1+p:contrastive_weighting="paper"', "s1"
    out += [
        fig("screen-paper-loss-first", diag("dev_screen", paper, "loss_first"), ".1f"),
        fig("screen-paper-loss-last", diag("dev_screen", paper, "loss_last"), ".1f"),
        fig("screen-ref-loss-first", diag("dev_screen", ref, "loss_first")),
        fig("screen-ref-loss-last", diag("dev_screen", ref, "loss_last")),
    ]
    return out


def _mu01() -> list[Figure]:
    cr, trec = "sharprecl_cr_ir50_mu0.1", "sharprecl_trec_ir50_mu0.1"
    rows = {
        "la": "logit-adjusted CE",
        "s2": "SharpReCL",
        "s1": "SharpReCL 1 view",
        "s1-mu01": "SharpReCL 1 view (contrastive_weight=0.1)",
    }
    out = []
    for name, row in rows.items():
        out += pm(f"mu01-cr-{name}-acc", cr, "cr", row, "accuracy")
        out += pm(f"mu01-cr-{name}-f1", cr, "cr", row, "macro-F1")
    for name in ("la", "s1", "s1-mu01"):
        out += pm(f"mu01-trec-{name}-f1", trec, "trec", rows[name], "macro-F1")
    return out


def _tuned() -> list[Figure]:
    std, ir50 = "sharprecl_ir50_sample_std", "sharprecl_ir50"
    tuned = {
        "trec": "sharprecl_ir50_tuned_mu_cr_trec",
        "cr": "sharprecl_ir50_tuned_mu_cr_trec",
        "bio": "sharprecl_ir50_tuned_mu_bio",
    }
    out = []
    for data in SET:
        out += pm(f"std-{data}-la", std, data, "logit-adjusted CE", "macro-F1")
        out += pm(f"std-{data}-s2", std, data, "SharpReCL", "macro-F1")
        out += pm(f"tuned-{data}", tuned[data], data, "SharpReCL", "macro-F1")
        la = summ(std, data, "logit-adjusted CE")
        gain = summ(tuned[data], data, "SharpReCL") - la
        out += [
            # the page says "below" for cr, a sign for the others
            fig("tuned-cr-below", abs(gain), ".1f")
            if data == "cr"
            else fig(f"tuned-{data}-gain", gain, "+.1f"),
            fig(f"mu1-{data}-gap", abs(summ(std, data, "SharpReCL") - la), ".1f"),
        ]
    cr_trec = tuned["cr"]

    def tuned_run(data: str, seed: int, *metric: str) -> Expr:
        where = {"dataset": SET[data], "row": "SharpReCL", "seed": seed}
        return val(cr_trec, "runs", where, *metric) * 100

    out += [
        fig("tuned-cr-s0", tuned_run("cr", 0, "macro_f1")),
        fig("tuned-cr-s1", tuned_run("cr", 1, "macro_f1")),
        fig("tuned-cr-s2", tuned_run("cr", 2, "macro_f1")),
        fig("tuned-cr-s1-dev-mu1", tuned_run("cr", 1, "dev_f1s", "1"), ".1f"),
        fig("tuned-cr-s1-dev-mu01", tuned_run("cr", 1, "dev_f1s", "0.1"), ".1f"),
    ]
    for seed in (1, 2):
        lost = run(ir50, "trec", "SharpReCL", seed) - tuned_run("trec", seed, "macro_f1")
        out.append(fig(f"tuned-trec-s{seed}-loss", lost, ".1f"))
    return out


def mean3(name: str, kind: str, row: str) -> Expr:
    """The mean over the three sets of their mean dev macro-F1 (``baldev(S, kind)``)."""
    a, b, c = (summ(baldev(d, kind), d, row, "dev macro-F1") for d in SET)
    return (a + b + c) / 3


def baldev(data: str, kind: str = "") -> str:
    return f"sharprecl_baldev_{data}{kind}"


def _baldev() -> list[Figure]:
    out = []
    rows = {f"mu{k[2:]}": f"SharpReCL, contrastive_weight={v}" for k, v in MU.items()}
    rows["la"] = "logit-adjusted CE"
    for data in SET:
        for name, row in rows.items():
            out.append(fig(f"bd-{data}-{name}-dev", summ(baldev(data), data, row, "dev macro-F1")))
            out.append(fig(f"bd-{data}-{name}-test", summ(baldev(data), data, row)))
        chosen = "SharpReCL, contrastive_weight chosen on dev"
        out += [
            fig(f"bd-{data}-gap", summ(baldev(data), data, chosen, "macro-F1 - reference"), "+.2f"),
            fig(
                f"bd-{data}-gap-std",
                summ(baldev(data), data, chosen, "macro-F1 - reference", "std"),
            ),
        ]
    # the best mean dev macro-F1 over the three sets
    for name in ("mu1", "mu03", "mu01"):
        out.append(fig(f"bd-{name}-dev-mean", mean3(name, "", rows[name])))
    costs = summ(baldev("trec"), "trec", rows["mu03"], "dev macro-F1") - summ(
        baldev("trec"), "trec", rows["mu01"], "dev macro-F1"
    )
    out.append(fig("bd-trec-mu01-cost", costs, ".1f"))
    # the linear probe
    probe = "w/o CLS, contrastive_weight=1"
    test_gap = {
        "trec": "macro-F1 - reference",
        "cr": "macro-F1 - reference",
        "bio": "test macro-F1 - reference",
    }
    for data in SET:
        file = baldev(data, "_probe")
        out += pm(f"probe-{data}-dev", file, data, probe, "dev macro-F1")
        out += pm(f"probe-{data}-test", file, data, probe, "macro-F1")
        gap = summ(file, data, probe, test_gap[data])
        out += [
            fig(f"probe-{data}-gap", gap, "+.2f"),
            fig(f"probe-{data}-gap-std", summ(file, data, probe, test_gap[data], "std")),
        ]
    out += pm(
        "probe-bio-dev-gap",
        baldev("bio", "_probe"),
        "bio",
        probe,
        "dev macro-F1 - reference",
        "+.2f",
    )
    out.append(fig("probe-dev-mean", mean3("probe", "_probe", probe)))
    below = summ(baldev("cr", "_probe"), "cr", "logit-adjusted CE", "dev macro-F1") - summ(
        baldev("cr", "_probe"), "cr", probe, "dev macro-F1"
    )
    out.append(fig("probe-cr-dev-below", below, ".1f"))
    return out


def _views() -> list[Figure]:
    rows = {
        "2v-mu01": "SharpReCL, contrastive_weight=0.1",
        "2v-mu03": "SharpReCL, contrastive_weight=0.3",
        "1v-mu01": "SharpReCL 1 view, contrastive_weight=0.1",
        "1v-mu03": "SharpReCL 1 view, contrastive_weight=0.3",
        "la": "logit-adjusted CE",
    }
    out = []
    for data in SET:
        file = baldev(data, "_views")
        for name in ("1v-mu01", "1v-mu03"):
            out.append(fig(f"vw-{data}-{name}-dev", summ(file, data, rows[name], "dev macro-F1")))
            out.append(fig(f"vw-{data}-{name}-test", summ(file, data, rows[name])))
        chosen = "variant chosen on dev"
        out += pm(f"vw-{data}-gap", file, data, chosen, "test macro-F1 - reference", "+.2f")
    for name in rows:
        if name == "la":
            continue
        out.append(fig(f"vw-{name}-dev-mean", mean3(name, "_views", rows[name])))
    return out


def _probe_seed0() -> list[Figure]:
    ir50 = "sharprecl_ir50"
    return [
        fig("trec-la-f1-s0", run(ir50, "trec", "logit-adjusted CE", 0)),
        fig("trec-s1-f1-s0", run("sharprecl_ir50_single_view_trec", "trec", "SharpReCL 1 view", 0)),
        fig("cr-probe-s0", run("sharprecl_cr_ir50_1view_wo_cls_seed0", "cr", "w/o CLS", 0)),
        fig("trec-probe-s0", run("sharprecl_trec_ir50_1view_wo_cls_seed0", "trec", "w/o CLS", 0)),
    ]


def _dev_screens() -> list[Figure]:
    out = []
    rows = {"ref": "SharpReCL", "paper": "SharpReCL paper weighting", "probe": "w/o CLS"}

    def weighting(data: str, row: str, metric: str) -> Expr:
        return run(f"sharprecl_dev_weighting_{WEIGHTING[data]}", data, row, 0, metric)

    def normlogits(data: str, metric: str) -> Expr:
        return run(f"sharprecl_dev_normlogits_{WEIGHTING[data]}", data, "SharpReCL", 0, metric)

    for data in SET:
        for name, row in rows.items():
            out.append(fig(f"dw-{data}-{name}-dev", weighting(data, row, "dev_macro_f1")))
            out.append(fig(f"dw-{data}-{name}-test", weighting(data, row, "macro_f1")))
        gain = weighting(data, "w/o CLS", "dev_macro_f1") - weighting(
            data, "SharpReCL", "dev_macro_f1"
        )
        out.append(fig(f"dw-{data}-probe-gain", gain, "+.2f" if data == "trec" else "+.1f"))
        out.append(fig(f"nl-{data}-dev", normlogits(data, "dev_macro_f1")))
        out.append(fig(f"nl-{data}-test", normlogits(data, "macro_f1")))
    lace = "sharprecl_dev_lace_cr"
    la_dev = run(lace, "cr", "logit-adjusted CE", 0, "dev_macro_f1")
    la_test = run(lace, "cr", "logit-adjusted CE", 0, "macro_f1")
    out += [
        fig("nl-la-cr-dev", la_dev),
        fig("nl-la-cr-test", la_test),
        fig(
            "nl-cr-dev-gain",
            normlogits("cr", "dev_macro_f1") - weighting("cr", "SharpReCL", "dev_macro_f1"),
            "+.1f",
        ),
        fig("nl-cr-dev-vs-la", normlogits("cr", "dev_macro_f1") - la_dev, "+.1f"),
        fig("nl-cr-test-vs-la", normlogits("cr", "macro_f1") - la_test, "+.1f"),
        fig(
            "nl-trec-dev-loss",
            weighting("trec", "SharpReCL", "dev_macro_f1") - normlogits("trec", "dev_macro_f1"),
            ".1f",
        ),
        fig(
            "nl-trec-test-loss",
            weighting("trec", "SharpReCL", "macro_f1") - normlogits("trec", "macro_f1"),
            ".1f",
        ),
        fig(
            "nl-bio-dev-gain",
            normlogits("bio", "dev_macro_f1") - weighting("bio", "SharpReCL", "dev_macro_f1"),
            "+.2f",
        ),
        fig(
            "nl-bio-test-gain",
            normlogits("bio", "macro_f1") - weighting("bio", "SharpReCL", "macro_f1"),
            "+.1f",
        ),
    ]
    return out


FIGURES: tuple[Figure, ...] = (
    *_diagnosis(),
    *_mu01(),
    *_tuned(),
    *_baldev(),
    *_views(),
    *_probe_seed0(),
    *_dev_screens(),
)
