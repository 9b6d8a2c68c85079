"""Top-k stochastic negative mining: the samplers (skxmc.losses._snm) and SNMClassifier."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import normalize

import skxmc
from skxmc import SNMClassifier
from skxmc.datasets import load_xc_bow
from skxmc.losses import (
    pad_positives,
    sample_negatives,
    sample_shared_negatives,
    top_k_negatives,
)
from skxmc.metrics import make_topk_scorer, precision_at_k
from skxmc.text import TrainingConfig

from ._helpers import dataset_path, plain_params, with_training


def _random_positives(rng, n, n_labels, max_pos):
    rows = [
        rng.choice(n_labels, size=rng.integers(0, max_pos + 1), replace=False) for _ in range(n)
    ]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.concatenate(rows) if rows else np.array([], dtype=np.int64)
    Y = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(n, n_labels))
    return Y, rows


# Samplers -----------------------------------------------------------------------------


@pytest.mark.parametrize("replace", [True, False, "auto"])
def test_sample_negatives_excludes_positives(replace):
    rng = np.random.default_rng(0)
    Y, rows = _random_positives(rng, 50, 30, 8)
    g = torch.Generator().manual_seed(0)
    neg = sample_negatives(Y, 30, 12, replace=replace, generator=g)
    assert neg.shape == (50, 12) and neg.dtype == torch.long
    for i, pos in enumerate(rows):
        drawn = neg[i].tolist()
        assert all(0 <= v < 30 for v in drawn)
        assert not set(drawn) & set(pos.tolist())
        if replace is False:
            assert len(set(drawn)) == 12  # 30 - 8 >= 12 negatives: all distinct


def test_sample_negatives_uniform_over_negatives():
    # Row positives {1, 4, 5}; 7 negatives of 10 labels, each drawn with frequency 1/7.
    Y = sp.csr_matrix((np.ones(3), [5, 1, 4], [0, 3]), shape=(1, 10))
    for replace in (True, False):
        g = torch.Generator().manual_seed(1)
        counts = np.zeros(10)
        for _ in range(3000):
            counts += np.bincount(
                sample_negatives(Y, 10, 3, replace=replace, generator=g)[0].numpy(), minlength=10
            )
        assert counts[[1, 4, 5]].sum() == 0
        freq = counts[[0, 2, 3, 6, 7, 8, 9]] / counts.sum()
        np.testing.assert_allclose(freq, 1 / 7, atol=0.02)


def test_sample_negatives_edge_rows():
    # A row with fewer negatives than B (filled by repeats) and a row that is all positives.
    Y = sp.csr_matrix(np.array([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]]))
    for replace in (True, False):
        neg = sample_negatives(Y, 4, 5, replace=replace, generator=torch.Generator().manual_seed(0))
        assert neg[0].tolist() == [3] * 5
        assert neg[1].tolist() == [-1] * 5
        assert set(neg[2].tolist()) <= {0, 1, 2, 3}
        if replace is False:
            assert set(neg[2].tolist()) == {0, 1, 2, 3}


def test_sample_negatives_accepts_csr_arrays_and_tensors():
    indptr, indices = np.array([0, 2, 3]), np.array([3, 0, 2])
    g = torch.Generator().manual_seed(0)
    a = sample_negatives((indptr, indices), 6, 4, generator=g)
    b = sample_negatives(
        (torch.tensor(indptr), torch.tensor(indices)),
        6,
        4,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.equal(a, b)
    assert not set(a[0].tolist()) & {0, 3} and 2 not in a[1].tolist()


def test_sample_negatives_is_seeded():
    Y, _ = _random_positives(np.random.default_rng(0), 20, 100, 5)
    a = sample_negatives(Y, 100, 7, generator=torch.Generator().manual_seed(3))
    b = sample_negatives(Y, 100, 7, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_sampler_argument_errors():
    Y = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="n_sampled"):
        sample_negatives(Y, 3, 0)
    with pytest.raises(ValueError, match="n_labels"):
        sample_shared_negatives(Y, 0, 2)
    with pytest.raises(ValueError, match=r"in \[0, 2\)"):
        sample_negatives(Y, 2, 1)
    with pytest.raises(ValueError, match="replace"):
        sample_negatives(Y, 3, 1, replace="yes")
    with pytest.raises(ValueError, match="CSR"):
        sample_negatives((np.array([0, 5]), np.array([1])), 3, 1)
    with pytest.raises(TypeError, match="positives"):
        sample_negatives([[0, 1]], 3, 1)


def test_shared_pool_and_mask():
    rng = np.random.default_rng(2)
    Y, rows = _random_positives(rng, 40, 500, 10)
    cand, is_pos = sample_shared_negatives(Y, 500, 64, generator=torch.Generator().manual_seed(0))
    assert cand.shape == (64,) and len(set(cand.tolist())) == 64
    assert is_pos.shape == (40, 64)
    for i, pos in enumerate(rows):
        assert set(cand[is_pos[i]].tolist()) == set(pos.tolist()) & set(cand.tolist())
    cand, is_pos = sample_shared_negatives(Y, 500, 5000)
    assert sorted(cand.tolist()) == list(range(500))  # B >= L: every label
    assert is_pos.sum().item() == Y.nnz


def test_pad_positives_dedupes():
    padded, counts = pad_positives((np.array([0, 3, 3]), np.array([2, 2, 0])), 4)
    assert padded.tolist() == [[0, 2], [4, 4]] and counts.tolist() == [2, 0]


def test_top_k_negatives_respects_k_and_exclusions():
    torch.manual_seed(0)
    scores = torch.randn(8, 20, requires_grad=True)
    cand = torch.randint(0, 1000, (8, 20))
    cand[0, :18] = -1  # row 0 has 2 candidates only
    exclude = torch.zeros(8, 20, dtype=torch.bool)
    exclude[1, scores[1].argmax()] = True
    mined = top_k_negatives(scores, cand, 3, exclude=exclude)
    assert mined.scores.shape == mined.labels.shape == mined.mask.shape == (8, 3)
    assert mined.mask[0].tolist() == [True, True, False] and mined.labels[0, 2] == -1
    assert mined.labels[1, 0] != cand[1, scores[1].argmax()]
    for i in range(2, 8):
        expected = torch.topk(scores[i].detach(), 3).values
        assert torch.equal(mined.scores[i].detach(), expected)
    mined.scores[mined.mask].sum().backward()  # gradients reach the selected scores only
    assert int((scores.grad != 0).sum()) == int(mined.mask.sum())
    shared = top_k_negatives(scores.detach(), torch.arange(20), 25)
    assert shared.labels.shape == (8, 20)  # k > b keeps b
    with pytest.raises(ValueError, match="k must be"):
        top_k_negatives(scores, cand, 0)


# SNMClassifier -------------------------------------------------------------------------


def _toy(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10)).astype(np.float32)
    labels = [[int(x[0] > 0), 2 + int(x[1] > 0), 4 + int(x[2] > 0)] for x in X]
    return X, labels


def _snm(**params):
    return SNMClassifier(**with_training(**params))


FAST = dict(
    hidden_size=32,
    embedding_size=16,
    max_epochs=15,
    batch_size=32,
    n_sampled=4,
    device="cpu",
    random_state=0,
)


@pytest.fixture(scope="module")
def bibtex(data_dir):
    Xtr, Ytr = load_xc_bow(dataset_path(data_dir, "bibtex_bow", "train.txt"))
    Xte, Yte = load_xc_bow(dataset_path(data_dir, "bibtex_bow", "test.txt"))
    return normalize(Xtr).astype(np.float32), Ytr, normalize(Xte).astype(np.float32), Yte


def test_learns_bibtex_better_than_chance(bibtex):
    Xtr, Ytr, Xte, Yte = bibtex
    clf = SNMClassifier(
        hidden_size=128,
        embedding_size=64,
        n_sampled=64,
        training=TrainingConfig(max_epochs=4, device="cpu", random_state=0),
    ).fit(Xtr[:2000], Ytr[:2000])
    assert clf.sparse_input_ and clf.n_sampled_ == 64
    p1 = clf.score(Xte, Yte)
    # Chance: the most frequent label's share of test rows is about 0.15 on bibtex.
    top_label_share = np.asarray(Yte.sum(axis=0)).max() / Yte.shape[0]
    assert p1 > top_label_share + 0.1, (p1, top_label_share)
    pred = clf.predict(Xte[:5])
    assert sp.isspmatrix_csr(pred) and pred.shape == (5, Ytr.shape[1])
    assert (np.diff(pred.indptr) == clf.top_k).all()


@pytest.mark.parametrize("negative_sampling", ["snm", "uniform"])
@pytest.mark.parametrize("loss", ["bowl", "powl"])
def test_fits_toy_problem(negative_sampling, loss):
    X, labels = _toy()
    clf = _snm(negative_sampling=negative_sampling, loss=loss, top_k=3, **FAST)
    clf.fit(X, labels)
    assert clf.score(X, labels) > 0.8
    assert len(clf.loss_curve_) == clf.n_steps_ == 15 * 8 and clf.n_iter_ == 15
    top, scores = clf.predict_topk(X[:4])
    assert top.shape == scores.shape == (4, 3)
    assert np.all(np.diff(scores, axis=1) <= 0) and np.all(np.abs(scores) <= 1 + 1e-5)


def test_sparse_and_dense_input_string_labels():
    X, labels = _toy()
    names = np.array(["a", "b", "c", "d", "e", "f"])
    str_labels = [[names[i] for i in row] for row in labels]
    clf = _snm(top_k=2, **FAST).fit(sp.csr_matrix(X), str_labels)
    assert clf.sparse_input_ and list(clf.classes_) == list(names)
    assert clf.score(sp.csr_matrix(X), str_labels) > 0.7
    dense = clf.predict_topk(X[:10])[0]  # dense input to a sparse-trained model
    np.testing.assert_array_equal(dense, clf.predict_topk(sp.csr_matrix(X[:10]))[0])
    assert dense.dtype.kind in "UO"


def test_decision_function_csr_matches_topk():
    X, labels = _toy()
    clf = _snm(top_k=2, **FAST).fit(X, labels)
    D = clf.decision_function(X[:6])
    _idx, scores = clf.predict_topk(X[:6])
    assert sp.isspmatrix_csr(D) and D.shape == (6, 6) and D.nnz == 12
    for i in range(6):
        row = D[i].toarray().ravel()
        np.testing.assert_allclose(np.sort(row[row != 0])[::-1], scores[i], rtol=1e-6)


def test_chunked_prediction_matches_full_product(monkeypatch):
    import skxmc._search as search_module
    import skxmc.snm as snm_module

    X, labels = _toy()
    clf = _snm(top_k=3, **FAST).fit(X, labels)
    full = clf.predict_topk(X)
    monkeypatch.setattr(search_module, "_SCORE_BLOCK", 12)  # 1 query per score block
    monkeypatch.setattr(snm_module, "_EMBED_ROWS", 7)  # 7 rows per forward pass
    chunked = clf.predict_topk(X)
    np.testing.assert_array_equal(full[0], chunked[0])
    np.testing.assert_allclose(full[1], chunked[1], rtol=1e-5, atol=1e-6)


def test_label_init_centroid_points_class_vectors_at_their_examples():
    X, labels = _toy()
    Y = np.zeros((len(X), 7), dtype=np.float32)  # class 6 has no example
    for i, row in enumerate(labels):
        Y[i, row] = 1
    frozen = dict(FAST, max_epochs=1, learning_rate=1e-12, label_learning_rate=1e-12)
    by_init = {init: _snm(label_init=init, **frozen).fit(X, Y) for init in ("centroid", "random")}
    for init, clf in by_init.items():
        with torch.no_grad():
            H = clf.module_.embed((torch.from_numpy(X),)).numpy()
            V = clf.module_.label_vectors().numpy()
        centroids = normalize(Y.T[:6] @ H)
        cosines = np.sum(centroids * V[:6], axis=1)
        if init == "centroid":
            np.testing.assert_allclose(cosines, 1.0, atol=1e-4)
        else:
            assert np.all(cosines < 0.9), cosines
    # The class without examples keeps its random starting vector.
    np.testing.assert_allclose(
        by_init["centroid"].module_.labels.weight[6].detach(),
        by_init["random"].module_.labels.weight[6].detach(),
    )


def test_reproducible_with_random_state():
    X, labels = _toy()
    a = _snm(top_k=3, **FAST).fit(X, labels)
    b = _snm(top_k=3, **FAST).fit(X, labels)
    assert a.loss_curve_ == b.loss_curve_
    np.testing.assert_array_equal(a.predict_topk(X)[1], b.predict_topk(X)[1])


def test_clone_pickle_save_load(tmp_path):
    X, labels = _toy()
    clf = _snm(top_k=3, **FAST).fit(sp.csr_matrix(X), labels)
    assert plain_params(clone(clf)) == plain_params(clf) and not hasattr(clone(clf), "module_")
    expected = clf.predict_topk(X)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_topk(X)[1], expected[1])
    clf.save(tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").is_file()
    loaded = skxmc.load(tmp_path / "model")
    assert isinstance(loaded, SNMClassifier) and plain_params(loaded) == plain_params(clf)
    np.testing.assert_array_equal(loaded.predict_topk(X)[0], expected[0])
    np.testing.assert_array_equal(loaded.predict_topk(X)[1], expected[1])
    assert (loaded.predict(X) != clf.predict(X)).nnz == 0


def test_grid_search_with_topk_scorer():
    X, labels = _toy(n=160)
    Y = sp.csr_matrix(np.array([[int(j in row) for j in range(6)] for row in labels]))
    search = GridSearchCV(
        _snm(**{**FAST, "max_epochs": 3}),
        {"negative_sampling": ["snm", "uniform"]},
        cv=2,
        scoring=make_topk_scorer("precision", k=3),
        error_score="raise",
    )
    search.fit(X, Y)
    assert set(search.cv_results_["param_negative_sampling"]) == {"snm", "uniform"}
    assert 0 <= search.best_score_ <= 1


def test_unseen_test_labels_count_as_misses():
    X, labels = _toy()
    clf = _snm(**FAST).fit(X, labels)
    assert clf.score(X[:5], [[99]] * 5) == 0.0
    assert precision_at_k(
        [[99], [0]], clf.predict_topk(X[:2], k=6), k=6, classes=clf.classes_
    ) == pytest.approx(1 / 12)


def test_bad_input_errors():
    X, labels = _toy(n=40)
    with pytest.raises(ValueError, match="n_hard_negatives=5 exceeds n_sampled=4"):
        _snm(**{**FAST, "n_hard_negatives": 5}).fit(X, labels)
    with pytest.raises(ValueError, match="n_sampled"):
        SNMClassifier(n_sampled=0).fit(X, labels)
    with pytest.raises(ValueError, match="negative_sampling"):
        SNMClassifier(negative_sampling="hard").fit(X, labels)
    with pytest.raises(ValueError, match="margin"):
        SNMClassifier(margin="huber").fit(X, labels)
    with pytest.raises(ValueError, match="0 sample"):
        _snm(**FAST).fit(X[:0], [])
    with pytest.raises(ValueError, match="Y has no labels"):
        _snm(**FAST).fit(X, [[] for _ in range(40)])
    with pytest.raises(ValueError, match="NaN|infinity"):
        bad = X.copy()
        bad[0, 0] = np.nan
        _snm(**FAST).fit(bad, labels)
    clf = _snm(**{**FAST, "max_epochs": 1}).fit(X, labels)
    with pytest.raises(ValueError, match="X has 3 features"):
        clf.predict(X[:, :3])
    with pytest.raises(ValueError, match="k must be a positive integer"):
        clf.predict_topk(X, k=0)
    with pytest.warns(UserWarning, match="exceeds the 6 labels"):
        assert clf.predict_topk(X[:2], k=50)[0].shape == (2, 6)
    with pytest.raises(ValueError, match="sample_weight"):
        clf.score(X, labels, sample_weight=-np.ones(40))


def test_import_skxmc_does_not_import_torch_for_snm():
    import subprocess
    import sys

    code = (
        "import sys, skxmc; print('torch' in sys.modules); skxmc.SNMClassifier; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_paper_negative_weight_is_not_ignored():
    # 6 labels, B=4 candidates: the paper's weight is (6 - 1) / (1 * 4) = 1.25 per hardest
    # negative instead of 1; the switch must change what is learned from the same batches.
    X, labels = _toy()
    mean = _snm(**FAST).fit(X, labels)
    paper = _snm(negative_weight="paper", **FAST).fit(X, labels)
    assert mean.loss_curve_ != paper.loss_curve_
    assert not torch.equal(mean.module_.labels.weight, paper.module_.labels.weight)


# The paper's top-k SNM weights and the ablation switches ------------------------------------


def _paper_snm_loss(v_pos, sampled_neg, k, n_classes, n_sampled):
    """Reddi et al. (2019), BOWL hinge with top-k SNM, in float64: phi(v_y) plus
    (K - 1) / (k B) times phi(-v) of each of the k highest sampled negatives."""
    phi = lambda u: max(1.0 - u, 0.0)  # noqa: E731
    hardest = sorted(sampled_neg, reverse=True)[:k]
    return phi(v_pos) + sum((n_classes - 1) / (k * n_sampled) * phi(-v) for v in hardest)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_paper_top_k_weights_against_a_naive_float64_loss(k):
    from itertools import combinations

    from skxmc.losses import ordered_weighted_loss, top_k_weights

    # K = 7 classes, class 0 positive, B = 3 of the 6 negatives sampled: every draw.
    rng = np.random.default_rng(0)
    v = rng.uniform(-1, 1, size=7)
    n_classes, B = 7, 3
    theta = top_k_weights(k, n_classes=n_classes, n_sampled=B, dtype=torch.float64)
    losses = []
    for sample in combinations(range(1, 7), B):
        scores = torch.tensor([[v[0], *v[list(sample)]]], dtype=torch.float64)
        targets = torch.tensor([[True] + [False] * B])
        got = ordered_weighted_loss(scores, targets, weights=theta, margin="hinge", form="bowl")
        want = _paper_snm_loss(v[0], v[list(sample)], k, n_classes, B)
        assert float(got) == pytest.approx(want, rel=1e-12)
        losses.append(want)
    # In expectation over the draws, top-k SNM is a BOWL over all K - 1 negatives whose
    # i-th highest negative weighs theta_i = (K - 1) / (k B) * P(it is drawn and ranks
    # <= k among the B drawn). The paper: ||theta||_1 = (K - 1) / B; and the hardest
    # negative weighs theta_1 = 1 / k, the weights of the paper's calibration condition.
    from math import comb

    n_neg = n_classes - 1
    c = (n_classes - 1) / (k * B)
    theta_full = [
        c
        * sum(comb(i - 1, r - 1) * comb(n_neg - i, B - r) for r in range(1, k + 1))
        / comb(n_neg, B)
        for i in range(1, n_neg + 1)
    ]
    assert sum(theta_full) == pytest.approx(n_neg / B, rel=1e-12)
    assert theta_full[0] == pytest.approx(1 / k, rel=1e-12)
    ranked = sorted(v[1:], reverse=True)
    expected = max(1 - v[0], 0) + sum(t * max(1 + u, 0) for t, u in zip(theta_full, ranked))
    assert np.mean(losses) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"negative_weight": "paper"}, (6 - 1) / (1 * 4)),
        ({"negative_weight": "paper", "n_hard_negatives": 2}, (6 - 1) / (2 * 4)),
        ({"negative_weight": "paper", "n_sampled": 10}, (6 - 1) / (1 * 6)),  # B capped at L
        ({"negative_weight": "mean", "n_hard_negatives": 2}, 1 / 2),
        ({"negative_sampling": "uniform"}, None),
    ],
)
def test_estimator_passes_the_chosen_weights_to_the_loss(monkeypatch, params, expected):
    import skxmc.snm as mod

    seen = []
    original = mod.ordered_weighted_loss

    def spy(scores, targets, **kwargs):
        seen.append(kwargs)
        return original(scores, targets, **kwargs)

    monkeypatch.setattr(mod, "ordered_weighted_loss", spy)
    X, labels = _toy()  # 6 labels
    clf = _snm(**{**FAST, "max_epochs": 1, **params}).fit(X, labels)
    assert seen and len(seen) == clf.n_steps_
    weights = seen[0]["weights"]
    if expected is None:
        assert weights is None
    else:
        k = clf.n_hard_negatives
        np.testing.assert_allclose(weights.numpy(), np.full(k, expected), rtol=1e-6)
    assert seen[0]["form"] == "bowl" and seen[0]["margin"] == "hinge"


def _non_default_negative_weight():
    return "mean" if SNMClassifier().negative_weight == "paper" else "paper"


@pytest.mark.parametrize(
    "switch",
    [
        {"negative_sampling": "uniform"},
        {"negative_weight": _non_default_negative_weight()},
        {"n_hard_negatives": 2},
        {"n_sampled": 3},
        {"loss": "powl"},
        {"margin": "squared_hinge"},
        {"scale": 2.0},
        {"label_init": "random"},
    ],
)
def test_each_switch_changes_the_first_step(switch):
    # Same seed: same initial network, first batch and candidate pool; the loss of that
    # first step must change with the switch (it would not if the switch were ignored).
    X, labels = _toy()
    params = {**FAST, "max_epochs": 1}
    default = _snm(**params).fit(X, labels)
    assert _snm(**params).fit(X, labels).loss_curve_[0] == default.loss_curve_[0]
    switched = _snm(**{**params, **switch}).fit(X, labels)
    assert switched.loss_curve_[0] != pytest.approx(default.loss_curve_[0], rel=1e-6)
