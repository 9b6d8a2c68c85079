"""XRLinearClassifier on a Dask cluster (issue 18, points 3-5).

One ``LocalCluster`` of 2 worker processes with one thread each serves the whole module:
fit and predict inside ``joblib.parallel_config(backend="dask")`` must give the local
model and the local predictions, every layer's data must reach the workers once, and a
worker killed while a layer trains must give either the local model (the scheduler reran
its tasks) or a clear error and no model, never a partial one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

distributed = pytest.importorskip("distributed")
joblib = pytest.importorskip("joblib")

from skxmc import XRLinearClassifier  # noqa: E402
from skxmc.datasets import make_xmc_classification  # noqa: E402
from skxmc.tree import HierarchicalLabelTree  # noqa: E402

from .._helpers import ROOT  # noqa: E402


@pytest.fixture(scope="module")
def client():
    env = dict(os.environ)
    # the workers must import this checkout of skxmc, not another install
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
            env={"PYTHONPATH": env["PYTHONPATH"]},
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        # import skxmc (and load its numba cache) on the workers once, outside the timings
        client.run(lambda: __import__("skxmc.linear._distributed"))
        yield client


@pytest.fixture(scope="module")
def data():
    X, Y = make_xmc_classification(n_samples=1500, n_features=3000, n_labels=300, random_state=0)
    return X[:1200], Y[:1200], X[1200:]


def _estimator(**kw):
    # a 3-layer tree, so that the middle layer has matcher-aware negatives to search
    tree = HierarchicalLabelTree(max_leaf_size=8, branching_factor=4, random_state=0)
    return XRLinearClassifier(tree=tree, random_state=0, top_k=5, **kw)


def _assert_same_model(a: XRLinearClassifier, b: XRLinearClassifier) -> None:
    assert len(a.weights_) == len(b.weights_) >= 3
    for Wa, Wb in zip(a.weights_, b.weights_):
        assert Wa.shape == Wb.shape
        # same sparsity pattern and the same float32 values: each label's solver is
        # seeded on its own, wherever its chunk runs
        np.testing.assert_array_equal(Wa.indptr, Wb.indptr)
        np.testing.assert_array_equal(Wa.indices, Wb.indices)
        np.testing.assert_allclose(Wa.data, Wb.data, rtol=1e-6, atol=0)


@pytest.mark.parametrize("negative_sampling", ["tfn", "tfn+man"])
def test_distributed_fit_equals_local_fit(client, data, negative_sampling):
    X, Y, _ = data
    local = _estimator(negative_sampling=negative_sampling, n_jobs=2).fit(X, Y)
    with joblib.parallel_config(backend="dask"):
        remote = _estimator(negative_sampling=negative_sampling).fit(X, Y)
    _assert_same_model(local, remote)
    assert local.fit_bytes_per_layer_ is None
    sent = remote.fit_bytes_per_layer_
    assert len(sent) == len(remote.weights_)
    # X (and its row norms) went to both workers once, with the first layer
    x_bytes = sum(a.nbytes for a in (X.data, X.indices, X.indptr)) + 8 * X.shape[0]
    assert sent[0]["broadcast"] >= 2 * x_bytes
    if negative_sampling == "tfn":
        # later layers ship their targets and groups only (here far smaller than X)
        assert all(s["broadcast"] < 2 * x_bytes for s in sent[1:])
    assert all(s["from_workers"] > 0 for s in sent)
    if negative_sampling == "tfn+man":
        # the matcher's beams came back from the workers: more than the weights alone
        weights_bytes = sum(W.data.nbytes + W.indices.nbytes for W in remote.weights_[1:])
        assert sum(s["from_workers"] for s in sent[1:]) > weights_bytes


def test_distributed_fit_with_user_negatives_equals_local_fit(client, data):
    # user negatives join the groups of the matcher's beams, which the workers computed
    X, Y, _ = data
    rng = np.random.default_rng(0)
    N = sp.csr_matrix((rng.random(Y.shape) < 0.01).astype(np.float32))
    local = _estimator(negative_sampling="tfn+man", n_jobs=2).fit(X, Y, negatives=N)
    with joblib.parallel_config(backend="dask"):
        remote = _estimator(negative_sampling="tfn+man").fit(X, Y, negatives=N)
    _assert_same_model(local, remote)
    plain = _estimator(negative_sampling="tfn+man", n_jobs=2).fit(X, Y)
    assert any((Wa != Wb).nnz for Wa, Wb in zip(plain.weights_, local.weights_))


def test_distributed_predict_equals_local_predict(client, data):
    X, Y, X_test = data
    clf = _estimator(n_jobs=2).fit(X, Y)
    labels, scores = clf.predict_topk(X_test)
    proba = clf.predict_proba(X_test)
    with joblib.parallel_config(backend="dask"):
        labels_d, scores_d = clf.predict_topk(X_test)
        proba_d = clf.predict_proba(X_test)
    np.testing.assert_array_equal(labels, labels_d)
    np.testing.assert_array_equal(scores, scores_d)
    assert sp.issparse(proba) and (proba != proba_d).nnz == 0


def test_local_prediction_in_row_blocks_is_unchanged(data, monkeypatch):
    from skxmc.linear import _xrlinear

    X, Y, X_test = data
    clf = _estimator(n_jobs=1).fit(X, Y)
    expected = clf.predict_topk(X_test)
    monkeypatch.setattr(_xrlinear, "_PREDICT_BLOCK_ROWS", 37)
    got = clf.predict_topk(X_test)
    np.testing.assert_array_equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])


class _KillOnFirstFitTask(distributed.WorkerPlugin):
    """Ends the worker process (as a crash would) when it starts the first task that trains
    node models; a marker file makes this happen on one worker, once."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key, start, finish, **kwargs):
        name = key[0] if isinstance(key, tuple) else key
        if finish == "executing" and "_fit_chunk_remote" in str(name):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return
            os.close(fd)
            os._exit(1)


