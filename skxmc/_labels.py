"""The old, private path of :mod:`skxmc.labels` (kept so that pickles made before the
module became public still load)."""

from .labels import *  # noqa: F403
from .labels import __all__  # noqa: F401
