"""A SIGTERM whose Terminated is lost inside a ctypes callback (numba compiling the
simulator's kernels: CI's failure of test_an_interrupted_sweep_starts_no_further_run,
session 18) is raised again at the run's next checkpoint, or when the run ends."""

from __future__ import annotations

import ctypes
import os
import signal
import time

import pytest

from p4cc.experiment import runner

CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int)
#: ctypes reports the lost exception as unraisable: that loss is what these tests make
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _term_inside_a_ctypes_callback() -> None:
    def cb() -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the handler runs here, in the callback
            if runner._PENDING:
                break
        return 0

    CALLBACK(cb)()  # ctypes prints "Exception ignored ..." and returns


def test_a_lost_sigterm_is_raised_at_the_next_checkpoint() -> None:
    with pytest.raises(runner.Terminated), runner.sigterm_as_interrupt():
        _term_inside_a_ctypes_callback()
        assert runner._PENDING  # the first raise was lost
        runner.raise_if_terminated()
        pytest.fail("not reached")
    assert not runner._PENDING
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # restored


def test_a_lost_sigterm_without_a_checkpoint_is_raised_at_the_end() -> None:
    with pytest.raises(runner.Terminated), runner.sigterm_as_interrupt():
        _term_inside_a_ctypes_callback()
    assert not runner._PENDING


def test_no_signal_no_raise() -> None:
    with runner.sigterm_as_interrupt():
        runner.raise_if_terminated()
    assert not runner._PENDING
