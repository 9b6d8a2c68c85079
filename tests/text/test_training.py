"""The training engine: gradient accumulation, resume after a kill, callbacks, early
stopping and several processes (gloo on CPU)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from skxmc.exceptions import TrainingInterruptedWarning
from skxmc.text import Callback, EarlyStopping, EpochScoring, LRScheduler, ParamGroup, Trainer

from .._helpers import ROOT

# A small regression problem; the model has dropout and the step draws from trainer.rng,
# so that resuming must restore torch's and the trainer's random states.
_X = torch.from_numpy(np.random.default_rng(0).normal(size=(48, 5)).astype(np.float32))
_Y = _X @ torch.linspace(-1, 1, 5).reshape(5, 1) + 0.1


def _model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Dropout(dropout), nn.Linear(8, 1))


def _trainer(model: nn.Module, **kw) -> Trainer:
    params = {"lr": 0.05, "n_epochs": 3, "device": "cpu", "random_state": 0, "max_grad_norm": None}
    return Trainer(model, [ParamGroup("all", model, lr=params.pop("lr"))], **{**params, **kw})


def _fixed_batches(size: int):
    """Batches in a fixed order per epoch (the epoch's rng decides it)."""

    def data(epoch, rng):
        order = rng.permutation(len(_X))
        return [torch.as_tensor(order[i : i + size]) for i in range(0, len(_X), size)]

    return data


def _mse(model: nn.Module, noisy: Trainer | None = None):
    def step(idx):
        loss = nn.functional.mse_loss(model(_X[idx]), _Y[idx])
        if noisy is not None:  # the step's own sampling, from the checkpointed generator
            loss = loss * (1.0 + 0.01 * float(noisy.rng.random()))
        return loss

    return step


def _weights(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


# Gradient accumulation --------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3])
def test_accumulation_of_k_steps_equals_one_step_of_k_batches(k):
    """k micro-batches of 4 give the same steps as batches of 4k made of them."""
    big, small = _model(), _model()

    def big_batches(epoch, rng):
        parts = _fixed_batches(4)(epoch, rng)
        return [torch.cat(parts[i : i + k]) for i in range(0, len(parts), k)]

    ref = _trainer(big, n_epochs=2).fit(_mse(big), big_batches)
    acc = _trainer(small, n_epochs=2, accumulation_steps=k).fit(_mse(small), _fixed_batches(4))
    assert acc.n_steps == ref.n_steps == 2 * (12 // k)
    assert acc.loss_curve == pytest.approx(ref.loss_curve, rel=1e-5)
    for a, b in zip(_weights(small), _weights(big)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # Without accumulation, the same micro-batches give other (more, smaller) steps.
    plain = _model()
    other = _trainer(plain, n_epochs=2).fit(_mse(plain), _fixed_batches(4))
    assert other.n_steps == 24


def test_accumulation_with_a_short_last_group():
    """5 batches with k=2: steps of 2, 2 and 1 micro-batch (the last loss is not halved)."""
    model = _model()
    batches = [torch.arange(i, i + 8) for i in range(0, 40, 8)]
    result = _trainer(model, n_epochs=1, accumulation_steps=2).fit(_mse(model), batches)
    assert result.n_steps == 3
    ref = _model()
    trainer = _trainer(ref, n_epochs=1)
    merged = [torch.cat(batches[0:2]), torch.cat(batches[2:4]), batches[4]]
    assert trainer.fit(_mse(ref), merged).loss_curve == pytest.approx(result.loss_curve, rel=1e-5)


# Resume after a kill ----------------------------------------------------------------------

_KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {root!r})
from tests.text.test_training import _model, _trainer, _mse, _fixed_batches
model = _model(dropout=0.2)
trainer = _trainer(model, accumulation_steps=2, checkpoint_dir={ckpt!r}, checkpoint_every=1)
inner = _mse(model, trainer)
calls = [0]
def step(batch):
    calls[0] += 1
    if calls[0] == {kill_at}:
        os.kill(os.getpid(), signal.SIGKILL)  # no Ctrl-C handler, no final checkpoint
    return inner(batch)
trainer.fit(step, _fixed_batches(4))
"""


@pytest.mark.slow  # a subprocess importing torch: ~20 s on a busy machine
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_resume_after_a_kill_at_a_random_step_matches_an_uninterrupted_fit(tmp_path):
    full_model = _model(dropout=0.2)
    full_trainer = _trainer(full_model, accumulation_steps=2)
    full = full_trainer.fit(_mse(full_model, full_trainer), _fixed_batches(4))
    # A micro-batch call in steps 2..total (3 epochs of 6 steps of 2 micro-batches).
    kill_at = int(np.random.default_rng(19).integers(3, 2 * full.n_steps))
    script = _KILL_SCRIPT.format(root=str(ROOT), ckpt=str(tmp_path), kill_at=kill_at)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    saved = json.loads((tmp_path / "last" / "trainer_state.json").read_text())
    assert saved["step"] == (kill_at - 1) // 2 and not saved["completed"]

    model = _model(seed=1, dropout=0.2)  # other initial weights: the checkpoint replaces them
    trainer = _trainer(model, accumulation_steps=2, checkpoint_dir=tmp_path, checkpoint_every=1)
    resumed = trainer.fit(_mse(model, trainer), _fixed_batches(4))
    assert resumed.resumed_from == saved["step"] and resumed.n_steps == full.n_steps
    assert resumed.loss_curve == pytest.approx(full.loss_curve, abs=1e-6)
    for a, b in zip(_weights(model), _weights(full_model)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert [e["loss"] for e in resumed.epoch_history] == pytest.approx(
        [e["loss"] for e in full.epoch_history], abs=1e-6
    )


@pytest.mark.parametrize("interrupt_at", [2, 5, 9, 12])
def test_resume_after_ctrl_c_matches_an_uninterrupted_fit(tmp_path, interrupt_at):
    full_model = _model(dropout=0.2)
    full_trainer = _trainer(full_model)
    full = full_trainer.fit(_mse(full_model, full_trainer), _fixed_batches(8))
    model = _model(dropout=0.2)
    trainer = _trainer(model, checkpoint_dir=tmp_path)
    inner, calls = _mse(model, trainer), [0]

    def step(batch):
        calls[0] += 1
        if calls[0] == interrupt_at:
            raise KeyboardInterrupt
        return inner(batch)

    with pytest.warns(TrainingInterruptedWarning):
        part = trainer.fit(step, _fixed_batches(8))
    assert part.n_steps == interrupt_at - 1 and part.stop_reason == "interrupted"
    model = _model(seed=3, dropout=0.2)
    trainer = _trainer(model, checkpoint_dir=tmp_path)
    resumed = trainer.fit(_mse(model, trainer), _fixed_batches(8))
    assert resumed.loss_curve == pytest.approx(full.loss_curve, abs=1e-6)
    for a, b in zip(_weights(model), _weights(full_model)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


# Callbacks --------------------------------------------------------------------------------


class _Recorder(Callback):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __getattribute__(self, attr):
        if attr.startswith("on_"):
            log, name = object.__getattribute__(self, "log"), object.__getattribute__(self, "name")
            return lambda trainer, *args: log.append((name, attr, trainer.state.step))
        return object.__getattribute__(self, attr)


def test_callbacks_fire_in_order():
    log: list = []
    model = _model()
    batches = [torch.arange(i, i + 24) for i in (0, 24)]
    trainer = _trainer(model, n_epochs=2, callbacks=[_Recorder("a", log), _Recorder("b", log)])
    trainer.fit(_mse(model), batches)
    hooks = [h for name, h, _ in log if name == "a"]
    step = ["on_batch_begin", "on_batch_end"]
    epoch = ["on_epoch_begin", *step, *step, "on_epoch_end"]
    assert hooks == ["on_train_begin", *epoch, *epoch, "on_train_end"]
    # Every hook runs on "a" then on "b".
    assert [n for n, _, _ in log] == ["a", "b"] * len(hooks)
    assert [s for n, h, s in log if n == "a" and h == "on_batch_end"] == [1, 2, 3, 4]
    assert [s for n, h, s in log if n == "a" and h == "on_epoch_end"] == [2, 4]


def test_callback_stop_and_custom_lr_schedule():
    model = _model()

    class StopAt(Callback):
        def on_batch_end(self, trainer, record):
            if trainer.state.step == 5:
                trainer.stop()

    seen = []

    class Lr(Callback):
        def on_batch_end(self, trainer, record):
            seen.append(record["lr"])

    schedule = LRScheduler(lambda step, total: 1.0 / (1 + step))
    result = _trainer(model, callbacks=[schedule, StopAt(), Lr()]).fit(
        _mse(model), _fixed_batches(8)
    )
    assert result.n_steps == 5 and result.stop_reason == "callback"
    assert seen == pytest.approx([0.05 / (1 + s) for s in range(5)])


def test_early_stopping_stops_and_restores_the_best_epoch():
    model = _model()
    scores = iter([0.5, 0.9, 0.7, 0.8, 0.6, 1.0, 1.0])
    snapshots = []

    def scoring(trainer):
        snapshots.append(_weights(trainer.module))
        return next(scores)

    callbacks = [EpochScoring(scoring), EarlyStopping(patience=3)]
    result = _trainer(model, n_epochs=7, callbacks=callbacks).fit(_mse(model), _fixed_batches(8))
    # Best at epoch 2; epochs 3, 4 and 5 do not improve: stop after epoch 5.
    assert result.stop_reason == "early_stopping" and result.n_steps == 5 * 6
    assert [e["valid_score"] for e in result.epoch_history] == [0.5, 0.9, 0.7, 0.8, 0.6]
    assert [e["epoch"] for e in result.epoch_history] == [1, 2, 3, 4, 5]
    for a, b in zip(_weights(model), snapshots[1]):
        torch.testing.assert_close(a, b)  # the weights of epoch 2 are back
    assert callbacks[1].best_epoch_ == 2 and callbacks[1].best_score_ == 0.9


def test_early_stopping_needs_its_monitored_value():
    model = _model()
    with pytest.raises(KeyError, match="valid_score"):
        _trainer(model, callbacks=[EarlyStopping()]).fit(_mse(model), _fixed_batches(8))


def test_epoch_history_records_the_mean_loss_of_each_epoch():
    model = _model()
    result = _trainer(model, n_epochs=2).fit(_mse(model), _fixed_batches(8))
    first = [h["loss"] for h in result.history if h["epoch"] == 0]
    assert len(result.epoch_history) == 2 and len(first) == 6
    assert result.epoch_history[0]["loss"] == pytest.approx(np.mean(first))


# Mixed precision --------------------------------------------------------------------------


def test_bf16_autocast_on_cpu():
    model = _model()
    dtypes = []

    def step(idx):
        out = model[0](_X[idx])
        dtypes.append(out.dtype)
        return nn.functional.mse_loss(model[3](model[1](out)).float(), _Y[idx])

    _trainer(model, n_epochs=1, mixed_precision="bf16").fit(step, _fixed_batches(8))
    assert set(dtypes) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_fp16_is_refused_on_cpu():
    model = _model()
    with pytest.raises(ValueError, match="fp16"):
        _trainer(model, mixed_precision="fp16").fit(_mse(model), _fixed_batches(8))


def test_accumulation_steps_is_validated():
    with pytest.raises(ValueError, match="accumulation_steps"):
        _trainer(_model(), accumulation_steps=0)


# Several processes (gloo on CPU) --------------------------------------------------------

_DDP_SCRIPT = """
import json, os, sys
sys.path.insert(0, {root!r})
import torch
from tests.text.test_training import _model, _trainer, _mse, _fixed_batches, _weights, _X
{setup}
model = _model()
trainer = _trainer(model, n_epochs={n_epochs}, accumulation_steps={k})
result = trainer.fit(_mse(model), _fixed_batches({batch}))
if trainer.is_main_process:
    out = {{"loss": result.loss_curve, "n": trainer.num_processes,
           "weights": [w.tolist() for w in _weights(model)]}}
    with open({out!r}, "w") as f:
        json.dump(out, f)
# As a user's launched script should: leave the process group before exiting (otherwise
# gloo's threads can abort the interpreter's teardown, "terminate called without an
# active exception", seen once in CI).
if torch.distributed.is_initialized():
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
# It was still seen again in a later CI run: gloo's worker threads can outlive the group and
# abort the interpreter's finalisation (pytorch/pytorch#179291, an atexit fix proposed and
# withdrawn). The results are written and the group left, so skip finalisation entirely.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def _launch(tmp_path: Path, n_epochs: int, batch: int, k: int = 1, setup: str = "") -> dict:
    out = tmp_path / "ddp.json"
    script = tmp_path / "ddp.py"
    script.write_text(
        _DDP_SCRIPT.format(
            root=str(ROOT),
            out=str(out),
            n_epochs=n_epochs,
            batch=batch,
            k=k,
            setup=textwrap.dedent(setup),
        )
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    proc = subprocess.run([*cmd, str(script)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def _single_process(n_epochs: int, batch: int, k: int) -> tuple[list[float], nn.Module]:
    model = _model()
    result = _trainer(model, n_epochs=n_epochs, accumulation_steps=k).fit(
        _mse(model), _fixed_batches(batch)
    )
    return result.loss_curve, model


@pytest.mark.slow  # two torch processes (gloo): 11-13 s on 2 busy cores
def test_two_processes_match_one_process_with_the_doubled_batch(tmp_path):
    """2 processes x batches of 4 (each takes every other batch) == 1 process taking the
    same batches two at a time (a doubled batch, through accumulation)."""
    ddp = _launch(tmp_path, n_epochs=2, batch=4)
    assert ddp["n"] == 2
    loss, model = _single_process(n_epochs=2, batch=4, k=2)
    assert len(ddp["loss"]) == len(loss) == 12
    np.testing.assert_allclose(ddp["loss"], loss, rtol=1e-4, atol=1e-6)
    for a, b in zip(ddp["weights"], _weights(model)):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_two_processes_with_accumulation_match_one_process_longer_run(tmp_path):
    """A longer run: 2 processes x accumulation 3 x batches of 2 == 1 process x
    accumulation 6, over 10 epochs of AdamW with a warm-up and decay."""
    ddp = _launch(tmp_path, n_epochs=10, batch=2, k=3)
    loss, model = _single_process(n_epochs=10, batch=2, k=6)
    assert len(ddp["loss"]) == len(loss) == 40
    np.testing.assert_allclose(ddp["loss"], loss, rtol=1e-3, atol=1e-5)
    for a, b in zip(ddp["weights"], _weights(model)):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-3, atol=1e-4)


def test_every_engine_function_is_short():
    """Trainer.fit and every function of the engine stay under 60 lines."""
    import ast

    long = []
    for name in ("_training.py", "_callbacks.py", "_estimator.py", "_device.py"):
        path = ROOT / "skxmc" / "text" / name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno >= 60:
                long.append(f"{name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long


# Divergence -------------------------------------------------------------------------------


def test_a_diverged_loss_stops_fit_naming_the_step_and_the_checkpoint(tmp_path):
    """Issue 48 item 2: a NaN loss stops fit at its step, keeps the last good weights and
    says how to resume from the last checkpoint."""
    model = _model()
    trainer = _trainer(model, checkpoint_dir=tmp_path, checkpoint_every=2)
    mse = _mse(model)

    def step(idx):
        loss = mse(idx)
        return loss * float("nan") if trainer.state.step == 4 else loss

    before = {}

    class Keep(Callback):
        def on_batch_end(self, trainer, record):
            before["weights"] = _weights(model)

    trainer.callbacks = [Keep()]
    with pytest.raises(FloatingPointError) as info:
        trainer.fit(step, _fixed_batches(8))
    message = str(info.value)
    assert "loss is nan at optimiser step 5" in message
    assert "keeps the weights of step 4" in message
    assert f"of step 4, is in {tmp_path}" in message and "resume" in message
    for a, b in zip(_weights(model), before["weights"]):
        assert torch.equal(a, b)


def test_non_finite_gradients_stop_fit_before_the_weights_change():
    model = _model()
    trainer = _trainer(model, max_grad_norm=1.0)
    mse = _mse(model)
    # A finite loss whose gradient is infinite (sqrt at 0): the update would write NaN.
    step = lambda idx: mse(idx) + torch.sqrt(model[0].weight[0, 0] * 0.0).sum()  # noqa: E731
    initial = _weights(model)
    with pytest.raises(FloatingPointError, match=r"gradient norm is (inf|nan) at optimiser step 1"):
        trainer.fit(step, _fixed_batches(8))
    for a, b in zip(_weights(model), initial):
        assert torch.equal(a, b)
