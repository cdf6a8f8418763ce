"""The scheduler attributes of BMv2 host processes (p4cc.hostcc.sched): a short
EEVDF slice or SCHED_RR, set by the host wrapper on itself before it starts a thread.

Attributes are set in threads the test starts (they die with the thread), or in a
subprocess, never on pytest's own thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from p4cc.experiment.bmv2.launch import host_sched_args
from p4cc.experiment.bmv2.limits import HOST_RT_PRIO, HOST_SLICE_S, HOST_SWITCH_INTERVAL_S
from p4cc.hostcc import sched

needs_slices = pytest.mark.skipif(
    sched.slice_of() is None or os.uname().machine not in ("x86_64", "aarch64"),
    reason="this kernel shows no se.slice in /proc/self/sched (EEVDF, Linux >= 6.6), "
    "or no sched_setattr number is known for this machine")


def in_thread(fn: Callable[[], Any]) -> Any:
    out: list[Any] = []
    err: list[BaseException] = []

    def body() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test's thread
            err.append(exc)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


@needs_slices
def test_requested_slice_is_what_the_kernel_gives_and_threads_inherit_it() -> None:
    def body() -> tuple[float | None, tuple[int, int], float | None]:
        before = sched.slice_of("thread-self")
        sched.request_slice(2e-4)
        child: list[float | None] = []
        t = threading.Thread(target=lambda: child.append(sched.slice_of("thread-self")))
        t.start()
        t.join()
        return before, sched.get_slice_ns(), child[0]

    before, (policy, runtime_ns), child = in_thread(body)
    assert before is not None and before != pytest.approx(2e-4)
    assert policy == sched.SCHED_OTHER and runtime_ns == 200_000
    assert child == pytest.approx(2e-4)  # a thread started afterwards has it too
    assert sched.slice_of("thread-self") == pytest.approx(before)  # the test's: untouched


def test_slice_outside_the_kernels_range_is_refused() -> None:
    for bad in (5e-5, 0.2):
        with pytest.raises(ValueError, match="outside the kernel's"):
            sched.request_slice(bad)


@needs_slices
def test_apply_host_sched_reports_what_it_did() -> None:
    line = in_thread(lambda: sched.apply_host_sched(1e-4, 0))
    assert line == "scheduling: slice 0.1 ms requested, kernel slice 0.1 ms"
    assert in_thread(lambda: sched.apply_host_sched(0.0, 0)) == "scheduling: kernel defaults"


@pytest.mark.root
def test_round_robin_thread() -> None:
    if os.geteuid() != 0:
        pytest.skip("SCHED_RR needs root (CAP_SYS_NICE)")
    line = in_thread(lambda: (sched.apply_host_sched(1e-4, 1),
                              os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))
    assert line == ("scheduling: SCHED_RR priority 1", os.SCHED_RR, 1)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test's thread: untouched


def test_a_refused_attribute_is_a_sched_error() -> None:
    with pytest.raises(sched.SchedError, match="SCHED_RR priority 0: Invalid argument"):
        in_thread(lambda: sched.set_round_robin(0))  # RR needs 1-99, even for root


def test_backend_passes_the_limits_to_every_host_wrapper() -> None:
    args = host_sched_args()
    assert args == ["--slice-ms", f"{HOST_SLICE_S * 1e3:g}", "--rt-prio", str(HOST_RT_PRIO),
                    "--switch-interval-ms", f"{HOST_SWITCH_INTERVAL_S * 1e3:g}"]
    assert sched.MIN_SLICE_S <= HOST_SLICE_S <= sched.MAX_SLICE_S or HOST_SLICE_S == 0


def _wrapper(tmp_path: Path, *opts: str) -> subprocess.CompletedProcess[str]:
    go = tmp_path / "go"
    go.write_text(json.dumps(0.0))  # t0 in the past: run at once
    return subprocess.run(
        [sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
         str(tmp_path / "ready"), "--go", str(go), *opts, "--", "host", "send", "--cc",
         "nosuch", "--dst", "10.0.0.1", "--size", "1"],
        capture_output=True, text=True, timeout=60)


@needs_slices
def test_wrapper_sets_its_slice_and_says_so(tmp_path: Path) -> None:
    p = _wrapper(tmp_path, "--slice-ms", "0.1", "--switch-interval-ms", "0.5")
    assert "scheduling: slice 0.1 ms requested, kernel slice 0.1 ms" in p.stderr
    assert p.returncode == 2  # then runs p4cc host send, which refuses the bad --cc


@pytest.mark.parametrize(("opts", "msg"), [
    (("--slice-ms", "0.05"), "--slice-ms 0.05: the kernel takes 0.1-100 ms"),
    (("--rt-prio", "100"), "--rt-prio 100: real-time priorities are 1-99")])
def test_wrapper_refuses_bad_scheduling_options(tmp_path: Path, opts: tuple[str, str],
                                                msg: str) -> None:
    p = _wrapper(tmp_path, *opts)
    assert p.returncode == 2 and msg in p.stderr
    assert not (tmp_path / "ready").exists()  # refused before it said ready


def test_wrapper_goes_on_when_the_kernel_refuses(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from p4cc.experiment.bmv2 import hosts

    def refuse(_slice_s: float, _prio: int) -> str:
        raise sched.SchedError(1, "sched_setattr: Operation not permitted")

    monkeypatch.setattr(sched, "apply_host_sched", refuse)
    old = sys.getswitchinterval()
    try:
        hosts._schedule_self(1e-4, 0, 1e-3)
        assert sys.getswitchinterval() == pytest.approx(1e-3)
    finally:
        sys.setswitchinterval(old)
    assert "scheduling: kept the kernel's defaults" in capsys.readouterr().err
