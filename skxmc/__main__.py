"""``python -m skxmc``: the command line."""

from .cli import main

raise SystemExit(main())
