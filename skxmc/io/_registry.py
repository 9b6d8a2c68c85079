"""The estimator-state registry: which classes :func:`skxmc.load` may create, and the
checks a loaded state passes before an estimator receives it.

Estimators opt in by decorating the class with :func:`persistent` and (through
:class:`PersistenceMixin`) implementing ``_save_state(self) -> (attributes, arrays)`` and
``_load_state(self, attributes, arrays)``; the parameters are saved from ``get_params``.
Estimators with files of their own (torch weights) add ``_save_extra_files(directory)`` /
``_load_extra_files(directory)``.

This module imports no estimator: a saved model names its class (``"XRLinearClassifier"``),
and :func:`registered_class` finds it among the classes registered so far, or imports the
module that :mod:`skxmc._lazy` lists for that public name (which registers it). A class
neither registered nor listed is refused, so a model directory never picks what runs.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._compat import validate_estimator_params

__all__ = [
    "check_state",
    "checked_params",
    "is_fitted",
    "is_pipeline",
    "is_registered",
    "persistent",
    "registered_class",
    "validate_loaded_params",
]

_REGISTRY: dict[str, type] = {}


def persistent(cls: type) -> type:
    """Class decorator: make ``cls`` loadable by :func:`skxmc.load` (by its class name)."""
    _REGISTRY[cls.__name__] = cls
    return cls


def registered_class(name: str) -> type | None:
    """The registered class saved as ``name``, importing its module (listed in
    :mod:`skxmc._lazy`) on first use; ``None`` for any other name."""
    if name not in _REGISTRY:
        from .._lazy import LAZY, public_attribute

        if name in LAZY:
            public_attribute(name)  # imports the module, which registers the class
    return _REGISTRY.get(name)


def is_registered(value: Any) -> bool:
    return _REGISTRY.get(type(value).__name__) is type(value) and hasattr(value, "get_params")


def is_pipeline(value: Any) -> bool:
    # Exact classes only: a subclass (imblearn's, say) would not come back as itself.
    # Imported here, not at the top: estimators import this package, and a fit needs
    # neither sklearn.pipeline nor skxmc.pipeline.
    from sklearn.pipeline import Pipeline as SklearnPipeline

    from ..pipeline import Pipeline

    return type(value) in (SklearnPipeline, Pipeline)


def checked_params(cls: type, params: Any, source: Path) -> dict:
    """``params`` when they are keyword arguments that ``cls`` takes."""
    if not isinstance(params, dict):
        raise ValueError(f"{source}: the parameters of {cls.__name__} must be a mapping.")
    signature = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in signature.values()):
        unknown = sorted(set(params) - set(signature) - {"self"})
        if unknown:
            raise ValueError(
                f"{source} sets unknown parameter(s) {', '.join(map(repr, unknown))} of "
                f"{cls.__name__}; it takes {', '.join(k for k in signature if k != 'self')}. "
                f"A model saved by another skxmc version (its skxmc_version is in that file) "
                f"loads with that version; or fit it again with this one."
            )
    return params


def validate_loaded_params(est: Any, source: Path) -> None:
    # The checks fit runs (parameter constraints): a loaded model must not skip them.
    try:
        validate_estimator_params(est)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{source}: invalid parameter of {type(est).__name__}: {exc}") from exc


def check_state(est: Any, attributes: dict, arrays: dict, source: Path) -> None:
    """Check that the loaded state agrees with itself (shapes, label count) before use.

    An estimator may define ``_check_saved_state(attributes, arrays)`` (raising
    ``ValueError``); otherwise the rules below, keyed by class name, apply.
    """
    state = {**attributes, **arrays}
    try:
        hook = getattr(est, "_check_saved_state", None)
        if callable(hook):
            hook(attributes, arrays)
        _generic_state_checks(state)
        rule = _STATE_RULES.get(type(est).__name__)
        if rule is not None:
            rule(state)
    except ValueError as exc:
        raise ValueError(f"{source}: inconsistent {type(est).__name__}: {exc}") from exc


def _n_rows(value: Any) -> int:
    shape = getattr(value, "shape", None)
    if shape is None or len(shape) < 1:
        raise ValueError(f"expected an array, got {type(value).__name__}.")
    return int(shape[0])


def _generic_state_checks(state: dict) -> None:
    classes = state.get("classes_")
    if classes is not None:
        classes = np.asarray(classes)
        if classes.ndim != 1:
            raise ValueError(f"classes_ has shape {classes.shape}; expected 1-D.")
        try:
            n_unique = len(set(classes.tolist()))
        except TypeError:
            n_unique = len(classes)  # unhashable labels: left to the estimator
        if n_unique != len(classes):
            raise ValueError("classes_ holds duplicate labels.")
    n_features = state.get("n_features_in_")
    if n_features is not None and (
        not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 0
    ):
        raise ValueError(f"n_features_in_ is {n_features!r}; expected a non-negative int.")


def _check_tree_state(state: dict) -> None:
    chain = state.get("cluster_chain_")
    if chain is None:
        return
    if not isinstance(chain, list) or not chain:
        raise ValueError("cluster_chain_ must be a non-empty list of matrices.")
    n_parent = 1
    for t, C in enumerate(chain):
        if not sp.issparse(C) or C.shape[1] != n_parent:
            raise ValueError(
                f"cluster_chain_[{t}] has shape {getattr(C, 'shape', None)}; expected "
                f"(n_nodes, {n_parent}) after the previous layer's {n_parent} nodes."
            )
        n_parent = C.shape[0]
    expected = {
        "n_labels_": n_parent,
        "n_layers_": len(chain),
    }
    for name, value in expected.items():
        if name in state and state[name] != value:
            raise ValueError(f"{name} is {state[name]!r}; the cluster chain gives {value}.")
    for name in ("classes_", "leaf_assignment_"):
        if state.get(name) is not None and _n_rows(state[name]) != n_parent:
            raise ValueError(
                f"{name} has {_n_rows(state[name])} entries for {n_parent} labels "
                f"(rows of the last cluster_chain_ matrix)."
            )


# Per-class consistency rules for estimators that do not define ``_check_saved_state``.
_STATE_RULES = {
    "HierarchicalLabelTree": _check_tree_state,
}


def is_fitted(est: Any) -> bool:
    if is_pipeline(est):
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted

        try:
            check_is_fitted(est)
        except NotFittedError:
            return False
        return True
    return any(k.endswith("_") and not k.startswith("__") for k in vars(est))
