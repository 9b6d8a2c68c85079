"""Tests of the per-layer binary linear solvers of XR-Linear (skxmc.linear._solver)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from skxmc.linear._solver import (
    LayerGroups,
    fit_binary,
    fit_layer,
    label_seeds,
    row_squared_norms,
    solver_view,
)

TIGHT = {"tol": 1e-9, "max_iter": 100_000}


def _binary_problem(seed=0, n=200, d=40, pos_rate=0.3):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.2, random_state=rng, format="csr", dtype=np.float32)
    w = rng.randn(d)
    score = X @ w + 0.3 * rng.randn(n)
    y = np.where(score > np.quantile(score, 1 - pos_rate), 1, -1)
    return X, y


def _layer_problem(seed=0, n=300, d=60, n_labels=25, n_groups=5):
    """Random multi-label layer, labels assigned round-robin to groups."""
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.15, random_state=rng, format="csr", dtype=np.float32)
    Y = sp.random(n, n_labels, density=0.06, random_state=rng, format="csr", dtype=np.float32)
    Y.data[:] = 1.0
    parent = np.arange(n_labels) % n_groups
    return X, Y, parent


def _assert_close_rel(a, b, rtol=1e-3):
    scale = max(np.abs(b).max(), 1e-12)
    np.testing.assert_allclose(a, b, atol=rtol * scale, rtol=0)


# ------------------------------------------------------------------ single problem


@pytest.mark.parametrize("Cp, Cn", [(1.0, 1.0), (2.0, 0.5), (0.3, 3.0)])
def test_squared_hinge_matches_liblinear(Cp, Cn):
    X, y = _binary_problem(seed=1)
    w, b, n_iter = fit_binary(X, y, loss="squared_hinge", Cp=Cp, Cn=Cn, **TIGHT)
    # liblinear's weighted C: C_i = C * class_weight[y_i]; take C = 1
    ref = LinearSVC(
        loss="squared_hinge",
        dual=True,
        C=1.0,
        fit_intercept=True,
        intercept_scaling=1,
        class_weight={1: Cp, -1: Cn},
        tol=1e-8,
        max_iter=100_000,
    ).fit(X, y)
    _assert_close_rel(w, ref.coef_.ravel())
    _assert_close_rel(np.array([b]), ref.intercept_, rtol=1e-3 * np.abs(ref.coef_).max())
    assert 1 <= n_iter < TIGHT["max_iter"]


def test_logistic_matches_liblinear_dual():
    # sklearn 1.9 still has dual=True for liblinear with the l2 penalty (the same dual
    # coordinate descent, liblinear -s 7), so the reference is exact
    X, y = _binary_problem(seed=2)
    for Cp, Cn in [(1.0, 1.0), (3.0, 0.5)]:
        w, b, _ = fit_binary(X, y, loss="logistic", Cp=Cp, Cn=Cn, **TIGHT)
        ref = LogisticRegression(
            solver="liblinear",
            dual=True,
            C=1.0,
            fit_intercept=True,
            intercept_scaling=1,
            class_weight={1: Cp, -1: Cn},
            tol=1e-10,
            max_iter=100_000,
        ).fit(X, y)
        _assert_close_rel(w, ref.coef_.ravel())
        assert abs(b - ref.intercept_[0]) <= 1e-3 * np.abs(ref.coef_).max()


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_relevance_is_instance_weighted_cost(loss):
    # C_i = Cp * relevance_i on positives == liblinear's per-instance weights
    X, y = _binary_problem(seed=3)
    rel = np.random.RandomState(0).uniform(0.2, 3.0, size=y.shape[0])
    w, b, _ = fit_binary(X, y, loss=loss, Cp=1.5, Cn=0.7, relevance=rel, **TIGHT)
    sample_weight = np.where(y > 0, 1.5 * rel, 0.7)
    if loss == "squared_hinge":
        est = LinearSVC(loss="squared_hinge", dual=True, C=1.0, tol=1e-8, max_iter=100_000)
    else:
        est = LogisticRegression(solver="liblinear", dual=True, C=1.0, tol=1e-10, max_iter=100_000)
    ref = est.fit(X, y, sample_weight=sample_weight)
    _assert_close_rel(w, ref.coef_.ravel())
    assert abs(b - ref.intercept_[0]) <= 1e-3 * np.abs(ref.coef_).max()


def test_no_bias_matches_liblinear_without_intercept():
    X, y = _binary_problem(seed=4)
    w, b, _ = fit_binary(X, y, bias=0.0, **TIGHT)
    ref = LinearSVC(
        loss="squared_hinge", dual=True, C=1.0, fit_intercept=False, tol=1e-8, max_iter=100_000
    ).fit(X, y)
    assert b == 0.0
    _assert_close_rel(w, ref.coef_.ravel())


def test_bias_value_scales_like_intercept_scaling():
    X, y = _binary_problem(seed=5)
    w, b, _ = fit_binary(X, y, bias=2.5, **TIGHT)
    ref = LinearSVC(
        loss="squared_hinge", dual=True, C=1.0, intercept_scaling=2.5, tol=1e-8, max_iter=100_000
    ).fit(X, y)
    _assert_close_rel(w, ref.coef_.ravel())
    # sklearn reports intercept_ = intercept_scaling * (weight of the constant feature)
    assert abs(2.5 * b - ref.intercept_[0]) <= 1e-3 * np.abs(ref.coef_).max()


def test_fit_binary_is_deterministic_and_seed_dependent():
    X, y = _binary_problem(seed=6)
    w1, b1, _ = fit_binary(X, y, seed=7)
    w2, b2, _ = fit_binary(X, y, seed=7)
    w3, _, _ = fit_binary(X, y, seed=8)
    np.testing.assert_array_equal(w1, w2)
    assert b1 == b2
    assert not np.array_equal(w1, w3)  # default tol 0.1: the order matters a little


def test_all_negative_and_degenerate_problems():
    X, y = _binary_problem(seed=7)
    for loss in ("squared_hinge", "logistic"):
        w, b, _ = fit_binary(X, -np.ones_like(y), loss=loss)
        assert np.all(np.isfinite(w)) and b < 0
    # empty problem and all-zero rows
    w, b, _ = fit_binary(sp.csr_matrix((0, 5), dtype=np.float32), np.zeros(0))
    assert w.shape == (5,) and b == 0.0
    w, b, _ = fit_binary(sp.csr_matrix((4, 5), dtype=np.float32), np.array([1, -1, -1, -1]))
    assert np.all(w == 0) and b < 0


def test_fit_binary_input_validation():
    X, y = _binary_problem()
    with pytest.raises(ValueError, match="loss"):
        fit_binary(X, y, loss="hinge")
    with pytest.raises(ValueError, match="Cp"):
        fit_binary(X, y, Cp=0.0)
    with pytest.raises(ValueError, match="bias"):
        fit_binary(X, y, bias=-1.0)
    with pytest.raises(ValueError, match="relevance"):
        fit_binary(X, y, relevance=np.zeros(y.shape[0]))


def test_row_squared_norms():
    X, _ = _binary_problem()
    expected = np.asarray(X.astype(np.float64).multiply(X).sum(axis=1)).ravel()
    np.testing.assert_allclose(row_squared_norms(X), expected, rtol=1e-12)


# ------------------------------------------------------------------ layer driver


def _per_label_reference(X, Y, groups, seeds, **params):
    """Dense (d + 1, L) weights by calling fit_binary once per label."""
    X = sp.csr_matrix(X)
    Yc = sp.csc_matrix(Y)
    d, L = X.shape[1], Y.shape[1]
    ref = np.zeros((d + 1, L))
    use_rel = params.pop("use_relevance", False)
    for g in range(groups.n_groups):
        rows = groups.row_indices[groups.row_indptr[g] : groups.row_indptr[g + 1]]
        for c in groups.label_indices[groups.label_indptr[g] : groups.label_indptr[g + 1]]:
            col = Yc[:, [c]].toarray().ravel()[rows]
            rel = np.where(col > 0, col, 1.0) if use_rel else None
            w, b, _ = fit_binary(
                X[rows], np.where(col != 0, 1, -1), relevance=rel, seed=int(seeds[c]), **params
            )
            ref[:d, c] = w
            ref[d, c] = b
    return ref


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
@pytest.mark.parametrize("compact", [None, True, False])
def test_layer_matches_per_label_solver(loss, compact):
    X, Y, parent = _layer_problem(seed=10)
    # matcher-aware negatives: some extra random rows per group
    M = sp.random(X.shape[0], 5, density=0.1, random_state=0, format="csr")
    groups = LayerGroups.from_matrices(Y, parent, M)
    params = {"loss": loss, "Cp": 2.0, "Cn": 0.5, "tol": 0.1, "max_iter": 100, "bias": 1.0}
    W = fit_layer(X, Y, groups, weight_threshold=0.0, random_state=3, _compact=compact, **params)
    ref = _per_label_reference(X, Y, groups, label_seeds(3, Y.shape[1]), **params)
    assert W.shape == (X.shape[1] + 1, Y.shape[1])
    np.testing.assert_allclose(W.toarray(), ref, rtol=1e-6, atol=1e-7)


def test_solver_view_ranks_features_by_frequency():
    X, _, _ = _layer_problem(seed=4)
    _, ranked, data, sqn, d, feature_of = solver_view(X)
    counts = np.bincount(X.indices, minlength=X.shape[1])
    # rank r holds the r-th most frequent feature (ties by id), and the ids map back
    np.testing.assert_array_equal(feature_of, np.argsort(-counts, kind="stable"))
    np.testing.assert_array_equal(feature_of[ranked], X.indices)
    assert ranked.dtype == np.uint32 and d == X.shape[1]
    np.testing.assert_array_equal(data, X.data)
    np.testing.assert_allclose(sqn, row_squared_norms(X))


@pytest.mark.parametrize("compact", [True, False])
def test_frequency_ranks_do_not_change_the_weights(compact):
    """The ranked view must give the weights of the original ids, bit for bit, in sorted
    columns: compare with a view whose ranks are the ids themselves."""
    X, Y, parent = _layer_problem(seed=11, d=300)
    X = sp.csr_matrix(X)
    groups = LayerGroups.from_matrices(Y, parent)
    indptr, _, data, sqn, d, feature_of = solver_view(X)
    assert not np.array_equal(feature_of, np.arange(d))  # the test needs a real reordering
    identity = (indptr, X.indices.view(np.uint32), data, sqn, d, np.arange(d))
    kw = {"weight_threshold": 0.05, "random_state": 1, "_compact": compact}
    W = fit_layer(X, Y, groups, **kw)
    W_id = fit_layer(X, Y, groups, _view=identity, **kw)
    fresh = sp.csc_matrix((W.data, W.indices, W.indptr), shape=W.shape)
    assert fresh.has_sorted_indices and W.nnz > 0
    for a, b in ((W.indptr, W_id.indptr), (W.indices, W_id.indices), (W.data, W_id.data)):
        np.testing.assert_array_equal(a, b)


def test_layer_relevance_weighted_positives():
    X, Y, parent = _layer_problem(seed=11)
    Y = Y.copy()
    Y.data = np.random.RandomState(1).uniform(0.5, 2.0, Y.nnz).astype(np.float32)
    groups = LayerGroups.from_matrices(Y, parent)
    W = fit_layer(X, Y, groups, use_relevance=True, weight_threshold=0.0, random_state=0)
    ref = _per_label_reference(X, Y, groups, label_seeds(0, Y.shape[1]), use_relevance=True)
    np.testing.assert_allclose(W.toarray(), ref, rtol=1e-6, atol=1e-7)
    W_plain = fit_layer(X, Y, groups, weight_threshold=0.0, random_state=0)
    assert not np.allclose(W.toarray(), W_plain.toarray())
    Y_bad = Y.copy()
    Y_bad.data[0] = -1.0
    with pytest.raises(ValueError, match="relevance"):
        fit_layer(X, Y_bad, groups, use_relevance=True)


def test_layer_parallel_identical_and_output_format():
    X, Y, _ = _layer_problem(seed=12, n=400, n_labels=60, n_groups=12)
    # uneven groups, one big group that gets split across work items
    parent = np.r_[np.zeros(20, int), np.arange(40) % 11 + 1]
    groups = LayerGroups.from_matrices(Y, parent)
    W1 = fit_layer(X, Y, groups, n_jobs=1, random_state=5)
    for n_jobs in (2, 3, -1):
        W2 = fit_layer(X, Y, groups, n_jobs=n_jobs, random_state=5)
        for attr in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(W1, attr), getattr(W2, attr))
    assert W1.format == "csc" and W1.dtype == np.float32
    W_sorted = W1.copy()
    W_sorted.has_sorted_indices = False
    W_sorted.sort_indices()
    np.testing.assert_array_equal(W_sorted.indices, W1.indices)
    # random_state changes the coordinate order, hence (slightly) the weights
    W3 = fit_layer(X, Y, groups, n_jobs=1, random_state=6)
    assert (W1 != W3).nnz > 0


def test_weight_threshold_prunes():
    X, Y, parent = _layer_problem(seed=13)
    groups = LayerGroups.from_matrices(Y, parent)
    W0 = fit_layer(X, Y, groups, weight_threshold=0.0).toarray()
    for thr in (0.05, 0.1, 0.3):
        W = fit_layer(X, Y, groups, weight_threshold=thr)
        expected = np.where(np.abs(W0) >= np.float32(thr), W0, 0.0)
        np.testing.assert_array_equal(W.toarray(), expected)
        assert np.all(np.abs(W.data) >= np.float32(thr))
        assert W.nnz < np.count_nonzero(W0)


def test_labels_without_positives_empty_groups_and_unowned_labels():
    X, Y, _ = _layer_problem(seed=14, n_labels=8)
    Y = Y.tolil()
    Y[:, 2] = 0  # label 2: no positives at all
    Y = Y.tocsr()
    Y.eliminate_zeros()
    # group 0: labels 0, 1, 2 ; group 1: label 3, no rows (no positives, no matcher) ;
    # group 2: nothing at all ; labels 4..7 in no group
    rows0 = np.flatnonzero(np.asarray(Y[:, :2].sum(axis=1)).ravel() > 0)
    groups = LayerGroups(
        row_indptr=[0, rows0.size, rows0.size, rows0.size],
        row_indices=rows0,
        label_indptr=[0, 3, 4, 4],
        label_indices=[0, 1, 2, 3],
    )
    W = fit_layer(X, Y, groups, weight_threshold=0.0).toarray()
    d = X.shape[1]
    # all-negative problem: finite, negative bias
    assert np.all(np.isfinite(W[:, 2])) and W[d, 2] < 0
    assert np.any(W[:d, 0] != 0) and np.any(W[:d, 1] != 0)
    assert np.all(W[:, 3:] == 0)
    ref = _per_label_reference(X, Y, groups, label_seeds(0, Y.shape[1]))
    np.testing.assert_allclose(W, ref, rtol=1e-6, atol=1e-7)
    # a layer whose groups are all empty
    empty = LayerGroups([0, 0], [], [0, 0], [])
    W = fit_layer(X, Y, empty)
    assert W.shape == (d + 1, Y.shape[1]) and W.nnz == 0


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_input_formats_give_identical_weights(n_jobs):
    X, Y, parent = _layer_problem(seed=15)
    groups = LayerGroups.from_matrices(Y, parent)
    W = fit_layer(X, Y, groups, n_jobs=n_jobs)
    X_unsorted = X.copy()
    # reverse the stored order inside every row
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        X_unsorted.indices[a:b] = X.indices[a:b][::-1]
        X_unsorted.data[a:b] = X.data[a:b][::-1]
    X_unsorted.has_sorted_indices = False
    variants = [
        X.toarray(),  # dense float32: converted to CSR once
        X.astype(np.float64),
        X.tocsc(),
        X_unsorted,
    ]
    for Xv in variants:
        Wv = fit_layer(Xv, Y.tocsc(), groups, n_jobs=n_jobs)
        np.testing.assert_array_equal(Wv.toarray(), W.toarray())
    assert not X_unsorted.has_sorted_indices  # the caller's matrix is left alone


def test_bias_zero_leaves_bias_row_empty():
    X, Y, parent = _layer_problem(seed=16)
    groups = LayerGroups.from_matrices(Y, parent)
    W = fit_layer(X, Y, groups, bias=0.0, weight_threshold=0.0)
    assert W.shape[0] == X.shape[1] + 1
    assert W[X.shape[1]].nnz == 0


def test_row_sqnorms_argument():
    X, Y, parent = _layer_problem(seed=17)
    groups = LayerGroups.from_matrices(Y, parent)
    W = fit_layer(X, Y, groups)
    W2 = fit_layer(X, Y, groups, row_sqnorms=row_squared_norms(X))
    np.testing.assert_array_equal(W.toarray(), W2.toarray())
    with pytest.raises(ValueError, match="row_sqnorms"):
        fit_layer(X, Y, groups, row_sqnorms=np.ones(3))


# ------------------------------------------------------------------ LayerGroups


def test_from_matrices_rows_are_positives_plus_matcher():
    Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]]))
    C = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1]]))  # labels 0, 1 -> g0; 2 -> g1
    M = sp.csr_matrix(np.array([[0, 0], [0, 1], [0, 0], [1, 1], [0, 0]]))
    G = LayerGroups.from_matrices(Y, C, M)
    assert G.n_groups == 2
    np.testing.assert_array_equal(G.row_indices[G.row_indptr[0] : G.row_indptr[1]], [0, 1, 3, 4])
    np.testing.assert_array_equal(G.row_indices[G.row_indptr[1] : G.row_indptr[2]], [1, 2, 3])
    np.testing.assert_array_equal(G.label_indices, [0, 1, 2])
    np.testing.assert_array_equal(G.label_indptr, [0, 2, 3])
    # array form of C, with an unassigned label
    G2 = LayerGroups.from_matrices(Y, np.array([1, 1, -1]))
    np.testing.assert_array_equal(G2.label_indptr, [0, 0, 2])
    np.testing.assert_array_equal(G2.row_indices, [0, 1, 4])


def test_layer_groups_validation():
    with pytest.raises(ValueError, match="strictly increasing"):
        LayerGroups([0, 3], [1, 1, 2], [0, 1], [0])
    with pytest.raises(ValueError, match="strictly increasing"):
        LayerGroups([0, 2, 4], [0, 2, 2, 1], [0, 1, 2], [0, 1])
    LayerGroups([0, 2, 4], [0, 2, 1, 3], [0, 1, 2], [0, 1])  # order restarts per group
    with pytest.raises(ValueError, match="same groups"):
        LayerGroups([0, 1], [0], [0, 1, 1], [0])
    with pytest.raises(ValueError, match="indptr"):
        LayerGroups([0, 2], [0], [0, 1], [0])
    G = LayerGroups([0, 1, 2], [0, 1], [0, 1, 2], [0, 0])
    with pytest.raises(ValueError, match="more than one group"):
        G.check(n_rows=2, n_labels=1)
    with pytest.raises(ValueError, match="row_indices"):
        LayerGroups([0, 1], [5], [0, 1], [0]).check(n_rows=3, n_labels=1)
