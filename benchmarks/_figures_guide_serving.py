"""The numbers in the sentences of ``docs/serving.rst`` (:mod:`benchmarks._figures`): the
server's throughput and CPU (``serve-throughput*.json``) and the ONNX Runtime timings of
``benchmarks/onnx_speed.py`` (``onnx_speed*.json``, whose ``summary`` has one record per
thread count)."""

from __future__ import annotations

from benchmarks._figures import Const, Figure, cell, fig, val

PAGE = "serving.rst"
EXEMPT = {
    ("127.0.0.1", "http://"): "an address",
    ("0.50", "the same ("): (
        "an earlier run's ratio, in the git history of latency.json only; no current file"
    ),
    ("0.49", "0.50 and"): "the same earlier run's other ratio",
    ("2.13", "torch"): "a library version",
    ("1.32", "ONNX Runtime"): "a library version",
    ("1.1", "at most"): 'onnx_speed.json stores the difference as text ("1.1e-06")',
}

SERVE = "serve-throughput"
GREEDY = "serve-throughput-greedy"
ONNX = "onnx_speed"


def _serve(file: str, workers: int, column: str):
    """A column of this checkout's row with ``workers`` and no batching wait."""
    return cell(
        file, column, "serve-throughput", server="this checkout", workers=workers, batch_wait_ms=0.0
    )


def _onnx(file: str, threads: int, column: str):
    return val(file, "summary", {"threads": threads}, column)


FIGURES: tuple[Figure, ...] = (
    # the model's CPU over the server's per text, inverted: the server's over the model's
    fig("serve-cpu-over-model", Const(1) / _serve(SERVE, 2, "cpu ratio"), ".1f"),
    fig("greedy-vs-batch-w1", _serve(GREEDY, 1, "vs batch_all")),
    fig("greedy-vs-batch-w2", _serve(GREEDY, 2, "vs batch_all")),
    fig("onnx-tokens", val(ONNX, "config", "mean tokens per text"), ".1f"),
    *(
        fig(f"onnx-t{t}-{name}", _onnx(ONNX, t, column), spec)
        for t in (1, 2)
        for name, column, spec in (
            ("torch-s", "torch s", ".3f"),
            ("ort-s", "onnxruntime s", ".3f"),
            ("ratio", "torch / onnxruntime", ".2f"),
        )
    ),
    *(
        fig(f"onnx9-t{t}-ratio", _onnx("onnx_speed_repeats9", t, "torch / onnxruntime"))
        for t in (1, 2)
    ),
    *(
        fig(f"tiny-t{t}-ratio", _onnx("onnx_speed_tiny", t, "torch / onnxruntime"), ".1f")
        for t in (1, 2)
    ),
)
