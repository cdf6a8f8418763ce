"""p4cc.topo.ecmp: the data plane's ECMP hash in Python, the hosts' source ports, and the
simulator's paths.  (That a live BMv2 switch picks the predicted member:
tests/test_dataplane_simple_switch.py::test_ecmp_member_is_the_crc16_of_the_5tuple.)"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from fixed_cc import Fixed

from p4cc.constants import ROCE_PORT
from p4cc.controlplane.routes import compute_routes
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig
from p4cc.sim.fabric import Fabric
from p4cc.topo.ecmp import (
    SPORT_BASE,
    SPORT_SPAN,
    crc16_arc,
    five_tuple_hash,
    flow_hash,
    flow_sport,
)
from p4cc.topo.spec import parse_topo


def test_crc16_is_crc16_arc() -> None:
    # the CRC catalogue's check value of CRC-16/ARC, and two bit-by-bit values
    assert crc16_arc(b"123456789") == 0xBB3D
    assert crc16_arc(b"") == 0
    assert crc16_arc(b"\x01") == 0xC0C1


def test_five_tuple_bytes_in_field_order() -> None:
    key = bytes([10, 0, 1, 1, 10, 0, 2, 2, 17]) + (10007).to_bytes(2, "big") \
        + ROCE_PORT.to_bytes(2, "big")
    assert five_tuple_hash("10.0.1.1", "10.0.2.2", 10007) == crc16_arc(key)
    assert flow_hash("10.0.1.1", "10.0.2.2", 7) == crc16_arc(key)
    back = bytes([10, 0, 2, 2, 10, 0, 1, 1, 17]) + ROCE_PORT.to_bytes(2, "big") \
        + (10007).to_bytes(2, "big")
    assert flow_hash("10.0.2.2", "10.0.1.1", 7, reply=True) == crc16_arc(back)
    with pytest.raises(ValueError, match="IPv4"):
        five_tuple_hash("10.0.1", "10.0.2.2", 1)
    with pytest.raises(ValueError, match=r"not an IPv4 address: '10\.0\.2\.256'"):
        five_tuple_hash("10.0.1.1", "10.0.2.256", 1)


def test_flow_sport() -> None:
    assert flow_sport(0) == SPORT_BASE and flow_sport(7) == SPORT_BASE + 7
    assert flow_sport(SPORT_SPAN + 3) == SPORT_BASE + 3
    ports = {flow_sport(i) for i in range(3 * SPORT_SPAN)}
    assert len(ports) == SPORT_SPAN
    assert ROCE_PORT not in ports and max(ports) < 32768  # below Linux's ephemeral range
    with pytest.raises(ValueError, match="id is >= 0, got -1"):
        flow_sport(-1)


@pytest.mark.parametrize("text", ["leafspine,spines=2,leaves=2,hosts=2",
                                  "leafspine,spines=4,leaves=2,hosts=4"])
def test_simulator_routes_each_flow_as_the_switches_hash_it(text: str) -> None:
    """Every hop of a simulated flow's path (data and replies) is the ECMP member the
    installed routes' group has at index hash mod size."""
    topo = parse_topo(text, "testbed")
    fab, routes = Fabric(topo), compute_routes(topo)
    queue_of = {v: k for k, v in fab.index.items()}  # queue index -> (switch, port)
    src, dst = topo.hosts[0], topo.hosts[-1]
    for fid in range(200):
        for a, b, reply in ((src, dst, False), (dst, src, True)):
            h = flow_hash(a.ip, b.ip, fid, reply)
            path = fab.path(a.name, b.name, fid, reply=reply)
            assert path
            for q in path:
                sw, port = queue_of[q]
                r = routes[sw].lookup(b.ip)
                if r.nhop is not None:
                    assert port == r.nhop.port
                else:
                    assert r.group is not None
                    members = routes[sw].group(r.group).members
                    assert port == members[h % len(members)].port


def _send(specs: list[FlowSpec], rx: Receiver) -> tuple[list[dict[str, Any]], Sender]:
    specs = [FlowSpec("127.0.0.1", s.size, start_s=s.start_s, port=rx.port, ref=s.ref)
             for s in specs]
    tx = Sender(specs, lambda _s: Fixed(1e8), SenderConfig(pkt_bytes=1000)).start()  # type: ignore[arg-type,return-value]
    assert tx.wait(10.0)
    tx.stop()
    return tx.records(), tx


def test_sender_sends_a_scheduled_flow_from_its_port() -> None:
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        recs, tx = _send([FlowSpec("x", 3000, start_s=0.0, ref=12345),
                          FlowSpec("x", 3000, start_s=0.0, ref=12346)], rx)
    finally:
        rx.stop()
    assert sorted(r["sport"] for r in recs) == [flow_sport(12345), flow_sport(12346)]
    assert all(r["completed"] for r in recs) and tx.sport_fallbacks == 0


def test_sender_falls_back_when_the_port_is_taken(caplog: pytest.LogCaptureFixture) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        taken.bind(("0.0.0.0", flow_sport(12347)))
        recs, tx = _send([FlowSpec("x", 3000, start_s=0.0, ref=12347)], rx)
    finally:
        rx.stop()
        taken.close()
    assert tx.sport_fallbacks == 1
    assert f"flow 12347: source port {flow_sport(12347)} is taken" in caplog.text
    assert recs[0]["completed"] and recs[0]["sport"] != flow_sport(12347)
