"""Receiver state machine and sender go-back-N, in-process (no root)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from p4cc.hostcc import wire
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig, ReceiverCore
from p4cc.hostcc.sender import Sender, SenderConfig

SRC = ("10.0.1.1", 5000)
ECT0, CE = 0x02, 0x03


class Fixed:
    """Test-only fixed-rate controller with the RateController protocol; logs events."""

    def __init__(self, bps: float) -> None:
        self.bps = bps
        self.events: list[tuple[str, float]] = []

    def on_cnp(self, t: float) -> None:
        self.events.append(("cnp", t))

    def on_rtt_sample(self, t: float, rtt_s: float, max_qdepth_pkts: int | None) -> None:
        self.events.append(("rtt", rtt_s))

    def on_bytes_sent(self, t: float, nbytes: int) -> None:
        pass

    def on_nack(self, t: float) -> None:
        self.events.append(("nack", t))

    def rate_bps(self, t: float) -> float:
        return self.bps

    def trace(self, t: float) -> dict[str, Any]:
        return {"fixed_bps": self.bps}


def data(psn: int, msg_len: int = 3000, plen: int = 1000, qpn: int = 1, ackreq: bool = False):
    last = (psn + 1) * plen >= msg_len
    return wire.encode_data(qpn, psn, msg_len, bytes(plen), last=last, ackreq=ackreq,
                            retx=False)


def test_in_order_completes_with_ack() -> None:
    core = ReceiverCore(ReceiverConfig())
    assert core.handle(data(0), ECT0, SRC, 0.0) == []
    assert core.handle(data(1), ECT0, SRC, 0.1) == []
    out = core.handle(data(2), ECT0, SRC, 0.2)
    ack = wire.decode_ack(out[0])
    assert ack.complete and not ack.nak and wire.decode_bth(out[0]).psn == 3
    rec = core.records()[0]
    assert rec["rx_bytes"] == 3000 and rec["complete_t"] == 0.2
    # a retransmitted tail after completion gets the COMPLETE ACK again
    assert wire.decode_ack(core.handle(data(2), ECT0, SRC, 0.3)[0]).complete


def test_gap_nacks_expected_psn_rate_limited() -> None:
    core = ReceiverCore(ReceiverConfig(nack_interval_s=1.0))
    core.handle(data(0, 10_000), ECT0, SRC, 0.0)
    out = core.handle(data(2, 10_000), ECT0, SRC, 0.01)
    nak = wire.decode_ack(out[0])
    assert nak.nak and wire.decode_bth(out[0]).psn == 1
    assert core.handle(data(3, 10_000), ECT0, SRC, 0.02) == []  # same ePSN, within interval
    assert len(core.handle(data(4, 10_000), ECT0, SRC, 1.5)) == 1  # interval passed
    assert core.records()[0]["nacks"] == 2


def test_ce_cnp_rate_limited_per_flow() -> None:
    core = ReceiverCore(ReceiverConfig(cnp_interval_s=0.5))
    kinds = []
    for i in range(20):
        out = core.handle(data(i, 100_000), CE, SRC, i * 0.125)
        kinds.append(sum(wire.decode_bth(o).opcode == wire.OP_CNP for o in out))
    # one CNP per 0.5 s interval (times exact in binary)
    assert kinds == [1, 0, 0, 0] * 5
    # another flow gets its own CNP at once
    out = core.handle(data(0, 100_000, qpn=2), CE, SRC, 2.4)
    assert [wire.decode_bth(o).opcode for o in out] == [wire.OP_CNP]
    assert core.counters.cnps_sent == 6


def test_probe_reply_immediate_with_int_qdepth() -> None:
    core = ReceiverCore(ReceiverConfig())
    probe = wire.encode_probe(1, 9, 12345)
    out = core.handle(wire.encode_int_summary(2, 31, 500) + probe, (0x18 << 2) | ECT0, SRC, 0)
    reply = wire.decode_probe(out[0])
    assert wire.decode_bth(out[0]).opcode == wire.OP_PROBE_REPLY
    assert reply.seq == 9 and reply.t_send_ns == 12345 and reply.max_qdepth == 31
    # a data packet with an INT summary: qdepth echoed in its ACK
    out = core.handle(wire.encode_int_summary(1, 7, 9) + data(0, 1000), 0x18 << 2, SRC, 0)
    assert wire.decode_ack(out[0]).max_qdepth == 7


@pytest.mark.parametrize("buf", [b"", b"\x04", bytes(15), b"\xc0" + bytes(16),
                                 wire.encode_cnp(1), b"\x04" + bytes(14) + b"\xff"])
def test_garbage_is_counted(buf: bytes) -> None:
    core = ReceiverCore(ReceiverConfig())
    assert core.handle(buf, 0, SRC, 0.0) == []
    assert core.counters.malformed + core.counters.unknown_opcode == 1
    # INT DSCP but too short for the summary
    assert core.handle(b"abc", 0x18 << 2, SRC, 0.0) == []


def test_flow_go_back_n_and_unknown_cnp() -> None:
    ctl = Fixed(1e6)
    f = Flow(1, FlowSpec("10.0.0.2", 10 * 948), ctl, 1000, rto_s=0.1)
    assert f.npkts == 10
    for _ in range(6):
        f.sent(0.0, len(f.next_datagram(0.0)))
    f.on_datagram(wire.encode_ack(1, 2, nak=True), 0.01, 0)
    assert (f.snd_una, f.snd_nxt, f.nacks) == (2, 2, 1)
    f.on_datagram(wire.encode_cnp(99), 0.01, 0)
    f.on_datagram(wire.encode_cnp(1), 0.01, 0)
    f.on_datagram(b"junk", 0.01, 0)
    assert (f.unknown_cnps, f.cnps, f.bad_replies) == (1, 1, 1)
    while f.has_data():
        f.sent(0.02, len(f.next_datagram(0.02)))
    assert f.retx_bytes == 4 * 948
    assert not f.check_timeout(0.05) and f.check_timeout(0.2) and f.snd_nxt == 2
    f.on_datagram(wire.encode_ack(1, 10, complete=True), 0.3, 0)
    assert f.done and f.end_t == 0.3
    assert [e[0] for e in ctl.events] == ["nack", "cnp"]


def test_loopback_flow_completes_under_loss() -> None:
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0, drop_prob=0.02, seed=1,
                                 nack_interval_s=0.005)).start()
    try:
        spec = FlowSpec("127.0.0.1", 300_000, port=rx.port)
        ctls: list[Fixed] = []

        def make(_s: FlowSpec) -> Fixed:
            ctls.append(Fixed(40e6))
            return ctls[-1]

        tx = Sender([spec], make, SenderConfig(rto_s=0.02, probe_interval_s=0.005)).start()
        assert tx.wait(20.0), "flow did not complete"
        rec = tx.records()[0]
        rxrec = rx.records()[0]
        assert rec["completed"] and rxrec["rx_bytes"] == 300_000
        assert rxrec["injected_drops"] > 0 and rec["retx_bytes"] > 0
        assert rec["nacks"] + rec["timeouts"] > 0
        assert any(e[0] == "rtt" for e in ctls[0].events)
    finally:
        rx.stop()


def test_sender_random_reply_fuzz_never_crashes() -> None:
    f = Flow(1, FlowSpec("10.0.0.2", 5000), Fixed(1e6), 1000, rto_s=0.1)
    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randrange(0, 60)
        f.on_datagram(bytes(rng.randrange(256) for _ in range(n)), 0.0, 0)
    assert f.bad_replies + f.unknown_cnps + f.cnps > 0


def test_unstarted_and_unfinished_flows_are_reported(tmp_path: Any) -> None:
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        specs = [FlowSpec("127.0.0.1", 10_000_000, port=rx.port),
                 FlowSpec("127.0.0.1", 1000, start_s=60.0, port=rx.port)]
        tx = Sender(specs, lambda _s: Fixed(1e6), SenderConfig(), out_dir=tmp_path).start()
        assert not tx.wait(0.3)
        tx.stop()
    finally:
        rx.stop()
    recs = tx.records()
    assert [r["completed"] for r in recs] == [False, False]
    assert recs[0]["bytes_sent"] > 0 and recs[1]["flow_id"] is None
    assert (tmp_path / "fct.csv").read_text().count("\n") == 3
