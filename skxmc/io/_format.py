"""The on-disk format of a model directory: its file names, format versions, the JSON
reader and the manifest (``"files"`` of ``skxmc-model.json``: every other file's size and
sha256), which :func:`skxmc.load` checks before it reads anything else."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "ARRAYS_NAME",
    "CARD_NAME",
    "CONFIG_NAME",
    "FORMAT_VERSION",
    "LEGACY_RANKER_DIR",
    "LEGACY_VECTORIZER_FILE",
    "MANIFEST_KEY",
    "MAX_JSON_DEPTH",
    "OWNED_WITHOUT_MANIFEST",
    "PART_PATTERN",
    "READABLE_VERSIONS",
    "build_manifest",
    "checked_manifest",
    "foreign_entries",
    "holds_model",
    "is_legacy_cli_dir",
    "owned_dirs",
    "read_json",
    "refuse_foreign_entries",
    "sha256",
    "verify_files",
]

CONFIG_NAME = "skxmc-model.json"
ARRAYS_NAME = "arrays.npz"
CARD_NAME = "README.md"
# Version 2 adds pipelines and nested estimators with files (``parts/``); version 3 stores
# string arrays (labels) as UTF-8 bytes plus offsets. A model is written with the lowest
# version that holds it, so that older skxmc releases keep reading what they can.
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
# The layout ``skxmc fit`` wrote before it saved a pipeline: read, never written.
LEGACY_RANKER_DIR = "ranker"
LEGACY_VECTORIZER_FILE = "vectorizer.json"
PART_PATTERN = re.compile(r"parts/[0-9]+")
# The key of skxmc-model.json that lists the other files: {name: {"size", "sha256"}}.
MANIFEST_KEY = "files"
# What a model directory saved before the manifest may hold (the estimators' files and the
# legacy ``skxmc fit`` layout): overwrite replaces these and refuses anything else.
OWNED_WITHOUT_MANIFEST = frozenset(
    {CONFIG_NAME, ARRAYS_NAME, "model.safetensors", "encoder", "parts"}
    | {LEGACY_RANKER_DIR, LEGACY_VECTORIZER_FILE}
)
# How deep skxmc-model.json may nest: a model nests a few levels per pipeline step; a
# deeper file is crafted, and would otherwise end in a RecursionError.
MAX_JSON_DEPTH = 200


def read_json(path: Path) -> dict:
    """The JSON object in ``path``, with errors that name the file."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError(
            f"{path} nests deeper than this skxmc reads (at most {MAX_JSON_DEPTH} levels): "
            f"it is damaged or crafted, not a saved model."
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"{path} is not valid JSON ({exc}): truncated or damaged?") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds a JSON {type(value).__name__}; expected an object.")
    _check_depth(value, path)
    return value


def _check_depth(value: Any, path: Path) -> None:
    """Refuse JSON nested deeper than ``MAX_JSON_DEPTH`` (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(
                f"{path} nests deeper than this skxmc reads (at most {MAX_JSON_DEPTH} "
                f"levels): it is damaged or crafted, not a saved model."
            )
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(root: Path) -> dict[str, dict]:
    """``{relative name: {"size", "sha256"}}`` of every file under ``root`` but the config."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path != root / CONFIG_NAME:
            name = path.relative_to(root).as_posix()
            files[name] = {"size": path.stat().st_size, "sha256": sha256(path)}
    return files


def checked_manifest(manifest: Any, source: Path) -> dict[str, dict]:
    if not isinstance(manifest, dict):
        raise ValueError(f"{source}: {MANIFEST_KEY!r} must map file names to sizes and hashes.")
    for name, entry in manifest.items():
        parts = PurePosixPath(name).parts
        # Relative names inside the directory only: a crafted list never reaches elsewhere.
        if (
            not parts
            or PurePosixPath(name).is_absolute()
            or any(part in ("", ".", "..") for part in parts)
            or "\\" in name
            or name == CONFIG_NAME
            or not isinstance(entry, dict)
            or not isinstance(entry.get("size"), int)
            or not isinstance(entry.get("sha256"), str)
        ):
            raise ValueError(f"{source}: invalid entry {name!r} in its {MANIFEST_KEY!r} list.")
    return manifest


