"""Docs tables made from the results files of the scripts before the harness.

The MatchXML page (``docs/benchmarks/matchxml.rst``) keeps the studies that led to the
estimator's defaults: results files written by ``benchmarks/matchxml.py``,
``matchxml_dev.py`` and ``matchxml_final_features.py`` before ``python -m benchmarks``
existed (``git show 26aef59:benchmarks/<script>.py``). They are kept for the page's
history and have no ``tables`` key, so :func:`benchmarks._docs.write_tables` cannot
render them; their tables used to be typed by hand. Each :class:`Table` (declared in its
page's specs module) says which runs of which file make each row and which metric each
column shows; :func:`write`
renders them as ``docs/_generated/<name>.inc`` from the raw per-seed records (never from
the files' own formatted summaries): the mean over the selected runs, with the sample
std (ddof=1) when there are several, two decimals, as :func:`benchmarks._harness.fmt`
writes every table. The PSP figures of these files are un-normalised (they predate the
``"psp": "normalised"`` mark), and the headers say so.

The scaling page (``docs/benchmarks/scaling.rst``) cites files of ``scale.py``,
``scale_dask.py``, ``scale_difficulty.py`` and ``mmap_load.py`` of the same era, whose
records are not rows of seeds: one nested record per size and library, a column per
setting, medians that the script computed over its processes. A :class:`Grid` serves
them: a table given cell by cell, where a cell is literal text (labels, headers) or a
:class:`Text`, a ``str.format`` template filled with :class:`Field` values (one number or
string each, found by a path into one file) and rounded as the template says. Two
derived values exist: :class:`Yes` (``"yes"`` when every field is true) and
:class:`Floor` (``"< 0.001"`` for a value below the file's resolution). Their specs live in
:mod:`benchmarks._legacy_specs_scaling`, which would have pushed this module past 700
lines. Each page's tables are declared in a module of their own,
``benchmarks/_legacy_specs_<name>.py`` (:mod:`~benchmarks._legacy_specs_matchxml`,
:mod:`~benchmarks._legacy_specs_scaling`), found by :func:`page_tables`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import _harness
from benchmarks._harness import RESULTS

# The pages these tables are written for; tests check they type none of their own.
PAGES = ("matchxml.rst", "scaling.rst")


@dataclass(frozen=True)
class Runs:
    """The records of one results file whose fields equal ``where`` (and whose seed is
    in ``seeds``, when given)."""

    file: str
    where: tuple[tuple[str, Any], ...]
    seeds: tuple[int, ...] | None = None


def runs(file: str, seeds: Sequence[int] | None = None, **where: Any) -> Runs:
    return Runs(file, tuple(where.items()), None if seeds is None else tuple(seeds))


@dataclass(frozen=True)
class Col:
    """A column: ``metric`` (or ``"seeds"``, the seeds a row pools) over the row's runs,
    only those of ``seeds`` when given; ``bracket`` appends the value of the row's
    ``also`` runs in brackets. The header is the metric, its PSP scale, then ``suffix``."""

    metric: str
    suffix: str = ""
    seeds: tuple[int, ...] | None = None
    bracket: bool = False


@dataclass(frozen=True)
class Row:
    label: str  # RST, as the page writes it
    runs: tuple[Runs, ...]
    also: tuple[Runs, ...] = ()


@dataclass(frozen=True)
class Table:
    name: str  # docs/_generated/<name>.inc
    title: str
    stub: str  # the header of the row labels
    columns: tuple[Col, ...]
    rows: tuple[Row, ...]

    def sources(self) -> list[str]:
        found = [r.file for row in self.rows for r in (*row.runs, *row.also)]
        return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Field:
    """One value of a results file: ``path`` walks its JSON from the top, a ``str`` is a
    key, an ``int`` a list index and a ``dict`` the list element whose fields equal it."""

    file: str
    path: tuple[Any, ...]


def field(file: str, *path: Any) -> Field:
    return Field(file, path)


@dataclass(frozen=True)
class Yes:
    """``"yes"`` when every field is true, else ``"no"``."""

    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Floor:
    """A value in ``spec`` (a format spec), or ``"< bound"`` when it is below ``bound``
    (the file rounds to it, so 0 means "less than that")."""

    field: Field
    bound: float
    spec: str


@dataclass(frozen=True)
class Text:
    """A cell: ``template`` (``str.format``) filled with the values, in order."""

    template: str
    values: tuple[Field | Yes | Floor, ...] = ()


def text(template: str, *values: Field | Yes | Floor) -> Text:
    return Text(template, values)


@dataclass(frozen=True)
class Grid:
    """A table given cell by cell, its header row first; a ``str`` cell is shown as it
    is, a :class:`Text` cell is made from the files."""

    name: str  # docs/_generated/<name>.inc
    title: str  # may be empty: a list-table without a title
    cells: tuple[tuple[str | Text, ...], ...]

    def sources(self) -> list[str]:
        texts = [c for row in self.cells for c in row if isinstance(c, Text)]
        return list(dict.fromkeys(f.file for t in texts for v in t.values for f in fields(v)))


def fields(v: Field | Yes | Floor) -> tuple[Field, ...]:
    if isinstance(v, Yes):
        return v.fields
    return (v.field,) if isinstance(v, Floor) else (v,)


# ----------------------------------------------------------------------------- reading


def load(file: str, results: Path = RESULTS) -> dict:
    return json.loads((results / f"{file}.json").read_text())


def records(data: dict) -> list[dict]:
    """Every per-run record of an old results file, each with its ``seed``: the record's
    own, else the file's (``config`` or ``profile``; some write it as text), else 0
    (one-seed studies)."""
    if "results" in data:
        found = [r for dataset in data["results"].values() for r in dataset.get("rows", [])]
    else:
        found = list(data.get("rows", []))
    default = (data.get("config") or data.get("profile") or {}).get("seed", 0)
    return [{**r, "seed": int(r.get("seed", default))} for r in found]


def select(spec: Runs, results: Path = RESULTS) -> list[dict]:
    chosen = [
        r
        for r in records(load(spec.file, results))
        if all(r.get(k) == v for k, v in spec.where)
        and (spec.seeds is None or r["seed"] in spec.seeds)
    ]
    if not chosen:
        raise LookupError(f"no record of {spec.file}.json matches {dict(spec.where)}")
    return chosen


def value(spec: Field, results: Path = RESULTS) -> Any:
    found: Any = load(spec.file, results)
    for step in spec.path:
        if isinstance(step, dict):
            matches = [r for r in found if all(r.get(k) == v for k, v in step.items())]
            if len(matches) != 1:
                raise LookupError(f"{spec.file}.json: {len(matches)} records match {step}")
            found = matches[0]
        else:
            try:
                found = found[step]
            except (KeyError, IndexError, TypeError):
                raise LookupError(f"{spec.file}.json has no {spec.path}") from None
    return found


def grid_cell(c: str | Text, results: Path = RESULTS) -> str:
    if isinstance(c, str):
        return c
    filled = []
    for v in c.values:
        if isinstance(v, Yes):
            filled.append("yes" if all(value(f, results) for f in v.fields) else "no")
        elif isinstance(v, Floor):
            got = value(v.field, results)
            filled.append(f"< {v.bound:g}" if got < v.bound else format(got, v.spec))
        else:
            filled.append(value(v, results))
    return c.template.format(*filled)


def cell(members: list[dict], col: Col) -> str:
    if col.seeds is not None:
        members = [r for r in members if r["seed"] in col.seeds]
    if col.metric == "seeds":
        return " ".join(str(s) for s in sorted({r["seed"] for r in members}))
    mean, std, n = _harness.mean_std(r[col.metric] for r in members)
    if n == 0:
        raise LookupError(f"no run for column {col.metric}{col.suffix}")
    return _harness.fmt(mean, std)


def header(col: Col) -> str:
    if col.metric == "seeds":
        return "seeds"
    return _harness.header_columns({}, [col.metric])[0] + col.suffix


def rows(table: Table | Grid, results: Path = RESULTS) -> list[list[str]]:
    """The header and the rows of a table, as the page shows them."""
    if isinstance(table, Grid):
        return [[grid_cell(c, results) for c in row] for row in table.cells]
    out = [[table.stub, *(header(c) for c in table.columns)]]
    for row in table.rows:
        members = [r for spec in row.runs for r in select(spec, results)]
        also = [r for spec in row.also for r in select(spec, results)]
        texts = [row.label]
        for col in table.columns:
            text = cell(members, col)
            if col.bracket:
                text += f" ({cell(also, Col(col.metric))})"
            texts.append(text)
        out.append(texts)
    return out


# ----------------------------------------------------------------------------- writing


def rst(table: Table | Grid, results: Path = RESULTS) -> str:
    sources = [f"``benchmarks/results/{f}.json``" for f in table.sources()]
    if isinstance(table, Grid):
        heading = table.title
    else:
        heading = _harness.table_heading(
            {}, {"title": table.title, "columns": [c.metric for c in table.columns]}
        )
    lines = [
        f".. Generated by `python -m benchmarks tables` from {', '.join(sources)}; do not edit.",
        "",
        f".. list-table:: {heading}".rstrip(),
        "   :header-rows: 1",
        "",
    ]
    for texts in rows(table, results):
        lines.append(f"   * - {texts[0]}")
        lines += [f"     - {t}" for t in texts[1:]]
    origins = []
    for file, source in zip(table.sources(), sources):
        data = load(file, results)
        origins.append(f"{source} (``{data['command']}``, {data['date']})")
    if isinstance(table, Grid):
        caption = (
            f"Source: {'; '.join(origins)}. Results files of the scripts before the harness;"
            " every cell is a value of them, rounded as shown."
        )
    else:
        caption = (
            f"Source: {'; '.join(origins)}. Results files of the scripts before the harness;"
            " commit not recorded; a cell with ± is the mean ± sample std (ddof=1) over the"
            " seeds of its row."
        )
    return "\n".join([*lines, "", caption]) + "\n"


def page_tables() -> dict[str, tuple[Table | Grid, ...]]:
    """The tables of each page: one ``benchmarks/_legacy_specs_<name>.py`` module per page
    declares them (``PAGE``, its file under ``docs/benchmarks/``, and ``TABLES``)."""
    return {m.PAGE: tuple(m.TABLES) for m in _harness.benchmark_modules("_legacy_specs_")}


def every_table() -> list[Table | Grid]:
    return [t for tables in page_tables().values() for t in tables]


def write(results: Path, out: Path) -> list[Path]:
    """Write ``<name>.inc`` for every table of every page into ``out``; returns the
    paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for table in every_table():
        target = out / f"{table.name}.inc"
        target.write_text(rst(table, results))
        written.append(target)
    return written
