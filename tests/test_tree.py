"""Tests for skxmc.tree: balanced label tree, cluster chain, PIFA."""

from __future__ import annotations

import itertools
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone

from skxmc.label2vec import Label2VecTransformer
from skxmc.tree import (
    EMBEDDING_METHODS,
    HierarchicalLabelTree,
    build_label_tree,
    pifa_embeddings,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


def _data_dir() -> Path:
    return Path(os.environ.get("SKXMC_DATA", REPO_ROOT.parent / "shared" / "data"))


def _random_embeddings(n_labels: int, n_features: int = 50, density: float = 0.2, seed: int = 0):
    rng = np.random.RandomState(seed)
    E = sp.random(
        n_labels, n_features, density=density, format="csr", random_state=rng, dtype=np.float32
    )
    E.data = rng.rand(E.nnz).astype(np.float32)
    return E


def _leaf_sizes(codes: np.ndarray, depth: int) -> np.ndarray:
    return np.bincount(codes, minlength=1 << depth)


def _check_tree(
    chain: list, codes: np.ndarray, n_labels: int, max_leaf_size: int, branching_factor: int
) -> None:
    """Structural invariants of a cluster chain built by balanced 2-means."""
    # Shapes chain together: (K_1, 1), (K_2, K_1), ..., (L, K_{D-1}).
    assert chain[0].shape[1] == 1
    assert chain[-1].shape[0] == n_labels
    for upper, lower in itertools.pairwise(chain):
        assert lower.shape[1] == upper.shape[0]
    for C in chain:
        assert sp.isspmatrix_csr(C) and C.dtype == np.float32
        # Every child has exactly one parent, with value 1; no parent is childless.
        np.testing.assert_array_equal(C.getnnz(axis=1), 1)
        np.testing.assert_array_equal(C.data, 1.0)
        assert np.all(C.getnnz(axis=0) >= 1)
        assert np.all(C.getnnz(axis=0) <= max(branching_factor, max_leaf_size))
    # Every label is in exactly one leaf: the column of its one in the last matrix.
    np.testing.assert_array_equal(chain[-1].indices, codes)
    n_leaves = chain[-1].shape[1]
    sizes = np.bincount(codes, minlength=n_leaves)
    assert sizes.min() >= 1 and sizes.max() <= max_leaf_size
    # Balance at every binary split: leaves 2j and 2j + 1 are siblings, and so on up.
    depth = int(np.log2(n_leaves)) if n_leaves > 1 else 0
    assert (1 << depth) == n_leaves or n_labels <= max_leaf_size
    level = sizes
    for _ in range(depth):
        assert np.all(np.abs(level[0::2] - level[1::2]) <= 1)
        # The left child gets floor(n / 2), as in PECOS.
        assert np.all(level[0::2] <= level[1::2])
        level = level[0::2] + level[1::2]
    assert level.sum() == n_labels


# --------------------------------------------------------------------------------------
# build_label_tree
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n_labels", "max_leaf_size", "branching_factor", "shapes"),
    [
        (1, 100, 16, [(1, 1)]),
        (7, 100, 16, [(7, 1)]),
        (100, 100, 16, [(100, 1)]),
        (101, 100, 16, [(2, 1), (101, 2)]),
        (320, 10, 16, [(2, 1), (32, 2), (320, 32)]),  # 5 binary levels: top layer has 2
        (320, 20, 16, [(16, 1), (320, 16)]),
        (320, 10, 2, [(2, 1), (4, 2), (8, 4), (16, 8), (32, 16), (320, 32)]),
        (300, 10, 4, [(2, 1), (8, 2), (32, 8), (300, 32)]),
        (1000, 3, 16, [(2, 1), (32, 2), (512, 32), (1000, 512)]),
    ],
)
def test_chain_shapes_follow_pecos(n_labels, max_leaf_size, branching_factor, shapes):
    E = _random_embeddings(n_labels, seed=n_labels)
    chain, codes = build_label_tree(
        E, max_leaf_size=max_leaf_size, branching_factor=branching_factor
    )
    assert [C.shape for C in chain] == shapes
    _check_tree(chain, codes, n_labels, max_leaf_size, branching_factor)


