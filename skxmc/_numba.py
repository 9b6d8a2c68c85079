"""``jit``: numba's ``njit`` with an on-disk cache when one can be written, else without.

Every numba kernel of skxmc is compiled through :func:`jit`. Its caching differs from
``njit(cache=True)`` in one respect only: ``njit(cache=True)`` raises at decoration time
(``RuntimeError: cannot cache function ...: no locator available``), that is while
``import skxmc`` runs, when numba finds no writable cache location. There is none for a
read-only install (a system site-packages, a container image) used by someone without a
writable ``HOME`` and without ``NUMBA_CACHE_DIR``. :func:`jit` then compiles the kernel
without a cache: each new process compiles it again (slower start, same results), and one
warning says how to get the cache back.

Why fall back instead of pointing ``NUMBA_CACHE_DIR`` to a temporary folder: the variable is
read once, when numba is imported, and is global to every numba user of the process, so
skxmc would have to change another library's configuration behind the user's back; and a
per-process temporary cache would not save any compilation across processes anyway.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from numba import njit

from .exceptions import NumbaCacheWarning

__all__ = ["NumbaCacheWarning", "jit"]


_warned = False


def _no_locator(error: RuntimeError) -> bool:
    # numba's message when none of its cache locators (NUMBA_CACHE_DIR, __pycache__ next to
    # the source, the user-wide cache under HOME) can be written.
    return "no locator available" in str(error)


def jit(**options: Any) -> Callable[[Callable], Callable]:
    """``numba.njit(cache=True, **options)``, or ``cache=False`` where caching is impossible.

    Parameters
    ----------
    **options
        Options of :func:`numba.njit` (``nogil``, ``parallel``, ``inline``, ...) other
        than ``cache``.

    Returns
    -------
    callable
        A decorator that compiles a function with numba.

    Warns
    -----
    NumbaCacheWarning
        Once per process, the first time a kernel cannot be cached.
    """
    if "cache" in options:
        raise TypeError("jit() always tries cache=True; do not pass cache.")

    def decorate(func: Callable) -> Callable:
        global _warned
        try:
            return njit(cache=True, **options)(func)
        except RuntimeError as error:
            if not _no_locator(error):
                raise
        if not _warned:
            _warned = True
            warnings.warn(
                "numba cannot cache skxmc's compiled kernels (no writable cache location: "
                "the package folder is read-only and HOME has no writable cache folder); "
                "they are compiled again in every process. Set NUMBA_CACHE_DIR to a writable "
                "folder to cache them.",
                NumbaCacheWarning,
                stacklevel=2,
            )
        return njit(cache=False, **options)(func)

    return decorate
