"""The API reference, generated from the ``__all__`` of skxmc's public modules.

The API pages (``docs/api/*.rst``) include the parts written here: every name of every public
module's ``__all__`` is listed exactly once, and nothing else, so that a name leaving or
joining an ``__all__`` leaves or joins the reference without an edit to the docs
(``tests/test_api_reference.py`` checks it). A public module is one whose dotted path has no
part starting with an underscore.

The pages follow what a user runs first: XR-Linear and its label trees, labels and metrics,
data sets, pipelines and persistence, then the neural estimators, then the engine they share
(``skxmc.text``, ``skxmc.losses``), then the exceptions. An object exported by several
modules (``skxmc.XRLinearClassifier`` is ``skxmc.linear.XRLinearClassifier``) is documented
once, at the first path of :data:`CANONICAL_ORDER` that exports it, the shortest a user
imports. A public module that :data:`PAGES` does not name yet lands under "Other modules" on
the last page, listed all the same, until someone places it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CANONICAL_ORDER",
    "PAGES",
    "Entry",
    "Section",
    "api_entries",
    "public_modules",
    "render",
    "write",
]


@dataclass(frozen=True)
class Section:
    """One titled list of a page: ``names`` of ``module`` (None: every name whose canonical
    home is ``module`` and that no earlier section took, estimators and classes first)."""

    title: str
    module: str
    names: tuple[str, ...] | None = None
    first: tuple[str, ...] = field(default=())  # with names=None: these first, in this order


# Page -> sections, in the order the pages are read (docs/api.rst lists them the same way).
PAGES: dict[str, tuple[Section, ...]] = {
    "linear": (
        Section("XR-Linear", "skxmc", ("XRLinearClassifier",)),
        Section("XR-Linear's layers (skxmc.linear)", "skxmc.linear"),
        Section("Label trees", "skxmc", ("HierarchicalLabelTree", "Label2VecTransformer")),
        Section("Label trees' building blocks (skxmc.tree)", "skxmc.tree"),
        Section("label2vec (skxmc.label2vec)", "skxmc.label2vec"),
        Section("Ensembles of rankers", "skxmc", ("RankerEnsemble",)),
        Section("Ensembles' building blocks (skxmc.ensemble)", "skxmc.ensemble"),
        Section("Compiled kernels", "skxmc", ("warmup",)),
    ),
    "labels": (
        Section("Label sets", "skxmc", ("as_label_sets", "LabelSet")),
        Section("Label encoding (skxmc.labels)", "skxmc.labels"),
        Section(
            "Metrics and scorers (skxmc.metrics)",
            "skxmc.metrics",
            first=("evaluate", "make_topk_scorer", "inverse_propensity"),
        ),
    ),
    "datasets": (
        Section("Loaders and generators (skxmc.datasets)", "skxmc.datasets", first=("load_demo",)),
    ),
    "persistence": (
        Section("Pipelines (skxmc.pipeline)", "skxmc.pipeline", first=("make_pipeline",)),
        Section("Saving and loading", "skxmc", ("save", "load", "describe")),
        Section("Model directories (skxmc.io)", "skxmc.io"),
        Section("Command line (skxmc.cli)", "skxmc.cli", first=("main",)),
        Section("Version", "skxmc", ("__version__",)),
    ),
    "neural": (
        Section("MatchXML", "skxmc", ("MatchXMLClassifier", "MultiStageMatcher")),
        Section("MatchXML's building blocks (skxmc.matchxml)", "skxmc.matchxml"),
        Section("SharpReCL", "skxmc", ("SharpReCLClassifier",)),
        Section("SharpReCL (skxmc.sharprecl)", "skxmc.sharprecl"),
        Section("KNN-BERT", "skxmc", ("KNNBertClassifier",)),
        Section("KNN-BERT (skxmc.knnbert)", "skxmc.knnbert"),
        Section("Stochastic negative mining", "skxmc", ("SNMClassifier",)),
        Section("SNM's building blocks (skxmc.snm)", "skxmc.snm"),
    ),
    "engine": (
        Section("Transformer engine (skxmc.text)", "skxmc.text"),
        Section("Losses and negative samplers (skxmc.losses)", "skxmc.losses"),
    ),
    "exceptions": (Section("Errors and warnings (skxmc.exceptions)", "skxmc.exceptions"),),
}

# Where an object exported by several modules is documented: the first of these that has it
# in its __all__ (then any other public module, in alphabetical order).
CANONICAL_ORDER = (
    "skxmc",
    "skxmc.exceptions",
    "skxmc.labels",
    "skxmc.metrics",
    "skxmc.datasets",
    "skxmc.pipeline",
    "skxmc.io",
    "skxmc.linear",
    "skxmc.tree",
    "skxmc.label2vec",
    "skxmc.ensemble",
    "skxmc.matchxml",
    "skxmc.sharprecl",
    "skxmc.knnbert",
    "skxmc.snm",
    "skxmc.losses",
    "skxmc.text",
)

_ROOT = "skxmc"


@dataclass(frozen=True)
class Entry:
    """One listed name: its page and section title, its documented path ``module.name``, and
    every public path that exports the same object (``aliases``, the documented one too)."""

    page: str
    section: str
    module: str
    name: str
    aliases: tuple[str, ...]
    kind: str  # "autosummary" (classes, functions) or "data" (constants)


def public_modules() -> list[str]:
    """Every importable public module of skxmc (no part of its path starts with ``_``),
    sorted; modules whose optional dependencies are missing are left out."""
    found = [_ROOT]
    package = importlib.import_module(_ROOT)
    for info in pkgutil.walk_packages(package.__path__, _ROOT + ".", onerror=lambda _: None):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if _importable(info.name):
            found.append(info.name)
    return sorted(found)


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _all(module: str) -> list[str]:
    return list(getattr(importlib.import_module(module), "__all__", []))


def _obj(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _same(a: Any, b: Any) -> bool:
    # Constants (ints, strings, tuples) are equal by value, not identity: only classes,
    # functions and modules count as "the same object exported twice".
    if inspect.isclass(a) or inspect.isroutine(a) or inspect.ismodule(a):
        return a is b
    return False


def _canonical(modules: list[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """(module, name) of every __all__ entry -> the (module, name) that documents it."""
    order = [m for m in CANONICAL_ORDER if m in modules] + sorted(
        m for m in modules if m not in CANONICAL_ORDER
    )
    homes: list[tuple[str, str, Any]] = []
    result = {}
    for module in order:
        for name in _all(module):
            obj = _obj(module, name)
            home = next(((m, n) for m, n, o in homes if n == name and _same(o, obj)), None)
            if home is None:
                homes.append((module, name, obj))
                home = (module, name)
            result[(module, name)] = home
    return result


def _rank(module: str, name: str) -> tuple[int, int]:
    obj = _obj(module, name)
    if inspect.isclass(obj):
        import sklearn.base

        return (0 if issubclass(obj, sklearn.base.BaseEstimator) else 1, 0)
    return (2, 0) if callable(obj) else (3, 0)


def api_entries() -> list[Entry]:
    """Every listed name, in page and section order."""
    modules = public_modules()
    canonical = _canonical(modules)
    aliases: dict[tuple[str, str], list[str]] = {}
    for (module, name), home in canonical.items():
        aliases.setdefault(home, []).append(f"{module}.{name}")
    taken: set[tuple[str, str]] = set()
    entries: list[Entry] = []

    def add(page: str, title: str, module: str, names: list[str]) -> None:
        for name in names:
            key = (module, name)
            if key in taken or canonical.get(key) != key:
                continue
            taken.add(key)
            obj = _obj(module, name)
            kind = "autosummary" if inspect.isclass(obj) or callable(obj) else "data"
            entries.append(Entry(page, title, module, name, tuple(aliases[key]), kind))

    pages = dict(PAGES)
    placed = {section.module for sections in pages.values() for section in sections}
    others = [m for m in modules if m not in placed]
    for page, sections in pages.items():
        for section in sections:
            if section.module not in modules:
                continue  # not there (yet), or its extra is missing
            if section.names is not None:
                add(page, section.title, section.module, list(section.names))
                continue
            names = _all(section.module)
            rest = sorted(
                (n for n in names if n not in section.first),
                key=lambda n: (_rank(section.module, n), names.index(n)),
            )
            add(page, section.title, section.module, [*section.first, *rest])
    last = list(pages)[-1]
    for module in others:
        add(last, f"Other modules ({module})", module, _all(module))
    # Top-level names that no section places (a new export of skxmc): the estimators' page.
    add("neural", "Other top-level names", _ROOT, _all(_ROOT))
    return entries


def _sections(entries: list[Entry]) -> Iterator[tuple[str, str, list[Entry]]]:
    current: list[Entry] = []
    for entry in entries:
        if current and (entry.section, entry.module) != (current[0].section, current[0].module):
            yield current[0].section, current[0].module, current
            current = []
        current.append(entry)
    if current:
        yield current[0].section, current[0].module, current


def render(page: str, entries: list[Entry] | None = None) -> str:
    """The reStructuredText that ``docs/api/<page>.rst`` includes."""
    entries = api_entries() if entries is None else entries
    lines = [".. This file is generated by docs/_api_pages.py; do not edit it.", ""]
    for title, module, group in _sections([e for e in entries if e.page == page]):
        lines += [title, "~" * len(title), "", f".. currentmodule:: {module}", ""]
        documented = [e for e in group if e.kind == "autosummary"]
        if documented:
            lines += [".. autosummary::", "   :toctree: ../generated", ""]
            lines += [f"   {e.name}" for e in documented] + [""]
        for entry in (e for e in group if e.kind == "data"):
            value = repr(_obj(entry.module, entry.name))
            if len(value) > 70:
                value = value[:67] + "..."
            lines += [f"``{entry.module}.{entry.name}``", f"   Constant: ``{value}``.", ""]
        also = [(e.name, [a for a in e.aliases if a != f"{e.module}.{e.name}"]) for e in group]
        also = [(name, paths) for name, paths in also if paths]
        if also:
            listed = "; ".join(
                f"``{name}`` as " + ", ".join(f"``{p}``" for p in paths) for name, paths in also
            )
            lines += [f"Also importable: {listed}.", ""]
    return "\n".join(lines)


def write(directory: Path) -> list[Path]:
    """Write ``_api_<page>.rst`` for every page into ``directory`` (only files whose text
    changed, so that Sphinx rebuilds only what changed); the paths."""
    entries = api_entries()
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("_api_*.rst"):  # parts of pages that no longer exist
        if stale.stem.removeprefix("_api_") not in PAGES:
            stale.unlink()
    paths = []
    for page in PAGES:
        path = directory / f"_api_{page}.rst"
        text = render(page, entries)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
