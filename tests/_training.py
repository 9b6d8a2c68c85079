"""Test helper: flat training keywords (``max_epochs=1``...) as ``training=TrainingConfig``.

The tests' ``make_clf(**params)`` helpers keep short flat options; the estimators take
them in one :class:`~skxmc.text.TrainingConfig`.
"""

from __future__ import annotations

from typing import Any


def with_training(**params: Any) -> dict[str, Any]:
    """``params`` with the :class:`~skxmc.text.TrainingConfig` fields moved into
    ``training`` (merged into a ``training`` given too), and SharpReCL's old ablation
    switches (``hard_mixup=False``...) as ``ablate``."""
    from skxmc.text._config import TRAINING_FIELDS, TrainingConfig

    flags = [k for k in ("simple_sampling", "hard_mixup", "prior_weighting") if k in params]
    if flags:  # SharpReCL's old ablation switches: False switches a part off
        params["ablate"] = tuple(k for k in flags if not params.pop(k))
    flat = {k: params.pop(k) for k in list(params) if k in TRAINING_FIELDS}
    if flat:
        base = params.get("training")
        config = base.get_params() if base is not None else {}
        params["training"] = TrainingConfig(**{**config, **flat})
    return params


def plain_params(estimator: Any) -> dict[str, Any]:
    """``get_params(deep=True)`` with nested estimators (``training``) replaced by their
    class name, so that two estimators with equal settings compare equal (their nested
    parameters are compared as ``training__<field>``)."""
    return {
        k: type(v).__name__ if hasattr(v, "get_params") else v
        for k, v in estimator.get_params(deep=True).items()
    }
