"""Scapy layers and decoders for p4cc's INT (the formats of p4src/include/headers.p4).

Wire format after the UDP header (docs/architecture.md, docs/dataplane.md):

* IPv4 DSCP ``0x17``: :class:`IntShim` (4 B), :class:`IntMetadata` (8 B) whose ``hops``
  list holds ``hop_count`` :class:`IntHop` records (24 B each, newest first), then the
  original UDP payload (a RoCEv2 BTH when the UDP destination port is 4791).
* IPv4 DSCP ``0x18``: :class:`IntSummary` (8 B), then the original UDP payload.
* An INT report, as the switch sends it to its CPU port: :class:`PacketInHeader`
  (10 B) followed by the reported Ethernet frame (with its INT stack).  P4Runtime's
  PacketIn carries the header fields as metadata and the frame as payload.

The INT layers follow UDP only when the DSCP says so, and Scapy binds layers on the
fields of the layer below, so UDP is not bound to :class:`IntShim`; use
:func:`parse_int` to dissect and :func:`add_int` to build.  :func:`decode_report` is the
fast path the INT collector uses (``struct``, no Scapy dissection).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scapy.contrib.roce import BTH
from scapy.fields import (
    BitField,
    ByteField,
    FieldLenField,
    IntField,
    PacketListField,
    ShortField,
    ThreeBytesField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from p4cc.constants import (  # noqa: F401 (CPU_PORT, INT_REPORT_SESSION: re-exported)
    CPU_PORT,
    DSCP_INT,
    DSCP_INT_SUMMARY,
    ETH_HEADER_BYTES,
    INT_HOP_BYTES,
    INT_MAX_HOPS,
    INT_REPORT_SESSION,
    INT_SHIM_MD_BYTES,
    INT_SUMMARY_BYTES,
    IPV4_HEADER_BYTES,
    PACKET_IN_BYTES,
    ROCE_PORT,
    UDP_HEADER_BYTES,
)
from p4cc.errors import P4ccError

# INT field values of p4src/include/headers.p4 that only this module uses (checked by
# tests/test_dataplane_program.py); the shared ones come from p4cc.constants.
INT_TYPE_P4CC = 1
INT_VERSION = 1
INT_HOP_WORDS = INT_HOP_BYTES // 4
INT_INSTRUCTIONS = 0xFE00
PACKET_IN_REASON_INT_REPORT = 1
#: Bytes from the Ethernet header to the first INT hop record of an INT report frame.
_FIRST_HOP = ETH_HEADER_BYTES + IPV4_HEADER_BYTES + UDP_HEADER_BYTES + INT_SHIM_MD_BYTES


class IntDecodeError(P4ccError, ValueError):
    """Bytes that are not a well-formed p4cc INT report / summary."""


def _udp_below(pkt: Packet) -> UDP | None:
    """The UDP layer under an INT layer (walks ``underlayer``; set during dissection)."""
    layer = pkt.underlayer
    while layer is not None and not isinstance(layer, UDP):
        layer = layer.underlayer
    return layer


def _after_int(pkt: Packet) -> type[Packet]:
    """BTH after the INT content when the UDP destination port is RoCEv2's, else Raw."""
    udp = _udp_below(pkt)
    if udp is not None and udp.dport == ROCE_PORT:
        return BTH
    return Raw


class PacketInHeader(Packet):
    """``packet_in_t``: controller header the switch prepends to frames for its CPU port."""

    name = "P4ccPacketIn"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        ShortField("ingress_port", 0),
        ShortField("egress_port", 0),
        IntField("switch_id", 0),
        ByteField("reason", PACKET_IN_REASON_INT_REPORT),
        ByteField("rsvd", 0),
    ]


class IntHop(Packet):
    """``int_hop_t``: one switch's record, 24 bytes."""

    name = "P4ccIntHop"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        IntField("switch_id", 0),
        ShortField("ingress_port", 0),
        ShortField("egress_port", 0),
        IntField("hop_latency", 0),  # µs, egress - ingress global timestamp
        IntField("qdepth", 0),  # enq_qdepth, packets
        IntField("egress_ts", 0),  # µs, low 32 bits of the switch clock
        IntField("sojourn", 0),  # µs, deq_timedelta
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class IntShim(Packet):
    """``int_shim_t``: 4 bytes; ``length`` = whole INT stack in 4-byte words."""

    name = "P4ccIntShim"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        BitField("int_type", INT_TYPE_P4CC, 4),
        BitField("rsvd0", 0, 4),
        ByteField("length", None),
        BitField("rsvd1", 0, 2),
        BitField("orig_dscp", 0, 6),
        ByteField("rsvd2", 0),
    ]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if self.length is None:
            md = self.payload
            hops = len(md.hops) if isinstance(md, IntMetadata) else 0
            words = (INT_SHIM_MD_BYTES + INT_HOP_BYTES * hops) // 4
            p = p[:1] + bytes([words]) + p[2:]
        return p + pay


