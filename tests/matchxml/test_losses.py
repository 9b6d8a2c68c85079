"""MatchXML's equations against naive float64 loops: the matching loss (eqs. 4-6), the
weighted squared hinge, the stage candidates (TFN + MAN), the label-table bootstraps and
the refined tree's label embeddings. No encoder is trained here (fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from skxmc import MultiStageMatcher
from skxmc.losses import text_label_matching_loss, weighted_squared_hinge
from skxmc.losses._matching import candidate_scores
from skxmc.matchxml import linear_bootstrap, refined_label_embeddings

# ---------------------------------------------------------------- naive references


def naive_tl(z, cand_emb, mask, targets, tau):
    """Eq. 4 written as a loop: L_tl = 1/N_b sum_i 1/|P1(i)| sum_{p in P1(i)}
    -log(exp(z_i.e_p / tau) / sum_{a in A1(i)} exp(z_i.e_a / tau)), N_b the batch size.
    A text with no positive (P1(i) empty) has an empty inner sum: it adds 0 and still
    counts in N_b."""
    N_b = z.shape[0]
    total = 0.0
    for i in range(N_b):
        A1 = [m for m in range(mask.shape[1]) if mask[i, m]]
        P1 = [m for m in A1 if targets[i, m]]
        if not P1:
            continue  # 1/|P1(i)| * (empty sum) = 0
        denom = sum(torch.exp(z[i] @ cand_emb[i, a] / tau) for a in A1)
        inner = sum(-torch.log(torch.exp(z[i] @ cand_emb[i, p] / tau) / denom) for p in P1)
        total = total + inner / len(P1)
    return total / N_b


def naive_lt(z, batch_labels, label_targets, tau):
    """Eq. 5 as a loop: for each positive label j of the batch, the mean over its texts p
    of -log(exp(e_j.z_p / tau) / sum over all batch texts a of exp(e_j.z_a / tau)), averaged
    over the M labels."""
    total = 0.0
    M, B = label_targets.shape
    for j in range(M):
        denom = sum(torch.exp(batch_labels[j] @ z[a] / tau) for a in range(B))
        positives = [p for p in range(B) if label_targets[j, p]]
        row = sum(-torch.log(torch.exp(batch_labels[j] @ z[p] / tau) / denom) for p in positives)
        total = total + row / len(positives)
    return total / M


def naive_hinge(scores, mask, targets, margin=1.0, positive_weight=1.0):
    total, n = 0.0, 0
    for i in range(scores.shape[0]):
        for m in range(scores.shape[1]):
            if not mask[i, m]:
                continue
            y = 1.0 if targets[i, m] else -1.0
            w = positive_weight if targets[i, m] else 1.0
            total = total + w * torch.clamp(margin - y * scores[i, m], min=0.0) ** 2
            n += 1
    return total / n


def batch(seed=0, B=5, M=6, P=4, d=8, empty_row=False):
    """A padded candidate batch in float64 (leaf tensors for the gradients)."""
    g = torch.Generator().manual_seed(seed)
    z = F.normalize(torch.randn(B, d, generator=g, dtype=torch.float64), dim=1)
    table = F.normalize(torch.randn(P + 5, d, generator=g, dtype=torch.float64), dim=1)
    ids = torch.randint(0, table.shape[0], (B, M), generator=g)
    lengths = torch.tensor([M, M - 1, 3, M, 2])[:B]
    mask = torch.arange(M)[None, :] < lengths[:, None]
    targets = (torch.rand(B, M, generator=g) < 0.35) & mask
    targets[:, 0] = True  # every text has a positive...
    if empty_row:
        targets[2] = False  # ...but this one
    cand = table[ids].clone().requires_grad_(True)
    batch_labels = table[:P].clone().requires_grad_(True)
    label_targets = torch.rand(P, B, generator=g) < 0.4
    label_targets[:, 0] = True  # every batch label has a text
    z = z.clone().requires_grad_(True)
    return z, cand, mask, targets, batch_labels, label_targets


# ---------------------------------------------------------------- eqs. 4-6


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("tau", [0.05, 1.0])
def test_matching_loss_equals_naive_loop_values_and_gradients(weight, tau):
    z, cand, mask, targets, labels, label_targets = batch()
    loss = text_label_matching_loss(
        z, cand, mask, targets, labels, label_targets, temperature=tau, matching_weight=weight
    )
    grads = torch.autograd.grad(loss, (z, cand, labels), allow_unused=True)
    ref = weight * naive_tl(z, cand, mask, targets, tau) + (1 - weight) * naive_lt(
        z, labels, label_targets, tau
    )
    ref_grads = torch.autograd.grad(ref, (z, cand, labels), allow_unused=True)
    assert loss.dtype == torch.float64
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-10, abs=1e-12)
    for got, want, x in zip(grads, ref_grads, (z, cand, labels)):
        # lambda = 1: the label-to-text side does not enter (no gradient, or zeros)
        got = torch.zeros_like(x) if got is None else got
        want = torch.zeros_like(x) if want is None else want
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("weight", [1.0, 0.5])
def test_text_to_label_divides_by_the_batch_size_with_an_unlabelled_text(weight):
    """Eq. 4 divides by N_b: a text with no positive adds 0 and still counts. The mean
    over the texts that have a positive (skxmc's form before) is 5/4 of it here."""
    z, cand, mask, targets, labels, label_targets = batch(empty_row=True)
    loss = text_label_matching_loss(
        z, cand, mask, targets, labels, label_targets, temperature=0.1, matching_weight=weight
    )
    tl = naive_tl(z, cand, mask, targets, 0.1)
    ref = weight * tl + (1 - weight) * naive_lt(z, labels, label_targets, 0.1)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-10)
    labelled_mean = tl * z.shape[0] / (z.shape[0] - 1)  # 4 of the 5 texts have a positive
    wrong = weight * labelled_mean + (1 - weight) * naive_lt(z, labels, label_targets, 0.1)
    assert float(loss.detach()) != pytest.approx(float(wrong.detach()), rel=1e-3)
    g = torch.autograd.grad(loss, z)[0]
    g_ref = torch.autograd.grad(ref, z)[0]
    torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-12)


