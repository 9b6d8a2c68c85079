"""Ties at TF-IDF's ``max_features`` cutoff: why a feature rebuild can differ between machines.

scikit-learn's ``CountVectorizer`` / ``TfidfVectorizer`` keep the ``max_features`` terms
of highest corpus frequency with ``(-tfs).argsort()[:limit]``, an unstable sort: among
the terms tied at the cutoff frequency, which ones are kept depends on the sort
implementation (numpy version, and the SIMD sort numpy picks for the CPU), not on the
data. This script counts those ties for the benchmark's TF-IDF settings
(``benchmarks/xmc_linear.py``: unigrams + bigrams, ``min_df=2``, 200,000 features) and
how many kept terms a different (stable) tie order would change. With ``--compare-cache``
it also compares the cached feature builds of ``xmc_linear.py`` found on this machine
(column document frequencies, stored entries).

Usage::

    python benchmarks/tfidf_ties.py [--datasets tibkat_gnd_en] [--compare-cache]

Writes ``benchmarks/results/<--name>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Any

import numpy as np
from _common import markdown_table, write_results
from xmc_linear import CACHE, DATA_DIR, TFIDF_PARAMS, load_cached

from skxmc.datasets import load_text_jsonl


def simd_found() -> list[str]:
    """The SIMD extensions numpy dispatches to on this CPU."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features  # numpy >= 2
    except ImportError:
        from numpy.core._multiarray_umath import __cpu_features__ as features

    return sorted(k for k, v in features.items() if v and k.startswith(("AVX", "X86")))


def ties(name: str) -> dict[str, Any]:
    from sklearn.feature_extraction.text import CountVectorizer

    texts, _ = load_text_jsonl(DATA_DIR / name / "train.jsonl.gz")
    limit = TFIDF_PARAMS["max_features"]
    counts = CountVectorizer(
        ngram_range=TFIDF_PARAMS["ngram_range"], min_df=TFIDF_PARAMS["min_df"], dtype=np.int64
    ).fit_transform(texts)
    tfs = np.asarray(counts.sum(axis=0)).ravel()
    cutoff = np.sort(tfs)[::-1][limit - 1]
    tied = int((tfs == cutoff).sum())
    above = int((tfs > cutoff).sum())
    # scikit-learn's selection (vocabulary in sorted term order, default argsort) against
    # a stable sort, which keeps the tied terms in alphabetical order
    sklearn_kept = np.sort((-tfs).argsort()[:limit])
    stable_kept = np.sort(np.argsort(-tfs, kind="stable")[:limit])
    return {
        "dataset": name,
        "terms (min_df 2)": tfs.size,
        "max_features": limit,
        "tf at cutoff": int(cutoff),
        "terms above": above,
        "terms tied": tied,
        "tied kept": limit - above,
        "kept terms that differ (default vs stable sort)": int(
            np.setdiff1d(sklearn_kept, stable_kept).size
        ),
        # equal digests: the same vocabulary; compare runs under other numpy builds
        "digest of scikit-learn's kept set": hashlib.sha1(sklearn_kept.tobytes()).hexdigest()[:10],
    }


def compare_cache(name: str) -> list[dict[str, Any]]:
    """The cached builds of ``name``, each against the first (sorted by file name)."""
    paths = sorted(CACHE.glob(f"xmc_linear_{name}_*.npz"))
    out = []
    first = None
    for path in paths:
        X_tr, X_te = load_cached(path, ("X_train", "X_test"))
        df = np.diff(X_tr.tocsc().indptr)
        entry = {
            "dataset": name,
            "build": path.stem.rsplit("_", 1)[-1],
            "train entries": X_tr.nnz,
            "test entries": X_te.nnz,
        }
        if first is None:
            first = df
        else:
            entry["columns with the first build's document frequency"] = int((df == first).sum())
        out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["tibkat_gnd_en"])
    parser.add_argument("--compare-cache", action="store_true")
    parser.add_argument("--name", default="tfidf_ties")
    args = parser.parse_args()
    command = "python benchmarks/tfidf_ties.py " + " ".join(sys.argv[1:])
    rows = [ties(name) for name in args.datasets]
    builds = (
        [b for name in args.datasets for b in compare_cache(name)] if args.compare_cache else []
    )
    environment = {"numpy": np.__version__, "simd": simd_found()}
    text = (
        "# Ties at TF-IDF's max_features cutoff (benchmarks/tfidf_ties.py)\n\n"
        f"Command: `{command}`  \nnumpy {environment['numpy']}, SIMD found: "
        f"{', '.join(environment['simd'])}\n\n{markdown_table(rows, list(rows[0]))}\n"
    )
    if builds:
        columns = list(dict.fromkeys(k for b in builds for k in b))
        text += f"\nCached feature builds:\n\n{markdown_table(builds, columns)}\n"
    print(text)
    write_results(
        args.name,
        {"command": command, "environment": environment, "ties": rows, "cached_builds": builds},
        text,
    )


if __name__ == "__main__":
    main()
