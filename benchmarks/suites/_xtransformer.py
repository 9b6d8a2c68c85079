"""PECOS's XR-Transformer (``pecos.xmc.xtransformer``) as the MatchXML suite's peer.

libpecos needs numpy<2 (and XR-Transformer a transformers that still exports
``AdamW``, e.g. 4.46), so it runs in its own interpreter (``--pecos-python`` or
``$SKXMC_PECOS_PYTHON``): :class:`PecosXTransformer` writes the texts, the suite's TF-IDF
features and the label matrix to a folder, and :func:`fit` / :func:`predict` run there
through :func:`benchmarks._harness.in_child`. Only numpy, scipy and pecos are imported
on that side.

Same encoder folder, same texts, same TF-IDF, same token limit, batch size and learning
rate as MatchXML's rows; ``max_steps`` fine-tuning steps per level of the tree, as
MatchXML's ``max_steps`` per stage. Everything else is libpecos's default (its
hierarchical k-means tree on PIFA, its linear ranker on TF-IDF + the fine-tuned
embeddings).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import in_child

__all__ = ["PecosXTransformer", "fit", "pecos_python", "predict"]


def pecos_python(given: str | None = None) -> str | None:
    """The interpreter that has libpecos: ``given``, else ``$SKXMC_PECOS_PYTHON``."""
    path = given or os.environ.get("SKXMC_PECOS_PYTHON")
    return path if path and Path(path).is_file() else None


class PecosXTransformer:
    """``fit`` / ``predict_topk`` of an XR-Transformer trained by libpecos in a child
    interpreter; ``predict_s_`` is the prediction's own time, measured in that child after
    the model is loaded (the interpreter's start-up and the load are not a prediction's
    cost)."""

    def __init__(self, vectorizer: Any, encoder: str, settings: dict, python: str) -> None:
        self.vectorizer, self.encoder, self.settings, self.python = (
            vectorizer,
            encoder,
            settings,
            python,
        )

    def fit(self, X: list[str], y: Any) -> PecosXTransformer:
        import scipy.sparse as sp
        from sklearn.preprocessing import MultiLabelBinarizer

        self._tmp = tempfile.TemporaryDirectory(prefix="skxmc-xtransformer-")
        work = Path(self._tmp.name)
        mlb = MultiLabelBinarizer(sparse_output=True)
        Y = mlb.fit_transform(y).astype("float32").tocsr()
        self.classes_ = mlb.classes_
        sp.save_npz(work / "Y_train.npz", Y)
        sp.save_npz(work / "X_train.npz", self.vectorizer.fit_transform(X).astype("float32"))
        (work / "train.json").write_text(json.dumps(list(X)))
        self.fit_info_ = in_child(
            "benchmarks.suites._xtransformer:fit",
            python=self.python,
            work=str(work),
            encoder=self.encoder,
            **self.settings,
        )
        return self

    def predict_topk(self, X: list[str], k: int) -> tuple[Any, Any]:
        import numpy as np
        import scipy.sparse as sp

        work = Path(self._tmp.name)
        sp.save_npz(work / "X_test.npz", self.vectorizer.transform(X).astype("float32"))
        (work / "test.json").write_text(json.dumps(list(X)))
        info = in_child(
            "benchmarks.suites._xtransformer:predict",
            python=self.python,
            work=str(work),
            k=k,
            threads=self.settings["threads"],
            batch_size=self.settings["batch_size"],
        )
        self.predict_s_ = info["predict_s"]
        with np.load(work / "pred.npz") as pred:
            index, scores = pred["index"], pred["scores"]
        labels = np.where(index >= 0, self.classes_[np.maximum(index, 0)], None)
        return labels, np.where(index >= 0, scores, -np.inf)


# ---------------------------------------------------------------- in libpecos's interpreter


def _threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def fit(
    work: str,
    encoder: str,
    steps: int,
    batch_size: int,
    max_length: int,
    learning_rate: float,
    seed: int,
    threads: int,
) -> dict:
    """Train XR-Transformer on the folder's files and save it in ``work/model``."""
    import numpy as np
    import scipy.sparse as sp
    import torch
    from pecos.xmc.xtransformer.model import XTransformer
    from pecos.xmc.xtransformer.module import MLProblemWithText

    _threads(threads)
    np.random.seed(seed)  # noqa: NPY002 (libpecos may draw from the global state)
    torch.manual_seed(seed)
    folder = Path(work)
    texts = json.loads((folder / "train.json").read_text())
    X = sp.load_npz(folder / "X_train.npz").tocsr()
    Y = sp.load_npz(folder / "Y_train.npz").tocsr()
    matcher = {
        "model_shortcut": encoder,
        "max_steps": steps,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "use_gpu": torch.cuda.is_available(),
        # also the threads of its sparse products (0 divides by zero there)
        "batch_gen_workers": max(1, threads),
        "save_steps": 10**9,
        "logging_steps": 10**9,
    }
    train_params = XTransformer.TrainParams.from_dict({}, recursive=True).to_dict()
    train_params["matcher_params_chain"].update(matcher)
    for indexer in ("preliminary_indexer_params", "refined_indexer_params"):
        train_params[indexer].update({"seed": seed, "threads": threads})
    train_params["ranker_params"]["threads"] = threads
    pred_params = XTransformer.PredParams.from_dict({}, recursive=True).to_dict()
    pred_params["matcher_params_chain"]["truncate_length"] = max_length
    start = time.perf_counter()
    model = XTransformer.train(
        MLProblemWithText(texts, Y, X_feat=X),
        train_params=XTransformer.TrainParams.from_dict(train_params, recursive=True),
        pred_params=XTransformer.PredParams.from_dict(pred_params, recursive=True),
        matmul_threads=threads,
    )
    fit_s = time.perf_counter() - start
    model.save(str(folder / "model"))
    return {"fit_s": fit_s}


def predict(work: str, k: int, threads: int, batch_size: int) -> dict:
    """Top-``k`` of the saved model on ``work``'s test texts, in ``work/pred.npz``."""
    import numpy as np
    import scipy.sparse as sp
    from pecos.xmc.xtransformer.model import XTransformer

    _threads(threads)
    folder = Path(work)
    model = XTransformer.load(str(folder / "model"))
    texts = json.loads((folder / "test.json").read_text())
    X = sp.load_npz(folder / "X_test.npz").tocsr()
    start = time.perf_counter()
    P = model.predict(texts, X_feat=X, only_topk=k, batch_size=batch_size, threads=threads)
    predict_s = time.perf_counter() - start
    P = sp.csr_matrix(P)
    index = np.full((P.shape[0], k), -1, dtype=np.int64)
    scores = np.full((P.shape[0], k), -np.inf, dtype=np.float32)
    for i in range(P.shape[0]):
        row = slice(P.indptr[i], P.indptr[i + 1])
        order = np.argsort(-P.data[row], kind="stable")[:k]
        index[i, : order.size] = P.indices[row][order]
        scores[i, : order.size] = P.data[row][order]
    np.savez(folder / "pred.npz", index=index, scores=scores)
    return {"predict_s": predict_s}
