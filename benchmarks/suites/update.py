"""Adding rows to a fitted XR-Linear model (issue 49 item 2): ``update`` against a full
refit, on ``tibkat_gnd_en``.

Protocol, for each seed s of ``--seeds`` and each share f of ``--fractions``: TF-IDF as
in the ``linear`` suite (``_data.TFIDF``), fitted on all of train. A share f of the
training rows is drawn uniformly at random (seed s) and held out; the training set of
"today" is the kept rows (in their order) followed by the held-out ones. The base model
``XRLinearClassifier(n_jobs=--threads, random_state=s)`` is fitted on the kept rows;
``update(X_today, Y_today)`` then adds the held-out rows (timed alone, on a copy of the
base model, once with ``scope="groups"`` and once with ``scope="labels"``); the full
refit is the same estimator fitted on today's set (timed). Scored on ``--split``
(``dev`` by default, where the refit threshold of ``skxmc/linear/_update.py`` was
chosen; ``test`` for the reported figures):

- ``P@1`` / ``P@5``: precision at 1 and 5 (x100) over all labels;
- ``P@5 gap``: the model's P@5 minus the full refit's, per seed;
- ``nodes``: the share of the tree's nodes retrained (1 for a fit);
- ``seconds``: the update call or the fit (wall); ``time ratio`` / ``cpu ratio``: wall /
  process CPU seconds over the full refit's of the same seed; ``drift``:
  ``update_drift_``, the share of today's rows the tree was not built on.

Labels that occur only in held-out rows are dropped from every row (the base model must
know every label; adding labels is ``add_labels``, the ``add-labels`` suite).

``--quick``: 800 train / 200 dev records, seed 0 only.
"""

from __future__ import annotations

import argparse
import pickle
from typing import Any

import numpy as np

from benchmarks import _data
from benchmarks._harness import Clock, summarise

SEEDS = (0, 1, 2)
DATASET = "tibkat_gnd_en"
THREADS = 2
FRACTIONS = (0.1,)
METRICS = ("P@1", "P@5", "P@5 gap", "nodes", "seconds", "time ratio", "cpu ratio", "drift")
COLUMNS = ["new rows", "model", *METRICS]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument(
        "--fractions",
        type=float,
        nargs="+",
        default=list(FRACTIONS),
        help="shares of the training rows held out and added (default: 0.1)",
    )
    parser.add_argument(
        "--split",
        choices=("dev", "test"),
        default="dev",
        help="the split scored (default: dev, where the refit threshold was chosen; test "
        "for the reported figures)",
    )


def _scores(clf: Any, X: Any, y_true: list) -> dict[str, float]:
    top, _ = clf.predict_topk(X, k=5)
    p1, p5 = [], []
    for row, labels in zip(top, y_true):
        truth = set(labels)
        ranked = [lab for lab in row.tolist() if lab is not None and lab == lab]
        p1.append(len(set(ranked[:1]) & truth))
        p5.append(len(set(ranked[:5]) & truth) / 5)
    return {"P@1": 100 * float(np.mean(p1)), "P@5": 100 * float(np.mean(p5))}


