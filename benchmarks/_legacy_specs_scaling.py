"""The tables of the scaling page (``docs/benchmarks/scaling.rst``), from the results
files of ``scale.py``, ``scale_difficulty.py``, ``scale_dask.py`` and ``mmap_load.py``
before the harness (``git show 26aef59:benchmarks/<script>.py``).

Kept apart from :mod:`benchmarks._legacy_tables`, whose classes they use, so that the
renderer stays short: these files need a cell-by-cell :class:`~benchmarks._legacy_tables.Grid`
(one nested record per size and library, medians the script computed), and eleven such
tables are long to declare. Each cell rounds as the page has always shown it.
"""

from __future__ import annotations

from typing import Any

from benchmarks._legacy_tables import Field, Floor, Grid, Text, Yes, field, text

PAGE = "scaling.rst"

# ----------------------------------------------------------------------------- scale.py

LIBS = ("skxmc", "libpecos")
SCALE_HEAD = (
    "P@1 skxmc / libpecos",
    "P@5 skxmc / libpecos",
    "train s skxmc / libpecos",
)


def _size(file: str, n: int, *path: Any) -> Field:
    return field(file, "sizes", {"n_labels": n}, *path)


def _pair(file: str, n: int, spec: str, *path: Any) -> Text:
    """skxmc's value / libpecos's, of one size of a ``scale.py`` file."""
    return text(
        f"{{0:{spec}}} / {{1:{spec}}}",
        *(_size(file, n, "libraries", lib, *path) for lib in LIBS),
    )


def _scale_row(file: str, n: int, fresh: bool = True, rows: str = "n_test") -> tuple:
    return (
        text("{0:,}", _size(file, n, "n_labels")),
        text("{0:,}", _size(file, n, rows)),
        _pair(file, n, ".2f", "metrics", "precision@1"),
        _pair(file, n, ".2f", "metrics", "precision@5"),
        _pair(file, n, ".1f", "train_s"),
        *((_pair(file, n, ".1f", "train_cold_s"),) if fresh else ()),
        _pair(file, n, ".1f", "predict_s"),
        _pair(file, n, ".0f", "peak_rss_mb"),
    )


ISSUE_HEAD = (
    "labels = train rows",
    "test rows",
    *SCALE_HEAD,
    "train s fresh skxmc / libpecos",
    "predict s skxmc / libpecos",
    "peak RSS MB skxmc / libpecos",
)

DIFFICULTY = "scale_difficulty"

SCALE_TABLES: tuple[Grid, ...] = (
    Grid(
        "scale_difficulty-p1",
        "",
        (
            (
                "noise / label_share",
                *(
                    text(
                        "{0} / {1}",
                        field(DIFFICULTY, "rows", i, "noise"),
                        field(DIFFICULTY, "rows", i, "label_share"),
                    )
                    for i in range(5)
                ),
            ),
            ("P@1", *(text("{0:.1f}", field(DIFFICULTY, "rows", i, "P@1")) for i in range(5))),
        ),
    ),
    Grid(
        "scale_issue_prefetch-sizes",
        "",
        (
            ISSUE_HEAD,
            _scale_row("scale_issue_prefetch", 100_000),
            _scale_row("scale_issue_prefetch", 1_000_000),
        ),
    ),
    Grid(
        "scale_issue-sizes",
        "",
        (
            ISSUE_HEAD,
            _scale_row("scale_issue", 10_000),
            _scale_row("scale_issue", 100_000),
            _scale_row("scale_issue_1m", 1_000_000),
        ),
    ),
    Grid(
        "scale-sizes",
        "",
        (
            (
                "labels",
                "train rows",
                *SCALE_HEAD,
                "predict s skxmc / libpecos",
                "peak RSS MB skxmc / libpecos",
            ),
            _scale_row("scale_rows2", 10_000, fresh=False, rows="n_train"),
            _scale_row("scale_30k", 30_000, fresh=False, rows="n_train"),
            _scale_row("scale_rows10", 10_000, fresh=False, rows="n_train"),
        ),
    ),
)