@pytest.mark.parametrize("n_labels", [2, 3, 5, 33, 257, 999])
@pytest.mark.parametrize("max_leaf_size", [2, 7, 16])
def test_balance_and_leaf_sizes(n_labels, max_leaf_size):
    E = _random_embeddings(n_labels, seed=n_labels + max_leaf_size)
    chain, codes = build_label_tree(E, max_leaf_size=max_leaf_size, branching_factor=4)
    _check_tree(chain, codes, n_labels, max_leaf_size, 4)


def test_one_layer_tree_when_labels_fit_one_leaf():
    chain, codes = build_label_tree(np.eye(5), max_leaf_size=5)
    assert len(chain) == 1
    np.testing.assert_array_equal(chain[0].toarray(), np.ones((5, 1)))
    np.testing.assert_array_equal(codes, 0)


def test_deterministic_for_a_seed_and_independent_of_n_jobs():
    E = _random_embeddings(3000, n_features=300, density=0.05, seed=1)
    _, ref = build_label_tree(E, max_leaf_size=20, random_state=3)
    _, again = build_label_tree(E, max_leaf_size=20, random_state=3)
    np.testing.assert_array_equal(ref, again)
    # n_jobs=2 and 4 run the top nodes through the multi-threaded node kernel and the
    # lower levels node-parallel: same arithmetic, same tree.
    for n_jobs in (2, 4, -1):
        _, par = build_label_tree(E, max_leaf_size=20, random_state=3, n_jobs=n_jobs)
        np.testing.assert_array_equal(ref, par)
    # Dense embeddings: same independence of n_jobs, and nearly the same tree as sparse
    # (float sums in another order may flip near-ties).
    _, dense = build_label_tree(E.toarray(), max_leaf_size=20, random_state=3)
    _, dense_par = build_label_tree(E.toarray(), max_leaf_size=20, random_state=3, n_jobs=4)
    np.testing.assert_array_equal(dense, dense_par)
    assert np.mean(ref == dense) > 0.9


def test_random_state_instance_and_different_seeds():
    E = _random_embeddings(500, seed=2)
    trees = {tuple(build_label_tree(E, max_leaf_size=10, random_state=s)[1]) for s in range(5)}
    assert len(trees) > 1
    for random_state in (np.random.RandomState(0), None):
        chain, codes = build_label_tree(E, max_leaf_size=10, random_state=random_state)
        _check_tree(chain, codes, 500, 10, 16)


def test_identical_and_zero_embeddings_are_placed_deterministically():
    E = np.ones((50, 4), dtype=np.float32)
    chain, codes = build_label_tree(E, max_leaf_size=4)
    _check_tree(chain, codes, 50, 4, 16)
    # All scores tie: labels are cut by index, so leaves are contiguous id ranges.
    assert np.all(np.diff(codes) >= 0)
    Z = sp.csr_matrix((40, 10), dtype=np.float32)
    chain, codes = build_label_tree(Z, max_leaf_size=4)
    _check_tree(chain, codes, 40, 4, 16)
    np.testing.assert_array_equal(codes, build_label_tree(Z, max_leaf_size=4)[1])


def test_recovers_well_separated_groups():
    rng = np.random.RandomState(0)
    centres = np.eye(8, 64)
    groups = np.repeat(np.arange(8), 25)
    E = centres[groups] + 0.05 * rng.rand(200, 64)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    perm = rng.permutation(200)  # groups must not be found from label order
    chain, codes = build_label_tree(E[perm], max_leaf_size=25, branching_factor=8)
    assert [C.shape for C in chain] == [(8, 1), (200, 8)]
    # Each leaf holds exactly one group.
    for leaf in range(8):
        assert len(np.unique(groups[perm][codes == leaf])) == 1


def test_sparse_input_is_not_modified_and_unsorted_indices_are_fine():
    E = _random_embeddings(200, seed=4)
    ref = build_label_tree(E, max_leaf_size=10)[1]
    # Reverse the column order inside every row: indices unsorted, same matrix.
    U = E.copy()
    for i in range(U.shape[0]):
        a, b = U.indptr[i], U.indptr[i + 1]
        U.indices[a:b] = U.indices[a:b][::-1].copy()
        U.data[a:b] = U.data[a:b][::-1].copy()
    U.has_sorted_indices = False
    before = U.indices.copy()
    np.testing.assert_array_equal(build_label_tree(U, max_leaf_size=10)[1], ref)
    np.testing.assert_array_equal(U.indices, before)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"branching_factor": 3}, "branching_factor must be a power of 2"),
        ({"branching_factor": 1}, "branching_factor"),
        ({"max_leaf_size": 1}, "max_leaf_size"),
        ({"max_iter": 0}, "max_iter"),
        ({"n_jobs": "two"}, "n_jobs"),
    ],
)
def test_build_label_tree_bad_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_label_tree(np.eye(4), **kwargs)


