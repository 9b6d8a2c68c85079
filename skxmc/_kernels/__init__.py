"""The ground floor of skxmc: every numba-compiled function, and nothing else.

Modules here import numpy, scipy, numba (and llvmlite, numba's own code generator) only,
never an estimator or any other part of skxmc, so that the kernels can be compiled,
tested and upgraded (a numba release is what breaks them first) on their own. The Python
callers that validate inputs and convert them to the kernels' one dtype set stay with
their estimators (``skxmc.tree``, ``skxmc.linear``, ``skxmc._ranking`` ...).

* :mod:`.jit`: ``jit`` (``njit`` with the on-disk cache), the compile notice, the
  ``prefetch`` intrinsic and ``interruptible`` (Ctrl-C while kernels run);
* :mod:`.kmeans`: balanced spherical 2-means of the label tree;
* :mod:`.sparse`: the radix sort and the threaded sorted sparse product;
* :mod:`.ranking`: top-k of score matrices and hit detection;
* :mod:`.dcd`: XR-Linear's dual coordinate descent solvers (one binary problem);
* :mod:`.layer`: one XR-Linear layer's problems, solved and pruned;
* :mod:`.beam`: beam-search scoring of XR-Linear's layers.

Compiling them all ahead of time is :func:`skxmc.warmup` (``skxmc/_warmup.py``), which
sits on the top floor because it drives the estimators.

This ``__init__`` imports nothing, so that :mod:`skxmc.exceptions` can re-export
:class:`NumbaCacheWarning` without importing numba.
"""

from __future__ import annotations

__all__ = ["NumbaCacheWarning"]


class NumbaCacheWarning(UserWarning):
    """numba has no writable cache location: kernels are compiled in every process."""


# Documented and caught as skxmc.exceptions.NumbaCacheWarning, which re-exports it.
NumbaCacheWarning.__module__ = "skxmc.exceptions"
