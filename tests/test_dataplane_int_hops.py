"""The INT hop limit is one number: Python's INT_MAX_HOPS, the P4 sources and the
compiled BMv2 JSON agree on it.

P4 has no loops outside the parser, so the per-hop code of p4src/include/int.p4 is
unrolled (``INT_FOR_EACH_HOP`` in headers.p4, the record list of ``save_for_report``).
``p4cc.constants.INT_MAX_HOPS`` is the compiled ``int_hops`` stack size; these tests
fail when a hop is added or removed in one place only: in the macro list, by hand, in
``#define INT_MAX_HOPS``, or in a compiled JSON whose per-hop code (parser bound,
clamp, summary, report, deparser) does not cover the whole stack.  They read the
sources and the committed p4cc/data/p4/p4cc.json; no p4c needed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from p4cc.constants import INT_HOP_BYTES, INT_MAX_HOPS
from p4cc.paths import P4_JSON, P4SRC_DIR

N = INT_MAX_HOPS
HOP_BITS = INT_HOP_BYTES * 8
STACK = "int_hops"
SOURCES = [P4SRC_DIR / "p4cc.p4", *sorted((P4SRC_DIR / "include").glob("*.p4"))]


def _code(text: str) -> str:
    """P4 source without comments (comments may mention any index)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


@pytest.fixture(scope="module")
def code() -> dict[str, str]:
    if not P4SRC_DIR.is_dir():
        pytest.skip("no p4src/ (not a source checkout)")
    return {p.name: _code(p.read_text()) for p in SOURCES}


@pytest.fixture(scope="module")
def program() -> dict[str, Any]:
    if not P4_JSON.is_file():
        pytest.skip(f"{P4_JSON} not built (run make p4)")
    return json.loads(P4_JSON.read_text())


# ---------------------------------------------------------------- P4 sources


def test_define_matches_python(code):
    defines = [int(m) for text in code.values()
               for m in re.findall(r"#define\s+INT_MAX_HOPS\s+(\d+)\s*$", text, flags=re.M)]
    assert defines == [N]


def _for_each_hop(code: dict[str, str]) -> list[int] | None:
    """The hop list of ``INT_FOR_EACH_HOP(M)`` (None if the macro is not defined)."""
    m = re.search(r"#define\s+INT_FOR_EACH_HOP\(M\)([^\n]*)", code["headers.p4"])
    if m is None:
        return None
    assert re.fullmatch(r"(\s*M\(\d+\))+\s*", m.group(1)), m.group(1)
    return [int(i) for i in re.findall(r"\bM\((\d+)\)", m.group(1))]


def test_for_each_hop_lists_every_hop_once(code):
    hops = _for_each_hop(code)
    assert hops is None or hops == list(range(N))


@pytest.mark.parametrize("macro", ["INT_ACC_HOP", "INT_RESTORE_HOP"])
def test_per_hop_code_covers_every_hop_once(code, macro):
    """Each per-hop macro runs for hops 0..N-1 exactly once, whether expanded through
    INT_FOR_EACH_HOP or written out: a hop added or dropped by hand is caught."""
    text = code["int.p4"]
    assert re.search(rf"#define\s+{macro}\(i\)", text), f"{macro} not defined"
    hops = [int(i) for i in re.findall(rf"\b{macro}\((\d+)\)", text)]
    for _ in re.findall(rf"\bINT_FOR_EACH_HOP\(\s*{macro}\s*\)", text):
        listed = _for_each_hop(code)
        assert listed is not None, "INT_FOR_EACH_HOP used but not defined"
        hops += listed
    assert sorted(hops) == list(range(N))


def test_literal_hop_indices_within_stack(code):
    indices = [int(i) for text in code.values()
               for i in re.findall(rf"\b{STACK}\[(\d+)\]", text)]
    assert indices and max(indices) < N


def test_save_for_report_packs_every_hop_last_first(code):
    m = re.search(r"action\s+save_for_report\s*\(\s*\)\s*\{(.*?)\n    \}", code["int.p4"],
                  flags=re.S)
    assert m, "save_for_report not found in int.p4"
    hops = m.group(1).split("meta.int_saved.hops", 1)[1]
    listed = [int(i) for i in re.findall(rf"\b{STACK}\[(\d+)\]\.rec\b", hops)]
    assert listed == list(range(N - 1, -1, -1))


def test_saved_hops_width(code):
    m = re.search(r"struct\s+int_saved_t\s*\{[^}]*?bit<([^>]+)>\s+hops\s*;", code["headers.p4"])
    assert m, "int_saved_t.hops not found"
    width = m.group(1).strip()
    assert width in {str(HOP_BITS * N), f"({HOP_BITS} * INT_MAX_HOPS)"}, width


