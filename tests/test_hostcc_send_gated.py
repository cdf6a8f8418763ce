"""The sender's path for flows slower than the HTB pacer's floor (p4cc.hostcc.send_paths),
over loopback with a stand-in pacer (no root: the HTB side is in
tests/test_hostcc_pacing_root.py)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

from fixed_cc import Fixed

from p4cc.hostcc import wire
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.pacing_config import PacerStats
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig


class StandInPacer:
    """What the sender asks of an HtbPacer; shapes nothing (loopback sends at once)."""

    def __init__(self, floor_bps: float) -> None:
        self.floor_bps = floor_bps
        self.stats = PacerStats()
        self.rates: list[float] = []
        self.classified: list[int] = []  # source ports put in their class
        self.probes = 0  # probes sent through the control class

    def add_flow(self, sport: int, rate_bps: float) -> int:
        self.rates.append(rate_bps)
        return sport

    def add_flow_async(self, sport: int, rate_bps: float) -> Callable[[], int]:
        done = self.add_flow(sport, rate_bps)  # (the stand-in's work is done at once)
        return lambda: done

    def set_rate(self, sport: int, rate_bps: float) -> None:
        self.rates.append(rate_bps)

    def classify(self, sock: socket.socket) -> None:
        self.classified.append(sock.getsockname()[1])

    @contextlib.contextmanager
    def control(self, sock: socket.socket) -> Iterator[None]:
        self.probes += 1
        yield

    def close(self) -> None: ...


class PacedSender(Sender):
    floor = 0.0  # the stand-in pacer's floor (b/s)

    def open(self) -> Sender:
        super().open()
        self._pacer = StandInPacer(self.floor)  # type: ignore[assignment]
        return self


def run(bps: float, floor: float, size: int = 60_000) -> dict[str, Any]:
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        tx = PacedSender([FlowSpec("127.0.0.1", size, port=rx.port)], lambda _s: Fixed(bps),
                         SenderConfig(pkt_bytes=1000))
        tx.floor = floor
        tx.start()
        assert tx.wait(10.0)
        tx.stop()
    finally:
        rx.stop()
    rec: dict[str, Any] = tx.records()[0]
    return rec


def test_a_flow_below_the_floor_is_paced_by_the_sender() -> None:
    """300 kb/s under an 800 kb/s floor: the sender's schedule paces the flow (60 kB in
    64 frames of 1014 B, ~1.7 s); the stand-in pacer shapes nothing, so without the schedule
    the flow would finish in milliseconds, as it does above the floor."""
    slow = run(3e5, 8e5)
    payload = 1000 - wire.data_overhead()  # per 1000-B datagram
    frames = -(-60_000 // payload)
    want = frames * (1000 + wire.ETH_LEN) * 8 / 3e5
    assert slow["completed"] and abs(slow["fct_s"] - want) / want < 0.1, (slow, want)
    fast = run(3e5, 1e5)  # above the floor: handed to the (stand-in) HTB class at once
    assert fast["completed"] and fast["fct_s"] < 0.2 * want, fast


class LinkPacer(StandInPacer):
    """A stand-in with the host's NIC rate (PacerConfig.link_rate_bps)."""

    def __init__(self, link_bps: float | None) -> None:
        super().__init__(0.0)
        self.cfg = type("Cfg", (), {"link_rate_bps": link_bps})()


def refill_wait(rate: float, backlogged: int, link_bps: float | None) -> float:
    tx = Sender([FlowSpec("127.0.0.1", 1000)], lambda _s: Fixed(rate),
                SenderConfig(pkt_bytes=1000))
    tx._pacer = LinkPacer(link_bps)  # type: ignore[assignment]
    tx._backlogged = backlogged
    return tx._refill_wait(rate)


def test_a_full_class_waits_for_the_rate_its_class_drains_at() -> None:
    """Half a packet time at the flow's rate when it has the NIC alone; at its share of
    the NIC when other flows with data share it; always within 0.2-5 ms."""
    pkt_bits = (1000 + wire.ETH_LEN) * 8
    assert refill_wait(4e6, 1, 5e6) == pkt_bits / 4e6 / 2  # alone: its own rate
    assert refill_wait(4e6, 4, 20e6) == pkt_bits / 4e6 / 2  # its share is above its rate
    assert refill_wait(4e6, 4, 10e6) == pkt_bits / 2.5e6 / 2  # 10 Mb/s among 4
    assert refill_wait(4e6, 16, 5e6) == 5e-3  # 16 on 5 Mb/s: 26 ms a packet, capped
    assert refill_wait(4e6, 16, None) == pkt_bits / 4e6 / 2  # no link class: no sharing
    assert refill_wait(1e9, 1, None) == 2e-4  # floor
