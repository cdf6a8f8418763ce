"""The compiled artifacts carry the names of docs/architecture.md, and the RED rule of
p4src/include/ecn.p4 matches EcnConfig.marking_probability to within its stated error.

These read the committed p4cc/data/p4/ files; no p4c or BMv2 is needed."""

from __future__ import annotations

import json
import math
import re

import pytest

from p4cc.controlplane.ecn import PMAX_ONE, EcnConfig
from p4cc.controlplane.p4build import BUILD_DIR

P4INFO = BUILD_DIR / "p4cc.p4info.txtpb"
JSON = BUILD_DIR / "p4cc.json"


def _blocks(text: str, kind: str) -> list[str]:
    """Top-level ``kind { ... }`` blocks of a P4Info text proto."""
    out: list[str] = []
    depth = 0
    cur: list[str] | None = None
    for line in text.splitlines():
        if depth == 0 and line.strip() == f"{kind} {{":
            cur = []
        if cur is not None:
            cur.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and cur is not None:
            out.append("\n".join(cur))
            cur = None
    return out


def _by_suffix(blocks: list[str], suffix: str) -> str:
    hits = [b for b in blocks if _names(b)[0].rsplit(".", 1)[-1] == suffix]
    assert len(hits) == 1, f"{suffix}: {len(hits)} matches"
    return hits[0]


@pytest.fixture(scope="module")
def p4info() -> str:
    if not P4INFO.is_file():
        pytest.skip(f"{P4INFO} not built (run make p4)")
    return P4INFO.read_text()


def _names(block: str) -> list[str]:
    return re.findall(r'name: "([^"]+)"', block)


@pytest.mark.parametrize(
    ("table", "keys", "size"),
    [
        ("ipv4_lpm", [("hdr.ipv4.dst_addr", "LPM")], 1024),
        ("ecmp_nhop", [("meta.ecmp_group", "EXACT"), ("meta.ecmp_index", "EXACT")], 1024),
        ("switch_config", [], 1),
        ("int_watchlist", [("hdr.ipv4.src_addr", "TERNARY"), ("hdr.ipv4.dst_addr", "TERNARY"),
                           ("hdr.ipv4.protocol", "TERNARY"), ("meta.l4_dport", "TERNARY")], 64),
        ("ecn_config", [("standard_metadata.egress_port", "EXACT")], 64),
        ("int_sink", [("standard_metadata.egress_port", "EXACT")], 64),
    ],
)
def test_tables(p4info, table, keys, size):
    block = _by_suffix(_blocks(p4info, "tables"), table)
    fields = re.findall(r'match_fields \{\s*id: \d+\s*name: "([^"]+)"\s*bitwidth: \d+\s*'
                        r'match_type: (\w+)', block)
    assert fields == keys
    assert f"size: {size}" in block


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("set_nhop", [("port", 9), ("dmac", 48), ("smac", 48)]),
        ("set_ecmp", [("group", 16), ("size", 16)]),
        ("set_switch_config", [("switch_id", 32), ("elephant_bytes", 32)]),
        ("set_switch_config_no_watch", [("switch_id", 32), ("elephant_bytes", 32)]),
        ("int_source", [("max_hops", 8)]),
        ("set_ecn", [("kmin", 19), ("kmax", 19), ("pmax", 16)]),
        ("int_sink_port", []),
    ],
)
def test_actions(p4info, action, params):
    block = _by_suffix(_blocks(p4info, "actions"), action)
    got = re.findall(r'params \{\s*id: \d+\s*name: "([^"]+)"\s*bitwidth: (\d+)', block)
    assert [(n, int(w)) for n, w in got] == params


@pytest.mark.parametrize("name", ["port_offered", "port_tx", "port_marked"])
def test_counters(p4info, name):
    block = _by_suffix(_blocks(p4info, "counters"), name)
    assert "unit: BOTH" in block and "size: 64" in block