def test_killed_worker_is_retried_or_fails_clearly(client, data):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    X, Y, _ = data
    local = _estimator(n_jobs=2).fit(X, Y)
    with tempfile.TemporaryDirectory() as tmp:
        marker = str(Path(tmp) / "killed")
        client.register_plugin(_KillOnFirstFitTask(marker), name="kill-once")
        try:
            clf = _estimator()
            with joblib.parallel_config(backend="dask"):
                try:
                    clf.fit(X, Y)
                except RuntimeError as exc:
                    # the only other acceptable outcome: a clear error, and no model
                    assert "failed on the Dask cluster" in str(exc)
                    assert not hasattr(clf, "weights_")
                else:
                    _assert_same_model(local, clf)
            assert Path(marker).exists(), "no worker was killed: the test tested nothing"
        finally:
            client.unregister_worker_plugin("kill-once")
    client.wait_for_workers(2, timeout=60)


def test_killed_worker_without_retries_fails_clearly(client, data):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    X, Y, _ = data
    scheduler = client.cluster.scheduler
    previous = scheduler.allowed_failures
    scheduler.allowed_failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        marker = str(Path(tmp) / "killed")
        client.register_plugin(_KillOnFirstFitTask(marker), name="kill-once")
        try:
            old = _estimator(n_jobs=2).fit(X[:600], Y[:600])
            old_weights = [W.copy() for W in old.weights_]
            with joblib.parallel_config(backend="dask"):
                with pytest.raises(RuntimeError, match="failed on the Dask cluster while"):
                    old.fit(X, Y)
            # the previous model is untouched (no partial new one)
            assert len(old.weights_) == len(old_weights)
            for W, W0 in zip(old.weights_, old_weights):
                assert (W != W0).nnz == 0
            assert old.fit_bytes_per_layer_ is None
        finally:
            scheduler.allowed_failures = previous
            client.unregister_worker_plugin("kill-once")
    client.wait_for_workers(2, timeout=60)


def test_import_skxmc_does_not_import_dask():
    code = (
        "import sys, skxmc\n"
        "from skxmc import XRLinearClassifier\n"
        "import skxmc.linear\n"
        "bad = [m for m in ('dask', 'distributed') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_local_fit_outside_a_dask_context_keeps_threads(data):
    # a non-dask joblib context is not a cluster
    X, Y, _ = data
    with joblib.parallel_config(backend="threading", n_jobs=2):
        clf = _estimator().fit(X, Y)
    assert clf.fit_bytes_per_layer_ is None
    assert sp.issparse(clf.weights_[0])
