"""``python -m skxmc``: the command line."""

from .cli import main

__all__: list[str] = []

raise SystemExit(main())
