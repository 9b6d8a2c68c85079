"""Bad labels, bad metric input and an unwritable numba cache (issue 21: B5, B6, B7, B15 and
the WEAK cases of categories 2 and 4 of the reliability review).

Each case of ``CASES`` runs a call and states the outcome: ``Raises(type, match)`` for a
clear error, or ``Returns(check)`` for a result that ``check`` verifies. Ids follow the
review's categories: ``2-bady`` (bad labels), ``4-metrics`` (bad metric input).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import normalize

import skxmc
from skxmc import XRLinearClassifier
from skxmc.labels import (
    LabelSpace,
    as_label_sets,
    encode_labels,
    encode_target,
    indices_to_labels,
)
from skxmc.metrics import (
    evaluate,
    inverse_propensity,
    ndcg_at_k,
    precision_at_k,
    psndcg_at_k,
    psprecision_at_k,
)
from skxmc.tree import HierarchicalLabelTree

from ._helpers import as_unprivileged_user, read_only

NEG = -np.inf
MB = 1 << 20


@dataclass
class Raises:
    type: type[BaseException]
    match: str


@dataclass
class Returns:
    check: Callable[[Any], Any]


def peak_bytes(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the peak memory traced while it ran (numpy reports to tracemalloc)."""
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------------------- B5 helpers


def _xrl_with_minus_one_label() -> tuple[XRLinearClassifier, Any, list]:
    # Leaves of 2 labels and beam_size=1: most rows reach fewer than 3 labels, so
    # predict_topk has empty slots, and -1 is a real label.
    X = normalize(sp.random(60, 30, density=0.3, format="csr", random_state=0))
    y = [[i % 6 - 1] for i in range(60)]
    tree = HierarchicalLabelTree(branching_factor=2, max_leaf_size=2)
    return XRLinearClassifier(beam_size=1, top_k=3, tree=tree).fit(X, y), X, y


def _b5_estimator() -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    clf, X, y = _xrl_with_minus_one_label()
    labels, scores = clf.predict_topk(X, 3)
    true = np.mean(
        [
            len({lab for lab, s in zip(lr, sr) if s > NEG} & set(t)) / 3
            for lr, sr, t in zip(labels, scores, y)
        ]
    )
    return (
        precision_at_k(y, (labels, scores), k=3, classes=clf.classes_),
        true,
        labels,
        scores,
        clf.classes_,
    )


def _check_b5_estimator(out: tuple) -> None:
    reported, true, labels, scores, classes = out
    empty = np.isneginf(scores)
    assert empty.any() and (labels == -1).any()  # the case needs both
    assert reported == pytest.approx(true)
    # The fill value of empty slots is not a label, and only empty slots hold it.
    assert not np.isin(labels[empty], classes).any()
    assert np.isin(labels[~empty], classes).all()


# ----------------------------------------------------------------------------- B6 helpers

LONG = "x" * 20000


def _b6_encode() -> tuple[Any, int]:
    return peak_bytes(lambda: encode_labels([[LONG]] + [["a", "b"]] * 40000))


def _check_b6_encode(out: tuple) -> None:
    (Y, classes), peak = out
    assert peak < 200 * MB, f"peak {peak / MB:.0f} MB"
    assert Y.shape == (40001, 3) and Y.nnz == 80001
    assert classes.tolist() == ["a", "b", LONG]


def _b6_transform_and_metrics() -> tuple[Any, int]:
    rows = [[LONG]] + [["a", "b"]] * 40000

    def run() -> tuple:
        enc = LabelSpace(np.array(["a", "b", LONG], dtype=object)).transform(rows)
        scores = sp.csr_matrix(np.tile([0.9, 0.5, 0.1], (len(rows), 1)))
        return enc, precision_at_k(rows, scores, k=2, classes=["a", "b", LONG])

    return peak_bytes(run)


def _check_b6_transform(out: tuple) -> None:
    (enc, p2), peak = out
    assert peak < 200 * MB, f"peak {peak / MB:.0f} MB"
    assert enc.Y.nnz == 80001 and not enc.n_unknown.any()
    assert p2 == pytest.approx((0 + 40000 * 1.0) / 40001)


def _b6_many_labels_one_long() -> np.ndarray:
    # 100k distinct short labels and one long one: a '<U20000' classes array would be 8 GB.
    labels = [[f"l{i}"] for i in range(100_000)] + [[LONG]]
    (_, classes), peak = peak_bytes(lambda: encode_labels(labels))
    assert peak < 200 * MB, f"peak {peak / MB:.0f} MB"
    return classes


# ----------------------------------------------------------------------------- the table