# ----------------------------------------------------------------------------- scale_dask.py


def _dask(file: str, *path: Any) -> Field:
    return field(file, "records", 0, *path)


def _dask_row(file: str, ratio: str, label: str = "{0:,}") -> tuple:
    return (
        text(label, _dask(file, "n_labels")),
        text("{0:,}", _dask(file, "n_train")),
        text("{0:.1f} / {1:.1f}", _dask(file, "local_fit_s"), _dask(file, "dask_fit_s")),
        text(f"{{0:{ratio}}}", _dask(file, "fit_ratio")),
        text("{0:.1f} / {1:.1f}", _dask(file, "local_predict_s"), _dask(file, "dask_predict_s")),
        text(
            "{0} (largest weight difference {1:g})",
            Yes((_dask(file, "same_sparsity_pattern"), _dask(file, "same_top10"))),
            _dask(file, "max_abs_weight_difference"),
        ),
    )


def _layers(file: str, nodes: tuple[int, ...]) -> tuple:
    """The per-layer rows of a ``scale_dask.py`` file (``nodes``: each layer's, which
    the file must hold)."""
    out = []
    for i, n in enumerate(nodes):
        at = {"layer": i + 1, "nodes": n}
        out.append(
            (
                text(
                    "{0} ({1:,})",
                    _dask(file, "layers", at, "layer"),
                    _dask(file, "layers", at, "nodes"),
                ),
                text(
                    "{0:.2f}" + (" (X to both workers, and the layer's task)" if i == 0 else ""),
                    _dask(file, "layers", at, "broadcast MB"),
                ),
                text("{0}", Floor(_dask(file, "layers", at, "task args MB"), 0.001, ".3f")),
                text("{0:.2f}", _dask(file, "layers", at, "results MB")),
                text(
                    "{0:.1f} / {1:.1f}",
                    _dask(file, "layers", at, "local s"),
                    _dask(file, "layers", at, "dask s"),
                ),
            )
        )
    return tuple(out)


LAYER_HEAD = (
    "layer (nodes)",
    "broadcast MB",
    "task arguments MB",
    "results MB",
    "layer s local / cluster",
)

DASK_TABLES: tuple[Grid, ...] = (
    Grid(
        "scale_dask-sizes",
        "",
        (
            (
                "labels",
                "train rows",
                "fit s local / cluster",
                "fit ratio",
                "predict s local / cluster",
                "same model and top-10",
            ),
            _dask_row("scale_dask_10k", ".2f"),
            _dask_row("scale_dask_30k", ".2f"),
            _dask_row("scale_dask_100k", ".2f"),
            _dask_row("scale_dask_300k", ".2f"),
            _dask_row("scale_dask_1m", ".3f"),
            _dask_row("scale_dask_1m_prefetch", ".3f", "{0:,}, after prefetching"),
        ),
    ),
    Grid(
        "scale_dask_30k-layers",
        "",
        (LAYER_HEAD, *_layers("scale_dask_30k", (2, 32, 512, 30_000))),
    ),
    Grid(
        "scale_dask_300k-layers",
        "",
        (LAYER_HEAD, *_layers("scale_dask_300k", (16, 256, 4_096, 300_000))),
    ),
)

# ----------------------------------------------------------------------------- mmap_load.py

FULL = "full (verify default: sha256 + entries)"
CHECKED = "mmap=True (entries, no sha256)"
MAPPED = "mmap=True, verify=False"
SHARED = "mmap=True, verify=False, 4 processes at once"
COLD = "mmap=True, verify=False, cold page cache"
RANDOM = "the same, map advised MADV_RANDOM after the load"
REFILLED = "mmap=True, verify=False, page cache filled by the previous row"


def _load(file: str, load: str, key: str) -> Field:
    """A median of ``mmap_load.py``'s summary row ``load``."""
    return field(file, "rows", {"load": load}, key)


