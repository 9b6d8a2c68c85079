"""The registry of suites: name -> (module, one-line description).

A suite module defines ``SEEDS`` (the default seeds), ``add_arguments(parser)`` (its own
options, may do nothing) and ``run(args) -> dict`` returning ``tables`` (a list of
``{"title", "columns", "rows"[, "caption", "digits"]}``), ``runs`` (the per-seed records)
and ``config`` (the settings that are not options); ``args.quick`` asks for a tiny slice
that finishes in well under a minute. Modules are imported only when their suite runs.
"""

from __future__ import annotations

import importlib
from types import ModuleType

SUITES: dict[str, tuple[str, str]] = {
    "linear": ("linear", "XR-Linear on the reference sets: P@k, nDCG, PSP, time, memory"),
    "scale": ("scale", "XR-Linear on generated sets of growing size: time and peak memory"),
    "matchxml": ("matchxml", "MatchXML against TF-IDF + XR-Linear and its ablations"),
    "sharprecl": ("sharprecl", "SharpReCL against plain fine-tuning on imbalanced sets"),
    "knnbert": ("knnbert", "KNN-BERT against plain fine-tuning, few-shot and full data"),
    "snm": ("snm", "SNM top-k negatives against uniform sampling, beside XR-Linear"),
    "neural-baselines": ("neural_baselines", "the training engine against a bare torch loop"),
    "reliability": ("reliability", "bad inputs and interrupted fits: clear errors, no crash"),
    "startup": ("startup", "import cost and first vs second fit in fresh interpreters"),
    "thresholds": ("thresholds", "top_k vs global vs per-label thresholds, chosen on dev"),
    "ensemble": ("ensemble", "RankerEnsemble of XR-Linear trees vs its best member, dev-chosen"),
    "add-labels": ("add_labels", "add_labels on a fitted XR-Linear vs a full refit (tibkat)"),
    "update": ("update", "update (new rows) on a fitted XR-Linear vs a full refit (tibkat)"),
    "persistence": ("persistence", "saved models: long label names, and skops.io vs skxmc"),
    "latency": ("latency", "single-text latency of XR-Linear vs libpecos, one thread"),
    "serve-throughput": ("serve_throughput", "skxmc serve under 64 callers vs in-process batches"),
    "streaming": ("streaming", "peak memory of a SharpReCL fit on 20k vs 200k streamed texts"),
    "streaming-predict": ("streaming_predict", "skxmc predict over 100k vs 1M lines: flat memory"),
    "which-estimator": ("which_estimator", "each estimator vs strong baselines (CPU rows)"),
    "which-estimator-gpu": ("which_estimator_gpu", "the which-estimator suite's fine-tuned rows"),
}


def load(name: str) -> ModuleType:
    return importlib.import_module(f"benchmarks.suites.{SUITES[name][0]}")
