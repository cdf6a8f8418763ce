"""p4cc.constants: each shared constant has one definition and matches its source
(p4src/include/headers.p4, the compiled program, Scapy's RoCE layers)."""

from __future__ import annotations

import io
import json
import re
import tokenize

import pytest

from p4cc import constants as c
from p4cc import paths
from p4cc.errors import P4ccError

HEADERS_P4 = paths.P4SRC_DIR / "include" / "headers.p4"
needs_source = pytest.mark.skipif(not HEADERS_P4.is_file(), reason="no p4src/ (not a checkout)")


def _p4_const(name: str) -> int:
    m = re.search(rf"\b{name}\s*=\s*(0x[0-9A-Fa-f]+|\d+);", HEADERS_P4.read_text())
    assert m, f"{name} not in {HEADERS_P4}"
    return int(m.group(1), 0)


@needs_source
def test_literal_constants_match_headers_p4() -> None:
    assert _p4_const("CPU_PORT") == c.CPU_PORT
    assert _p4_const("DSCP_INT") == c.DSCP_INT
    assert _p4_const("DSCP_INT_SUMMARY") == c.DSCP_INT_SUMMARY
    assert _p4_const("IPPROTO_UDP") == c.IPPROTO_UDP
    for name in ("ECN_NOT_ECT", "ECN_ECT1", "ECN_ECT0", "ECN_CE"):
        assert _p4_const(name) == getattr(c, name), name


@needs_source
def test_derived_constants_match_headers_p4() -> None:
    text = HEADERS_P4.read_text()
    assert re.search(rf"#define INT_MAX_HOPS {c.INT_MAX_HOPS}\b", text)
    assert _p4_const("INT_REPORT_SESSION") == c.INT_REPORT_SESSION
    assert _p4_const("MAX_PORTS") == c.MAX_PORTS
    assert _p4_const("BITMAP_WORDS") == c.BITMAP_WORDS
    assert _p4_const("INT_HOP_BYTES") == c.INT_HOP_BYTES
    assert _p4_const("INT_SHIM_MD_BYTES") == c.INT_SHIM_MD_BYTES
    assert _p4_const("INT_SUMMARY_BYTES") == c.INT_SUMMARY_BYTES


def test_header_sizes_match_the_compiled_program_and_scapy() -> None:
    from p4cc.packets import int as intp

    program = json.loads(paths.P4_JSON.read_text())
    assert c.header_bytes(program, "ethernet_t") == c.ETH_HEADER_BYTES
    assert c.header_bytes(program, "ipv4_t") == c.IPV4_HEADER_BYTES
    assert c.header_bytes(program, "udp_t") == c.UDP_HEADER_BYTES
    assert len(intp.IntHop()) == c.INT_HOP_BYTES
    assert len(intp.IntShim() / intp.IntMetadata()) == c.INT_SHIM_MD_BYTES
    assert len(intp.IntSummary()) == c.INT_SUMMARY_BYTES
    assert len(intp.PacketInHeader()) == c.PACKET_IN_BYTES
    assert (c.INT_MAX_HOPS, c.INT_REPORT_SESSION, c.MAX_PORTS) == (8, 100, 64)


def test_roce_numbers_match_scapy() -> None:
    from scapy.contrib.roce import BTH, CNP_OPCODE
    from scapy.layers.inet import UDP

    assert ({"dport": c.ROCE_PORT}, BTH) in [(f, cls) for f, cls in UDP.payload_guess]
    assert c.OP_CNP == CNP_OPCODE


def test_derivations_read_the_program_and_fail_loudly() -> None:
    program = {"header_types": [{"name": "h_t", "fields": [["a", 4, False], ["b", 12, False]]}],
               "header_stacks": [{"name": "hops", "size": 5}],
               "register_arrays": [{"name": "Eg.t.q_enq_sum", "size": 32}],
               "actions": [{"primitives": [{"op": "clone_egress_pkt_to_egress",
                                            "parameters": [{"value": "0x0000002a"}]}]}]}
    assert c.header_bytes(program, "h_t") == 2
    assert c.stack_size(program, "hops") == 5
    assert c.register_size(program, "q_enq_sum") == 32
    assert c.clone_session(program) == 42
    with pytest.raises(P4ccError, match="header stack nope"):
        c.stack_size(program, "nope")
    program["actions"].append({"primitives": [{"op": "clone_egress_pkt_to_egress",
                                                "parameters": [{"value": "0x7"}]}]})
    with pytest.raises(P4ccError, match=r"found \[7, 42\]"):
        c.clone_session(program)


SHARED = ("IPPROTO_UDP", "UDP_PROTO", "ROCE_PORT", "ROCEV2_PORT", "CPU_PORT", "INT_MAX_HOPS",
          "INT_REPORT_SESSION",
          "DSCP_INT", "DSCP_INT_SUMMARY", "OP_DATA", "OP_ACK", "OP_CNP", "OP_PROBE",
          "OP_PROBE_REPLY", "SYNDROME_ACK", "SYNDROME_NAK_SEQ", "QDEPTH_NONE", "ECN_CE",
          "ECT0", "INT_HOP_BYTES", "INT_SHIM_MD_BYTES", "INT_SUMMARY_BYTES", "PACKET_IN_BYTES")


def test_shared_constants_have_one_definition() -> None:
    """No module but p4cc/constants.py gives a shared constant its own number."""
    pattern = re.compile(rf"^\s*({'|'.join(SHARED)})\s*(:\s*\w+\s*)?=\s*(0[xXbB])?[0-9]",
                         re.MULTILINE)
    found = [f"{p.relative_to(paths.PACKAGE_DIR)}: {m.group(0).strip()}"
             for p in sorted(paths.PACKAGE_DIR.rglob("*.py")) if p.name != "constants.py"
             for m in pattern.finditer(p.read_text())]
    assert found == []
    literal = [f"{p.relative_to(paths.PACKAGE_DIR)}:{tok.start[0]}"
               for p in sorted(paths.PACKAGE_DIR.rglob("*.py")) if p.name != "constants.py"
               for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
               if tok.type == tokenize.NUMBER and tok.string.replace("_", "") == "4791"]
    assert literal == [], "UDP port 4791 written as a number; use p4cc.constants.ROCE_PORT"
