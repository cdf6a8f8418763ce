"""Epoch telemetry on a live simple_switch_grpc: the same per-interval figures as
read-and-reset, for the same packets (issue 10; p4cc.controlplane.epoch).

Rig: tests/dataplane_rig.py (one switch, veths ``p4ep*``), port 2's queue slowed over
Thrift.  Each interval sends a burst of UDP packets from several sources and flows into
port 1 (some intervals none), waits until every packet has left port 2 and its INT
report (a clone to the CPU port, one hop record with the packet's ``enq_qdepth`` and
``deq_timedelta``) has arrived, then polls with the production TelemetryPoller.  The
poll boundaries therefore fall between packets, and the expected figures follow from
what was sent:

* queue mean/max and sojourn from the INT reports (the registers sum the same fields);
* incast degree, flow and elephant counts from linear counting of the bits the program
  sets: bit crc16(src) mod 256, bit crc32(5-tuple) >> 24, elephant once the count-min
  estimate (min of two 12-bit slices of the same CRC-32, bytes since the poller's
  sketch reset) reaches ``elephant_bytes`` -- computed here in Python (BMv2's crc16 is
  CRC-16/ARC, its crc32 zlib's CRC-32).

The epoch program (p4cc/data/p4) must give exactly those figures, and so must the
read-and-reset build of the same source (``p4c -DP4CC_READ_RESET``, compiled here;
marker ``p4c``), with identical records apart from the time fields.  The schedule has
an empty interval and intervals that touch fewer bitmap words than the one two epochs
before, so a reader or program that ignored the epoch tags would report stale maxima
and bits: the test checks that such a reading differs from the expected figures.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dataplane_rig import H1_MAC, H2_IP, SW_MAC, Rig, one_switch, poll, skip_reason
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.controlplane import epoch
from p4cc.controlplane.records import PortTelemetry
from p4cc.controlplane.telemetry import BITMAP_BITS, TelemetryPoller, linear_count
from p4cc.packets.int import INT_REPORT_SESSION, decode_report
from p4cc.paths import P4SRC_DIR
from p4cc.scale import Scale
from p4cc.topo.ecmp import crc16_arc

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

PREFIX = "p4ep"
SWITCH_ID = 0xE90C
INT_DPORT = 5000
PORT = 2
QUEUE_PPS = 400          # port 2's service rate: bursts build a queue of tens of packets
PAYLOAD = 64             # bytes after UDP (4-byte sequence number + padding)
FRAME_BYTES = 14 + 20 + 8 + PAYLOAD  # standard_metadata.packet_length (before INT)
ELEPHANT_BYTES = 12 * FRAME_BYTES    # a flow is an elephant from its 12th packet on
SCALE = Scale()
#: the poller's clock reads k + 1 s (plus the real time within the poll) at the poll
#: after interval k, so a 3.5-s sketch window restarts the sketch at the prime and at the
#: poll after interval 3: flow (1, 4001) is an elephant in interval 1 (18 packets) but
#: not in interval 4 (4 packets of a new window; 22 without the restart)
SKETCH_WINDOW_S = 3.5
SKETCH_RESTARTS = (4,)  # clock seconds of the polls that restart the sketch (after the prime)

#: per interval: (source host number, UDP source port, packets); sources 10.0.9.<n>.
#: Source ports are irregular on purpose: CRC-32 is linear, and flows whose source
#: address and port step together (10.0.9.1:100, .2:101, ...) share flow bits.
SCHEDULE: tuple[tuple[tuple[int, int, int], ...], ...] = (
    ((1, 4001, 10), (2, 17011, 8), (3, 29002, 8), (4, 40503, 6), (5, 51234, 6),
     (6, 62011, 4)),
    ((1, 4001, 8), (7, 7007, 6)),
    (),
    ((2, 17011, 5),),
    ((1, 4001, 4), (8, 18118, 14), (9, 9119, 3), (3, 33033, 3)),
    ((8, 18118, 2),),
)


def src_ip(n: int) -> str:
    return f"10.0.9.{n}"


def flow_hash(src: str, sport: int) -> int:
    """crc32 of telemetry.p4's field list {src, dst, protocol, sport, dport}."""
    key = (bytes(map(int, src.split("."))) + bytes(map(int, H2_IP.split(".")))
           + struct.pack("!BHH", 17, sport, INT_DPORT))
    return zlib.crc32(key)


@dataclass(frozen=True)
class Expected:
    """What port 2's record of one interval must say."""

    pkts: int
    qdepths: tuple[int, ...]
    sojourns_us: tuple[int, ...]
    incast: int
    flows: int
    elephants: int


@dataclass
class Run:
    """One program's run of SCHEDULE."""

    records: list[dict[int, PortTelemetry]] = field(default_factory=list)
    expected: list[Expected] = field(default_factory=list)
    untagged: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: the figures a sketch that is never restarted would give
    no_restart: list[Expected] = field(default_factory=list)
    epoch_mode: bool = False
    read_spread_ms: list[float] = field(default_factory=list)


