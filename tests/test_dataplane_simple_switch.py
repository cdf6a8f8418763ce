"""p4src/p4cc.p4 on BMv2's plain ``simple_switch`` programmed with ``simple_switch_CLI``
(Thrift), with veth ports and the CPU port 510 on a veth too, so the INT report is seen
on the wire with its packet_in header.  Needs root, simple_switch and simple_switch_CLI;
P4Runtime is covered by tests/test_dataplane_bmv2.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from dataplane_rig import drain, incoming, raw_socket, receive
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.constants import ROCE_PORT
from p4cc.controlplane.p4build import BUILD_DIR
from p4cc.packets.int import (
    DSCP_INT_SUMMARY,
    INT_REPORT_SESSION,
    HopRecord,
    IntMetadata,
    IntSummary,
    add_int,
    decode_report,
    parse_int,
)
from p4cc.topo.bmv2 import free_port
from p4cc.topo.ecmp import five_tuple_hash, flow_sport
from p4cc.topo.veth import veth_pairs

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

JSON = BUILD_DIR / "p4cc.json"
PORTS = {1: "p4dps1", 2: "p4dps2", 3: "p4dps3", 510: "p4dps9"}
H1, H2 = "00:00:0a:00:01:01", "00:00:0a:00:01:02"
SW1, SW2 = "00:aa:00:01:00:01", "00:aa:00:01:00:02"
F, E, INT = "P4ccIngress.fwd.", "P4ccEgress.ecn.", "P4ccEgress.int_egress."
SWITCH_ID = 7


def _cli_cmd(thrift_port: int) -> list[str]:
    """simple_switch_CLI run by this interpreter: its `env python3` shebang may pick an
    interpreter without the thrift module and BMv2's Python packages (the venv has both,
    via --system-site-packages)."""
    return [sys.executable, str(shutil.which("simple_switch_CLI")), "--thrift-port",
            str(thrift_port)]


class Switch:
    def __init__(self, thrift_port: int) -> None:
        self.thrift_port = thrift_port

    def cli(self, *cmds: str) -> str:
        res = subprocess.run(_cli_cmd(self.thrift_port), input="\n".join(cmds) + "\n",
                             capture_output=True, text=True, timeout=60)
        bad = [ln for ln in res.stdout.splitlines() if "Error" in ln or "Invalid" in ln]
        assert not bad, res.stdout
        return res.stdout


def _recv(s: socket.socket, n: int, timeout_s: float = 5.0) -> list[bytes]:
    return receive(s, n, timeout_s, accept=lambda data, addr: incoming(data, addr)
                   and len(data) > 24)


def _frame(dport: int = 6000, tos: int = 2, seq: int = 0, sport: int = 4000,
           dst: str = "10.0.1.2") -> Ether:
    return (Ether(src=H1, dst=SW1) / IP(src="10.0.1.1", dst=dst, tos=tos, id=seq)
            / UDP(sport=sport, dport=dport) / Raw(seq.to_bytes(4, "big") + b"p" * 60))


@pytest.fixture(scope="module")
def sw() -> Iterator[Switch]:
    for tool in ("simple_switch", "simple_switch_CLI"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (BMv2) not installed")
    if os.geteuid() != 0:
        pytest.skip("needs root (veth pairs)")
    if not JSON.is_file():
        pytest.skip("p4cc/data/p4/p4cc.json missing; run make p4")
    thrift_port = free_port()
    with veth_pairs(PORTS):
        cmd = ["simple_switch", "--device-id", "1", "--thrift-port", str(thrift_port)]
        for port, name in PORTS.items():
            cmd += ["-i", f"{port}@{name}a"]
        proc = subprocess.Popen([*cmd, str(JSON)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            s = Switch(thrift_port)
            deadline = time.monotonic() + 30
            while True:
                out = subprocess.run(_cli_cmd(thrift_port), input="show_ports\n",
                                     capture_output=True, text=True)
                if PORTS[1] + "a" in out.stdout:
                    break
                if "ModuleNotFoundError" in out.stderr:
                    pytest.skip(f"simple_switch_CLI cannot run here: {out.stderr[-300:]}")
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"simple_switch did not come up: {out.stdout[-500:]}")
                time.sleep(0.2)
            s.cli(f"table_set_default {F}switch_config {F}set_switch_config {SWITCH_ID} 3000",
                  f"table_add {F}ipv4_lpm {F}set_nhop 10.0.1.2/32 => 2 {H2} {SW2}",
                  f"table_add {F}ipv4_lpm {F}set_nhop 10.0.1.1/32 => 1 {H1} {SW1}",
                  f"table_add {F}ipv4_lpm {F}set_ecmp 10.0.9.0/24 => 1 2",
                  f"table_add {F}ecmp_nhop {F}set_nhop 1 0 => 2 00:00:0a:00:09:02 {SW2}",
                  f"table_add {F}ecmp_nhop {F}set_nhop 1 1 => 3 00:00:0a:00:09:03 "
                  "00:aa:00:01:00:03",
                  f"table_add {INT}int_sink {INT}int_sink_port 2 =>",
                  "table_add P4ccIngress.int_src.int_watchlist P4ccIngress.int_src.int_source "
                  "0&&&0 0&&&0 0&&&0 5000&&&0xffff => 8 1",
                  f"mirroring_add {INT_REPORT_SESSION} 510")
            yield s
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def socks(sw: Switch) -> Iterator[dict[int, socket.socket]]:
    opened = {p: raw_socket(name + "b") for p, name in PORTS.items()}
    drain(*opened.values())
    yield opened
    for s in opened.values():
        s.close()


def _ip_checksum_ok(ip: IP) -> bool:
    fresh = ip.copy()
    fresh.chksum = None
    return bool(IP(bytes(fresh)).chksum == ip.chksum)


def test_forwarding(socks: dict[int, socket.socket]) -> None:
    socks[1].send(bytes(_frame()))
    (raw,) = _recv(socks[2], 1)
    pkt = Ether(raw)
    assert (pkt.src, pkt.dst, pkt[IP].ttl) == (SW2, H2, 63)
    assert _ip_checksum_ok(pkt[IP])


def test_int_source_and_sink(socks: dict[int, socket.socket]) -> None:
    sent = _frame(dport=5000, seq=9)
    socks[1].send(bytes(sent))
    (raw,) = _recv(socks[2], 1)
    pkt = parse_int(raw)
    assert pkt[IP].tos >> 2 == DSCP_INT_SUMMARY and pkt[IP].tos & 3 == 2
    assert pkt[IP].len == len(raw) - 14 and pkt[UDP].len == pkt[IP].len - 20
    assert _ip_checksum_ok(pkt[IP])
    summary = pkt[IntSummary]
    assert summary.hop_count == 1
    assert bytes(summary.payload) == bytes(sent[UDP].payload)
    (rep_raw,) = _recv(socks[510], 1)
    rep = decode_report(rep_raw, with_header=True)
    assert (rep.switch_id, rep.ingress_port, rep.egress_port) == (SWITCH_ID, 1, 2)
    assert rep.path == (SWITCH_ID,) and rep.path_latency_us == summary.path_latency
    inner = parse_int(rep_raw[10:])
    assert inner[IP].len == len(rep_raw) - 24 and _ip_checksum_ok(inner[IP])
    assert bytes(inner[IntMetadata].payload) == bytes(sent[UDP].payload)


def test_int_transit_and_max_hops(socks: dict[int, socket.socket]) -> None:
    upstream = [HopRecord(5, 3, 4, 100, 42, 1, 2), HopRecord(4, 1, 2, 50, 3, 1, 2)]
    socks[1].send(bytes(add_int(_frame(dport=7000, seq=11), upstream)))
    (raw,) = _recv(socks[2], 1)
    summary = parse_int(raw)[IntSummary]
    assert (summary.hop_count, summary.max_qdepth) == (3, 42)
    assert summary.path_latency >= 150
    rep = decode_report(_recv(socks[510], 1)[0], with_header=True)
    assert rep.path == (4, 5, SWITCH_ID) and rep.hops[1:] == tuple(upstream)
    # max_hops reached: no record pushed, e flag set, local hop still in the summary
    socks[1].send(bytes(add_int(_frame(dport=7000, seq=12), upstream, max_hops=2)))
    summary = parse_int(_recv(socks[2], 1)[0])[IntSummary]
    rep = decode_report(_recv(socks[510], 1)[0], with_header=True)
    assert summary.hop_count == 2 and rep.hops_exceeded and summary.path_latency >= 150


def test_ecmp_spreads_flows(socks: dict[int, socket.socket]) -> None:
    for i in range(40):
        socks[1].send(bytes(_frame(sport=1000 + i, seq=i, dst="10.0.9.1")))
    a, b = _recv(socks[2], 40, 3), _recv(socks[3], 40, 1)
    assert len(a) + len(b) == 40 and a and b


def test_ecmp_member_is_the_crc16_of_the_5tuple(socks: dict[int, socket.socket]) -> None:
    """p4cc.topo.ecmp predicts the member of every flow (the simulator routes with it):
    index 0 is port 2, index 1 port 3 (the group above)."""
    want: dict[int, int] = {}
    for i in range(40):
        sport = flow_sport(i)
        socks[1].send(bytes(_frame(sport=sport, dport=ROCE_PORT, seq=i, dst="10.0.9.1")))
        want[i] = 2 + five_tuple_hash("10.0.1.1", "10.0.9.1", sport, ROCE_PORT) % 2
    got = {Ether(f)[IP].id: port for port in (2, 3) for f in _recv(socks[port], 40, 2)}
    assert got == want
    assert set(want.values()) == {2, 3}


def test_ecn_step_marking_and_registers(sw: Switch, socks: dict[int, socket.socket]) -> None:
    sw.cli(f"table_add {E}ecn_config {E}set_ecn 2 => 10 10 65535",
           "set_queue_depth 500 2", "set_queue_rate 100 2")
    try:
        n = 60
        for i in range(n):
            socks[1].send(bytes(_frame(tos=2 if i % 2 == 0 else 0, seq=i)))
        frames = _recv(socks[2], n, 20)
    finally:
        sw.cli("set_queue_rate 1000000 2", f"table_delete {E}ecn_config 0")
    ecn = {int.from_bytes(bytes(Ether(f)[Raw])[:4], "big"): Ether(f)[IP].tos & 3
           for f in frames}
    assert len(ecn) == n
    assert all(ecn[i] != 3 for i in range(10)), "queue < kmin: never marked"
    assert all(ecn[i] == 0 for i in range(1, n, 2)), "non-ECT: never marked"
    late = [ecn[i] for i in range(40, n, 2)]
    assert sum(v == 3 for v in late) >= 0.8 * len(late)
    out = sw.cli("register_read P4ccEgress.telemetry.q_enq_max 2",
                 "counter_read P4ccEgress.ecn.port_marked 2")
    qmax = int(out.split("q_enq_max[2]=")[1].split()[0])
    assert qmax >= 10
    assert "0 packets" not in out.split("port_marked[2]=")[1].splitlines()[0]
