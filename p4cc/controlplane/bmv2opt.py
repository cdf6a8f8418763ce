"""Peephole passes over p4c's BMv2 JSON: fewer primitives and PHV fields per packet.

p4c 1.2.4.8's BMv2 back end computes every value an action hands to an extern into a
temporary of the ``scalars`` header first (``assign tmp_8, <expr>`` then
``register_write(r, i, tmp_8)``), copies every field of a hash's field list into a
temporary, and, because its midend copy-propagates locals, computes a register index
once for the ``read`` and again for the ``write`` (``tmp_11`` and ``tmp_12``, the same
expression).  On BMv2 each of those assignments is a pipeline primitive, each temporary
is one more field that ``PHV::reset_metadata`` clears for every packet, and a build
with logging macros formats the packet id for every primitive before it tests the log
level (docs/dataplane.md "Session 41").  Turning p4c's LocalCopyPropagation off costs
more than it saves (session 39).  So p4cc rewrites the JSON it pushes, the way it
already drops ``source_info`` (p4cc.controlplane.bmv2config):

* **duplicates**: ``assign U, E`` (U a temporary read only in this action) after ``assign
  K, E`` in the same action, with nothing in between writing a field E reads and nothing
  after writing K, is dropped and U's uses read K;
* **inlining**: a temporary assigned once and read once, later in the same action, in a
  position BMv2 evaluates as a value (``const Data&``: a register index or value, a
  counter index, a hash's base or size, an assignment's source, or inside an
  expression there), is replaced there by its expression, when the expression's value
  provably fits the temporary's width (so the truncation the assignment did is a no-op);
  a temporary that only copies a field into a hash's field list is replaced in that
  list by the field itself (same width, so the same bytes are hashed);
* **dead fields**: ``scalars`` fields that nothing references any more are removed
  (and the header's byte padding recomputed).

Only temporaries p4c made (``tmp``, ``tmp_<n>``) are rewritten, only inside one action,
never across a primitive whose effects the passes do not model, and never in an action
with jumps (conditional execution).  The program's behaviour is unchanged: the live
test ``tests/test_bmv2opt_live.py`` sends the same packets through both JSONs and
compares every output frame, counter and register cell (but the measured sojourn sums).
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Node = dict[str, Any]

SCALARS = "scalars"
TMP_RE = re.compile(r"^tmp(_\d+)?$")
#: parameter positions each primitive writes (a field or header it changes)
WRITES: dict[str, tuple[int, ...]] = {
    "assign": (0,), "register_read": (0,), "modify_field_with_hash_based_offset": (0,),
    "modify_field_rng_uniform": (0,), "register_write": (), "count": (),
}
#: parameter positions BMv2 takes as ``const Data&`` (evaluated values; an expression is
#: allowed there: bm_sim/actions.h ``ActionParam::to<const Data &>``)
VALUE_PARAMS: dict[str, tuple[int, ...]] = {
    "assign": (1,), "register_read": (2,), "register_write": (1, 2), "count": (1,),
    "modify_field_with_hash_based_offset": (1, 3), "modify_field_rng_uniform": (1, 2),
}
JUMPS = frozenset({"_jump", "_jump_if_zero"})
#: for ``_fits``: operators whose result fits w bits when both operands do (a ternary:
#: both branches), when the left one does, or always (b2d: 0 or 1); ``&`` fits when
#: either operand does
_FITS_IF_BOTH = frozenset({"|", "^", "?"})
_FITS_IF_LEFT = frozenset({">>"})
_BOOLEAN = frozenset({"b2d"})


@dataclass(frozen=True)
class OptStats:
    """What the passes removed."""
    duplicates: int
    inlined: int
    fields_removed: int

    @property
    def primitives_removed(self) -> int:
        return self.duplicates + self.inlined


# ---- reading the JSON ------------------------------------------------------------------

def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _is_field(node: Any, header: str | None = None) -> bool:
    return (isinstance(node, dict) and node.get("type") == "field"
            and isinstance(node.get("value"), list) and len(node["value"]) == 2
            and (header is None or node["value"][0] == header))


def _scalar_refs(program: Node) -> Counter[str]:
    """How often each ``scalars`` field is named anywhere in the program (as a
    ``{"type": "field"}`` node or as a bare ``["scalars", name]`` pair)."""
    refs: Counter[str] = Counter()
    for node in _walk(program):
        if isinstance(node, list) and len(node) == 2 and node[0] == SCALARS \
                and isinstance(node[1], str):
            refs[node[1]] += 1
    return refs


def _widths(program: Node) -> dict[tuple[str, str], tuple[int, bool]]:
    types = {t["name"]: t for t in program["header_types"]}
    out: dict[tuple[str, str], tuple[int, bool]] = {}
    for header in program["headers"]:
        for field in types[header["header_type"]]["fields"]:
            out[header["name"], field[0]] = (int(field[1]), bool(field[2]))
    return out


def _reads(node: Any) -> set[tuple[str, str]] | None:
    """Fields an expression or parameter reads; None if it reads anything else that a
    primitive could change (header validity, stacks)."""
    out: set[tuple[str, str]] = set()
    for sub in _walk(node):
        if not isinstance(sub, dict) or "type" not in sub:
            continue
        kind = sub["type"]
        if kind == "field":
            out.add((sub["value"][0], sub["value"][1]))
        elif kind in ("header", "header_stack", "stack_field", "header_union",
                      "header_union_stack", "last_header_stack_field"):
            return None
    return out


def _written(prim: Node) -> set[tuple[str, str]] | None:
    """Fields a primitive writes; None for a primitive the passes do not model."""
    positions = WRITES.get(prim["op"])
    if positions is None:
        return None
    out: set[tuple[str, str]] = set()
    for pos in positions:
        param = prim["parameters"][pos]
        if not _is_field(param):
            return None
        out.add((param["value"][0], param["value"][1]))
    return out


def _key(node: Any) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"))


def _inner(param: Node) -> Node:
    """An assignment's source as it may stand inside an expression."""
    return param["value"] if param["type"] == "expression" else param


