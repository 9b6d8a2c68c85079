"""skxmc.save / skxmc.load against skops.io on the same fitted pipeline (issue 47 item 2).

The demo pipeline (TfidfVectorizer + XRLinearClassifier on ``load_demo()``'s training
set) is written and read back once each way, in this process; reported: seconds, bytes
on disk, the types skops needs the user to trust, and whether the reloaded pipelines
predict the same top-10 labels on 50 test texts. Needs ``pip install skops``.

    python benchmarks/persistence_skops.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "persistence_skops.json"


def size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*"))


def main() -> None:
    import skops
    import skops.io as sio
    from sklearn.feature_extraction.text import TfidfVectorizer

    import skxmc
    from skxmc.datasets import load_demo
    from skxmc.pipeline import make_pipeline

    demo = load_demo()
    pipe = make_pipeline(TfidfVectorizer(), skxmc.XRLinearClassifier())
    pipe.fit(demo.train_texts, demo.train_labels)
    queries = demo.test_texts[:50]
    expected = pipe.predict_topk(queries)[0]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        sio.dump(pipe, tmp / "model.skops")
        dump_s = time.perf_counter() - t
        untrusted = sio.get_untrusted_types(file=tmp / "model.skops")
        t = time.perf_counter()
        loaded = sio.load(tmp / "model.skops", trusted=untrusted)
        rows["skops.io"] = {
            "save_s": dump_s,
            "load_s": time.perf_counter() - t,
            "bytes": size(tmp / "model.skops"),
            "types_to_trust": untrusted,
            "same_top10": bool((loaded.predict_topk(queries)[0] == expected).all()),
        }
        for name, options in (("skxmc.load", {}), ("skxmc.load(mmap=True)", {"mmap": True})):
            t = time.perf_counter()
            path = skxmc.save(pipe, tmp / name, overwrite=True)
            save_s = time.perf_counter() - t
            t = time.perf_counter()
            loaded = skxmc.load(path, **options)
            rows[name] = {
                "save_s": save_s,
                "load_s": time.perf_counter() - t,
                "bytes": size(path),
                "types_to_trust": [],
                "same_top10": bool((loaded.predict_topk(queries)[0] == expected).all()),
            }
    for name, row in rows.items():
        print(
            f"{name:24s} save {row['save_s']:6.2f} s  load {row['load_s']:6.2f} s  "
            f"{row['bytes'] / 2**20:6.1f} MiB  same={row['same_top10']}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "command": "python benchmarks/persistence_skops.py",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": sys.version.split()[0],
        "skops": skops.__version__,
        "skxmc": skxmc.__version__,
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
