"""Docs tables made from the results files of the scripts before the harness.

The MatchXML page (``docs/benchmarks/matchxml.rst``) keeps the studies that led to the
estimator's defaults: results files written by ``benchmarks/matchxml.py``,
``matchxml_dev.py`` and ``matchxml_final_features.py`` before ``python -m benchmarks``
existed (``git show 26aef59:benchmarks/<script>.py``). They are kept for the page's
history and have no ``tables`` key, so :func:`benchmarks._docs.write_tables` cannot
render them; their tables used to be typed by hand. Each :class:`Table` below says which
runs of which file make each row and which metric each column shows; :func:`write`
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
lines; :func:`page_tables` says which tables each page includes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
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


def _row(label: str, *selected: Runs, also: Iterable[Runs] = ()) -> Row:
    return Row(label, tuple(selected), tuple(also))


def _table_xii(file: str) -> tuple[Row, ...]:
    """The paper's Table XII rows 1-4 of a ``benchmarks/matchxml.py`` ablation run."""
    rows = ("xii-1", "xii-2", "xii-3", "matchxml")
    return tuple(_row(label, runs(file, row=row)) for label, row in zip(XII_ROWS, rows))


def _baselines_and_defaults(file: str) -> tuple[Row, ...]:
    """The rows of a ``benchmarks/matchxml.py`` run: both XR-Linear baselines, MatchXML."""
    return (
        _row(BASE, runs(file, row="tfidf")),
        _row(SENT, runs(file, row="tfidf+sentence")),
        _row("MatchXML, defaults", runs(file, row="matchxml")),
    )


def _cols(*metrics: str) -> tuple[Col, ...]:
    return tuple(Col(m) for m in metrics)


SIX = _cols("P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@5")
TEST_SEEDS = _cols("seeds", "P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")
XII = _cols("seeds", "P@1", "P@3", "P@5", "PSP@1", "PSP@5")

BASE = "TF-IDF + XR-Linear (tfn+man, Cp 2)"
SENT = "[TF-IDF | static sentence] + XR-Linear (tfn+man, Cp 2)"
XII_1 = "1: PIFA tree, hinge, no sentence embeddings"
XII_2 = "2: + label2vec tree"
XII_3 = "3: + text-label matching loss"
XII_4 = "4: + static sentence embeddings (the defaults)"
XII_ROWS = (XII_1, XII_2, XII_3, XII_4)
PIFA0 = "``0:pifa``: [TF-IDF | static sentence] baseline"
HALF = "``0.5:refined``: fine-tuned block at half weight"
PIFA1 = "``1:pifa``: PIFA tree on MatchXML's features"

DEV_A, DEV_B = "matchxml_dev_a", "matchxml_dev_b"
MX = "matchxml mean:linear"
S150 = "matchxml_final_features_dev_s150"
T150 = "matchxml_final_features_dev_s150_thr0001"
T150_S1 = "matchxml_final_features_dev_s150_seed1_thr0001"
T150_W025 = "matchxml_final_features_dev_s150_w025_thr0001"
OFFICIAL = "matchxml_final_features_officialdev"
TEST_THR = "matchxml_final_features_test_thr0001"
XII_THR = "matchxml_tibkat_table12_thr0001"

