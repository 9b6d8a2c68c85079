"""The GPU rows of the ``which-estimator`` suite (``--profile gpu`` by default): the
fine-tuned rows (logit-adjusted CE, SharpReCL, KNN-BERT, MatchXML) and tibkat_gnd_en.
Run it on a machine with a GPU (``--device cuda --threads 8``); it writes
``which-estimator-gpu.json``, which docs/which_estimator.rst shows beside the CPU rows.
"""

from __future__ import annotations

import argparse

from benchmarks.suites import which_estimator

SEEDS = which_estimator.SEEDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which_estimator.add_arguments(parser)
    parser.set_defaults(profile="gpu")


def run(args: argparse.Namespace) -> dict:
    return which_estimator.run(args)