def test_header_stack_sized_by_define(code):
    assert re.search(rf"\bint_hop_t\s*\[\s*INT_MAX_HOPS\s*\]\s*{STACK}\s*;", code["headers.p4"])
    assert re.search(r"header\s+int_hop_t\s*\{\s*bit<(\d+)>\s+rec\s*;\s*\}",
                     code["headers.p4"]).group(1) == str(HOP_BITS)


# ----------------------------------------------------------- compiled JSON


def _hop_refs(node: Any) -> set[int]:
    return {int(i) for i in re.findall(rf'"{STACK}\[(\d+)\]"', json.dumps(node))}


def test_json_header_stack(program):
    stacks = [s for s in program["header_stacks"] if s["name"] == STACK]
    assert len(stacks) == 1
    assert stacks[0]["size"] == N and len(stacks[0]["header_ids"]) == N
    (htype,) = [t for t in program["header_types"] if t["name"] == stacks[0]["header_type"]]
    assert [f[:2] for f in htype["fields"]] == [["rec", HOP_BITS]]
    names = sorted(h["name"] for h in program["headers"] if h["name"].startswith(f"{STACK}["))
    assert names == sorted(f"{STACK}[{i}]" for i in range(N))


def test_json_deparser_emits_every_hop_in_order(program):
    (order,) = [d["order"] for d in program["deparsers"]]
    hops = [f"{STACK}[{i}]" for i in range(N)]
    i = order.index("int_md") + 1
    assert order[i:i + N + 1] == [*hops, "int_summary"]
    assert sum(h.startswith(f"{STACK}[") for h in order) == N


def test_json_parser_loop_and_bound(program):
    (parser,) = program["parsers"]
    states = {s["name"]: s for s in parser["parse_states"]}
    loop = states["parse_int_hop"]
    assert loop["parser_ops"][0] == {
        "op": "extract", "parameters": [{"type": "stack", "value": STACK}]}
    assert "parse_int_hop" in [t["next_state"] for t in loop["transitions"]]
    ops = json.dumps(states["parse_int_shim"]["parser_ops"])
    bound = re.search(r'"op": "<=", "left": \{"type": "field", "value": \["int_md", '
                      r'"hop_count"\]\}, "right": \{"type": "hexstr", "value": "(0x[0-9a-f]+)"',
                      ops)
    assert bound and int(bound.group(1), 16) == N
    assert any(op["op"] == "verify" for op in states["parse_int_shim"]["parser_ops"])


def _actions(program: dict[str, Any], suffix: str) -> list[dict[str, Any]]:
    return [a for a in program["actions"] if a["name"].endswith(suffix)]


def test_json_int_source_clamps_to_limit(program):
    (action,) = _actions(program, ".int_source")
    clamp = re.findall(r'"op": ">", "left": \{"type": "local", "value": 0\}, '
                       r'"right": \{"type": "hexstr", "value": "(0x[0-9a-f]+)"', json.dumps(action))
    assert N in [int(c, 16) for c in clamp]


def test_json_sink_pops_and_saves_every_hop(program):
    pops = [p for a in program["actions"] for p in a["primitives"] if p["op"] == "pop"]
    assert [(p["parameters"][0]["value"], int(p["parameters"][1]["value"], 16))
            for p in pops] == [(STACK, N)]
    (save,) = _actions(program, ".save_for_report")
    assert _hop_refs(save) == set(range(N))
    (scalars,) = [t for t in program["header_types"] if t["name"] == "scalars_0"]
    saved = [w for name, w, *_ in scalars["fields"] if "int_saved_hops" in name]
    assert saved == [HOP_BITS * N]


def test_json_summary_covers_every_hop(program):
    """The sink's path latency / max depth loop reads every slot of the stack."""
    valid_checks = set()
    for pipe in program["pipelines"]:
        for cond in pipe["conditionals"]:
            expr = cond["expression"]
            if expr.get("type") == "expression" and expr["value"].get("op") == "d2b":
                valid_checks |= _hop_refs(expr)
    assert valid_checks == set(range(N))


def test_json_report_restores_every_hop(program):
    """The report clone re-validates every slot (the push re-validates slot 0 only)."""
    restored = {int(m) for a in program["actions"] if not a["name"].endswith(".push_hop")
                for p in a["primitives"] if p["op"] == "add_header"
                for m in re.findall(rf"^{re.escape(STACK)}\[(\d+)\]$", p["parameters"][0]["value"])}
    assert restored == set(range(N))


def test_json_no_reference_beyond_stack(program):
    for section in ("actions", "pipelines", "deparsers", "parsers"):
        refs = _hop_refs(program[section])
        assert not refs or max(refs) < N, section
