"""The exceptions and warnings skxmc raises, in one module that imports nothing heavy.

Catch them by their standard bases when you do not want to import skxmc's names:
:class:`InsufficientMemoryError` is a ``MemoryError`` and a ``ValueError``,
:class:`EncoderNotFoundError` an ``OSError``, :class:`WordNetNotFoundError` a
``FileNotFoundError``; the warnings are ``UserWarning`` subclasses, so that
``warnings.filterwarnings`` can silence or escalate each one alone.
"""

from __future__ import annotations

# Defined with the kernels that raise it (skxmc._kernels imports nothing of skxmc).
from ._kernels import NumbaCacheWarning

__all__ = [
    "CheckpointMismatchWarning",
    "EncoderNotFoundError",
    "InsufficientMemoryError",
    "NumbaCacheWarning",
    "TrainingInterruptedWarning",
    "WordNetNotFoundError",
]


class InsufficientMemoryError(MemoryError, ValueError):
    """A hyperparameter implies tensors larger than the memory of the device.

    Subclasses :class:`MemoryError` (it is one, found before the allocation) and
    :class:`ValueError` (the fix is a smaller parameter value; scikit-learn tools and the
    ``skxmc`` command line report ``ValueError`` as an invalid-input error, not a crash).

    Attributes
    ----------
    n_bytes : int
        The estimated size.
    limit_bytes : int
        The memory of the device it was compared with.
    parameter : str
        The parameter(s) that set the size.
    """


class EncoderNotFoundError(OSError):
    """An encoder name is neither a local directory nor loadable from the Hugging Face hub.

    Subclasses :class:`OSError`, which is what ``transformers`` raises in this case.
    """


class WordNetNotFoundError(FileNotFoundError):
    """The WordNet database files are not installed."""


class TrainingInterruptedWarning(UserWarning):
    """Training stopped early on Ctrl-C; the model keeps the last completed step's weights."""


class CheckpointMismatchWarning(UserWarning):
    """``checkpoint_dir`` held the finished checkpoint of another fit (other data or
    parameters); it was not reused, training started from scratch and replaces it."""