def test_registers_and_packet_in(p4info):
    regs = {n.rsplit(".", 1)[-1]: b for b in _blocks(p4info, "registers")
            for n in _names(b)[:1]}
    for name in ("q_enq_sum", "q_enq_cnt", "q_sojourn_sum"):
        assert "size: 64" in regs[name]
    # epoch telemetry (issue 10): q_enq_max and the bitmaps in two banks of tagged cells
    # (64 ports; bitmaps 8 cells of 32 bits per port), one-cell 64-bit tel_epoch (sketch
    # window ++ epoch), sketch rows of window-tagged 64-bit cells
    assert "size: 128" in regs["q_enq_max"] and "size: 1\n" in regs["tel_epoch"]
    assert "bitwidth: 64" in regs["tel_epoch"]
    for name in ("incast_bits", "flow_bits", "elephant_bits"):
        assert "size: 1024" in regs[name] and "bitwidth: 64" in regs[name]
    for name in ("flow_bytes_r0", "flow_bytes_r1"):
        assert "size: 4096" in regs[name] and "bitwidth: 64" in regs[name]
    pin = _blocks(p4info, "controller_packet_metadata")
    assert len(pin) == 1 and _names(pin[0]) == [
        "packet_in", "ingress_port", "egress_port", "switch_id", "reason", "rsvd"]


def test_json_report_field_list_and_clone():
    if not JSON.is_file():
        pytest.skip(f"{JSON} not built (run make p4)")
    j = json.loads(JSON.read_text())
    fl = j["field_lists"]
    assert len(fl) == 1 and len(fl[0]["elements"]) == 2   # int_saved.info, int_saved.hops
    ops = {p["op"] for a in j["actions"] for p in a["primitives"]}
    assert {"clone_egress_pkt_to_egress", "modify_field_rng_uniform", "push", "pop"} <= ops
    # every register read-modify-write (the shared sketch rows included) stays inside
    # one action: BMv2 locks the register arrays an action uses for the whole action
    up = next(a for a in j["actions"] if a["name"].endswith("telemetry.update_all"))
    kinds = [p["op"] for p in up["primitives"]]
    # 9 statistics read and written, plus the read of tel_epoch (epoch telemetry)
    assert kinds.count("register_read") == 10 and kinds.count("register_write") == 9
    others = [a["name"] for a in j["actions"] if a is not up
              and any(p["op"].startswith("register_") for p in a["primitives"])]
    assert others == []


def p4_mark_probability(kmin: int, kmax: int, pmax_scaled: int, q: int) -> float:
    """Exact probability of ecn.p4's test: u uniform in {0..65534}, mark iff
    u*(kmax-kmin) < pmax_scaled*(q-kmin)."""
    if q >= kmax:
        return 1.0
    if q < kmin:
        return 0.0
    d, x = kmax - kmin, pmax_scaled * (q - kmin)
    return min(PMAX_ONE, math.ceil(x / d)) / PMAX_ONE


@pytest.mark.parametrize(
    ("kmin_b", "kmax_b", "pmax"),
    [(15_000, 45_000, 0.5), (5_000, 200_000, 0.01), (18_000, 18_000, 1.0),
     (1_500, 3_000, 1.0), (30_000, 270_000, 0.1)],
)
def test_red_rule_matches_ecnconfig(kmin_b, kmax_b, pmax):
    cfg = EcnConfig(kmin_b, kmax_b, pmax)
    pkt = 1500
    kmin, kmax = cfg.kmin_pkts(pkt), cfg.kmax_pkts(pkt)
    for q in range(0, kmax + 5):
        want = cfg.marking_probability(q, pkt)
        got = p4_mark_probability(kmin, kmax, cfg.pmax_scaled, q)
        assert 0 <= got - want <= 1 / PMAX_ONE + 1e-12, (q, got, want)


def test_red_products_fit_48_bits():
    assert (2**16 - 1) * (2**19 - 1) < 2**48


def test_python_constants_match_p4_headers():
    from p4cc.controlplane.p4build import P4SRC
    from p4cc.packets import int as intp

    text = (P4SRC / "include" / "headers.p4").read_text()

    def const(name: str) -> int:
        m = re.search(rf"\b{name}\s*=\s*(0x[0-9A-Fa-f]+|\d+);", text)
        assert m, name
        return int(m.group(1), 0)

    assert const("DSCP_INT") == intp.DSCP_INT
    assert const("DSCP_INT_SUMMARY") == intp.DSCP_INT_SUMMARY
    assert const("INT_REPORT_SESSION") == intp.INT_REPORT_SESSION
    assert const("CPU_PORT") == intp.CPU_PORT
    assert const("INT_INSTRUCTIONS") == intp.INT_INSTRUCTIONS
    assert const("PACKET_IN_REASON_INT_REPORT") == intp.PACKET_IN_REASON_INT_REPORT
    assert re.search(rf"#define INT_MAX_HOPS {intp.INT_MAX_HOPS}\b", text)
    switch = pytest.importorskip("p4cc.controlplane.switch")
    assert switch.INT_REPORT_SESSION == intp.INT_REPORT_SESSION