def _fits(node: Node, width: int, widths: dict[tuple[str, str], tuple[int, bool]]) -> bool:
    """True if the value of ``node`` (an unsigned expression) is < 2**width for every
    input: then assigning it to a ``width``-bit field truncates nothing."""
    kind = node.get("type")
    if kind == "hexstr":
        return int(node["value"], 16) < (1 << width)
    if kind == "field":
        w, signed = widths.get((node["value"][0], node["value"][1]), (width + 1, True))
        return not signed and w <= width
    if kind != "expression":
        return False
    expr = node["value"]
    op = expr.get("op")
    left, right = expr.get("left"), expr.get("right")
    if op == "&":
        return (left is not None and _fits(left, width, widths)) or _fits(right, width, widths)
    if op in _FITS_IF_BOTH:
        return _fits(left, width, widths) and _fits(right, width, widths)
    if op in _FITS_IF_LEFT:
        return _fits(left, width, widths)
    return op in _BOOLEAN


# ---- the passes ------------------------------------------------------------------------

def _scalar_target(prim: Node) -> str | None:
    """The ``scalars`` field an ``assign`` writes, if it writes one."""
    if prim["op"] != "assign" or not _is_field(prim["parameters"][0], SCALARS):
        return None
    name: str = prim["parameters"][0]["value"][1]
    return name


def _tmp_target(prim: Node) -> str | None:
    """The p4c temporary an ``assign`` writes, if it writes one."""
    name = _scalar_target(prim)
    return name if name is not None and TMP_RE.match(name) else None


def _assignments(program: Node) -> Counter[str]:
    """How many primitives write each ``scalars`` field; a field a primitive the passes
    do not model names (it may write it) counts as written twice, so it is left alone."""
    counts: Counter[str] = Counter()
    for action in program["actions"]:
        for prim in action["primitives"]:
            written = _written(prim)
            if written is None:
                for name in _scalar_refs(prim):
                    counts[name] += 2
                continue
            for field in written:
                if field[0] == SCALARS:
                    counts[field[1]] += 1
    return counts


