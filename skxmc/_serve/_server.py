"""Running the application: uvicorn, its logging, ``--workers`` and SIGTERM."""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
from typing import Any

from .._optional import require_extra
from ._app import OPTIONS_ENV, create_app
from ._model import ServedModel

with require_extra("serve", "skxmc serve"):
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

__all__ = ["log_config", "run"]

logger = logging.getLogger(__name__)


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's logging configuration plus skxmc's loggers, on standard error.

    uvicorn applies it in every worker process too (they do not inherit the parent's
    logging), so the request lines of all workers look alike. uvicorn's own access log is
    off: the server writes its own line per request (with the number of texts).
    """
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["skxmc"] = {
        "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
    }
    config["handlers"]["skxmc"] = {
        "class": "logging.StreamHandler",
        "formatter": "skxmc",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["skxmc"] = {
        "handlers": ["skxmc"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


def _stop_on_sigterm() -> None:
    """Make SIGTERM end the process with status 0.

    uvicorn catches SIGTERM, finishes the requests in flight, runs the shutdown, and then
    raises the signal again with the handler that was there before it started: Python's
    default would end the process "killed by SIGTERM". This handler ends it with
    ``SystemExit(0)`` instead: a stop that was asked for is a clean exit. It also
    applies while the model is still loading, before uvicorn has its own handler.
    """

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)


def run(
    model_dir: str | os.PathLike | ServedModel,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    log_level: str = "info",
    **options: Any,
) -> None:
    """Serve ``model_dir`` until SIGTERM or Ctrl-C.

    Parameters
    ----------
    model_dir : str, path-like or ServedModel
        The model directory, or the model loaded from it (only with ``workers=1``).
    host : str, default="127.0.0.1"
        Address to listen on (``0.0.0.0``: every interface).
    port : int, default=8000
        TCP port.
    workers : int, default=1
        Processes (uvicorn workers), each with the model loaded (memory-mapped arrays
        are shared between them through the page cache).
    log_level : str, default="info"
        ``"info"`` logs one line per request.
    **options
        Keywords of :func:`~skxmc._serve.create_app` (``max_batch_size``,
        ``max_wait_ms``, ``max_texts``, ``max_body_bytes``, ``mmap``).
    """
    _stop_on_sigterm()
    settings = {
        "host": host,
        "port": port,
        "log_config": log_config(log_level),
        "log_level": log_level,
        "access_log": False,
    }
    if workers == 1:
        # Loaded here, before the port opens: a bad model directory is an error of the
        # command, not of a server that answers 500.
        app = create_app(model_dir, **options)
        uvicorn.run(app, **settings)
        return
    if isinstance(model_dir, ServedModel):
        raise ValueError("workers > 1 load the model in each process: pass its directory.")
    # Several processes: uvicorn imports the app in each of them from an import string,
    # with the options passed through the environment (which the workers inherit).
    os.environ[OPTIONS_ENV] = json.dumps({"model": os.fspath(model_dir), **options})
    uvicorn.run("skxmc._serve._app:app_from_environment", factory=True, workers=workers, **settings)
