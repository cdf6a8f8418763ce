"""Summary-only INT watch on a live simple_switch_grpc (needs root and BMv2).

``int_source_summary`` (p4src/include/int_source.p4) makes a flow carry INT whose sink
writes the 8-byte summary but clones no report (int_md.no_report); ``int_source`` keeps
the report.  One switch (tests/dataplane_rig.py), port 2 the sink, clone session 100 to
the CPU port so that a reported packet does produce a PacketIn (which the test checks
first: the absence of PacketIns for the summary-only flow is then meaningful).
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest
from dataplane_rig import ECT0, Rig, frames, one_switch, skip_reason
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.packets.int import INT_REPORT_SESSION, HopRecord, IntMetadata, add_int

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

SWITCH_ID = 9
REPORT_DPORT = 5000  # int_source (the rig's own entry)
SUMMARY_DPORT = 5001  # int_source_summary
QUIET_S = 1.0  # a PacketIn arrives within ms of its packet; wait this long for strays


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with one_switch("p4is", SWITCH_ID, REPORT_DPORT) as r:
        r.p4rt.insert_entry("int_watchlist", {"l4_dport": (SUMMARY_DPORT, 0xFFFF)},
                            "int_source_summary", {"max_hops": 8}, priority=1)
        r.p4rt.add_clone_session(INT_REPORT_SESSION, [510])
        yield r


def _clear(pins: queue.Queue[Any]) -> None:
    while not pins.empty():
        pins.get_nowait()


def _pins_within(pins: queue.Queue[Any], quiet_s: float) -> list[Any]:
    """Every PacketIn that arrives until ``quiet_s`` passes without one."""
    got: list[Any] = []
    while True:
        try:
            got.append(pins.get(timeout=quiet_s))
        except queue.Empty:
            return got


def test_report_watch_still_reports(rig: Rig) -> None:
    pins = rig.p4rt.packet_ins()
    _clear(pins)
    rig.rx.take()
    for f in frames(range(5), dict.fromkeys(range(5), ECT0), REPORT_DPORT):
        rig.tx.send(f)
    assert rig.rx.wait_for(5, 5.0)
    assert len(_pins_within(pins, QUIET_S)) == 5


def test_summary_watch_delivers_summary_without_report(rig: Rig) -> None:
    """Every packet of the summary-only flow arrives with the summary (one hop, the
    queue depth it met) and none reaches the controller."""
    pins = rig.p4rt.packet_ins()
    _clear(pins)
    rig.rx.take()
    n = 60
    rig.thrift.set_queue_depth(500, 2)
    rig.thrift.set_queue_rate(200, 2)  # pps: the burst queues up, so depths grow
    try:
        for f in frames(range(n), dict.fromkeys(range(n), ECT0), SUMMARY_DPORT):
            rig.tx.send(f)
        assert rig.rx.wait_for(n, 10.0), f"{rig.rx.count()} of {n} delivered"
    finally:
        rig.thrift.set_queue_rate(1_000_000, 2)
    got = rig.rx.take()
    assert sorted(d.seq for d in got) == list(range(n))
    assert all(d.hop_count == 1 for d in got)
    assert max(d.qdepth for d in got) >= 10  # the summary carries the queue it met
    assert _pins_within(pins, QUIET_S) == []


@pytest.mark.parametrize(("no_report", "reports"), [(1, 0), (0, 1)])
def test_sink_obeys_the_flag_of_an_arriving_stack(rig: Rig, no_report: int,
                                                  reports: int) -> None:
    """A packet that arrives with INT from an upstream switch (one hop record) is
    reported or not by the flag its source set: the sink need not be the source."""
    pins = rig.p4rt.packet_ins()
    _clear(pins)
    rig.rx.take()
    base = (Ether(src="00:00:0a:00:01:01", dst="00:aa:00:01:00:01")
            / IP(src="10.0.1.1", dst="10.0.1.2", tos=ECT0, ttl=64)
            / UDP(sport=4000, dport=6000) / Raw((7).to_bytes(4, "big") + b"p" * 60))
    pkt = add_int(base, [HopRecord(4, 1, 3, 10, 42, 0, 5)])
    pkt[IntMetadata].no_report = no_report
    rig.tx.send(bytes(pkt))
    assert rig.rx.wait_for(1, 5.0)
    (d,) = rig.rx.take()
    assert (d.seq, d.hop_count, d.qdepth) == (7, 2, 42)
    assert len(_pins_within(pins, QUIET_S)) == reports
