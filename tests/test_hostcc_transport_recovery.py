"""Loss recovery of the go-back-N transport, in-process (no root, no sockets).

A lost only/last data packet or a lost final ACK must be recovered within a few RTOs
(RoCE-style: rewind to the oldest unacknowledged PSN on timeout; RTO =
min(max(2·srtt, floor)·2^k, cap)), and the first retransmission asks for an ACK so a
receiver that already has everything ends the flow at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from p4cc.hostcc import wire
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.receiver import ReceiverConfig, ReceiverCore

SRC = ("10.0.1.1", 5000)
PAYLOAD = 1000 - wire.data_overhead()


class Fixed:
    """Test-only fixed-rate controller (RateController protocol)."""

    def on_cnp(self, t: float) -> None: ...
    def on_rtt_sample(self, t: float, rtt_s: float, q: int | None) -> None: ...
    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...
    def on_nack(self, t: float) -> None: ...

    def rate_bps(self, t: float) -> float:
        return 1e6

    def trace(self, t: float) -> dict[str, Any]:
        return {}


def simulate(flow: Flow, drop_data: Callable[[int, int], bool] = lambda i, psn: False,
             drop_reply: Callable[[int], bool] = lambda i: False, owd_s: float = 0.005,
             gap_s: float = 0.001, t_end: float = 10.0) -> tuple[float, ReceiverCore]:
    """Event-driven link: data every ``gap_s``, one-way delay ``owd_s``; returns when
    the flow is done (its end time) or at ``t_end``.  ``drop_data(i, psn)`` and
    ``drop_reply(i)`` decide the losses (i counts transmissions / replies)."""
    core = ReceiverCore(ReceiverConfig(nack_interval_s=2 * owd_s))
    events: list[tuple[float, int, str, bytes]] = []
    seq = n_data = n_reply = 0
    t = 0.0
    next_send = 0.0
    while t < t_end and not flow.done:
        flow.check_timeout(t)
        if flow.has_data() and next_send <= t:
            buf = flow.next_datagram(t)
            psn = wire.decode_bth(buf).psn
            flow.sent(t, len(buf))
            if not drop_data(n_data, psn):
                heapq.heappush(events, (t + owd_s, seq := seq + 1, "data", buf))
            n_data += 1
            next_send = t + gap_s
        while events and events[0][0] <= t:
            _at, _s, kind, buf = heapq.heappop(events)
            if kind == "data":
                for reply in core.handle(buf, 0x02, SRC, t):
                    if not drop_reply(n_reply):
                        heapq.heappush(events, (t + owd_s, seq := seq + 1, "reply", reply))
                    n_reply += 1
            else:
                flow.on_datagram(buf, t, 0)
        cands = [t_end, events[0][0]] if events else [t_end]
        if flow.has_data():
            cands.append(max(next_send, t))
        elif not flow.done and flow.start_t is not None:
            cands.append(flow.timeout_at())
        t = max(min(cands), t + 1e-6)
    return (flow.end_t if flow.end_t is not None else t_end), core


def make_flow(npkts: int, rto_s: float = 0.04, rto_max_s: float = 0.5,
              srtt_s: float | None = None) -> Flow:
    return Flow(1, FlowSpec("10.0.0.2", npkts * PAYLOAD), Fixed(), 1000, rto_s,
                rto_max_s=rto_max_s, srtt_s=srtt_s)


def test_rto_formula_backoff_and_cap() -> None:
    f = make_flow(4, rto_s=0.04, rto_max_s=0.3)
    assert f.rto() == pytest.approx(0.04)  # no RTT yet: the floor
    f.rtt_sample(0.05)
    assert f.rto() == pytest.approx(0.1)  # 2·srtt above the floor
    f.backoff = 1
    assert f.rto() == pytest.approx(0.2)
    f.backoff = 5
    assert f.rto() == pytest.approx(0.3)  # bounded
    f.rtt_sample(0.01)  # srtt = 7/8·50 + 1/8·10 ms
    assert f.srtt_s == pytest.approx(0.045)


def test_lost_only_packet_is_resent_after_one_rto() -> None:
    f = make_flow(1)
    end, core = simulate(f, drop_data=lambda i, psn: i == 0)
    assert f.done and f.timeouts == 1
    assert end <= 0.04 + 2 * 0.005 + 1e-3  # one RTO + one RTT
    assert core.records()[0]["rx_pkts"] == 1


def test_lost_final_ack_does_not_stall() -> None:
    f = make_flow(1)
    end, core = simulate(f, drop_reply=lambda i: i == 0)
    assert f.done and f.timeouts == 1 and end <= 0.04 + 0.02 + 1e-3
    assert core.records()[0]["dup_pkts"] == 1


def test_lost_last_packet_of_a_long_flow() -> None:
    f = make_flow(40)
    end, _core = simulate(f, drop_data=lambda i, psn: i == 39)
    assert f.done and f.timeouts == 1
    # go back to the oldest unacked PSN (32: ACKs every 16), not to 0
    assert f.retx_bytes <= 8 * PAYLOAD
    assert end <= 40 * 0.001 + 2 * 0.04 + 0.02


def test_repeated_loss_backs_off_and_recovers_within_a_few_rtos() -> None:
    f = make_flow(1, rto_s=0.04, rto_max_s=0.2)
    end, _core = simulate(f, drop_data=lambda i, psn: i < 3)
    assert f.done and f.timeouts == 3
    # 40 + 80 + 160 ms of backoff, then one RTT
    assert 0.28 - 1e-3 <= end <= 0.28 + 0.011 + 1e-3
    assert f.backoff == 0 or f.done


def test_retransmission_asks_for_ack_and_skips_what_the_receiver_has() -> None:
    f = make_flow(40)
    core = ReceiverCore(ReceiverConfig())
    for _ in range(40):  # everything arrives; every ACK (16, 32, final) is lost
        buf = f.next_datagram(0.0)
        f.sent(0.0, len(buf))
        core.handle(buf, 0x02, SRC, 0.001)
    assert f.snd_una == 0 and not f.done
    assert f.check_timeout(f.rto() + 0.001) and f.snd_nxt == 0
    buf = f.next_datagram(0.1)
    assert wire.decode_bth(buf).ackreq  # the receiver answers the first retransmission
    f.sent(0.1, len(buf))
    [reply] = core.handle(buf, 0x02, SRC, 0.1)
    f.on_datagram(reply, 0.11, 0)
    assert f.done and f.retx_bytes == PAYLOAD


def test_ack_advance_skips_ahead_and_resets_backoff() -> None:
    f = make_flow(40)
    for _ in range(40):
        f.sent(0.0, len(f.next_datagram(0.0)))
    assert f.check_timeout(1.0) and f.backoff == 1 and f.snd_nxt == 0
    f.on_datagram(wire.encode_ack(1, 32), 1.01, 0)  # the receiver is at 32
    assert (f.snd_una, f.snd_nxt, f.backoff) == (32, 32, 0)


def test_rtt_from_acks_of_first_transmissions_only() -> None:
    f = make_flow(16)
    for i in range(16):
        f.sent(i * 0.001, len(f.next_datagram(i * 0.001)))
    f.on_datagram(wire.encode_ack(1, 16, complete=True), 0.035, 0)
    assert f.srtt_s == pytest.approx(0.035 - 0.015)
    g = make_flow(1)
    g.sent(0.0, len(g.next_datagram(0.0)))
    assert g.check_timeout(0.05)
    g.sent(0.05, len(g.next_datagram(0.05)))
    g.on_datagram(wire.encode_ack(1, 1, complete=True), 0.06, 0)
    assert g.done and g.srtt_s is None  # Karn: a retransmitted packet gives no sample


def test_receiver_nak_repeats_back_off_per_epsn() -> None:
    core = ReceiverCore(ReceiverConfig(nack_interval_s=0.002, nack_max_interval_s=0.016))
    naks = []
    for i in range(1, 200):  # PSN 0 lost; 199 packets behind it, one per ms
        t = i * 0.001
        out = core.handle(wire.encode_data(1, i, 300 * PAYLOAD, bytes(PAYLOAD), last=False,
                                           ackreq=False, retx=False), 0x02, SRC, t)
        naks += [round(t, 3) for r in out if wire.decode_ack(r).nak]
    # at once, then after 2, 4, 8, 16, 16, ... ms (a fixed 2 ms would give ~100)
    assert naks[:5] == [0.001, 0.003, 0.007, 0.015, 0.031]
    assert all(b - a <= 0.0175 for a, b in itertools.pairwise(naks[4:]))
    assert len(naks) <= 16
    # a new ePSN is NAKed at once again
    core.handle(data_pkt(0), 0x02, SRC, 0.3)
    out = core.handle(data_pkt(5), 0x02, SRC, 0.301)
    assert out and wire.decode_ack(out[0]).nak and wire.decode_bth(out[0]).psn == 1


def data_pkt(psn: int) -> bytes:
    return wire.encode_data(1, psn, 300 * PAYLOAD, bytes(PAYLOAD), last=False, ackreq=False,
                            retx=False)


def test_repeated_nak_within_an_rtt_does_not_rewind_again() -> None:
    f = make_flow(40, srtt_s=0.05)
    for _ in range(30):
        f.sent(0.0, len(f.next_datagram(0.0)))
    f.on_datagram(wire.encode_ack(1, 3, nak=True), 0.01, 0)
    assert f.snd_nxt == 3
    for _ in range(10):
        f.sent(0.011, len(f.next_datagram(0.011)))
    f.on_datagram(wire.encode_ack(1, 3, nak=True), 0.02, 0)  # stale repeat
    assert f.snd_nxt == 13 and f.stale_nacks == 1
    f.on_datagram(wire.encode_ack(1, 3, nak=True), 0.07, 0)  # an RTT later: resent lost
    assert f.snd_nxt == 3 and f.nacks == 3


def test_go_back_n_under_random_loss_sends_little_twice() -> None:
    import random

    rng = random.Random(7)
    f = make_flow(400, srtt_s=0.02)
    _end, core = simulate(f, drop_data=lambda i, psn: rng.random() < 0.02, owd_s=0.01,
                          t_end=30.0)
    assert f.done and core.records()[0]["rx_pkts"] == 400
    # each loss costs about one RTT of packets (20 at 1 ms spacing), not several
    assert f.retx_bytes / (400 * PAYLOAD) < 1.0


def test_controller_rtt_is_raw_or_a_running_median() -> None:
    seen: list[float] = []

    class Rec(Fixed):
        def on_rtt_sample(self, t: float, rtt_s: float, q: int | None) -> None:
            seen.append(rtt_s)

    for window, want in ((1, [0.002, 0.03, 0.003]), (3, [0.002, 0.002, 0.003])):
        seen.clear()
        f = Flow(1, FlowSpec("10.0.0.2", 5000), Rec(), 1000, 0.04, rtt_window=window)
        for i, rtt in enumerate((0.002, 0.03, 0.003)):
            reply = wire.encode_probe(1, i, 0, reply=True, t_recv_ns=0)
            f.on_datagram(reply, 0.1 * i, int(rtt * 1e9))
        assert seen == pytest.approx(want)
        assert f.rtt_s == pytest.approx(0.003)
