"""MatchXML's stage-level pieces: the module one fine-tuning stage trains, the linear
bootstrap of its label table, refined label embeddings and the joint ranker features."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from .._optional import require_extra

with require_extra("text", "MatchXMLClassifier"):
    import torch
    import torch.nn.functional as F

from .._ranking import truth_hits
from ..linear import LayerGroups, fit_layer
from ..text._classifier import EncoderModule
from ..text._encoder import batched_inference, bundled_minilm_path
from ..text._stream import check_texts
from ..text._tokenize import TokenizedTexts
from ..tree import pifa_embeddings

__all__ = ["DEFAULT_ENCODER", "linear_bootstrap", "refined_label_embeddings"]

#: The default encoder; the ``models`` extra ships the same model (no download needed).
DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"


class _StageModule(torch.nn.Module):
    """What one fine-tuning stage trains: the text encoder and the stage's label table."""

    def __init__(self, text: EncoderModule, n_labels: int, init: np.ndarray) -> None:
        super().__init__()
        self.text = text
        # Sparse gradients: a step touches only its candidates' rows (SparseAdam).
        self.labels = torch.nn.Embedding(n_labels, init.shape[1], sparse=True)
        with torch.no_grad():
            self.labels.weight.copy_(torch.from_numpy(init))

    @property
    def encoder(self) -> torch.nn.Module:
        return self.text.encoder


