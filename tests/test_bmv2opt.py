"""p4cc.controlplane.bmv2opt: p4c's temporaries folded, on hand-made JSON and on
p4cc.json (the live equivalence is tests/test_bmv2opt_live.py)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest

from p4cc.controlplane import bmv2opt
from p4cc.paths import P4_BUILD_DIR

REAL = P4_BUILD_DIR / "p4cc.json"
Node = dict[str, Any]


def F(header: str, field: str) -> Node:
    return {"type": "field", "value": [header, field]}


def S(name: str) -> Node:
    return F("scalars", name)


def HEX(v: int) -> Node:
    return {"type": "hexstr", "value": hex(v)}


def E(op: str, left: Node | None, right: Node, cond: Node | None = None) -> Node:
    expr: Node = {"op": op, "left": left, "right": right}
    if cond is not None:
        expr["cond"] = cond
    return {"type": "expression", "value": expr}


def P(expr: Node) -> Node:
    """An expression as an action parameter (p4c wraps it once more)."""
    return {"type": "expression", "value": expr}


def assign(dst: Node, src: Node) -> Node:
    return {"op": "assign", "parameters": [dst, src]}


def reg_read(dst: Node, idx: Node) -> Node:
    return {"op": "register_read", "parameters": [dst, {"type": "register_array", "value": "r"},
                                                   idx]}


def reg_write(idx: Node, value: Node) -> Node:
    return {"op": "register_write", "parameters": [{"type": "register_array", "value": "r"},
                                                    idx, value]}


def hash_into(dst: Node, calc: str) -> Node:
    return {"op": "modify_field_with_hash_based_offset",
            "parameters": [dst, HEX(0), {"type": "calculation", "value": calc}, HEX(256)]}


#: (a + 1) & 0xffffffff: fits 32 bits
IDX = E("&", E("+", F("h", "a"), HEX(1)), HEX(0xFFFFFFFF))


def program(prims: list[Node], scalars: tuple[tuple[str, int], ...] = (
        ("tmp", 32), ("tmp_0", 32), ("tmp_1", 16), ("k", 32)),
        calcs: tuple[Node, ...] = (), **extra: Any) -> Node:
    fields = [[n, w, False] for n, w in scalars]
    pad = -sum(w for _, w in scalars) % 8
    if pad:
        fields.append(["_padding_0", pad, False])
    return {
        "header_types": [
            {"name": "scalars_0", "id": 0, "fields": fields},
            {"name": "h_t", "id": 1, "fields": [["a", 32, False], ["b", 16, False],
                                                ["c", 64, False]]}],
        "headers": [{"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
                    {"name": "h", "id": 1, "header_type": "h_t", "metadata": False}],
        "calculations": list(calcs),
        "actions": [{"name": "act", "id": 0, "runtime_data": [], "primitives": prims}],
        "pipelines": [], **extra}


def prims(prog: Node) -> list[Node]:
    out: list[Node] = prog["actions"][0]["primitives"]
    return out


def scalar_names(prog: Node) -> list[str]:
    return [f[0] for f in prog["header_types"][0]["fields"]]


def test_single_use_temporary_is_inlined_and_its_field_removed() -> None:
    prog = program([assign(S("tmp"), P(IDX)), reg_write(F("h", "b"), S("tmp"))])
    stats = bmv2opt.optimize(prog)
    assert (stats.inlined, stats.duplicates) == (1, 0)
    assert prims(prog) == [reg_write(F("h", "b"), P(IDX))]
    assert scalar_names(prog) == [] and stats.fields_removed == 4  # nothing else used them
    assert sum(f[1] for f in prog["header_types"][0]["fields"]) % 8 == 0


def test_inlined_inside_an_expression_without_the_parameter_wrapper() -> None:
    prog = program([assign(S("tmp"), P(IDX)),
                    reg_write(HEX(0), P(E("|", S("tmp"), HEX(4))))])
    bmv2opt.optimize(prog)
    assert prims(prog) == [reg_write(HEX(0), P(E("|", IDX, HEX(4))))]


def test_a_field_copy_inlines_as_the_field() -> None:
    prog = program([assign(S("tmp_1"), F("h", "b")), reg_write(S("tmp_1"), HEX(1))])
    bmv2opt.optimize(prog)
    assert prims(prog) == [reg_write(F("h", "b"), HEX(1))]


@pytest.mark.parametrize("src", [
    P(E("+", F("h", "a"), HEX(1))),        # may carry into bit 32: the assignment truncates
    F("h", "c"),                            # 64-bit field into a 32-bit temporary
    HEX(1 << 32),
], ids=["unmasked-sum", "wider-field", "wide-constant"])
def test_a_value_the_temporary_would_truncate_is_not_inlined(src: Node) -> None:
    prog = program([assign(S("tmp"), src), reg_write(HEX(0), S("tmp"))])
    before = copy.deepcopy(prims(prog))
    assert bmv2opt.optimize(prog).inlined == 0
    assert prims(prog) == before and "tmp" in scalar_names(prog)


@pytest.mark.parametrize("between", [
    assign(F("h", "a"), HEX(5)),                          # writes an input of IDX
    reg_read(F("h", "a"), HEX(0)),                        # so does a register read
    {"op": "mark_to_drop", "parameters": [{"type": "header", "value": "standard_metadata"}]},
], ids=["assign", "register_read", "unknown-primitive"])
def test_nothing_moves_across_a_write_of_its_inputs(between: Node) -> None:
    prog = program([assign(S("tmp"), P(IDX)), between, reg_write(HEX(0), S("tmp"))])
    before = copy.deepcopy(prims(prog))
    assert bmv2opt.optimize(prog).primitives_removed == 0
    assert prims(prog) == before


def test_a_temporary_read_twice_or_outside_the_action_stays() -> None:
    twice = program([assign(S("tmp"), P(IDX)), reg_read(S("k"), S("tmp")),
                     reg_write(S("tmp"), S("k"))])
    assert bmv2opt.optimize(twice).inlined == 0
    outside = program([assign(S("tmp"), P(IDX))],
                      pipelines=[{"conditionals": [{"expression": E("==", S("tmp"), HEX(0))}]}])
    assert bmv2opt.optimize(outside).inlined == 0
    assert "tmp" in scalar_names(outside)


def test_only_p4c_temporaries_are_rewritten() -> None:
    prog = program([assign(S("k"), P(IDX)), reg_write(HEX(0), S("k"))])
    before = copy.deepcopy(prims(prog))
    assert bmv2opt.optimize(prog).primitives_removed == 0 and prims(prog) == before


def test_an_action_with_jumps_is_left_alone() -> None:
    prog = program([assign(S("tmp"), P(IDX)),
                    {"op": "_jump_if_zero", "parameters": [HEX(0), {"type": "hexstr",
                                                                    "value": "0x3"}]},
                    reg_write(HEX(0), S("tmp"))])
    before = copy.deepcopy(prims(prog))
    assert bmv2opt.optimize(prog).primitives_removed == 0 and prims(prog) == before


def test_a_recomputed_index_is_computed_once() -> None:
    """p4c's read-then-write of one cell: the index twice, in two temporaries."""
    prog = program([assign(S("tmp"), P(IDX)), reg_read(S("k"), S("tmp")),
                    assign(S("tmp_0"), P(IDX)), reg_write(S("tmp_0"), S("k"))])
    stats = bmv2opt.optimize(prog)
    assert stats.duplicates == 1
    assert prims(prog) == [assign(S("tmp"), P(IDX)), reg_read(S("k"), S("tmp")),
                           reg_write(S("tmp"), S("k"))]
    assert "tmp_0" not in scalar_names(prog)


