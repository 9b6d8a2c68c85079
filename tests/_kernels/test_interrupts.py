"""Ctrl-C while compiled kernels run: a KeyboardInterrupt, never a SystemError, a crash or
a model that silently kept going (skxmc._kernels.jit.interruptible)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from skxmc import XRLinearClassifier
from skxmc._kernels.jit import interruptible
from skxmc.datasets import make_xmc_classification


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own SIGINT handler, whatever pytest inherited: a shell without job control
    starts background jobs with SIGINT ignored, and Python then keeps it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_interruptible_holds_sigint_until_the_block_ends():
    reached = False
    with pytest.raises(KeyboardInterrupt):
        with interruptible():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # Python's handler runs here: it only records the signal
            reached = True
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with interruptible():  # nothing received, nothing raised
        pass


def test_interruptible_leaves_a_users_handler_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with interruptible():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_interruptible_is_a_no_op_in_other_threads():
    errors = []

    def work():
        try:
            with interruptible():
                pass
        except Exception as exc:  # signal.signal would raise ValueError off the main thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert errors == []


# one landing point in the default run, the other slow (each case fits three times)
@pytest.mark.parametrize("fraction", [pytest.param(0.3, marks=pytest.mark.slow), 0.6])
def test_ctrl_c_during_a_fit_is_a_keyboard_interrupt(fraction):
    """Before interruptible, a SIGINT landing in the solver's kernels raised
    SystemError ("returned a result with an exception set"), crashed or was lost."""
    # a fit of about a second on a quiet machine: long enough for the timer to land in it
    X, Y = make_xmc_classification(3000, 3000, 400, random_state=0)
    clf = XRLinearClassifier(n_jobs=1, negative_sampling="tfn+man")
    clf.fit(X[:200], Y[:200])  # compiles or loads the kernels
    t0 = time.perf_counter()
    clf.fit(X, Y)
    full = time.perf_counter() - t0
    timer = threading.Timer(fraction * full, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            clf.fit(X, Y)
            time.sleep(2 * full)  # a fit faster than the timer still gets its interrupt here
    finally:
        timer.cancel()
