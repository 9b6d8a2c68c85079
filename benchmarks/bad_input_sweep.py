"""Re-run the bad-input and fault sweep of issue 21 and count its cases per category.

The sweep is the table-driven test files ``tests/test_bad_input_*.py`` (slow fault tests
included: kill -9 during ``fit`` and ``save``). Each test case is put in the category of
the reliability review (``1-badX`` ... ``11-concurrency``): by the category prefix in its
pytest id where it has one, otherwise by its file and name. The table gives, per category,
how many cases pass, fail, are skipped or are expected failures.

Usage (from the repository root, with the project's venv)::

    .venv/bin/python benchmarks/bad_input_sweep.py            # writes results/bad_input_sweep.*
    .venv/bin/python benchmarks/bad_input_sweep.py --fast     # without the slow fault tests
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

from _common import markdown_table, write_results

ROOT = Path(__file__).resolve().parents[1]
CATEGORIES = {
    "1-badX": "bad X",
    "2-bady": "bad y",
    "3-hyper": "hyperparameters",
    "4-metrics": "metrics",
    "5-loaders": "loaders",
    "6-persist": "persistence",
    "7-interrupt": "interruption",
    "9-cli": "CLI",
    "11-concurrency": "concurrency",
    "import": "import",
}
# Files whose cases carry no prefix: the category they all belong to.
FILE_DEFAULTS = {
    "test_bad_input_checkpoints.py": "7-interrupt",
    "test_bad_input_hyper.py": "3-hyper",
    "test_bad_input_persistence.py": "6-persist",
}
_PREFIX = re.compile(
    r"(?<![0-9])(1-badX|2-bady|3-hyper|4-metrics|5-loaders|6-persist|"
    r"7-interrupt|9-cli|11-concurrency|import)",
    re.IGNORECASE,
)


def category(file: str, name: str) -> str:
    """The review category of one test case (``file`` and ``name`` with its parameter id)."""
    normalised = name.replace("_", "-")
    match = _PREFIX.search(normalised)
    if match:
        found = match.group(1).lower()
        return next(key for key in CATEGORIES if key.lower() == found)
    if file == "test_bad_input_cli.py":
        return "5-loaders" if "loader" in name else "9-cli"
    if file == "test_bad_input_linear.py":
        return "7-interrupt" if "interrupt" in name else "1-badX"
    return FILE_DEFAULTS.get(file, "other")


def run(fast: bool) -> tuple[dict[str, Counter], float, str]:
    files = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/test_bad_input_*.py"))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        marker = "not slow" if fast else "slow or not slow"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            marker,
            f"--junitxml={report}",
            *files,
        ]
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=False)
        seconds = time.perf_counter() - t0
        counts: dict[str, Counter] = defaultdict(Counter)
        for case in ET.parse(report).getroot().iter("testcase"):
            file = Path(case.get("classname", "").replace(".", "/")).name + ".py"
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    kind = child.get("type", "")
                    outcome = "xfailed" if "xfail" in kind else "skipped"
            counts[category(file, case.get("name", ""))][outcome] += 1
    return counts, seconds, " ".join(cmd[1:3] + cmd[5:7] + files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="leave out the slow fault tests")
    args = parser.parse_args()
    counts, seconds, _ = run(args.fast)
    rows = []
    for key in [*CATEGORIES, "other"]:
        c = counts.get(key)
        if not c:
            continue
        rows.append(
            {
                "category": f"{key} ({CATEGORIES.get(key, 'other')})",
                "cases": sum(c.values()),
                "passed": c["passed"],
                "failed": c["failed"],
                "skipped": c["skipped"],
                "xfailed": c["xfailed"],
            }
        )
    total = Counter()
    for c in counts.values():
        total.update(c)
    rows.append(
        {
            "category": "total",
            "cases": sum(total.values()),
            "passed": total["passed"],
            "failed": total["failed"],
            "skipped": total["skipped"],
            "xfailed": total["xfailed"],
        }
    )
    command = "python benchmarks/bad_input_sweep.py" + (" --fast" if args.fast else "")
    table = "\n".join(
        [
            f"Bad-input and fault sweep (issue 21), `{command}`, {seconds:.0f} s.",
            "",
            markdown_table(rows, ["category", "cases", "passed", "failed", "skipped", "xfailed"]),
        ]
    )
    print(table)
    name = "bad_input_sweep_fast" if args.fast else "bad_input_sweep"
    write_results(name, {"command": command, "seconds": seconds, "rows": rows}, table)


if __name__ == "__main__":
    main()
