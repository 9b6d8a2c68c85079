"""The model server behind ``skxmc serve`` (the ``serve`` extra: FastAPI on uvicorn).

- :mod:`._model`: :class:`ServedModel`, the model loaded once (memory-mapped), its
  top-k rows and its description for ``GET /model``; no web framework.
- :mod:`._batcher`: :class:`MicroBatcher`, concurrent requests in one model call.
- :mod:`._app`: :func:`create_app`, the routes, validation answered with 400.
- :mod:`._page`: the try-it page at ``/``.
- :mod:`._server`: :func:`run`, uvicorn with logging, ``--workers`` and SIGTERM.

docs/serving.rst describes the HTTP API.
"""

from __future__ import annotations

from ._app import create_app
from ._batcher import MicroBatcher
from ._model import ServedModel
from ._server import log_config, run

__all__ = ["MicroBatcher", "ServedModel", "create_app", "log_config", "run"]
