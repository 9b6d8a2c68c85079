"""``save`` and ``load``: the two entry points, put together from the modules of
:mod:`skxmc.io` (format and manifest, arrays, codec, registry, directory, card, hub)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._arrays import CHECK_ENTRIES, Arrays, ArrayStore, MappedArrays, open_arrays
from ._card import checked_card_options, model_card_text
from ._codec import decode, encode
from ._describe import summarize
from ._directory import (
    follow_umask,
    move_into_place,
    new_sibling_dir,
    real_target,
    remove_stale_temps,
    snapshot,
)
from ._format import (
    ARRAYS_NAME,
    CARD_NAME,
    CONFIG_NAME,
    MANIFEST_KEY,
    READABLE_VERSIONS,
    build_manifest,
    checked_manifest,
    holds_model,
    is_legacy_cli_dir,
    read_json,
    refuse_foreign_entries,
    verify_files,
)
from ._hub import resolve_model_dir
from ._pipeline import load_legacy_cli_dir
from ._registry import is_fitted, is_pipeline, is_registered
from ._tensors import check_finite

__all__ = ["load", "save"]

logger = logging.getLogger(__name__)


def save(
    estimator: Any,
    directory: str | os.PathLike,
    *,
    overwrite: bool = False,
    model_card: bool | Mapping[str, Any] | None = None,
    predict_only: bool = False,
) -> Path:
    """Save a fitted estimator or pipeline to ``directory`` without pickle.

    The directory gets ``skxmc-model.json`` and ``arrays.npz`` (plus safetensors files for
    torch weights), created with the user's umask; ``skxmc-model.json`` lists the other
    files with their sizes and sha256 hashes, which :func:`load` verifies. The model is
    written into a hidden folder next to its final place and moved in at the end (on Linux
    by an atomic exchange with the old one), so an interrupted or killed save leaves the old
    model or the new one, never a mix. A hidden folder left by a killed save is removed by
    the next save to the same directory. Every file and folder gets the permissions of the
    user's umask. A ``directory`` that is a symbolic link is written through: the link
    stays, and the folder it points to receives the model.

    An existing directory is only replaced when ``overwrite=True``, when it holds an skxmc
    model and when everything in it belongs to that model: a directory that also holds
    other files (notes, plots) is refused with their names, and nothing is deleted.

    Parameters
    ----------
    estimator : estimator or Pipeline
        A fitted skxmc estimator, or a fitted scikit-learn / skxmc
        :class:`~sklearn.pipeline.Pipeline` whose steps are skxmc estimators,
        ``TfidfVectorizer`` / ``CountVectorizer`` (without callables), pipelines of those,
        or ``"passthrough"``.
    directory : str or path-like
        Target directory; created if missing.
    overwrite : bool, default=False
        Replace a model already saved in ``directory``.
    model_card : bool or dict, default=None
        Write a model card, ``README.md`` (Hugging Face style: front matter with
        ``library_name: skxmc`` and tags, then the estimator, its non-default parameters,
        the number of labels and features). ``True`` or a dict writes one; the dict may
        add ``"data_description"`` (str, markdown: what the model was trained on) and
        ``"metrics"`` (dict of metric name to number). The card is listed in
        ``skxmc-model.json`` like the other files, so :func:`load` verifies it too.
        ``None`` / ``False``: no card.
    predict_only : bool, default=False
        Save a predict-only copy: every estimator of the model that has a ``compact()``
        method (:meth:`XRLinearClassifier.compact <skxmc.XRLinearClassifier.compact>`,
        also as a pipeline step) is saved compacted, without what only training and
        inspection need; it loads and predicts as the full model does (bit-identical
        scores), about 40% smaller (see the persistence page of the docs). The estimator
        given here is not changed.
        ``skxmc info`` shows such a model as predict-only.

    Returns
    -------
    pathlib.Path
        The directory; reload with :func:`skxmc.load`.

    Raises
    ------
    TypeError
        For other estimators or pipeline steps (use pickle / joblib for those), or a
        ``model_card`` that is neither a bool nor a dict.
    ValueError
        When ``estimator`` is not fitted, or ``model_card`` has an unknown key or a value
        of the wrong type, or with ``predict_only=True`` when no part of it can be
        compacted.
    FileExistsError
        When ``directory`` is a file, a non-empty folder without a model, a model and
        ``overwrite=False``, or a model together with files that are not part of it.

    Examples
    --------
    >>> import tempfile
    >>> import skxmc
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc.pipeline import make_pipeline
    >>> texts = ["red apple", "green apple", "red car", "fast car"]
    >>> labels = [["fruit"], ["fruit"], ["vehicle"], ["vehicle"]]
    >>> pipe = make_pipeline(TfidfVectorizer(), skxmc.XRLinearClassifier(top_k=1))
    >>> path = skxmc.save(pipe.fit(texts, labels), tempfile.mkdtemp() + "/model")
    >>> skxmc.load(path).predict_topk(["a fast car"])[0].tolist()
    [['vehicle']]
    """
    given = Path(directory)
    directory = real_target(given)  # a symbolic link is written through
    card = checked_card_options(model_card)  # before anything is written
    _check_saveable(estimator, directory, overwrite)
    if predict_only:
        estimator = _predict_only_copy(estimator)
    store = ArrayStore()
    spec = encode(estimator, "model", store)
    directory.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(directory)
    tmp = new_sibling_dir(directory)
    try:
        _write_model(tmp, estimator, spec, store, card)
        if directory.exists():
            refuse_foreign_entries(directory)  # again: files may have arrived meanwhile
        move_into_place(tmp, directory)  # after an exchange, ``tmp`` holds the old model
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("saved %s to %s", type(estimator).__name__, directory)
    return given


def _predict_only_copy(estimator: Any) -> Any:
    """``estimator`` with every part that has ``_predict_only_copy`` replaced by its
    compacted copy (pipelines: a new pipeline object; nothing of ``estimator`` changes)."""
    found = []

    def compacted(est: Any) -> Any:
        if is_pipeline(est):
            copy = object.__new__(type(est))
            copy.__dict__.update(est.__dict__)
            copy.steps = [(name, compacted(step)) for name, step in est.steps]
            return copy
        if hasattr(est, "_predict_only_copy"):
            found.append(type(est).__name__)
            return est._predict_only_copy()
        return est

    copy = compacted(estimator)
    if not found:
        raise ValueError(
            f"predict_only=True, but no part of this {type(estimator).__name__} has "
            f"training-only state to drop (estimators with a compact() method do, such as "
            f"XRLinearClassifier); save it without predict_only."
        )
    return copy


def _check_saveable(estimator: Any, directory: Path, overwrite: bool) -> None:
    """Refuse, before anything is written, what :func:`save` must not do."""
    if not (is_registered(estimator) or is_pipeline(estimator)):
        raise TypeError(
            f"{type(estimator).__name__} does not support save(); skxmc.save takes skxmc "
            f"estimators and Pipelines of them; use pickle / joblib for others."
        )
    if not is_fitted(estimator):
        raise ValueError(
            f"this {type(estimator).__name__} is not fitted yet; fit it before saving."
        )
    if not directory.exists():
        return
    if not directory.is_dir():
        raise FileExistsError(f"directory {str(directory)!r} exists and is a file.")
    if any(directory.iterdir()):
        if not holds_model(directory):
            raise FileExistsError(
                f"directory {str(directory)!r} is not empty and holds no skxmc model; "
                f"choose an empty or new directory (nothing was written)."
            )
        if not overwrite:
            raise FileExistsError(
                f"directory {str(directory)!r} already holds a model; pass overwrite=True "
                f"to replace it."
            )
        refuse_foreign_entries(directory)


def _write_model(tmp: Path, estimator: Any, spec: dict, store: ArrayStore, card: Any) -> None:
    """Write the model's files into the empty folder ``tmp``, the config last."""
    from .._version import __version__

    np.savez(tmp / ARRAYS_NAME, **store.arrays)
    if hasattr(estimator, "_save_extra_files"):
        estimator._save_extra_files(tmp)
    for part, est in store.parts:
        (tmp / part).mkdir(parents=True)
        est._save_extra_files(tmp / part)
    if card is not None:

        def shape_of(key: str) -> tuple | None:
            return getattr(store.arrays.get(key), "shape", None)

        summary = summarize(spec, store.format_version, __version__, shape_of)
        text = model_card_text(summary, card, estimator)
        (tmp / CARD_NAME).write_text(text, encoding="utf-8")
    config = {"format_version": store.format_version, "skxmc_version": __version__, "model": spec}
    # Written last, with the list of the files above: a folder without it is no model.
    config[MANIFEST_KEY] = build_manifest(tmp)
    (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=1), encoding="utf-8")
    follow_umask(tmp)  # some writers (safetensors) create files 0600


