"""scikit-learn API checks for every public estimator, discovered from ``skxmc.__all__``.

An estimator is checked the moment it is exported:

* estimators taking numeric ``X`` run sklearn's ``parametrize_with_checks`` suite (with the
  checks listed in ``EXPECTED_FAILED_CHECKS`` marked as expected failures, each with a
  reason);
* estimators taking raw text (``tags.input_tags.string``) only get the clone check from
  that suite, so the input-independent checks are called directly for every estimator.

Fast parameters for these checks (small encoders, few iterations) are listed in
``FAST_PARAMS`` by class name; estimators may also define a class attribute ``_test_params``
(a dict); the defaults are used otherwise.
"""

from __future__ import annotations

import inspect

import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.utils.estimator_checks import (
    check_estimator_cloneable,
    check_estimator_repr,
    check_estimator_tags_renamed,
    check_fit2d_1sample,
    check_fit_check_is_fitted,
    check_fit_idempotent,
    check_get_params_invariance,
    check_n_features_in,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
    check_valid_tag_types,
    parametrize_with_checks,
)

import skxmc
from skxmc.text import TrainingConfig

# XR-Linear refuses to return a model without a single feature weight when the rows of X are
# not L2-normalised (issue 48 item 5); these checks fit on such rows (norms 6 to 141) with
# the default weight_threshold. test_xrlinear_checks_with_weight_threshold_lowered runs
# them with the explicit way to train on such rows.
_UNNORMALISED_ROWS = (
    "the check fits on rows that are not L2-normalised, where the default weight_threshold "
    "prunes every weight: XRLinearClassifier raises and names the fix (normalise the rows, "
    "or lower weight_threshold); passes with weight_threshold=0, tested separately"
)
_UNNORMALISED_ROW_CHECKS = (
    check_fit2d_1sample,
    check_fit_idempotent,
    check_fit_check_is_fitted,
    check_n_features_in,
)

# sklearn's sample-weight equivalence checks call fit(X, y=..., sample_weight=...) by
# keyword; XR-Linear's and the tree's fit name the target Y (label matrices), so the call
# fails before any weight is used. tests/test_sample_weight.py runs the same comparison
# (the check's data, positional Y) and more: weight 0 equals dropping the row bit for bit,
# integer weights equal repeated rows at a converged tolerance.
_Y_BY_KEYWORD = (
    "the check passes the target as fit(..., y=...) while fit names it Y (label matrices); "
    "the same equivalence is tested in tests/test_sample_weight.py with Y positional"
)
_SAMPLE_WEIGHT_EQUIVALENCE = {
    "check_sample_weight_equivalence_on_dense_data": _Y_BY_KEYWORD,
    "check_sample_weight_equivalence_on_sparse_data": _Y_BY_KEYWORD,
}

# check name -> reason, per estimator class name. Keep reasons honest and specific.
_XRLINEAR_XFAIL = {
    **_SAMPLE_WEIGHT_EQUIVALENCE,
    **{check.__name__: _UNNORMALISED_ROWS for check in _UNNORMALISED_ROW_CHECKS},
    "check_classifiers_multilabel_representation_invariance": (
        "the check passes the indicator as a Python list of 0/1 rows, which is ambiguous "
        "with label collections; skxmc raises and says how to pass either meaning"
    ),
    "check_classifier_multioutput": (
        "predict follows predict_proba >= 0.5 (threshold='auto' on a dense indicator), "
        "but decision_function holds l3-hinge path scores in [0, 1], not margins, so "
        "decision_function > 0 marks every label the beam reaches"
    ),
    "check_classifiers_multilabel_output_format_predict_proba": (
        "dense predict_proba holds 0 for labels outside the beam and 1.0 where the "
        "l3-hinge path score saturates; the check wants the open interval (0, 1)"
    ),
    "check_non_transformer_estimators_n_iter": (
        "max_iter bounds each of the thousands of per-node dual coordinate descent "
        "solvers; there is no single iteration count to report as n_iter_"
    ),
}
# SNMClassifier reports n_iter_ (epochs) and its dense predict_proba (Platt-scaled
# cosines) stays inside (0, 1).
_SNM_XFAIL = {
    k: v
    for k, v in _XRLINEAR_XFAIL.items()
    if v is not _UNNORMALISED_ROWS
    and v is not _Y_BY_KEYWORD
    and k
    not in (
        "check_non_transformer_estimators_n_iter",
        "check_classifiers_multilabel_output_format_predict_proba",
    )
}
_SNM_XFAIL["check_classifier_multioutput"] = (
    "predict follows predict_proba >= 0.5 (threshold='auto' on a dense indicator), the "
    "Platt-scaled cosine, while decision_function is the cosine itself, whose 0 is not "
    "the midpoint of that scaling (sigmoid(a * cos + b), b != 0)"
)
_SNM_XFAIL["check_methods_subset_invariance"] = (
    "float32 cosines of a sample differ by ~1e-8 between batch sizes (BLAS blocking); the "
    "Platt slope of predict_proba (10-40) scales that to ~3e-7, above the check's 1e-7"
)