def _with_ratio(file: str, load: str, key: str, ratio: str, digits: int = 3) -> Text:
    return text(f"{{0:.0f}} ({{1:.{digits}f}})", _load(file, load, key), _load(file, load, ratio))


def _hybrid_row(label: str, file: str, load: str, pss: str | Text) -> tuple:
    return (
        label,
        text("{0:.2f}", _load(file, load, "load + predict s")),
        text(
            "{0:.2f} / {1:.2f}",
            _load(file, load, "single-row predict ms median"),
            _load(file, load, "single-row predict ms p90"),
        ),
        _with_ratio(file, load, "RSS after MB", "RSS / full load"),
        _with_ratio(file, load, "peak RSS MB", "peak / full load"),
        pss,
    )


def _first_row(file: str, load: str) -> tuple:
    return (
        text("{0:.2f}", _load(file, load, "load s")),
        text("{0:.2f}", _load(file, load, "predict 1000 rows s")),
        text("{0:.2f}", _load(file, load, "load + predict s")),
        _with_ratio(file, load, "RSS after MB", "RSS / full load", 2),
        text("{0:.0f}", _load(file, load, "private (RssAnon) growth MB")),
        text("{0:.0f}", _load(file, load, "file-backed (RssFile) growth MB")),
    )


BEFORE, PREAD, HYBRID = "mmap_load_1m_pread_before", "mmap_load_1m_pread", "mmap_load_1m_hybrid"
S28_BEFORE, S28, S28_COLD = "mmap_load_1m_s28_before", "mmap_load_1m_s28", "mmap_load_1m_s28_cold"


def _both(load: str, key: str, ratio: str) -> Text:
    """The per-field layout's value / the block layout's, each with its ratio."""
    return text(
        "{0:.0f} ({1:.3f}) / {2:.0f} ({3:.3f})",
        _load(S28_BEFORE, load, key),
        _load(S28_BEFORE, load, ratio),
        _load(S28, load, key),
        _load(S28, load, ratio),
    )


def _block(file: str, load: str) -> tuple:
    return (
        "block",
        _with_ratio(file, load, "RSS after MB", "RSS / full load"),
        _with_ratio(file, load, "PSS after MB", "PSS / full load"),
        text("{0:.0f}", _load(file, load, "file-backed (RssFile) growth MB")),
    )


def _full(key: str, ratio: str) -> Text:
    """The full loads of both layouts, one ratio (each is its own file's 1)."""
    return text(
        "{0:.0f} / {1:.0f} ({2:.2f})",
        _load(S28_BEFORE, FULL, key),
        _load(S28, FULL, key),
        _load(S28, FULL, ratio),
    )


def _growth(load: str) -> Text:
    key = "file-backed (RssFile) growth MB"
    return text("{0:.0f} / {1:.0f}", _load(S28_BEFORE, load, key), _load(S28, load, key))


