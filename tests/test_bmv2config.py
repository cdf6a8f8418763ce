"""p4cc.controlplane.bmv2config: the device config pushed without p4c's source info and
with its temporaries folded (p4cc.controlplane.bmv2opt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4cc.controlplane.bmv2config import device_config, strip_source_info
from p4cc.controlplane.bmv2opt import optimize
from p4cc.errors import ConfigError
from p4cc.paths import P4_BUILD_DIR

REAL = P4_BUILD_DIR / "p4cc.json"


def _count(node: object) -> int:
    if isinstance(node, dict):
        return ("source_info" in node) + sum(_count(v) for v in node.values())
    if isinstance(node, list):
        return sum(_count(v) for v in node)
    return 0


def test_strip_removes_every_source_info_and_nothing_else() -> None:
    prog = {"actions": [{"name": "a", "source_info": {"line": 3},
                         "primitives": [{"op": "assign", "source_info": {"line": 4},
                                         "parameters": [{"type": "field"}]}]}],
            "source_info": {"line": 1}}
    assert strip_source_info(prog) == 3
    assert prog == {"actions": [{"name": "a", "primitives": [
        {"op": "assign", "parameters": [{"type": "field"}]}]}]}


def test_real_program_keeps_its_pipeline() -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not built (make p4)")
    full = json.loads(REAL.read_bytes())
    assert _count(full) > 100  # p4c annotates every primitive, table and condition
    stripped = json.loads(device_config(REAL))
    assert _count(stripped) == 0
    strip_source_info(full)
    stats = optimize(full)
    assert stats.primitives_removed > 0
    assert stripped == full  # the same program otherwise, p4c's temporaries folded
    assert device_config(REAL, source_info=True) == REAL.read_bytes()


def test_bad_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        device_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad\.json is not valid JSON"):
        device_config(bad)
    other = tmp_path / "other.json"   # JSON, but not a BMv2 program: pushed as it is
    other.write_text('{"actions": [], "x": {"source_info": 1}}')
    assert json.loads(device_config(other)) == {"actions": [], "x": {}}