def test_build_label_tree_rejects_non_finite():
    E = np.eye(4)
    E[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        build_label_tree(E)


# --------------------------------------------------------------------------------------
# PIFA
# --------------------------------------------------------------------------------------
def _dense_pifa(X: np.ndarray, Y: np.ndarray, instance_norm) -> np.ndarray:
    Y = Y.astype(np.float64)
    if instance_norm == "l1":
        Y = Y / np.maximum(Y.sum(1, keepdims=True), 1e-300)
    elif instance_norm == "l2":
        Y = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-300)
    E = Y.T @ X
    norms = np.linalg.norm(E, axis=1, keepdims=True)
    return np.divide(E, norms, out=np.zeros_like(E), where=norms > 0)


@pytest.mark.parametrize("instance_norm", ["l1", "l2", None])
@pytest.mark.parametrize("sparse_x", [True, False])
def test_pifa_matches_dense_reference(instance_norm, sparse_x):
    rng = np.random.RandomState(0)
    X = sp.random(40, 30, density=0.3, format="csr", random_state=rng)
    Y = (rng.rand(40, 12) < 0.2).astype(np.float32)
    Y[:, 5] = 0  # a label without positives: zero row
    Y[3] = 0  # a sample without labels: contributes nothing
    E = pifa_embeddings(X if sparse_x else X.toarray(), Y, instance_norm=instance_norm)
    assert sp.issparse(E) == sparse_x
    assert E.dtype == np.float32 and E.shape == (12, 30)
    dense = E.toarray() if sparse_x else E
    np.testing.assert_allclose(
        dense, _dense_pifa(X.toarray(), Y, instance_norm), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(dense[5], 0)
    if sparse_x:
        assert sp.isspmatrix_csr(E) and E.has_sorted_indices


def test_pifa_label_lists_follow_sorted_classes():
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    E = pifa_embeddings(X, [["z"], ["a"]])
    np.testing.assert_allclose(E, [[0.0, 1.0], [1.0, 0.0]])


def test_pifa_errors():
    with pytest.raises(ValueError, match="instance_norm"):
        pifa_embeddings(np.eye(2), np.eye(2), instance_norm="max")
    with pytest.raises(ValueError, match="rows"):
        pifa_embeddings(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match="infinity|NaN"):
        pifa_embeddings(np.array([[np.inf, 0.0], [0.0, 1.0]]), np.eye(2))


# --------------------------------------------------------------------------------------
# HierarchicalLabelTree
# --------------------------------------------------------------------------------------
def _toy_problem(n_samples: int = 300, n_labels: int = 120, n_features: int = 80, seed: int = 0):
    rng = np.random.RandomState(seed)
    X = sp.random(
        n_samples, n_features, density=0.1, format="csr", random_state=rng, dtype=np.float64
    )
    Y = sp.random(n_samples, n_labels, density=0.03, format="csr", random_state=rng)
    Y.data[:] = 1
    return X, Y


def test_estimator_fit_attributes():
    X, Y = _toy_problem()
    Y = Y.tolil()
    Y[:, 7] = 0  # a label without positives
    Y = Y.tocsr()
    tree = HierarchicalLabelTree(max_leaf_size=8, branching_factor=4).fit(X, Y)
    assert tree.n_labels_ == 120 and tree.n_features_in_ == 80
    np.testing.assert_array_equal(tree.classes_, np.arange(120))
    assert tree.depth_ == 4 and tree.n_layers_ == 3 == len(tree.cluster_chain_)
    assert [C.shape for C in tree.cluster_chain_] == [(4, 1), (16, 4), (120, 16)]
    _check_tree(tree.cluster_chain_, tree.leaf_assignment_, 120, 8, 4)
    assert tree.label_embedder_ is None
    # Same tree as building from the PIFA embeddings directly.
    E = pifa_embeddings(X, Y)
    ref = HierarchicalLabelTree(label_embedding=E, max_leaf_size=8, branching_factor=4)
    np.testing.assert_array_equal(ref.fit(None).leaf_assignment_, tree.leaf_assignment_)
    _, codes = build_label_tree(E, max_leaf_size=8, branching_factor=4)
    np.testing.assert_array_equal(codes, tree.leaf_assignment_)


def test_estimator_label_lists_and_cluster_label_matrices():
    X, Y = _toy_problem(n_labels=60)
    names = np.array([f"label{j:03d}" for j in range(60)])
    Y_lists = [list(names[Y.indices[a:b]]) for a, b in itertools.pairwise(Y.indptr)]
    tree = HierarchicalLabelTree(max_leaf_size=4, branching_factor=4).fit(X, Y_lists)
    present = np.unique(Y.indices)
    np.testing.assert_array_equal(tree.classes_, names[present])
    layers = tree.cluster_label_matrices(Y_lists)
    assert len(layers) == tree.n_layers_
    # Reference: eq. 3, Y^(t) = binarize(Y^(t+1) C^(t+1)), with dense products.
    dense = Y[:, present].toarray()
    for t in range(tree.n_layers_ - 1, -1, -1):
        assert sp.isspmatrix_csr(layers[t]) and layers[t].dtype == np.float32
        assert layers[t].shape == (300, tree.cluster_chain_[t].shape[0])
        np.testing.assert_array_equal(layers[t].toarray(), (dense > 0).astype(np.float32))
        np.testing.assert_array_equal(layers[t].data, 1.0)
        dense = dense @ tree.cluster_chain_[t].toarray()
    # Unknown labels are ignored, not an error.
    extra = tree.cluster_label_matrices([["label000", "never-seen"], *Y_lists[1:]])
    assert extra[-1].shape == (300, len(present))


def test_estimator_single_label_and_small_label_sets():
    X = np.random.RandomState(0).rand(5, 3)
    tree = HierarchicalLabelTree().fit(X, [["only"]] * 5)
    assert tree.n_layers_ == 1 and tree.depth_ == 0
    np.testing.assert_array_equal(tree.cluster_chain_[0].toarray(), [[1.0]])
    np.testing.assert_array_equal(tree.leaf_assignment_, [0])
    layers = tree.cluster_label_matrices([["only"], [], ["only"], [], []])
    np.testing.assert_array_equal(layers[0].toarray().ravel(), [1, 0, 1, 0, 0])

    tree = HierarchicalLabelTree().fit(X, [["a"], ["b"], ["c", "a"], ["d"], ["e"]])
    assert [C.shape for C in tree.cluster_chain_] == [(5, 1)]


def test_estimator_precomputed_embeddings_without_x():
    E = _random_embeddings(64, seed=5)
    tree = HierarchicalLabelTree(label_embedding=E, max_leaf_size=8).fit(None)
    np.testing.assert_array_equal(tree.classes_, np.arange(64))
    assert not hasattr(tree, "n_features_in_")
    np.testing.assert_array_equal(tree.leaf_assignment_, build_label_tree(E, max_leaf_size=8)[1])
    # With Y: classes from Y; rows must match.
    Y = [[f"l{j:02d}"] for j in range(64)]
    tree = HierarchicalLabelTree(label_embedding=E.toarray(), max_leaf_size=8).fit(None, Y)
    assert tree.classes_[0] == "l00"
    with pytest.raises(ValueError, match="label_embedding has 64 rows but Y has 3 labels"):
        HierarchicalLabelTree(label_embedding=E).fit(None, [["a"], ["b"], ["c"]])


class _ToyEmbedder(BaseEstimator):
    """Follows the Label2VecTransformer protocol: fit(Y) -> embeddings_ (L, d)."""

    def __init__(self, dim: int = 4, broken: bool = False):
        self.dim = dim
        self.broken = broken

    def fit(self, Y):
        assert sp.isspmatrix_csr(Y) and Y.dtype == np.float32
        co = (Y.T @ Y).toarray()
        if not self.broken:
            self.embeddings_ = co[:, : self.dim] + 1e-3
        return self


def test_estimator_embedding_estimator():
    X, Y = _toy_problem(n_labels=40)
    embedder = _ToyEmbedder()
    tree = HierarchicalLabelTree(label_embedding=embedder, max_leaf_size=5).fit(None, Y)
    assert isinstance(tree.label_embedder_, _ToyEmbedder)
    assert tree.label_embedder_ is not embedder and not hasattr(embedder, "embeddings_")
    _check_tree(tree.cluster_chain_, tree.leaf_assignment_, 40, 5, 16)
    with pytest.raises(ValueError, match="embeddings_"):
        HierarchicalLabelTree(label_embedding=_ToyEmbedder(broken=True)).fit(X, Y)
    with pytest.raises(ValueError, match="Y is required"):
        HierarchicalLabelTree(label_embedding=_ToyEmbedder()).fit(X)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"branching_factor": 12}, "branching_factor must be a power of 2"),
        ({"branching_factor": 0}, "'branching_factor' parameter"),
        ({"max_leaf_size": 1}, "'max_leaf_size' parameter"),
        ({"max_leaf_size": 2.5}, "'max_leaf_size' parameter"),
        ({"max_iter": 0}, "'max_iter' parameter"),
        ({"random_state": "seed"}, "'random_state' parameter"),
        ({"n_jobs": 1.5}, "'n_jobs' parameter"),
        ({"verbose": -1}, "'verbose' parameter"),
        ({"label_embedding": "tfidf"}, "'label_embedding' parameter"),
        ({"label_embedding": "PIFA"}, "'label_embedding' parameter"),
    ],
)
def test_estimator_bad_params(params, match):
    X, Y = _toy_problem(n_samples=20, n_labels=10)
    with pytest.raises(ValueError, match=match):
        HierarchicalLabelTree(**params).fit(X, Y)