# Row 0: truth {0}, top label 0 (w=1); row 1: truth {1, 2}, top label 2 (w=3). Both rows
# divide by their ideal DCG n_i; the best ranking of row 1 is 2 (w=3) then 1 (w=2).
_N1 = 1 + 1 / np.log2(3)
_PSNDCG_PAIR = (1 + 3 / _N1) / (1 + (3 + 2 / np.log2(3)) / _N1)


def _p(call: Callable[[], Any], expect: Raises | Returns, id: str) -> Any:
    return pytest.param(call, expect, id=id)


CASES = [
    # --- 2-bady: labels -------------------------------------------------------------
    _p(_b5_estimator, Returns(_check_b5_estimator), "2-bady-B5-xrl-int-label-minus-1-beam-1"),
    _p(
        lambda: XRLinearClassifier().fit(np.eye(3), [[None], [None], [None]]),
        Raises(ValueError, "Y contains None as a label"),
        "2-bady-xrl-labels-all-None",
    ),
    _p(
        lambda: XRLinearClassifier().fit(np.eye(3), [[None, "a"], ["a"], ["b"]]),
        Raises(ValueError, "Y contains None as a label"),
        "2-bady-xrl-None-inside-label-list",
    ),
    _p(
        lambda: encode_labels([None, "a", "b"]),
        Raises(ValueError, "Y contains None as a label"),
        "2-bady-1d-target-with-None",
    ),
    _p(
        lambda: as_label_sets([[None], []]),
        Raises(ValueError, "Y contains None as a label"),
        "2-bady-as_label_sets-None",
    ),
    _p(
        lambda: LabelSpace(["a"]).transform([["a"], [None]], name="Y_true"),
        Raises(ValueError, "Y_true contains None as a label"),
        "2-bady-transform-None",
    ),
    _p(
        lambda: encode_target([["a"]], classes=["a", None]),
        Raises(ValueError, "classes contains None as a label"),
        "2-bady-classes-with-None",
    ),
    _p(
        lambda: encode_labels([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]),
        Raises(ValueError, "list of 0/1 rows of length 2"),
        "2-bady-float-01-lists-are-ambiguous",
    ),
    _p(
        lambda: encode_labels([[2**70], [1]]),
        Raises(ValueError, "outside the int64 range"),
        "2-bady-int-label-beyond-int64",
    ),
    _p(
        lambda: encode_labels([["a"], ["a\x00"], ["a"]]),
        Returns(
            lambda out: (
                out[1].tolist() == ["a", "a\x00"] and out[0].sum(axis=0).tolist() == [[2, 1]]
            )
        ),
        "2-bady-trailing-NUL-labels-stay-distinct",
    ),
    _p(_b6_encode, Returns(_check_b6_encode), "2-bady-B6-long-label-encode-memory"),
    _p(
        _b6_transform_and_metrics,
        Returns(_check_b6_transform),
        "2-bady-B6-long-label-transform-memory",
    ),
    _p(
        _b6_many_labels_one_long,
        Returns(lambda classes: len(classes) == 100_001 and classes[-1] == LONG),
        "2-bady-B6-long-label-among-many-distinct",
    ),
    _p(
        lambda: peak_bytes(
            lambda: indices_to_labels(np.zeros((40000, 3), dtype=np.int64), np.array([LONG, "a"]))
        ),
        Returns(lambda out: out[1] < 50 * MB and out[0].dtype == object and out[0][0, 0] == LONG),
        "2-bady-B6-long-label-topk-labels-memory",
    ),
    _p(
        lambda: peak_bytes(
            lambda: as_label_sets(sp.csr_matrix(np.ones((40000, 2))), classes=["a", LONG])
        ),
        Returns(lambda out: out[1] < 100 * MB and out[0][0] == {"a", LONG}),
        "2-bady-B6-long-label-as_label_sets-of-matrix-memory",
    ),
    _p(
        lambda: indices_to_labels(np.array([[1, -1]]), np.array(["a" * 64, "b" * 64])),
        Returns(lambda out: out.tolist() == [["b" * 64, None]]),
        "2-bady-labels-of-64-chars-round-trip",
    ),
    _p(
        lambda: encode_labels([["b", "a"], ["c"]])[1],
        Returns(lambda classes: classes.dtype == object and classes.tolist() == ["a", "b", "c"]),
        "2-bady-str-labels-are-an-object-array",
    ),
    # --- 4-metrics ------------------------------------------------------------------
    _p(
        lambda: precision_at_k(
            [[-1]], (np.array([[-1, -1, -1]]), np.array([[0.9, NEG, NEG]])), k=3, classes=[-1, 0, 1]
        ),
        Returns(lambda v: v == pytest.approx(1 / 3)),
        "4-metrics-B5-minus-1-label-and-old-fill-value",
    ),
    _p(
        lambda: precision_at_k(
            [[0, -1]], (np.array([[0, -1]]), np.array([[0.9, NEG]])), k=2, classes=[-1, 0, 1]
        ),
        Returns(lambda v: v == pytest.approx(0.5)),
        "4-metrics-B5-empty-slot-is-no-hit-whatever-its-label",
    ),
    _p(
        lambda: [
            precision_at_k(np.array([[1, 1, 0]]), S, k=3)
            for S in (
                np.array([[0.5, NEG, 0.1]]),
                sp.csr_matrix(
                    (np.array([0.5, NEG, 0.1]), np.array([0, 1, 2]), np.array([0, 3])), shape=(1, 3)
                ),
                (np.array([[0, 2, 1]]), np.array([[0.5, 0.1, NEG]])),
            )
        ],
        Returns(lambda vs: vs == pytest.approx([1 / 3] * 3)),
        "4-metrics-minus-inf-score-is-not-a-prediction-in-every-format",
    ),
    _p(
        lambda: peak_bytes(
            lambda: precision_at_k(
                np.array([[1, 0, 1], [0, 1, 0]]),
                np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]]),
                k=10**9,
            )
        ),
        Returns(lambda out: out[0] == pytest.approx(1.5e-9) and out[1] < 10 * MB),
        "4-metrics-k-1e9-dense-is-clipped",
    ),
    _p(
        lambda: peak_bytes(
            lambda: ndcg_at_k(
                sp.csr_matrix(
                    (np.ones(1000), np.arange(1000), np.arange(1001)), shape=(1000, 10**7)
                ),
                sp.csr_matrix(
                    (np.ones(1000), np.arange(1000), np.arange(1001)), shape=(1000, 10**7)
                ),
                k=10**7,
            )
        ),
        Returns(lambda out: out[0] == pytest.approx(1.0) and out[1] < 50 * MB),
        "4-metrics-k-1e7-sparse-is-clipped",
    ),
    _p(
        lambda: peak_bytes(
            lambda: evaluate(
                [[0], [1, 2]],
                (np.array([[0, 1], [2, -1]]), np.array([[0.9, 0.2], [0.5, NEG]])),
                ks=(1, 10**9),
                inv_propensity=[1.0, 2.0, 3.0],
                normalize=True,
            )
        ),
        Returns(
            lambda out: (
                out[1] < 10 * MB
                and out[0]["precision@1000000000"] == pytest.approx(1e-9)
                and out[0]["ndcg@1000000000"] == pytest.approx((1 + 1 / (1 + 1 / np.log2(3))) / 2)
                and out[0]["psndcg@1000000000"] == pytest.approx(_PSNDCG_PAIR)
            )
        ),
        "4-metrics-k-1e9-pair-with-propensities-is-clipped",
    ),
    _p(
        lambda: precision_at_k([["a"]], np.array([[0.1, 0.9]]), k=1, classes=["a", "a"]),
        Raises(ValueError, "classes lists the label 'a' more than once"),
        "4-metrics-duplicate-classes",
    ),
    _p(
        lambda: psndcg_at_k(
            [[3]],
            (np.array([[3]]), np.array([[1.0]])),
            inv_propensity={3: 2.0},
            k=1,
            classes=np.array([5, 3, 5]),
        ),
        Raises(ValueError, "classes lists the label 5 more than once"),
        "4-metrics-duplicate-int-classes",
    ),
    _p(
        lambda: precision_at_k([["b"]], np.array([[0.1, 0.9]]), k=1, classes=["b", "a"]),
        Returns(lambda v: v == 0.0),
        "4-metrics-classes-unsorted",
    ),
    _p(
        lambda: precision_at_k([["a"], [None]], np.eye(2), k=1, classes=["a", "b"]),
        Raises(ValueError, "Y_true contains None as a label"),
        "4-metrics-None-label-in-truth",
    ),
    _p(
        lambda: psprecision_at_k(np.eye(3), np.eye(3), inv_propensity=np.ones(4), k=1),
        Raises(ValueError, "inv_propensity has 4 entries but the scores have 3 columns"),
        "4-metrics-inv-propensity-too-long",
    ),
    _p(
        lambda: inverse_propensity([["a"], ["b"], ["a"]], A=-1),
        Raises(ValueError, "A must be >= 0"),
        "4-metrics-B7-inverse-propensity-A-negative",
    ),
    _p(
        lambda: inverse_propensity([["a"], ["b"], ["a"]], B=-1),
        Raises(ValueError, "B must be > 0"),
        "4-metrics-B7-inverse-propensity-B-minus-1",
    ),
    _p(
        lambda: inverse_propensity([["a"], ["b"], ["a"]], B=-3),
        Raises(ValueError, "B must be > 0"),
        "4-metrics-B7-inverse-propensity-B-minus-3-complex",
    ),
    _p(
        lambda: inverse_propensity([["a"], ["b"], ["a"]], B=-1.2),
        Raises(ValueError, "B must be > 0"),
        "4-metrics-B7-inverse-propensity-B-minus-1.2-complex",
    ),
    _p(
        lambda: inverse_propensity([["a"], ["b"], ["a"]], A=float("nan")),
        Raises(ValueError, "A must be a finite real number"),
        "4-metrics-B7-inverse-propensity-A-nan",
    ),
    _p(
        lambda: inverse_propensity([["a"], ["b"], ["a"]], A="x"),
        Raises(ValueError, "A must be a finite real number"),
        "4-metrics-B7-inverse-propensity-A-str",
    ),
]


