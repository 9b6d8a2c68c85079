"""What ``skxmc fit --estimator`` builds: the estimator with its ``--params`` and options,
the TF-IDF front end of the ``tfidf`` estimators, and the targets in the form each
estimator takes.

Private to the command line (:mod:`skxmc.cli`, which runs the commands); apart from it
so that the command module keeps to reading files, running commands and printing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ESTIMATORS",
    "TFIDF_DEFAULTS",
    "build_estimator",
    "fit_targets",
    "label_lists",
    "tfidf_vectorizer",
]

# --estimator: (class name, input, targets). "tfidf" estimators are fitted behind the TF-IDF
# front end (a pipeline); "text" ones read the texts. Multi-class ones need one label each.
ESTIMATORS = {
    "xrlinear": ("XRLinearClassifier", "tfidf", "multi-label"),
    "matchxml": ("MatchXMLClassifier", "text", "multi-label"),
    "sharprecl": ("SharpReCLClassifier", "text", "multi-class"),
    "knnbert": ("KNNBertClassifier", "text", "multi-class"),
    "snm": ("SNMClassifier", "tfidf", "multi-label"),
}
# Options of ``fit`` that set a constructor parameter: given for an estimator without that
# parameter, they are an error rather than silently ignored.
_PARAM_OPTIONS = ("beam_size", "top_k", "negative_sampling", "n_jobs")
# Defaults of ``fit`` that differ from the class's (today's behaviour of skxmc fit).
_CLI_DEFAULTS = {"xrlinear": {"n_jobs": 2}}
# The TF-IDF options and their defaults (a default of None in ``fit`` tells "not given").
TFIDF_DEFAULTS = {"min_df": 2, "max_ngram": 2, "max_features": 200_000}


def tfidf_vectorizer(args: argparse.Namespace) -> Any:
    """The TF-IDF front end of ``demo`` and of the ``tfidf`` estimators: the options given,
    the defaults for the others."""
    from ._vectorizers import default_tfidf

    options = {
        k: v if getattr(args, k) is None else getattr(args, k) for k, v in TFIDF_DEFAULTS.items()
    }
    return default_tfidf(
        ngram_range=(1, options["max_ngram"]),
        min_df=options["min_df"],
        max_features=options["max_features"],
    )


def label_lists(labels: Any) -> list[list]:
    """Each record's labels as a list; a single-label file (``"label"``) gives one each, so
    that the command line always ranks labels."""
    return [list(y) if isinstance(y, (list, tuple, set, frozenset)) else [y] for y in labels]


def _estimator_class(name: str) -> type:
    import skxmc

    return getattr(skxmc, ESTIMATORS[name][0])  # the torch ones are imported on first use


def _read_params(path: str, cls: type, name: str) -> dict:
    """The constructor parameters of ``--params``: a JSON object whose keys ``cls`` takes."""
    params_path = Path(path)
    if not params_path.exists():
        raise FileNotFoundError(f"--params {path!r}: no such file.")
    try:
        params = json.loads(params_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"--params {path!r} is not valid JSON ({exc}).") from None
    except OSError as exc:
        raise OSError(f"--params {path!r} cannot be read: {exc.strerror or exc}.") from None
    if not isinstance(params, dict):
        raise ValueError(
            f"--params {path!r} holds a JSON {type(params).__name__}; expected an object of "
            f'{cls.__name__} parameters such as {{"max_epochs": 1}}.'
        )
    return {_param_key(cls, key, f"--params {path!r}", name): v for key, v in params.items()}


def _param_key(cls: type, key: str, where: str, name: str) -> str:
    """``key`` as a parameter of ``cls``: its own, ``part__param`` of a composite's part
    (MatchXML's ``matcher`` / ``ranker``), or a part's parameter given flat when exactly
    one part takes it (``max_epochs`` -> ``matcher__max_epochs``)."""
    own = cls().get_params(deep=False)
    parts = {}
    for part, factory in _parts(cls).items():
        default = factory()
        parts[part] = default.get_params(deep=False)
        # a part's own parts: MatchXML's matcher__training (the TrainingConfig)
        for inner, inner_factory in _parts(type(default)).items():
            parts[f"{part}__{inner}"] = inner_factory().get_params(deep=False)
    if key in own:
        return key
    part, _, sub = key.rpartition("__")
    if part and part in parts and sub in parts[part]:
        return key
    owners = [part for part, names in parts.items() if key in names]
    if len(owners) == 1:
        return f"{owners[0]}__{key}"
    if len(owners) > 1:
        spelled = " or ".join(f"{part}__{key}" for part in owners)
        raise ValueError(
            f"{where}: {key!r} is a parameter of several parts of {cls.__name__}; write {spelled}."
        )
    known = sorted(own) + [f"{p}__<{', '.join(sorted(n))}>" for p, n in parts.items()]
    raise ValueError(
        f"{where}: unknown parameter {key!r} of {cls.__name__} (--estimator {name}); it takes "
        f"{', '.join(known)}."
    )


def _parts(cls: type) -> dict:
    """A composite estimator's parts that tune as ``part__param``, and their defaults."""
    return dict(getattr(cls, "_default_parts", {}))


def build_estimator(args: argparse.Namespace) -> Any:
    """The unfitted estimator of ``--estimator`` with its ``--params`` and options, its
    parameters validated as ``fit`` validates them (before any data is read)."""
    from ._compat import validate_estimator_params

    name = args.estimator
    cls = _estimator_class(name)
    params = dict(_CLI_DEFAULTS.get(name, {}))
    if args.params is not None:
        params.update(_read_params(args.params, cls, name))
    for option in _PARAM_OPTIONS:
        value = getattr(args, option)
        if value is None:
            continue
        flag = f"--{option.replace('_', '-')}"
        try:
            key = _param_key(cls, option, flag, name)
        except ValueError as exc:
            raise ValueError(
                f"{flag} does not apply to --estimator {name} as such ({exc}); set the "
                f"parameter in --params."
            ) from None
        params[key] = value  # an option given on the command line wins over the file
    if args.verbose:
        params[_param_key(cls, "verbose", "-v", name)] = args.verbose
    kind = ESTIMATORS[name][1]
    given_tfidf = [k for k in TFIDF_DEFAULTS if getattr(args, k) is not None]
    if kind != "tfidf" and given_tfidf:
        tfidf = ", ".join(f"--{k.replace('_', '-')}" for k in given_tfidf)
        raise ValueError(
            f"{tfidf} set(s) the TF-IDF front end of --estimator xrlinear and snm; "
            f"--estimator {name} reads the texts."
        )
    nested = {k: v for k, v in params.items() if "__" in k}
    estimator = cls(**{k: v for k, v in params.items() if "__" not in k})
    try:
        estimator.set_params(**nested)
        validate_estimator_params(estimator)
        for part in _parts(cls):
            if getattr(estimator, part) is not None:
                validate_estimator_params(getattr(estimator, part))
    except (ValueError, TypeError) as exc:
        where = f"--params {args.params!r}: " if args.params is not None else ""
        raise ValueError(f"{where}invalid parameter of {cls.__name__}: {exc}") from None
    return estimator


def fit_targets(labels: np.ndarray, args: argparse.Namespace) -> Any:
    """The labels of ``--train`` in the form ``--estimator`` takes: label lists for the
    multi-label ones, one label per record for the multi-class ones."""
    multi_label_file = len(labels) > 0 and isinstance(labels[0], frozenset)
    if ESTIMATORS[args.estimator][2] == "multi-label":
        return label_lists(labels)
    if not multi_label_file:
        return labels
    # A multi-label file with one label on every record is a multi-class file written
    # with lists; anything else would lose labels.
    for i, label_set in enumerate(labels):
        if len(label_set) != 1:
            raise ValueError(
                f"--train {args.train!r} is a multi-label file ('labels' lists) and "
                f"--estimator {args.estimator} is a multi-class classifier: it needs exactly "
                f"one label per record, but record {i + 1} has {len(label_set)}. Use a "
                f'single-label file ({{"text": "...", "label": "..."}}) or a multi-label '
                f"estimator (xrlinear, matchxml, snm)."
            )
    out = np.empty(len(labels), dtype=object)
    out[:] = [next(iter(label_set)) for label_set in labels]
    return out
