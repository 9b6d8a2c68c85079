"""Where a model is read from: a folder, the ``skxmc-model.json`` file in one, or a Hugging
Face repository id (``"user/repo"``) in the *local* Hugging Face cache.

Nothing is downloaded here: :func:`resolve_model_dir` calls
``huggingface_hub.snapshot_download(repo, local_files_only=True)``, which reads the cache
offline, as ``from_pretrained`` does without a network; users download with
``huggingface_hub.snapshot_download`` or ``hf download`` (see :mod:`skxmc.io` on why
there is no push / download here).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ._format import CONFIG_NAME

__all__ = ["resolve_model_dir"]

logger = logging.getLogger(__name__)

# "user/repo" as the Hugging Face hub spells repository ids (no "--" or "..": the cache
# folder name models--user--repo would be ambiguous).
_REPO_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def resolve_model_dir(directory: str | os.PathLike) -> Path:
    """The folder of a model: ``directory`` itself (or its folder, for the path of its
    ``skxmc-model.json``), or, for a string that is not an existing
    path and reads as a Hugging Face repository id (``"user/repo"``), its snapshot in the
    local Hugging Face cache (offline: nothing is downloaded).

    Parameters
    ----------
    directory : str or path-like
        A model directory, or a repository id (a string only: a path-like is always a path).

    Returns
    -------
    pathlib.Path
        The folder to read.

    Raises
    ------
    FileNotFoundError
        When ``directory`` names a repository that is not in the local cache.
    """
    path = Path(directory)
    if path.is_file():
        if path.name == CONFIG_NAME:  # the model's own file: its folder is meant
            return path.parent
        raise NotADirectoryError(
            f"{str(path)!r} is a file; pass the model's folder (the one holding {CONFIG_NAME})."
        )
    if (
        not isinstance(directory, str)
        or path.exists()
        # The folder an interrupted save moved aside: load() points to it.
        or path.with_name(f".{path.name}.old").exists()
        or not _REPO_ID_PATTERN.fullmatch(directory)
        or "--" in directory
        or ".." in directory
    ):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE

    try:
        return Path(snapshot_download(directory, local_files_only=True))
    except (OSError, ValueError) as exc:  # LocalEntryNotFoundError is an OSError
        logger.debug("%s is not in the Hugging Face cache: %s", directory, exc)
    raise FileNotFoundError(
        f"no skxmc model in {directory!r}: there is no such directory, and no Hugging Face "
        f"repository {directory!r} in the local cache ({HF_HUB_CACHE}; skxmc reads the cache "
        f"only, offline). Download it first with huggingface_hub.snapshot_download("
        f"{directory!r}) or `hf download {directory}`, or give the path of a model directory."
    )