def _padded_rows(M: sp.csr_matrix, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of a candidate matrix as padded ``(ids, mask, positive)`` arrays; stored value
    2 marks a positive, 1 a negative (see :meth:`MatchXMLClassifier._stage_candidates`)."""
    starts, ends = M.indptr[rows], M.indptr[rows + 1]
    lengths = ends - starts
    width = max(int(lengths.max()) if len(rows) else 0, 1)
    mask = np.arange(width)[None, :] < lengths[:, None]
    gather = (starts[:, None] + np.arange(width)[None, :])[mask]
    ids = np.zeros((len(rows), width), dtype=np.int64)
    positive = np.zeros((len(rows), width), dtype=bool)
    ids[mask] = M.indices[gather]
    positive[mask] = M.data[gather] > 1.5
    return ids, mask, positive


def _normalized_rows(A: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(A, axis=1, keepdims=True)
    return np.divide(A, norms, out=np.zeros_like(A), where=norms > 0)


def _stack_features(
    tfidf: sp.spmatrix,
    sentence: np.ndarray | None,
    fine_tuned: np.ndarray | None,
    weight: float = 1.0,
) -> sp.csr_matrix:
    """MatchXML's ranker features: ``[TF-IDF | sentence]`` (each block and then the stack
    row-normalised), then the normalised fine-tuned embedding times ``weight`` appended
    (left out when ``weight`` is 0)."""
    X = normalize(sp.csr_matrix(tfidf, dtype=np.float32), norm="l2", copy=True)
    if sentence is not None:
        X = normalize(sp.hstack([X, sp.csr_matrix(_normalized_rows(sentence))], format="csr"))
    if fine_tuned is not None and weight > 0:
        block = _normalized_rows(fine_tuned)
        if weight != 1:
            block *= np.float32(weight)
        X = sp.hstack([X, sp.csr_matrix(block)], format="csr")
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    return X


def linear_bootstrap(
    Z: np.ndarray,
    Y_t: sp.spmatrix,
    parents: sp.spmatrix,
    matcher: sp.spmatrix | None = None,
    *,
    Cp: float = 1.0,
    random_state: int = 0,
    n_jobs: int | None = None,
) -> np.ndarray:
    """XR-Transformer's bootstrap of a stage's label table: per node, a linear model of
    the text embeddings, its weight vector L2-normalised as the node's initial row.

    Node ``k`` (a column of ``Y_t``) is an L2-regularised squared-hinge model without bias
    (liblinear's dual coordinate descent, :func:`skxmc.linear._solver.fit_layer`) trained on
    the texts of its parent group: the positives of any sibling (teacher-forcing
    negatives) and the texts whose matcher shortlist holds the parent (matcher-aware
    negatives, ``matcher``), with +1 for the node's positives.

    Parameters
    ----------
    Z : ndarray of shape (n, d)
        Text embeddings.
    Y_t : sparse matrix of shape (n, K)
        The stage's targets (stored entries are positives).
    parents : sparse matrix of shape (K, K_parent)
        Node-to-parent assignment (the tree's cluster matrix of the layer; one column of
        ones for the top layer).
    matcher : sparse matrix of shape (n, K_parent) or None, default=None
        Parents shortlisted for each text (matcher-aware negatives).
    Cp : float, default=1.0
        Cost of the positives (negatives cost 1).
    random_state : int, default=0
        Seeds the coordinate orders.
    n_jobs : int or None, default=None
        Threads (joblib semantics); the result does not depend on it.

    Returns
    -------
    init : ndarray of float32 of shape (K, d)
        Unit rows; zero rows for nodes whose group has no row.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from skxmc.matchxml import linear_bootstrap
    >>> Z = np.array([[1.0, 0.1], [0.9, -0.1], [0.1, 1.0], [-0.1, 0.8]])
    >>> Y = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]]))
    >>> E = linear_bootstrap(Z, Y, sp.csr_matrix(np.ones((2, 1))))
    >>> bool(E[0] @ Z[0] > 0 > E[0] @ Z[2]) and bool(E[1] @ Z[2] > 0 > E[1] @ Z[0])
    True
    """
    Y_t = sp.csr_matrix(Y_t, dtype=np.float32)
    Y_t.eliminate_zeros()
    groups = LayerGroups.from_matrices(Y_t, parents, matcher)
    X = sp.csr_matrix(np.asarray(Z, dtype=np.float32))
    W = fit_layer(
        X,
        Y_t,
        groups,
        Cp=Cp,
        bias=0.0,
        weight_threshold=0.0,
        random_state=random_state,
        n_jobs=n_jobs,
    )
    return _normalized_rows(np.asarray(W[: X.shape[1]].T.toarray(), dtype=np.float32))


def refined_label_embeddings(
    fine_tuned: np.ndarray, Y: sp.csr_matrix, prior: np.ndarray | sp.spmatrix
) -> np.ndarray | sp.csr_matrix:
    """Label embeddings of the ranker's refined tree (reference implementation): PIFA of
    the fine-tuned text embeddings stacked with the preliminary tree's label embeddings
    ``prior``, row-normalised."""
    pifa = pifa_embeddings(fine_tuned, Y)
    if sp.issparse(prior):
        E = sp.hstack([sp.csr_matrix(pifa), prior], format="csr")
    else:
        E = np.hstack([np.asarray(pifa), np.asarray(prior, dtype=np.float32)])
    return normalize(E, norm="l2", copy=False)


def _single_texts(X: Any, owner: str, *, fitting: bool) -> list[str]:
    texts, is_pairs = check_texts(X)
    if is_pairs:
        raise TypeError(
            f"{owner} reads single texts, not text pairs (a two-column DataFrame or (n, 2) "
            f"array is read as pairs; select the text column)."
        )
    if fitting and not texts:
        raise ValueError("X is empty: fit needs at least one text.")
    return texts


def _stage_precision_at_1(
    module: _StageModule, tokens: TokenizedTexts, targets: sp.csr_matrix, batch_size: int
) -> Any:
    """``scoring(trainer)``: the share of texts whose best-scored node of the stage's
    table (cosine of the text and node embeddings) holds one of their labels."""
    targets = sp.csr_matrix(targets, copy=True)
    targets.eliminate_zeros()
    targets.sort_indices()  # what truth_hits reads

    def scoring(trainer: Any) -> float:
        table = F.normalize(module.labels.weight.detach().float(), dim=-1)
        Z = batched_inference(
            module.text.features, tokens, batch_size=batch_size, device=trainer.device
        )
        scores = torch.as_tensor(Z).to(table.device) @ table.T
        best = np.asarray(scores.argmax(dim=1).cpu(), dtype=np.int64)
        return float(truth_hits(best[:, None], targets).mean()) if len(best) else 0.0

    return scoring


def _default_encoder_source(encoder: str | os.PathLike) -> str:
    """Where ``encoder`` loads from: itself, except that the default hub name loads the copy
    installed by the ``models`` extra when there is one."""
    name = os.fspath(encoder)
    if name == DEFAULT_ENCODER and not Path(name).is_dir():
        bundled = bundled_minilm_path()
        if bundled is not None:
            return bundled
    return name
