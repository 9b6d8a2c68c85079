"""The model server's default limits, in one place for ``skxmc serve``'s options and
:func:`skxmc._serve.create_app`.

A module of its own because the command line must not import the ``serve`` extra
(FastAPI, uvicorn), which :mod:`skxmc._serve` imports.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_TEXTS",
    "DEFAULT_MAX_WAIT_MS",
]

DEFAULT_MAX_BATCH_SIZE = 64
DEFAULT_MAX_WAIT_MS = 0.0
DEFAULT_MAX_TEXTS = 1000
# 1000 texts of 10 kB each: a request larger than that is more likely a mistake (or an
# attack) than a batch, and reading it whole would cost the other callers memory.
DEFAULT_MAX_BODY_BYTES = 10_000_000
