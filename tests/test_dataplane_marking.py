"""ECN marking and INT of p4src/p4cc.p4 measured on simple_switch_grpc (root + BMv2).

Rig: tests/dataplane_rig.py (one switch, veths ``p4mk1a/b`` and ``p4mk2a/b``).  Every
test packet is UDP to ``INT_DPORT``, an ``int_watchlist`` flow, and port 2 is an INT
sink, so each delivered packet carries the INT summary whose ``max_qdepth`` is, on one
switch, exactly the ``enq_qdepth`` the marking decision used.  The queue of port 2 is
slowed over Thrift and the sender offers more, in cycles that sweep the depth from 0 to
beyond Kmax and back.

Thresholds are written directly in packets with P4Runtime (``ecn_config`` entries);
``EcnConfig`` (bytes, with ``PKT`` bytes per packet) supplies kmin/kmax in packets,
``pmax_scaled`` and the expected marking probability, so the data plane is compared
with the control plane's model (docs/architecture.md, RED rule).

The sender paces its frames from a raw socket (prebuilt, see ``frames``) so that
the offered rate, not the burst size, sets how fast the queue grows; the sweep itself
is tests/red_sweep.py, shared with lab 1's check (labs/lab1-ecn-marking/check.py).
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Iterator, Sequence

import pytest
from dataplane_rig import (
    CE,
    ECT0,
    Delivered,
    Rig,
    frames,
    one_switch,
    poll,
    skip_reason,
)
from red_bound import curve_failures
from red_sweep import drain, ours, send_paced, settle, sweep

from p4cc.controlplane.ecn import EcnConfig
from p4cc.packets.int import INT_REPORT_SESSION, decode_report

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

PREFIX = "p4mk"
SWITCH_ID = 0xC0FFEE  # not the device id (1): proves the hop id comes from switch_config
INT_DPORT = 5000
PORT = 2
PKT = 1000  # bytes per packet for the EcnConfig <-> packets conversion
KMIN, KMAX, PMAX = 10, 40, 0.5
CURVE = EcnConfig(KMIN * PKT, KMAX * PKT, PMAX)
NON_ECT_EVERY = 5  # every 5th packet of the curve stream is non-ECT


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with one_switch(PREFIX, SWITCH_ID, INT_DPORT) as r:
        r.thrift.set_queue_depth(1000, PORT)
        yield r


def _ecn_entry(rig: Rig, cfg: EcnConfig, verb: str = "insert") -> None:
    fn = rig.p4rt.insert_entry if verb == "insert" else rig.p4rt.modify_entry
    fn("ecn_config", {"egress_port": PORT}, "set_ecn",
       {"kmin": cfg.kmin_pkts(PKT), "kmax": cfg.kmax_pkts(PKT), "pmax": cfg.pmax_scaled})


def _ecn_delete(rig: Rig) -> None:
    rig.p4rt.delete_entry("ecn_config", {"egress_port": PORT})


def _send_paced(rig: Rig, frames: Sequence[bytes], pps: float) -> None:
    send_paced(rig, frames, pps)


def _drain(rig: Rig, expected: int, timeout_s: float = 30.0, quiet_s: float = 1.0) -> None:
    drain(rig, expected, timeout_s, quiet_s)


def _sweep(rig: Rig, n_total: int, cycle: int, pps_in: float, pps_out: float,
           tos_of: dict[int, int], seq0: int = 0) -> list[Delivered]:
    """tests/red_sweep.py's sweep of port 2 with this module's INT flow."""
    return sweep(rig, n_total, cycle, pps_in, pps_out, tos_of, INT_DPORT, seq0, PORT)


_ours = ours
_settle = settle


def _pkt_counters(rig: Rig) -> tuple[int, int]:
    """(offered, sent) packets of port 2 so far (P4Runtime counters)."""
    return (rig.p4rt.read_counters("port_offered").get(PORT, (0, 0))[0],
            rig.p4rt.read_counters("port_tx").get(PORT, (0, 0))[0])


def _counts(rig: Rig, before: tuple[int, int], sent: int) -> str:
    """Where packets went, for failure messages."""
    offered, tx = (a - b for a, b in zip(_pkt_counters(rig), before, strict=True))
    return (f"sender sent {sent}; switch port {PORT} offered {offered}, transmitted {tx}; "
            f"receiver also saw {rig.rx.other} IPv4 frames without a summary")


def _binom_check(rows: Sequence[Delivered], cfg: EcnConfig) -> tuple[int, float, float]:
    """(marked, expected, sigma) of ECT ``rows`` under the RED model of ``cfg``."""
    ps = [cfg.marking_probability(d.qdepth, PKT) for d in rows]
    marked = sum(d.ecn == CE for d in rows)
    return marked, sum(ps), math.sqrt(sum(p * (1 - p) for p in ps))


BINS = [(0, KMIN)] + [(q, q + 5) for q in range(KMIN, KMAX, 5)] + [(KMAX, 10**6)]


@pytest.mark.slow
def test_red_marking_curve(rig: Rig) -> None:
    n_ect_wanted = 10_000
    n_total = n_ect_wanted * NON_ECT_EVERY // (NON_ECT_EVERY - 1) + 200  # + losses
    tos_of = {s: 0 if s % NON_ECT_EVERY == NON_ECT_EVERY - 1 else ECT0
              for s in range(n_total)}
    _ecn_entry(rig, CURVE)
    t0 = time.monotonic()
    try:
        got = _sweep(rig, n_total, cycle=110, pps_in=1200, pps_out=600, tos_of=tos_of)
    finally:
        _ecn_delete(rig)
    elapsed = time.monotonic() - t0
    assert all(d.hop_count == 1 for d in got)
    ect = [d for d in got if tos_of[d.seq] == ECT0]
    non = [d for d in got if tos_of[d.seq] == 0]
    print(f"\nRED curve: sent {n_total}, delivered {len(got)} ({len(ect)} ECT(0), "
          f"{len(non)} non-ECT) in {elapsed:.1f} s; Kmin {KMIN} Kmax {KMAX} Pmax {PMAX} "
          f"(pmax_scaled {CURVE.pmax_scaled})")
    assert len(ect) >= n_ect_wanted, f"only {len(ect)} ECT packets delivered"
    # non-ECT never marked, and ECT bits of unmarked packets untouched
    assert all(d.ecn == 0 for d in non), "a non-ECT packet was marked"
    assert all(d.ecn in (ECT0, CE) for d in ect)
    for lo, hi in BINS:
        rows = [d for d in ect if lo <= d.qdepth < hi]
        marked, exp, sd = _binom_check(rows, CURVE)
        n = len(rows)
        print(f"  q {lo:>3}-{min(hi, 999) - 1:<3} n {n:5d} marked {marked:5d} "
              f"measured {marked / max(n, 1):.4f} RED {exp / max(n, 1):.4f} "
              f"(sd {sd / max(n, 1):.4f}, z {(marked - exp) / sd if sd else 0.0:+.2f})")
        assert n >= 300, f"bin {lo}-{hi}: only {n} packets; the sweep missed this depth"
    mid = [d for d in ect if KMIN <= d.qdepth < KMAX]
    marked, exp, sd = _binom_check(mid, CURVE)
    print(f"  pooled {KMIN}-{KMAX - 1}: n {len(mid)} marked {marked} expected {exp:.1f} "
          f"sd {sd:.1f} z {(marked - exp) / sd:+.2f}")
    # bins and pooled range together, family-wise error <= 0.1 % (tests/red_bound.py)
    failures = curve_failures([(d.qdepth, d.ecn == CE) for d in ect],
                              lambda q: CURVE.marking_probability(q, PKT), KMIN, KMAX)
    assert not failures, failures


def test_non_ect_never_marked_far_above_kmax(rig: Rig) -> None:
    n_total, seq0 = 800, 100_000
    tos_of = {s: ECT0 if s % 2 == 0 else 0 for s in range(seq0, seq0 + n_total)}
    _ecn_entry(rig, CURVE)
    try:
        got = _sweep(rig, n_total, cycle=200, pps_in=1600, pps_out=400, tos_of=tos_of,
                     seq0=seq0)
    finally:
        _ecn_delete(rig)
    non = [d for d in got if tos_of[d.seq] == 0]
    ect_high = [d for d in got if tos_of[d.seq] == ECT0 and d.qdepth >= KMAX]
    deep = [d for d in non if d.qdepth >= 2 * KMAX]
    assert len(got) >= 0.95 * n_total, f"{len(got)} of {n_total} delivered"
    print(f"\nnon-ECT: {len(non)} delivered, {len(deep)} at q >= {2 * KMAX}, "
          f"max q {max(d.qdepth for d in got)}")
    assert len(deep) >= 50, "the queue never got far above Kmax"
    assert [d.seq for d in non if d.ecn != 0] == [], "non-ECT packets were marked"
    # control: the same queue does mark ECT packets (the test can fail)
    assert ect_high and all(d.ecn == CE for d in ect_high)


def test_threshold_modify_applies_to_next_packets(rig: Rig) -> None:
    never = EcnConfig(400 * PKT, 400 * PKT, 1.0)  # the queue stays far below 400
    step = EcnConfig(1 * PKT, 1 * PKT, 1.0)
    n_before, n_after, pps_in, pps_out = 100, 100, 500, 250
    s0 = 200_000
    ecn_all = dict.fromkeys(range(s0, s0 + n_before + n_after), ECT0)
    pre = frames(range(s0, s0 + n_before), ecn_all, INT_DPORT)
    post = frames(range(s0 + n_before, s0 + n_before + n_after), ecn_all, INT_DPORT)
    _ecn_entry(rig, never)
    _settle(rig)
    before = _pkt_counters(rig)
    rig.thrift.set_queue_rate(pps_out, PORT)
    try:
        _send_paced(rig, pre, pps_in)
        t_call = time.monotonic()
        _ecn_entry(rig, step, verb="modify")
        t_done = time.monotonic()
        _send_paced(rig, post, pps_in)
        _drain(rig, n_before + n_after)
    finally:
        rig.thrift.set_queue_rate(1_000_000, PORT)
        _ecn_delete(rig)
    lost = _counts(rig, before, n_before + n_after)
    got = sorted(_ours(rig.rx.take(), s0, n_before + n_after), key=lambda d: d.seq)
    assert len(got) == n_before + n_after, f"packets were lost: {lost}"
    assert max(d.qdepth for d in got) < 400
    old = [d for d in got if d.t < t_call]  # left the switch before the MODIFY was sent
    new = [d for d in got if d.seq >= s0 + n_before]  # enqueued after the MODIFY returned
    queued = [d for d in got if d.seq < s0 + n_before and d.t >= t_call]
    print(f"\nMODIFY took {1e3 * (t_done - t_call):.1f} ms; depth at MODIFY "
          f"{queued[0].qdepth if queued else 0}; {len(old)} packets out before it, "
          f"{len(queued)} sent before and dequeued after (marked "
          f"{sum(d.ecn == CE for d in queued)}), {len(new)} sent after")
    assert len(old) >= 20 and all(d.ecn == ECT0 for d in old), "old setting not kept"
    assert sum(d.qdepth >= 1 for d in new) >= 0.8 * len(new), "no standing queue"
    assert all((d.ecn == CE) == (d.qdepth >= 1) for d in new), "new setting not applied"
    # FIFO queue: in sequence order the packets switch from old to new setting once
    marks = [d.ecn == CE for d in got if d.qdepth >= 1]
    first = marks.index(True)
    assert all(marks[first:]), "marking flipped back after the MODIFY"
    assert all(d.t >= t_call for d in got if d.ecn == CE)


def test_int_reports_match_registers(rig: Rig) -> None:
    rig.p4rt.add_clone_session(INT_REPORT_SESSION, [510])
    pins = rig.p4rt.packet_ins()
    while not pins.empty():
        pins.get_nowait()
    n, seq0 = 300, 300_000
    _settle(rig)
    for reg in ("q_enq_max", "q_enq_sum", "q_enq_cnt"):
        rig.thrift.register_reset(reg)
    before = _pkt_counters(rig)
    got = _sweep(rig, n, cycle=100, pps_in=800, pps_out=400,
                 tos_of=dict.fromkeys(range(seq0, seq0 + n), ECT0), seq0=seq0)
    poll(lambda: pins.qsize() >= len(got), 10)
    regs = {r: rig.thrift.register_read_all(r)[PORT]
            for r in ("q_enq_max", "q_enq_sum", "q_enq_cnt")}
    reports = []
    while not pins.empty():
        pin = pins.get_nowait()
        rep = decode_report(pin.payload, pin.metadata)
        off = 14 + 20 + 8 + 12 + 24 * rep.hop_count
        reports.append((struct.unpack_from("!I", pin.payload, off)[0], rep))
    print(f"\nINT: {len(got)} delivered, {len(reports)} reports; registers {regs}; "
          f"max hop qdepth {max((r.hops[0].qdepth_pkts for _, r in reports), default=-1)}")
    assert len(got) == n and len(reports) == n, _counts(rig, before, n)
    assert all(r.switch_id == SWITCH_ID and r.path == (SWITCH_ID,) for _, r in reports)
    assert all((r.hops[0].ingress_port, r.hops[0].egress_port) == (1, PORT)
               for _, r in reports)
    depth = {d.seq: d.qdepth for d in got}
    assert {s: r.hops[0].qdepth_pkts for s, r in reports} == depth
    hop_q = [r.hops[0].qdepth_pkts for _, r in reports]
    assert max(hop_q) >= 20, "no queue built up"
    assert regs["q_enq_max"] == max(hop_q)
    assert regs["q_enq_cnt"] == len(hop_q) and regs["q_enq_sum"] == sum(hop_q)