class IntMetadata(Packet):
    """``int_md_t`` (8 bytes) followed by its ``hop_count`` hop records."""

    name = "P4ccIntMetadata"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        BitField("version", INT_VERSION, 4),
        BitField("e", 0, 1),  # a switch could not push: max hops reached
        BitField("no_report", 0, 1),  # summary-only watch: the sink clones no report
        BitField("rsvd0", 0, 2),
        FieldLenField("hop_count", None, count_of="hops", fmt="B"),
        ByteField("max_hops", INT_MAX_HOPS),
        ByteField("hop_words", INT_HOP_WORDS),
        XShortField("instructions", INT_INSTRUCTIONS),
        ShortField("rsvd1", 0),
        PacketListField("hops", [], IntHop, count_from=lambda p: p.hop_count),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return _after_int(self)


class IntSummary(Packet):
    """``int_summary_t``: 8 bytes the sink puts after UDP (DSCP 0x18)."""

    name = "P4ccIntSummary"
    fields_desc = [  # noqa: RUF012 (Scapy API)
        ByteField("hop_count", 0),
        ThreeBytesField("max_qdepth", 0),  # packets, max over the hops
        IntField("path_latency", 0),  # µs, sum of hop latencies
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return _after_int(self)


# ------------------------------------------------------------------ typed records
@dataclass(frozen=True)
class HopRecord:
    """One hop record, decoded."""

    switch_id: int
    ingress_port: int
    egress_port: int
    hop_latency_us: int
    qdepth_pkts: int
    egress_ts_us: int
    sojourn_us: int


@dataclass(frozen=True)
class IntSummaryRecord:
    """The INT summary a receiving host sees."""

    hop_count: int
    max_qdepth_pkts: int
    path_latency_us: int


@dataclass(frozen=True)
class IntReport:
    """One INT report: the reporting (sink) switch, the flow, and the hop records.

    ``hops`` is in wire order, newest first: ``hops[0]`` is the sink's own record
    (unless the max hop count was reached, then ``hops_exceeded`` is True)."""

    switch_id: int
    ingress_port: int
    egress_port: int
    src: str
    dst: str
    proto: int
    sport: int
    dport: int
    orig_dscp: int
    ecn: int
    max_hops: int
    hops_exceeded: bool
    hops: tuple[HopRecord, ...]

    @property
    def hop_count(self) -> int:
        return len(self.hops)

    @property
    def path_latency_us(self) -> int:
        return sum(h.hop_latency_us for h in self.hops)

    @property
    def max_qdepth_pkts(self) -> int:
        return max((h.qdepth_pkts for h in self.hops), default=0)

    @property
    def path(self) -> tuple[int, ...]:
        """Switch ids from the first switch to the sink."""
        return tuple(h.switch_id for h in reversed(self.hops))


# ------------------------------------------------------------------ build / dissect
def _hop_packet(h: IntHop | HopRecord) -> IntHop:
    if isinstance(h, IntHop):
        return h.copy()
    return IntHop(
        switch_id=h.switch_id,
        ingress_port=h.ingress_port,
        egress_port=h.egress_port,
        hop_latency=h.hop_latency_us,
        qdepth=h.qdepth_pkts,
        egress_ts=h.egress_ts_us,
        sojourn=h.sojourn_us,
    )


def add_int(
    pkt: Packet, hops: Sequence[IntHop | HopRecord], max_hops: int = INT_MAX_HOPS
) -> Packet:
    """A copy of an IP/UDP packet as an INT source and ``hops`` switches would send it.

    ``hops`` newest first.  Sets DSCP 0x17 (old DSCP into the shim), recomputes the IPv4
    and UDP lengths and the IPv4 checksum, and sets the UDP checksum to 0."""
    if len(hops) > INT_MAX_HOPS:
        raise IntDecodeError(f"{len(hops)} hops exceed the maximum of {INT_MAX_HOPS}")
    out = pkt.copy()
    if IP not in out or UDP not in out:
        raise IntDecodeError("add_int needs an IPv4/UDP packet")
    ip, udp = out[IP], out[UDP]
    payload = udp.payload
    udp.remove_payload()
    md = IntMetadata(max_hops=max_hops, hops=[_hop_packet(h) for h in hops])
    udp.add_payload(IntShim(orig_dscp=ip.tos >> 2) / md / payload)
    ip.tos = (DSCP_INT << 2) | (ip.tos & 3)
    ip.len = ip.chksum = udp.len = None
    udp.chksum = 0
    return out


def parse_int(raw_bytes: bytes, first: type[Packet] = Ether) -> Packet:
    """Dissect a frame (``first=Ether``) or an IP packet (``first=IP``) including the INT
    stack (DSCP 0x17) or INT summary (DSCP 0x18) after UDP."""
    pkt = first(raw_bytes)
    if IP not in pkt or UDP not in pkt:
        return pkt
    dscp = pkt[IP].tos >> 2
    cls: type[Packet] | None = {DSCP_INT: IntShim, DSCP_INT_SUMMARY: IntSummary}.get(dscp)
    if cls is None:
        return pkt
    udp = pkt[UDP]
    rest = bytes(udp.payload)
    udp.remove_payload()
    udp.add_payload(cls(rest, _underlayer=udp))
    return pkt


def parse_summary(udp_payload: bytes) -> tuple[IntSummaryRecord, bytes]:
    """Split a received UDP payload of a DSCP-0x18 datagram into summary and data."""
    if len(udp_payload) < INT_SUMMARY_BYTES:
        raise IntDecodeError(
            f"INT summary truncated: {len(udp_payload)} bytes, need {INT_SUMMARY_BYTES}"
        )
    hc, q_hi, q_lo, lat = struct.unpack_from("!BBHI", udp_payload)
    return IntSummaryRecord(hc, (q_hi << 16) | q_lo, lat), udp_payload[INT_SUMMARY_BYTES:]


# ------------------------------------------------------------------ report decoding
_PKT_IN = struct.Struct("!HHIBB")
_HOP = struct.Struct("!IHHIIII")


def _ip4(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def decode_report(
    payload: bytes,
    metadata: Mapping[str, int] | None = None,
    *,
    with_header: bool = False,
) -> IntReport:
    """Decode an INT report.

    ``payload`` is the reported Ethernet frame (P4Runtime PacketIn.payload); with
    ``with_header=True`` it starts with the 10-byte packet_in header (raw CPU-port
    bytes).  The reporting switch and ports come from the header, else from
    ``metadata`` (PacketIn metadata by name: ``ingress_port``, ``egress_port``,
    ``switch_id``), else from the sink's own hop record.  Raises :class:`IntDecodeError`
    (a ValueError) naming what is wrong on truncated or foreign bytes."""
    b = bytes(payload)
    meta: dict[str, int] = dict(metadata or {})
    if with_header:
        if len(b) < PACKET_IN_BYTES:
            raise IntDecodeError(f"INT report truncated in packet_in header ({len(b)} B)")
        ing, eg, sw, reason, _ = _PKT_IN.unpack_from(b)
        if reason != PACKET_IN_REASON_INT_REPORT:
            raise IntDecodeError(f"packet_in reason {reason} is not an INT report (1)")
        meta.update(ingress_port=ing, egress_port=eg, switch_id=sw)
        b = b[PACKET_IN_BYTES:]
    if len(b) < _FIRST_HOP:
        raise IntDecodeError(f"INT report truncated: {len(b)} bytes is shorter than "
                             "Ethernet + IPv4 + UDP + INT shim/metadata")
    if b[12:14] != b"\x08\x00":
        raise IntDecodeError(f"INT report is not IPv4 (EtherType 0x{b[12:14].hex()})")
    ip = b[14:34]
    if ip[0] != 0x45:
        raise IntDecodeError(f"INT report IPv4 version/IHL byte 0x{ip[0]:02x}, expected 0x45")
    if ip[1] >> 2 != DSCP_INT:
        raise IntDecodeError(f"INT report DSCP 0x{ip[1] >> 2:02x}, expected 0x{DSCP_INT:02x}")
    if ip[9] != 17:
        raise IntDecodeError(f"INT report IP protocol {ip[9]}, expected UDP (17)")
    sport, dport = struct.unpack_from("!HH", b, 34)
    shim, md = b[42:46], b[46:54]
    if shim[0] >> 4 != INT_TYPE_P4CC:
        raise IntDecodeError(f"INT shim type {shim[0] >> 4}, expected {INT_TYPE_P4CC}")
    if md[0] >> 4 != INT_VERSION or md[3] != INT_HOP_WORDS:
        raise IntDecodeError(f"INT metadata version {md[0] >> 4} / hop words {md[3]}, "
                             f"expected {INT_VERSION} / {INT_HOP_WORDS}")
    n = md[1]
    if n > INT_MAX_HOPS:
        raise IntDecodeError(f"INT hop count {n} exceeds the maximum of {INT_MAX_HOPS}")
    if shim[1] != (INT_SHIM_MD_BYTES + INT_HOP_BYTES * n) // 4:
        raise IntDecodeError(f"INT shim length {shim[1]} words disagrees with {n} hops")
    need = _FIRST_HOP + INT_HOP_BYTES * n
    if len(b) < need:
        raise IntDecodeError(f"INT report truncated: {n} hops need {need} bytes, got {len(b)}")
    hops = tuple(HopRecord(*_HOP.unpack_from(b, _FIRST_HOP + INT_HOP_BYTES * i))
                 for i in range(n))
    own = hops[0] if hops else None
    return IntReport(
        switch_id=meta.get("switch_id", own.switch_id if own else 0),
        ingress_port=meta.get("ingress_port", own.ingress_port if own else 0),
        egress_port=meta.get("egress_port", own.egress_port if own else 0),
        src=_ip4(ip[12:16]),
        dst=_ip4(ip[16:20]),
        proto=ip[9],
        sport=sport,
        dport=dport,
        orig_dscp=shim[2] & 0x3F,
        ecn=ip[1] & 3,
        max_hops=md[2],
        hops_exceeded=bool(md[0] & 0x08),
        hops=hops,
    )


bind_layers(PacketInHeader, Ether)
bind_layers(IntShim, IntMetadata)
