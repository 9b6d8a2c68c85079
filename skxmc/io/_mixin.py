"""The mixin that gives every skxmc estimator ``save(directory)``.

It lives apart from the registry (``_registry``) because it calls :func:`skxmc.io.save`,
which itself reads the registry: kept in one module the two would import each other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._api import save

__all__ = ["PersistenceMixin"]


class PersistenceMixin:
    """Adds ``save(directory)``; fitted attributes (names ending in ``_``) are stored.

    Subclasses decorated with :func:`persistent` round-trip through :func:`load` as long as
    their fitted attributes are scalars, strings, arrays, sparse matrices, lists / tuples /
    dicts of those, or other persistent estimators. Override ``_save_state`` /
    ``_load_state`` for anything else.
    """

    def save(
        self,
        directory: str | os.PathLike,
        *,
        overwrite: bool = False,
        model_card: bool | Mapping[str, Any] | None = None,
        predict_only: bool = False,
    ) -> Path:
        """Save the fitted model to ``directory`` (JSON + ``.npz``; loading runs no pickle).

        Parameters
        ----------
        directory : str or path-like
            Target directory; created if missing. A non-empty directory that holds no
            skxmc model is never touched.
        overwrite : bool, default=False
            Replace a model already saved in ``directory``.
        model_card : bool or dict, default=None
            Also write ``README.md``, a model card; see :func:`skxmc.save`.
        predict_only : bool, default=False
            Save a compacted copy without what only training needs (this estimator is
            not changed); see :func:`skxmc.save`.

        Returns
        -------
        pathlib.Path
            The directory; reload with :func:`skxmc.load`.
        """
        return save(
            self, directory, overwrite=overwrite, model_card=model_card, predict_only=predict_only
        )

    def _save_state(self) -> tuple[dict, dict]:
        attributes, arrays = {}, {}
        for name, value in vars(self).items():
            if not name.endswith("_") or name.startswith("_"):
                continue
            if isinstance(value, np.ndarray) or sp.issparse(value):
                arrays[name] = value
            else:
                attributes[name] = value
        return attributes, arrays

    def _load_state(self, attributes: dict, arrays: dict) -> None:
        for name, value in {**attributes, **arrays}.items():
            setattr(self, name, value)