def test_text_to_label_weighted_rows_divide_by_the_batch_size():
    """With sample weights: 1/N_b sum_i w_i l_i, the unlabelled text counting in N_b."""
    z, cand, mask, targets, labels, label_targets = batch(empty_row=True)
    w = torch.tensor([0.5, 2.0, 3.0, 1.0, 1.5], dtype=torch.float64)
    loss = text_label_matching_loss(
        z, cand, mask, targets, labels, label_targets, matching_weight=1.0, sample_weight=w
    )
    rows = [
        naive_tl(z[i : i + 1], cand[i : i + 1], mask[i : i + 1], targets[i : i + 1], 0.05)
        for i in range(5)
    ]
    ref = sum(w[i] * rows[i] for i in range(5)) / 5
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-10)


def test_matching_loss_padding_is_ignored():
    """Changing what sits in masked slots changes neither the loss nor the real gradients."""
    z, cand, mask, targets, labels, label_targets = batch()
    other = cand.detach().clone()
    other[~mask] = torch.randn_like(other[~mask])
    other.requires_grad_(True)
    a = text_label_matching_loss(z, cand, mask, targets, labels, label_targets)
    b = text_label_matching_loss(z, other, mask, targets, labels, label_targets)
    assert float(a.detach()) == pytest.approx(float(b.detach()), rel=1e-12)
    ga = torch.autograd.grad(a, cand)[0]
    gb = torch.autograd.grad(b, other)[0]
    torch.testing.assert_close(ga, gb)
    assert torch.count_nonzero(ga[~mask]) == 0


def test_matching_loss_gradcheck():
    z, cand, mask, targets, labels, label_targets = batch(B=3, M=4, P=2, d=4)

    def f(z_, cand_, labels_):
        return text_label_matching_loss(
            z_,
            cand_,
            mask[:3, :4],
            targets[:3, :4],
            labels_,
            label_targets[:2, :3],
            temperature=0.5,
        )

    assert torch.autograd.gradcheck(
        f,
        (
            z.detach().requires_grad_(),
            cand.detach().requires_grad_(),
            labels.detach().requires_grad_(),
        ),
    )


def test_matching_loss_hand_value():
    """One text, two candidates (positive first), tau=1, lambda=1: -log softmax."""
    z = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    cand = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    targets = torch.tensor([[True, False]])
    loss = text_label_matching_loss(
        z,
        cand,
        mask,
        targets,
        cand[0, :1],
        torch.ones(1, 1, dtype=torch.bool),
        temperature=1.0,
        matching_weight=1.0,
    )
    assert float(loss.detach()) == pytest.approx(-math.log(math.e / (math.e + 1.0)), rel=1e-12)


