"""SenderConfig.start_rt_prio: the sending thread runs SCHED_RR only while the next thing
it waits for is a flow's start (p4cc.hostcc.sched.StartBoost), and goes back to the
policy, nice value and slice it had.  Attributes are changed in threads the test starts,
never on pytest's own thread."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from fixed_cc import Fixed
from test_bmv2_sched import in_thread, needs_slices

from p4cc.errors import ConfigError
from p4cc.hostcc import sched
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")


def test_priority_zero_never_touches_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_a: Any) -> None:
        raise AssertionError("called")

    monkeypatch.setattr(sched, "set_round_robin", fail)
    b = sched.StartBoost(0)
    b.set(True)
    assert not b.boosted and b.boosts == 0 and b.error is None


def test_bad_priorities_are_refused() -> None:
    with pytest.raises(ValueError, match="outside 1-99"):
        sched.StartBoost(100)
    with pytest.raises(ConfigError, match="start_rt_prio=-1"):
        SenderConfig(start_rt_prio=-1)


def test_a_refusal_switches_the_boost_off_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def refuse(prio: int, tid: int = 0) -> None:
        calls.append(prio)
        raise sched.SchedError(1, "SCHED_RR priority 1: Operation not permitted")

    monkeypatch.setattr(sched, "set_round_robin", refuse)
    b = sched.StartBoost(1)

    def body() -> None:
        for want in (True, False, True):
            b.set(want)

    in_thread(body)
    assert calls == [1] and not b.boosted and b.boosts == 0
    assert b.error is not None and "Operation not permitted" in b.error


@pytest.mark.root
@needs_root
@needs_slices
def test_boost_and_back_keeps_nice_and_slice() -> None:
    def body() -> list[tuple[int, int, float | None]]:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 3)
        sched.request_slice(3e-4)
        b = sched.StartBoost(2)
        seen = []
        for want in (True, True, False, True, False):
            b.set(want)
            seen.append((os.sched_getscheduler(0), os.sched_getparam(0).sched_priority,
                         sched.slice_of("thread-self")))
        seen.append((os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), b.boosts,
                     None))
        return seen

    seen = in_thread(body)
    rr, other = (os.SCHED_RR, 2), (os.SCHED_OTHER, 0)
    assert [s[:2] for s in seen[:5]] == [rr, rr, other, rr, other]
    assert seen[2][2] == pytest.approx(3e-4) and seen[4][2] == pytest.approx(3e-4)
    assert seen[5][:2] == (3, 2)  # nice kept; boosted twice


def _fixed(_spec: FlowSpec) -> Any:
    return Fixed(1e8)


@pytest.mark.root
@needs_root
def test_sender_boosts_before_each_start_and_ends_unboosted() -> None:
    """Three flows 0.1 s apart, boosted 20 ms before each start: once per start (the
    flow's passes after it started run at the thread's own policy until the next start is
    20 ms away), and not boosted when the sender closes."""
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        specs = [FlowSpec("127.0.0.1", 3000, start_s=0.1 * (i + 1), port=rx.port)
                 for i in range(3)]
        tx = Sender(specs, _fixed, SenderConfig(pkt_bytes=1000, start_rt_prio=1,
                                                            start_rt_lead_s=0.02)).start()
        assert tx.wait(10)
        tx.stop()
    finally:
        rx.stop()
    assert all(r["completed"] for r in tx.records())
    assert tx.boost.error is None and not tx.boost.boosted
    assert tx.boost.boosts == 3


@pytest.mark.root
@needs_root
def test_also_boosts_the_thread_the_caller_waits_for() -> None:
    """The pacer's thread goes real-time and back with the sending thread; one that ended
    meanwhile is skipped when the boost ends."""
    go, done = threading.Event(), threading.Event()
    tids: list[int] = []

    def helper() -> None:
        tids.append(threading.get_native_id())
        go.set()
        done.wait(10)

    h = threading.Thread(target=helper)
    h.start()
    go.wait(10)
    b = sched.StartBoost(1)
    b.also(tids[0])

    def body() -> list[int]:
        b.set(True)
        seen = [os.sched_getscheduler(tids[0])]
        b.set(False)
        seen.append(os.sched_getscheduler(tids[0]))
        b.set(True)
        done.set()
        h.join()
        b.set(False)  # the helper's thread is gone
        return seen

    try:
        assert in_thread(body) == [os.SCHED_RR, os.SCHED_OTHER]
    finally:
        done.set()
        h.join()
    assert b.error is None and b.boosts == 2 and not b.boosted


def test_cli_options_reach_the_sender_config() -> None:
    from p4cc.experiment.bmv2.hosts import host_parser
    from p4cc.experiment.bmv2.launch import HOST_START_RT_LEAD_S, HOST_START_RT_PRIO
    from p4cc.hostcc.cli_config import sender_config
    from p4cc.scale import get_scale

    def cfg(*extra: str) -> SenderConfig:
        args = host_parser().parse_args(["host", "send", "--dst", "10.0.0.1", "--size", "1",
                                         *extra])
        return sender_config(args, get_scale("testbed"))

    assert (cfg().start_rt_prio, cfg().start_rt_lead_s) == (0, SenderConfig().start_rt_lead_s)
    c = cfg("--start-rt-prio", str(HOST_START_RT_PRIO), "--start-rt-lead",
            f"{HOST_START_RT_LEAD_S:g}")
    assert (c.start_rt_prio, c.start_rt_lead_s) == (HOST_START_RT_PRIO, HOST_START_RT_LEAD_S)
    assert cfg().chain_rt and not cfg("--no-chain-rt").chain_rt
    with pytest.raises(ConfigError, match="start_rt_lead_s=-1"):
        cfg("--start-rt-lead", "-1")