def test_embedding_string_lists():
    assert EMBEDDING_METHODS == ("pifa", "label2vec", "pifa+label2vec")


def _two_topics(n_per_topic: int = 60, n_labels: int = 24, seed: int = 0):
    """Labels 0..11 co-occur only among themselves, and so do labels 12..23; the features
    of the two topics overlap completely (PIFA cannot separate them, label2vec can)."""
    rng = np.random.RandomState(seed)
    half = n_labels // 2
    rows = []
    for topic in (0, 1):
        for _ in range(n_per_topic):
            k = rng.randint(2, 5)
            rows.append(sorted(topic * half + rng.choice(half, k, replace=False)))
    rng.shuffle(rows)
    Y = sp.lil_matrix((len(rows), n_labels), dtype=np.float32)
    for i, row in enumerate(rows):
        Y[i, row] = 1
    X = sp.csr_matrix(rng.rand(len(rows), 10).astype(np.float32))
    return X, Y.tocsr()


def test_label2vec_string_option():
    X, Y = _two_topics()
    tree = HierarchicalLabelTree(label_embedding="label2vec", max_leaf_size=12).fit(None, Y)
    assert isinstance(tree.label_embedder_, Label2VecTransformer)
    assert tree.label_embedder_.n_jobs == 1 and tree.label_embedder_.random_state == 0
    assert tree.label_embedder_.embeddings_.shape == (24, 100)
    assert not hasattr(tree, "n_features_in_")  # X is not used
    # The two groups of co-occurring labels are the two leaves.
    leaves = tree.leaf_assignment_
    assert len(set(leaves[:12])) == 1 and len(set(leaves[12:])) == 1 and leaves[0] != leaves[12]
    # X is accepted (and only checked for its number of rows); same tree as the estimator.
    same = HierarchicalLabelTree(label_embedding="label2vec", max_leaf_size=12).fit(X, Y)
    np.testing.assert_array_equal(same.leaf_assignment_, leaves)
    via_estimator = HierarchicalLabelTree(
        label_embedding=Label2VecTransformer(n_jobs=1), max_leaf_size=12
    ).fit(None, Y)
    np.testing.assert_array_equal(via_estimator.leaf_assignment_, leaves)
    with pytest.raises(ValueError, match="rows"):
        HierarchicalLabelTree(label_embedding="label2vec").fit(X[:10], Y)
    with pytest.raises(ValueError, match="requires y to be passed"):
        HierarchicalLabelTree(label_embedding="label2vec").fit(X)


