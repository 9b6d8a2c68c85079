"""skxmc's benchmark harness: ``python -m benchmarks SUITE [--quick]``.

Suites live in :mod:`benchmarks.suites` (one module each, listed in its ``SUITES``);
measuring and recording helpers in :mod:`benchmarks._harness`; the results index and the
docs tables in :mod:`benchmarks._docs`. See ``benchmarks/README.md``.

Nothing is imported here: a child process measuring memory starts from this package.
"""