def test_a_recomputation_after_its_inputs_changed_is_kept() -> None:
    prog = program([assign(S("tmp"), P(IDX)), reg_read(F("h", "a"), S("tmp")),
                    assign(S("tmp_0"), P(IDX)), reg_write(S("tmp_0"), HEX(1)),
                    reg_write(S("tmp"), HEX(2))])
    assert bmv2opt.optimize(prog).duplicates == 0
    # tmp_0 (read once) may be inlined, but never replaced by tmp
    assert prims(prog)[-2] == reg_write(P(IDX), HEX(1))


def test_a_kept_value_overwritten_later_is_not_reused() -> None:
    prog = program([assign(S("k"), P(IDX)), assign(S("tmp_0"), P(IDX)),
                    assign(S("k"), HEX(0)), reg_write(S("tmp_0"), S("k"))])
    assert bmv2opt.optimize(prog).duplicates == 0
    assert prims(prog)[-1]["parameters"][1] != S("k")


def test_a_hash_reads_the_field_instead_of_its_copy() -> None:
    calc = {"name": "calc", "id": 0, "algo": "crc16", "input": [S("tmp_1"), F("h", "a")]}
    prog = program([assign(S("tmp_1"), F("h", "b")), hash_into(S("k"), "calc")], calcs=(calc,))
    assert bmv2opt.optimize(prog).inlined == 1
    assert prog["calculations"][0]["input"] == [F("h", "b"), F("h", "a")]
    assert prims(prog) == [hash_into(S("k"), "calc")]