class Spy:
    """The Thrift client as the poller sees it, remembering each whole-array read."""

    def __init__(self, thrift: Any) -> None:
        self._thrift = thrift
        self.last: dict[str, list[int]] = {}

    def register_read_all(self, name: str) -> list[int]:
        values: list[int] = self._thrift.register_read_all(name)
        self.last[name] = values
        return values

    def __getattr__(self, name: str) -> Any:
        return getattr(self._thrift, name)


def _frames(interval: int, burst: Sequence[tuple[int, int, int]]) -> list[bytes]:
    out, seq = [], interval * 1000
    for n, sport, count in burst:
        tmpl = bytes(Ether(src=H1_MAC, dst=SW_MAC[1])
                     / IP(src=src_ip(n), dst=H2_IP, tos=0, ttl=64, id=1)
                     / UDP(sport=sport, dport=INT_DPORT, chksum=0) / Raw(b"p" * PAYLOAD))
        for _ in range(count):
            out.append(tmpl[:42] + seq.to_bytes(4, "big") + tmpl[46:])
            seq += 1
    return _interleave(out, burst)


def _interleave(frames: list[bytes], burst: Sequence[tuple[int, int, int]]) -> list[bytes]:
    """Round-robin over the flows of ``burst``, as concurrent senders would send."""
    per_flow, i = [], 0
    for *_, count in burst:
        per_flow.append(frames[i:i + count])
        i += count
    return [f[k] for k in range(max(map(len, per_flow), default=0)) for f in per_flow
            if k < len(f)]


def _ones_of(bits: set[int]) -> int:
    return linear_count(len(bits), BITMAP_BITS)


def _reports(rig: Rig, n: int) -> list[Any]:
    pins = rig.p4rt.packet_ins()
    assert poll(lambda: pins.qsize() >= n, 15), f"{pins.qsize()} of {n} INT reports"
    out = []
    while not pins.empty():
        pin = pins.get_nowait()
        out.append(decode_report(pin.payload, pin.metadata))
    return out


def _untagged(spy: Spy, closed: int) -> tuple[int, int, int, int]:
    """Port 2's (max depth, incast, flows, elephants) of the closed epoch read WITHOUT
    the tag test: what a poller or program ignoring the tags would report."""
    def bank(name: str) -> list[int]:
        cells = spy.last[name]
        size = len(cells) // 2
        return [c & epoch.VALUE_MASK for c in cells[(closed & 1) * size:][:size]]

    def ones(name: str) -> int:
        words = epoch.join_cells(bank(name))
        return linear_count(sum(bin(w).count("1") for w in words[PORT * 4:PORT * 4 + 4]))

    return (bank("q_enq_max")[PORT], ones("incast_bits"), ones("flow_bits"),
            ones("elephant_bits"))


def run_schedule(p4info: Path, p4json: Path, prefix: str) -> Run:
    run = Run()
    with one_switch(prefix, SWITCH_ID, INT_DPORT, p4info=p4info, p4json=p4json) as rig:
        rig.thrift.set_queue_rate(QUEUE_PPS, PORT)
        rig.thrift.set_queue_depth(500, PORT)
        rig.p4rt.set_default_action("switch_config", "set_switch_config",
                                    {"switch_id": SWITCH_ID, "elephant_bytes": ELEPHANT_BYTES})
        rig.p4rt.add_clone_session(INT_REPORT_SESSION, [510])
        spy = Spy(rig.thrift)
        base = [0.0, time.monotonic()]  # the poll's clock second, real time at its start

        def clock() -> float:
            return base[0] + time.monotonic() - base[1]

        poller = TelemetryPoller("s1", (1, PORT), rig.p4rt, spy, SCALE,
                                 {1: SCALE.link_rate_bps, PORT: SCALE.link_rate_bps},
                                 dict, t0=0.0, clock=clock, sketch_window_s=SKETCH_WINDOW_S)
        run.epoch_mode = poller.epoch_mode
        poller.prime()
        sketch = ([0] * 4096, [0] * 4096)  # the count-min rows, as the program keeps them
        unrestarted = ([0] * 4096, [0] * 4096)
        delivered = 0
        for k, burst in enumerate(SCHEDULE):
            frames = _frames(k, burst)
            for f in frames:
                rig.tx.send(f)
            delivered += len(frames)
            assert rig.rx.wait_for(delivered, 20), (
                f"interval {k}: {rig.rx.count()} of {delivered} delivered")
            reports = _reports(rig, len(frames))
            base[:] = [float(k + 1), time.monotonic()]
            run.records.append(poller.poll())
            run.read_spread_ms.append((poller.last_read[1] - poller.last_read[0]) * 1e3)
            if run.epoch_mode:
                assert poller._epoch is not None  # read at the prime
                run.untagged.append(_untagged(spy, poller._epoch - 1))
            run.expected.append(_expected(reports, sketch))
            run.no_restart.append(_expected(reports, unrestarted))
            if k + 1 in SKETCH_RESTARTS:  # the packets after this poll: a new window
                sketch = ([0] * 4096, [0] * 4096)
    return run


