"""What the docs cite, and the docs tables made from the results JSON.

- :func:`write_index` finds every ``benchmarks/results/...`` path named by a doc page
  (``docs/``, ``README.md``, the gallery in ``examples/``) or by a source comment in
  ``skxmc/``, and writes ``benchmarks/results/INDEX.md``: each kept file and the pages that
  cite it. With ``prune`` it deletes the results that nothing cites (git history keeps
  them). A cited ``.md`` keeps its ``.json`` (its data) and the other way round; the
  suites' own ``SUITE.json``/``.md`` are always kept.
- :func:`write_summaries` (called by :func:`write_tables`) writes the summary table and
  plot atop every benchmark page (``docs/_bench_summaries.py``);
- :func:`write_tables` renders every table of every suite-format JSON in the results
  folder as an RST include, ``docs/_generated/<result>-<table id>.inc``; the pages
  ``.. include::`` them, so no number on a page is typed by hand. The ``.inc`` suffix keeps
  Sphinx from reading them as pages of their own. The old results files of the MatchXML
  and scaling pages, which have no tables of their own, get theirs from
  :mod:`benchmarks._legacy_tables`; the numbers in a page's sentences get theirs from
  :mod:`benchmarks._figures` (``docs/_generated/<page>-figures.inc``).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path

from benchmarks import _figures, _harness, _legacy_tables
from benchmarks._harness import RESULTS, ROOT, cells
from benchmarks.suites import SUITES

GENERATED = ROOT / "docs" / "_generated"
CITERS = (
    ("docs", "*.rst"),
    ("docs", "*.md"),
    ("docs", "*.py"),
    ("examples", "*.py"),
    ("skxmc", "*.py"),
)
CITED = re.compile(r"benchmarks/results/([A-Za-z0-9_.*\-]+(?:/[A-Za-z0-9_.*\-]+)*)")
# a results file named alone in literal text (``knnbert_sample_std.md``)
NAMED = re.compile(r"``([A-Za-z0-9_.\-]+\.(?:md|json|log))``")
INCLUDE = re.compile(r"\.\. include:: [./]*_generated/([A-Za-z0-9_.\-]+\.inc)")
SKIP = {"cache", "quick"}


def _citing_files() -> Iterator[Path]:
    yield ROOT / "README.md"
    for folder, pattern in CITERS:
        base = ROOT / folder
        for path in sorted(base.rglob(pattern)):
            parts = set(path.relative_to(ROOT).parts)
            if not parts & {"_build", "generated", "auto_examples", "_generated"}:
                yield path


def citations(results: Path = RESULTS) -> dict[str, list[str]]:
    """``{results file name: [citing file, ...]}`` for every results file that exists."""
    present = sorted(p.name for p in results.iterdir() if p.is_file())
    cited: dict[str, set[str]] = {}
    for path in _citing_files():
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        targets = [m.group(1).rstrip(".") for m in CITED.finditer(text)]
        targets += [m.group(1) for m in NAMED.finditer(text)]
        for target in targets:
            for name in fnmatch.filter(present, target) if "*" in target else [target]:
                if name in present:
                    cited.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return {k: sorted(v) for k, v in sorted(cited.items())}


def kept(results: Path = RESULTS) -> dict[str, list[str]]:
    """Every results file to keep, with what cites it (or why it is kept)."""
    present = {p.name for p in results.iterdir() if p.is_file()}
    keep = citations(results)
    for suite in SUITES:
        for name in (f"{suite}.json", f"{suite}.md"):
            if name in present:
                keep.setdefault(name, []).append(f"suite output (python -m benchmarks {suite})")
    included = includes()
    for path in _suite_files(results):
        name = path.relative_to(results).as_posix()
        pages = sorted({p for inc in _incs(path) for p in included.get(inc, [])})
        if pages:
            keep.setdefault(name, []).extend(f"{p} (table)" for p in pages)
    for table in _legacy_tables.every_table():
        for page in included.get(f"{table.name}.inc", []):
            for source in table.sources():
                reasons = keep.setdefault(f"{source}.json", [])
                if f"{page} (table)" not in reasons:
                    reasons.append(f"{page} (table)")
    for page in _figures.page_figures():
        sources = {f for figure in page.figures for f in _figures.sources(figure.expr)}
        for source in sorted(sources):
            reasons = keep.setdefault(f"{source}.json", [])
            if f"docs/{page.path} (figures)" not in reasons:
                reasons.append(f"docs/{page.path} (figures)")
    # after the tables: a file cited only through its table keeps its twin too
    for name in list(keep):
        stem = name.rpartition(".")[0]
        for sibling in (f"{stem}.json", f"{stem}.md"):
            if sibling in present and sibling not in keep:
                keep[sibling] = [f"data or text of {name}"]
    keep.pop("INDEX.md", None)
    return dict(sorted(keep.items()))


def includes() -> dict[str, list[str]]:
    """``{generated include: [pages that include it]}``."""
    found: dict[str, set[str]] = {}
    for path in _citing_files():
        if path.is_file() and path.suffix == ".rst":
            for match in INCLUDE.finditer(path.read_text()):
                found.setdefault(match.group(1), set()).add(path.relative_to(ROOT).as_posix())
    return {k: sorted(v) for k, v in found.items()}


def _suite_files(results: Path) -> list[Path]:
    """The suite-format JSON files: suite outputs and converted old results."""
    out = []
    for path in [*sorted(results.glob("*.json")), *sorted(results.glob("converted/*.json"))]:
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "tables" in data and "suite" in data:
            out.append(path)
    return out


def _incs(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    return [f"{path.stem}-{t.get('id') or _slug(t['title'])}.inc" for t in data["tables"]]


def write_index(results: Path = RESULTS, prune: bool = False) -> Path:
    keep = kept(results)
    removed = []
    if prune:
        for path in sorted(results.iterdir()):
            if path.is_file() and path.name not in keep and path.name != "INDEX.md":
                path.unlink()
                removed.append(path.name)
    lines = [
        "# Benchmark results kept, and who cites them",
        "",
        "Generated by `python -m benchmarks index` (`--prune` deletes the results nothing",
        "cites; git history keeps them). Do not edit by hand. Files are cited by the docs",
        "pages, the README, the gallery or source comments; a cited file's `.json` or `.md`",
        "sibling is kept with it, and so is every suite's own output.",
        "",
        "| file | cited by |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {', '.join(by)} |" for name, by in keep.items()]
    path = results / "INDEX.md"
    path.write_text("\n".join(lines) + "\n")
    if removed:
        print(f"deleted {len(removed)} results no page cites")
    return path


# ----------------------------------------------------------------------------- tables


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _rst_cell(text: str) -> str:
    # Escaped, so that ``classes_`` is text, not a reference, ``*`` not emphasis and
    # ``|x|`` not a substitution (cells and captions).
    return re.sub(r"([|_*`\\])", r"\\\1", text) if text else ".."


def rst_table(result: dict, table: dict, source: str) -> str:
    columns = table["columns"]
    lines = [
        f".. Generated by `python -m benchmarks tables` from {source}; do not edit.",
        "",
        f".. list-table:: {_harness.table_heading(result, table)}",
        "   :header-rows: 1",
        "",
    ]
    headers = _harness.header_columns(result, columns)
    for texts in [headers, *(cells(r, columns, table.get("digits")) for r in table["rows"])]:
        lines.append(f"   * - {_rst_cell(texts[0])}")
        lines += [f"     - {_rst_cell(t)}" for t in texts[1:]]
    seeds = result.get("seeds")
    origin = f"``{result['command']}``"
    if result.get("converted_from"):
        origin += f", converted from ``{result['converted_from']}``"
    caption = table.get("caption", "")
    caption = _rst_cell(caption) if caption else ""
    commit = str(result.get("commit"))
    commit = commit[:10] if len(commit) == 40 else commit
    caption += f" Source: {source} ({origin}; commit {commit}"
    if seeds:
        caption += f"; seeds {' '.join(map(str, seeds))}"
        if len(seeds) > 1:
            caption += ", mean ± sample std (ddof=1)"
    lines += ["", caption.strip() + ")."]
    return "\n".join(lines) + "\n"


def write_tables(results: Path = RESULTS, out: Path = GENERATED) -> list[Path]:
    """Write one include per table of every suite-format JSON, and render again the
    ``.md`` a suite wrote beside its JSON (so that old files' headers name their PSP
    scale too); for the project's results folder also the older files' tables and the
    pages' figures; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in _suite_files(results):
        result = json.loads(path.read_text())
        md = path.with_suffix(".md")
        if md.is_file() and "machine" in result:
            text = _harness.render_markdown(result)
            if md.read_text() != text:
                md.write_text(text)
                written.append(md)
        source = f"``benchmarks/results/{path.relative_to(results).as_posix()}``"
        for table, name in zip(result["tables"], _incs(path)):
            target = out / name
            target.write_text(rst_table(result, table, source))
            written.append(target)
    if results.resolve() == RESULTS.resolve():
        # the older files' tables and the pages' figures name the project's results files:
        # another folder (a quick run's) has none of them
        written += _legacy_tables.write(results, out)
        written += _figures.write(results, out)
    return written + write_summaries(results, out)


def write_summaries(results: Path = RESULTS, out: Path = GENERATED) -> list[Path]:
    """The summary (table and plot) atop every benchmark page, ``summary-<page>.inc``,
    written by ``docs/_bench_summaries.py`` (loaded from its file: docs/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_bench_summaries", ROOT / "docs" / "_bench_summaries.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write(results, out)