@pytest.mark.parametrize("sparse_x", [True, False])
def test_pifa_plus_label2vec_string_option(sparse_x):
    X, Y = _two_topics()
    X = X if sparse_x else X.toarray()
    tree = HierarchicalLabelTree(label_embedding="pifa+label2vec", max_leaf_size=12).fit(X, Y)
    assert tree.n_features_in_ == 10
    V = tree.label_embedder_.embeddings_
    # The tree is the one of the row-normalised concatenation [PIFA | label2vec].
    P = pifa_embeddings(X, Y)
    P = P.toarray() if sp.issparse(P) else P
    E = np.hstack([P, V]) / np.sqrt(2)
    ref = HierarchicalLabelTree(label_embedding=E, max_leaf_size=12).fit(None)
    np.testing.assert_array_equal(ref.leaf_assignment_, tree.leaf_assignment_)
    with pytest.raises(ValueError, match="needs X"):
        HierarchicalLabelTree(label_embedding="pifa+label2vec").fit(None, Y)
    with pytest.raises(ValueError, match="requires y to be passed"):
        HierarchicalLabelTree(label_embedding="pifa+label2vec").fit(X)


def test_label2vec_tree_save_load_and_pickle(tmp_path):
    from skxmc.io import load

    X, Y = _two_topics()
    names = [[f"tag{j}" for j in Y.indices[a:b]] for a, b in itertools.pairwise(Y.indptr)]
    tree = HierarchicalLabelTree(
        label_embedding="pifa+label2vec", max_leaf_size=6, branching_factor=2
    ).fit(X, names)
    for restored in (load(tree.save(tmp_path / "tree")), pickle.loads(pickle.dumps(tree))):
        np.testing.assert_array_equal(restored.leaf_assignment_, tree.leaf_assignment_)
        np.testing.assert_array_equal(
            restored.label_embedder_.embeddings_, tree.label_embedder_.embeddings_
        )
        np.testing.assert_array_equal(restored.label_embedder_.classes_, np.arange(24))


