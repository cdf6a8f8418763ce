"""Constants shared across p4cc's packages: one source for each.

Two kinds:

* **Protocol numbers** fixed by a standard (IANA, IETF RFCs, the InfiniBand spec) and
  p4cc's own numbers that the compiled program does not show (the CPU port is a
  ``simple_switch_grpc --cpu-port`` argument; the DSCP values are compared with in
  expressions).  They are written here once; ``tests/test_constants.py`` checks them
  against ``p4src/include/headers.p4``, the compiled program and Scapy's RoCE layers.
* **Values the P4 program defines** (header-stack size, header sizes, the INT report
  clone session, the size of the per-port arrays) are read from the compiled program
  (``p4cc.paths.P4_JSON``, package data), so the Python side cannot drift from the
  pipeline it drives.  A recompiled program changes them here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from p4cc.errors import P4ccError
from p4cc.paths import P4_JSON

# ------------------------------------------------------------------ standards
#: IPv4 protocol number of UDP (IANA; RFC 768), IPPROTO_UDP in headers.p4.
IPPROTO_UDP = 17

#: UDP destination port of RoCEv2 (IANA "roce"; InfiniBand spec Annex A17 §A17.4.5.1),
#: the port of p4cc's host transport.
ROCE_PORT = 4791

#: ECN codepoints of the IPv4 TOS byte's two low bits (RFC 3168 §5).
ECN_NOT_ECT = 0b00
ECN_ECT1 = 0b01
ECN_ECT0 = 0b10
ECN_CE = 0b11
ECN_MASK = 0b11

#: Header bytes: Ethernet II without VLAN tag (IEEE 802.3), IPv4 without options
#: (RFC 791), UDP (RFC 768), TCP without options (RFC 9293 §3.1).
ETH_HEADER_BYTES = 14
IPV4_HEADER_BYTES = 20
UDP_HEADER_BYTES = 8
TCP_HEADER_BYTES = 20

#: BTH opcodes (InfiniBand spec vol. 1 §9.2 Table 38): RC SEND ONLY, RC ACKNOWLEDGE;
#: CNP (Annex A17 §A17.9.2); p4cc's RTT probe and reply in the manufacturer range 0xC0-0xFF.
OP_DATA = 0x04
OP_ACK = 0x11
OP_CNP = 0x81
OP_PROBE = 0xC0
OP_PROBE_REPLY = 0xC1
#: AETH syndromes (InfiniBand spec vol. 1 §9.7.5.1): ACK without credit count
#: (``0b000_11111``), NAK PSN sequence error (``0b011_00000``).
SYNDROME_ACK = 0x1F
SYNDROME_NAK_SEQ = 0x60
#: "no queue depth known" in p4cc's 24-bit qdepth fields (docs/hostcc.md).
QDEPTH_NONE = 0xFFFFFF

# --------------------------------------------- p4cc numbers the program does not show
#: BMv2's CPU port (``simple_switch_grpc --cpu-port``; CPU_PORT in headers.p4).
CPU_PORT = 510
#: IPv4 DSCP announcing an INT stack / an 8-byte INT summary after UDP (headers.p4).
DSCP_INT = 0x17
DSCP_INT_SUMMARY = 0x18


# ------------------------------------------------------ read from the compiled program
def _program() -> Mapping[str, Any]:
    try:
        doc = json.loads(P4_JSON.read_text())
    except (OSError, ValueError) as exc:
        raise P4ccError(f"cannot read p4cc's compiled P4 program {P4_JSON} ({exc}); "
                        f"run `make p4` in a checkout or reinstall p4cc") from None
    if not isinstance(doc, Mapping):
        raise P4ccError(f"{P4_JSON} is not a BMv2 JSON program")
    return doc


def _one(items: Iterator[int], what: str) -> int:
    found = sorted(set(items))
    if len(found) != 1:
        raise P4ccError(f"{P4_JSON}: expected one {what}, found {found}; recompile (make p4)")
    return found[0]


def header_bytes(program: Mapping[str, Any], header_type: str) -> int:
    """Bytes of ``header_type`` in a BMv2 JSON program (sum of its field widths)."""
    bits = _one((sum(int(f[1]) for f in h["fields"]) for h in program["header_types"]
                 if h["name"] == header_type), f"header type {header_type}")
    return bits // 8


def stack_size(program: Mapping[str, Any], stack: str) -> int:
    """Entries of the header stack ``stack`` (BMv2 JSON ``header_stacks``)."""
    return _one((int(s["size"]) for s in program["header_stacks"] if s["name"] == stack),
                f"header stack {stack}")


def clone_session(program: Mapping[str, Any]) -> int:
    """The session id of the program's (only) egress-to-egress clone primitive."""
    return _one((int(p["parameters"][0]["value"], 0) for a in program["actions"]
                 for p in a["primitives"] if p["op"] == "clone_egress_pkt_to_egress"),
                "clone_egress_pkt_to_egress session")


def register_size(program: Mapping[str, Any], suffix: str) -> int:
    """Entries of the register array whose name ends with ``.suffix``."""
    return _one((int(r["size"]) for r in program["register_arrays"]
                 if r["name"].endswith(f".{suffix}")), f"register {suffix}")


_P4 = _program()
#: INT hop records the header stack ``int_hops`` holds (INT_MAX_HOPS in headers.p4).
INT_MAX_HOPS = stack_size(_P4, "int_hops")
#: Bytes of one INT hop record, the INT shim + metadata header, the INT summary, and the
#: PacketIn controller header (headers.p4 int_hop_t, int_shim_t + int_md_t,
#: int_summary_t, packet_in_t).
INT_HOP_BYTES = header_bytes(_P4, "int_hop_t")
INT_SHIM_MD_BYTES = header_bytes(_P4, "int_shim_t") + header_bytes(_P4, "int_md_t")
INT_SUMMARY_BYTES = header_bytes(_P4, "int_summary_t")
PACKET_IN_BYTES = header_bytes(_P4, "packet_in_t")
#: Clone session of INT reports; the control plane points it at CPU_PORT.
INT_REPORT_SESSION = clone_session(_P4)
#: Entries of every per-port register (MAX_PORTS in headers.p4): ports 0..MAX_PORTS-1.
MAX_PORTS = register_size(_P4, "q_enq_sum")
#: 64-bit words of each port's distinct-flow bitmaps (BITMAP_WORDS in headers.p4).  The
#: epoch program (register tel_epoch) keeps them as 2 banks of 32-bit cells, 4 cells per
#: word (p4cc.controlplane.epoch).
BITMAP_WORDS = register_size(_P4, "incast_bits") // MAX_PORTS // (
    4 if any(r["name"].endswith(".tel_epoch") for r in _P4["register_arrays"]) else 1)
del _P4
