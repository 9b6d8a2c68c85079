"""Plain helpers the tests import (``from tests._helpers import ...``, or relatively).

pytest's fixtures stay in ``conftest.py``, which no test imports; what a test calls
directly lives here: the repository paths, the reference data files, toy texts, file
mode helpers, the ``training=TrainingConfig`` adapter of the flat fast settings, and the
fast tiny-BERT set-ups of the text classifiers that several test modules share.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# The repository root (tests/ is one level below it) and the test data files.
ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"


REPO_ROOT = Path(__file__).resolve().parents[1]


def run_module(
    module: str, *args: str, timeout: float, unset: tuple[str, ...] = (), check: bool = True
) -> subprocess.CompletedProcess:
    """``python -m module *args`` from the repository root (its code first on the path),
    asserting that it exits 0 unless ``check=False``; ``unset``: environment variables it
    must not see."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for name in unset:
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def run_page_examples(page: str) -> None:
    """Run the ``>>>`` examples of ``docs/<page>`` as doctests (skip without docs/)."""
    import doctest

    path = ROOT / "docs" / page
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    result = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def dataset_path(data_dir: Path, *parts: str) -> Path:
    """``data_dir / parts``, or skip the test when that file is missing."""
    path = data_dir.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"dataset file {path} is missing")
    return path


# Toy texts ------------------------------------------------------------------------------

TOPICS = {
    "pet": "the cat sat on the mat with a dog",
    "econ": "stock market price bank money trade",
    "sport": "football game team player ball win",
}


def topic_texts(counts: tuple[int, ...], seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Toy three-topic texts (shuffled topic words, one dropped) for the text classifiers."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for (label, base), n in zip(TOPICS.items(), counts):
        words = base.split()
        for _ in range(n):
            texts.append(" ".join(rng.permutation(words)[: len(words) - 1]))
            labels.append(label)
    return texts, np.array(labels)


def sentence_transformers_folder(src: Path, dst: Path, pooling: str = "mean") -> Path:
    """A copy of the plain model folder ``src`` made into a sentence-transformers folder
    (Transformer + Pooling modules, ``pooling`` "mean" or "cls")."""
    import json

    shutil.copytree(src, dst)
    modules = [("0", "", "Transformer"), ("1", "1_Pooling", "Pooling")]
    (dst / "modules.json").write_text(
        json.dumps(
            [
                {"idx": i, "name": name, "path": path, "type": f"sentence_transformers.models.{t}"}
                for i, (name, path, t) in enumerate(modules)
            ]
        )
    )
    (dst / "1_Pooling").mkdir()
    (dst / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
            }
        )
    )
    return dst


# File modes -----------------------------------------------------------------------------


def read_only(path: Path) -> None:
    """Make ``path`` and everything below it read-only (directories stay listable)."""
    for p in [path, *path.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) | stat.S_IROTH)
        if p.is_dir():
            p.chmod(p.stat().st_mode | stat.S_IXOTH)


def as_unprivileged_user() -> list[str]:
    """A command prefix under which file modes are enforced: root ignores them."""
    if not hasattr(os, "geteuid"):
        pytest.skip("POSIX file modes only")
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a folder unwritable")
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if not _interpreter_usable_by(tuple(prefix)):
        # A checkout under a private (0700) folder hides the venv from that user; the
        # test cannot run there, whatever skxmc does.
        pytest.skip(f"uid 65534 cannot run {sys.executable} (a folder above it is private)")
    return prefix


@functools.cache
def _interpreter_usable_by(prefix: tuple[str, ...]) -> bool:
    probe = [*prefix, sys.executable, "-c", "import numpy, scipy, numba"]
    return subprocess.run(probe, capture_output=True, cwd="/", timeout=300).returncode == 0


# Flat training keywords (``max_epochs=1``...) as ``training=TrainingConfig`` -------------
# The tests' ``make_clf(**params)`` helpers keep short flat options; the estimators take
# them in one :class:`~skxmc.text.TrainingConfig`.


