"""Label trees from PIFA, label2vec and PIFA+label2vec under the same XR-Linear ranker.

MatchXML (Ye et al., 2024, Table XII) reports that a hierarchical label tree built from
label2vec embeddings (Skip-gram over the labels of each instance) is at least as good as
one built from PIFA (sums of TF-IDF rows) for the downstream ranker, and better on large
label sets. This script checks the claim on our text datasets with everything but the
tree's label embeddings fixed:

* features: ``TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2,
  max_features=200000, dtype=float32)`` fitted on train (cached under
  ``benchmarks/results/cache/``);
* labels: the training labels define the label space (test / dev labels never seen in
  training count as misses);
* ranker: ``XRLinearClassifier(n_jobs=2)`` with its defaults, and a tree template
  ``HierarchicalLabelTree(label_embedding=E, random_state=<the seed XRLinearClassifier
  derives from random_state=0>, n_jobs=2)`` (defaults: ``branching_factor=16``,
  ``max_leaf_size=100``), where ``E`` is

  - ``pifa``: :func:`skxmc.tree.pifa_embeddings` with its defaults (sparse; checked to give
    the tree of ``label_embedding="pifa"``);
  - ``label2vec``: ``Label2VecTransformer(n_jobs=1, random_state=0, **chosen).fit(Y)``,
    window = the largest label set (the paper's rule), other parameters at their defaults
    (the paper's: 100 dimensions, 20 negatives, 20 epochs, no subsampling, lr 0.025 ->
    1e-4);
  - ``pifa+label2vec``: the row-normalised concatenation of both (what
    ``label_embedding="pifa+label2vec"`` computes; MatchXML's refined tree).

Settings chosen before looking at test scores. The only label2vec setting the paper
tunes per dataset besides the window and the epochs is the negative-sampling exponent
(Table II: 0.5, 1.0, -0.5, -1.0). On ``tibkat_gnd_en``, which has a dev split, each of
these four values trains a ranker whose dev score (mean of P@1, P@3, P@5) picks the
value; the test set is then predicted once with the chosen value. ``reuters21578_allcats``
has no dev split: it uses the default (0.5) without any selection.

Reported per dataset and embedding (x100 for metrics): P@1/3/5 and PSP@1/3/5
(``skxmc.metrics.evaluate``, inverse propensities from the training labels with A=0.55,
B=1.5, un-normalised), the time to compute the embeddings (label2vec: training, one gensim
thread), the time to cluster them into the tree, the XR-Linear training (which rebuilds
the same tree inside ``fit``) and prediction times, the size in MB of the label embeddings
as stored (CSR: data + indices + indptr; dense: the float32 array), and two tree
diagnostics on the training labels: the share of co-occurring label pairs that share a
leaf cluster, and the mean number of distinct leaf clusters per training instance.

Seed sensitivity, after the choice of settings: the test scores of PIFA and of the chosen
label2vec with the other seeds of ``--extra-seeds`` (default 1 2; seed of the tree's
2-means and of label2vec), and paired-bootstrap intervals of the test differences to PIFA.

Run (7 to 13 minutes on 2 shared cores, plus a minute for the TF-IDF features the first
time)::

    python benchmarks/label_trees.py
    python benchmarks/label_trees.py --datasets reuters21578_allcats   # under a minute

Prints a markdown table and writes ``benchmarks/results/label_trees.{json,md}``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from _common import RESULTS, markdown_table, write_results  # noqa: E402

from skxmc import HierarchicalLabelTree, XRLinearClassifier  # noqa: E402
from skxmc.datasets import load_text_jsonl  # noqa: E402
from skxmc.label2vec import Label2VecTransformer  # noqa: E402
from skxmc.labels import LabelSpace, encode_labels  # noqa: E402
from skxmc.metrics import evaluate, inverse_propensity  # noqa: E402
from skxmc.tree import pifa_embeddings  # noqa: E402

DATA_DIR = Path(os.environ.get("SKXMC_DATA", REPO_ROOT.parent / "shared" / "data"))
CACHE = RESULTS / "cache"
DATASETS = ("tibkat_gnd_en", "reuters21578_allcats")
TFIDF_PARAMS = dict(sublinear_tf=True, ngram_range=(1, 2), min_df=2, max_features=200000)
NS_EXPONENTS = (0.5, 1.0, -0.5, -1.0)  # the values of the paper's Table II
DEFAULT_NS_EXPONENT = 0.5
THREADS = 2
KS = (1, 3, 5)


# ----------------------------------------------------------------------------- data


def _save_csr(out: dict, name: str, M: sp.csr_matrix) -> None:
    out.update(
        {
            f"{name}_data": M.data,
            f"{name}_indices": M.indices,
            f"{name}_indptr": M.indptr,
            f"{name}_shape": np.asarray(M.shape),
        }
    )


def _load_csr(npz: Any, name: str) -> sp.csr_matrix:
    return sp.csr_matrix(
        (npz[f"{name}_data"], npz[f"{name}_indices"], npz[f"{name}_indptr"]),
        shape=tuple(int(v) for v in npz[f"{name}_shape"]),
    )


def prepare(name: str) -> dict[str, Any]:
    """TF-IDF features (cached) and label lists of every split of one dataset."""
    folder = DATA_DIR / name
    splits = [s for s in ("train", "dev", "test") if (folder / f"{s}.jsonl.gz").is_file()]
    if "train" not in splits or "test" not in splits:
        raise FileNotFoundError(f"{folder} lacks train.jsonl.gz / test.jsonl.gz")
    data = {s: load_text_jsonl(folder / f"{s}.jsonl.gz") for s in splits}
    stamp = ";".join(f"{s}:{(folder / f'{s}.jsonl.gz').stat().st_size}" for s in splits) + repr(
        sorted(TFIDF_PARAMS.items())
    )
    key = hashlib.sha256(stamp.encode()).hexdigest()[:10]
    path = CACHE / f"label_trees_{name}_{key}.npz"
    out: dict[str, Any] = {"splits": splits}
    if path.is_file():
        with np.load(path) as npz:
            for s in splits:
                out[f"X_{s}"] = _load_csr(npz, s)
        out["tfidf_s"] = None  # features read from the cache
    else:
        from sklearn.feature_extraction.text import TfidfVectorizer

        t0 = time.perf_counter()
        vec = TfidfVectorizer(**TFIDF_PARAMS, dtype=np.float32)
        out["X_train"] = vec.fit_transform(data["train"][0])
        for s in splits[1:]:
            out[f"X_{s}"] = vec.transform(data[s][0])
        out["tfidf_s"] = time.perf_counter() - t0
        CACHE.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        for s in splits:
            _save_csr(arrays, s, out[f"X_{s}"])
        np.savez(path, **arrays)
    for s in splits:
        out[f"X_{s}"].sort_indices()
        out[f"labels_{s}"] = data[s][1]
    return out


# ----------------------------------------------------------------------------- helpers


def csr_mb(M: sp.csr_matrix) -> float:
    return (M.data.nbytes + M.indices.nbytes + M.indptr.nbytes) / 2**20


def tree_diagnostics(Y: sp.csr_matrix, leaves: np.ndarray) -> dict[str, float]:
    """Share of co-occurring label pairs in one leaf; distinct leaves per instance."""
    n_leaves = int(leaves.max()) + 1
    C = sp.csr_matrix(
        (np.ones(len(leaves)), (np.arange(len(leaves)), leaves)), shape=(len(leaves), n_leaves)
    )
    M = (Y @ C).tocsr()  # labels of each instance per leaf
    k = np.diff(Y.indptr).astype(np.float64)
    pairs = float((k * (k - 1)).sum())
    same = float((M.data * (M.data - 1)).sum())
    labelled = k > 0
    return {
        "pairs_same_leaf_pct": 100.0 * same / pairs if pairs else float("nan"),
        "leaves_per_instance": float(np.diff(M.indptr)[labelled].mean()),
    }


def per_instance(Y_true: sp.csr_matrix, idx: np.ndarray, inv_prop: np.ndarray) -> np.ndarray:
    """Per-instance P@k and PSP@k (x100), columns in the order of ``metric_names()``."""
    n, k_max = idx.shape
    rows = np.repeat(np.arange(n), k_max)
    cols = idx.ravel()
    valid = cols >= 0
    hit = np.zeros(n * k_max)
    hit[valid] = np.asarray(Y_true[rows[valid], cols[valid]]).ravel()
    hit = hit.reshape(n, k_max)
    gain = hit * np.where(idx >= 0, inv_prop[np.maximum(idx, 0)], 0.0)
    out = [100 * hit[:, :k].sum(axis=1) / k for k in KS]
    out += [100 * gain[:, :k].sum(axis=1) / k for k in KS]
    return np.stack(out, axis=1)


def metric_names() -> list[str]:
    return [f"P@{k}" for k in KS] + [f"PSP@{k}" for k in KS]


def scores(
    Y_true: sp.csr_matrix, clf: XRLinearClassifier, X: sp.csr_matrix, inv_prop: np.ndarray
) -> tuple[dict[str, float], float, np.ndarray]:
    t0 = time.perf_counter()
    pred = clf.predict_topk(X, k=max(KS))
    seconds = time.perf_counter() - t0
    res = evaluate(Y_true, pred, ks=KS, inv_propensity=inv_prop)
    out = {}
    for k in KS:
        out[f"P@{k}"] = 100 * res[f"precision@{k}"]
        out[f"PSP@{k}"] = 100 * res[f"psprecision@{k}"]
    values = per_instance(Y_true, np.asarray(pred[0]), inv_prop)
    assert np.allclose(values.mean(axis=0), [out[m] for m in metric_names()])
    return out, seconds, values


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n_boot: int = 1000) -> dict[str, Any]:
    """Mean difference ``a - b`` per metric with a 95% paired-bootstrap interval."""
    rng = np.random.RandomState(0)
    diff = a - b
    boots = np.stack(
        [diff[rng.randint(0, len(diff), len(diff))].mean(axis=0) for _ in range(n_boot)]
    )
    lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
    return {
        m: {"diff": float(diff[:, j].mean()), "ci95": [float(lo[j]), float(hi[j])]}
        for j, m in enumerate(metric_names())
    }


def fit_ranker(E: Any, X: sp.csr_matrix, Y: sp.csr_matrix, seed: int) -> tuple[Any, dict]:
    """Cluster ``E`` (timed alone), then train XR-Linear with that tree template."""
    template = HierarchicalLabelTree(label_embedding=E, random_state=seed, n_jobs=THREADS)
    t0 = time.perf_counter()
    tree = HierarchicalLabelTree(label_embedding=E, random_state=seed, n_jobs=THREADS)
    tree.fit(None, Y)
    cluster_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    clf = XRLinearClassifier(tree=template, n_jobs=THREADS).fit(X, Y)
    train_s = time.perf_counter() - t0
    assert np.array_equal(clf.tree_.leaf_assignment_, tree.leaf_assignment_)
    info = {
        "cluster_s": cluster_s,
        "xrlinear_train_s": train_s,
        "tree_layers": [C.shape[0] for C in tree.cluster_chain_],
        **tree_diagnostics(Y, tree.leaf_assignment_),
    }
    return clf, info


def label2vec(Y: sp.csr_matrix, ns_exponent: float, seed: int = 0) -> tuple[np.ndarray, dict]:
    t0 = time.perf_counter()
    l2v = Label2VecTransformer(ns_exponent=ns_exponent, n_jobs=1, random_state=seed).fit(Y)
    seconds = time.perf_counter() - t0
    return l2v.embeddings_, {
        "embed_s": seconds,
        "window": l2v.window_,
        "labels_without_vector": len(l2v.unseen_labels_),
        "embedding_mb": l2v.embeddings_.nbytes / 2**20,
    }


def concat(P: sp.csr_matrix, V: np.ndarray) -> tuple[sp.csr_matrix, float]:
    """What ``label_embedding="pifa+label2vec"`` builds (tested equal in test_tree.py)."""
    from sklearn.preprocessing import normalize

    t0 = time.perf_counter()
    E = normalize(sp.hstack([P, sp.csr_matrix(V)], format="csr", dtype=np.float32))
    E.sort_indices()
    return E, time.perf_counter() - t0


def warm_up() -> None:
    """Compile the numba kernels and import gensim outside every timing."""
    rng = np.random.RandomState(0)
    X = sp.random(300, 50, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    Y = sp.random(300, 40, density=0.05, format="csr", random_state=rng, dtype=np.float32)
    Y.data[:] = 1
    tree = HierarchicalLabelTree(max_leaf_size=4, n_jobs=THREADS)
    XRLinearClassifier(tree=tree, n_jobs=THREADS).fit(X, Y).predict_topk(X, k=5)
    Label2VecTransformer(epochs=1).fit(Y)


# ----------------------------------------------------------------------------- main


def run_dataset(name: str, log: Any, extra_seeds: tuple[int, ...] = ()) -> dict[str, Any]:
    data = prepare(name)
    Y_train, classes = encode_labels(data["labels_train"], name="Y_train")
    space = LabelSpace(classes)
    evals = [s for s in ("dev", "test") if s in data["splits"]]
    Y_eval = {s: space.transform(data[f"labels_{s}"]).Y for s in evals}
    X_train = data["X_train"]
    inv_prop = inverse_propensity(Y_train)
    seed = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))  # XRLinear's
    summary = {
        "dataset": name,
        "n_train": X_train.shape[0],
        "n_features": X_train.shape[1],
        "n_labels": len(classes),
        "splits": data["splits"],
        "tfidf_s": data["tfidf_s"],
        "max_labels_per_instance": int(np.diff(Y_train.indptr).max()),
        "avg_labels_per_instance": float(np.diff(Y_train.indptr).mean()),
        # label2vec vectors of these labels get no training pair (random vectors)
        "labels_without_cooccurrence": int(
            len(classes) - len(np.unique(Y_train[np.diff(Y_train.indptr) > 1].indices))
        ),
        "labels_with_one_positive": int((np.bincount(Y_train.indices) == 1).sum()),
    }
    log(f"{name}: {summary}")
    rows: list[dict[str, Any]] = []

    per_test: dict[str, np.ndarray] = {}

    def evaluate_on(clf: Any, row: dict, splits: list[str]) -> None:
        for s in splits:
            metrics, seconds, values = scores(Y_eval[s], clf, data[f"X_{s}"], inv_prop)
            row[s] = metrics
            row[f"predict_{s}_s"] = seconds
            if s == "test":
                per_test[row["embedding"]] = values
            log(
                f"  {row['embedding']} {row.get('ns_exponent', '')} {s}: "
                + " ".join(f"{k} {v:.2f}" for k, v in metrics.items())
            )

    # PIFA
    t0 = time.perf_counter()
    P = pifa_embeddings(X_train, Y_train)
    pifa_row = {"embedding": "pifa", "embed_s": time.perf_counter() - t0, "embedding_mb": csr_mb(P)}
    clf, info = fit_ranker(P, X_train, Y_train, seed)
    pifa_row.update(info)
    same = HierarchicalLabelTree(random_state=seed, n_jobs=THREADS).fit(X_train, Y_train)
    assert np.array_equal(same.leaf_assignment_, clf.tree_.leaf_assignment_), (
        "pifa_embeddings' defaults no longer match label_embedding='pifa'"
    )
    evaluate_on(clf, pifa_row, evals)
    rows.append(pifa_row)

    # label2vec: choose ns_exponent on dev (when there is one)
    candidates = NS_EXPONENTS if "dev" in evals else (DEFAULT_NS_EXPONENT,)
    selection = []
    best = None
    for ns in candidates:
        V, l2v_info = label2vec(Y_train, ns)
        clf, info = fit_ranker(V, X_train, Y_train, seed)
        row = {"embedding": "label2vec", "ns_exponent": ns, **l2v_info, **info}
        evaluate_on(clf, row, ["dev"] if "dev" in evals else [])
        crit = float(np.mean([row["dev"][f"P@{k}"] for k in KS])) if "dev" in evals else 0.0
        selection.append({"ns_exponent": ns, "dev_mean_P@1-3-5": crit, "dev": row.get("dev")})
        if best is None or crit > best[0]:
            best = (crit, ns, V, clf, row)
    _, ns_best, V, clf, l2v_row = best
    log(f"  chosen ns_exponent: {ns_best}")
    evaluate_on(clf, l2v_row, ["test"])
    l2v_row["chosen_on"] = "dev" if "dev" in evals else "default (no dev split)"
    rows.append(l2v_row)

    # PIFA + label2vec (with the chosen label2vec vectors)
    E, concat_s = concat(P, V)
    row = {
        "embedding": "pifa+label2vec",
        "ns_exponent": ns_best,
        "embed_s": pifa_row["embed_s"] + l2v_row["embed_s"] + concat_s,
        "embedding_mb": csr_mb(E),
    }
    clf, info = fit_ranker(E, X_train, Y_train, seed)
    row.update(info)
    evaluate_on(clf, row, evals)
    rows.append(row)
    for r in rows[1:]:
        r["test_minus_pifa"] = paired_bootstrap(per_test[r["embedding"]], per_test["pifa"])

    # Seed sensitivity (after the choice; never used to choose): other seeds of the tree's
    # 2-means (PIFA) and of label2vec + the tree (label2vec).
    seed_runs = {"pifa": [rows[0]["test"]], "label2vec": [l2v_row["test"]]}
    for extra in extra_seeds:
        tree_seed = int(np.random.RandomState(extra).randint(np.iinfo(np.int32).max))
        clf, _ = fit_ranker(P, X_train, Y_train, tree_seed)
        seed_runs["pifa"].append(scores(Y_eval["test"], clf, data["X_test"], inv_prop)[0])
        V_seed, _ = label2vec(Y_train, ns_best, seed=extra)
        clf, _ = fit_ranker(V_seed, X_train, Y_train, tree_seed)
        seed_runs["label2vec"].append(scores(Y_eval["test"], clf, data["X_test"], inv_prop)[0])
        log(
            f"  seed {extra}: pifa P@1 {seed_runs['pifa'][-1]['P@1']:.2f}, label2vec P@1 "
            f"{seed_runs['label2vec'][-1]['P@1']:.2f}"
        )
    return {
        **summary,
        "extra_seeds": list(extra_seeds),
        "seed_runs": seed_runs,
        "ns_selection": selection,
        "chosen_ns_exponent": ns_best,
        "rows": rows,
    }


def table(results: list[dict[str, Any]]) -> str:
    columns = [
        "dataset",
        "labels",
        "embedding",
        "ns_exp",
        *(f"P@{k}" for k in KS),
        *(f"PSP@{k}" for k in KS),
        "embed s",
        "cluster s",
        "XR-Linear train s",
        "emb. MB",
        "pairs in leaf %",
        "leaves/inst.",
    ]
    flat = []
    for res in results:
        for r in res["rows"]:
            flat.append(
                {
                    "dataset": res["dataset"],
                    "labels": res["n_labels"],
                    "embedding": r["embedding"],
                    "ns_exp": str(r.get("ns_exponent", "")),
                    **{k: f"{v:.2f}" for k, v in r["test"].items()},
                    "embed s": f"{r['embed_s']:.2f}",
                    "cluster s": f"{r['cluster_s']:.2f}",
                    "XR-Linear train s": f"{r['xrlinear_train_s']:.1f}",
                    "emb. MB": f"{r['embedding_mb']:.1f}",
                    "pairs in leaf %": f"{r['pairs_same_leaf_pct']:.1f}",
                    "leaves/inst.": f"{r['leaves_per_instance']:.2f}",
                }
            )
    lines = [
        "Test set (x100). Label trees: branching 16, leaves <= 100 labels; ranker "
        "XRLinearClassifier(n_jobs=2) defaults; label2vec one thread.",
        "",
        markdown_table(flat, columns),
    ]
    diffs = []
    for res in results:
        for r in res["rows"][1:]:
            diffs.append(
                {
                    "dataset": res["dataset"],
                    "embedding": r["embedding"],
                    **{
                        m: f"{d['diff']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
                        for m, d in r["test_minus_pifa"].items()
                    },
                }
            )
    lines += [
        "",
        "Test difference to the PIFA tree (x100), with 95% paired-bootstrap "
        "intervals over test instances (1000 resamples; the tree and ranker are "
        "fixed, so this is test-sampling noise only):",
        "",
        markdown_table(diffs, ["dataset", "embedding", *metric_names()]),
    ]
    if any(len(res["seed_runs"]["pifa"]) > 1 for res in results):
        spread = []
        for res in results:
            for emb, runs in res["seed_runs"].items():
                spread.append(
                    {
                        "dataset": res["dataset"],
                        "embedding": emb,
                        "seeds": len(runs),
                        **{
                            m: f"{np.mean([r[m] for r in runs]):.2f} "
                            f"({min(r[m] for r in runs):.2f}-{max(r[m] for r in runs):.2f})"
                            for m in metric_names()
                        },
                    }
                )
        lines += [
            "",
            "Seed sensitivity on test (x100): mean (min-max) over the seeds "
            "(0 and --extra-seeds) of the tree's 2-means and, for label2vec, of "
            "label2vec itself; run after the choice of settings:",
            "",
            markdown_table(spread, ["dataset", "embedding", "seeds", *metric_names()]),
        ]
    for res in results:
        if len(res["ns_selection"]) > 1:
            lines += [
                "",
                f"{res['dataset']}: label2vec ns_exponent chosen on dev "
                f"(mean of P@1/3/5): "
                + ", ".join(
                    f"{s['ns_exponent']}: {s['dev_mean_P@1-3-5']:.2f}" for s in res["ns_selection"]
                )
                + f" -> {res['chosen_ns_exponent']}",
            ]
        dev_rows = [r for r in res["rows"] if "dev" in r]
        if dev_rows and len(res["ns_selection"]) > 1:
            lines += [
                "",
                f"{res['dataset']} dev set (x100):",
                "",
                markdown_table(
                    [
                        {
                            "embedding": r["embedding"],
                            **{k: f"{v:.2f}" for k, v in r["dev"].items()},
                        }
                        for r in dev_rows
                    ],
                    ["embedding", *(f"P@{k}" for k in KS), *(f"PSP@{k}" for k in KS)],
                ),
            ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument(
        "--extra-seeds",
        type=int,
        nargs="*",
        default=[1, 2],
        help="seeds of the seed-sensitivity runs (test only, after the choice of settings)",
    )
    args = parser.parse_args()
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:7.1f}s] {msg}", flush=True)

    warm_up()
    log("warm-up done (numba kernels compiled, gensim imported)")
    results = [run_dataset(name, log, tuple(args.extra_seeds)) for name in args.datasets]
    md = table(results)
    print(md)
    write_results(
        "label_trees",
        {
            "settings": {
                "tfidf": TFIDF_PARAMS,
                "threads": THREADS,
                "ks": KS,
                "ns_exponent_candidates": NS_EXPONENTS,
                "selection": "dev mean of P@1, P@3, P@5 (datasets with a dev split)",
                "total_s": time.perf_counter() - start,
            },
            "results": results,
        },
        md,
    )


if __name__ == "__main__":
    main()
