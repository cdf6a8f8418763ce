"""Fast struct-based encode/decode of p4cc transport datagrams (UDP payloads).

The formats are the Scapy layers in ``p4cc.packets.transport`` (which the tests use to
check these functions byte for byte); this module is the hot path and never imports
Scapy.  Every decoder raises :class:`WireError` on malformed input, which callers count
as a drop.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from p4cc.constants import (  # noqa: F401 (re-exported: the transport's modules use wire.*)
    DSCP_INT_SUMMARY,
    ETH_HEADER_BYTES,
    IPV4_HEADER_BYTES,
    OP_ACK,
    OP_CNP,
    OP_DATA,
    OP_PROBE,
    OP_PROBE_REPLY,
    QDEPTH_NONE,
    ROCE_PORT,
    SYNDROME_ACK,
    SYNDROME_NAK_SEQ,
    UDP_HEADER_BYTES,
)

PSN_MASK = 0xFFFFFF

DATA_LAST = 0x01
DATA_RETX = 0x02
ACK_COMPLETE = 0x01
ACK_QDEPTH = 0x02
PROBE_QDEPTH = 0x01

_BTH = struct.Struct("!BBHII")  # opcode, se|m|pad|tver, pkey, fecn|becn|resv6|dqpn, a|psn
_DATA = struct.Struct("!II")  # flags<<24 | reserved, msg_len
_ACK = struct.Struct("!IIQ")  # syndrome<<24 | msn, flags<<24 | qdepth, rx_bytes
_PROBE = struct.Struct("!IIQQ")  # seq, flags<<24 | qdepth, t_send_ns, t_recv_ns
_INT_SUMMARY = struct.Struct("!II")  # hops<<24 | max_qdepth, path latency µs
_ICRC = b"\x00\x00\x00\x00"
_CNP_PAD = bytes(16)

BTH_LEN = _BTH.size  # 12
ICRC_LEN = 4
DATA_HDR_LEN = BTH_LEN + _DATA.size  # 20
INT_SUMMARY_LEN = _INT_SUMMARY.size  # 8
#: IPv4 + UDP header bytes in front of every datagram (no IP options).
IP_UDP_LEN = IPV4_HEADER_BYTES + UDP_HEADER_BYTES
#: Ethernet header bytes counted by HTB on the host link.
ETH_LEN = ETH_HEADER_BYTES
#: DSCP of every control packet a receiver sends (ACK, NAK, CNP, probe reply): CS6, the
#: code point RoCE deployments give CNPs (NVIDIA's default CNP DSCP is 48).  p4cc's
#: switches serve it in their own priority queue (p4src/include/forwarding.p4).
DSCP_CONTROL = 48
#: the IP TOS byte of control packets (DSCP << 2, ECN bits 00: not ECN-capable)
TOS_CONTROL = DSCP_CONTROL << 2


class WireError(ValueError):
    """A datagram is truncated or malformed (the caller counts a drop)."""


class Bth(NamedTuple):
    opcode: int
    qpn: int
    psn: int
    ackreq: bool
    becn: bool


class Ack(NamedTuple):
    nak: bool
    syndrome: int
    msn: int
    complete: bool
    max_qdepth: int | None
    rx_bytes: int


class Probe(NamedTuple):
    seq: int
    max_qdepth: int | None
    t_send_ns: int
    t_recv_ns: int


class IntSummary(NamedTuple):
    hops: int
    max_qdepth: int
    latency_us: int


def _bth(opcode: int, qpn: int, psn: int, ackreq: bool = False, becn: bool = False) -> bytes:
    return _BTH.pack(
        opcode,
        0,
        0xFFFF,
        (int(becn) << 30) | (qpn & PSN_MASK),
        (int(ackreq) << 31) | (psn & PSN_MASK),
    )


def data_overhead() -> int:
    """Bytes of an IPv4 data datagram that are not payload."""
    return IP_UDP_LEN + DATA_HDR_LEN + ICRC_LEN


#: Bytes of every data frame on the wire that are not payload (Ethernet + IPv4 + UDP +
#: BTH/RETH-style header + ICRC): 66 B, as the host transport puts them on the wire.
DATA_FRAME_OVERHEAD_BYTES = ETH_LEN + data_overhead()


def frame_payload_bytes(frame_bytes: int) -> int:
    """Payload bytes of one full data frame of ``frame_bytes`` on the wire
    (``Scale.pkt_bytes`` is the frame, Ethernet header included; at least 1)."""
    return max(1, int(frame_bytes) - DATA_FRAME_OVERHEAD_BYTES)


def encode_data(
    qpn: int, psn: int, msg_len: int, payload: bytes, *, last: bool, ackreq: bool, retx: bool
) -> bytes:
    flags = (DATA_LAST if last else 0) | (DATA_RETX if retx else 0)
    return b"".join(
        (_bth(OP_DATA, qpn, psn, ackreq or last), _DATA.pack(flags << 24, msg_len), payload, _ICRC)
    )


def encode_ack(
    qpn: int,
    epsn: int,
    *,
    nak: bool = False,
    msn: int = 0,
    complete: bool = False,
    max_qdepth: int | None = None,
    rx_bytes: int = 0,
) -> bytes:
    syndrome = SYNDROME_NAK_SEQ if nak else SYNDROME_ACK
    flags = (ACK_COMPLETE if complete else 0) | (ACK_QDEPTH if max_qdepth is not None else 0)
    q = QDEPTH_NONE if max_qdepth is None else min(max_qdepth, QDEPTH_NONE - 1)
    return b"".join(
        (
            _bth(OP_ACK, qpn, epsn),
            _ACK.pack((syndrome << 24) | (msn & PSN_MASK), (flags << 24) | q, rx_bytes),
            _ICRC,
        )
    )


def encode_cnp(qpn: int) -> bytes:
    return b"".join((_bth(OP_CNP, qpn, 0, becn=True), _CNP_PAD, _ICRC))


def encode_probe(
    qpn: int,
    seq: int,
    t_send_ns: int,
    *,
    reply: bool = False,
    t_recv_ns: int = 0,
    max_qdepth: int | None = None,
) -> bytes:
    flags = PROBE_QDEPTH if max_qdepth is not None else 0
    q = QDEPTH_NONE if max_qdepth is None else min(max_qdepth, QDEPTH_NONE - 1)
    op = OP_PROBE_REPLY if reply else OP_PROBE
    return b"".join(
        (
            _bth(op, qpn, 0),
            _PROBE.pack(seq & 0xFFFFFFFF, (flags << 24) | q, t_send_ns, t_recv_ns),
            _ICRC,
        )
    )


def encode_int_summary(hops: int, max_qdepth: int, latency_us: int) -> bytes:
    return _INT_SUMMARY.pack(((hops & 0xFF) << 24) | (max_qdepth & PSN_MASK), latency_us)


def strip_int_summary(buf: bytes) -> tuple[IntSummary, memoryview]:
    """Split the 8-byte INT summary (present when DSCP is 0x18) from the rest."""
    if len(buf) < INT_SUMMARY_LEN:
        raise WireError(f"datagram of {len(buf)} B too short for the INT summary")
    a, lat = _INT_SUMMARY.unpack_from(buf, 0)
    return IntSummary(a >> 24, a & PSN_MASK, lat), memoryview(buf)[INT_SUMMARY_LEN:]


def decode_bth(buf: bytes | memoryview) -> Bth:
    if len(buf) < BTH_LEN + ICRC_LEN:
        raise WireError(f"datagram of {len(buf)} B shorter than BTH + ICRC")
    op, _flags, _pkey, w1, w2 = _BTH.unpack_from(buf, 0)
    return Bth(op, w1 & PSN_MASK, w2 & PSN_MASK, bool(w2 >> 31), bool((w1 >> 30) & 1))


def decode_data(buf: bytes | memoryview) -> tuple[int, int, int]:
    """(flags, msg_len, payload length) of a data datagram (BTH already checked)."""
    if len(buf) < DATA_HDR_LEN + ICRC_LEN:
        raise WireError(f"data datagram of {len(buf)} B is truncated")
    f, msg_len = _DATA.unpack_from(buf, BTH_LEN)
    return f >> 24, msg_len, len(buf) - DATA_HDR_LEN - ICRC_LEN


def decode_ack(buf: bytes | memoryview) -> Ack:
    if len(buf) < BTH_LEN + _ACK.size + ICRC_LEN:
        raise WireError(f"ACK of {len(buf)} B is truncated")
    a, b, rx = _ACK.unpack_from(buf, BTH_LEN)
    syn = a >> 24
    if syn != SYNDROME_NAK_SEQ and (syn >> 5) != 0:
        raise WireError(f"unsupported AETH syndrome 0x{syn:02x}")
    q = b & PSN_MASK
    has_q = bool((b >> 24) & ACK_QDEPTH) and q != QDEPTH_NONE
    return Ack(
        syn == SYNDROME_NAK_SEQ, syn, a & PSN_MASK, bool((b >> 24) & ACK_COMPLETE),
        q if has_q else None, rx,
    )


def decode_probe(buf: bytes | memoryview) -> Probe:
    if len(buf) < BTH_LEN + _PROBE.size + ICRC_LEN:
        raise WireError(f"probe of {len(buf)} B is truncated")
    seq, b, ts, tr = _PROBE.unpack_from(buf, BTH_LEN)
    q = b & PSN_MASK
    has_q = bool((b >> 24) & PROBE_QDEPTH) and q != QDEPTH_NONE
    return Probe(seq, q if has_q else None, ts, tr)


def check_cnp(buf: bytes | memoryview) -> None:
    if len(buf) < BTH_LEN + len(_CNP_PAD) + ICRC_LEN:
        raise WireError(f"CNP of {len(buf)} B is truncated")