def test_matching_weight_and_temperature_change_the_loss_and_gradients():
    """Ablation switches of the loss: each changes value and gradients on the same batch."""
    z, cand, mask, targets, labels, label_targets = batch()

    def run(**kw):
        loss = text_label_matching_loss(z, cand, mask, targets, labels, label_targets, **kw)
        return float(loss.detach()), torch.autograd.grad(loss, z)[0]

    base_value, base_grad = run()
    for kw in ({"matching_weight": 1.0}, {"matching_weight": 0.0}, {"temperature": 0.5}):
        value, grad = run(**kw)
        assert value != pytest.approx(base_value, rel=1e-6)
        assert not torch.allclose(grad, base_grad)


# ---------------------------------------------------------------- squared hinge


@pytest.mark.parametrize("positive_weight", [1.0, 2.5])
@pytest.mark.parametrize("margin", [1.0, 0.3])
def test_weighted_squared_hinge_equals_naive_loop(positive_weight, margin):
    z, cand, mask, targets, _, _ = batch(seed=3)
    scores = candidate_scores(z, cand)
    loss = weighted_squared_hinge(
        scores, mask, targets, margin=margin, positive_weight=positive_weight
    )
    ref = naive_hinge(scores, mask, targets, margin, positive_weight)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-10)
    got = torch.autograd.grad(loss, (z, cand), retain_graph=True)
    want = torch.autograd.grad(ref, (z, cand))
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_, w_, rtol=1e-9, atol=1e-12)


def test_weighted_squared_hinge_tensor_weights_and_gradcheck():
    scores = torch.tensor(
        [[0.2, -0.4, 1.5], [0.9, 0.1, -2.0]], dtype=torch.float64, requires_grad=True
    )
    mask = torch.tensor([[True, True, True], [True, True, False]])
    targets = torch.tensor([[True, False, True], [False, True, False]])
    w = torch.tensor([[3.0, 9.0, 2.0], [9.0, 0.5, 9.0]], dtype=torch.float64)
    loss = weighted_squared_hinge(scores, mask, targets, positive_weight=w)
    # slots: pos 0.2 -> 3 * 0.8^2; neg -0.4 -> 0.6^2; pos 1.5 -> 0; neg 0.9 -> 1.9^2;
    # pos 0.1 -> 0.5 * 0.9^2; the masked slot does not count (5 real slots)
    expected = (3 * 0.8**2 + 0.6**2 + 0 + 1.9**2 + 0.5 * 0.9**2) / 5
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-12)
    assert torch.autograd.gradcheck(
        lambda s: weighted_squared_hinge(s, mask, targets, positive_weight=w), (scores,)
    )


# ---------------------------------------------------------------- candidates (TFN + MAN)


class _Tree:
    """What ``_stage_candidates`` reads of a fitted tree: the cluster chain."""

    def __init__(self, chain):
        self.cluster_chain_ = chain


def _two_layer_setup():
    # layer 0: parents P0, P1 (under the root); layer 1: nodes 0, 1 under P0 and 2, 3 under P1
    chain = [
        sp.csr_matrix(np.ones((2, 1), np.float32)),
        sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]], np.float32)),
    ]
    # texts: 0 is positive for node 0 (parent P0), 1 for node 3 (P1), 2 for nodes 1 and 2
    Y1 = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 1, 0]], np.float32))
    Y0 = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 1]], np.float32))
    previous = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)  # parent table
    # text 0 points at P1 (the matcher disagrees with its label), text 1 at P1, text 2 at P0
    Z = np.array([[0.1, 1.0], [0.0, 1.0], [1.0, 0.2]], np.float32)
    return chain, [Y0, Y1], previous, Z


def _dense(cand):
    return sp.csr_matrix(cand).toarray()


