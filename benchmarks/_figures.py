"""Numbers in a docs page's sentences, made from the results files like its tables.

Every number on a docs page comes from a results file. The tables are generated
(:func:`benchmarks._docs.write_tables`, :mod:`benchmarks._legacy_tables`); the prose that
reads them ("+1.16 P@1 over the baseline", a per-seed value, a ratio of two times) used
to be typed by hand from the same files, and went stale or wrong unseen. Here a page
declares each such number once, as a :class:`Figure`: a name, an expression over values
of the results files, and a format. :func:`write` renders a page's figures as RST
substitution definitions in ``docs/_generated/<page>-figures.inc``::

    .. |thr-gain-p1-base| replace:: +1.16

and the page includes that file once near its top
(``.. include:: ../_generated/<page>-figures.inc``) and writes ``|thr-gain-p1-base| P@1``
in its sentences. Settings (thresholds, step counts, seeds) are no figures: a page types
them, in ``literal`` markup where that reads naturally.

The values an expression reads:

- :class:`Value`: one value of a file, a :class:`~benchmarks._legacy_tables.Field` (a
  path walk into its JSON);
- :class:`Stat`: the mean (or sample std, min, max) of a metric over the records a
  :class:`~benchmarks._legacy_tables.Runs` selects, the way the legacy tables pool seeds;
- :class:`Cell`: a cell of a suite-format table, ``result["tables"][i]["rows"]`` matched
  by its key columns;
- :class:`Summary`: the mean or the std of a ``"mean ± std"`` text at a
  :class:`~benchmarks._legacy_tables.Field` (files whose per-seed records are gone keep
  only such summaries);

combined with the arithmetic the prose uses: ``a - b``, ``a / b``, ``a + b``, ``-a``,
``abs(a)`` (the Python operators build an :class:`Op`), and :func:`op` for the largest,
the smallest or the sample std of several (``op("max", a, b)``) and a square root. A
:class:`Figure`'s format is a ``format`` spec (``".2f"``, ``"+.2f"`` for an explicit
sign) and a suffix (``"x"`` for a ratio). A page's declarations live in a private module
of their own, ``benchmarks/_figures_<name>.py``, found by :func:`page_figures`: it names
its page (``PAGE``, the path under ``docs/``), declares ``FIGURES``, and lists the decimals
its prose may still type, each with its reason (``TYPED``: a value anywhere on the page,
such as a setting; ``EXEMPT``: a value after given words). tests/test_bench_figures.py
checks every such page.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import _harness
from benchmarks._harness import RESULTS
from benchmarks._legacy_tables import Field, Runs, load, runs, select, value


class Expr:
    """A number computed from the results files; operators build an :class:`Op`."""

    def __sub__(self, other: Expr | float) -> Op:
        return Op("sub", (self, _expr(other)))

    def __rsub__(self, other: float) -> Op:
        return Op("sub", (_expr(other), self))

    def __add__(self, other: Expr | float) -> Op:
        return Op("add", (self, _expr(other)))

    def __truediv__(self, other: Expr | float) -> Op:
        return Op("div", (self, _expr(other)))

    def __mul__(self, other: Expr | float) -> Op:
        return Op("mul", (self, _expr(other)))

    def __neg__(self) -> Op:
        return Op("neg", (self,))

    def __abs__(self) -> Op:
        return Op("abs", (self,))


@dataclass(frozen=True, eq=False)
class Const(Expr):
    number: float


@dataclass(frozen=True, eq=False)
class Value(Expr):
    """One number of a results file."""

    field: Field


@dataclass(frozen=True, eq=False)
class Stat(Expr):
    """``stat`` (``mean``, ``std`` (ddof=1), ``min``, ``max``) of ``metric`` over the
    records of every ``runs``."""

    runs: tuple[Runs, ...]
    metric: str
    stat: str = "mean"


@dataclass(frozen=True, eq=False)
class Cell(Expr):
    """The ``column`` of the row of ``result["tables"][table]`` whose columns equal
    ``key`` (``table``: an index or a table's ``id``)."""

    file: str
    table: int | str
    key: tuple[tuple[str, Any], ...]
    column: str


@dataclass(frozen=True, eq=False)
class Summary(Expr):
    """The ``part`` (``mean`` or ``std``) of the ``"mean ± std"`` text at ``field``."""

    field: Field
    part: str = "mean"


@dataclass(frozen=True, eq=False)
class Op(Expr):
    name: str  # sub, add, div, mul, neg, abs, sqrt; max, min, std (of any number)
    args: tuple[Expr, ...]


def op(name: str, *args: Expr | float) -> Op:
    """``op("max", a, b, c)``: the largest; ``"std"``: their sample std (ddof=1)."""
    return Op(name, tuple(_expr(a) for a in args))


@dataclass(frozen=True)
class Figure:
    """``.. |name| replace:: <format(expr, spec)><suffix>``."""

    name: str
    expr: Expr
    spec: str = ".2f"
    suffix: str = ""


def _expr(x: Expr | float) -> Expr:
    return x if isinstance(x, Expr) else Const(float(x))


# ----------------------------------------------------------------------------- declaring


def val(file: str, *path: Any) -> Value:
    return Value(Field(file, path))


def stat(
    file: str | tuple[str, ...],
    metric: str,
    seeds: tuple[int, ...] | None = None,
    how: str = "mean",
    **where: Any,
) -> Stat:
    """``how`` of ``metric`` over the records of ``file`` (or of several files) whose
    fields equal ``where``, of ``seeds`` only when given."""
    files = (file,) if isinstance(file, str) else file
    return Stat(tuple(runs(f, seeds, **where) for f in files), metric, how)


def mean(file: str | tuple[str, ...], metric: str, *, seeds: Any = None, **where: Any) -> Stat:
    return stat(file, metric, seeds, "mean", **where)


def cell(file: str, column: str, table: int | str = 0, **key: Any) -> Cell:
    return Cell(file, table, tuple(key.items()), column)


def summary(file: str, *path: Any, part: str = "mean") -> Summary:
    return Summary(Field(file, path), part)


def fig(name: str, expr: Expr, spec: str = ".2f", suffix: str = "") -> Figure:
    return Figure(name, expr, spec, suffix)


# ----------------------------------------------------------------------------- computing

_OPS = {
    "sub": lambda a, b: a - b,
    "add": lambda a, b: a + b,
    "div": lambda a, b: a / b,
    "mul": lambda a, b: a * b,
    "neg": lambda a: -a,
    "abs": abs,
    "sqrt": math.sqrt,
    "max": max,
    "min": min,
    "std": lambda *v: _harness.mean_std(v)[1],
    # the scripts pool repeats by their median (of per-repeat ratios, say)
    "median": lambda *v: statistics.median(v),
}


def compute(expr: Expr, results: Path = RESULTS) -> float:
    """The number ``expr`` stands for; :class:`LookupError` when a value is missing."""
    if isinstance(expr, Const):
        return expr.number
    if isinstance(expr, Value):
        return _number(value(expr.field, results), expr.field)
    if isinstance(expr, Stat):
        members = [r for spec in expr.runs for r in select(spec, results)]
        if any(expr.metric not in r for r in members):
            raise LookupError(f"a record of {expr.runs[0].file}.json has no {expr.metric}")
        numbers = [float(r[expr.metric]) for r in members]
        if expr.stat == "mean":
            return _harness.mean_std(numbers)[0]
        if expr.stat == "std":
            std = _harness.mean_std(numbers)[1]
            if std is None:
                raise LookupError(f"one record: no std of {expr.metric}")
            return std
        if expr.stat in ("min", "max"):
            return min(numbers) if expr.stat == "min" else max(numbers)
        raise ValueError(f"unknown statistic {expr.stat!r}")
    if isinstance(expr, Cell):
        return _cell(expr, results)
    if isinstance(expr, Summary):
        return _summary(value(expr.field, results), expr)
    if isinstance(expr, Op):
        if expr.name not in _OPS:
            raise ValueError(f"unknown operation {expr.name!r}")
        return _OPS[expr.name](*(compute(a, results) for a in expr.args))
    raise TypeError(f"not an expression: {expr!r}")


def _number(found: Any, where: Any) -> float:
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        raise LookupError(f"{where} is not a number: {found!r}")
    return float(found)


def _summary(found: Any, expr: Summary) -> float:
    parts = found.split("\u00b1") if isinstance(found, str) else []
    if len(parts) != 2 or expr.part not in ("mean", "std"):
        raise LookupError(f"{expr.field} is no mean \u00b1 std ({expr.part}): {found!r}")
    try:
        return float(parts[0] if expr.part == "mean" else parts[1])
    except ValueError:
        raise LookupError(f"{expr.field} has no {expr.part}: {found!r}") from None


def _cell(expr: Cell, results: Path) -> float:
    data = load(expr.file, results)
    tables = data.get("tables")
    if not tables:
        raise LookupError(f"{expr.file}.json has no tables")
    if isinstance(expr.table, int):
        table = tables[expr.table]
    else:
        table = next((t for t in tables if t.get("id") == expr.table), None)
        if table is None:
            raise LookupError(f"{expr.file}.json has no table {expr.table!r}")
    key = dict(expr.key)
    matches = [r for r in table["rows"] if all(r.get(k) == v for k, v in key.items())]
    if len(matches) != 1:
        raise LookupError(f"{expr.file}.json: {len(matches)} rows match {key}")
    if expr.column not in matches[0]:
        raise LookupError(f"{expr.file}.json: no column {expr.column!r}")
    return _number(matches[0][expr.column], (expr.file, key, expr.column))


def text(figure: Figure, results: Path = RESULTS) -> str:
    """The figure as the page shows it; a negative zero loses its sign."""
    number = compute(figure.expr, results)
    if math.isnan(number):
        raise LookupError(f"{figure.name} is not a number")
    shown = format(number, figure.spec)
    if float(shown.rstrip("x%").replace(",", "")) == 0 and shown.startswith("-"):
        shown = format(0.0, figure.spec)
    return shown + figure.suffix


# ----------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class Page:
    """One page's figures: ``docs/<path>``, its declarations and its typed decimals."""

    path: str  # under docs/, e.g. "benchmarks/matchxml.rst"
    module: str
    figures: tuple[Figure, ...]
    typed: dict[str, str]  # value -> why the page may type it anywhere
    exempt: dict[tuple[str, str], str]  # (value, the words before it) -> why

    @property
    def generated(self) -> str:
        """The name of its figures file under ``docs/_generated/``."""
        return self.path.removesuffix(".rst").replace("/", "-") + "-figures.inc"


def page_figures() -> list[Page]:
    """Every page with figures: one per ``benchmarks/_figures_<name>.py`` module."""
    return [
        Page(
            module.PAGE,
            module.__name__,
            tuple(module.FIGURES),
            dict(getattr(module, "TYPED", {})),
            dict(getattr(module, "EXEMPT", {})),
        )
        # imported when asked: the declarations build on this module
        for module in _harness.benchmark_modules("_figures_")
    ]


def rst(figures: tuple[Figure, ...], results: Path = RESULTS) -> str:
    names = [f.name for f in figures]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"figures declared twice: {doubled}")
    files = sorted({f for figure in figures for f in sources(figure.expr)})
    lines = [
        ".. Generated by `python -m benchmarks tables` from "
        + ", ".join(f"``benchmarks/results/{s}.json``" for s in files)
        + "; do not edit.",
        "",
    ]
    lines += [f".. |{f.name}| replace:: {text(f, results)}" for f in figures]
    return "\n".join(lines) + "\n"


def sources(expr: Expr) -> list[str]:
    """The results files (stems) that ``expr`` reads."""
    if isinstance(expr, Value):
        return [expr.field.file]
    if isinstance(expr, Stat):
        return [r.file for r in expr.runs]
    if isinstance(expr, Cell):
        return [expr.file]
    if isinstance(expr, Summary):
        return [expr.field.file]
    if isinstance(expr, Op):
        return [f for a in expr.args for f in sources(a)]
    return []


def write(results: Path, out: Path) -> list[Path]:
    """Write every page's figures file into ``out``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in page_figures():
        target = out / page.generated
        target.write_text(rst(page.figures, results))
        written.append(target)
    return written
