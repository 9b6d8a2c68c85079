"""Atomic directory writes: a model is written into a hidden folder next to its final place
(``.<name>.skxmc-<pid>-<hex>.tmp``) and moved in at the end, on Linux by an atomic exchange
with the old model (``renameat2(RENAME_EXCHANGE)``), so that an interrupted or killed save
leaves the old model or the new one, never a mix.

- Permissions: every file and folder follows the user's umask (some writers, such as
  safetensors', create files 0600; :func:`follow_umask` resets them before the move).
- Symbolic links: a model folder that is a symbolic link is written *through*: the link
  stays, and the folder it points to is replaced (:func:`real_target`).
- Leftovers: the working folder of a save whose process is gone (killed) is removed by the
  next save to the same place (:func:`remove_stale_temps`).
- Readers: :func:`snapshot` identifies the saved version (the config file's inode), so that
  a load that failed while a save replaced the model can tell, and retry.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import secrets
import shutil
import sys
from pathlib import Path

from ._format import CONFIG_NAME, holds_model

__all__ = [
    "TMP_PATTERN",
    "exchange",
    "follow_umask",
    "move_into_place",
    "new_sibling_dir",
    "real_target",
    "remove_stale_temps",
    "snapshot",
    "umask",
]

logger = logging.getLogger(__name__)

# A save's working folder next to the target: ``.<name>.skxmc-<pid>-<hex>.tmp``; the pid
# lets a later save remove the folder a killed one left behind.
TMP_PATTERN = re.compile(r"\.(?P<name>.+)\.skxmc-(?P<pid>[0-9]+)-[0-9a-f]+\.tmp")


def real_target(directory: Path) -> Path:
    """``directory``, or the folder it links to when it is a symbolic link (resolved fully,
    so that the link itself is never replaced by a folder)."""
    if directory.is_symlink():
        return Path(os.path.realpath(directory))
    return directory


def umask() -> int:
    """The process's umask, read without changing it where the system tells it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, but brief)
    os.umask(mask)
    return mask


def follow_umask(root: Path) -> None:
    """Give every file under ``root`` mode ``0o666 & ~umask`` and every folder ``0o777 &
    ~umask``, as ``open`` / ``mkdir`` would have (whatever the writer chose)."""
    mask = umask()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o777 & ~mask)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o666 & ~mask)
    os.chmod(root, 0o777 & ~mask)


def snapshot(directory: Path) -> tuple[int, int, int] | None:
    """The identity of the model saved in ``directory`` (each save writes a new config
    file), or ``None`` when there is none."""
    try:
        st = os.stat(directory / CONFIG_NAME)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but another user's
        return True
    try:  # a killed process its parent has not reaped yet is a zombie: gone as well
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True


def remove_stale_temps(directory: Path) -> None:
    """Remove the hidden working folders of earlier saves to ``directory`` that were killed
    (their process is gone); a running save's folder is left alone."""
    if not directory.parent.is_dir():
        return
    for path in directory.parent.iterdir():
        match = TMP_PATTERN.fullmatch(path.name)
        if match and match["name"] == directory.name and not _pid_alive(int(match["pid"])):
            logger.info("removing %s, left by an interrupted save", path)
            shutil.rmtree(path, ignore_errors=True)
    old = directory.with_name(f".{directory.name}.old")
    if old.exists() and holds_model(directory):  # otherwise it may be the only copy
        shutil.rmtree(old, ignore_errors=True)


def new_sibling_dir(directory: Path) -> Path:
    """A new empty directory next to ``directory``; unlike ``tempfile.mkdtemp`` (mode 0o700)
    it gets the user's umask, so a model saved for a server stays readable by it."""
    while True:
        name = f".{directory.name}.skxmc-{os.getpid()}-{secrets.token_hex(6)}.tmp"
        tmp = directory.with_name(name)
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``), so
    that no instant leaves ``b`` missing; ``False`` where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # no libc symbol (musl before 1.2.5, old glibc)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # e.g. a filesystem without it
        return False
    raise OSError(err, os.strerror(err), str(b))


def move_into_place(tmp: Path, directory: Path) -> None:
    """Put the folder ``tmp`` at ``directory``, replacing the model there (after the
    exchange ``tmp`` holds the old model; the caller removes it)."""
    if not directory.exists():
        tmp.rename(directory)
    elif not exchange(tmp, directory):
        old = directory.with_name(f".{directory.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        directory.rename(old)
        tmp.rename(directory)
        shutil.rmtree(old, ignore_errors=True)
