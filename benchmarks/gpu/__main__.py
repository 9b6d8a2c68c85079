"""``python -m benchmarks.gpu pack METHOD [--tiny]`` and ``... run METHOD [--tiny]``
(see :mod:`benchmarks.gpu`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

# No network on the device: set before transformers is imported anywhere.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PYTHONUNBUFFERED", "1")
os.environ.setdefault("TQDM_MININTERVAL", "20")  # the device returns the log's tail only

from benchmarks.gpu import METHODS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="here: write .gpu/METHOD.zip (data, encoder, wheels)")
    p.add_argument("method", choices=METHODS)
    p.add_argument("--tiny", action="store_true", help="a dry run's pack: few texts, no model")
    p.add_argument("--python-version", default="3.12", help="the device's Python (gensim)")
    p.add_argument("--path", type=Path, help="where to write it (default .gpu/METHOD.zip)")
    p = sub.add_parser("run", help="on the device: unpack and run within the budget")
    p.add_argument("method", choices=METHODS)
    p.add_argument("--tiny", action="store_true", help="CPU dry run: tiny encoder, few steps")
    p.add_argument("--budget", type=float, default=540.0, help="seconds (default 540)")
    p.add_argument("--pack", type=Path, help="the pack (default .gpu/METHOD.zip)")
    p.add_argument("--out", type=Path, help="results folder (default $OUT, else .gpu/out)")
    p.add_argument("--seeds", type=int, nargs="+", help="default: the method's")
    p.add_argument("--device", default=None, help="default cuda, cpu with --tiny")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--workers", type=int, help="fits at once (matchxml; default its own)")
    p.add_argument("--stage-seconds", type=float, help="matchxml: each stage's time cap")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    method = importlib.import_module(f"benchmarks.gpu.{args.method}")
    from benchmarks.gpu import _kit

    if args.command == "pack":
        data = method.PACK_TINY if args.tiny else method.PACK
        path = _kit.pack(
            args.method,
            data,
            encoder=method.ENCODER and not args.tiny,
            gensim=method.GENSIM and not args.tiny,
            python_version=args.python_version,
            path=args.path,
        )
        tree, size = _kit.working_tree_size(), path.stat().st_size
        print(f"{path}: {size / 2**20:.1f} MiB; with the working tree {(tree + size) / 2**20:.1f}")
        if tree + size > _kit.LIMIT:
            print("over the 64 MiB a device call carries", file=sys.stderr)
            return 1
        return 0
    return _run(args, method, argv)


def _run(args: argparse.Namespace, method: object, argv: list[str]) -> int:
    from benchmarks.gpu import _kit

    budget = _kit.Budget(args.budget)
    pack = args.pack or _kit.GPU / f"{args.method}.zip"
    if not pack.is_file():
        print(f"missing {pack}: run `python -m benchmarks.gpu pack {args.method}` here and "
              "carry it", file=sys.stderr)  # fmt: skip
        return 2
    root = pack.parent / args.method  # .gpu/METHOD/ beside .gpu/METHOD.zip
    manifest = _kit.unpack(pack, root)
    os.environ["SKXMC_DATA"] = str(root / "data")
    if manifest["gensim"]:
        site = str(root / "site")
        sys.path.insert(0, site)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [site, os.environ.get("PYTHONPATH")])
        )
    args.encoder_dir = root / "model" if manifest["encoder"] else None
    args.device = args.device or ("cpu" if args.tiny else "cuda")
    args.seeds = args.seeds or list(method.SEEDS)
    out = args.out or Path(os.environ.get("OUT") or _kit.GPU / "out")
    recorder = _kit.Recorder(args.method, argv, out, args.seeds, gpu=args.device != "cpu")
    recorder.config.update({"tiny": args.tiny, "budget_s": args.budget, "device": args.device})
    gpu = recorder.head["machine"].get("gpu", "none")
    print(f"{args.method}: unpacked in {budget.elapsed():.1f} s; GPU {gpu}", flush=True)
    try:
        with budget:  # inside: the watchdog may fire as the timer starts or stops
            method.run(args, budget, recorder)
        recorder.finished = not budget.expired  # the interrupt may have been swallowed
    except KeyboardInterrupt:
        recorder.skip(f"the rest: the {args.budget:.0f} s budget ran out")
    path = recorder.write()
    print(f"wrote {path} and {path.with_suffix('.md')} in {budget.elapsed():.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
