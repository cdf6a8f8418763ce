"""p4src/p4cc.p4 on a real simple_switch_grpc with two veth ports (needs root and BMv2).

One switch, port 1 -> host side ``p4dp1b``, port 2 -> ``p4dp2b``.  Checks forwarding
(MAC rewrite, TTL, checksum), INT at a switch that is both source and sink (summary to
the receiver, report as PacketIn), and ECN marking against queue depth with BMv2's
queue slowed down over Thrift.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from dataplane_rig import drain, incoming, raw_socket, receive
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.controlplane.bmv2config import device_config
from p4cc.controlplane.p4build import BUILD_DIR
from p4cc.packets.int import (
    DSCP_INT_SUMMARY,
    INT_REPORT_SESSION,
    IntSummary,
    decode_report,
    parse_int,
)
from p4cc.topo.veth import veth_pairs

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

P4INFO = BUILD_DIR / "p4cc.p4info.txtpb"
JSON = BUILD_DIR / "p4cc.json"
H1_MAC, H2_MAC = "00:00:0a:00:01:01", "00:00:0a:00:01:02"
SW_MAC = {1: "00:aa:00:01:00:01", 2: "00:aa:00:01:00:02"}
SWITCH_ID = 7
INT_DPORT = 5000


def _skip_reason() -> str | None:
    if shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc (BMv2) not installed"
    if os.geteuid() != 0:
        return "needs root (veth pairs)"
    if not (P4INFO.is_file() and JSON.is_file()):
        return "p4cc/data/p4 artifacts missing; run make p4"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@dataclass
class Rig:
    p4rt: Any
    thrift: Any
    tx: socket.socket
    rx: socket.socket


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.controlplane.thrift import ThriftClient
    from p4cc.errors import P4ccError
    from p4cc.topo.bmv2 import Bmv2Process

    with veth_pairs("p4dp"):
        proc = Bmv2Process("p4dp", 1, {1: "p4dp1a", 2: "p4dp2a"})
        try:
            proc.start()
        except P4ccError as exc:
            pytest.skip(f"BMv2 did not start: {exc}")
        p4rt = P4RuntimeClient(proc.grpc_addr, 1)
        thrift = ThriftClient(f"127.0.0.1:{proc.thrift_port}", JSON)
        tx, rx = raw_socket("p4dp1b"), raw_socket("p4dp2b")
        try:
            p4rt.connect()
            p4rt.set_pipeline(P4INFO, JSON, device_config(JSON))  # as runs push it
            thrift.connect()
            p4rt.set_default_action("switch_config", "set_switch_config",
                                    {"switch_id": SWITCH_ID, "elephant_bytes": 3000})
            for port, prefix, mac in ((1, "10.0.1.1", H1_MAC), (2, "10.0.1.2", H2_MAC)):
                p4rt.insert_entry("ipv4_lpm", {"dst_addr": (prefix, 32)}, "set_nhop",
                                  {"port": port, "dmac": mac, "smac": SW_MAC[port]})
            p4rt.insert_entry("int_sink", {"egress_port": 2}, "int_sink_port")
            p4rt.insert_entry("int_watchlist", {"l4_dport": (INT_DPORT, 0xFFFF)},
                              "int_source", {"max_hops": 8}, priority=1)
            p4rt.add_clone_session(INT_REPORT_SESSION, [510])
            yield Rig(p4rt, thrift, tx, rx)
        finally:
            tx.close()
            rx.close()
            p4rt.close()
            thrift.close()
            proc.stop()


def _frame(dport: int, tos: int = 0x02, seq: int = 0) -> bytes:
    return bytes(Ether(src=H1_MAC, dst=SW_MAC[1]) / IP(src="10.0.1.1", dst="10.0.1.2",
                                                       tos=tos, ttl=64, id=seq)
                 / UDP(sport=4000, dport=dport) / Raw(seq.to_bytes(4, "big") + b"p" * 60))


def _ipv4_udp(data: bytes, addr: Any) -> bool:
    """An incoming IPv4/UDP frame (to 10.0.1.2 on the receiver's interface)."""
    return incoming(data, addr) and data[12:14] == b"\x08\x00" and data[23] == 17


def test_forwarding_rewrites_mac_ttl_checksum(rig: Rig) -> None:
    drain(rig.rx)
    rig.tx.send(_frame(6000))
    (raw,) = receive(rig.rx, 1, accept=_ipv4_udp)
    pkt = Ether(raw)
    assert pkt.src == SW_MAC[2] and pkt.dst == H2_MAC
    assert pkt[IP].ttl == 63 and pkt[IP].tos == 0x02
    assert IP(bytes(pkt[IP])).chksum == pkt[IP].chksum
    fresh = pkt[IP].copy()
    fresh.chksum = None
    assert IP(bytes(fresh)).chksum == pkt[IP].chksum


def test_int_source_and_sink_on_one_switch(rig: Rig) -> None:
    drain(rig.rx)
    pins = rig.p4rt.packet_ins()
    while not pins.empty():
        pins.get_nowait()
    sent = _frame(INT_DPORT, tos=0x02, seq=9)
    rig.tx.send(sent)
    (raw,) = receive(rig.rx, 1, accept=_ipv4_udp)
    pkt = parse_int(raw)
    ip = pkt[IP]
    assert ip.tos >> 2 == DSCP_INT_SUMMARY
    assert ip.len == len(raw) - 14 and pkt[UDP].len == ip.len - 20
    s = pkt[IntSummary]
    assert s.hop_count == 1
    assert bytes(s.payload) == bytes(Ether(sent)[UDP].payload)
    pin = pins.get(timeout=5)
    rep = decode_report(pin.payload, pin.metadata)
    assert rep.switch_id == SWITCH_ID and (rep.ingress_port, rep.egress_port) == (1, 2)
    assert len(rep.hops) == 1 and rep.hops[0].switch_id == SWITCH_ID
    assert rep.hops[0].qdepth_pkts == s.max_qdepth
    assert rep.path_latency_us == s.path_latency
    assert (rep.src, rep.dst, rep.dport) == ("10.0.1.1", "10.0.1.2", INT_DPORT)


def test_ecn_marks_by_queue_depth(rig: Rig) -> None:
    kmin = kmax = 10
    rig.p4rt.insert_entry("ecn_config", {"egress_port": 2}, "set_ecn",
                          {"kmin": kmin, "kmax": kmax, "pmax": 65535})
    rig.thrift.set_queue_depth(500, 2)
    rig.thrift.set_queue_rate(100, 2)  # pps: the burst below queues up
    try:
        drain(rig.rx)
        n = 60
        for i in range(n):
            rig.tx.send(_frame(6001, tos=0x02 if i % 2 == 0 else 0x00, seq=i))
        frames = receive(rig.rx, n, timeout_s=20, accept=_ipv4_udp)
    finally:
        rig.thrift.set_queue_rate(1_000_000, 2)
        rig.p4rt.delete_entry("ecn_config", {"egress_port": 2})
    assert len(frames) == n
    ecn = {int.from_bytes(bytes(Ether(f)[Raw])[:4], "big"): Ether(f)[IP].tos & 3
           for f in frames}
    # the queue holds at most i packets when packet i arrives: the first kmin never marked
    assert all(ecn[i] != 3 for i in range(kmin))
    assert all(ecn[i] == 0 for i in range(1, n, 2)), "non-ECT packets must never be marked"
    late_ect = [ecn[i] for i in range(40, n, 2)]
    assert sum(v == 3 for v in late_ect) >= 0.8 * len(late_ect)
    assert max(rig.thrift.register_read_all("q_enq_max")[2:3]) >= kmax


def test_empty_queue_is_never_marked(rig: Rig) -> None:
    """A packet that finds its queue empty skips the RED lookup (p4src ecn.p4): with
    Kmin = Kmax = 0, which marks every packet that takes the lookup, packets sent one
    at a time stay ECT(0) and packets that find a queue are all CE."""
    rig.p4rt.insert_entry("ecn_config", {"egress_port": 2}, "set_ecn",
                          {"kmin": 0, "kmax": 0, "pmax": 65535})
    try:
        drain(rig.rx)
        alone = []
        for i in range(5):  # one at a time: each is forwarded before the next arrives
            rig.tx.send(_frame(6002, seq=i))
            alone += receive(rig.rx, 1, timeout_s=10, accept=_ipv4_udp)
        rig.thrift.set_queue_depth(500, 2)
        rig.thrift.set_queue_rate(100, 2)  # pps: the burst below queues up
        try:
            n = 20
            for i in range(n):
                rig.tx.send(_frame(6002, seq=100 + i))
            burst = receive(rig.rx, n, timeout_s=20, accept=_ipv4_udp)
        finally:
            rig.thrift.set_queue_rate(1_000_000, 2)
    finally:
        rig.p4rt.delete_entry("ecn_config", {"egress_port": 2})
    assert len(alone) == 5 and len(burst) == n
    assert [Ether(f)[IP].tos & 3 for f in alone] == [2] * 5
    ecn = {int.from_bytes(bytes(Ether(f)[Raw])[:4], "big") - 100: Ether(f)[IP].tos & 3
           for f in burst}
    # the burst's first packet may find the queue empty; every later one finds a queue
    assert [ecn[i] for i in range(1, n)] == [3] * (n - 1)

def test_queue_unused_pins_empty(rig: Rig) -> None:
    """Nothing but INT reports reaches the controller."""
    pins: queue.Queue[Any] = rig.p4rt.packet_ins()
    while not pins.empty():
        assert pins.get_nowait().metadata.get("reason", 1) == 1
