"""Build the libpecos fixture of ``tests/io/test_pecos.py`` in ``tests/data/pecos_tiny``.

Run from the repository root with an interpreter that has libpecos (it needs numpy<2 and
scipy<1.14, so not skxmc's environment)::

    python3 -m venv /work/pecos-venv
    /work/pecos-venv/bin/pip install "numpy<2" libpecos
    /work/pecos-venv/bin/python scripts/make_pecos_fixture.py

It trains a tiny ``XLinearModel`` (50 labels, 3 layers) on synthetic sparse data (seed 0),
saves its folder as ``tests/data/pecos_tiny/model`` with ``XLinearModel.save``, and writes
the test queries (``queries.npz``) and libpecos's top-k predictions on them for each
post-processor skxmc supports (``expected.npz``: ``{post_processor}_indices`` and
``{post_processor}_scores``, best first, at the beam size and top-k stored in the folder).
The script imports nothing from skxmc, and skxmc's tests never import libpecos.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from pecos.xmc import Indexer, LabelEmbeddingFactory
from pecos.xmc.xlinear.model import XLinearModel

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "pecos_tiny"
SEED = 0
N_LABELS, N_FEATURES, N_TRAIN, N_TEST = 50, 300, 400, 40
BEAM_SIZE, TOP_K = 3, 5
POST_PROCESSORS = ("l3-hinge", "sigmoid", "noop")


def synthetic(rng: np.random.Generator, n: int, protos: sp.csr_matrix, noise: float):
    """Rows of 1 to 3 labels (labels of one group of five co-occur), each row the sum of
    its labels' sparse prototypes plus random noise features, L2-normalised."""
    rows, labels = [], []
    for _ in range(n):
        group = rng.integers(N_LABELS // 5)
        picked = np.unique(5 * group + rng.choice(5, size=rng.integers(1, 4), replace=False))
        x = np.asarray(protos[picked].sum(axis=0)).ravel()
        x[rng.choice(N_FEATURES, size=6, replace=False)] += noise * rng.random(6)
        rows.append(x / np.linalg.norm(x))
        labels.append(picked)
    X = sp.csr_matrix(np.array(rows, dtype=np.float32))
    Y = sp.lil_matrix((n, N_LABELS), dtype=np.float32)
    for i, picked in enumerate(labels):
        Y[i, picked] = 1.0
    return X, Y.tocsr()


def main() -> None:
    rng = np.random.default_rng(SEED)
    protos = sp.random(
        N_LABELS, N_FEATURES, density=0.03, random_state=SEED, dtype=np.float32, format="csr"
    )
    X_tr, Y_tr = synthetic(rng, N_TRAIN, protos, noise=0.5)
    X_te, _ = synthetic(rng, N_TEST, protos, noise=1.5)

    pifa = LabelEmbeddingFactory.create(Y_tr, X_tr, method="pifa")
    chain = Indexer.gen(
        pifa, indexer_type="hierarchicalkmeans", nr_splits=4, max_leaf_size=4, seed=SEED
    )
    model = XLinearModel.train(
        X_tr, Y_tr, C=chain, beam_size=BEAM_SIZE, only_topk=TOP_K, post_processor="l3-hinge"
    )
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    model.save(str(OUT / "model"))
    sp.save_npz(OUT / "queries.npz", X_te, compressed=False)

    expected = {}
    for post in POST_PROCESSORS:
        P = model.predict(X_te, post_processor=post, threads=1).tocsr()
        idx = np.full((N_TEST, TOP_K), -1, dtype=np.int64)
        val = np.full((N_TEST, TOP_K), -np.inf, dtype=np.float32)
        for i in range(N_TEST):
            row = P[i]
            order = np.argsort(-row.data, kind="stable")
            idx[i, : len(order)] = row.indices[order]
            val[i, : len(order)] = row.data[order]
            ties = np.diff(val[i, : len(order)]) == 0
            if ties.any():
                print(f"{post}: row {i} has tied scores {val[i]} (order is arbitrary there)")
        expected[f"{post}_indices"] = idx
        expected[f"{post}_scores"] = val
    np.savez(OUT / "expected.npz", **expected)
    layers = [model.model.model_chain[d].C.shape for d in range(model.model.depth)]
    (OUT / "README.md").write_text(
        "Made by `scripts/make_pecos_fixture.py` (libpecos "
        f"{__import__('pecos').__version__}); do not edit by hand.\n\n"
        f"- `model/`: an `XLinearModel` folder, {N_LABELS} labels, {N_FEATURES} features, "
        f"cluster chain shapes {layers}, beam {BEAM_SIZE}, top {TOP_K}, l3-hinge.\n"
        f"- `queries.npz`: {N_TEST} test rows (CSR float32).\n"
        "- `expected.npz`: libpecos's top-k on them per post-processor "
        "(`{pp}_indices`, `{pp}_scores`, best first).\n",
        encoding="utf-8",
    )
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(json.dumps({"layers": layers, "bytes": size}))


if __name__ == "__main__":
    main()