def test_estimator_input_errors():
    X, Y = _toy_problem(n_samples=20, n_labels=10)
    with pytest.raises(ValueError, match="requires y to be passed"):
        HierarchicalLabelTree().fit(X)
    with pytest.raises(ValueError, match="needs X"):
        HierarchicalLabelTree().fit(None, Y)
    with pytest.raises(ValueError, match="rows"):
        HierarchicalLabelTree().fit(X[:10], Y)
    with pytest.raises(ValueError, match="no labels"):
        HierarchicalLabelTree().fit(X, [[] for _ in range(20)])
    bad = X.toarray()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        HierarchicalLabelTree().fit(bad, Y)
    with pytest.raises(ValueError, match="not fitted"):
        HierarchicalLabelTree().cluster_label_matrices(Y)


def test_init_only_stores_params_and_clone_pickle_round_trip():
    E = np.eye(3)
    est = HierarchicalLabelTree(label_embedding=E, branching_factor=5, max_leaf_size=-1)
    assert est.label_embedding is E and est.branching_factor == 5  # no validation yet
    X, Y = _toy_problem()
    tree = HierarchicalLabelTree(max_leaf_size=10, random_state=7, n_jobs=2).fit(X, Y)
    cloned = clone(tree)
    assert cloned.get_params() == tree.get_params() and not hasattr(cloned, "cluster_chain_")
    np.testing.assert_array_equal(cloned.fit(X, Y).leaf_assignment_, tree.leaf_assignment_)
    restored = pickle.loads(pickle.dumps(tree))
    np.testing.assert_array_equal(restored.leaf_assignment_, tree.leaf_assignment_)
    for a, b in zip(restored.cluster_chain_, tree.cluster_chain_):
        assert (a != b).nnz == 0
    for a, b in zip(restored.cluster_label_matrices(Y), tree.cluster_label_matrices(Y)):
        assert (a != b).nnz == 0


def test_save_load_round_trip(tmp_path):
    from skxmc.io import load

    X, Y = _toy_problem()
    names = [[f"tag{j}" for j in Y.indices[a:b]] for a, b in itertools.pairwise(Y.indptr)]
    tree = HierarchicalLabelTree(max_leaf_size=10, branching_factor=4).fit(X, names)
    loaded = load(tree.save(tmp_path / "tree"))
    assert loaded.get_params() == tree.get_params()
    np.testing.assert_array_equal(loaded.classes_, tree.classes_)
    np.testing.assert_array_equal(loaded.leaf_assignment_, tree.leaf_assignment_)
    assert (loaded.n_layers_, loaded.depth_, loaded.n_labels_) == (3, 4, tree.n_labels_)
    for a, b in zip(loaded.cluster_label_matrices(names), tree.cluster_label_matrices(names)):
        assert sp.isspmatrix_csr(a) and (a != b).nnz == 0
    # Precomputed embeddings as the parameter are saved as arrays too.
    E = _random_embeddings(30, seed=3)
    tree = HierarchicalLabelTree(label_embedding=E, max_leaf_size=4).fit(None)
    loaded = load(tree.save(tmp_path / "from_embeddings"))
    assert (loaded.label_embedding != E).nnz == 0
    np.testing.assert_array_equal(loaded.leaf_assignment_, tree.leaf_assignment_)