@pytest.mark.parametrize(("call", "expect"), CASES)
def test_bad_input(call: Callable[[], Any], expect: Raises | Returns) -> None:
    if isinstance(expect, Raises):
        with pytest.raises(expect.type, match=expect.match):
            call()
    else:
        result = expect.check(call())
        assert result is None or result is True


# ----------------------------------------------------------------------------- import (B15)


def _fake_njit(**options: Any) -> Callable:
    def decorate(func: Callable) -> Callable:
        if options.get("cache"):
            raise RuntimeError(
                f"cannot cache function {func.__name__!r}: no locator available for file 'x.py'"
            )
        func.options = options
        return func

    return decorate


def test_import_jit_falls_back_to_no_cache_with_one_warning(monkeypatch):
    from skxmc._kernels import jit as _numba

    monkeypatch.setattr(_numba, "njit", _fake_njit)
    monkeypatch.setattr(_numba, "_warned", False)
    monkeypatch.setattr(_numba, "_KERNELS", [])  # keep the fakes out of the real registry
    with pytest.warns(_numba.NumbaCacheWarning, match="NUMBA_CACHE_DIR") as record:
        f = _numba.jit(nogil=True)(lambda: 1)
        g = _numba.jit(parallel=True)(lambda: 2)
    assert len(record) == 1
    assert f.options == {"cache": False, "nogil": True}
    assert g.options == {"cache": False, "parallel": True}


