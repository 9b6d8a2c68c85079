"""``skxmc serve`` on the command line: its options and the call that starts the server.

Apart from :mod:`skxmc.cli` so that the command line stays one module of readable size;
the server itself (:mod:`skxmc._serve`, the ``serve`` extra) is imported only when the
command runs, so that the other commands work without FastAPI.
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import sys
from collections.abc import Callable
from typing import Any

from ._serve_limits import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_TEXTS,
    DEFAULT_MAX_WAIT_MS,
)

__all__ = ["add_serve_parser", "serve"]


def serve(args: argparse.Namespace, *, load_model: Callable[..., Any]) -> int:
    """Run ``skxmc serve``; ``load_model`` is the command line's loader (its errors)."""
    for option in ("port", "workers", "max_batch_size", "max_texts", "max_body_bytes"):
        value = getattr(args, option)
        if value < (0 if option == "port" else 1) or (option == "port" and value > 65535):
            bounds = "between 0 and 65535" if option == "port" else ">= 1"
            raise ValueError(f"--{option.replace('_', '-')} must be {bounds}, got {value}.")
    if not args.batch_wait_ms >= 0:
        raise ValueError(f"--batch-wait-ms must be >= 0, got {args.batch_wait_ms}.")
    try:
        from ._serve import ServedModel, log_config, run
    except ImportError as exc:  # the serve extra is missing: its message names the pip command
        print(f"skxmc serve: error: {exc}", file=sys.stderr)
        return 1
    mmap = not args.no_mmap
    if args.workers > 1:
        from .io import describe

        describe(args.model_dir)  # each worker loads the model; a wrong path fails here
        model: Any = args.model_dir
    else:
        # Loaded once, here, with the errors of skxmc predict, before the port opens; the
        # server's log format from now on (uvicorn applies it again when it starts).
        logging.config.dictConfig(log_config())
        loaded = load_model(args.model_dir, mmap=mmap, option="MODEL_DIR")
        model = ServedModel(args.model_dir, model=loaded)
    run(
        model,
        host=args.host,
        port=args.port,
        workers=args.workers,
        max_batch_size=args.max_batch_size,
        max_wait_ms=args.batch_wait_ms,
        max_texts=args.max_texts,
        max_body_bytes=args.max_body_bytes,
        mmap=mmap,
    )
    return 0


def add_serve_parser(sub: Any, func: Callable[[argparse.Namespace], int]) -> None:
    """``skxmc serve``: a model behind HTTP (the ``serve`` extra)."""
    parser = sub.add_parser(
        "serve",
        help="serve a model over HTTP: POST /predict, GET /health, GET /model, /docs, and a "
        "try-it page at / (pip install 'skxmc[serve]')",
        description="Serve a saved model over HTTP with FastAPI on uvicorn: POST /predict "
        "(one text or a batch), POST /explain, GET /health, GET /model, the OpenAPI schema "
        "at /docs and a try-it page at /. Concurrent requests share model calls "
        "(micro-batching). SIGTERM or Ctrl-C stops it after the requests in flight. Needs "
        "pip install 'skxmc[serve]'.",
    )
    parser.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        help="directory of skxmc fit or skxmc.save, or user/repo in the Hugging Face cache",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes, each with the model memory-mapped (default 1)",
    )
    parser.add_argument(
        "--max-batch-size",
        type=int,
        default=DEFAULT_MAX_BATCH_SIZE,
        help="texts per model call at most when requests are batched together (default "
        f"{DEFAULT_MAX_BATCH_SIZE})",
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        default=DEFAULT_MAX_WAIT_MS,
        help="milliseconds a request waits for others to share its model call (default "
        f"{DEFAULT_MAX_WAIT_MS:g}: batch what queued while the model was busy)",
    )
    parser.add_argument(
        "--max-texts",
        type=int,
        default=DEFAULT_MAX_TEXTS,
        help=f"texts per request at most; longer batches get status 400 (default "
        f"{DEFAULT_MAX_TEXTS})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="bytes of a request body at most; larger ones get status 413 (default "
        f"{DEFAULT_MAX_BODY_BYTES})",
    )
    parser.add_argument(
        "--no-mmap",
        action="store_true",
        help="read the model into memory instead of memory-mapping its arrays",
    )
    parser.set_defaults(func=func)