def test_verbose_logs_a_summary(caplog):
    X, Y = _toy_problem()
    with caplog.at_level("DEBUG", logger="skxmc.tree"):
        HierarchicalLabelTree(max_leaf_size=10, verbose=1).fit(X, Y)
    assert "label tree: 120 labels" in caplog.text


# --------------------------------------------------------------------------------------
# A real slice: Delicious (XC repository bag-of-words format)
# --------------------------------------------------------------------------------------
def _read_xc_slice(path: Path, n_rows: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """First ``n_rows`` rows of an XC-repository file: header, then ``l1,l2 f:v f:v``."""
    with open(path, encoding="utf-8") as f:
        _, n_features, n_labels = map(int, f.readline().split())
        rows, cols, vals, label_rows, label_cols = [], [], [], [], []
        for i, line in zip(range(n_rows), f):
            parts = line.rstrip("\n").split(" ")
            first = parts[0]
            if ":" in first:  # a row without labels starts directly with features
                feats = parts
            else:
                feats = parts[1:]
                for label in first.split(","):
                    if label:
                        label_rows.append(i)
                        label_cols.append(int(label))
            for item in feats:
                if item:
                    f_id, value = item.split(":")
                    rows.append(i)
                    cols.append(int(f_id))
                    vals.append(float(value))
    n = i + 1
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, n_features), dtype=np.float32)
    Y = sp.csr_matrix(
        (np.ones(len(label_rows), dtype=np.float32), (label_rows, label_cols)), shape=(n, n_labels)
    )
    return X, Y


def test_real_slice_delicious():
    path = _data_dir() / "delicious_bow" / "train.txt"
    if not path.exists():
        pytest.skip(f"data not found at {path} (set SKXMC_DATA)")
    X, Y = _read_xc_slice(path, 600)
    tree = HierarchicalLabelTree(max_leaf_size=16, branching_factor=4, n_jobs=2).fit(X, Y)
    L = Y.shape[1]
    assert tree.n_labels_ == L == 983  # labels without positives in the slice included
    assert [C.shape for C in tree.cluster_chain_] == [(4, 1), (16, 4), (64, 16), (L, 64)]
    _check_tree(tree.cluster_chain_, tree.leaf_assignment_, L, 16, 4)

    # Better than chance: labels in a leaf are closer (cosine) than in a random split.
    E = pifa_embeddings(X, Y).toarray()

    def cohesion(codes: np.ndarray) -> float:
        sums = np.zeros((codes.max() + 1, E.shape[1]))
        np.add.at(sums, codes, E)
        return float(np.linalg.norm(sums, axis=1).sum())

    random_codes = np.random.RandomState(0).permutation(tree.leaf_assignment_)
    assert cohesion(tree.leaf_assignment_) > 1.2 * cohesion(random_codes)
    # Leaf-level label matrix: every labelled sample has a positive leaf cluster.
    leaf_Y = tree.cluster_label_matrices(Y)[-2]
    has_label = Y.getnnz(axis=1) > 0
    np.testing.assert_array_equal(leaf_Y.getnnz(axis=1) > 0, has_label)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "scipy-below-min-work"])
@pytest.mark.parametrize("seed", range(8))
def test_sorted_product_matches_scipy(seed, kernel):
    from skxmc._sparse_product import sorted_product

    rng = np.random.default_rng(seed)
    m, n, d = (int(v) for v in rng.integers(1, 60, size=3))
    A = sp.random(m, n, density=0.3, format="csr", dtype=np.float32, random_state=seed)
    B = sp.random(n, d, density=0.3, format="csr", dtype=np.float32, random_state=seed + 50)
    B.data -= 0.5  # products that cancel: scipy drops entries that sum to zero
    B.data[::4] = 0.0
    if seed % 2:
        B.indptr, B.indices = B.indptr.astype(np.int64), B.indices.astype(np.int64)
    expected = sp.csr_matrix(A @ B, dtype=np.float32)
    expected.sort_indices()
    # these products are small: min_work=0 forces the threaded kernel
    got = sorted_product(A, B, n_jobs=1 + seed % 3, min_work=0 if kernel else 1 << 20)
    assert got.has_sorted_indices and got.dtype == np.float32
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.data, expected.data)  # same float32 sums, same order