def test_stage_candidates_tfn_and_man_contents():
    chain, layers, previous, Z = _two_layer_setup()
    clf = MultiStageMatcher(beam_size=1)
    clf.tree_ = _Tree(chain)
    rows = np.arange(3)
    cand = _dense(
        clf._stage_candidates(1, Z, layers[1], layers, rows, previous, np.random.default_rng(0))
    )
    # text 0: TFN = children of its positive parent P0 (nodes 0 positive, 1);
    #         MAN = children of the parent its matcher ranks first, P1 (nodes 2, 3)
    # text 1: TFN and MAN are both P1: nodes 2, 3 (3 positive); nothing under P0
    # text 2: positive parents P0 and P1 (all four nodes, 1 and 2 positive); MAN P0 adds nothing
    np.testing.assert_array_equal(cand, [[2, 1, 1, 1], [0, 0, 1, 2], [1, 2, 2, 1]])
    # a beam of both parents makes every node a candidate of every text
    clf.set_params(beam_size=2)
    cand = _dense(
        clf._stage_candidates(1, Z, layers[1], layers, rows, previous, np.random.default_rng(0))
    )
    assert (cand > 0).all()
    np.testing.assert_array_equal(cand == 2, layers[1].toarray() > 0)


def test_stage_candidates_top_layer_and_snm_and_cap():
    chain, layers, previous, Z = _two_layer_setup()
    clf = MultiStageMatcher(beam_size=1)
    clf.tree_ = _Tree(chain)
    rows = np.arange(3)
    rng = np.random.default_rng(0)
    top = _dense(clf._stage_candidates(0, Z, layers[0], layers, rows, None, rng))
    np.testing.assert_array_equal(top, layers[0].toarray() + 1)  # every node, positives 2
    clf.set_params(negative_sampling="snm")  # negatives are mined per step instead
    snm = _dense(clf._stage_candidates(1, Z, layers[1], layers, rows, previous, rng))
    np.testing.assert_array_equal(snm, 2 * layers[1].toarray())
    clf.set_params(negative_sampling="tfn+man", beam_size=2, max_candidates=2)
    capped = _dense(clf._stage_candidates(1, Z, layers[1], layers, rows, previous, rng))
    assert ((capped > 0).sum(axis=1) == 2).all()
    # positives always survive the cap
    np.testing.assert_array_equal(capped == 2, layers[1].toarray() > 0)


def test_stage_matcher_is_tfn_plus_beam():
    _chain, layers, previous, Z = _two_layer_setup()
    clf = MultiStageMatcher(beam_size=1)
    M = clf._stage_matcher(1, Z, layers, np.arange(3), previous).toarray()
    np.testing.assert_array_equal(M, [[1, 1], [0, 1], [1, 1]])
    assert clf._stage_matcher(0, Z, layers, np.arange(3), None).toarray().tolist() == [[1]] * 3


# ---------------------------------------------------------------- bootstraps


def test_centroid_bootstrap_and_empty_clusters():
    chain, _layers, previous, Z = _two_layer_setup()
    Y1 = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]], np.float32))
    clf = MultiStageMatcher(label_bootstrap="centroid")
    init = clf._bootstrap(Z, Y1, previous, chain[1].indices, np.random.default_rng(0))
    Z64 = Z.astype(np.float64)
    expected0 = (Z64[0] + Z64[2]) / np.linalg.norm(Z64[0] + Z64[2])
    np.testing.assert_allclose(init[0], expected0, rtol=1e-6)
    np.testing.assert_allclose(init[1], Z64[2] / np.linalg.norm(Z64[2]), rtol=1e-6)
    # nodes 2 and 3 have no positive: their parent's (P1) row
    np.testing.assert_array_equal(init[2], previous[1])
    np.testing.assert_array_equal(init[3], previous[1])
    # top layer, no previous table: random unit rows
    init0 = clf._bootstrap(
        Z, sp.csr_matrix((3, 2), dtype=np.float32), None, np.zeros(2, int), np.random.default_rng(0)
    )
    np.testing.assert_allclose(np.linalg.norm(init0, axis=1), 1.0, rtol=1e-6)


def test_linear_bootstrap_matches_liblinear_per_group():
    """Each node's row is the direction of an L2-regularised squared-hinge SVM without
    bias trained on its parent group's rows (sklearn's liblinear as the reference)."""
    from sklearn.svm import LinearSVC

    rng = np.random.default_rng(0)
    n, d = 60, 5
    Z = rng.standard_normal((n, d)).astype(np.float32)
    parents = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]], np.float32))
    Y = sp.csr_matrix((rng.random((n, 4)) < 0.3).astype(np.float32))
    M = sp.csr_matrix((rng.random((n, 2)) < 0.4).astype(np.float32))
    E = linear_bootstrap(Z, Y, parents, M, random_state=0)
    Yd, Md = Y.toarray() > 0, M.toarray() > 0
    for node, parent in enumerate([0, 0, 1, 1]):
        siblings = parents.toarray()[:, parent] > 0
        rows = Yd[:, siblings].any(axis=1) | Md[:, parent]  # TFN + MAN
        y = np.where(Yd[rows, node], 1, -1)
        svc = LinearSVC(
            loss="squared_hinge", dual=True, fit_intercept=False, C=1.0, tol=1e-8, max_iter=100_000
        ).fit(Z[rows].astype(np.float64), y)
        w = svc.coef_.ravel() / np.linalg.norm(svc.coef_)
        assert float(E[node] @ w) > 0.995, node
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, rtol=1e-5)


