"""The numbers in the sentences of ``docs/benchmarks/engine.rst``
(:mod:`benchmarks._figures`): single runs of the bare training loop against the engine
(``bare_hf_loop*.json``; seconds per epoch of eight steps)."""

from __future__ import annotations

from benchmarks._figures import Figure, fig, op, val

PAGE = "benchmarks/engine.rst"

QUIET, LOADED = "bare_hf_loop_quiet", "bare_hf_loop"
QUIET_ROUNDS = 7

FIGURES: tuple[Figure, ...] = (
    # the outlier among the quiet run's bare-loop rounds
    fig(
        "quiet-bare-slowest-s",
        op("max", *(val(QUIET, "runs", "bare", i, "seconds") for i in range(QUIET_ROUNDS))),
        ".1f",
    ),
    fig(
        "loaded-bare-median-s",
        val(LOADED, "rows", {"configuration": "bare"}, "median s/epoch"),
        ".1f",
    ),
)
