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
- :mod:`._pecos`: libpecos ``XLinearModel`` folders in and out, :func:`from_pecos` and
  :func:`to_pecos` (numpy and scipy only).

Why not skops.io (tried, skops 0.16, ``python -m benchmarks persistence``): on the demo
pipeline (TF-IDF + XR-Linear) skops wrote 40.0 MiB in 5.3 s and read it in 2.0 s; skxmc
writes 16.3 MiB in 0.26 s and reads it in 0.12 s (0.07 s memory-mapped), same top-10.
skops also asks every user to trust five types by name (skxmc's three classes and
scipy's two sparse formats) or to call ``get_untrusted_types`` and pass the result, which
is how such checks end up switched off; it restores objects through their ``__dict__``,
so nothing checks a crafted sparse matrix before compiled code indexes it; it has no
integrity manifest, no memory-mapped arrays and no safetensors for torch weights; and it
would change the format that models saved by earlier skxmc versions use. skxmc keeps its
own: one readable JSON file plus ``.npz`` / safetensors, the sha256 manifest, the entry
checks, mmap, and a registry in place of a ``trusted=`` list.

Hub: ``load("user/repo")`` reads the *local* Hugging Face cache only (:mod:`._hub`). A
saved folder is a Hub repository as it is (``README.md`` is a model card with
``library_name: skxmc``), so ``huggingface_hub.upload_folder`` pushes it and
``snapshot_download`` fetches it. ``ModelHubMixin`` was considered, not adopted: it would
add a second save / load path (``save_pretrained`` / ``from_pretrained`` with its own
``config.json``) beside :func:`save` / :func:`load`, which already are that protocol with
a verified manifest.
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
from ._mixin import PersistenceMixin
from ._pecos import from_pecos, is_pecos_dir, to_pecos
from ._registry import persistent

__all__ = [
    "ARRAYS_NAME",
    "CARD_NAME",
    "CONFIG_NAME",
    "FORMAT_VERSION",
    "MANIFEST_KEY",
    "PersistenceMixin",
    "checks_entries",
    "describe",
    "from_pecos",
    "holds_model",
    "is_pecos_dir",
    "load",
    "mapped_file_span",
    "persistent",
    "refuse_foreign_entries",
    "resolve_model_dir",
    "save",
    "to_pecos",
]