TABLES: tuple[Table, ...] = (
    Table(
        "matchxml_dev_a-dev",
        "Settings chosen on a dev split, 3,000 train / 1,000 dev texts, ranker threshold 0.1",
        "row (dev)",
        SIX,
        (
            _row(BASE, runs(DEV_A, config="tfidf")),
            _row(SENT, runs(DEV_A, config="tfidf+sentence")),
            _row(
                "MatchXML, defaults (mean, linear bootstrap; tfn+man, Cp 2, beam 10)",
                runs(DEV_A, config=MX, ranker="tfn+man:2:10:refined"),
            ),
            _row(
                "ranker tfn, Cp 1 (the previous default)",
                runs(DEV_A, config=MX, ranker="tfn:1:10:refined"),
            ),
            _row("ranker tfn+man, Cp 1", runs(DEV_A, config=MX, ranker="tfn+man:1:10:refined")),
            _row("ranker tfn, Cp 2", runs(DEV_A, config=MX, ranker="tfn:2:10:refined")),
            _row(
                "refined tree 8 / 16 (the reference's Eurlex shape)",
                runs(DEV_A, config=MX, ranker="tfn+man:2:10:refined8x16"),
            ),
            _row('CLS pooling (``pooling="cls"``)', runs(DEV_B, config="matchxml cls:linear")),
            _row(
                'centroid bootstrap (``label_bootstrap="centroid"``)',
                runs(DEV_B, config="matchxml mean:centroid"),
            ),
        ),
    ),
    Table(
        "matchxml_tibkat_reduced-test",
        "4,000 train / 1,000 test texts, ranker threshold 0.1 (test)",
        "row (test, 3 seeds)",
        SIX,
        _baselines_and_defaults("matchxml_tibkat_reduced"),
    ),
    Table(
        "matchxml_tibkat_reduced_dev-dev",
        "3,000 train / 1,000 dev texts, ranker threshold 0.1 (dev)",
        "row (dev, 3 seeds)",
        SIX,
        _baselines_and_defaults("matchxml_tibkat_reduced_dev"),
    ),
    Table(
        "matchxml_tibkat_table12_reduced-test",
        "Table XII at the reduced budget (test)",
        "row (test, 3 seeds)",
        SIX,
        (*_table_xii("matchxml_tibkat_table12_reduced"),),
    ),
    Table(
        "matchxml_tibkat_table12_reduced_dev-dev",
        "Table XII rows 3 and 4 at the reduced budget (dev)",
        "row (dev, 3 seeds)",
        SIX,
        (
            _row(
                "3: without static sentence embeddings",
                runs("matchxml_tibkat_table12_reduced_dev", row="xii-3"),
            ),
            _row("4: the defaults", runs("matchxml_tibkat_table12_reduced_dev", row="matchxml")),
        ),
    ),
    Table(
        "matchxml_tibkat_defaults-test",
        "Full size, ranker threshold 0.1 (test)",
        "row (test)",
        TEST_SEEDS,
        _baselines_and_defaults("matchxml_tibkat_defaults"),
    ),
    Table(
        "matchxml_final_features_dev_s150-dev",
        "Dev split at full size, ranker threshold 0.1, one fine-tuning per budget (dev)",
        "variant (dev)",
        SIX,
        (
            _row(
                "``1:refined``: MatchXML, defaults (150 steps per stage)",
                runs(S150, variant="1:refined"),
            ),
            _row(PIFA0, runs(S150, variant="0:pifa")),
            _row(
                "``1:refined:nosent``: no static sentence block (Table XII row 3's features)",
                runs(S150, variant="1:refined:nosent"),
            ),
            _row(HALF, runs(S150, variant="0.5:refined")),
            _row(PIFA1, runs(S150, variant="1:pifa")),
            _row(
                "defaults with 300 steps per stage",
                runs("matchxml_final_features_dev_s300", variant="1:refined"),
            ),
            _row(
                "defaults fine-tuned down to the labels (``max_matcher_size=None``)",
                runs("matchxml_final_features_dev_all_layers", variant="1:refined"),
            ),
        ),
    ),
    Table(
        "matchxml_final_features_dev_s150_static256-dev",
        "Dev split at full size, static block at 256 tokens (dev)",
        "variant (dev), static block at 256 tokens",
        SIX,
        (
            _row(
                "``1:refined``: MatchXML",
                runs("matchxml_final_features_dev_s150_static256", variant="1:refined"),
            ),
            _row(PIFA0, runs("matchxml_final_features_dev_s150_static256", variant="0:pifa")),
            _row(HALF, runs("matchxml_final_features_dev_s150_static256", variant="0.5:refined")),
        ),
    ),
    Table(
        "matchxml_final_features_dev_s150_thr0001-dev",
        "Dev split at full size, ranker threshold 0.001, in brackets at 0.1 (dev)",
        "variant (dev), threshold 0.001",
        (
            Col("P@1", bracket=True),
            Col("P@3"),
            Col("P@5", bracket=True),
            Col("nDCG@5"),
            Col("PSP@1"),
            Col("PSP@5", bracket=True),
        ),
        tuple(
            _row(label, runs(T150, variant=v), also=[runs(S150, variant=v)])
            for label, v in (
                (PIFA0, "0:pifa"),
                ("``1:refined``: MatchXML, defaults", "1:refined"),
                ("``1:refined:nosent``: no static sentence block", "1:refined:nosent"),
                (HALF, "0.5:refined"),
                (PIFA1, "1:pifa"),
            )
        ),
    ),
    Table(
        "matchxml_final_features_dev_s150_seed1_thr0001-dev",
        "Dev split at full size, two fine-tunings, ranker threshold 0.001 (dev)",
        "variant (dev)",
        (
            Col("P@1", " seed 0", seeds=(0,)),
            Col("P@1", " seed 1", seeds=(1,)),
            Col("P@1", ", 2 seeds"),
            Col("P@5", ", 2 seeds"),
            Col("PSP@1", ", 2 seeds"),
        ),
        tuple(
            _row(label, runs(seed0, variant=v), runs(T150_S1, variant=v))
            for label, v, seed0 in (
                (PIFA0, "0:pifa", T150),
                ("``1:refined``: MatchXML, defaults", "1:refined", T150),
                ("``0.5:refined``", "0.5:refined", T150),
                ("``0.25:refined``", "0.25:refined", T150_W025),
            )
        ),
    ),
    Table(
        "matchxml_final_features_officialdev-dev",
        "The data set's own dev split, ranker threshold 0.001 (official dev)",
        "variant (official dev)",
        SIX,
        (
            _row(PIFA0, runs(OFFICIAL, variant="0:pifa")),
            _row("MatchXML, defaults (as fitted)", runs(OFFICIAL, variant="MatchXML as fitted")),
            _row("``0.25:refined`` (seed 0 only)", runs(OFFICIAL, variant="0.25:refined")),
            _row("``0.5:refined``", runs(OFFICIAL, variant="0.5:refined")),
        ),
    ),
    Table(
        "matchxml_tibkat_table12_thr0001-test",
        "Table XII at full size, ranker threshold 0.001 (test)",
        "row (test), threshold 0.001",
        XII,
        (
            _row(XII_1, runs(XII_THR, row="xii-1")),
            _row(XII_2, runs(XII_THR, row="xii-2")),
            _row(XII_3, runs(TEST_THR, variant="1:refined:nosent")),
            _row(XII_4, runs(TEST_THR, variant="MatchXML as fitted")),
            _row(
                "[TF-IDF | static sentence] + XR-Linear (baseline)",
                runs(XII_THR, row="tfidf+sentence"),
            ),
        ),
    ),
    Table(
        "matchxml_tibkat_table12-test",
        "Table XII at full size, ranker threshold 0.1 (test)",
        "row (test), threshold 0.1",
        XII,
        (
            *_table_xii("matchxml_tibkat_table12"),
            _row(
                "[TF-IDF | static sentence] + XR-Linear (baseline)",
                runs("matchxml_tibkat_table12", row="tfidf+sentence"),
            ),
        ),
    ),
    Table(
        "matchxml_tibkat_gpu_parts-test",
        "GPU profile, the paper's fine-tuning budget (test)",
        "row (test)",
        TEST_SEEDS,
        (
            _row(
                "MatchXML (defaults: refined tree, fine-tuned block at weight 1)",
                runs("matchxml_tibkat_gpu_parts", variant="1:refined"),
            ),
            _row(
                "[TF-IDF | sentence] + XR-Linear",
                runs("matchxml_tibkat_gpu_parts", variant="0:pifa"),
            ),
            _row("TF-IDF + XR-Linear", runs("matchxml_tibkat_gpu_parts", variant="0:pifa:nosent")),
        ),
    ),
)


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
    """The tables of each page of :data:`PAGES`."""
    # imported here: the specs module builds its tables from this module's classes
    from benchmarks._legacy_specs_scaling import SCALING

    return {"matchxml.rst": TABLES, "scaling.rst": SCALING}


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
