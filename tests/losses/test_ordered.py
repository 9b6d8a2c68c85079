"""Ordered weighted losses (skxmc.losses._ordered): values, gradients, validation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from skxmc.losses import (
    MARGIN_FUNCTIONS,
    check_owl_weights,
    margin_loss,
    ordered_weighted_loss,
    top_k_weights,
)


def _reference(scores, targets, weights, margin, form, rho=1.0, mask=None):
    """Plain-loop OWL, row by row, for comparison."""
    scores = np.asarray(scores, dtype=np.float64)
    phi = {
        "hinge": lambda u: max(1 - u, 0.0),
        "squared_hinge": lambda u: max(1 - u, 0.0) ** 2,
        "logistic": lambda u: np.log2(1 + np.exp(-u)),
        "exponential": lambda u: np.exp(-u),
        "ramp": lambda u: min(max(1 - u / rho, 0.0), 1.0),
    }[margin]
    out = []
    for i in range(scores.shape[0]):
        valid = np.ones(scores.shape[1], bool) if mask is None else np.asarray(mask[i], bool)
        pos = [scores[i, j] for j in range(scores.shape[1]) if targets[i][j] and valid[j]]
        neg = sorted(
            (scores[i, j] for j in range(scores.shape[1]) if not targets[i][j] and valid[j]),
            reverse=True,
        )
        w = [1.0 / max(len(neg), 1)] * len(neg) if weights is None else list(weights)[: len(neg)]
        if form == "bowl":
            total = np.mean([phi(p) for p in pos]) if pos else 0.0
            total += sum(wj * phi(-nj) for wj, nj in zip(w, neg))
        else:
            total = (
                np.mean([sum(wj * phi(p - nj) for wj, nj in zip(w, neg)) for p in pos])
                if pos
                else 0.0
            )
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("margin", MARGIN_FUNCTIONS)
@pytest.mark.parametrize("form", ["bowl", "powl"])
@pytest.mark.parametrize("weights", [None, [1.0], [0.5, 0.3, 0.2], [0.25] * 4])
def test_matches_reference(margin, form, weights):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 7))
    targets = rng.random((6, 7)) < 0.3
    targets[0] = False  # a row without positives
    targets[1] = True  # a row without negatives
    mask = rng.random((6, 7)) < 0.9
    got = ordered_weighted_loss(
        torch.tensor(scores),
        torch.tensor(targets),
        weights=weights,
        margin=margin,
        form=form,
        rho=0.7,
        mask=torch.tensor(mask),
        reduction="none",
    )
    want = _reference(scores, targets, weights, margin, form, rho=0.7, mask=mask)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    total = ordered_weighted_loss(
        torch.tensor(scores),
        torch.tensor(targets),
        weights=weights,
        margin=margin,
        form=form,
        rho=0.7,
        mask=torch.tensor(mask),
    )
    assert total.item() == pytest.approx(want.mean())


@pytest.mark.parametrize(
    ("margin", "form", "weights"),
    list(itertools.product(MARGIN_FUNCTIONS, ["bowl", "powl"], [None, [0.6, 0.3, 0.1]])),
)
def test_gradcheck(margin, form, weights):
    torch.manual_seed(0)
    # Scores away from the kinks (u = 0, 1, rho) and without ties, so finite differences agree.
    scores = (torch.randn(4, 6, dtype=torch.float64) * 0.4).requires_grad_()
    targets = torch.zeros(4, 6, dtype=torch.bool)
    targets[:, 0] = True
    targets[2, 3] = True
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[3, 5] = False
    w = None if weights is None else torch.tensor(weights, dtype=torch.float64)

    def f(s):
        return ordered_weighted_loss(
            s, targets, weights=w, margin=margin, form=form, rho=3.0, mask=mask, reduction="none"
        )

    assert torch.autograd.gradcheck(f, (scores,), eps=1e-6, atol=1e-6)


def test_margin_functions_upper_bound_01_loss():
    u = torch.linspace(-3, 3, 601, dtype=torch.float64)
    zero_one = (u <= 0).double()
    for margin in MARGIN_FUNCTIONS:
        assert bool((margin_loss(u, margin, rho=0.5) >= zero_one - 1e-12).all()), margin
        values = margin_loss(u, margin, rho=0.5)
        assert bool((values[1:] <= values[:-1] + 1e-12).all()), f"{margin} must be non-increasing"


def test_convex_in_scores_for_convex_margins():
    # Non-increasing theta and convex phi: the loss along any segment lies under the chord.
    rng = np.random.default_rng(1)
    targets = torch.tensor([[True, False, False, False, False]])
    for margin in ("hinge", "squared_hinge", "logistic", "exponential"):
        for form in ("bowl", "powl"):
            for _ in range(20):
                a, b = (torch.tensor(rng.normal(size=(1, 5))) for _ in range(2))
                t = float(rng.random())
                kw = dict(weights=[0.5, 0.3, 0.2], margin=margin, form=form)
                mid = ordered_weighted_loss(t * a + (1 - t) * b, targets, **kw)
                chord = t * ordered_weighted_loss(a, targets, **kw) + (
                    1 - t
                ) * ordered_weighted_loss(b, targets, **kw)
                assert mid <= chord + 1e-10


def test_top_k_weights_mine_the_hardest():
    scores = torch.tensor([[1.0, 0.9, -0.5, 0.2, 0.95]])
    targets = torch.tensor([[1, 0, 0, 0, 0]])
    loss = ordered_weighted_loss(scores, targets, weights=top_k_weights(1), form="powl")
    assert loss.item() == pytest.approx(1 - (1.0 - 0.95))
    grad_scores = scores.clone().requires_grad_()
    ordered_weighted_loss(grad_scores, targets, weights=top_k_weights(2), form="powl").backward()
    assert grad_scores.grad.tolist()[0] == pytest.approx([-1.0, 0.5, 0.0, 0.0, 0.5])


def test_crammer_singer_and_weston_watkins():
    scores = torch.tensor([[0.3, 0.8, -0.2, 0.4]])
    targets = torch.tensor([[1, 0, 0, 0]])
    cs = ordered_weighted_loss(scores, targets, weights=[1.0, 0.0, 0.0], form="powl")
    assert cs.item() == pytest.approx(max(1 - (0.3 - 0.8), 0))
    ww = ordered_weighted_loss(scores, targets, weights=[1.0, 1.0, 1.0], form="powl")
    assert ww.item() == pytest.approx(sum(max(1 - (0.3 - v), 0) for v in (0.8, -0.2, 0.4)))


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([0.1, 0.2], "non-increasing"),
        ([0.5, -0.1], "non-negative"),
        ([], "non-empty 1-D"),
        ([[1.0]], "non-empty 1-D"),
        ([1.0, float("nan")], "finite"),
    ],
)
def test_weight_validation(weights, message):
    with pytest.raises(ValueError, match=message):
        check_owl_weights(weights)
    with pytest.raises(ValueError, match=message):
        ordered_weighted_loss(torch.zeros(1, 3), torch.tensor([[1, 0, 0]]), weights=weights)


def test_argument_validation():
    s, t = torch.zeros(2, 3), torch.zeros(2, 3)
    with pytest.raises(ValueError, match="form"):
        ordered_weighted_loss(s, t, form="owl")
    with pytest.raises(ValueError, match="margin"):
        ordered_weighted_loss(s, t, margin="huber")
    with pytest.raises(ValueError, match="rho"):
        ordered_weighted_loss(s, t, margin="ramp", rho=0.0)
    with pytest.raises(ValueError, match="reduction"):
        ordered_weighted_loss(s, t, reduction="max")
    with pytest.raises(ValueError, match="targets"):
        ordered_weighted_loss(s, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="2-D"):
        ordered_weighted_loss(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="k must be"):
        top_k_weights(0)


def test_top_k_weights_of_the_paper_are_pinned():
    # Reddi et al. (2019), after Lemma 2: theta_j = (K - 1) / (k B) for j <= k.
    w = top_k_weights(3, n_classes=1001, n_sampled=50)
    np.testing.assert_allclose(w.numpy(), np.full(3, 1000 / 150), rtol=1e-6)
    assert float(w.sum()) == pytest.approx(1000 / 50)  # ||theta||_1 = (K - 1) / B
    with pytest.raises(ValueError, match="both"):
        top_k_weights(2, n_classes=10)
    with pytest.raises(ValueError, match="exceeds"):
        top_k_weights(5, n_classes=10, n_sampled=4)
