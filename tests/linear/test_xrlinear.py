"""XRLinearClassifier: accuracy on real data, contracts, robustness, persistence."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline

import skxmc
from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo, load_xc_bow
from skxmc.labels import encode_labels
from skxmc.linear import _beam
from skxmc.linear._beam import ChunkedWeights, beam_search
from skxmc.metrics import evaluate, make_topk_scorer, precision_at_k

from .._helpers import dataset_path


@pytest.fixture(scope="module")
def demo():
    data = load_demo()
    vec = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
    X_train = vec.fit_transform(data.train_texts[:3000])
    X_test = vec.transform(data.test_texts[:600])
    return X_train, data.train_labels[:3000], X_test, data.test_labels[:600]


@pytest.fixture(scope="module")
def bibtex(data_dir):
    X, Y = load_xc_bow(dataset_path(data_dir, "bibtex_bow", "train.txt"))
    Xt, Yt = load_xc_bow(dataset_path(data_dir, "bibtex_bow", "test.txt"))
    return X, Y, Xt[:800], Yt[:800]


@pytest.fixture(scope="module")
def fitted_demo(demo):
    X_train, Y_train, _, _ = demo
    small_tree = HierarchicalLabelTree(max_leaf_size=50, branching_factor=8)
    return XRLinearClassifier(tree=small_tree, n_jobs=2).fit(X_train, Y_train)


def test_real_data_beats_label_frequency(fitted_demo, demo):
    _, Y_train, X_test, Y_test = demo
    clf = fitted_demo
    labels, scores = clf.predict_topk(X_test, k=5)
    p1 = precision_at_k(Y_test, (labels, scores), k=1, classes=clf.classes_)
    # The most frequent training label as a constant prediction.
    Y_csr, classes = encode_labels(Y_train)
    top = classes[np.argmax(np.asarray(Y_csr.sum(axis=0)).ravel())]
    p1_const = np.mean([top in row for row in Y_test])
    assert p1 > max(0.12, 3 * p1_const)
    assert clf.score(X_test, Y_test) == pytest.approx(p1)
    assert clf.tree_.n_layers_ >= 2


def test_bibtex_close_to_flat_one_vs_rest(bibtex):
    X, Y, Xt, Yt = bibtex
    clf = XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)).fit(
        X, Y
    )
    flat = XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=1000)).fit(X, Y)
    assert flat.tree_.n_layers_ == 1
    p_tree = precision_at_k(Yt, clf.decision_function(Xt), k=1)
    p_flat = precision_at_k(Yt, flat.decision_function(Xt), k=1)
    assert p_flat > 0.5  # peers reach about 0.63 on the full test set
    assert p_tree > p_flat - 0.05


def test_scoring_strategies_agree_on_real_model(fitted_demo, demo, monkeypatch):
    X_test = demo[2].copy()
    X_test.sort_indices()  # beam_search's contract; the estimator sorts for its callers
    parents = fitted_demo._search_cache.parents
    results = []
    for dense_max in (0, 10**9):
        monkeypatch.setattr(_beam, "DENSE_LAYER_MAX_NODES", dense_max)
        chunks = [ChunkedWeights(W, P) for W, P in zip(fitted_demo.weights_, parents)]
        results.append(beam_search(X_test, chunks, parents, bias=1.0, beam_size=10, top_k=None))
    np.testing.assert_array_equal(results[0].indices, results[1].indices)
    np.testing.assert_allclose(results[0].data, results[1].data, rtol=1e-5, atol=1e-6)


def test_output_contracts(fitted_demo, demo):
    clf = fitted_demo
    X_test = demo[2][:50]
    L = len(clf.classes_)
    P = clf.predict(X_test)
    assert sp.isspmatrix_csr(P) and P.shape == (50, L)
    assert np.all(np.diff(P.indptr) == clf.top_k) and np.all(P.data == 1)
    D = clf.decision_function(X_test)
    assert sp.isspmatrix_csr(D) and D.shape == (50, L)
    assert np.all(np.diff(D.indptr) >= clf.top_k)
    proba = clf.predict_proba(X_test)
    assert proba.data.min() >= 0 and proba.data.max() <= 1
    labels, scores = clf.predict_topk(X_test, k=3)
    assert labels.shape == scores.shape == (50, 3)
    assert np.all(np.diff(scores, axis=1) <= 0)
    assert set(labels.ravel()) <= set(clf.classes_)
    # The top-k labels are the best entries of decision_function.
    for i in range(5):
        row = D[i]
        best = row.indices[np.lexsort((row.indices, -row.data))][:3]
        assert clf.classes_[best].tolist() == labels[i].tolist()


@pytest.mark.parametrize("dense_max", [0, 10_000], ids=["chunked-layers", "dense-layers"])
def test_beam_search_matches_dense_reference(monkeypatch, dense_max):
    # Both scoring strategies (per-parent chunks; a dense accumulator for small layers).
    monkeypatch.setattr(_beam, "DENSE_LAYER_MAX_NODES", dense_max)
    rng = np.random.default_rng(0)
    n, d, K1, L = 120, 40, 4, 20
    X = sp.random(n, d, density=0.15, format="csr", dtype=np.float32, random_state=0)
    X.sort_indices()  # beam_search expects sorted indices, as the estimator guarantees
    parent_of = rng.permutation(np.repeat(np.arange(K1), L // K1))
    P1 = sp.csr_matrix((np.ones(L, np.float32), (parent_of, np.arange(L))), shape=(K1, L))
    parents = [sp.csr_matrix(np.ones((1, K1), np.float32)), P1]
    W = [
        sp.random(d + 1, K1, density=0.5, format="csc", dtype=np.float32, random_state=1),
        sp.random(d + 1, L, density=0.5, format="csc", dtype=np.float32, random_state=2),
    ]
    chunks = [ChunkedWeights(w, p) for w, p in zip(W, parents)]
    out = beam_search(X, chunks, parents, bias=1.0, beam_size=2, top_k=3, n_jobs=2)
    Xa = np.hstack([X.toarray(), np.ones((n, 1))])
    path1 = np.exp(-(np.maximum(1 - Xa @ W[0].toarray(), 0) ** 3))
    raw2 = Xa @ W[1].toarray()
    for i in range(n):
        beam = np.lexsort((np.arange(K1), -path1[i]))[:2]
        cands = [c for c in range(L) if parent_of[c] in beam]
        score = {c: np.exp(-(max(1 - raw2[i, c], 0) ** 3)) * path1[i, parent_of[c]] for c in cands}
        top = sorted(cands, key=lambda c: (-score[c], c))[:3]
        got = out[i].indices.tolist()
        # Same best scores; labels may differ only between float32 near-ties.
        assert set(got) <= set(cands)
        np.testing.assert_allclose(sorted(out[i].data), sorted(score[c] for c in top), rtol=1e-5)
        np.testing.assert_allclose(out[i].data, [score[c] for c in got], rtol=1e-5)


def test_tfn_man_trains_on_more_rows_and_predicts(demo):
    X_train, Y_train, X_test, Y_test = demo
    tree = HierarchicalLabelTree(max_leaf_size=50, branching_factor=8)
    clf = XRLinearClassifier(tree=tree, negative_sampling="tfn+man", beam_size=4).fit(
        X_train, Y_train
    )
    assert clf.score(X_test, Y_test) > 0.1


@pytest.mark.parametrize("post_processor", ["l3-hinge", "sigmoid", "noop"])
@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_losses_and_post_processors(bibtex, loss, post_processor):
    X, Y, Xt, Yt = bibtex
    tree = HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)
    clf = XRLinearClassifier(tree=tree, loss=loss, post_processor=post_processor).fit(X, Y)
    # "noop" ranks by raw scores without the path product: weaker, as in PECOS.
    floor = 0.3 if post_processor == "noop" else 0.4
    assert precision_at_k(Yt, clf.predict_topk(Xt, k=5), k=1, classes=clf.classes_) > floor


def test_dense_features_give_same_model(bibtex):
    X, Y, Xt, _ = bibtex
    tree = HierarchicalLabelTree(max_leaf_size=40, branching_factor=4)
    a = XRLinearClassifier(tree=tree).fit(X[:1500], Y[:1500])
    b = XRLinearClassifier(tree=tree).fit(X[:1500].toarray(), Y[:1500])
    np.testing.assert_array_equal(a.predict_topk(Xt)[0], b.predict_topk(Xt.toarray())[0])


def test_deterministic_for_fixed_seed_and_n_jobs(bibtex):
    X, Y, Xt, _ = bibtex
    a = XRLinearClassifier(random_state=3, n_jobs=1).fit(X[:2000], Y[:2000])
    b = XRLinearClassifier(random_state=3, n_jobs=2).fit(X[:2000], Y[:2000])
    for Wa, Wb in zip(a.weights_, b.weights_):
        assert (Wa != Wb).nnz == 0
    np.testing.assert_array_equal(a.predict_topk(Xt)[1], b.predict_topk(Xt)[1])


def test_caller_matrix_not_modified(demo):
    X_train, Y_train, _, _ = demo
    X = X_train[:500].copy()
    X.has_sorted_indices = False  # as TfidfVectorizer leaves it
    before = (X.indices.copy(), X.data.copy())
    XRLinearClassifier().fit(X, Y_train[:500])
    np.testing.assert_array_equal(X.indices, before[0])
    np.testing.assert_array_equal(X.data, before[1])


# --- robustness ---------------------------------------------------------------------


def test_feature_width_mismatch(fitted_demo):
    with pytest.raises(ValueError, match="features"):
        fitted_demo.predict(sp.random(2, 7, format="csr", dtype=np.float32))


def test_empty_X_and_short_Y():
    with pytest.raises(ValueError, match="0 sample"):
        XRLinearClassifier().fit(sp.csr_matrix((0, 5), dtype=np.float32), [])
    with pytest.raises(ValueError, match="Y has 2 rows but X has 3 samples"):
        XRLinearClassifier().fit(sp.eye(3, format="csr"), [["a"], ["b"]])


def test_non_finite_features():
    X = sp.csr_matrix(np.array([[1.0, np.nan], [0.0, 1.0]], dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        XRLinearClassifier().fit(X, [["a"], ["b"]])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"beam_size": 0}, "beam_size"),
        ({"top_k": 0}, "top_k"),
        ({"Cp": -1.0}, "Cp"),
        ({"negative_sampling": "hard"}, "negative_sampling"),
        ({"post_processor": "softmax"}, "post_processor"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        XRLinearClassifier(**params).fit(sp.eye(3, format="csr"), [["a"], ["b"], ["a"]])


def test_top_k_above_label_count_is_clipped_with_warning():
    X = sp.csr_matrix(np.eye(4, dtype=np.float32))
    clf = XRLinearClassifier(top_k=10).fit(X, [["a"], ["b"], ["c"], ["a"]])
    with pytest.warns(UserWarning, match="exceeds the 3 labels"):
        labels, _ = clf.predict_topk(X)
    assert labels.shape == (4, 3)


def test_single_label_and_labels_without_positives():
    X = sp.csr_matrix(np.random.default_rng(0).random((30, 6)).astype(np.float32))
    clf = XRLinearClassifier(top_k=1).fit(X, [["only"]] * 30)
    assert clf.predict_topk(X)[0].ravel().tolist() == ["only"] * 30
    Y = np.zeros((30, 4), dtype=np.float32)
    Y[:15, 0] = 1
    Y[15:, 1] = 1  # labels 2 and 3 never positive
    clf = XRLinearClassifier(top_k=2).fit(X, Y)
    assert clf.predict(X).shape == (30, 4)


def test_one_layer_tree_when_few_labels(bibtex):
    X, Y, Xt, Yt = bibtex
    clf = XRLinearClassifier().fit(X[:1000], Y[:1000])  # 159 labels > 100: two layers
    assert clf.tree_.n_layers_ == 2
    clf = XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=500)).fit(X[:1000], Y[:1000])
    assert clf.tree_.n_layers_ == 1
    assert clf.score(Xt, Yt) > 0.3


def test_y_without_any_label():
    with pytest.raises(ValueError, match="Y has no labels"):
        XRLinearClassifier().fit(sp.eye(2, format="csr"), [[], []])


# --- sklearn integration -------------------------------------------------------------


def test_pipeline_on_raw_text_and_grid_search():
    data = load_demo()
    texts, labels = data.train_texts[:900], data.train_labels[:900]
    pipe = make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
        XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=50, branching_factor=8)),
    )
    search = GridSearchCV(
        pipe,
        {"xrlinearclassifier__Cp": [1.0, 4.0]},
        scoring=make_topk_scorer("precision", k=5),
        cv=KFold(2, shuffle=True, random_state=0),
        error_score="raise",
    )
    search.fit(texts, labels)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_estimator_.score(data.test_texts[:200], data.test_labels[:200]) >= 0


def test_grid_search_with_csr_labels(bibtex):
    X, Y, _, _ = bibtex
    search = GridSearchCV(
        XRLinearClassifier(),
        {"beam_size": [1, 10]},
        scoring=make_topk_scorer("precision", k=5),
        cv=3,
        error_score="raise",
    )
    search.fit(X[:1500], Y[:1500])
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] >= scores[0] - 1e-9  # a wider beam never hurts much here
    assert scores[1] > 0.1  # P@5; peers reach 0.28 trained on all 4,880 samples


def test_clone_pickle_and_save_load(fitted_demo, demo, tmp_path):
    clf = fitted_demo
    X_test = demo[2]
    expected = clf.predict_topk(X_test)
    cloned = clone(clf)
    assert cloned.get_params()["beam_size"] == clf.beam_size and not hasattr(cloned, "weights_")
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_topk(X_test)[0], expected[0])
    path = clf.save(tmp_path / "model")
    loaded = skxmc.load(path)
    assert isinstance(loaded, XRLinearClassifier)
    np.testing.assert_array_equal(loaded.predict_topk(X_test)[0], expected[0])
    np.testing.assert_array_equal(loaded.predict_topk(X_test)[1], expected[1])
    assert loaded.get_params()["tree"].get_params() == clf.get_params()["tree"].get_params()


def test_save_never_clobbers_user_files(fitted_demo, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="holds no skxmc model"):
        fitted_demo.save(folder)
    assert (folder / "notes.txt").read_text() == "precious"
    target = fitted_demo.save(tmp_path / "model")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        fitted_demo.save(target)
    fitted_demo.save(target, overwrite=True)
    assert skxmc.load(target).top_k == fitted_demo.top_k


def test_save_unfitted_raises(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        XRLinearClassifier().save(tmp_path / "x")


def test_evaluate_works_on_predictions(fitted_demo, demo):
    out = evaluate(demo[3], fitted_demo.predict_topk(demo[2]), classes=fitted_demo.classes_)
    assert 0 < out["precision@1"] <= 1


def test_relevance_weighted_positives(bibtex):
    X, Y, Xt, Yt = bibtex
    tree = HierarchicalLabelTree(max_leaf_size=20, branching_factor=4)
    plain = XRLinearClassifier(tree=tree).fit(X, Y)
    weighted = XRLinearClassifier(tree=tree, relevance_weighted=True).fit(X, Y)
    # Inner layers differ (costs scale with relevance), the leaf layer is 0/1 in both.
    assert any((a != b).nnz for a, b in zip(plain.weights_[:-1], weighted.weights_[:-1]))
    assert weighted.score(Xt, Yt) > 0.4


def test_relevance_targets_are_normalised_counts():
    from skxmc.linear._xrlinear import _relevance_targets

    Y = sp.csr_matrix(np.array([[1, 1, 0, 1], [0, 0, 1, 0]], dtype=np.float32))
    leaf = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32))
    root = sp.csr_matrix(np.ones((2, 1), dtype=np.float32))
    top, bottom = _relevance_targets(Y, [root, leaf])
    np.testing.assert_allclose(top.toarray(), [[1.0, 0.5], [0.0, 1.0]])
    np.testing.assert_array_equal(bottom.toarray(), Y.toarray())


def _naive_chunked_layout(W: sp.csc_matrix, parents: sp.csr_matrix) -> dict:
    """The ChunkedWeights arrays from their definition: per parent one block of the sorted
    features its children use, their entry offsets, then per such feature its (child
    position, weight bits) entries in child order."""
    W = sp.csc_matrix(W)
    blocks, block_start, feat_count = [], [0], []
    for p in range(parents.shape[0]):
        kids = parents.indices[parents.indptr[p] : parents.indptr[p + 1]]
        entries = {}
        for local, c in enumerate(kids):
            for q in range(W.indptr[c], W.indptr[c + 1]):
                entries.setdefault(int(W.indices[q]), []).append((local, W.data[q]))
        features = sorted(entries)
        offsets = np.cumsum([0] + [len(entries[f]) for f in features]).tolist()
        words = [
            w
            for f in features
            for local, v in entries[f]
            for w in (local, int(np.float32(v).view(np.int32)))
        ]
        blocks += features + offsets + words
        feat_count.append(len(features))
        block_start.append(len(blocks))
    return {
        "blocks": np.asarray(blocks, dtype=np.int32),
        "block_start": np.asarray(block_start, dtype=np.int64),
        "feat_count": np.asarray(feat_count, dtype=np.int64),
    }


@pytest.mark.parametrize("seed", range(6))
def test_chunked_layout_matches_naive_definition(seed):
    rng = np.random.default_rng(seed)
    n_features, n_parents = int(rng.integers(1, 60)), int(rng.integers(1, 8))
    n_nodes = int(rng.integers(n_parents, 40))
    parent_of = np.concatenate([np.arange(n_parents), rng.integers(0, n_parents, n_nodes)])
    parent_of = rng.permutation(parent_of[:n_nodes])
    parents = sp.csr_matrix(
        (np.ones(n_nodes, np.float32), (parent_of, np.arange(n_nodes))), shape=(n_parents, n_nodes)
    )
    parents.sort_indices()
    W = sp.random(
        n_features, n_nodes, density=0.3, format="csc", dtype=np.float32, random_state=seed
    )
    if seed % 2:  # scipy's int64 index arrays take the same path
        W.indptr, W.indices = W.indptr.astype(np.int64), W.indices.astype(np.int64)
    chunks = ChunkedWeights(W, parents, dense=False)
    for name, expected in _naive_chunked_layout(W, parents).items():
        got = getattr(chunks, name)
        assert got.dtype == expected.dtype, name
        np.testing.assert_array_equal(got, expected, err_msg=name)


def test_each_layer_keeps_one_search_form(monkeypatch):
    # a small layer keeps its feature-major copy and no blocks, a large one the reverse;
    # the copy cannot score without the expanded candidates
    from skxmc.linear._beam import score_candidates

    monkeypatch.setattr(_beam, "DENSE_LAYER_MAX_NODES", 5)
    W = sp.random(9, 6, density=0.5, format="csc", dtype=np.float32, random_state=0)
    parents = sp.csr_matrix(np.kron(np.eye(2), np.ones((1, 3))), dtype=np.float32)
    large = ChunkedWeights(W, parents)
    assert large.feature_major is None and large.blocks is not None
    small = ChunkedWeights(W, parents, dense=True)
    assert small.blocks is None and small.feature_major.nnz == W.nnz
    X = sp.random(4, 8, density=0.5, format="csr", dtype=np.float32, random_state=1)
    path = sp.csr_matrix(np.ones((4, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="needs the candidates"):
        score_candidates(X, path, small, 24, bias=1.0)
    np.testing.assert_allclose(
        score_candidates(X, path, large, 24, bias=1.0),
        (sp.hstack([X, np.ones((4, 1))]) @ W).toarray().ravel(),
        rtol=1e-6,
    )


@pytest.mark.parametrize("dense", [True, False], ids=["feature-major", "blocks"])
@pytest.mark.parametrize("post_processor", ["l3-hinge", "sigmoid", "noop"])
def test_score_candidates_applies_the_post_processor(dense, post_processor):
    # the kernels combine each child's linear score with its beam entry's path score in
    # the scoring pass: check against the definitions in float64, with unequal path scores
    from skxmc.linear._beam import expand_children, score_candidates

    rng = np.random.default_rng(3)
    W = sp.random(9, 6, density=0.6, format="csc", dtype=np.float32, random_state=0)
    W.data = (W.data * 4 - 2).astype(np.float32)  # raw scores on both sides of 1
    parents = sp.csr_matrix(np.kron(np.eye(2), np.ones((1, 3))), dtype=np.float32)
    chunks = ChunkedWeights(W, parents, dense=dense)
    X = sp.random(5, 8, density=0.5, format="csr", dtype=np.float32, random_state=1)
    path = sp.csr_matrix(rng.uniform(0.1, 1, size=(5, 2)).astype(np.float32))
    path.data[3] = 0.0  # stored: a parent whose path score underflowed keeps its children
    candidates = expand_children(path, parents)
    got = score_candidates(
        X,
        path,
        chunks,
        candidates.nnz,
        bias=1.0,
        candidates=candidates,
        post_processor=post_processor,
        n_jobs=2,
    )
    raw = (sp.hstack([X, np.ones((5, 1))]).toarray() @ W.toarray()).astype(np.float64)
    rows = np.repeat(np.arange(5), np.diff(candidates.indptr))
    v = raw[rows, candidates.indices]
    parent_score = candidates.data.astype(np.float64)
    expected = {
        "l3-hinge": np.exp(-(np.maximum(1 - v, 0) ** 3)) * parent_score,
        "sigmoid": parent_score / (1 + np.exp(-v)),
        "noop": v,
    }[post_processor]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)
    with pytest.raises(ValueError, match="post_processor must be one of"):
        score_candidates(
            X, path, chunks, candidates.nnz, bias=1.0, candidates=candidates, post_processor="relu"
        )


@pytest.mark.parametrize("k", [1, 3, 50])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_keep_topk_matches_a_naive_ranking(k, n_jobs):
    # best first, ties to the lower column, rows with fewer than k entries kept whole
    from skxmc.linear._beam import keep_topk

    S = sp.random(40, 30, density=0.3, format="csr", dtype=np.float32, random_state=2)
    S.data = np.round(S.data * 4).astype(np.float32)  # many ties
    S = S.tolil()
    S[5, :] = 0  # an empty row
    S = S.tocsr()
    S.eliminate_zeros()
    out = keep_topk(S, k, n_jobs=n_jobs)
    assert out.shape == S.shape and out.dtype == np.float32
    for i in range(S.shape[0]):
        row = S[i]
        order = np.lexsort((row.indices, -row.data))[:k]
        assert out[i].indices.tolist() == row.indices[order].tolist()
        np.testing.assert_array_equal(out[i].data, row.data[order])


def test_prediction_blocks_follow_the_candidate_budget(fitted_demo, demo, monkeypatch):
    from skxmc.linear import _xrlinear

    X_test = demo[2][:300]
    expected = fitted_demo.predict_topk(X_test)
    parents = fitted_demo._search_cache.parents
    widest = max(int(np.diff(P.indptr).max()) for P in parents)
    monkeypatch.setattr(_xrlinear, "_PREDICT_BLOCK_CANDIDATES", 7 * fitted_demo.beam_size * widest)
    assert _xrlinear._block_rows(parents, fitted_demo.beam_size) == 7
    calls = []
    search = _xrlinear.beam_search
    monkeypatch.setattr(
        _xrlinear,
        "beam_search",
        lambda Xb, *a, **k: calls.append(Xb.shape[0]) or search(Xb, *a, **k),
    )
    got = fitted_demo.predict_topk(X_test)
    assert max(calls) == 7 and sum(calls) == 300
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
