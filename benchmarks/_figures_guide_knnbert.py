"""The numbers in the sentences and the 100-shot table of ``docs/knnbert.rst``
(:mod:`benchmarks._figures`), from ``knnbert_scl_moco.json`` (sst2) and
``knnbert_scl_moco_imdb.json`` (imdb).

These files predate the harness: their per-seed records are under ``runs`` (accuracy as a
fraction) and their ``summary`` holds text, so a mean or a std is taken here over the
three seeds' records (percent, sample std). Memory sizes are MiB of the records' bytes,
as the files' ``memory MB`` columns.
"""

from __future__ import annotations

from benchmarks._figures import Figure, fig, op, val

PAGE = "knnbert.rst"
# Decimals the prose may type anywhere, and why.
TYPED = {
    "0.1": "a setting: the contrastive loss's weight lambda",
    "0.5": "a setting: the kNN vote's weight phi of the KNN-BERT rows",
}

FILES = {"sst2": "knnbert_scl_moco", "imdb": "knnbert_scl_moco_imdb"}
SEEDS = (0, 1, 2)
MIB = 2**20
# (the table's name, the files' row)
ROWS = (
    ("ce", "plain CE"),
    ("scl", "CE + in-batch SCL"),
    ("moco", "SCL-MoCo"),
    ("head", "KNN-BERT linear head"),
    ("knnbert", "KNN-BERT phi=0.5"),
    ("knn", "kNN only"),
    ("knnbert-q", "KNN-BERT phi=0.5 (queue memory)"),
    ("knn-q", "kNN only (queue memory)"),
)
ROW = dict(ROWS)


def _run(data: str, row: str, seed: int, metric: str):
    return val(FILES[data], "runs", {"row": row, "seed": seed}, metric)


def acc(data: str, name: str):
    """The mean accuracy (percent) of a row over the seeds."""
    total = _run(data, ROW[name], SEEDS[0], "accuracy")
    for seed in SEEDS[1:]:
        total = total + _run(data, ROW[name], seed, "accuracy")
    return total * (100 / len(SEEDS))


def acc_std(data: str, name: str):
    """Its sample std (ddof=1) over the seeds, in points."""
    return op("std", *(_run(data, ROW[name], s, "accuracy") for s in SEEDS)) * 100


def _table() -> list[Figure]:
    out = []
    for data in FILES:
        for name, _ in ROWS:
            out.append(fig(f"{data}-{name}", acc(data, name)))
            out.append(fig(f"{data}-{name}-std", acc_std(data, name)))
    out += [
        fig("mem-train-size", _run("sst2", ROW["knnbert"], 0, "memory_size"), ".0f"),
        fig("mem-queue-size", _run("sst2", ROW["knnbert-q"], 0, "memory_size"), ",.0f"),
    ]
    return out


def _prose() -> list[Figure]:
    return [
        fig("sst2-moco-1dp", acc("sst2", "moco"), ".1f"),
        fig("sst2-ce-1dp", acc("sst2", "ce"), ".1f"),
        fig("imdb-moco-1dp", acc("imdb", "moco"), ".1f"),
        fig("imdb-ce-1dp", acc("imdb", "ce"), ".1f"),
        fig("sst2-knnbert-gain", acc("sst2", "knnbert") - acc("sst2", "ce"), ".1f"),
        fig("imdb-knnbert-gain", acc("imdb", "knnbert") - acc("imdb", "ce"), ".1f"),
        fig("sst2-knnbert-q-1dp", acc("sst2", "knnbert-q"), ".1f"),
        fig("sst2-knnbert-1dp", acc("sst2", "knnbert"), ".1f"),
        fig("imdb-queue-loss", acc("imdb", "knnbert") - acc("imdb", "knnbert-q"), ".1f"),
        fig("imdb-knnbert-q-1dp", acc("imdb", "knnbert-q"), ".1f"),
        fig("imdb-knnbert-1dp", acc("imdb", "knnbert"), ".1f"),
        fig("mem-queue-mb", _run("sst2", ROW["knnbert-q"], 0, "memory_bytes") / MIB),
        fig("mem-train-mb", _run("sst2", ROW["knnbert"], 0, "memory_bytes") / MIB),
        fig("queue-buffers-mb", _run("sst2", ROW["knnbert"], 0, "queue_bytes") / MIB),
    ]


FIGURES: tuple[Figure, ...] = (*_table(), *_prose())
