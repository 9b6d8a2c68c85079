"""Progress messages of skxmc's estimators: printed when ``verbose > 0``, logged always.

The convention of every skxmc estimator and helper with a ``verbose`` parameter:

* ``verbose > 0``: each progress line (a stage finished, a summary of ``fit``) is printed
  to standard output and flushed at once, as scikit-learn's estimators, liblinear and
  skorch do, so ``verbose=1`` shows progress without any logging configuration.
* Whatever ``verbose``: the same line is logged at DEBUG on the logger of the module that
  emits it (``logging.getLogger(__name__)``: ``skxmc.tree``, ``skxmc.text._training``,
  ...), so an application that configures logging can capture it, e.g. with
  ``logging.getLogger("skxmc").setLevel(logging.DEBUG)`` and a handler; at the default
  WARNING level nothing is shown.
* tqdm progress bars (shown for ``verbose > 0``) are separate: they write to standard
  error, as tqdm does.

Every module of the package takes its logger as ``logging.getLogger(__name__)``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["progress", "progress_printing"]

# Whether ``progress`` prints (``verbose > 0``); the command line turns it off and shows
# the DEBUG records instead, so that ``skxmc -v`` has one progress style on stderr.
_PRINT = [True]


@contextlib.contextmanager
def progress_printing(enabled: bool) -> Iterator[None]:
    """Within the block, :func:`progress` prints (``enabled``) or only logs. For
    applications that show skxmc's DEBUG records themselves (as ``skxmc -v`` does): each
    progress line then appears once, in their logging format. Process-wide."""
    before = _PRINT[0]
    _PRINT[0] = enabled
    try:
        yield
    finally:
        _PRINT[0] = before


def progress(logger: logging.Logger, verbose: int | bool | None, msg: str, *args: object) -> None:
    """Print a progress line when ``verbose > 0``; log it at DEBUG on ``logger`` always.

    Parameters
    ----------
    logger : logging.Logger
        The emitting module's logger (``logging.getLogger(__name__)``).
    verbose : int, bool or None
        The estimator's ``verbose``: the line is printed to standard output when it is
        greater than 0.
    msg : str
        The message, a ``%``-format string as for :meth:`logging.Logger.debug`.
    *args : object
        The arguments of ``msg``.
    """
    if verbose is not None and verbose > 0 and _PRINT[0]:
        # Formatted like the log record, so that both show the same line.
        print(msg % args if args else msg, flush=True)
    # stacklevel=2: the record names the caller's function and line, not this helper's.
    logger.debug(msg, *args, stacklevel=2)