def _expected(reports: Sequence[Any], sketch: tuple[list[int], list[int]]) -> Expected:
    """Port 2's figures for the packets of ``reports`` (in switch order: the sketch is
    updated packet by packet, as the program does)."""
    assert all(r.switch_id == SWITCH_ID and r.hops[0].egress_port == PORT for r in reports)
    incast, flows, elephants = set(), set(), set()
    for r in reports:
        incast.add(crc16_arc(bytes(map(int, r.src.split(".")))) & 0xFF)
        fh = flow_hash(r.src, r.sport)
        bit = fh >> 24
        flows.add(bit)
        r0, r1 = fh & 0xFFF, (fh >> 12) & 0xFFF
        sketch[0][r0] += FRAME_BYTES
        sketch[1][r1] += FRAME_BYTES
        if min(sketch[0][r0], sketch[1][r1]) >= ELEPHANT_BYTES:
            elephants.add(bit)
    return Expected(len(reports), tuple(r.hops[0].qdepth_pkts for r in reports),
                    tuple(r.hops[0].sojourn_us for r in reports), _ones_of(incast),
                    _ones_of(flows), _ones_of(elephants))


def _check(run: Run) -> None:
    assert len(run.records) == len(SCHEDULE)
    for k, (recs, exp) in enumerate(zip(run.records, run.expected, strict=True)):
        r, idle = recs[PORT], recs[1]
        n = exp.pkts
        got = (r.tx_pkts, r.qlen_avg_bytes, r.qlen_max_bytes, r.sojourn_avg_s,
               r.incast_degree, r.active_flows, r.elephant_flows)
        want = (n, sum(exp.qdepths) / n * SCALE.pkt_bytes if n else 0.0,
                float(max(exp.qdepths, default=0) * SCALE.pkt_bytes),
                sum(exp.sojourns_us) / n * 1e-6 if n else 0.0,
                exp.incast, exp.flows, exp.elephants)
        assert got == pytest.approx(want, rel=1e-12), f"interval {k}: {got} != {want}"
        assert (idle.tx_pkts, idle.qlen_max_bytes, idle.active_flows) == (0, 0.0, 0)


@pytest.fixture(scope="module")
def epoch_run() -> Run:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    from dataplane_rig import JSON, P4INFO
    run = run_schedule(P4INFO, JSON, PREFIX)
    figures = [(e.pkts, max(e.qdepths, default=0), e.incast, e.flows, e.elephants)
               for e in run.expected]
    print(f"\nepoch program: read spread per poll {[round(s, 2) for s in run.read_spread_ms]}"
          f" ms; port 2 per interval (pkts, max q, incast, flows, elephants): {figures}")
    return run


def test_epoch_program_gives_the_figures_of_what_was_sent(epoch_run: Run) -> None:
    assert epoch_run.epoch_mode, "p4cc/data/p4/p4cc.json is not the epoch program"
    assert max(max(e.qdepths, default=0) for e in epoch_run.expected) >= 10, "no queue"
    assert any(e.elephants for e in epoch_run.expected), "no elephant in the schedule"
    _check(epoch_run)


def test_sketch_window_restarts_without_a_reset(epoch_run: Run) -> None:
    """The poller moves the sketch window with the epoch write (no register reset), and
    the data plane restarts the flows' sketch cells: interval 4 counts one elephant
    fewer than a sketch that went on counting would."""
    assert [e.elephants for e in epoch_run.no_restart] != [
        e.elephants for e in epoch_run.expected]
    assert epoch_run.expected[4].elephants < epoch_run.no_restart[4].elephants
    assert [r[PORT].elephant_flows for r in epoch_run.records] == [
        e.elephants for e in epoch_run.expected]


def test_ignoring_the_tags_would_fail(epoch_run: Run) -> None:
    """The schedule exercises the tags: read without them, the closed bank holds stale
    maxima and bits of two epochs back in some intervals (the empty one at least)."""
    wrong = [k for k, (u, e) in enumerate(zip(epoch_run.untagged, epoch_run.expected,
                                                strict=True))
             if u != (max(e.qdepths, default=0), e.incast, e.flows, e.elephants)]
    assert 2 in wrong and len(wrong) >= 2, wrong


@pytest.mark.p4c
def test_read_and_reset_build_gives_the_same_records(epoch_run: Run, tmp_path: Path) -> None:
    p4c = shutil.which("p4c")
    if p4c is None:
        pytest.skip("p4c not installed")
    info, out = tmp_path / "rr.p4info.txtpb", tmp_path / "rr"
    res = subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model", "-DP4CC_READ_RESET",
                          "--p4runtime-files", str(info), "-o", str(out), "p4cc.p4"],
                         cwd=P4SRC_DIR, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    rr = run_schedule(info, out / "p4cc.json", PREFIX)
    assert not rr.epoch_mode
    _check(rr)

    def timeless(recs: Mapping[int, PortTelemetry]) -> dict[int, tuple[Any, ...]]:
        return {p: (r.tx_pkts, r.incast_degree, r.active_flows, r.elephant_flows,
                    r.tx_marked_pkts) for p, r in recs.items()}

    assert [timeless(r) for r in rr.records] == [timeless(r) for r in epoch_run.records]

