"""``python -m benchmarks SUITE [--quick] [--seeds ...] [--out DIR]``, ``... index``,
``... tables``, ``... list``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks import _docs, _harness
from benchmarks.suites import SUITES, load


def _parser(wanted: str | None = None) -> argparse.ArgumentParser:
    """The command line; only the ``wanted`` suite's module is imported (for its options)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, description) in SUITES.items():
        p = sub.add_parser(name, help=description, description=description)
        p.add_argument("--quick", action="store_true", help="a tiny slice, well under a minute")
        p.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the suite's)")
        p.add_argument(
            "--out",
            type=Path,
            help="results folder (default: benchmarks/results, or results/quick with --quick)",
        )
        if name == wanted:
            load(name).add_arguments(p)
    p = sub.add_parser("index", help="write benchmarks/results/INDEX.md (what docs cite)")
    p.add_argument("--prune", action="store_true", help="also delete results no page cites")
    p.add_argument("--results", type=Path, default=_harness.RESULTS)
    p = sub.add_parser("tables", help="write the docs tables (docs/_generated/) from the JSON")
    p.add_argument("--results", type=Path, default=_harness.RESULTS)
    p.add_argument("--out", type=Path, default=_docs.GENERATED)
    sub.add_parser("list", help="the suites")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(argv[0] if argv else None).parse_args(argv)
    if args.command == "list":
        for name, (_, description) in SUITES.items():
            print(f"{name:18} {description}")
        return 0
    if args.command == "index":
        path = _docs.write_index(args.results, prune=args.prune)
        print(f"wrote {path}")
        return 0
    if args.command == "tables":
        for path in _docs.write_tables(args.results, args.out):
            print(f"wrote {path}")
        return 0
    suite = load(args.command)
    args.seeds = args.seeds or list(suite.SEEDS[:1] if args.quick else suite.SEEDS)
    out = args.out or (_harness.RESULTS / "quick" if args.quick else _harness.RESULTS)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    machine = _harness.machine()  # before the run: its load average is the run's context
    # The code that ran is the commit checked out at the start; a checkout that moves
    # during a long run is recorded beside it rather than silently replacing it.
    commit = _harness.git_commit()
    body = suite.run(args)
    if _harness.git_commit()["commit"] != commit["commit"]:
        commit["commit_at_end"] = _harness.git_commit()["commit"]
    result = {
        "suite": args.command,
        "command": _harness.command_line(argv),
        **commit,
        "date": started,
        "machine": machine,
        "seeds": args.seeds,
        "quick": args.quick,
        "psp": _harness.PSP_SCALE,
        **body,
    }
    path = _harness.write_suite(result, out)
    print(_harness.render_markdown(result))
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
