"""tests/data/controlplane_p4info.txtpb, the hand-made P4Info of the fake-switch tests,
against the shipped program's P4Info: every table, key field and action parameter the
fixture declares must exist in p4cc.p4 with the same match kind and width (the fixture
names controls MyIngress/MyEgress, the program P4ccIngress.<instance>; names are
compared by their last component, as p4cc.controlplane.p4runtime resolves them).
Session 40 changed ecn_config's key; the fake-switch tests kept passing against the old
fixture until the client learnt to refuse a missing key field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from p4cc.controlplane.p4info import P4Info
from p4cc.paths import P4_BUILD_DIR

FIXTURE = Path(__file__).parent / "data" / "controlplane_p4info.txtpb"
SHIPPED = P4_BUILD_DIR / "p4cc.p4info.txtpb"


def _load(path: Path) -> Any:
    return P4Info.from_file(path).msg


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _tables(info: Any) -> dict[str, dict[str, tuple[int, int]]]:
    return {_short(t.preamble.name): {m.name: (m.bitwidth, m.match_type) for m in t.match_fields}
            for t in info.tables}


def _actions(info: Any) -> dict[str, dict[str, int]]:
    return {_short(a.preamble.name): {p.name: p.bitwidth for p in a.params}
            for a in info.actions}


def _table_actions(info: Any) -> dict[str, set[str]]:
    names = {a.preamble.id: _short(a.preamble.name) for a in info.actions}
    return {_short(t.preamble.name): {names[r.id] for r in t.action_refs} for t in info.tables}


@pytest.fixture(scope="module")
def infos() -> tuple[Any, Any]:
    if not SHIPPED.is_file():
        pytest.skip(f"{SHIPPED} not built (make p4)")
    return _load(FIXTURE), _load(SHIPPED)


def test_every_fixture_table_has_the_shipped_keys(infos: tuple[Any,
                                                                Any]) -> None:
    fixture, shipped = _tables(infos[0]), _tables(infos[1])
    assert set(fixture) <= set(shipped)
    for name, keys in fixture.items():
        assert keys == shipped[name], f"table {name}: fixture {keys} != program {shipped[name]}"


def test_every_fixture_action_has_the_shipped_parameters(
        infos: tuple[Any, Any]) -> None:
    fixture, shipped = _actions(infos[0]), _actions(infos[1])
    assert set(fixture) <= set(shipped)
    for name, params in fixture.items():
        assert params == shipped[name], f"action {name}: {params} != {shipped[name]}"
    fixture_refs, shipped_refs = _table_actions(infos[0]), _table_actions(infos[1])
    for table, refs in fixture_refs.items():
        assert refs <= shipped_refs[table], f"table {table}: actions {refs - shipped_refs[table]}"
