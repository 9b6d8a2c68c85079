"""The numbers in the sentences of ``docs/benchmarks/text_classifiers.rst``
(:mod:`benchmarks._figures`): SharpReCL and KNN-BERT against plain fine-tuning.

The pooled files (``sharprecl_ir50_sample_std`` and the others) write each metric as the
text ``"mean ± std"`` (sample std over seeds), read with :func:`~benchmarks._figures.part`;
their ``s/epoch`` is a number. Macro-F1 and accuracy are in percent. A difference is
written ``row - baseline`` the way the sentence reads it.
"""

from __future__ import annotations

from benchmarks._figures import Figure, fig, op, summary, val

PAGE = "benchmarks/text_classifiers.rst"
TYPED = {
    "0.1": "a setting: the contrastive_weight (mu) default (also an ablation's per-seed value)",
    "0.3": "a setting: the contrastive_weight chosen on trec (also an ablation's per-seed value)",
}
_ABLATION = "the ablations' per-seed files were not kept; only their pooled text is in the JSON"
EXEMPT = {
    ("1.0", "a large spread:"): _ABLATION,
    ("2.0", "a large spread: 1.0,"): _ABLATION,
    ("11.8", "1.0, 2.0 and"): _ABLATION,
    ("1.0", "changes macro-F1 by"): _ABLATION,
    ("0.5", "-0.3 and"): _ABLATION,
    ("0.4", "all three ("): _ABLATION,
    ("1.4", "+0.1,"): _ABLATION,
}

IR50 = "sharprecl_ir50_sample_std"
MU = "sharprecl_ir50_mu_default"
DEFAULTS = "sharprecl_ir50_defaults"
VIEW_TREC = "sharprecl_ir50_single_view_trec"
PAPER = "sharprecl_paper_sets"
WEIGHTING = "sharprecl_ir50_weighting"
KNN = "knnbert_sample_std"
KNN100 = "knnbert_fewshot100"
KNN_FULL = "knnbert_full"

SETS = {"trec": "trec_ir50", "cr": "cr_ir50", "bio": "biomedical_ir50"}
LA, CE, SHARP, VIEW = "logit-adjusted CE", "plain CE", "SharpReCL", "SharpReCL 1 view"
MU01 = "SharpReCL (contrastive_weight=0.1)"
MU03 = "SharpReCL (contrastive_weight=0.3)"
DEF = "SharpReCL 1 view (contrastive_weight=0.1)"
PAPER_SETS = {"ohsumed": "sharprecl_ohsumed_titles", "trec": "sharprecl_trec", "r52": "r52"}


def _f1(file: str, dataset: str, row: str, index: int = 0, key: str = "macro-F1"):
    """The mean (``index`` 0) or std (1) of a pooled row's metric."""
    which = ("mean", "std")[index]
    return summary(file, "summary", {"dataset": dataset, "row": row}, key, part=which)


def _epoch(file: str, dataset: str, row: str):
    return val(file, "summary", {"dataset": dataset, "row": row}, "s/epoch")


def _cells(prefix: str, file: str, row: str, sets=("trec", "cr", "bio")) -> list[Figure]:
    """A table column: mean and std per data set."""
    return [
        fig(f"{prefix}-{s}{'-std' if i else ''}", _f1(file, SETS[s], row, i))
        for s in sets
        for i in (0, 1)
    ]