def owned_dirs(manifest: dict) -> set[PurePosixPath]:
    """The folders (relative, without the top level) that hold the manifest's files."""
    return {
        parent
        for name in manifest
        for parent in PurePosixPath(name).parents
        if parent != PurePosixPath(".")
    }


def verify_files(
    directory: Path, manifest: dict[str, dict], source: Path, *, hashes: bool = True
) -> None:
    """Every listed file is there with its recorded size (and hash, unless ``hashes`` is
    False), and the folders of the model hold nothing else (a tokenizer reads any
    vocabulary file it finds in its folder)."""
    for name, entry in manifest.items():
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing ({source} lists it): the model directory is incomplete; "
                f"copy or save it again."
            )
        size = path.stat().st_size
        if size != entry["size"]:
            raise ValueError(
                f"{path} has {size} bytes where {entry['size']} were saved: the file is "
                f"truncated, damaged or was replaced."
            )
        if hashes and sha256(path) != entry["sha256"]:
            raise ValueError(
                f"{path} is not the file that was saved (its sha256 differs): the file is "
                f"damaged or was replaced."
            )
    folders = owned_dirs(manifest)
    extra = []
    for folder in sorted(folders):
        for path in (directory / folder).iterdir():
            rel = folder / path.name
            if rel.as_posix() not in manifest and rel not in folders:
                extra.append(rel.as_posix())
    if extra:
        raise ValueError(
            f"the model folders of {directory} hold files that were not saved with the model "
            f"({', '.join(sorted(extra))}; {source} lists the saved ones): remove them, they "
            f"could change what loads."
        )


def is_legacy_cli_dir(directory: Path) -> bool:
    return (directory / LEGACY_RANKER_DIR / CONFIG_NAME).is_file() and (
        directory / LEGACY_VECTORIZER_FILE
    ).is_file()


def holds_model(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a model :func:`load` reads (so ``save`` may replace it)."""
    directory = Path(directory)
    return (directory / CONFIG_NAME).is_file() or is_legacy_cli_dir(directory)


def foreign_entries(directory: Path) -> list[str]:
    """What ``directory`` holds besides the model saved in it (``save`` must not delete it)."""
    manifest = None
    if (directory / CONFIG_NAME).is_file():
        try:
            manifest = read_json(directory / CONFIG_NAME).get(MANIFEST_KEY)
        except (ValueError, OSError):
            manifest = None
    if not isinstance(manifest, dict):  # saved before the manifest: the known names
        return sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in directory.iterdir()
            if p.name not in OWNED_WITHOUT_MANIFEST
        )
    folders = owned_dirs(manifest)
    foreign = []
    stack = [PurePosixPath()]
    while stack:
        rel = stack.pop()
        for path in (directory / rel).iterdir():
            name = rel / path.name
            if path.is_dir() and not path.is_symlink():
                if name in folders:
                    stack.append(name)
                else:
                    foreign.append(f"{name.as_posix()}/")
            elif name.as_posix() not in manifest and name.as_posix() != CONFIG_NAME:
                foreign.append(name.as_posix())
    return sorted(foreign)


def refuse_foreign_entries(directory: Path) -> None:
    """Raise ``FileExistsError`` listing the entries of ``directory`` that are not part of the
    model saved there (overwriting would delete them)."""
    foreign = foreign_entries(directory)
    if foreign:
        shown = ", ".join(foreign[:10]) + (
            f" and {len(foreign) - 10} more" if len(foreign) > 10 else ""
        )
        raise FileExistsError(
            f"directory {str(directory)!r} holds a model and also {shown}, which are not part "
            f"of it; overwriting would delete them. Move them elsewhere or save to another "
            f"directory (nothing was written)."
        )