def _calc_uses(program: Node) -> Counter[str]:
    """References to each calculation: hash primitives' ``{"type": "calculation"}``
    parameters and checksums' ``"calculation"`` keys."""
    uses: Counter[str] = Counter()
    for node in _walk(program):
        if isinstance(node, dict):
            if node.get("type") == "calculation":
                uses[node["value"]] += 1
            elif isinstance(node.get("calculation"), str):
                uses[node["calculation"]] += 1
    return uses


def _rename(node: Any, old: str, new: str) -> None:
    for sub in _walk(node):
        if isinstance(sub, list) and sub == [SCALARS, old]:
            sub[1] = new


@dataclass(frozen=True)
class _Context:
    """Program-wide facts the passes consult (recomputed after each action's rewrite)."""
    refs: Counter[str]
    assigned: Counter[str]
    calcs: dict[str, Node]
    calc_uses: Counter[str]
    widths: dict[tuple[str, str], tuple[int, bool]]


def _kept_after(prims: list[Node], i: int, name: str) -> bool:
    """True if no primitive after ``prims[i]`` may write ``scalars.name``."""
    for prim in prims[i + 1:]:
        written = _written(prim)
        if written is None or (SCALARS, name) in written:
            return False
    return True


def _dedupe_action(prims: list[Node], in_action: Counter[str], ctx: _Context) -> int:
    """Drop ``assign U, E`` (U a temporary read only in this action) after ``assign K,
    E`` when nothing in between writes a field E reads and nothing after writes K; U's
    uses read K."""
    removed = 0
    for i, prim in enumerate(prims):  # the loop below deletes only after index i
        kept = _scalar_target(prim)
        src = prim["parameters"][1] if kept else None
        reads = _reads(src) if kept else None
        if kept is None or reads is None or (SCALARS, kept) in reads \
                or not _kept_after(prims, i, kept):
            continue
        key, j = _key(src), i + 1
        while j < len(prims):
            other = _tmp_target(prims[j])
            if (other is not None and ctx.assigned[other] == 1
                    and ctx.refs[other] == in_action[other]
                    and ctx.widths[SCALARS, other] == ctx.widths[SCALARS, kept]
                    and _key(prims[j]["parameters"][1]) == key):
                del prims[j]
                for later in prims[j:]:
                    _rename(later, other, kept)
                removed += 1
                continue
            written = _written(prims[j])
            if written is None or written & reads:
                break
            j += 1
    return removed


def _positions(prim: Node, tmp: str) -> tuple[list[tuple[Any, Any]], bool]:
    """Where ``prim`` reads ``tmp``, as (container, key) pairs (the parameter list itself
    for a parameter that is the field), and whether every one of them is in a value
    position (so it may hold an expression)."""
    spots: list[tuple[Any, Any]] = []
    ok = True
    params = prim["parameters"]
    for pos, param in enumerate(params):
        found = ([(params, pos)] if _is_field(param, SCALARS) and param["value"][1] == tmp
                 else _spots(param, tmp))
        if found and pos not in VALUE_PARAMS.get(prim["op"], ()):
            ok = False
        spots.extend(found)
    return spots, ok


def _spots(node: Any, tmp: str) -> list[tuple[Any, Any]]:
    """(container, key) of every field node naming scalars.tmp below ``node``."""
    out: list[tuple[Any, Any]] = []
    items: Any = node.items() if isinstance(node, dict) else (
        enumerate(node) if isinstance(node, list) else ())
    for k, value in items:
        if _is_field(value, SCALARS) and value["value"][1] == tmp:
            out.append((node, k))
        else:
            out.extend(_spots(value, tmp))
    return out


