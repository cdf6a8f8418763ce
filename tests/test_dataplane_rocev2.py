"""RoCEv2 traffic crosses p4src/p4cc.p4 with its BTH untouched: the switch does not
parse the BTH (docs/dataplane.md, "Parser"), so BMv2 carries it as payload, behind the
INT summary when the packet carries INT.  Same simple_switch rig as
tests/test_dataplane_simple_switch.py (root, simple_switch, simple_switch_CLI)."""

from __future__ import annotations

import socket

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet
from test_dataplane_simple_switch import (  # noqa: F401 (fixtures)
    H1,
    H2,
    SW1,
    SW2,
    _recv,
    socks,
    sw,
)

from p4cc.packets import transport as tp
from p4cc.packets.int import DSCP_INT_SUMMARY, HopRecord, IntSummary, add_int, parse_int

pytestmark = [pytest.mark.bmv2, pytest.mark.root]


def _roce(bth: Packet, seq: int) -> Ether:
    return (Ether(src=H1, dst=SW1) / IP(src="10.0.1.1", dst="10.0.1.2", tos=2, id=seq)
            / UDP(sport=49152 + seq, dport=tp.ROCE_PORT) / bth)


def test_cnp_forwarded_byte_for_byte(socks: dict[int, socket.socket]) -> None:  # noqa: F811
    sent = _roce(tp.BTH(opcode=tp.CNP_OPCODE, becn=1, dqpn=4, icrc=0) / tp.CNPPadding(), 1)
    socks[1].send(bytes(sent))
    (raw,) = _recv(socks[2], 1)
    got = Ether(raw)
    assert (got.src, got.dst, got[IP].ttl) == (SW2, H2, 63)
    assert bytes(got[IP].payload) == bytes(sent[IP].payload)


def test_int_summary_sits_before_untouched_bth(socks: dict[int, socket.socket]) -> None:  # noqa: F811
    bth = tp.BTH(opcode=tp.OP_DATA, dqpn=9, psn=77, ackreq=1, icrc=0) / tp.P4ccData(msg_len=64)
    sent = _roce(bth, 2)
    upstream = [HopRecord(5, 3, 4, 100, 42, 1, 2)]
    socks[1].send(bytes(add_int(sent, upstream)))
    (raw,) = _recv(socks[2], 1)
    pkt = parse_int(raw)
    assert pkt[IP].tos >> 2 == DSCP_INT_SUMMARY
    assert pkt[IntSummary].hop_count == 2
    assert bytes(pkt[IntSummary].payload) == bytes(sent[UDP].payload)
    assert pkt[tp.BTH].dqpn == 9 and pkt[tp.BTH].psn == 77
