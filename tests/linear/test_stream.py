"""predict_topk over row blocks: the stacked results are predict_topk's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from skxmc import XRLinearClassifier
from skxmc.linear import predict_topk_iter, row_blocks


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.2, format="csr", dtype=np.float32, random_state=rng)
    Y = sp.csr_matrix((rng.random((300, 50)) < 0.08).astype(np.float32))
    return XRLinearClassifier(random_state=0, beam_size=4).fit(X, Y), X


@pytest.mark.parametrize("size", [1, 7, 128, 300, 1000])
def test_blocks_stack_to_predict_topk(fitted, size):
    clf, X = fitted
    labels, scores = clf.predict_topk(X, k=5)
    parts = list(predict_topk_iter(clf, row_blocks(X, size), k=5))
    assert len(parts) == -(-X.shape[0] // size)
    np.testing.assert_array_equal(np.vstack([lab for lab, _ in parts]), labels)
    # bit for bit, -inf slots included
    assert np.vstack([s for _, s in parts]).tobytes() == scores.tobytes()


def test_a_generator_of_blocks_and_predict_params(fitted):
    clf, X = fitted
    subset = clf.classes_[:10]
    blocks = (X[i : i + 50] for i in range(0, X.shape[0], 50))  # read once, lazily
    parts = predict_topk_iter(clf, blocks, k=3, labels=subset)
    stacked = np.vstack([lab for lab, _ in parts])
    np.testing.assert_array_equal(stacked, clf.predict_topk(X, k=3, labels=subset)[0])
    dense = list(row_blocks(X.toarray(), 100))
    assert [b.shape for b in dense] == [(100, 40)] * 3


def test_bad_arguments(fitted):
    clf, X = fitted
    with pytest.raises(ValueError, match="size must be a positive integer"):
        list(row_blocks(X, 0))
    with pytest.raises(TypeError, match="blocks is one matrix; pass row_blocks"):
        list(predict_topk_iter(clf, X))
    with pytest.raises(TypeError, match="estimator must have predict_topk"):
        list(predict_topk_iter(object(), row_blocks(X, 10)))