def with_training(**params: Any) -> dict[str, Any]:
    """``params`` with the :class:`~skxmc.text.TrainingConfig` fields moved into
    ``training`` (merged into a ``training`` given too), and SharpReCL's old ablation
    switches (``hard_mixup=False``...) as ``ablate``."""
    from skxmc.text._config import TRAINING_FIELDS, TrainingConfig

    flags = [k for k in ("simple_sampling", "hard_mixup", "prior_weighting") if k in params]
    if flags:  # SharpReCL's old ablation switches: False switches a part off
        params["ablate"] = tuple(k for k in flags if not params.pop(k))
    flat = {k: params.pop(k) for k in list(params) if k in TRAINING_FIELDS}
    if flat:
        base = params.get("training")
        config = base.get_params() if base is not None else {}
        params["training"] = TrainingConfig(**{**config, **flat})
    return params


def plain_params(estimator: Any) -> dict[str, Any]:
    """``get_params(deep=True)`` with nested estimators (``training``) replaced by their
    class name, so that two estimators with equal settings compare equal (their nested
    parameters are compared as ``training__<field>``)."""
    return {
        k: type(v).__name__ if hasattr(v, "get_params") else v
        for k, v in estimator.get_params(deep=True).items()
    }


# The text classifiers on the tiny random BERT (conftest's ``tiny_bert_dir``) -------------

# A random tiny BERT needs large rates; its mean-pooled states separate texts better than
# its untrained [CLS].
_TINY_BERT_FAST = dict(
    pooling="mean",
    max_length=16,
    max_epochs=2,
    learning_rate=3e-3,
    head_learning_rate=3e-2,
    random_state=0,
)


def _on_tiny_bert(cls: type, tiny_bert_dir: Path, defaults: dict, params: dict) -> Any:
    settings = {"encoder": str(tiny_bert_dir), **_TINY_BERT_FAST, **defaults, **params}
    return cls(**with_training(**settings))


def sharprecl_toy_data(counts: tuple[int, ...] = (12, 6, 3), seed: int = 0):
    """Imbalanced three-topic texts for :func:`make_sharprecl`."""
    return topic_texts(counts, seed)


def make_sharprecl(tiny_bert_dir: Path, **params: Any):
    """A fast SharpReCLClassifier on the tiny BERT; ``params`` may be flat training keys."""
    from skxmc.sharprecl import SharpReCLClassifier

    defaults = dict(
        batch_size=8,
        n_synthetic_negative=20,
        n_synthetic_positive=4,
        n_hard=4,
        projection_dim=16,
        # the paper's two views, which most tests exercise; the estimator's default is one
        n_views=2,
    )
    return _on_tiny_bert(SharpReCLClassifier, tiny_bert_dir, defaults, params)


def knnbert_toy_data(counts: tuple[int, ...] = (8, 6, 4), seed: int = 0):
    """Three-topic texts for :func:`make_knnbert` (18 texts: 3 batches of 6)."""
    return topic_texts(counts, seed)


def make_knnbert(tiny_bert_dir: Path, **params: Any):
    """A fast KNNBertClassifier on the tiny BERT; ``params`` may be flat training keys."""
    from skxmc.knnbert import KNNBertClassifier

    defaults = dict(
        batch_size=6,
        dropout=0.0,
        contrastive_weight=0.5,
        queue_size=40,
        n_enqueue_per_anchor=2,
        n_most_similar=5,
        n_least_similar=1,
        n_neighbors=3,
    )
    return _on_tiny_bert(KNNBertClassifier, tiny_bert_dir, defaults, params)


# Streams of texts (tests of skxmc.text._stream and of the estimators reading them) ----


class FakeDataset:
    """What skxmc reads of a Hugging Face ``datasets.Dataset``: ``column_names`` and
    ``iter(batch_size)`` (dicts of lists). Its module name makes it one (duck typing)."""

    __module__ = "datasets.arrow_dataset"

    def __init__(self, columns: dict[str, list]) -> None:
        self.columns = columns
        self.column_names = list(columns)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def iter(self, batch_size: int):
        for start in range(0, len(self), batch_size):
            yield {k: v[start : start + batch_size] for k, v in self.columns.items()}


class OneShot:
    """An iterable that can be read only once (a second pass raises)."""

    def __init__(self, items: list) -> None:
        self.items, self.read = items, False

    def __iter__(self):
        if self.read:
            raise AssertionError("read twice")
        self.read = True
        return iter(self.items)