def test_import_jit_reraises_other_numba_errors(monkeypatch):
    from skxmc._kernels import jit as _numba

    def broken(**options: Any) -> Callable:
        def decorate(func: Callable) -> Callable:
            raise RuntimeError("something else")

        return decorate

    monkeypatch.setattr(_numba, "njit", broken)
    monkeypatch.setattr(_numba, "_KERNELS", [])
    with pytest.raises(RuntimeError, match="something else"):
        _numba.jit()(lambda: 1)
    with pytest.raises(TypeError, match="do not pass cache"):
        _numba.jit(cache=False)


SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import scipy.sparse as sp
    import skxmc

    assert skxmc.__file__.startswith({root!r}), skxmc.__file__
    rng = np.random.default_rng(0)
    X = sp.random(40, 20, density=0.3, format="csr", random_state=0)
    y = [[int(i % 5)] for i in range(40)]
    clf = skxmc.XRLinearClassifier().fit(X, y)
    print("P@1", clf.score(X, y))
    """
)


# compiles every kernel in a fresh process with no cache: 9-17 s on 2 busy cores; the
# fallback itself is tested in-process by test_import_jit_falls_back_to_no_cache_with_one_warning
@pytest.mark.slow
def test_import_without_writable_numba_cache():
    """B15: a read-only install used with an unwritable HOME and no NUMBA_CACHE_DIR."""
    prefix = as_unprivileged_user()
    base = Path(tempfile.mkdtemp(prefix="skxmc-ro-"))
    try:
        base.chmod(0o755)
        root = base / "site"
        shutil.copytree(
            Path(skxmc.__file__).parent,
            root / "skxmc",
            ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"),
        )
        home = base / "home"
        home.mkdir()
        read_only(root)
        read_only(home)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")
        }
        env.update(HOME=str(home), PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", SCRIPT.format(root=str(root))],
            cwd=base,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "P@1" in proc.stdout
        assert proc.stderr.count("NumbaCacheWarning") == 1, proc.stderr[-3000:]
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
