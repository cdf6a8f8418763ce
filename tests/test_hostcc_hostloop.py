"""A host's receiver and sender in one event loop (p4cc.hostcc.hostloop), on loopback.

No root: userspace pacing, UDP sockets on 127.0.0.1.  A host that sends to its own
receiver completes its flows only if the one loop serves both sockets.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import api
from p4cc.hostcc.hostloop import HostLoop, HostLoopConfig, completed_flows
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig
from p4cc.hostcc.trace import read_records
from p4cc.scale import Scale

pytest.importorskip("p4cc.hostcc.cc", reason="CC cores not installed")


def _rx() -> Receiver:
    return Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).open()


def _tx(rx: Receiver, sizes: list[int], out: Path | None = None, cc: str = "fixed:20e6",
        stagger: float = 0.02) -> Sender:
    specs = [api.as_spec(("127.0.0.1", s, i * stagger, cc, rx.port))
             for i, s in enumerate(sizes)]
    return Sender(specs, api.controller_factory(Scale()), SenderConfig(), out)


def test_one_loop_sends_to_its_own_receiver(tmp_path: Path) -> None:
    rx = _rx()
    tx = _tx(rx, [150_000, 60_000, 90_000], tmp_path / "send", cc="dcqcn")
    threads = threading.active_count()
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # how many threads the process has while the loop runs
        while not stop.wait(0.01):
            seen.append(threading.active_count())
    w = threading.Thread(target=watch)
    w.start()
    try:
        res = HostLoop(tx, rx, HostLoopConfig(until_flows=3, duration_s=30)).run()
    finally:
        stop.set()
        w.join()
        recs = api.stop_receiver(rx, tmp_path / "recv")
    assert res.sender == "done" and res.reason == "until_flows", res
    assert res.passes > 10 and res.cpu_s > 0
    # neither the sender nor the receiver started a thread of its own
    assert tx._thread.ident is None and rx._thread.ident is None
    assert max(seen) == threads + 1  # the watcher only
    fct = tx.records()
    assert [r["completed"] for r in fct] == [True, True, True]
    assert sorted(r["rx_bytes"] for r in recs) == [60_000, 90_000, 150_000]
    assert all(r["complete_t"] is not None for r in recs)
    # the same files the separate `host send` / `host recv` write
    assert [r["completed"] for r in read_records(tmp_path / "send" / "fct.csv")] == \
        ["True"] * 3
    assert {"t", "rate_bps", "bytes_sent"} <= set(read_records(tmp_path / "send" /
                                                               "trace.csv")[0])
    assert len(read_records(tmp_path / "recv" / "rx_flows.csv")) == 3


def test_receiver_goes_on_after_the_sender_is_done() -> None:
    """A host whose flows finished still answers another host's flows."""
    a, b = _rx(), _rx()
    tx_a = _tx(b, [30_000])  # host a sends to b
    tx_b = _tx(a, [200_000], stagger=0.0)  # host b sends to a (longer)
    loop_a = HostLoop(tx_a, a, HostLoopConfig(duration_s=30))
    th = threading.Thread(target=loop_a.run)
    th.start()
    try:
        res_b = HostLoop(tx_b, b, HostLoopConfig(until_flows=1, duration_s=30)).run()
        deadline = time.monotonic() + 20
        while completed_flows(a) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # poll interval of the condition
    finally:
        loop_a.stop.set()
        th.join(10)
        a.stop()
        b.stop()
    assert res_b.sender == "done"
    assert loop_a.result.sender == "done" and loop_a.result.reason == "stop"
    assert completed_flows(a) == 1 and completed_flows(b) == 1
    assert tx_b.records()[0]["completed"]


def test_stop_duration_and_deadline_end_the_loop(tmp_path: Path) -> None:
    rx = _rx()
    try:
        t = time.monotonic()
        res = HostLoop(None, rx, HostLoopConfig(duration_s=0.2)).run()
        assert res.reason == "duration" and res.sender == "none"
        assert 0.15 < time.monotonic() - t < 2.0
        # a flow far too long for its deadline: the sender stops, its record says so
        tx = _tx(rx, [50_000_000], tmp_path, cc="fixed:1e6")
        res = HostLoop(tx, rx, HostLoopConfig(tx_deadline_s=0.3, duration_s=0.6)).run()
        assert res.sender == "deadline" and res.reason == "duration"
        assert tx.done and not tx.records()[0]["completed"]
        assert read_records(tmp_path / "fct.csv")[0]["completed"] == "False"
        stop = threading.Event()
        tx = _tx(rx, [50_000_000], cc="fixed:1e6")
        threading.Timer(0.2, stop.set).start()
        res = HostLoop(tx, rx, HostLoopConfig(), stop).run()
        assert res.reason == "stop" and res.sender == "stopped" and tx.done
    finally:
        rx.stop()


def test_sender_only_loop_ends_with_its_flows() -> None:
    rx = api.start_receiver(ReceiverConfig(bind="127.0.0.1", port=0))  # another process
    try:
        tx = _tx(rx, [40_000, 40_000])
        res = HostLoop(tx, None).run()
    finally:
        recs = api.stop_receiver(rx)
    assert res.sender == "done" and res.reason == "sender_done"
    assert sorted(r["rx_bytes"] for r in recs) == [40_000, 40_000]


def test_loop_needs_something_and_an_open_receiver() -> None:
    with pytest.raises(ConfigError):
        HostLoop(None, None)
    with pytest.raises(ConfigError, match="open"):
        HostLoop(None, Receiver(ReceiverConfig(bind="127.0.0.1", port=0)))
    with pytest.raises(ConfigError):
        HostLoopConfig(idle_s=0)


def test_sender_steps_and_thread_give_the_same_records() -> None:
    """Sender.start (its own thread) still works beside the step API."""
    rx = api.start_receiver(ReceiverConfig(bind="127.0.0.1", port=0))
    try:
        tx = _tx(rx, [20_000]).start()
        assert tx.wait(20)
        tx.stop()
    finally:
        api.stop_receiver(rx)
    assert tx._thread.ident is not None and tx.records()[0]["completed"]


def test_receiver_in_its_own_thread_beside_the_loop() -> None:
    """``host run --recv-thread``: the loop leaves a started receiver to its thread and
    keeps running for it after the sender is done."""
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        tx = _tx(rx, [50_000, 50_000])
        res = HostLoop(tx, rx, HostLoopConfig(until_flows=2, duration_s=30)).run()
    finally:
        recs = rx.stop()
    assert rx.threaded and res.sender == "done" and res.reason == "until_flows"
    assert sorted(r["rx_bytes"] for r in recs) == [50_000, 50_000]
