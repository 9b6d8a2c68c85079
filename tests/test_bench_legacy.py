"""The docs tables of the pre-harness results files (``benchmarks/_legacy_tables.py``):
the pages type none by hand, and the generator's cells are the files' numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import _legacy_tables as legacy
from benchmarks._harness import RESULTS

PAGES = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def _raw(file: str) -> dict:
    return json.loads((RESULTS / f"{file}.json").read_text())


def _cell(name: str, row: str, column: str) -> str:
    table = next(t for t in legacy.TABLES if t.name == name)
    header, *body = legacy.rows(table)
    line = next(r for r in body if r[0] == row)
    return line[header.index(column)]


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


@pytest.mark.parametrize("page", legacy.PAGES)
def test_page_types_no_table(page: str) -> None:
    """Every number on these pages comes from a results file: a table is an include of
    ``docs/_generated/``, never a ``list-table`` typed on the page."""
    text = (PAGES / page).read_text()
    assert ".. list-table::" not in text, (
        f"{page}: generate the table (benchmarks/_legacy_tables.py)"
    )
    for table in legacy.TABLES:
        assert f".. include:: ../_generated/{table.name}.inc" in text, table.name


def test_mean_and_sample_std_over_seeds() -> None:
    rows = _raw("matchxml_tibkat_reduced")["results"]["tibkat_gnd_en"]["rows"]
    p1 = [r["P@1"] for r in rows if r["row"] == "tfidf"]
    assert len(p1) == 3
    want = _mean_std(p1)
    assert want == "43.43 ± 0.74"
    got = _cell("matchxml_tibkat_reduced-test", "TF-IDF + XR-Linear (tfn+man, Cp 2)", "P@1")
    assert got == want

    rows = _raw("matchxml_final_features_officialdev")["rows"]
    psp = [r["PSP@1"] for r in rows if r["variant"] == "0.5:refined"]
    got = _cell(
        "matchxml_final_features_officialdev-dev", "``0.5:refined``", "PSP@1 (un-normalised)"
    )
    assert got == _mean_std(psp)


def test_seeds_of_two_files_and_one_seed() -> None:
    """A row pooled from two files (one fine-tuning seed each), a column of one seed, and a
    one-seed cell without a std."""
    p1 = [
        next(r["P@1"] for r in _raw(f)["rows"] if r["variant"] == "0:pifa")
        for f in (
            "matchxml_final_features_dev_s150_thr0001",
            "matchxml_final_features_dev_s150_seed1_thr0001",
        )
    ]
    name = "matchxml_final_features_dev_s150_seed1_thr0001-dev"
    row = "``0:pifa``: [TF-IDF | static sentence] baseline"
    assert _cell(name, row, "P@1, 2 seeds") == _mean_std(p1)
    assert _cell(name, row, "P@1 seed 1") == f"{p1[1]:.2f}"
    psp = next(r["PSP@1"] for r in _raw("matchxml_dev_a")["rows"] if r["config"] == "tfidf")
    assert _cell(
        "matchxml_dev_a-dev", "TF-IDF + XR-Linear (tfn+man, Cp 2)", "PSP@1 (un-normalised)"
    ) == (f"{psp:.2f}")


def test_bracket_and_seeds_columns() -> None:
    at = next(
        r
        for r in _raw("matchxml_final_features_dev_s150_thr0001")["rows"]
        if r["variant"] == "1:pifa"
    )
    before = next(
        r for r in _raw("matchxml_final_features_dev_s150")["rows"] if r["variant"] == "1:pifa"
    )
    name = "matchxml_final_features_dev_s150_thr0001-dev"
    row = "``1:pifa``: PIFA tree on MatchXML's features"
    assert _cell(name, row, "P@5") == f"{at['P@5']:.2f} ({before['P@5']:.2f})"
    assert _cell(name, row, "P@3") == f"{at['P@3']:.2f}"
    assert _cell("matchxml_tibkat_table12-test", "2: + label2vec tree", "seeds") == "0"
    assert (
        _cell("matchxml_tibkat_table12-test", "3: + text-label matching loss", "seeds") == "0 1 2"
    )


def test_unknown_run_is_an_error() -> None:
    with pytest.raises(LookupError):
        legacy.select(legacy.runs("matchxml_dev_a", config="no such row"))