def load(
    directory: str | os.PathLike,
    *,
    mmap: bool = False,
    verify: bool | None = None,
    trusted: bool = False,
) -> Any:
    """Load an estimator or pipeline saved with :func:`save`; never unpickles anything.

    Only skxmc's registered classes and scikit-learn's text vectorisers are created, so a
    model directory from someone else runs no code. Pipelines (``skxmc fit`` writes one)
    come back as :class:`skxmc.pipeline.Pipeline`.

    Before anything is used, the files are checked against the list in
    ``skxmc-model.json`` (present, same size and sha256, nothing unknown in the model's
    sub-folders), as are sparse structures, shapes, label counts, finite weights (also in
    safetensors) and parameters; ``verify`` chooses how much content these checks read.
    A directory without the list is refused unless ``trusted=True`` (with a warning). A
    model replaced by a ``save(overwrite=True)`` during the load is read once more; if it
    is replaced again, the error says so.

    A string that is not an existing path and reads as a Hugging Face repository id
    (``"user/repo"``) is resolved in the local Hugging Face cache (downloaded beforehand
    with ``hf download user/repo``; nothing is downloaded here).

    Parameters
    ----------
    directory : str or path-like
        A directory written by :func:`save` (or by ``skxmc fit``), its
        ``skxmc-model.json``, or the id of a Hugging Face repository holding one, in the
        local cache.
    mmap : bool, default=False
        Map the arrays of ``arrays.npz`` into memory instead of reading them (pages read
        on first use, shared by every process that maps the file: several serving
        processes hold one copy of a large model). Copy-on-write: the files never change.
    verify : bool or None, default=None
        How much of the files' content is checked before use; the files' presence and
        sizes (a truncated or extended file), the archive's headers, the shapes and the
        structure whose size grows with the labels or tree nodes (row pointers) are
        always checked.

        - ``True``: also every file's sha256, and every entry of every array and tensor
          (index ranges, finite values): the whole model is read once.
        - ``None`` (the default): ``True`` without ``mmap``; with ``mmap``, all but the
          sha256 (the entry checks keep compiled code in bounds whatever the files hold;
          the hash, which an editor can rewrite too, guards against accidental damage).
        - ``False``: no hash and no entry checks: a mapped load reads only headers and
          row pointers. A damaged or crafted file can then make prediction return wrong
          scores or crash the process: only for directories you saved yourself or
          loaded once with ``verify=True``.
    trusted : bool, default=False
        Load a directory whose ``skxmc-model.json`` lists no files (nothing can be
        verified), with a warning. Only for directories you saved yourself with an older
        skxmc; save them again to add the list.

    Returns
    -------
    estimator
        The fitted estimator or pipeline.

    Raises
    ------
    FileNotFoundError
        When ``directory`` holds no model or a file of the model is missing, or names a
        Hugging Face repository that is not in the local cache.
    NotADirectoryError
        When ``directory`` is a file other than ``skxmc-model.json``.
    ValueError
        When a file is damaged, truncated or changed, or the model it describes is
        inconsistent or has invalid parameters; the message names the file.

    Examples
    --------
    >>> import skxmc
    >>> skxmc.load("no/such/dir")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no skxmc model in 'no/such/dir' (skxmc-model.json is missing).
    """
    if verify not in (True, False, None):
        raise ValueError(f"verify must be True, False or None; got {verify!r}.")
    return _load_unreplaced(resolve_model_dir(directory), mmap=mmap, verify=verify, trusted=trusted)


