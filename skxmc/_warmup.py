"""``skxmc.warmup``: compile every numba kernel of skxmc ahead of time.

On the top floor of the package (beside the command line's ``skxmc warmup``), because it
compiles the kernels the way fits do: by running a tiny XR-Linear fit and prediction, the
label tree, the solvers and the ranking metrics. The kernels themselves
(:mod:`skxmc._kernels`) import nothing of skxmc.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from numba.core import event

from . import metrics
from ._kernels.jit import _KERNELS, _PACKAGE
from ._ranking import topk_from_dense
from ._sparse_product import sorted_product
from .linear import XRLinearClassifier
from .linear._beam import ChunkedWeights, check_blocks, score_candidates
from .linear._solver import fit_binary
from .tree import HierarchicalLabelTree

__all__ = ["warmup"]


def _run_every_kernel() -> None:
    """Call every kernel through its usual Python caller, on tiny synthetic data."""
    rng = np.random.RandomState(0)
    n, d, n_labels = 120, 50, 24
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    X.data += 0.1  # no explicit zeros
    labels = [[int(i % n_labels), int((3 * i + 1) % n_labels)] for i in range(n)]
    # n_jobs=2: the top of the label tree splits one node with two threads
    # (split_node_threaded), lower levels a node per thread (split_level); tfn+man runs
    # the beam search inside fit, predict_topk after it.
    clf = XRLinearClassifier(
        tree=HierarchicalLabelTree(max_leaf_size=4),
        negative_sampling="tfn+man",
        beam_size=2,
        n_jobs=2,
    ).fit(X, labels)
    clf.predict_topk(X, k=3)
    # the logistic loss is a separate specialisation of the layer kernel (squared-hinge
    # fits never compile the logistic solver, see skxmc.linear._solver._LOSS_CODES)
    XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=4), loss="logistic").fit(X, labels)
    # (dense label embeddings, e.g. label2vec trees, reach the tree kernels with the same
    # dtypes as sparse ones: no separate call needed)
    fit_binary(X, np.arange(n) % 3 == 0, loss="logistic")
    # PIFA's threaded product, which fits on small data leave to scipy
    sorted_product(sp.csr_matrix(X.T), X, n_jobs=2, min_work=0)
    # layers above DENSE_LAYER_MAX_NODES nodes are scored parent by parent
    W = sp.random(d + 1, 6, density=0.5, format="csc", random_state=rng, dtype=np.float32)
    parents = sp.csr_matrix(np.kron(np.eye(2), np.ones((1, 3))), dtype=np.float32)
    chunks = ChunkedWeights(W, parents, dense=False)
    path = sp.csr_matrix(np.ones((n, 2), dtype=np.float32))
    score_candidates(X, path, chunks, 6 * n, bias=1.0, n_jobs=2)
    # a saved layout's checks (skxmc.load)
    check_blocks(chunks.block_start, chunks.feat_count, chunks.blocks, d + 1, chunks.children_count)
    # metrics: ranking, hits, propensity-scored ideal rankings
    Y = sp.csr_matrix(
        (
            np.ones(2 * n),
            ([i for i in range(n) for _ in (0, 1)], [j for row in labels for j in row]),
        ),
        shape=(n, n_labels),
    )
    Y.sum_duplicates()
    Y.data[:] = 1
    scores = sp.random(n, n_labels, density=0.3, format="csr", random_state=rng)
    metrics.evaluate(
        Y, scores, ks=(1, 3), inv_propensity=metrics.inverse_propensity(Y), normalize=True
    )
    topk_from_dense(scores.toarray(), 3)


def warmup(*, verbose: int = 0) -> dict[str, float | int]:
    """Compile every numba kernel of skxmc now, with the dtypes that fits use.

    Runs a tiny XR-Linear fit and prediction (both kinds of label-tree split, matcher-aware
    negatives, beam search), the logistic solver and the ranking metrics on synthetic
    data, so that every kernel is compiled (or loaded) for the one signature real data
    gives it. The compiled code goes to numba's on-disk cache: later processes load it
    instead of compiling. Meant for container images and CI (``skxmc warmup``); with a
    warm cache it takes about a second.

    Parameters
    ----------
    verbose : int, default=0
        Print a summary line when greater than 0.

    Returns
    -------
    dict
        ``seconds`` (wall time), ``compiled`` (kernel signatures compiled now: 0 when the
        cache had them all), ``loaded`` (signatures loaded from the cache) and ``kernels``
        (kernels that have a compiled signature).
    """
    timer = _CompileCounter()
    event.register("numba:compile", timer)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # the synthetic problem is tiny on purpose: size warnings do not apply
            warnings.simplefilter("ignore")
            _run_every_kernel()
    finally:
        event.unregister("numba:compile", timer)
    seconds = time.perf_counter() - t0
    report: dict[str, float | int] = {
        "seconds": seconds,
        "compiled": timer.compiled,
        "loaded": sum(sum(getattr(k, "_cache_hits", {}).values()) for k in _KERNELS),
        "kernels": sum(1 for k in _KERNELS if getattr(k, "signatures", ())),
    }
    if verbose:
        print(
            f"skxmc warmup: {report['kernels']} kernels ready in {seconds:.1f} s "
            f"({report['compiled']} signatures compiled, {report['loaded']} loaded from "
            "the cache)",
            flush=True,
        )
    return report


class _CompileCounter(event.Listener):
    """Counts the skxmc kernel signatures numba compiles while registered."""

    def __init__(self) -> None:
        self.compiled = 0

    def on_start(self, ev: event.Event) -> None:
        func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
        if (getattr(func, "__module__", None) or "").split(".")[0] == _PACKAGE:
            self.compiled += 1

    def on_end(self, ev: event.Event) -> None:
        pass