# SNM's fit names the target Y as well, and its weights are a weighted loss: an integer
# weight is a repeated row in expectation over the drawn batches, exactly only in
# full-batch training (tests/test_neural_sample_weight.py), not on the check's batches.
_SNM_XFAIL.update(
    {
        check: (
            "the check passes fit(..., y=...) while fit names it Y; SNM's weighted loss "
            "equals repeated rows in expectation (exactly with full batches, tested in "
            "tests/test_neural_sample_weight.py with Y positional)"
        )
        for check in _SAMPLE_WEIGHT_EQUIVALENCE
    }
)

# RankerEnsemble of XR-Linear members: XR-Linear's reasons, for the same outputs.
_ENSEMBLE_XFAIL = {
    k: v for k, v in _XRLINEAR_XFAIL.items() if k != "check_non_transformer_estimators_n_iter"
}

EXPECTED_FAILED_CHECKS: dict[str, dict[str, str]] = {
    "HierarchicalLabelTree": _SAMPLE_WEIGHT_EQUIVALENCE,
    "RankerEnsemble": _ENSEMBLE_XFAIL,
    "SNMClassifier": _SNM_XFAIL,
    "XRLinearClassifier": _XRLINEAR_XFAIL,
}


# class name -> fast constructor parameters for the checks (kept here, not on the class).
FAST_PARAMS: dict[str, dict] = {
    "Label2VecTransformer": {"vector_size": 8, "epochs": 2},
    # Two members instead of the default three.
    "RankerEnsemble": {
        "estimators": [
            ("xr0", skxmc.XRLinearClassifier(random_state=0)),
            ("xr1", skxmc.XRLinearClassifier(random_state=1)),
        ]
    },
    "SNMClassifier": {
        "hidden_size": 16,
        "embedding_size": 8,
        "training": TrainingConfig(max_epochs=3, batch_size=16, device="cpu"),
    },
}


def public_estimators() -> list[BaseEstimator]:
    """One instance of every public estimator class exported by ``skxmc``."""
    found = []
    for name in sorted(skxmc.__all__):
        obj = getattr(skxmc, name)
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator) and not inspect.isabstract(obj):
            found.append(obj(**FAST_PARAMS.get(name, {})))
    return found


ESTIMATORS = public_estimators()
NUMERIC_ESTIMATORS = [e for e in ESTIMATORS if not e.__sklearn_tags__().input_tags.string]


def _expected_failed(estimator: BaseEstimator) -> dict[str, str]:
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


@parametrize_with_checks(NUMERIC_ESTIMATORS, expected_failed_checks=_expected_failed)
def test_sklearn_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("check", _UNNORMALISED_ROW_CHECKS, ids=lambda c: c.__name__)
def test_xrlinear_checks_with_weight_threshold_lowered(check):
    check("XRLinearClassifier", skxmc.XRLinearClassifier(weight_threshold=0.0))


INPUT_INDEPENDENT_CHECKS = [
    check_no_attributes_set_in_init,
    check_get_params_invariance,
    check_set_params,
    check_estimator_repr,
    check_estimator_cloneable,
    check_valid_tag_types,
    check_estimator_tags_renamed,
]


def _ids(value):
    return type(value).__name__ if isinstance(value, BaseEstimator) else value.__name__


@pytest.mark.parametrize("check", INPUT_INDEPENDENT_CHECKS, ids=_ids)
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_input_independent_checks(estimator, check):
    check(type(estimator).__name__, clone(estimator))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_default_constructible_and_keyword_only(estimator):
    check_parameters_default_constructible(type(estimator).__name__, type(estimator)())
    params = inspect.signature(type(estimator).__init__).parameters
    positional = [
        p
        for p in list(params.values())[1:]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    assert not positional, f"{type(estimator).__name__} takes positional parameters: {positional}"


def test_discovery_sees_every_exported_estimator():
    exported = {
        name
        for name in skxmc.__all__
        if inspect.isclass(getattr(skxmc, name)) and issubclass(getattr(skxmc, name), BaseEstimator)
    }
    assert {type(e).__name__ for e in ESTIMATORS} == exported
    assert set(EXPECTED_FAILED_CHECKS) <= exported, "expected failures for unknown estimators"


def test_linear_path_does_not_import_torch():
    # The XR-Linear path stays light: torch loads only with the neural estimators.
    import subprocess
    import sys

    code = "import sys, skxmc; skxmc.XRLinearClassifier; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
