"""SharpReCL's losses against naive float64 loops: eq. 11 (both weightings), the anchor
mask, the focal and Dice losses of Table 8, and the class weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from skxmc.losses import (
    class_prior_weights,
    dice_loss,
    effective_number_weights,
    focal_loss,
    rebalanced_contrastive_loss,
    rebalanced_targets,
)

torch.set_num_threads(1)


# Naive references (float64, one anchor / example at a time) ---------------------------------


def naive_eq11(
    anchors,
    labels,
    positives,
    negatives,
    *,
    temperature,
    weights,
    normalization,
    positive_index=None,
):
    """Eq. 11 term by term: anchor i's columns are the other anchors and its class's
    targets (minus copies of i); its positives the same-class ones among them."""
    a = anchors.double()
    m = a.shape[0]
    labels = labels.tolist()
    total = a.new_zeros(())
    n_valid = 0
    for i in range(m):
        y = labels[i]
        cols, is_pos = [], []
        for k in range(m):
            if k != i:
                cols.append(a[k])
                is_pos.append(labels[k] == y)
        if positives is not None:
            for t in range(positives.shape[1]):
                if positive_index is not None and int(positive_index[y, t]) == i:
                    continue
                cols.append(positives[y, t].double())
                is_pos.append(True)
        if negatives is not None:
            for t in range(negatives.shape[1]):
                cols.append(negatives[y, t].double())
                is_pos.append(False)
        sims = torch.stack([a[i] @ c for c in cols]) / temperature
        log_z = torch.logsumexp(sims, dim=0)
        terms = [-(sims[j] - log_z) for j in range(len(cols)) if is_pos[j]]
        if not terms:
            continue
        n_valid += 1
        w = float(weights[y]) if weights is not None else 1.0
        if normalization == "sum":
            total = total + w * sum(terms) / m
        else:
            total = total + w * sum(terms) / len(terms)
    return total if normalization == "sum" else total / n_valid


def naive_focal(logits, targets, log_prior, gamma, tau):
    out = []
    for row, y in zip(logits.double().tolist(), targets.tolist()):
        s = [v + tau * float(p) for v, p in zip(row, log_prior.tolist())]
        z = math.log(sum(math.exp(v) for v in s))
        p_y = math.exp(s[y] - z)
        out.append(-((1 - p_y) ** gamma) * math.log(p_y))
    return np.mean(out)


def naive_dice(logits, targets, log_prior, alpha, smooth, tau):
    out = []
    for row, y in zip(logits.double().tolist(), targets.tolist()):
        s = [v + tau * float(p) for v, p in zip(row, log_prior.tolist())]
        z = sum(math.exp(v) for v in s)
        loss = 0.0
        for j, v in enumerate(s):
            p = math.exp(v) / z
            q = (1 - p) ** alpha * p
            t = 1.0 if j == y else 0.0
            loss += 1 - (2 * q * t + smooth) / (q + t + smooth)
        out.append(loss)
    return np.mean(out)


def batch(seed=0, m=9, n_classes=3, d=6, p=4, q=5):
    g = torch.Generator().manual_seed(seed)
    anchors = F.normalize(torch.randn(m, d, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 1, 2, 0, 0, 1, 0, 1, 2][:m])
    pos = F.normalize(torch.randn(n_classes, p, d, generator=g, dtype=torch.float64), dim=-1)
    neg = F.normalize(torch.randn(n_classes, q, d, generator=g, dtype=torch.float64), dim=-1)
    return anchors, labels, pos, neg


# Eq. 11 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("normalization", ["mean", "sum"])
@pytest.mark.parametrize("weighting", ["none", "effective", "prior"])
def test_eq11_values_and_gradients_match_naive_loop(normalization, weighting):
    anchors, labels, pos, neg = batch()
    counts = np.bincount(labels.numpy(), minlength=3) + np.array([40, 5, 1])
    weights = {
        "none": None,
        "effective": torch.as_tensor(effective_number_weights(counts)),
        "prior": torch.as_tensor(class_prior_weights(counts)),
    }[weighting]
    a32 = anchors.float().requires_grad_()
    a64 = anchors.clone().requires_grad_()
    got = rebalanced_contrastive_loss(
        a32,
        labels,
        pos.float(),
        neg.float(),
        temperature=0.3,
        class_weights=weights,
        normalization=normalization,
    )
    want = naive_eq11(
        a64, labels, pos, neg, temperature=0.3, weights=weights, normalization=normalization
    )
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    got.backward()
    want.backward()
    np.testing.assert_allclose(a32.grad.numpy(), a64.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_eq11_paper_form_differs_from_reference_form():
    anchors, labels, pos, neg = batch(1)
    counts = np.array([50, 10, 1])
    ref = rebalanced_contrastive_loss(
        anchors.float(),
        labels,
        pos.float(),
        neg.float(),
        class_weights=torch.as_tensor(effective_number_weights(counts)),
    )
    paper = rebalanced_contrastive_loss(
        anchors.float(),
        labels,
        pos.float(),
        neg.float(),
        class_weights=torch.as_tensor(class_prior_weights(counts)),
        normalization="sum",
    )
    assert abs(float(ref) - float(paper)) > 1e-3
    with pytest.raises(ValueError, match="normalization"):
        rebalanced_contrastive_loss(anchors.float(), labels, normalization="max")


def test_eq11_known_value_of_the_sum_form():
    # Anchors e1 (class 0), e1 (class 0), e2 (class 1); T = 1; no targets. Anchor 0 and
    # 1 each have one positive of probability e / (e + 1); anchor 2 has none.
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    w = torch.tensor([2.0, 5.0])
    term = -math.log(math.e / (math.e + 1))
    got = rebalanced_contrastive_loss(
        a, torch.tensor([0, 0, 1]), temperature=1.0, class_weights=w, normalization="sum"
    )
    assert float(got) == pytest.approx(2.0 * 2 * term / 3, rel=1e-6)  # w_0 * 2 terms / |D|
    got = rebalanced_contrastive_loss(a, torch.tensor([0, 0, 1]), temperature=1.0, class_weights=w)
    assert float(got) == pytest.approx(2.0 * term, rel=1e-6)  # mean over the 2 valid anchors


def test_class_prior_weights_are_minus_log_prior():
    counts = [1924, 38]
    w = class_prior_weights(counts)
    np.testing.assert_allclose(w, [-math.log(1924 / 1962), -math.log(38 / 1962)], rtol=1e-6)
    # Not normalised: the weights of a uniform prior are all log(n_classes).
    np.testing.assert_allclose(class_prior_weights([5, 5, 5, 5]), [math.log(4)] * 4, rtol=1e-6)
    with pytest.raises(ValueError):
        class_prior_weights([0, 3])


# The anchor is not its own positive -----------------------------------------------------------


def test_rebalanced_targets_return_the_rows_they_copy():
    torch.manual_seed(0)
    feats = F.normalize(torch.randn(8, 5), dim=1)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 1, 2])
    protos = feats[-3:]
    for ratio in (0.0, 0.5, 1.0):
        pos, neg, index = rebalanced_targets(
            feats,
            labels,
            protos,
            n_positive=6,
            n_negative=4,
            n_hard=2,
            synthetic_ratio=ratio,
            return_indices=True,
        )
        assert index.shape == (3, 6) and neg.shape == (3, 4, 5)
        for c in range(3):
            for t in range(6):
                i = int(index[c, t])
                if i >= 0:  # an exact copy of a member of the class
                    assert int(labels[i]) == c
                    assert torch.allclose(pos[c, t], feats[i], atol=1e-6)
        if ratio == 0.0:
            assert (index >= 0).all()  # every simple-sampling draw is a copy


def test_anchor_copies_are_masked():
    # Class 0 has one member, anchor 0: every sampled positive of class 0 is anchor 0
    # itself. Masked, anchor 0 has no positive left and drops out of the loss.
    a = F.normalize(torch.tensor([[1.0, 0.2], [0.1, 1.0], [0.3, 1.0]]), dim=1)
    labels = torch.tensor([0, 1, 1])
    pos, neg, index = rebalanced_targets(
        a, labels, a[:2], n_positive=3, n_negative=2, synthetic_ratio=0.0, return_indices=True
    )
    assert (index[0] == 0).all()
    masked = rebalanced_contrastive_loss(a, labels, pos, neg, positive_index=index)
    unmasked = rebalanced_contrastive_loss(a, labels, pos, neg)
    want = naive_eq11(
        a,
        labels,
        pos,
        neg,
        temperature=0.3,
        weights=None,
        normalization="mean",
        positive_index=index,
    )
    assert float(masked) == pytest.approx(float(want), rel=1e-5)
    assert float(unmasked) != pytest.approx(float(masked), rel=1e-3)
    # Only anchors 1 and 2 count (anchor 0 has no positive left): a loss over them alone.
    keep = rebalanced_contrastive_loss(
        a, labels, pos, neg, positive_index=index, class_weights=torch.tensor([0.0, 1.0])
    )
    assert float(keep) == pytest.approx(float(masked), rel=1e-6)
    with pytest.raises(ValueError, match="positive_index"):
        rebalanced_contrastive_loss(a, labels, pos, neg, positive_index=index[:, :1])


# Focal and Dice (Table 8) ---------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, 2.0])
@pytest.mark.parametrize("tau", [0.0, 1.0])
def test_focal_loss_matches_naive_loop(gamma, tau):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 4, generator=g) * 2
    y = torch.tensor([0, 1, 2, 3, 0, 0, 1])
    log_prior = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    got = focal_loss(logits, y, log_prior, gamma=gamma, tau=tau)
    assert float(got) == pytest.approx(naive_focal(logits, y, log_prior, gamma, tau), rel=1e-5)
    if gamma == 0:  # the (logit-adjusted) cross-entropy
        want = F.cross_entropy(logits + tau * log_prior, y)
        assert float(got) == pytest.approx(float(want), rel=1e-5)
    with pytest.raises(ValueError, match="gamma"):
        focal_loss(logits, y, gamma=-1)


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("tau", [0.0, 1.0])
def test_dice_loss_matches_naive_loop(alpha, tau):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 3, generator=g) * 2
    y = torch.tensor([0, 1, 2, 0, 0, 1])
    log_prior = torch.tensor([0.6, 0.3, 0.1]).log()
    got = dice_loss(logits, y, log_prior, alpha=alpha, smooth=1.0, tau=tau)
    want = naive_dice(logits, y, log_prior, alpha, 1.0, tau)
    assert float(got) == pytest.approx(want, rel=1e-5)
    per = dice_loss(logits, y, log_prior, alpha=alpha, tau=tau, reduction="none")
    assert per.shape == (6,) and float(per.sum()) == pytest.approx(6 * want, rel=1e-5)
    with pytest.raises(ValueError, match="smooth"):
        dice_loss(logits, y, smooth=0)
    with pytest.raises(ValueError, match="reduction"):
        dice_loss(logits, y, reduction="max")


def test_focal_and_dice_gradients_follow_the_naive_loss():
    # Finite differences of the naive float64 loops against autograd.
    logits = torch.tensor([[1.0, -0.5, 0.2], [0.3, 0.9, -1.2]], dtype=torch.float64)
    y = torch.tensor([2, 0])
    log_prior = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64).log()
    for fn, naive in (
        (lambda x: focal_loss(x, y, log_prior), lambda x: naive_focal(x, y, log_prior, 2.0, 1.0)),
        (
            lambda x: dice_loss(x, y, log_prior, alpha=0.3),
            lambda x: naive_dice(x, y, log_prior, 0.3, 1.0, 1.0),
        ),
    ):
        x = logits.clone().requires_grad_()
        fn(x).backward()
        eps = 1e-6
        fd = np.zeros_like(logits.numpy())
        for idx in np.ndindex(*logits.shape):
            hi, lo = logits.clone(), logits.clone()
            hi[idx] += eps
            lo[idx] -= eps
            fd[idx] = (naive(hi) - naive(lo)) / (2 * eps)
        np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-3, atol=1e-5)
