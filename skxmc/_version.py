"""The version of skxmc (read by the build from here)."""

__all__ = ["__version__"]

__version__ = "0.1.0.dev0"
