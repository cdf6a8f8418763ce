"""The RTO clock starts when the last packet left the host (its software TX timestamp),
not when it was handed to the flow's HTB class (p4cc.hostcc.flow, ``Flow.timeout_at``).

A mouse that DCQCN throttled keeps its last packets queued in HTB for longer than the
RTO floor; counting from the hand-off fired a spurious timeout on every such mouse on
BMv2 (docs/emulation.md, "what the slowest mice share").  In-process: the test hands
the flow its TX timestamps as the kernel would.
"""

from __future__ import annotations

import pytest

from p4cc.cli import build_parser
from p4cc.hostcc import wire
from p4cc.hostcc.cc import FixedController
from p4cc.hostcc.cli_config import default_rto_s, sender_config
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.scale import get_scale

PAYLOAD = 1000 - wire.data_overhead()
RTO, RTO_MAX = 0.08, 0.5


def flow(npkts: int) -> Flow:
    return Flow(1, FlowSpec("10.0.0.2", npkts * PAYLOAD), FixedController(1e5), 1000, RTO,
                rto_max_s=RTO_MAX)


def queued_mouse(npkts: int = 4, stamped: bool | None = None) -> Flow:
    """A mouse whose packets all went to its HTB class at t = 0 (only the last one is
    timed: ack_every 16)."""
    f = flow(npkts)
    for _ in range(npkts):
        f.sent(0.0, len(f.next_datagram(0.0)), departs_now=False, stamped=stamped)
    assert not f.has_data()
    return f


def no_timeout_before(f: Flow, t_end: float) -> None:
    for i in range(1, 1000):
        t = t_end * i / 1000
        assert not f.check_timeout(t), t
    assert f.timeouts == 0


def test_no_timeout_while_the_last_packet_waits_in_the_host_queue() -> None:
    f = queued_mouse()
    # throttled: the last packet leaves at 0.3 s, its ACK is back 5 ms later
    no_timeout_before(f, 0.3)  # counting from the hand-off, 0.08 s would have fired
    f.departed(3, 0.3)
    no_timeout_before(f, 0.305)
    f.on_datagram(wire.encode_ack(1, 4, complete=True), 0.305, 0)
    assert f.done and f.timeouts == 0 and f.retx_bytes == 0


def test_a_lost_packet_times_out_one_rto_after_it_left() -> None:
    f = queued_mouse()
    f.departed(3, 0.3)
    assert f.timeout_at() == pytest.approx(0.3 + RTO)
    assert not f.check_timeout(0.3 + RTO - 1e-6)
    assert f.check_timeout(0.3 + RTO) and f.snd_nxt == f.snd_una == 0


def test_a_lost_timestamp_falls_back_to_the_hand_off_after_rto_max() -> None:
    f = queued_mouse()  # the qdisc dropped the last packet: no timestamp ever comes
    assert f.timeout_at() == pytest.approx(RTO_MAX + RTO)
    assert not f.check_timeout(RTO_MAX + RTO - 1e-6)
    assert f.check_timeout(RTO_MAX + RTO)


def test_an_earlier_packets_timestamp_does_not_release_the_timer() -> None:
    f = flow(20)
    for _ in range(20):  # PSN 15 and 19 are timed (ack_every 16, last)
        f.sent(0.0, len(f.next_datagram(0.0)), departs_now=False)
    f.departed(15, 0.2)
    f.on_datagram(wire.encode_ack(1, 16), 0.21, 0)  # progress at 0.21; PSN 19 still queued
    assert not f.check_timeout(0.21 + RTO + 0.01)
    assert f.srtt_s == pytest.approx(0.01)  # from PSN 15's departure, not its hand-off
    f.departed(19, 0.4)
    assert f.timeout_at() == pytest.approx(0.4 + RTO)


def test_without_timestamps_the_clock_starts_at_the_hand_off() -> None:
    f = queued_mouse(stamped=False)  # the socket refused SO_TIMESTAMPING
    assert f.timeout_at() == pytest.approx(RTO)
    assert f.check_timeout(RTO)


def test_userspace_pacing_starts_the_clock_at_the_send() -> None:
    f = flow(2)
    f.sent(0.0, len(f.next_datagram(0.0)))
    f.sent(0.05, len(f.next_datagram(0.05)))  # departs_now: on the wire at once
    assert f.timeout_at() == pytest.approx(0.05 + RTO)
    assert not f.check_timeout(0.05 + RTO - 1e-6) and f.check_timeout(0.05 + RTO)


def test_the_timer_restarts_from_progress_after_the_departure() -> None:
    f = queued_mouse()
    f.departed(3, 0.1)
    f.on_datagram(wire.encode_ack(1, 2), 0.15, 0)  # an ACK that advances after it left
    assert f.timeout_at() == pytest.approx(0.15 + RTO)


@pytest.mark.parametrize(("scale", "floor_s"), [("testbed", 0.082), ("testbed-5m", 0.164)])
def test_the_default_rto_floor_outlasts_a_full_buffer(scale: str, floor_s: float) -> None:
    """100 kB drain in 80 ms at 10 Mb/s and 160 ms at 5 Mb/s, plus one base RTT: above
    20 base RTTs (40 and 80 ms), which a mouse behind a full queue outwaited."""
    sc = get_scale(scale)
    assert default_rto_s(sc) == pytest.approx(floor_s)
    parse = build_parser().parse_args
    args = parse(["host", "send", "--dst", "10.0.0.2", "--size", "1000", "--scale", scale])
    assert sender_config(args, sc).rto_s == pytest.approx(floor_s)
    args = parse(["host", "send", "--dst", "10.0.0.2", "--size", "1000", "--rto", "0.03"])
    assert sender_config(args, sc).rto_s == pytest.approx(0.03)  # --rto wins