def test_linear_bootstrap_is_the_same_for_any_n_jobs():
    """The docs tell GPU users to give the bootstrap every core: the rows must not change."""
    rng = np.random.default_rng(2)
    n, d, k = 300, 6, 40
    Z = rng.standard_normal((n, d)).astype(np.float32)
    parents = sp.csr_matrix(np.eye(4, dtype=np.float32)[np.arange(k) % 4])
    Y = sp.csr_matrix((rng.random((n, k)) < 0.05).astype(np.float32))
    M = sp.csr_matrix((rng.random((n, 4)) < 0.5).astype(np.float32))
    E1 = linear_bootstrap(Z, Y, parents, M, random_state=0, n_jobs=1)
    for n_jobs in (2, -1):
        np.testing.assert_array_equal(linear_bootstrap(Z, Y, parents, M, n_jobs=n_jobs), E1)


def test_linear_bootstrap_ignores_texts_outside_the_group():
    """Rows of another parent's group are not negatives: moving them does not matter."""
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((40, 4)).astype(np.float32)
    parents = sp.csr_matrix(np.array([[1, 0], [0, 1]], np.float32))
    Y = sp.csr_matrix(np.eye(2, dtype=np.float32)[rng.integers(0, 2, 40)])
    E = linear_bootstrap(Z, Y, parents, None)
    moved = Z.copy()
    moved[Y.toarray()[:, 1] > 0] *= -3  # the texts of node 1's group only
    E2 = linear_bootstrap(moved, Y, parents, None)
    np.testing.assert_allclose(E[0], E2[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(E[1], E2[1])


def test_bootstrap_option_switches_the_rows():
    chain, layers, previous, Z = _two_layer_setup()
    rng = np.random.default_rng(0)
    M = sp.csr_matrix(np.ones((3, 2), np.float32))
    lin = MultiStageMatcher(label_bootstrap="linear")._bootstrap(
        Z, layers[1], previous, chain[1].indices, rng, matcher=M, parents=chain[1]
    )
    cen = MultiStageMatcher(label_bootstrap="centroid")._bootstrap(
        Z, layers[1], previous, chain[1].indices, rng, matcher=M, parents=chain[1]
    )
    assert not np.allclose(lin, cen)
    np.testing.assert_allclose(np.linalg.norm(lin, axis=1), 1.0, rtol=1e-5)


# ---------------------------------------------------------------- refined tree embeddings


@pytest.mark.parametrize("sparse_prior", [False, True])
def test_refined_label_embeddings_naive(sparse_prior):
    rng = np.random.default_rng(0)
    n, d, L, k = 20, 6, 5, 3
    Z = rng.standard_normal((n, d)).astype(np.float32)
    Y = sp.csr_matrix((rng.random((n, L)) < 0.3).astype(np.float32))
    Y = sp.csr_matrix(Y.toarray() * (np.arange(L) != 4))  # label 4 has no positive
    prior = rng.standard_normal((L, k)).astype(np.float32)
    E = refined_label_embeddings(Z, Y, sp.csr_matrix(prior) if sparse_prior else prior)
    E = E.toarray() if sp.issparse(E) else E
    Yd = Y.toarray().astype(np.float64)
    expected = np.zeros((L, d + k))
    for label in range(L):
        pifa = np.zeros(d)
        for i in range(n):
            if Yd[i, label]:
                pifa += Z[i] / math.sqrt(Yd[i].sum())  # PECOS's l2 instance weights
        if np.linalg.norm(pifa) > 0:
            pifa /= np.linalg.norm(pifa)
        row = np.concatenate([pifa, prior[label]])
        expected[label] = row / np.linalg.norm(row)
    np.testing.assert_allclose(E, expected, rtol=1e-5, atol=1e-6)
