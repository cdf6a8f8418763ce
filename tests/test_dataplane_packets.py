"""INT Scapy layers: build -> bytes -> dissect, and the report/summary decoders."""

from __future__ import annotations

import struct

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4cc.packets.int import (
    DSCP_INT,
    DSCP_INT_SUMMARY,
    INT_HOP_BYTES,
    INT_SHIM_MD_BYTES,
    HopRecord,
    IntDecodeError,
    IntHop,
    IntMetadata,
    IntShim,
    IntSummary,
    PacketInHeader,
    add_int,
    decode_report,
    parse_int,
    parse_summary,
)

HOPS = [
    HopRecord(3, 2, 1, 120, 17, 5000, 100),  # sink, newest first
    HopRecord(2, 1, 3, 40, 2, 4000, 10),
    HopRecord(1, 1, 4, 30, 5, 3000, 20),
]


def _frame(dport: int = 5000, tos: int = 0x02, payload: bytes = b"d" * 32) -> Ether:
    return (
        Ether(src="00:00:0a:00:01:01", dst="00:00:0a:00:02:01")
        / IP(src="10.0.1.1", dst="10.0.2.1", tos=tos)
        / UDP(sport=1234, dport=dport)
        / Raw(payload)
    )


def test_header_sizes_match_p4():
    assert len(IntShim()) == 4
    assert len(IntMetadata()) == 8
    assert len(IntHop()) == INT_HOP_BYTES == 24
    assert len(IntSummary()) == 8
    assert len(PacketInHeader()) == 10


def test_hop_wire_order():
    raw = bytes(IntHop(switch_id=0x01020304, ingress_port=5, egress_port=6, hop_latency=7,
                       qdepth=8, egress_ts=9, sojourn=10))
    assert raw == struct.pack("!IHHIIII", 0x01020304, 5, 6, 7, 8, 9, 10)


def test_shim_md_wire_order():
    raw = bytes(IntShim(orig_dscp=0x2E) / IntMetadata(e=1, max_hops=4, hops=[IntHop()]))
    # type 1 | len 9 words | dscp | rsvd
    assert raw[:4] == bytes([0x10, 9, 0x2E, 0])
    # version 1, e bit, hop_count 1, max 4, hop words 6, instructions 0xFE00, rsvd
    assert raw[4:12] == bytes([0x18, 1, 4, 6, 0xFE, 0x00, 0, 0])


def test_add_int_then_parse_roundtrip():
    orig = _frame(tos=(0x0A << 2) | 2)
    pkt = add_int(orig, HOPS, max_hops=6)
    raw = bytes(pkt)
    stack = INT_SHIM_MD_BYTES + 3 * INT_HOP_BYTES
    assert len(raw) == len(bytes(orig)) + stack
    back = parse_int(raw)
    ip, udp = back[IP], back[UDP]
    assert ip.tos >> 2 == DSCP_INT and ip.tos & 3 == 2
    assert ip.len == len(raw) - 14
    assert udp.len == len(raw) - 34 and udp.chksum == 0
    assert IP(bytes(ip)).chksum == ip.chksum  # checksum valid
    shim, md = back[IntShim], back[IntMetadata]
    assert shim.orig_dscp == 0x0A and shim.length == stack // 4
    assert md.hop_count == 3 and md.max_hops == 6
    assert [h.switch_id for h in md.hops] == [3, 2, 1]
    assert md.hops[0].qdepth == 17 and md.hops[2].sojourn == 20
    assert bytes(back[Raw]) == b"d" * 32
    assert bytes(back) == raw


def test_int_over_rocev2_dissects_bth_after_stack():
    orig = _frame(dport=4791, payload=b"")
    orig[UDP].remove_payload()
    orig[UDP].add_payload(BTH(opcode=0x81, dqpn=7, psn=42, icrc=0) / Raw(b"x" * 16))
    back = parse_int(bytes(add_int(orig, HOPS[:1])))
    assert back[IntMetadata].hop_count == 1
    assert back[BTH].dqpn == 7 and back[BTH].psn == 42