def run(args: argparse.Namespace) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from skxmc import XRLinearClassifier

    split = getattr(args, "split", "dev")
    if _data.data_dir() is None or not (_data.data_dir() / DATASET / f"{split}.jsonl.gz").is_file():
        print(f"{DATASET}: data absent, skipped")
        return {"config": {}, "tables": [], "runs": []}
    seeds = args.seeds[:1] if args.quick else args.seeds
    d = {
        part: (X, [list(labels) for labels in y])
        for part, (X, y) in _data.text_parts(DATASET, ("train", split), args.quick).items()
    }
    (tr_x, tr_y), (ev_x, ev_y) = d["train"], d[split]
    vec = TfidfVectorizer(**_data.TFIDF, dtype=np.float32)
    X_tr = vec.fit_transform(tr_x)
    X_ev = vec.transform(ev_x)
    n = X_tr.shape[0]
    # numba's kernels compiled (or loaded from the cache) outside the timings
    XRLinearClassifier(n_jobs=args.threads).fit(X_tr[:300], tr_y[:300])
    runs: list[dict] = []
    for seed in seeds:
        for fraction in args.fractions:
            rng = np.random.RandomState(seed)
            held = np.zeros(n, bool)
            held[rng.choice(n, max(1, round(fraction * n)), replace=False)] = True
            kept_rows, new_rows = np.flatnonzero(~held), np.flatnonzero(held)
            known = {lab for i in kept_rows for lab in tr_y[i]}
            order = np.concatenate([kept_rows, new_rows])
            X_today = X_tr[order]
            y_today = [[lab for lab in tr_y[i] if lab in known] for i in order]
            k = len(kept_rows)
            full = XRLinearClassifier(n_jobs=args.threads, random_state=seed)
            with Clock() as clock:
                full.fit(X_today, y_today)
            full_s, full_cpu = clock.wall_s, clock.cpu_s
            n_nodes = sum(C.shape[0] for C in full.tree_.cluster_chain_)
            base = XRLinearClassifier(n_jobs=args.threads, random_state=seed)
            with Clock() as clock:
                base.fit(X_today[:k], y_today[:k])
            base_s, base_cpu = clock.wall_s, clock.cpu_s
            key = {"new rows": f"{fraction:.0%} ({len(new_rows)} rows)", "seed": seed}
            ref = _scores(full, X_ev, ev_y)
            rows = {
                "full refit": (full, full_s, full_cpu, 1.0, 0.0),
                "fit on the old rows only": (base, base_s, base_cpu, 1.0, 0.0),
            }
            for scope in ("groups", "labels"):
                clf = pickle.loads(pickle.dumps(base))
                with Clock() as clock:
                    clf.update(X_today, y_today, scope=scope)
                share = sum(clf.nodes_updated_) / sum(C.shape[0] for C in clf.tree_.cluster_chain_)
                rows[f'+ update(scope="{scope}")'] = (
                    clf,
                    clock.wall_s,
                    clock.cpu_s,
                    share,
                    clf.update_drift_,
                )
            for name, (clf, wall, cpu, share, drift) in rows.items():
                scores = ref if clf is full else _scores(clf, X_ev, ev_y)
                record = {**key, "model": name, **scores, "P@5 gap": scores["P@5"] - ref["P@5"]}
                record.update(seconds=wall, cpu_s=cpu, nodes=share, drift=drift)
                record.update({"time ratio": wall / full_s, "cpu ratio": cpu / full_cpu})
                runs.append(record)
                print(
                    f"seed {seed}, {fraction:.0%} new rows, {name}: P@1 {scores['P@1']:.2f} "
                    f"P@5 {scores['P@5']:.2f} ({record['P@5 gap']:+.2f}), {wall:.1f} s "
                    f"({wall / full_s:.3f} of the refit, CPU {cpu / full_cpu:.3f}), nodes "
                    f"{share:.3f}, drift {drift:.3f}",
                    flush=True,
                )
            del full, base, rows
            print(f"({n_nodes} nodes in the refit's tree)", flush=True)
    table_rows = summarise(runs, ["new rows", "model"], METRICS)
    caption = (
        f"{DATASET}: {n} train / {len(ev_x)} {split} records. "
        f"XRLinearClassifier(n_jobs={args.threads}) on TF-IDF; a random share of the "
        f"training rows held out, the model fitted on the rest, then update(all rows) "
        f"with either scope, against a full refit on all rows. {split.capitalize()} "
        f"P@1 / P@5 x100; P@5 gap: minus the refit's, per seed; nodes: share of the "
        f"tree's nodes retrained. seconds: the update call or the fit (wall); time ratio "
        f"and cpu ratio: their quotients of wall and process CPU seconds over the "
        f"refit's, per seed (the machine is shared: wall times vary with the load); "
        f"drift: update_drift_, the share of the rows the tree was not built on."
    )
    return {
        "config": {
            "dataset": DATASET,
            "threads": args.threads,
            "fractions": list(args.fractions),
            "split": split,
        },
        "tables": [
            {
                "title": "update vs full refit",
                "caption": caption,
                "columns": COLUMNS,
                "rows": table_rows,
                "digits": {
                    "P@1": 2,
                    "P@5": 2,
                    "P@5 gap": 2,
                    "nodes": 3,
                    "seconds": 1,
                    "time ratio": 3,
                    "cpu ratio": 3,
                    "drift": 3,
                },
            }
        ],
        "runs": runs,
    }
