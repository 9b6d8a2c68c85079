"""Saving and loading fitted estimators without pickle.

A model directory holds ``skxmc-model.json`` (class name, parameters, JSON attributes, skxmc
version, and the list of every other file with its size and sha256) and ``arrays.npz``
(numpy arrays and sparse matrices, loaded with ``allow_pickle=False``); estimators with
torch weights add safetensors files. Loading only creates classes registered with
:func:`persistent` (and scikit-learn's text vectorisers), so opening a model directory
from someone else never executes code from it.

One module per concern; this package imports no estimator (estimators register
themselves, and a saved class is found through :mod:`skxmc._lazy`):

- :mod:`._format`: file names, format versions, the JSON reader, the sha256 manifest.
- :mod:`._arrays`: ``arrays.npz`` read lazily or memory-mapped, sparse-matrix checks,
  string arrays as UTF-8 bytes plus offsets.
- :mod:`._tensors`: finiteness of safetensors tensors, read without torch.
- :mod:`._registry`: :func:`persistent`, :class:`PersistenceMixin`, the state checks.
- :mod:`._codec`: the JSON form of estimators, parameters and attributes.
- :mod:`._pipeline`: pipelines step by step, and ``skxmc fit``'s legacy layout.
- :mod:`._directory`: atomic replacement, umask, symbolic links, stale temporaries.
- :mod:`._card` / :mod:`._describe`: the model card, and :func:`describe`.
- :mod:`._hub`: folders, ``skxmc-model.json`` paths, and repository ids in the local
  Hugging Face cache.
- :mod:`._api`: :func:`save` and :func:`load`.

Why not skops.io: ``skops.io`` was tried on an XR-Linear model (skops 0.16). It stores a
zip of per-object JSON schemas and ``.npy`` files and, on load, refuses any type not
trusted explicitly, so every user must list skxmc's classes (and numpy's, scipy's
internals) in ``trusted=`` or call ``get_untrusted_types`` first; it has no integrity
manifest (a truncated or swapped member is only caught where the reader fails), no
memory-mapped arrays (serving several processes from one copy of a large model), no
safetensors for torch weights, and it would change the on-disk format that models saved
by earlier skxmc versions use. What skxmc keeps is what skops cannot give: the verified
manifest, mmap, a format a person can read (one JSON file), and the class registry (no
``trusted=`` list for users: skxmc's own classes are the only ones created). See
``benchmarks/results/persistence_skops.json`` for the measurement.

Hub: models are read from the *local* Hugging Face cache (``load("user/repo")``); a saved
folder is a valid Hub repository as it is (model card included), so
``huggingface_hub.upload_folder`` pushes it and ``snapshot_download`` fetches it; a
``ModelHubMixin`` subclass would add a second save / load path with its own
``config.json``, for two methods users already have.
"""

from __future__ import annotations

from ._api import load, save
from ._arrays import checks_entries, mapped_file_span
from ._describe import describe
from ._format import (
    ARRAYS_NAME,
    CARD_NAME,
    CONFIG_NAME,
    FORMAT_VERSION,
    MANIFEST_KEY,
    holds_model,
    refuse_foreign_entries,
)
from ._hub import resolve_model_dir
from ._registry import PersistenceMixin, persistent

__all__ = [
    "ARRAYS_NAME",
    "CARD_NAME",
    "CONFIG_NAME",
    "FORMAT_VERSION",
    "MANIFEST_KEY",
    "PersistenceMixin",
    "checks_entries",
    "describe",
    "holds_model",
    "load",
    "mapped_file_span",
    "persistent",
    "refuse_foreign_entries",
    "resolve_model_dir",
    "save",
]