def _inline_into(prims: list[Node], i: int, tmp: str, src: Node, reads: set[tuple[str, str]],
                 ctx: _Context) -> bool:
    """Put ``src`` (``prims[i]`` assigns it to ``tmp``) where the one later use of ``tmp``
    in this action is; False (nothing changed) if that is not safe."""
    for prim in prims[i + 1:]:
        if _use_in_calc(prim, tmp, src, ctx):
            return True
        spots, value_only = _positions(prim, tmp)
        if spots:
            if not (value_only and len(spots) == 1
                    and _fits(_inner(src), ctx.widths[SCALARS, tmp][0], ctx.widths)):
                return False
            container, k = spots[0]
            top = container is prim["parameters"]
            container[k] = copy.deepcopy(src if top else _inner(src))
            return True
        written = _written(prim)
        if written is None or written & reads:
            return False
    return False


def _inline_action(prims: list[Node], ctx: _Context) -> int:
    """Inline every temporary of this action that is assigned once and read once."""
    removed = 0
    i = 0
    while i < len(prims):
        tmp = _tmp_target(prims[i])
        if tmp is not None and ctx.assigned[tmp] == 1 and ctx.refs[tmp] == 2:
            # two references in the whole program: the assignment's own and the one use
            src: Node = prims[i]["parameters"][1]
            reads = _reads(src)
            if reads is not None and _inline_into(prims, i, tmp, src, reads, ctx):
                del prims[i]
                removed += 1
                continue
        i += 1
    return removed


def _use_in_calc(prim: Node, tmp: str, src: Node, ctx: _Context) -> bool:
    """If ``prim`` hashes a field list holding ``tmp`` (and nothing else uses that
    calculation) and ``src`` is a field of the same width: put ``src`` in the list."""
    if prim["op"] != "modify_field_with_hash_based_offset" or not _is_field(src):
        return False
    name = prim["parameters"][2].get("value")
    calc = ctx.calcs.get(name)
    if calc is None or ctx.calc_uses[name] != 1:
        return False
    spots = _spots(calc["input"], tmp)
    field = (src["value"][0], src["value"][1])
    if len(spots) != 1 or ctx.widths.get(field) != ctx.widths[SCALARS, tmp]:
        return False
    container, k = spots[0]
    container[k] = copy.deepcopy(src)
    return True


def _drop_dead_scalars(program: Node) -> int:
    refs = _scalar_refs(program)
    scalars = next((h for h in program["headers"] if h["name"] == SCALARS), None)
    if scalars is None:
        return 0
    htype = next(t for t in program["header_types"] if t["name"] == scalars["header_type"])
    kept = [f for f in htype["fields"] if refs[f[0]] > 0 and not f[0].startswith("_padding")]
    removed = sum(1 for f in htype["fields"] if not f[0].startswith("_padding")) - len(kept)
    bits = sum(int(f[1]) for f in kept)
    if bits % 8:
        kept.append(["_padding_0", 8 - bits % 8, False])
    htype["fields"] = kept
    return removed


def optimize(program: Node) -> OptStats:
    """Rewrite ``program`` (p4c's BMv2 JSON, parsed) in place; what was removed.  A
    document without BMv2's header and action lists is left as it is (BMv2 itself
    rejects it when it is pushed)."""
    if not (isinstance(program, dict) and all(
            isinstance(program.get(k), list) for k in ("header_types", "headers", "actions"))):
        return OptStats(duplicates=0, inlined=0, fields_removed=0)
    widths = _widths(program)
    calcs = {c["name"]: c for c in program.get("calculations", [])}
    dupes = inlined = 0
    changed = True
    while changed:
        before = dupes + inlined
        for action in program["actions"]:
            prims = action["primitives"]
            if (any(p["op"] in JUMPS for p in prims)
                    or all(_tmp_target(p) is None for p in prims)):
                continue  # jumps, or no temporary to fold
            ctx = _Context(_scalar_refs(program), _assignments(program), calcs,
                           _calc_uses(program), widths)
            dupes += _dedupe_action(prims, _scalar_refs({"primitives": prims}), ctx)
            ctx = _Context(_scalar_refs(program), ctx.assigned, calcs, ctx.calc_uses, widths)
            inlined += _inline_action(prims, ctx)
        changed = dupes + inlined > before
    return OptStats(duplicates=dupes, inlined=inlined, fields_removed=_drop_dead_scalars(program))
