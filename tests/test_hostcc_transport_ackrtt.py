"""RTT samples from data ACKs (no extra packets) for RTT-driven controllers (RL-CC)."""

from __future__ import annotations

from typing import Any

import pytest

from p4cc.hostcc import api, cc, wire
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.receiver import ReceiverConfig, ReceiverCore
from p4cc.scale import get_scale

PAYLOAD = 1000 - wire.data_overhead()
SRC = ("10.0.1.1", 5000)


class Rec:
    """Test-only controller recording its RTT samples (RateController protocol)."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, int | None]] = []

    def on_cnp(self, t: float) -> None: ...
    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...
    def on_nack(self, t: float) -> None: ...

    def on_rtt_sample(self, t: float, rtt_s: float, q: int | None) -> None:
        self.samples.append((t, rtt_s, q))

    def rate_bps(self, t: float) -> float:
        return 1e6

    def trace(self, t: float) -> dict[str, Any]:
        return {}


def send(f: Flow, t: float, **kw: Any) -> bool:
    buf = f.next_datagram(t)
    f.sent(t, len(buf), **kw)
    return wire.decode_bth(buf).ackreq


def test_ack_interval_requests_acks_and_acks_are_controller_samples() -> None:
    ctl = Rec()
    f = Flow(1, FlowSpec("10.0.0.2", 40 * PAYLOAD), ctl, 1000, 0.04, ack_interval_s=0.004)
    asked = [i for i in range(10) if send(f, i * 0.001)]
    assert asked == [0, 4, 8]  # the first packet, then one per 4 ms (ack_every is 16)
    f.on_datagram(wire.encode_ack(1, 1, max_qdepth=7), 0.003, 0)  # ACK of PSN 0
    f.on_datagram(wire.encode_ack(1, 5), 0.0065, 0)  # ACK of PSN 4
    assert [(t, q) for t, _r, q in ctl.samples] == [(0.003, 7), (0.0065, None)]
    assert [r for _t, r, _q in ctl.samples] == pytest.approx([0.003, 0.0025])
    assert f.ack_rtt_samples == 2 and f.rtt_s == pytest.approx(0.0025)
    # a NAK rewinds: nothing sent before it is timed any more (Karn's rule)
    f.on_datagram(wire.encode_ack(1, 6, nak=True), 0.01, 0)
    assert f.snd_nxt == 6
    f.on_datagram(wire.encode_ack(1, 9), 0.011, 0)
    assert f.ack_rtt_samples == 2
    # a retransmission (PSN 9 was sent before) never asks because of the interval
    assert not send(f, 0.02) and f.snd_nxt == 10
    assert send(f, 0.03)  # the next new packet does


def test_sample_starts_when_the_packet_left_the_host() -> None:
    ctl = Rec()
    f = Flow(1, FlowSpec("10.0.0.2", 8 * PAYLOAD), ctl, 1000, 0.04, ack_every=4)
    for _ in range(8):  # all handed to the host queue (HTB) at t=0
        send(f, 0.0, departs_now=False)
    f.departed(3, 0.003)  # the kernel's TX timestamp of PSN 3; PSN 7's never came
    f.on_datagram(wire.encode_ack(1, 4), 0.005, 0)
    f.on_datagram(wire.encode_ack(1, 8, complete=True), 0.009, 0)
    assert [r for _t, r, _q in ctl.samples] == pytest.approx([0.002])
    # srtt (the RTO's) from the departure where it is known, else from the socket
    assert f.srtt_s == pytest.approx(0.875 * 0.002 + 0.125 * 0.009)


def test_loopback_flow_gets_about_one_sample_per_ack_interval() -> None:
    ctl = Rec()
    f = Flow(1, FlowSpec("10.0.0.2", 200 * PAYLOAD), ctl, 1000, 0.04, ack_interval_s=0.004)
    core = ReceiverCore(ReceiverConfig())
    for i in range(200):  # a packet per ms, replies 2 ms later
        t = i * 0.001
        buf = f.next_datagram(t)
        f.sent(t, len(buf))
        for reply in core.handle(buf, 0x02, SRC, t + 0.001):
            f.on_datagram(reply, t + 0.002, 0)
    assert f.done and 45 <= len(ctl.samples) <= 55
    assert all(r == pytest.approx(0.002) for _t, r, _q in ctl.samples)


def test_rlcc_controller_asks_for_acks_and_decides_once_per_interval() -> None:
    sc = get_scale("testbed")
    ctl = api.controller_factory(sc)(FlowSpec("10.0.0.2", 1000, cc="rlcc"))
    assert isinstance(ctl, cc.RlccController)
    iv = api.RLCC_DECISION_RTTS * sc.base_rtt_s  # the host sender's RL-CC interval
    assert ctl.interval == pytest.approx(iv)
    assert ctl.ack_interval_s == pytest.approx(cc.ACK_INTERVALS_PER_DECISION * iv)
    ctl.on_rtt_sample(0.0, sc.base_rtt_s)
    ctl.on_rtt_sample(0.5 * iv, sc.base_rtt_s)  # within one interval: no decision
    ctl.on_rtt_sample(1.05 * iv, sc.base_rtt_s)
    assert ctl.trace(2 * iv)["decisions"] == 2 and ctl.samples == 3
    # a sample 3 intervals late makes 3 decisions (the same per second for every flow)
    ctl.on_rtt_sample(4.05 * iv, sc.base_rtt_s)
    assert ctl.trace(5 * iv)["decisions"] == 5
    ctl.on_rtt_sample(1.0, sc.base_rtt_s)  # long silence: at most MAX_CATCHUP
    assert ctl.trace(1.0)["decisions"] == 5 + cc.MAX_CATCHUP
    assert cc.make_controller("rlcc", sc).interval == 0  # type: ignore[attr-defined]
    assert not hasattr(cc.make_controller("dcqcn", sc), "ack_interval_s")


def test_first_resend_after_a_nak_is_a_controller_sample_of_an_rtt_driven_flow() -> None:
    """RL-CC (``ack_interval_s``) before its first sample: after a NAK's rewind the first
    resend asks for an ACK and is timed (on a FIFO path only the resend can be
    acknowledged); its sample goes to the controller, not to srtt (the RTO keeps Karn's
    rule); later resends are not timed; the resend's bytes count as retransmitted; once
    the controller has a sample, resends are not timed any more."""
    ctl = Rec()
    f = Flow(1, FlowSpec("10.0.0.2", 40 * PAYLOAD), ctl, 1000, 0.04, ack_interval_s=0.004)
    for i in range(6):  # PSN 0-5; PSN 0 asks (the first packet), nothing comes back
        send(f, i * 0.001)
    f.on_datagram(wire.encode_ack(1, 0, nak=True), 0.007, 0)  # PSN 0 was lost
    assert f.snd_nxt == 0 and ctl.samples == [] and f.srtt_s is None
    assert send(f, 0.008)  # the resend of PSN 0 asks for an ACK
    assert not send(f, 0.009) and not send(f, 0.010)  # PSN 1, 2: plain resends
    f.on_datagram(wire.encode_ack(1, 1), 0.020, 0)  # the resend's ACK
    assert [r for _t, r, _q in ctl.samples] == pytest.approx([0.012])
    assert f.srtt_s is None and f.resend_rtt_samples == 1 and f.ack_rtt_samples == 1
    assert f.retx_bytes == 3 * PAYLOAD
    rec = f.record(5000, 0.0)
    assert rec["resend_rtt_samples"] == 1
    # once the controller has a sample, a NAK's resend is a plain resend again
    for i in range(3, 8):
        send(f, 0.021 + i * 0.001)
    f.on_datagram(wire.encode_ack(1, 4, nak=True), 0.03, 0)
    assert f.snd_nxt == 4 and not send(f, 0.031)
    f.on_datagram(wire.encode_ack(1, 5), 0.04, 0)
    assert len(ctl.samples) == 1 and f.resend_rtt_samples == 1


def test_resends_stay_untimed_after_a_timeout_and_for_flows_without_ack_interval() -> None:
    ctl = Rec()  # DCQCN-like: no ack interval, so a NAK's resend asks for nothing
    f = Flow(1, FlowSpec("10.0.0.2", 40 * PAYLOAD), ctl, 1000, 0.04, ack_every=16)
    for i in range(6):
        send(f, i * 0.001)
    f.on_datagram(wire.encode_ack(1, 0, nak=True), 0.007, 0)
    assert not send(f, 0.008)
    f.on_datagram(wire.encode_ack(1, 1), 0.020, 0)
    assert ctl.samples == [] and f.resend_rtt_samples == 0
    # an RTT-driven flow's timeout rewind: the originals may only have been late
    ctl = Rec()
    g = Flow(1, FlowSpec("10.0.0.2", 3 * PAYLOAD), ctl, 1000, 0.04, ack_interval_s=0.004)
    for i in range(3):
        send(g, i * 0.001)
    assert g.check_timeout(1.0) and g.snd_nxt == 0
    assert send(g, 1.001)  # the timeout's AckReq (the receiver answers with its ePSN)
    g.on_datagram(wire.encode_ack(1, 1), 1.01, 0)
    assert ctl.samples == [] and g.resend_rtt_samples == 0


def test_the_receiver_answers_the_timed_resend() -> None:
    """Through the real receiver core: PSN 0 lost, 1-5 arrive (a NAK), the resend of 0
    asks for an ACK and the receiver's answer is the controller's first sample."""
    ctl = Rec()
    f = Flow(1, FlowSpec("10.0.0.2", 40 * PAYLOAD), ctl, 1000, 0.04, ack_interval_s=0.004)
    core = ReceiverCore(ReceiverConfig())
    sent = []
    for i in range(6):
        buf = f.next_datagram(i * 0.001)
        f.sent(i * 0.001, len(buf))
        sent.append(buf)
    replies = [r for buf in sent[1:] for r in core.handle(buf, 0x02, SRC, 0.006)]  # 0 lost
    for reply in replies:
        f.on_datagram(reply, 0.007, 0)
    assert f.nacks >= 1 and f.snd_nxt == 0 and ctl.samples == []
    buf = f.next_datagram(0.010)
    f.sent(0.010, len(buf))
    replies = core.handle(buf, 0x02, SRC, 0.011)
    assert replies
    for reply in replies:
        f.on_datagram(reply, 0.013, 0)
    assert [r for _t, r, _q in ctl.samples] == pytest.approx([0.003])
    assert f.resend_rtt_samples == 1 and f.snd_una == 1