def test_a_hash_copy_of_another_width_or_a_shared_calculation_stays() -> None:
    calc = {"name": "calc", "id": 0, "algo": "crc16", "input": [S("tmp")]}
    wider = program([assign(S("tmp"), F("h", "b")), hash_into(S("k"), "calc")],
                    calcs=(copy.deepcopy(calc),))   # 16-bit field, 32-bit copy: other bytes
    assert bmv2opt.optimize(wider).inlined == 0
    shared = program([assign(S("tmp"), F("h", "a")), hash_into(S("k"), "calc")],
                     calcs=(copy.deepcopy(calc),), checksums=[{"calculation": "calc"}])
    assert bmv2opt.optimize(shared).inlined == 0


@pytest.mark.parametrize(("node", "width", "fits"), [
    (HEX(255), 8, True), (HEX(256), 8, False),
    (F("h", "b"), 16, True), (F("h", "b"), 8, False), (F("h", "zz"), 64, False),
    (E("&", F("h", "c"), HEX(0xFF)), 8, True),
    (E("|", F("h", "b"), HEX(1)), 16, True), (E("|", F("h", "a"), HEX(1)), 16, False),
    (E("?", F("h", "b"), HEX(3), cond=E("==", F("h", "a"), HEX(0))), 16, True),
    (E(">>", F("h", "b"), HEX(3)), 16, True),
    (E("b2d", None, E("==", F("h", "a"), HEX(0))), 1, True),
    (E("+", F("h", "b"), HEX(1)), 32, False),
])
def test_fits(node: Node, width: int, fits: bool) -> None:
    widths = bmv2opt._widths(program([]))
    assert bmv2opt._fits(node, width, widths) is fits


def _computed(prog: Node) -> list[Counter[str]]:
    """Per action, how often each expression is assigned to a ``scalars`` field."""
    return [Counter(json.dumps(p["parameters"][1], sort_keys=True)
                    for p in a["primitives"] if p["op"] == "assign"
                    and p["parameters"][0]["value"][0] == "scalars"
                    and p["parameters"][1]["type"] == "expression")
            for a in prog["actions"]]


def test_the_shipped_program() -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not built (make p4)")
    prog = json.loads(REAL.read_bytes())
    before = [(a["name"], len(a["primitives"])) for a in prog["actions"]]
    stats = bmv2opt.optimize(prog)
    after = [(a["name"], len(a["primitives"])) for a in prog["actions"]]
    assert sum(n for _, n in before) - sum(n for _, n in after) == stats.primitives_removed
    assert stats.primitives_removed >= 20
    update_all = [(b[1], a[1]) for b, a in zip(before, after, strict=True)
                  if b[0] == "P4ccEgress.telemetry.update_all"]
    assert update_all and update_all[0][0] - update_all[0][1] >= 15
    fields = set(scalar_names(prog))
    refs = bmv2opt._scalar_refs(prog)
    assert set(refs) <= fields  # nothing names a removed field
    assert all(refs[f] for f in fields if not f.startswith("_padding"))
    assert sum(f[1] for f in prog["header_types"][0]["fields"]) % 8 == 0
    # no action computes the same expression twice any more (p4c's did: 7 in update_all)
    assert all(max(c.values(), default=1) == 1 for c in _computed(prog))
    assert bmv2opt.optimize(prog).primitives_removed == 0  # a fixed point