MMAP_TABLES: tuple[Grid, ...] = (
    Grid(
        "mmap_load_1m_hybrid-modes",
        "",
        (
            (
                "mapped load (``mmap=True, verify=False``)",
                "load + predict 1,000 rows s",
                "one row ms (median / p90)",
                "VmRSS after MB (/ full load)",
                "peak VmRSS MB (/ full load)",
                "PSS, 4 processes at once (/ full load)",
            ),
            _hybrid_row(
                "every layer mapped (before)",
                BEFORE,
                MAPPED,
                _with_ratio(BEFORE, SHARED, "PSS after MB", "PSS / full load"),
            ),
            _hybrid_row(
                "every block layer read",
                PREAD,
                MAPPED,
                _with_ratio(PREAD, SHARED, "PSS after MB", "PSS / full load"),
            ),
            _hybrid_row(
                "leaf blocks read, larger ones mapped (current)",
                HYBRID,
                MAPPED,
                _with_ratio(HYBRID, SHARED, "PSS after MB", "PSS / full load"),
            ),
            _hybrid_row("the same, cold page cache", "mmap_load_1m_hybrid_cold", COLD, "not run"),
            _hybrid_row("full load, for comparison", HYBRID, FULL, ""),
        ),
    ),
    Grid(
        "mmap_load_1m-modes",
        "",
        (
            (
                "load",
                "load s",
                "predict 1,000 rows s",
                "load + predict s",
                "VmRSS after MB (/ full load)",
                "private growth MB (RssAnon)",
                "file-backed growth MB (RssFile)",
            ),
            ("full (sha256 and entry checks)", *_first_row("mmap_load_1m", FULL)),
            ("``mmap=True`` (entry checks, no sha256)", *_first_row("mmap_load_1m", CHECKED)),
            ("``mmap=True, verify=False``", *_first_row("mmap_load_1m", MAPPED)),
            ("the same, cold page cache", *_first_row("mmap_load_1m", COLD)),
            (
                "the same, cold, map advised ``MADV_RANDOM`` after the load",
                *_first_row("mmap_load_1m", RANDOM),
            ),
        ),
    ),
    Grid(
        "mmap_load_1m_s28-layouts",
        "",
        (
            (
                "load (``verify=False`` for the mapped ones)",
                "layout",
                "VmRSS after MB (/ full load)",
                "PSS MB (/ full load)",
                "file-backed growth MB",
            ),
            (
                "full",
                "per field / block",
                _full("RSS after MB", "RSS / full load"),
                _full("PSS after MB", "PSS / full load"),
                _growth(FULL),
            ),
            (
                "mapped, page cache as the save left it",
                "per field / block",
                _both(MAPPED, "RSS after MB", "RSS / full load"),
                _both(MAPPED, "PSS after MB", "PSS / full load"),
                _growth(MAPPED),
            ),
            (
                "the same, 4 processes at once",
                "per field / block",
                _both(SHARED, "RSS after MB", "RSS / full load"),
                _both(SHARED, "PSS after MB", "PSS / full load"),
                _growth(SHARED),
            ),
            ("mapped, cold page cache", *_block(S28_COLD, COLD)),
            (
                text(
                    "mapped, cold, ``MADV_RANDOM`` (predict {0:.1f} s)",
                    _load(S28_COLD, RANDOM, "predict 1000 rows s"),
                ),
                *_block(S28_COLD, RANDOM),
            ),
            (
                text(
                    "mapped, page cache as that process left it (predict {0:.2f} s)",
                    _load(S28_COLD, REFILLED, "predict 1000 rows s"),
                ),
                *_block(S28_COLD, REFILLED),
            ),
        ),
    ),
)

# ----------------------------------------------------------------------------- projection

PROJECTION = "scale_issue_prefetch_projection"


def _projected(lib: str, quantity: str, spec: str) -> tuple[Text, ...]:
    at = {"library": lib, "quantity": quantity}
    return (
        text(
            f"{{0:{spec}}} / {{1:{spec}}}",
            *(
                _size("scale_issue_prefetch", n, "libraries", lib, quantity)
                for n in (100_000, 1_000_000)
            ),
        ),
        text("{0:.2f}", field(PROJECTION, "projections", at, "slope")),
        text("{0:,.0f}", field(PROJECTION, "projections", at, "projected")),
    )


PROJECTION_TABLES: tuple[Grid, ...] = (
    Grid(
        f"{PROJECTION}-3m",
        "",
        (
            (
                "library",
                "train s at 100k / 1M labels",
                "slope",
                "projected train s at 3M",
                "peak RSS MB at 100k / 1M",
                "slope",
                "projected peak RSS MB at 3M",
            ),
            *(
                (lib, *_projected(lib, "train_s", ".0f"), *_projected(lib, "peak_rss_mb", ",.0f"))
                for lib in LIBS
            ),
        ),
    ),
)

TABLES: tuple[Grid, ...] = (*SCALE_TABLES, *DASK_TABLES, *MMAP_TABLES, *PROJECTION_TABLES)
