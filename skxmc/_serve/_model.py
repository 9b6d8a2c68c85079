"""The served model: loaded once, ranked in batches, described for ``GET /model``.

Nothing here imports the web framework, so the model side is usable (and testable)
without the ``serve`` extra.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..io import CARD_NAME, describe, load

__all__ = ["ServedModel", "card_sections"]

logger = logging.getLogger(__name__)

# Labels per text for a multi-class model (no ``predict_topk``, so no ``top_k`` of its
# own) when a request gives no ``k``; as ``skxmc predict`` does.
_MULTICLASS_TOP_K = 10


class ServedModel:
    """A model directory loaded once for serving.

    Parameters
    ----------
    model_dir : str or path-like
        A directory of :func:`skxmc.save` or ``skxmc fit`` (or a libpecos folder, or a
        ``user/repo`` in the local Hugging Face cache, as :func:`skxmc.load` reads).
    mmap : bool, default=True
        Memory-map the arrays (:func:`skxmc.load` with ``mmap=True``): the ranker's weights
        are read from the page cache on first use and shared by every worker process.
    model : object, default=None
        The model of ``model_dir``, already loaded (then ``mmap`` is not used).

    Attributes
    ----------
    model : object
        The loaded estimator or pipeline.
    classes : ndarray
        Its labels (``classes_``).
    info : dict
        What ``GET /model`` answers (see :meth:`describe`).
    """

    def __init__(
        self, model_dir: str | os.PathLike, *, mmap: bool = True, model: Any = None
    ) -> None:
        self.model_dir = str(model_dir)
        if model is None:
            model = load(model_dir, mmap=mmap)
        self.ranks = hasattr(model, "predict_topk")
        if not self.ranks and not (hasattr(model, "predict_proba") and hasattr(model, "classes_")):
            raise ValueError(
                f"{self.model_dir!r} holds a {type(model).__name__}, which has neither "
                f"predict_topk nor predict_proba; save a pipeline ending in an skxmc ranker, "
                f"or a text classifier."
            )
        self.model = model
        self.classes = np.asarray(model.classes_)
        self.can_explain = hasattr(model, "explain")
        self.default_k = min(self._default_k(), len(self.classes))
        self.info = self.describe()
        self._warm_up()

    def _warm_up(self) -> None:
        """Rank one text now, so that the first request does not pay for compiling the
        numba kernels (or loading them from numba's cache) and for first touches."""
        t0 = time.perf_counter()
        try:
            self.predict(["warm-up"], 1)
        except Exception as exc:  # a request will get the error; the server still starts
            logger.warning("warm-up prediction failed: %s: %s", type(exc).__name__, exc)
            return
        logger.info("warm-up prediction in %.2f s", time.perf_counter() - t0)

    def _default_k(self) -> int:
        if not self.ranks:
            return _MULTICLASS_TOP_K
        final = self.model.steps[-1][1] if hasattr(self.model, "steps") else self.model
        top_k = getattr(final, "top_k", None)
        return int(top_k) if isinstance(top_k, (int, np.integer)) and top_k > 0 else 10

    @property
    def n_classes(self) -> int:
        """Number of labels: the largest ``k`` a request may ask for."""
        return len(self.classes)

    def predict(self, texts: list[str], k: int) -> list[tuple[list, list[float]]]:
        """The ``k`` best labels of each text with their scores, best first.

        Empty slots (a beam that reached fewer than ``k`` labels: score ``-inf``) are left
        out, as ``skxmc predict`` does.

        Parameters
        ----------
        texts : list of str
            The texts.
        k : int
            Labels per text, ``1 <= k <= n_classes``.

        Returns
        -------
        list of (labels, scores)
            Per text, its labels (plain Python values) and their float scores.
        """
        if self.ranks:
            labels, scores = self.model.predict_topk(texts, k=k)
        else:
            proba = np.asarray(self.model.predict_proba(texts))
            # A stable sort of the negated probabilities: ties keep the order of classes_.
            order = np.argsort(-proba, axis=1, kind="stable")[:, :k]
            labels, scores = self.classes[order], np.take_along_axis(proba, order, axis=1)
        out = []
        for row_labels, row_scores in zip(np.asarray(labels).tolist(), np.asarray(scores)):
            keep = np.isfinite(row_scores)
            out.append(
                (
                    [lab for lab, kept in zip(row_labels, keep) if kept],
                    [float(s) for s in row_scores[keep]],
                )
            )
        return out

    def explain(self, texts: list[str], k: int) -> list[list[dict]]:
        """The model's ``explain`` of each text's ``k`` best labels, as plain dicts.

        Parameters
        ----------
        texts : list of str
            The texts.
        k : int
            Labels explained per text.

        Returns
        -------
        list of list of dict
            Per text, one ``to_dict()`` per label, best first.
        """
        rows = self.model.explain(texts, k)
        return [[_plain(item.to_dict()) for item in row] for row in rows]

    def describe(self) -> dict[str, Any]:
        """What ``GET /model`` answers: the estimator, the label count, the versions, and
        the training metadata of the model card.

        Returns
        -------
        dict
            ``estimator``, ``task``, ``n_labels``, ``n_features``, ``features``,
            ``predict_only``, ``saved_with`` (the skxmc version that saved it),
            ``skxmc_version`` (the one serving it), ``default_k``, ``explain`` (whether
            ``POST /explain`` works), ``parameters`` (per step, those that differ from the
            defaults) and ``model_card`` (the card's sections: ``training_data``,
            ``metrics``; empty without a card).
        """
        try:
            info = describe(self.model_dir)
        except (OSError, ValueError) as exc:  # the model loaded: describe it from memory
            logger.warning("cannot describe %s (%s); GET /model tells less", self.model_dir, exc)
            info = {}
        path = Path(info.get("path", self.model_dir))
        return {
            "estimator": info.get("estimator", type(self.model).__name__),
            "task": info.get("task"),
            "n_labels": self.n_classes,
            "n_features": info.get("n_features"),
            "features": info.get("features"),
            "predict_only": bool(info.get("predict_only", False)),
            "saved_with": info.get("skxmc_version"),
            "skxmc_version": __version__,
            "default_k": self.default_k,
            "explain": self.can_explain,
            "parameters": [
                {"step": s["name"], "class": s["class"], "params": s["params"]}
                for s in info.get("steps", [])
            ],
            "model_card": card_sections(path / CARD_NAME),
        }


def _plain(value: Any) -> Any:
    """numpy scalars and tuples inside an explanation as JSON-ready Python values."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None  # JSON has no inf / NaN
    return value


# A metric row of the card's table: | `name` | value |
_METRIC_ROW = re.compile(r"^\|\s*`(?P<name>[^`]*)`\s*\|\s*(?P<value>[^|]+?)\s*\|$")


def card_sections(path: Path) -> dict[str, Any]:
    """The training metadata of a model card (``README.md`` written by :func:`skxmc.save`).

    Parameters
    ----------
    path : Path
        The card's file; a missing or unreadable one gives ``{}``.

    Returns
    -------
    dict
        ``training_data`` (the text of its "Training data" section) and ``metrics``
        (``{name: value}`` of its "Metrics" table), each only when the card has it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip().lower(), [])
        elif current is not None:
            current.append(line)
    out: dict[str, Any] = {}
    training = "\n".join(sections.get("training data", [])).strip()
    if training:
        out["training_data"] = training
    metrics = {}
    for line in sections.get("metrics", []):
        match = _METRIC_ROW.match(line.strip())
        if match:
            try:
                metrics[match["name"]] = float(match["value"])
            except ValueError:
                continue
    if metrics:
        out["metrics"] = metrics
    return out