def _load_unreplaced(directory: Path, **options: Any) -> Any:
    """:func:`_load` of a model that no save replaced while it was read; one more try if
    one did."""
    # A save(overwrite=True) may replace the model while it is read: whether a load failed
    # or succeeded, it counts only if the model it started with is still the one there.
    for attempt in range(2):
        before = snapshot(directory)
        try:
            est = _load(directory, **options)
        except (ValueError, OSError) as exc:
            if snapshot(directory) == before:
                raise
            error: Exception | None = exc
        else:
            if snapshot(directory) == before:
                return est
            error = None
        logger.info("%s was replaced while loading (attempt %d)", directory, attempt + 1)
    raise ValueError(
        f"the model in {str(directory)!r} was replaced while loading, twice (a save with "
        f"overwrite=True is writing it); load it again when the save is done."
    ) from error


def _load(directory: Path, *, mmap: bool, verify: bool | None, trusted: bool) -> Any:
    """:func:`load` of one version of the model in ``directory``."""
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        if is_legacy_cli_dir(directory):
            return load_legacy_cli_dir(directory, load, mmap=mmap, verify=verify, trusted=trusted)
        old = directory.with_name(f".{directory.name}.old")
        hint = (
            f"; a save into it was interrupted and the previous model is in {str(old)!r}"
            if (old / CONFIG_NAME).is_file()
            else ""
        )
        raise FileNotFoundError(
            f"no skxmc model in {str(directory)!r} ({CONFIG_NAME} is missing){hint}."
        )
    config = read_json(config_path)
    if config.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(
            f"{config_path} has format version {config.get('format_version')!r}; this skxmc "
            f"reads versions {', '.join(map(str, READABLE_VERSIONS))}: upgrade skxmc."
        )
    if not isinstance(config.get("model"), dict):
        raise ValueError(f"{config_path} describes no model (its 'model' entry is missing).")
    if MANIFEST_KEY in config:
        manifest = checked_manifest(config[MANIFEST_KEY], config_path)
        hashes = verify if verify is not None else not mmap
        verify_files(directory, manifest, config_path, hashes=hashes)
        weights = [directory / name for name in manifest if name.endswith(".safetensors")]
    elif trusted:
        warnings.warn(
            f"{config_path} lists no files, so the model directory cannot be checked for "
            f"missing or changed files; loading it because trusted=True. Save the model "
            f"again to add the list.",
            UserWarning,
            stacklevel=4,
        )
        weights = sorted(directory.rglob("*.safetensors"))
    else:
        raise ValueError(
            f"{config_path} lists no files (its {MANIFEST_KEY!r} entry is missing: saved by "
            f"an older skxmc, or edited), so nothing in the model directory can be "
            f"verified. If you trust this directory, load it with skxmc.load(path, "
            f"trusted=True) and save it again to add the list."
        )
    if verify is not False:
        for path in weights:
            check_finite(path)
    entries = CHECK_ENTRIES.set(verify is not False)
    try:
        with open_arrays(directory / ARRAYS_NAME) as npz:
            arrays = (MappedArrays if mmap else Arrays)(npz, directory / ARRAYS_NAME)
            try:
                est = decode(config["model"], arrays, directory)
            except (KeyError, TypeError, IndexError, RecursionError) as exc:
                raise ValueError(
                    f"{config_path} does not describe a model this skxmc can build "
                    f"({type(exc).__name__}: {exc}): damaged or edited?"
                ) from exc
            finally:
                if mmap:
                    arrays.close()
    finally:
        CHECK_ENTRIES.reset(entries)
    if "__estimator__" in config["model"] and hasattr(est, "_load_extra_files"):
        est._load_extra_files(directory)
    return est
