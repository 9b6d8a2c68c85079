"""skxmc.datasets.make_xmc_classification: the synthetic XMC generator (issue 18).

Timing is not asserted here: ``benchmarks/scale.py`` measures it. The 1M-row memory bound
is a slow test (``pytest -m slow``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from skxmc import XRLinearClassifier
from skxmc.datasets import make_xmc_classification
from skxmc.metrics import precision_at_k

SMALL = dict(n_samples=3000, n_features=4000, n_labels=800)


def _canonical(M: sp.csr_matrix) -> bool:
    """Canonical form checked from scratch (not the flags the generator sets)."""
    fresh = sp.csr_matrix((M.data, M.indices, M.indptr), shape=M.shape)
    return bool(fresh.has_canonical_format)


def test_shapes_dtypes_and_canonical_csr():
    X, Y = make_xmc_classification(**SMALL, random_state=0)
    assert sp.isspmatrix_csr(X) and sp.isspmatrix_csr(Y)
    assert X.shape == (3000, 4000) and Y.shape == (3000, 800)
    assert X.dtype == np.float32 and Y.dtype == np.float32
    assert _canonical(X) and _canonical(Y)
    assert X.indices.dtype == X.indptr.dtype == np.int32
    assert np.all(X.data > 0)
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    assert np.all(Y.data == 1.0)
    assert np.all(np.diff(Y.indptr) >= 1)  # every row has a label
    assert X.indices.max() < 4000 and Y.indices.max() < 800


def test_sizes_follow_length_and_labels_per_sample():
    X, Y = make_xmc_classification(**SMALL, length=80, labels_per_sample=4, random_state=1)
    nnz_per_row = X.nnz / X.shape[0]
    labels_per_row = Y.nnz / Y.shape[0]
    # repeated words / label draws are merged: below the expectation, not far below
    assert 0.5 * 80 < nnz_per_row <= 80
    assert 0.6 * 4 < labels_per_row <= 4


def test_deterministic_for_a_seed():
    X1, Y1 = make_xmc_classification(**SMALL, random_state=42)
    X2, Y2 = make_xmc_classification(**SMALL, random_state=42)
    for A, B in ((X1, X2), (Y1, Y2)):
        np.testing.assert_array_equal(A.indptr, B.indptr)
        np.testing.assert_array_equal(A.indices, B.indices)
        np.testing.assert_array_equal(A.data, B.data)
    X3, _ = make_xmc_classification(**SMALL, random_state=43)
    assert X3.nnz != X1.nnz or not np.array_equal(X3.indices, X1.indices)
    # a RandomState / Generator seeded alike gives the same data twice
    for make_rng in (np.random.RandomState, np.random.default_rng):
        Xa, _ = make_xmc_classification(**SMALL, random_state=make_rng(5))
        Xb, _ = make_xmc_classification(**SMALL, random_state=make_rng(5))
        np.testing.assert_array_equal(Xa.indices, Xb.indices)


def test_deterministic_across_chunks():
    # long rows make small chunks (about 2**20 tokens each): several chunks here
    kw = dict(n_samples=1500, n_features=3000, n_labels=300, length=2000, random_state=3)
    X1, Y1 = make_xmc_classification(**kw)
    X2, Y2 = make_xmc_classification(**kw)
    assert (X1 != X2).nnz == 0 and (Y1 != Y2).nnz == 0
    assert _canonical(X1)
    np.testing.assert_allclose(sp.linalg.norm(X1, axis=1), 1.0, rtol=1e-5)


def test_output_for_a_seed_is_pinned():
    """The rows for a seed stay those of 26aef59 (several chunks): refactoring the
    generator must keep the order of its random draws. Values are checked to a tolerance
    (np.log may differ by an ulp across CPUs), the sparsity structure and topics exactly."""
    X, Y, sample_topics, label_topics = make_xmc_classification(
        2000, 300, 120, length=600, return_topics=True, random_state=11
    )
    digest = hashlib.sha256()
    for a in (X.indptr, X.indices, Y.indptr, Y.indices, sample_topics, label_topics):
        digest.update(np.ascontiguousarray(a).tobytes())
    assert digest.hexdigest() == (
        "23408153b593e9c33fc33ef29d93b102e863989470a4347191940ff3624bee79"
    )
    assert float(X.data.astype(np.float64).sum()) == pytest.approx(23598.318194374442, rel=1e-6)


def test_label_frequencies_follow_a_power_law():
    _, Y = make_xmc_classification(n_samples=20000, n_features=5000, n_labels=5000, random_state=0)
    counts = np.sort(Y.sum(axis=0).A1)[::-1]
    seen = counts[counts > 0]
    # a long tail of labels with one or two positives, and a head far above it
    assert (seen <= 2).sum() >= 0.2 * seen.size
    assert counts[0] >= 100 * np.median(seen)
    # rank-frequency slope on log-log axes (ranks 10..1000): about -1 for exponent 1
    ranks = np.arange(10, 1000)
    slope = np.polyfit(np.log(ranks), np.log(counts[ranks - 1]), 1)[0]
    assert -1.6 < slope < -0.6
    # exponent 0: labels of (about) equal frequency, no tail of singletons
    _, Y0 = make_xmc_classification(
        n_samples=20000, n_features=5000, n_labels=500, label_exponent=0.0, random_state=0
    )
    flat = Y0.sum(axis=0).A1
    assert flat.min() > 0 and flat.max() < 3 * flat.min()


def test_labels_of_a_sample_share_its_topic():
    _, Y, sample_topics, label_topics = make_xmc_classification(
        **SMALL, n_topics=40, return_topics=True, random_state=0
    )
    assert sample_topics.shape == (3000,) and label_topics.shape == (800,)
    assert set(np.unique(label_topics)) == set(range(40))
    assert np.ptp(np.bincount(label_topics)) <= 1  # topics of equal size
    rows = np.repeat(np.arange(3000), np.diff(Y.indptr))
    np.testing.assert_array_equal(label_topics[Y.indices], sample_topics[rows])


def _frequency_baseline(Y_train: sp.csr_matrix, Y_test: sp.csr_matrix) -> float:
    top = int(np.argmax(Y_train.sum(axis=0).A1))
    return float(Y_test[:, top].mean())


def test_learnable_and_a_bad_model_shows():
    """XRLinearClassifier on 5k rows is far above the most-frequent-label baseline; the
    same model fitted on shuffled labels is not."""
    X, Y = make_xmc_classification(n_samples=5000, n_features=5000, n_labels=1000, random_state=0)
    n = 4000
    baseline = _frequency_baseline(Y[:n], Y[n:])
    clf = XRLinearClassifier(n_jobs=1).fit(X[:n], Y[:n])
    p1 = precision_at_k(Y[n:], clf.predict_topk(X[n:], k=1), k=1)
    assert p1 > 0.6 and p1 > 4 * baseline
    shuffled = Y[:n][np.random.default_rng(0).permutation(n)]
    bad = XRLinearClassifier(n_jobs=1).fit(X[:n], shuffled)
    p1_bad = precision_at_k(Y[n:], bad.predict_topk(X[n:], k=1), k=1)
    assert p1_bad < baseline + 0.05 and p1_bad < p1 / 4


def test_noise_makes_it_harder():
    kw = dict(n_samples=4000, n_features=4000, n_labels=500, random_state=0)
    scores = []
    for noise, label_share in ((0.2, 0.4), (0.85, 0.05)):
        X, Y = make_xmc_classification(**kw, noise=noise, label_share=label_share)
        clf = XRLinearClassifier(n_jobs=1).fit(X[:3000], Y[:3000])
        scores.append(precision_at_k(Y[3000:], clf.predict_topk(X[3000:], k=1), k=1))
    assert scores[0] > scores[1] + 0.1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_samples": 0}, "n_samples must be an int >= 1"),
        ({"n_features": 2.5}, "n_features must be an int"),
        ({"n_labels": True}, "n_labels must be an int"),
        ({"n_topics": 0}, r"n_topics must be an int in \[1, 800\]"),
        ({"n_topics": 801}, r"n_topics must be an int in \[1, 800\]"),
        ({"labels_per_sample": 0.5}, "labels_per_sample must be a finite number >= 1"),
        ({"length": 0}, "length must be a finite number > 0"),
        ({"length": float("inf")}, "length must be a finite number > 0"),
        ({"label_exponent": -1}, "label_exponent must be a finite number >= 0"),
        ({"noise": 1.5}, "noise must be a finite number >= 0.0 and <= 1.0"),
        ({"label_share": "a"}, "label_share must be a number, got str"),
        ({"noise": 0.7, "label_share": 0.5}, "label_share \\+ noise must be <= 1"),
        ({"n_topic_features": 0}, "n_topic_features must be an int >= 1"),
        ({"n_label_features": 0}, "n_label_features must be an int >= 1"),
        ({"random_state": -1}, "random_state must be a non-negative int"),
        ({"random_state": "seed"}, "random_state must be None, an int"),
    ],
)
def test_invalid_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_xmc_classification(**{**SMALL, **kwargs})


_MEMORY_SCRIPT = textwrap.dedent(
    """
    import hashlib
import json
    from pathlib import Path

    from skxmc.datasets import make_xmc_classification

    def hwm_mb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

    make_xmc_classification(100, 100, 100, random_state=0)  # imports, first-call costs
    before = hwm_mb()
    X, Y = make_xmc_classification(1_000_000, 100_000, 100_000, length=50, random_state=0)
    out = sum(a.nbytes for M in (X, Y) for a in (M.data, M.indices, M.indptr)) / 2**20
    print(json.dumps({"before": before, "after": hwm_mb(), "output_mb": out,
                      "nnz_per_row": X.nnz / X.shape[0]}))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_one_million_rows_within_a_memory_bound():
    """1M rows x 100k features x 50 tokens: the peak memory above the process's earlier
    high-water mark stays within 1.5x the returned matrices (O(nnz), no dense step)."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT], capture_output=True, text=True, check=True
    )
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 30 < stats["nnz_per_row"] <= 50
    assert stats["after"] - stats["before"] < 1.5 * stats["output_mb"], stats
