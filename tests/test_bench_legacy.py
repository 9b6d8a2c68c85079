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
    table = next(t for t in legacy.every_table() if t.name == name)
    header, *body = legacy.rows(table)
    line = next(r for r in body if r[0] == row)
    return line[header.index(column)]


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


@pytest.mark.parametrize("page", sorted(legacy.page_tables()))
def test_page_types_no_table(page: str) -> None:
    """Every number on these pages comes from a results file: a table is an include of
    ``docs/_generated/``, never a ``list-table`` typed on the page."""
    text = (PAGES / page).read_text()
    assert ".. list-table::" not in text, (
        f"{page}: generate the table (benchmarks/_legacy_tables.py)"
    )
    for table in legacy.page_tables()[page]:
        assert f".. include:: ../_generated/{table.name}.inc" in text, table.name


def test_every_page_has_its_tables() -> None:
    assert set(legacy.page_tables()) == {"matchxml.rst", "scaling.rst"}
    names = [t.name for t in legacy.every_table()]
    assert len(names) == len(set(names))


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


# ----------------------------------------------------------------------------- scaling page


def test_scale_cells_are_the_files_values() -> None:
    """A pair of libraries' values, a size label, a column per setting."""
    sizes = _raw("scale_issue_prefetch")["sizes"]
    at_1m = next(s for s in sizes if s["n_labels"] == 1_000_000)["libraries"]
    train = np.array([at_1m[lib]["train_s"] for lib in ("skxmc", "libpecos")])
    name = "scale_issue_prefetch-sizes"
    got = _cell(name, "1,000,000", "train s skxmc / libpecos")
    assert got == " / ".join(f"{v:.1f}" for v in np.round(train, 1))
    assert got == "362.8 / 737.6"
    rss = [at_1m[lib]["peak_rss_mb"] for lib in ("skxmc", "libpecos")]
    assert _cell(name, "1,000,000", "peak RSS MB skxmc / libpecos") == (
        f"{rss[0]:.0f} / {rss[1]:.0f}"
    )
    row = _raw("scale_difficulty")["rows"][3]
    assert (row["noise"], row["label_share"]) == (0.7, 0.08)
    assert _cell("scale_difficulty-p1", "P@1", "0.7 / 0.08") == f"{row['P@1']:.1f}"


def test_dask_and_mmap_cells() -> None:
    """A ratio the file holds, a value below the file's resolution, a median of
    ``mmap_load.py`` with its ratio to the full load."""
    record = _raw("scale_dask_1m")["records"][0]
    assert _cell("scale_dask-sizes", "1,000,000", "fit ratio") == f"{record['fit_ratio']:.3f}"
    assert np.isclose(record["fit_ratio"], record["dask_fit_s"] / record["local_fit_s"], atol=1e-3)
    layers = _raw("scale_dask_30k")["records"][0]["layers"]
    assert layers[0]["task args MB"] == 0.0
    assert _cell("scale_dask_30k-layers", "1 (2)", "task arguments MB") == "< 0.001"
    assert _cell("scale_dask_30k-layers", "4 (30,000)", "task arguments MB") == (
        f"{layers[3]['task args MB']:.3f}"
    )
    data = _raw("mmap_load_1m_hybrid")
    rss = [run["after"]["VmRSS"] for run in data["runs"]["trusted"]]
    full = [run["after"]["VmRSS"] for run in data["runs"]["full"]]
    ratio = np.median(rss) / np.median(full)
    got = _cell(
        "mmap_load_1m_hybrid-modes",
        "leaf blocks read, larger ones mapped (current)",
        "VmRSS after MB (/ full load)",
    )
    assert got == f"{np.median(rss):.0f} ({ratio:.3f})" == "1116 (0.331)"


def test_projection_cells() -> None:
    projected = next(
        p
        for p in _raw("scale_issue_prefetch_projection")["projections"]
        if p["library"] == "libpecos" and p["quantity"] == "peak_rss_mb"
    )
    sizes = _raw("scale_issue_prefetch")["sizes"]
    rss = np.array([s["libraries"]["libpecos"]["peak_rss_mb"] for s in sizes])
    slope = np.log(rss[1] / rss[0]) / np.log(10)
    assert np.isclose(slope, projected["slope"])
    assert np.isclose(rss[1] * 3**slope, projected["projected"])
    name = "scale_issue_prefetch_projection-3m"
    assert _cell(name, "libpecos", "projected peak RSS MB at 3M") == "16,954"
    assert _cell(name, "libpecos", "peak RSS MB at 100k / 1M") == (f"{rss[0]:,.0f} / {rss[1]:,.0f}")


def test_unknown_field_is_an_error() -> None:
    with pytest.raises(LookupError):
        legacy.value(legacy.field("scale_dask_30k", "records", 0, "no such field"))
    with pytest.raises(LookupError):
        legacy.value(legacy.field("scale_issue", "sizes", {"n_labels": 7}, "n_test"))
