"""The numbers in the sentences of a docs page with figures (``benchmarks/_figures_*.py``)
are substitutions defined in its ``docs/_generated/*-figures.inc``, computed from the
results files: no page types a measured decimal outside them. The decimals a page may
type (settings, numbers no results JSON holds) are listed in its declarations module,
each with its reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import _figures as figures
from benchmarks._harness import RESULTS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?:\.\d+)*")
PAGES = figures.page_figures()
IDS = [p.path for p in PAGES]


def prose(text: str) -> list[tuple[int, str]]:
    """The page's sentences, line by line: without code blocks (``::`` and
    ``code-block``), directives and their bodies, include lines, comments, ``literal``
    text, substitutions and roles."""
    out = []
    lines = text.splitlines()
    skip_indent: int | None = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                continue
            skip_indent = None
        if stripped.startswith(".. "):  # a directive, a comment, an include
            skip_indent = indent
            continue
        if re.match(r"^[=\-~\"^]{3,}$", stripped):
            continue
        body = re.sub(r"``.*?``", " ", line)
        body = re.sub(r":\w+:`[^`]*`", " ", body)
        body = re.sub(r"\|[a-z0-9][a-z0-9\-]*\|", " ", body)
        out.append((number, body))
        if stripped.endswith("::"):  # a literal block follows
            skip_indent = indent
    return out


def _blank_inline_markup(text: str) -> str:
    """``literal`` text and roles blanked, however many lines they span (the line
    breaks kept, so that line numbers stay right)."""

    def blank(match: re.Match) -> str:
        return re.sub(r"[^\n]", " ", match.group())

    def paragraph(text: str) -> str:
        # a role first: its target may hold a literal's backticks
        text = re.sub(r":\w+:`[^`]*`", blank, text)
        return re.sub(r"``(?!\s).*?``", blank, text, flags=re.S)

    # inline markup never spans paragraphs: an unpaired `` cannot blank the next one
    return "\n\n".join(paragraph(p) for p in text.split("\n\n"))


def _typed(text: str) -> list[tuple[int, str, str]]:
    found = []
    joined = prose(text)
    for number, line in joined:
        for match in DECIMAL.finditer(line):
            before = line[: match.start()].rstrip()
            found.append((number, match.group().lstrip("+-"), before))
    return found


def _exempt(page: figures.Page, value: str, before: str) -> bool:
    if value in page.typed:
        return True
    return any(value == v and before.endswith(words) for v, words in page.exempt)


def test_pages_are_found() -> None:
    assert "benchmarks/matchxml.rst" in IDS
    for page in PAGES:
        assert (DOCS / page.path).is_file(), page.module


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_prose_types_no_measured_number(page: figures.Page) -> None:
    text = _blank_inline_markup((DOCS / page.path).read_text())
    left = [(n, v, b[-30:]) for n, v, b in _typed(text) if not _exempt(page, v, b)]
    assert not left, f"typed numbers (make them figures of {page.module}): {left}"


def test_extractor_skips_markup() -> None:
    text = (
        "A 1.25 here, |a-b| not, ``0.75`` not.\n\n.. code-block:: bash\n\n   x 2.5\n\n"
        "Command::\n\n    run 3.5\n\nback 4.5 and :download:`f 5.5 <x>`.\n"
    )
    assert [v for _, v, _ in _typed(text)] == ["1.25", "4.5"]
    # literals and roles over two lines; a closing `` then an opening one on the next line
    text = (
        "the ``ranker`` is 2.5 here and\n``X(Cp=2.0,\n  y=0.5)`` not; :download:`a\n6.5 <b>`"
        " not.\n\nOdd `` 7.5 stays\n\nand 8.5.\n"
    )
    assert [v for _, v, _ in _typed(_blank_inline_markup(text))] == ["2.5", "7.5", "8.5"]


def _defined(page: figures.Page) -> dict[str, str]:
    generated = (DOCS / "_generated" / page.generated).read_text()
    return dict(re.findall(r"^\.\. \|([^|]+)\| replace:: (.*)$", generated, re.M))


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_figure_used_and_defined(page: figures.Page) -> None:
    text = (DOCS / page.path).read_text()
    depth = "../" * page.path.count("/")
    assert f".. include:: {depth}_generated/{page.generated}" in text
    used = set(re.findall(r"\|([a-z0-9][a-z0-9\-]*)\|", text))
    defined = set(_defined(page))
    assert used - defined == set(), "used but not defined"
    assert defined - used == set(), "defined but not used"
    assert {f.name for f in page.figures} == defined, "run python -m benchmarks tables"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_generated_file_is_current(page: figures.Page) -> None:
    want = figures.rst(page.figures)
    assert (DOCS / "_generated" / page.generated).read_text() == want, (
        "run python -m benchmarks tables"
    )


def _rows(file: str) -> list[dict]:
    data = json.loads((RESULTS / f"{file}.json").read_text())
    if "results" in data:
        return [r for d in data["results"].values() for r in d["rows"]]
    return data["rows"]


def test_figures_are_the_files_numbers() -> None:
    """A difference of two means, a per-seed difference, a ratio, a sample std."""
    (page,) = [p for p in PAGES if p.path == "benchmarks/matchxml.rst"]
    shown = _defined(page)
    test = _rows("matchxml_final_features_test_thr0001")
    base = _rows("matchxml_tibkat_thr0001_base")
    old = _rows("matchxml_tibkat_defaults")

    def p1(rows: list[dict], key: str, value: str, seed: int | None = None) -> np.ndarray:
        return np.array(
            [r["P@1"] for r in rows if r[key] == value and seed in (None, r.get("seed", 0))]
        )

    gain = p1(base, "row", "tfidf+sentence").mean() - p1(old, "row", "tfidf+sentence").mean()
    assert shown["thr-gain-p1-base"] == f"{gain:+.2f}" == "+1.15"
    per_seed = p1(test, "variant", "0.5:refined", 0)[0] - p1(base, "row", "tfidf+sentence", 0)[0]
    assert shown["test-w05-p1-gap-s0"] == f"{per_seed:+.2f}" == "-0.36"
    ranker = _rows("matchxml_tibkat_gpu_ranker_s0")[0]
    assert shown["gpu-ranker-cores"] == f"{ranker['ranker fit cpu s'] / ranker['ranker fit s']:.0f}"
    std = np.std(p1(test, "variant", "1:refined:nosent"), ddof=1)
    assert shown["test-row3-p1-std"] == f"{std:.2f}"
    official = _rows("matchxml_final_features_officialdev")
    gaps = [
        p1(official, "variant", "0.5:refined", s)[0] - p1(official, "variant", "0:pifa", s)[0]
        for s in range(3)
    ]
    assert shown["off-w05-p1-gap-std"] == f"{np.std(gaps, ddof=1):.2f}"


def test_suite_cell_and_arithmetic(tmp_path: Path) -> None:
    result = {
        "suite": "x",
        "tables": [
            {"id": "t", "columns": ["row", "P@1"], "rows": [{"row": "a", "P@1": 3.0}]},
            {"id": "u", "columns": ["row", "P@1"], "rows": [{"row": "a", "P@1": 2.0}]},
        ],
    }
    (tmp_path / "s.json").write_text(json.dumps(result))
    a, b = figures.cell("s", "P@1", "t", row="a"), figures.cell("s", "P@1", 1, row="a")
    assert figures.text(figures.fig("r", a / b, ".2f", "x"), tmp_path) == "1.50x"
    assert figures.text(figures.fig("d", b - a, "+.1f"), tmp_path) == "-1.0"
    assert figures.text(figures.fig("n", abs(-(b - a)), ".0f"), tmp_path) == "1"
    assert figures.text(figures.fig("z", a - a, "+.2f"), tmp_path) == "+0.00"


def test_unknown_field_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"tables": [{"rows": [{"row": "a"}]}]}))
    with pytest.raises(LookupError):
        figures.compute(figures.cell("s", "P@1", row="a"), tmp_path)
    with pytest.raises(LookupError):
        figures.compute(figures.cell("s", "row", row="b"), tmp_path)
    with pytest.raises(LookupError):
        figures.compute(figures.val("matchxml_tibkat_gpu_ranker_s0", "parts", "no such"))
    with pytest.raises(LookupError):
        figures.compute(figures.mean("matchxml_dev_a", "no such metric", config="tfidf"))
    with pytest.raises(LookupError):
        figures.compute(figures.mean("matchxml_dev_a", "P@1", config="no such row"))


# The decimals the pages without figures may type: (page, number) -> why.
NO_FIGURES_TYPED = {
    ("contributing.rst", "3.10"): "a Python version",
    ("getting_started.rst", "3.10"): "a Python version",
    ("getting_started.rst", "4.0"): "a licence's version (CC BY-SA 4.0)",
    ("metrics.rst", "0.9"): "a score of the worked example's input",
    ("snm.rst", "2.5"): "(K - 1) / B of bibtex's settings, arithmetic, not a measurement",
    ("text_classifiers.rst", "0.1"): "a default setting (contrastive_weight)",
}


def test_pages_without_figures_type_no_measured_number() -> None:
    """Every other page of the docs: no typed decimal but the few listed settings."""
    with_figures = {p.path for p in PAGES}
    left = []
    for path in sorted([*DOCS.glob("*.rst"), *DOCS.glob("benchmarks/*.rst")]):
        page = str(path.relative_to(DOCS))
        if page in with_figures or page == "sg_execution_times.rst":  # a docs build's
            continue
        for number, value, before in _typed(_blank_inline_markup(path.read_text())):
            if (page, value) not in NO_FIGURES_TYPED:
                left.append((page, number, value, before[-30:]))
    assert not left, f"typed numbers (give the page a benchmarks/_figures_*.py): {left}"
