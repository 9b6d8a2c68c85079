"""The numbers in the sentences of ``docs/persistence.rst`` (:mod:`benchmarks._figures`):
the predict-only folder's size against the full one's, from the persistence suite's
``predict-only`` table (``benchmarks/results/predict_only/persistence.json``)."""

from __future__ import annotations

from benchmarks._figures import Figure, cell, fig

PAGE = "persistence.rst"
EXEMPT = {("1.2.8", "libpecos"): "a library version"}

FILE = "predict_only/persistence"
SMALL = "predict_only=True"


def _c(dataset: str, column: str, saved: str = SMALL):
    return cell(FILE, column, "predict-only", dataset=dataset, saved=saved)


FIGURES: tuple[Figure, ...] = tuple(
    f
    for name, dataset in (("reuters", "reuters21578_allcats"), ("tibkat", "tibkat_gnd_en"))
    for f in (
        fig(f"po-{name}-share", _c(dataset, "share_of_full")),
        fig(f"po-{name}-mib", _c(dataset, "MiB"), ".1f"),
        fig(f"full-{name}-mib", _c(dataset, "MiB", "full"), ".1f"),
    )
)