def _sharprecl_ir50() -> list[Figure]:
    out = [
        *_cells("la", IR50, LA),
        *_cells("sr", IR50, SHARP),
        *_cells("mu01", MU, MU01),
        *_cells("mu03", MU, MU03, ("trec",)),
        *(
            fig(f"mu01-vs-la-{s}", _f1(MU, d, MU01) - _f1(IR50, d, LA), "+.1f")
            for s, d in SETS.items()
        ),
        fig("mu1-below-la-cr", _f1(IR50, SETS["cr"], LA) - _f1(IR50, SETS["cr"], SHARP), ".0f"),
        fig(
            "mu1-over-mu01-trec",
            _f1(IR50, SETS["trec"], SHARP) - _f1(MU, SETS["trec"], MU01),
            ".1f",
        ),
        *(
            fig(f"def-vs-la-{s}", _f1(DEFAULTS, d, DEF) - _f1(IR50, d, LA), "+.1f")
            for s, d in SETS.items()
        ),
        *(
            fig(f"sr-over-ce-{s}", _f1(IR50, d, SHARP) - _f1(IR50, d, CE), ".1f")
            for s, d in SETS.items()
        ),
    ]
    cost = [_epoch(IR50, d, SHARP) / _epoch(IR50, d, CE) for d in SETS.values()]
    out += [
        fig("sr-epoch-cost-min", op("min", *cost)),
        fig("sr-epoch-cost-max", op("max", *cost), ".1f"),
        # one view
        *_cells("ce", IR50, CE),
        *_cells("view", IR50, VIEW),
        fig(
            "view-epoch-ratio-trec",
            _epoch(VIEW_TREC, SETS["trec"], VIEW) / _epoch(VIEW_TREC, SETS["trec"], CE),
            ".2f",
            "x",
        ),
        fig("view-epoch-s-trec", _epoch(VIEW_TREC, SETS["trec"], VIEW), ".0f"),
        fig("ce-epoch-s-trec", _epoch(VIEW_TREC, SETS["trec"], CE), ".0f"),
        *(
            fig(
                f"second-view-gain-{s}", _f1(IR50, SETS[s], SHARP) - _f1(IR50, SETS[s], VIEW), ".1f"
            )
            for s in ("trec", "cr")
        ),
    ]
    return out


def _paper_sets() -> list[Figure]:
    def f(name: str, row: str):
        return _f1(PAPER, PAPER_SETS[name], row, key="macro_f1")

    def epoch(name: str, row: str):
        return _epoch(PAPER, PAPER_SETS[name], row) / _epoch(PAPER, PAPER_SETS[name], CE)

    return [
        *(fig(f"paper-sr-over-ce-{n}", f(n, SHARP) - f(n, CE), ".1f") for n in ("ohsumed", "r52")),
        *(fig(f"paper-sr-vs-la-{n}", f(n, SHARP) - f(n, LA), "+.1f") for n in ("ohsumed", "r52")),
        fig("paper-sr-over-la-trec", f("trec", SHARP) - f("trec", LA), "+.1f"),
        *(fig(f"paper-two-view-{n}", epoch(n, SHARP), ".2f", "x") for n in PAPER_SETS),
        *(fig(f"paper-one-view-{n}", epoch(n, VIEW), ".2f", "x") for n in PAPER_SETS),
    ]


def _weighting() -> list[Figure]:
    return [
        *_cells("pw", WEIGHTING, "SharpReCL paper weighting"),
        *_cells("probe", WEIGHTING, "w/o CLS"),
        fig(
            "pw-cr-accuracy",
            _f1(WEIGHTING, SETS["cr"], "SharpReCL paper weighting", key="accuracy"),
        ),
    ]


def _knnbert() -> list[Figure]:
    sets = ("sst2", "imdb", "ag_news_test")

    def gain(file: str) -> list:
        return [
            _f1(file, d, "KNN-BERT phi=0.5", key="accuracy") - _f1(file, d, CE, key="accuracy")
            for d in sets
        ]

    g100 = gain(KNN100)
    agnews = "knnbert_fewshot1000_agnews"
    g1000 = [
        *gain("knnbert_fewshot1000_sst2_imdb")[:2],
        _f1(agnews, "ag_news_test", "KNN-BERT phi=0.5", key="accuracy")
        - _f1(agnews, "ag_news_test", CE, key="accuracy"),
    ]
    cost = [_epoch(KNN100, d, "KNN-BERT phi=0.5") / _epoch(KNN100, d, CE) for d in sets]
    full = [
        fig(f"full-{d}-{who}", _f1(KNN_FULL, d, row, key="accuracy"))
        for d in ("sst2", "mrpc", "rte", "trec")
        for who, row in (("knn", "KNN-BERT phi=0.5"), ("ce", CE))
    ]
    return [
        fig("knn100-gain-mean", (g100[0] + g100[1] + g100[2]) / 3, ".1f"),
        fig("knn100-epoch-cost-min", op("min", *cost), ".1f"),
        fig("knn100-epoch-cost-max", op("max", *cost), ".1f"),
        fig(
            "knn-gain-mean-six", (g100[0] + g100[1] + g100[2] + g1000[0] + g1000[1] + g1000[2]) / 6
        ),
        *full,
    ]


FIGURES: tuple[Figure, ...] = (*_sharprecl_ir50(), *_paper_sets(), *_weighting(), *_knnbert())
