"""Paper-budget runs of the four neural methods for one lent GPU: one command each.

``python -m benchmarks.gpu pack METHOD`` (here, where ``../shared/data`` and the
``models`` extra are) writes ``.gpu/METHOD.zip`` (git-ignored; it and the working tree
stay under the 64 MiB a device call carries, which ``pack`` checks). On the device::

    python -m benchmarks.gpu run METHOD        # carry [".gpu/METHOD.zip"]

unpacks it into ``.gpu/METHOD/``, runs with no network (``HF_HUB_OFFLINE=1``,
``TRANSFORMERS_OFFLINE=1``) within ``--budget`` seconds (default 540: a device command
may run 600) and writes ``gpu-METHOD.json`` and ``.md`` (the harness's suite format)
into ``$OUT`` (or ``--out``) after every finished fit. When the budget runs out a
watchdog interrupts the fit in progress, what finished is kept, the file says what did
not run, and the command exits 0. ``--tiny`` is the CPU dry run: a tiny random encoder,
a few steps, on a pack made with ``pack --tiny`` (a few hundred texts, no model).

METHOD is ``matchxml``, ``sharprecl``, ``knnbert`` or ``snm``; each module's docstring
says what its budget reduces against the paper's.
"""

from __future__ import annotations

__all__ = ["METHODS"]

METHODS = ("matchxml", "sharprecl", "knnbert", "snm")
