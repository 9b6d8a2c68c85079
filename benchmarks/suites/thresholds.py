"""Choosing the decision rule on held-out data (issue 48 item 8): best fixed ``top_k`` vs
one global score threshold vs per-label thresholds, for XR-Linear on ``tibkat_gnd_en``.

The ranker is fitted on train (TF-IDF as in the ``linear`` suite); each rule is chosen on
the dev split (sample F1, the metric a thresholding user tunes) and reported on test:
sample F1, the predicted set's precision and recall, labels per row, empty rows, and the
ranker's P@1/3/5 (which no decision rule changes). The score is ``predict_proba``
(XR-Linear's l3-hinge path score) over the labels the beam reaches; labels of dev/test
unseen in train count as misses. Rules:

* ``top_k``: the k best labels of each row, k in 1..10 chosen on dev;
* ``global threshold``: ``predict_proba >= t``, one t for all labels (the ``threshold``
  parameter), chosen on dev over a grid of 70 values from 0.001 to 0.95;
* ``global threshold + top-1``: the same, but every row keeps at least its best label
  (no empty rows), t re-chosen on dev;
* ``per-label thresholds (m)``: the global threshold, except for labels with at least m
  positives in dev, which get the grid threshold that maximises their own F1 on dev
  (``threshold=`` array);
* the two defaults, for reference: threshold 0.5 (``"auto"`` for a dense indicator) and
  ``top_k=10`` (``"auto"`` for label sets).

``--quick``: the first 800 train / 200 dev / 200 test records, one pass.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from benchmarks import _data

SEEDS = (0,)
DATASET = "tibkat_gnd_en"
# Geometric below 0.2: XR-Linear's path scores of relevant labels are often small.
GRID = np.unique(np.concatenate([np.geomspace(0.001, 0.2, 40), np.linspace(0.2, 0.95, 31)]))
MIN_POSITIVES = (1, 3, 5)
COLUMNS = [
    "rule",
    "chosen on dev",
    "dev sample F1",
    "test sample F1",
    "test sample precision",
    "test sample recall",
    "test labels per row",
    "test empty rows",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-jobs", type=int, default=2)


def truth_over(classes: np.ndarray, labels: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """Indicator over ``classes`` and, per row, the labels outside them (misses)."""
    from skxmc.labels import LabelSpace

    enc = LabelSpace(classes).transform(labels)
    return enc.Y.tocsr(), enc.n_unknown


def sample_prf(pred: sp.csr_matrix, truth: sp.csr_matrix, unknown: np.ndarray) -> dict:
    """Sample-averaged F1, precision and recall (sklearn's ``average="samples"``, with 0
    for a row that predicts nothing), and labels per row."""
    pred = sp.csr_matrix(pred, dtype=np.float32)
    pred.data[:] = 1
    hits = np.asarray(pred.multiply(truth).sum(axis=1)).ravel()
    n_pred = np.diff(pred.indptr)
    n_true = np.diff(truth.indptr) + unknown
    f1 = np.divide(2 * hits, n_pred + n_true, out=np.zeros_like(hits), where=n_pred + n_true > 0)
    prec = np.divide(hits, n_pred, out=np.zeros_like(hits), where=n_pred > 0)
    rec = np.divide(hits, n_true, out=np.zeros_like(hits), where=n_true > 0)
    return {
        "sample_f1": float(f1.mean()),
        "sample_precision": float(prec.mean()),
        "sample_recall": float(rec.mean()),
        "labels_per_row": float(n_pred.mean()),
        "empty_rows": float((n_pred == 0).mean()),
    }


def top_k_of(P: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """The ``k`` best entries of each row (ties: the lower column)."""
    P = sp.csr_matrix(P)
    keep = np.zeros(P.nnz, dtype=bool)
    for i in range(P.shape[0]):
        lo, hi = P.indptr[i], P.indptr[i + 1]
        order = np.lexsort((P.indices[lo:hi], -P.data[lo:hi]))[:k]
        keep[lo + order] = True
    out = P.copy()
    out.data = np.where(keep, out.data, 0)
    out.eliminate_zeros()
    return out


def above(P: sp.csr_matrix, t: float | np.ndarray, keep_best: bool = False) -> sp.csr_matrix:
    thr = t if np.isscalar(t) else t[P.indices]
    keep = P.data >= thr
    if keep_best:  # each row's best entry too
        for i in range(P.shape[0]):
            lo, hi = P.indptr[i], P.indptr[i + 1]
            if hi > lo:
                keep[lo + int(np.argmax(P.data[lo:hi]))] = True
    out = P.copy()
    out.data = np.where(keep, out.data, 0)
    out.eliminate_zeros()
    return out


def per_label_thresholds(
    P: sp.csr_matrix, truth: sp.csr_matrix, global_t: float, min_positives: int
) -> np.ndarray:
    """Per label, the grid threshold with the best F1 of that label on dev, for labels with
    at least ``min_positives`` dev positives; ``global_t`` for the others."""
    n_labels = P.shape[1]
    thresholds = np.full(n_labels, global_t)
    Pc, Tc = P.tocsc(), truth.tocsc()
    positives = np.diff(Tc.indptr)
    for j in np.flatnonzero(positives >= min_positives):
        rows = Pc.indices[Pc.indptr[j] : Pc.indptr[j + 1]]
        scores = Pc.data[Pc.indptr[j] : Pc.indptr[j + 1]]
        is_pos = np.isin(rows, Tc.indices[Tc.indptr[j] : Tc.indptr[j + 1]])
        best, best_f1 = global_t, -1.0
        for t in GRID:
            chosen = scores >= t
            tp = int((chosen & is_pos).sum())
            f1 = 2 * tp / (int(chosen.sum()) + int(positives[j]))
            if f1 > best_f1 + 1e-12:
                best, best_f1 = t, f1
        thresholds[j] = best
    return thresholds


def run(args: argparse.Namespace) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc import XRLinearClassifier
    from skxmc.metrics import precision_at_k

    if _data.data_dir() is None or not (_data.data_dir() / DATASET / "dev.jsonl.gz").is_file():
        print(f"{DATASET}: data absent, skipped")
        return {"config": {}, "tables": [], "runs": []}
    d = _data.text_parts(DATASET, quick=args.quick)
    (tr_x, tr_y), (dv_x, dv_y), (te_x, te_y) = d["train"], d["dev"], d["test"]
    start = time.perf_counter()
    vec = TfidfVectorizer(**_data.TFIDF, dtype=np.float32)
    X_tr = vec.fit_transform(tr_x)
    X_dv, X_te = vec.transform(dv_x), vec.transform(te_x)
    clf = XRLinearClassifier(n_jobs=args.n_jobs, random_state=args.seeds[0]).fit(X_tr, tr_y)
    fit_s = time.perf_counter() - start
    P_dv = sp.csr_matrix(clf.predict_proba(X_dv))
    P_te = sp.csr_matrix(clf.predict_proba(X_te))
    T_dv, U_dv = truth_over(clf.classes_, dv_y)
    T_te, U_te = truth_over(clf.classes_, te_y)
    ranking = {
        f"P@{k}": precision_at_k(te_y, clf.predict_topk(X_te, k=k), k=k, classes=clf.classes_)
        for k in (1, 3, 5)
    }
    rows: list[dict] = []

    def report(name: str, chosen: str, dev_pred: sp.csr_matrix, test_pred: sp.csr_matrix):
        test = sample_prf(test_pred, T_te, U_te)
        rows.append(
            {
                "rule": name,
                "chosen on dev": chosen,
                "dev sample F1": sample_prf(dev_pred, T_dv, U_dv)["sample_f1"],
                "test sample F1": test["sample_f1"],
                "test sample precision": test["sample_precision"],
                "test sample recall": test["sample_recall"],
                "test labels per row": test["labels_per_row"],
                "test empty rows": test["empty_rows"],
                "seed": args.seeds[0],
            }
        )
        print(f"{name}: test sample F1 {test['sample_f1']:.3f}", flush=True)

    by_k = {k: sample_prf(top_k_of(P_dv, k), T_dv, U_dv)["sample_f1"] for k in range(1, 11)}
    k_best = max(by_k, key=by_k.get)
    report("top_k", f"k={k_best}", top_k_of(P_dv, k_best), top_k_of(P_te, k_best))
    by_t = {float(t): sample_prf(above(P_dv, t), T_dv, U_dv)["sample_f1"] for t in GRID}
    t_best = max(by_t, key=by_t.get)
    report("global threshold", f"t={t_best:.3f}", above(P_dv, t_best), above(P_te, t_best))
    by_t1 = {float(t): sample_prf(above(P_dv, t, True), T_dv, U_dv)["sample_f1"] for t in GRID}
    t1 = max(by_t1, key=by_t1.get)
    report("global threshold + top-1", f"t={t1:.3f}", above(P_dv, t1, True), above(P_te, t1, True))
    for m in MIN_POSITIVES:
        thr = per_label_thresholds(P_dv, T_dv, t_best, m)
        n_own = int((thr != t_best).sum())
        report(
            f"per-label thresholds (m={m})",
            f"{n_own} labels own t, others t={t_best:.3f}",
            above(P_dv, thr),
            above(P_te, thr),
        )
    report("threshold 0.5 (auto, dense Y)", "-", above(P_dv, 0.5), above(P_te, 0.5))
    report("top_k=10 (auto, label sets)", "-", top_k_of(P_dv, 10), top_k_of(P_te, 10))
    caption = (
        f"{DATASET}: {len(tr_x)} train / {len(dv_x)} dev / {len(te_x)} test records, "
        f"{len(clf.classes_)} labels seen in train; XRLinearClassifier() on TF-IDF; fit "
        f"{fit_s:.0f} s. The ranker on test (every rule): "
        + ", ".join(f"{k} {v:.4f}" for k, v in ranking.items())
        + ". Rules chosen on dev by sample F1."
    )
    return {
        "config": {
            "dataset": DATASET,
            "grid": [float(t) for t in GRID],
            "min_positives": list(MIN_POSITIVES),
            "fit_seconds": fit_s,
            "ranker_test": ranking,
            "dev_sample_f1_by_top_k": by_k,
            "dev_sample_f1_by_threshold": by_t,
            "dev_sample_f1_by_threshold_top1": by_t1,
        },
        "tables": [
            {
                "title": "Decision rules chosen on dev",
                "caption": caption,
                "columns": COLUMNS,
                "rows": rows,
                "digits": {c: 3 for c in COLUMNS[2:]},
            }
        ],
        "runs": rows,
    }
