"""Build the demo data shipped in ``skxmc/data`` from the staged TIBKAT set.

Run from the repository root: ``python scripts/make_demo_data.py``. Reads
``$SKXMC_DATA/tibkat_gnd_en`` (or ``../shared/data/tibkat_gnd_en``) and writes a fixed random
subset (seed 0) of the train and test splits, keeping only ``text``, ``labels`` and ``id``.
The source is licensed CC BY-SA 4.0, so the subset is redistributed under the same licence
with attribution (``skxmc/data/README.md``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from skxmc.datasets import get_data_dir

N_TRAIN, N_TEST, SEED = 6000, 1500, 0
OUT = Path(__file__).resolve().parents[1] / "skxmc" / "data"


def main() -> None:
    source = get_data_dir(required=True) / "tibkat_gnd_en"
    rng = np.random.default_rng(SEED)
    for split, n in (("train", N_TRAIN), ("test", N_TEST)):
        with gzip.open(source / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh]
        keep = np.sort(rng.choice(len(records), size=n, replace=False))
        out = OUT / f"tibkat_demo_{split}.jsonl.gz"
        # mtime=0 keeps the file byte-identical across rebuilds.
        with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for i in keep:
                r = records[i]
                line = json.dumps({"text": r["text"], "labels": r["labels"], "id": r["id"]})
                gz.write((line + "\n").encode("utf-8"))
        print(f"{out}: {n} of {len(records)} records, {out.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
