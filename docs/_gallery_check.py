"""The docs build's check of the gallery (docs/conf.py runs it when the build finishes).

Every example runs on the shipped demo data and the bundled MiniLM (the ``docs`` extra),
so each must make at least one figure and none may print a "skipping" line (an example
that found its data or model missing and gave up). tests/test_docs.py tests it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["gallery_problems"]


def gallery_problems(examples: Path, gallery: Path) -> list[str]:
    """What is wrong with the executed gallery in ``gallery`` (sphinx-gallery's output
    folder) for the ``plot_*.py`` scripts in ``examples``; empty when nothing is."""
    problems = []
    for example in sorted(Path(examples).glob("plot_*.py")):
        name = example.stem
        if not list((Path(gallery) / "images").glob(f"sphx_glr_{name}_*.png")):
            problems.append(f"{name}: no figure")
        page = Path(gallery) / f"{name}.rst"
        if page.is_file() and "skipping" in page.read_text(encoding="utf-8").lower():
            problems.append(f"{name}: printed 'skipping'")
    return problems
