"""``python -m benchmarks._child module:function JSON``: run one measurement in this fresh
interpreter and print its result, with this process's peak RSS, as the last line."""

from __future__ import annotations

import importlib
import json
import sys

from benchmarks._harness import _jsonable, peak_rss_mb


def main() -> None:
    target, kwargs = sys.argv[1], json.loads(sys.argv[2])
    module, function = target.split(":")
    result = getattr(importlib.import_module(module), function)(**kwargs)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result, default=_jsonable))


if __name__ == "__main__":
    main()
