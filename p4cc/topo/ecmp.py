"""Which ECMP member a flow takes: the data plane's hash, computed in Python.

``p4src/include/forwarding.p4`` picks member ``crc16(ipv4.src, ipv4.dst, protocol,
l4 sport, l4 dport) mod size`` of a group.  v1model's ``HashAlgorithm.crc16`` is BMv2's
``crc16`` calculation, CRC-16/ARC: polynomial 0x8005, input and output reflected, initial
value 0, no final XOR (the catalogue's check value of ``b"123456789"`` is 0xBB3D).  BMv2
hashes the fields' bytes concatenated in order, big-endian (32 + 32 + 8 + 16 + 16 bits =
13 bytes), and the v1model ``hash`` primitive returns ``base + hash mod max``.

Every switch hashes the same 5-tuple, so a flow's path is fixed by it.  p4cc's hosts
send from a source port that depends only on the flow's id (``flow_sport``), which makes a
flow's path the same in every run of a schedule on BMv2, and lets the simulator put it on
the same path (``p4cc.sim.fabric``).  Checked against a live BMv2 switch in
``tests/test_dataplane_simple_switch.py::test_ecmp_member_is_the_crc16_of_the_5tuple``;
``tests/test_epoch_live.py`` uses ``crc16_arc`` for the incast bitmap's bits too.
"""

from __future__ import annotations

import ipaddress

from p4cc.constants import IPPROTO_UDP, ROCE_PORT

#: Source ports of scheduled flows: ``SPORT_BASE + flow_id mod SPORT_SPAN``.  Below
#: Linux's ephemeral range (32768-60999) and apart from ROCE_PORT (4791), so a flow's
#: port is free unless a flow 20,000 ids away is open on the same host at the same time.
SPORT_BASE = 10000
SPORT_SPAN = 20000


def _crc_table() -> tuple[int, ...]:
    """CRC-16/ARC's byte table: the reflected polynomial 0xA001 (0x8005 bit-reversed)."""
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _crc_table()


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC of ``data`` (BMv2's ``crc16``)."""
    crc = 0
    for b in data:
        crc = (crc >> 8) ^ _TABLE[(crc ^ b) & 0xFF]
    return crc


def flow_sport(flow_id: int) -> int:
    """The UDP source port a host sends flow ``flow_id`` (>= 0) from."""
    if flow_id < 0:
        raise ValueError(f"a scheduled flow's id is >= 0, got {flow_id}")
    return SPORT_BASE + flow_id % SPORT_SPAN


def _ip_bytes(ip: str) -> bytes:
    try:
        return ipaddress.IPv4Address(ip).packed
    except ValueError:
        raise ValueError(f"not an IPv4 address: {ip!r}") from None


def five_tuple_hash(src_ip: str, dst_ip: str, sport: int, dport: int = ROCE_PORT,
                    proto: int = IPPROTO_UDP) -> int:
    """The data plane's ECMP hash of one packet's 5-tuple (before ``mod size``)."""
    key = (_ip_bytes(src_ip) + _ip_bytes(dst_ip) + bytes([proto])
           + sport.to_bytes(2, "big") + dport.to_bytes(2, "big"))
    return crc16_arc(key)


def flow_hash(from_ip: str, to_ip: str, flow_id: int, reply: bool = False) -> int:
    """ECMP hash of flow ``flow_id``'s packets from ``from_ip`` to ``to_ip``: its data
    (sender -> receiver, from ``flow_sport(flow_id)`` to ROCE_PORT) or, with ``reply``,
    the receiver's ACKs, NAKs and CNPs (receiver -> sender, from ROCE_PORT to that port)."""
    sport = flow_sport(flow_id)
    if reply:
        return five_tuple_hash(from_ip, to_ip, ROCE_PORT, sport)
    return five_tuple_hash(from_ip, to_ip, sport, ROCE_PORT)