def test_summary_parse_and_layer():
    pkt = _frame(tos=(DSCP_INT_SUMMARY << 2) | 3, payload=b"")
    pkt[UDP].remove_payload()
    pkt[UDP].add_payload(IntSummary(hop_count=3, max_qdepth=0x012345, path_latency=190)
                         / Raw(b"app"))
    back = parse_int(bytes(pkt))
    assert back[IntSummary].max_qdepth == 0x012345
    assert bytes(back[Raw]) == b"app"
    rec, rest = parse_summary(bytes(back[UDP].payload))
    assert (rec.hop_count, rec.max_qdepth_pkts, rec.path_latency_us) == (3, 0x012345, 190)
    assert rest == b"app"
    with pytest.raises(IntDecodeError, match="truncated"):
        parse_summary(b"\x01\x02")


def test_parse_int_leaves_plain_packets_alone():
    raw = bytes(_frame())
    back = parse_int(raw)
    assert IntShim not in back and bytes(back) == raw


def test_decode_report_with_header():
    frame = add_int(_frame(), HOPS)
    raw = bytes(PacketInHeader(ingress_port=2, egress_port=1, switch_id=3) / frame)
    rep = decode_report(raw, with_header=True)
    assert (rep.switch_id, rep.ingress_port, rep.egress_port) == (3, 2, 1)
    assert (rep.src, rep.dst, rep.proto, rep.sport, rep.dport) == (
        "10.0.1.1", "10.0.2.1", 17, 1234, 5000)
    assert rep.hops == tuple(HOPS)
    assert rep.path == (1, 2, 3)
    assert rep.path_latency_us == 190 and rep.max_qdepth_pkts == 17
    assert rep.ecn == 2 and not rep.hops_exceeded


def test_decode_report_payload_and_metadata():
    frame = bytes(add_int(_frame(), HOPS[:2]))
    assert decode_report(frame).switch_id == 3  # from the sink's own record
    rep = decode_report(frame, {"switch_id": 9, "ingress_port": 4, "egress_port": 5})
    assert (rep.switch_id, rep.ingress_port, rep.egress_port) == (9, 4, 5)


def test_packet_in_layer_binds_ether():
    raw = bytes(PacketInHeader(switch_id=1) / add_int(_frame(), HOPS[:1]))
    pkt = PacketInHeader(raw)
    assert pkt[Ether].type == 0x0800 and pkt[IP].dst == "10.0.2.1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:30], "truncated"),
        (lambda b: b[:-40], "truncated"),
        (lambda b: b[:12] + b"\x86\xdd" + b[14:], "not IPv4"),
        (lambda b: b[:15] + bytes([0]) + b[16:], "DSCP"),
        (lambda b: b[:42] + b"\x20" + b[43:], "shim type"),
        (lambda b: b[:43] + b"\x05" + b[44:], "shim length"),
        (lambda b: b[:47] + b"\x09" + b[48:], "exceeds"),
        (lambda b: b"\x00" * len(b), "not IPv4"),
    ],
)
def test_decode_report_rejects_garbage(mutate, message):
    raw = bytes(add_int(_frame(), HOPS))
    with pytest.raises(ValueError, match=message):
        decode_report(mutate(raw))


def test_decode_report_rejects_wrong_reason():
    raw = bytes(PacketInHeader(reason=7) / add_int(_frame(), HOPS[:1]))
    with pytest.raises(IntDecodeError, match="reason"):
        decode_report(raw, with_header=True)
    with pytest.raises(IntDecodeError, match="packet_in"):
        decode_report(b"\x00\x01", with_header=True)


def test_add_int_rejects_non_udp_and_too_many_hops():
    with pytest.raises(IntDecodeError):
        add_int(Ether() / IP() / Raw(b"x"), [])
    with pytest.raises(IntDecodeError):
        add_int(_frame(), HOPS * 3)
