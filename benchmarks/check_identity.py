"""Bit-identity of XR-Linear's outputs against the reference commit 26aef59.

The package was reorganised after 26aef59 (numba kernels moved to ``skxmc._kernels``, the
solver split by role, ``XRLinearClassifier.fit`` cut into helpers). None of that may change a
single bit of what XR-Linear predicts. This script fits the README's quick-start pipeline
(TF-IDF + ``XRLinearClassifier``) on the shipped demo data and on ``reuters21578_allcats``
and reduces the top-10 labels and scores of the test split to sha256 digests (plus a few
plain values, so that a mismatch says where it is). ``tests/linear/test_identity.py`` compares them
with ``tests/data/identity_26aef59.json``, written by this script at 26aef59.

Usage::

    python benchmarks/check_identity.py            # compare with the stored digests
    python benchmarks/check_identity.py --write    # (re)write them: only at the reference
    python benchmarks/check_identity.py --model    # (re)write tests/data/model_26aef59_xrlinear

The saved model directory (``--model``) is the other half of the check: a model saved by
26aef59 must still load and predict the same top-k (``tests/linear/test_identity.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # check this checkout's skxmc, not whichever one is installed
    sys.path.insert(0, str(ROOT))
REFERENCE = ROOT / "tests" / "data" / "identity_26aef59.json"
MODEL_DIR = ROOT / "tests" / "data" / "model_26aef59_xrlinear"
MODEL_EXPECTED = ROOT / "tests" / "data" / "model_26aef59_xrlinear_expected.json"
K = 10
MODEL_ROWS = 200  # training rows of the saved model: keeps the directory small


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _pipeline():
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc import XRLinearClassifier
    from skxmc.pipeline import make_pipeline

    # The README's quick start.
    return make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
        XRLinearClassifier(n_jobs=2),
    )


def topk_fingerprint(clf, texts) -> dict:
    """Digests of the top-``K`` label indices (into ``classes_``, -1 for empty slots) and
    float32 scores, plus a few values to read when they differ."""
    labels, scores = clf.predict_topk(texts, k=K)
    position = {c: i for i, c in enumerate(clf.classes_)}
    idx = np.array([[position.get(c, -1) for c in row] for row in labels], dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float32)
    return {
        "shape": list(idx.shape),
        "indices_sha256": _sha(idx),
        "scores_sha256": _sha(scores),
        "first_row_indices": idx[0].tolist(),
        "first_row_scores": [float(s) for s in scores[0]],
        "scores_sum": float(np.sum(scores[np.isfinite(scores)], dtype=np.float64)),
    }


def weights_fingerprint(est) -> list[str]:
    """sha256 of every layer's weight matrix (CSR parts), for the report."""
    out = []
    for W in est.weights_:
        W = W.tocsr()
        out.append(_sha(np.concatenate([W.indptr.astype(np.int64), W.indices.astype(np.int64)])))
        out.append(_sha(W.data.astype(np.float32)))
    return out


def fingerprint(name: str) -> dict:
    """Fit the quick-start pipeline on ``name`` ("demo" or a dataset folder) and digest."""
    from skxmc.datasets import get_data_dir, load_demo, load_text_jsonl

    if name == "demo":
        demo = load_demo()
        train = demo.train_texts, demo.train_labels
        test_texts = demo.test_texts
    else:
        folder = get_data_dir(required=True) / name
        train = load_text_jsonl(folder / "train.jsonl.gz")
        test_texts, _ = load_text_jsonl(folder / "test.jsonl.gz")
    clf = _pipeline().fit(*train)
    out = topk_fingerprint(clf, test_texts)
    out["n_classes"] = len(clf.classes_)
    out["weights_sha256"] = weights_fingerprint(clf[-1])
    return out


def model_slice():
    """The 200 training rows and 50 test texts of the saved model (demo data)."""
    from skxmc.datasets import load_demo

    demo = load_demo()
    return demo.train_texts[:MODEL_ROWS], demo.train_labels[:MODEL_ROWS], demo.test_texts[:50]


def write_model() -> None:
    """Save the small reference model and its expected top-k (at the reference commit)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    import skxmc
    from skxmc import XRLinearClassifier
    from skxmc.pipeline import make_pipeline

    texts, labels, test_texts = model_slice()
    clf = make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=3, max_features=1000, dtype=np.float32),
        XRLinearClassifier(n_jobs=1),
    ).fit(texts, labels)
    skxmc.save(clf, MODEL_DIR, overwrite=True)
    MODEL_EXPECTED.write_text(json.dumps(topk_fingerprint(clf, test_texts), indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the reference digests")
    parser.add_argument("--model", action="store_true", help="write the reference model")
    parser.add_argument("--datasets", nargs="+", default=["demo", "reuters21578_allcats"])
    args = parser.parse_args(argv)
    if args.model:
        write_model()
        return 0
    got = {name: fingerprint(name) for name in args.datasets}
    if args.write:
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(json.dumps(got, indent=1) + "\n")
        return 0
    want = json.loads(REFERENCE.read_text())
    bad = [name for name in got if got[name] != want.get(name)]
    for name in got:
        print(f"{name}: {'identical' if name not in bad else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
