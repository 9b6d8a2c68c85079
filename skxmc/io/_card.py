"""The model card: ``README.md`` in the Hugging Face style (front matter with
``library_name: skxmc``), written by ``save(model_card=...)`` and listed in the manifest
like the other files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._registry import is_pipeline

__all__ = ["CARD_KEYS", "checked_card_options", "model_card_text"]

# The keys ``save(model_card=...)`` takes.
CARD_KEYS = ("data_description", "metrics")


def checked_card_options(model_card: Any) -> dict | None:
    """``save``'s ``model_card`` as a dict of card options, or ``None`` for no card."""
    if model_card is None or model_card is False:
        return None
    if model_card is True:
        return {}
    if not isinstance(model_card, Mapping):
        raise TypeError(
            f"model_card must be None, a bool or a dict with keys {', '.join(CARD_KEYS)}; "
            f"got {type(model_card).__name__}."
        )
    unknown = sorted(map(str, set(model_card) - set(CARD_KEYS)))
    if unknown:
        raise ValueError(
            f"model_card has unknown key(s) {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(map(repr, CARD_KEYS))}."
        )
    description = model_card.get("data_description")
    if description is not None and not isinstance(description, str):
        raise ValueError(
            f"model_card['data_description'] must be a str, got {type(description).__name__}."
        )
    metrics = model_card.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, Mapping):
            raise ValueError(
                f"model_card['metrics'] must be a dict of metric name to number, got "
                f"{type(metrics).__name__}."
            )
        for name, value in metrics.items():
            if not isinstance(name, str) or isinstance(value, bool):
                raise ValueError(
                    f"model_card['metrics'][{name!r}] must be a number, named by a str."
                )
            if not isinstance(value, (int, float, np.integer, np.floating)):
                raise ValueError(
                    f"model_card['metrics'][{name!r}] must be a number, got {type(value).__name__}."
                )
    return dict(model_card)


def _cell(value: Any) -> str:
    """A value for a markdown table cell."""
    text = value if isinstance(value, str) else json.dumps(value)
    return "`" + text.replace("|", "\\|").replace("\n", " ").replace("`", "'") + "`"


def model_card_text(summary: dict, options: dict, estimator: Any) -> str:
    """``README.md`` of a model directory: Hugging Face model-card front matter, then what
    the model is (from ``summary``) and the card options of ``save``."""
    from .._version import __version__

    task = summary["task"]
    tags = ["skxmc", "scikit-learn", "text-classification"]
    if task == "multi-label":
        tags.append("extreme-multi-label-classification")
    elif task == "multi-class":
        tags.append("multi-class-classification")
    final = estimator.steps[-1][1] if is_pipeline(estimator) else estimator
    lines = ["---", "library_name: skxmc", "tags:", *(f"- {t}" for t in tags)]
    lines += ["pipeline_tag: text-classification", "---", ""]
    lines += [f"# {type(final).__name__}", ""]
    lines += [
        f"A model saved by [skxmc](https://skxmc.readthedocs.io) {__version__} with "
        f"`skxmc.save`: JSON, `.npz` arrays (and safetensors weights for torch models), no "
        "pickle. `skxmc-model.json` lists every file with its sha256; `skxmc.load` checks "
        "them.",
        "",
        "## Model",
        "",
        "| | |",
        "|---|---|",
        f"| estimator | `{summary['estimator']}` |",
    ]
    if task is not None:
        lines.append(f"| task | {task} |")
    n_labels = summary["n_labels"]
    lines.append(f"| labels | {n_labels if n_labels is not None else '?'} |")
    n_features = summary["n_features"]
    features = summary["features"]
    lines.append(
        f"| features | {n_features} ({features}) |" if n_features else f"| features | {features} |"
    )
    lines += ["", "## Parameters", ""]
    lines.append(
        "Parameters that differ from the defaults (all of them are in `skxmc-model.json`):"
    )
    for step in summary["steps"]:
        title = step["class"] if step["name"] is None else f"{step['name']}: {step['class']}"
        lines += ["", f"**{title}**", ""]
        if step["params"]:
            lines += ["| parameter | value |", "|---|---|"]
            lines += [f"| `{k}` | {_cell(v)} |" for k, v in sorted(step["params"].items())]
        else:
            lines.append("(all defaults)")
    if options.get("data_description"):
        lines += ["", "## Training data", "", options["data_description"].strip()]
    if options.get("metrics"):
        lines += ["", "## Metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {float(v):.6g} |" for k, v in options["metrics"].items()]
    call = "predict_topk(texts, k=5)" if task == "multi-label" else "predict(texts)"
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "import skxmc",
        'model = skxmc.load("path/to/this/folder")  # or "user/repo" from the HF cache',
        f"model.{call}",
        "```",
        "",
        "or `skxmc predict --model-dir path/to/this/folder --input texts.jsonl`; "
        "`skxmc info path/to/this/folder` describes it without loading it.",
        "",
    ]
    return "\n".join(lines)
