"""The numbers in the sentences of ``docs/ensemble.rst`` (:mod:`benchmarks._figures`):
fit ratios and a P@1 of the ensemble suite's results files.

A ``fit_ratio`` of a run is the ensemble's fit over the best single member's, timed in the
same process and seed; an estimate is the sum of a subset's parts over the best single
member's fit in the dev selection (its ``budget_s`` over ``time_budget``).
"""

from __future__ import annotations

from benchmarks._figures import Figure, cell, fig, op, val

PAGE = "ensemble.rst"

RUN = "ensemble"
BY_ESTIMATE = "ensemble-by-estimate"
JOBS2 = "ensemble-jobs2"
ENSEMBLE = "RankerEnsemble"


def _ratio(file: str, seed: int):
    """The ensemble's ``fit_ratio`` of one seed of ``file``."""
    return val(file, "runs", {"model": ENSEMBLE, "seed": seed}, "fit_ratio")


def _confirmed(i: int, key: str):
    return val(RUN, "config", "selection", "confirmations", i, key)


def _estimate(i: int):
    """The ``i``-th confirmed subset's estimated fit over the best single member's."""
    single = val(RUN, "config", "selection", "budget_s") / val(RUN, "config", "time_budget")
    return _confirmed(i, "estimated_fit_s") / single


FIGURES: tuple[Figure, ...] = (
    fig("ens-fit-ratio-min", op("min", *(_ratio(RUN, s) for s in range(3)))),
    fig("ens-fit-ratio-max", op("max", *(_ratio(RUN, s) for s in range(3)))),
    fig("ens5-est-ratio-a", _estimate(0)),
    fig("ens5-est-ratio-b", _estimate(1)),
    fig("ens5-fit-ratio-a", _confirmed(0, "fit_ratio")),
    fig("ens5-fit-ratio-b", _confirmed(1, "fit_ratio")),
    *(fig(f"est-fit-ratio-s{s}", _ratio(BY_ESTIMATE, s)) for s in range(3)),
    fig("est-p1", cell(BY_ESTIMATE, "P@1", model=ENSEMBLE)),
    fig("jobs2-fit-ratio-s0", _ratio(JOBS2, 0)),
)
