"""``jit``: numba's ``njit`` with an on-disk cache; a notice while compiling.

Every numba kernel of skxmc is compiled through :func:`jit`.

Compilation and the cache
-------------------------
numba compiles a kernel the first time a process calls it and writes the machine code
to its on-disk cache; later processes load it from there (a fraction of a second for all
of skxmc's kernels). So the first ``fit`` after an install, or after an upgrade (which
invalidates the cache), pays the compilation (``benchmarks/first_run.py`` measures it).
While it runs, skxmc prints one line on standard error, once per process and only when
a kernel of skxmc is really compiled (not when it is loaded from the cache)::

    skxmc: compiling numba kernels once (about 10 s); later runs load them from the cache

:func:`skxmc.warmup` (``skxmc warmup`` on the command line, ``skxmc/_warmup.py``)
compiles every kernel ahead of time with the dtypes that fits use, for container images
and CI. The kernels' Python callers convert their inputs to one dtype set (``indptr``
int64, ``indices`` int32 or uint32, float32 features), so that each kernel compiles once,
whatever index dtype scipy chose.

Where the cache goes
--------------------
numba tries, in order: ``NUMBA_CACHE_DIR`` if set; ``__pycache__`` next to the source
files (the normal case for a user's own environment); when the package folder is
read-only (a system site-packages, a container image built by root), the user-wide cache
``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``. A read-only install therefore caches
per user without any setting (``tests/_kernels/test_numba_cache.py`` checks that a second process
loads the kernels instead of compiling them). An image that runs ``skxmc warmup`` at
build time keeps the compiled kernels where the build's user wrote them: build and run
as the same user, or set ``NUMBA_CACHE_DIR`` to the same folder for both.

When no location is writable (read-only package, no writable ``HOME``, no
``NUMBA_CACHE_DIR``), ``njit(cache=True)`` would raise at decoration time, that is while
``import skxmc`` runs. :func:`jit` then compiles the kernel without a cache: each new
process compiles it again (slower start, same results), and one
:class:`~skxmc.exceptions.NumbaCacheWarning` says how to get the cache back. skxmc does not
point ``NUMBA_CACHE_DIR`` to a temporary folder itself: the variable is read once, when
numba is imported, and is global to every numba user of the process, so skxmc would change
another library's configuration behind the user's back; and a per-process temporary
cache would not save any compilation across processes anyway.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, event
from numba.extending import intrinsic

from . import NumbaCacheWarning

__all__ = ["COMPILE_MESSAGE", "interruptible", "jit", "prefetch"]

logger = logging.getLogger(__name__)

# benchmarks/first_run.py on the idle 2-core development machine: 6.6 s of compilation in
# the README demo's first fit (results/first_run.md), more in its first prediction;
# rounded up, as busy machines take longer.
COMPILE_SECONDS = 10
COMPILE_MESSAGE = (
    f"skxmc: compiling numba kernels once (about {COMPILE_SECONDS} s); "
    "later runs load them from the cache"
)

_warned = False
_noticed = False
# Every kernel made by jit(), in definition order (warmup's report, tests).
_KERNELS: list[Any] = []
_PACKAGE = __name__.split(".")[0]


class _CompileNotice(event.Listener):
    """Prints :data:`COMPILE_MESSAGE` when numba starts compiling the first skxmc kernel.

    numba broadcasts ``numba:compile`` only for a real compilation, not for a load from the
    cache, so a process with a warm cache prints nothing.
    """

    def on_start(self, ev: event.Event) -> None:
        global _noticed
        if _noticed:
            return
        func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
        module = getattr(func, "__module__", None) or ""
        if module.split(".")[0] != _PACKAGE:
            return  # another library's kernel, or numba's own helpers
        _noticed = True
        # standard error, not logging: it must show in a plain Python session and in
        # `skxmc demo` without any logging configuration
        print(COMPILE_MESSAGE, file=sys.stderr, flush=True)
        logger.debug("compiling %s.%s: numba cache miss", module, func.__name__)

    def on_end(self, ev: event.Event) -> None:
        pass


event.register("numba:compile", _CompileNotice())


@intrinsic
def prefetch(typingctx: Any, array: Any, i: Any) -> Any:
    """Hint the CPU to load ``array[i]`` into its caches; no effect on any value.

    For compiled kernels only (LLVM's ``llvm.prefetch``: read, highest locality). It reads
    nothing and cannot fault, so ``i`` need not be in range, and the kernels stay
    deterministic. The solvers visit the rows of a problem in a shuffled order; once the
    rows outgrow the L2 cache every visit waits for memory, and asking for the rows a few
    steps ahead hides that wait (``benchmarks/results/prefetch.md``).
    numba has no prefetch of its own, hence this intrinsic.
    """
    if not isinstance(array, types.Array) or array.ndim != 1:
        return None
    sig = types.void(array, i)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(
            context, builder, array_type, view, [index], wraparound=False
        )
        byte_ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_ptr.type, i32, i32, i32]),
            "llvm.prefetch.p0",
        )
        # read (0), keep in all cache levels (3), data cache (1)
        builder.call(fn, [byte_ptr, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Hold a Ctrl-C that arrives while compiled kernels run until they return, then raise
    :class:`KeyboardInterrupt`.

    A compiled kernel cannot stop half-way, but numba calls back into Python (to unpickle
    constants); Python's SIGINT handler raising there leaves the call returning with an
    exception set: ``SystemError``, a crash, or a result used as if nothing happened
    (``tests/_kernels/test_interrupts.py``). So in the main thread, while the
    kernels of a ``with interruptible():`` block (or a function decorated with it) run,
    SIGINT only records itself; the interrupt is raised when the block ends. A handler the
    user installed is left alone, and so are other threads (signals reach only the main
    thread).
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield  # another thread, an outer block, or the user's own handler
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if received:
        raise KeyboardInterrupt


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
            kernel = njit(cache=True, **options)(func)
        except RuntimeError as error:
            if not _no_locator(error):
                raise
            if not _warned:
                _warned = True
                warnings.warn(
                    "numba cannot cache skxmc's compiled kernels (no writable cache location: "
                    "the package folder is read-only and HOME has no writable cache folder); "
                    "they are compiled again in every process. Set NUMBA_CACHE_DIR to a "
                    "writable folder to cache them.",
                    NumbaCacheWarning,
                    stacklevel=2,
                )
            kernel = njit(cache=False, **options)(func)
        _KERNELS.append(kernel)
        return kernel

    return decorate
