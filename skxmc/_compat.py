"""The one door to scikit-learn's private (or recently moved) API.

Every name that skxmc takes from scikit-learn and that scikit-learn may rename, move or
change without a deprecation cycle comes from here: the ``_fit_context`` decorator, the
parameter-validation constraints of ``sklearn.utils._param_validation``, ``validate_data``
(a function only since scikit-learn 1.6; earlier, the method ``BaseEstimator._validate_data``)
``_num_samples`` and ``_BaseComposition`` (the parameter routing of meta-estimators).
When a scikit-learn release moves one of them, the fix goes here,
once, and ``tests/test_compat.py`` keeps the rest of the package from importing them
directly. ``make test-oldest`` runs part of the test suite on the oldest scikit-learn that
``pyproject.toml`` claims; ``make test`` runs all of it on the newest.

Why a module of our own rather than the ``sklearn-compat`` package: sklearn-compat (0.1.6)
covers ``_fit_context``, ``validate_data`` and ``validate_params`` but not the constraint
classes (``Interval``, ``StrOptions``, ``HasMethods``) nor ``_num_samples``, so a module of
our own would be needed anyway; and it requires ``scikit-learn<1.10``, an upper bound that
would cap our users' scikit-learn at every new release until sklearn-compat catches up. For
the versions skxmc claims (scikit-learn >= 1.6) every name below exists with the signature
we use, so they are plain re-exports, with room for a shim when a future version needs one.
"""

from __future__ import annotations

import re

import sklearn
from sklearn.base import _fit_context
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    validate_params,
)
from sklearn.utils.metaestimators import _BaseComposition
from sklearn.utils.validation import _num_samples, validate_data

__all__ = [
    "SKLEARN_VERSION",
    "HasMethods",
    "Interval",
    "StrOptions",
    "_BaseComposition",
    "_fit_context",
    "_num_samples",
    "_safe_indexing",
    "validate_data",
    "validate_estimator_params",
    "validate_params",
]

#: ``(major, minor)`` of the installed scikit-learn, for version-dependent shims.
_major, _minor = (int(part) for part in re.findall(r"\d+", sklearn.__version__)[:2])
SKLEARN_VERSION: tuple[int, int] = (_major, _minor)


def validate_estimator_params(estimator: object) -> None:
    """Check ``estimator``'s parameters against its ``_parameter_constraints``, as ``fit``
    does (``BaseEstimator._validate_params``, a private method); a no-op for objects
    without it (e.g. a vectorizer of an old scikit-learn)."""
    validate = getattr(estimator, "_validate_params", None)
    if callable(validate):
        validate()
