"""``p4cc bench sweep --agents``: the grid's agents reach every point's spec, and an
unknown agent is refused by name before any run starts."""

from __future__ import annotations

import pytest

from p4cc.bench import sweep as bench_sweep
from p4cc.errors import ConfigError


def test_agents_reach_the_spec_and_the_default_stays() -> None:
    assert bench_sweep.bench_doc(5.0)["agents"] == ["secn1", "secn2"]
    doc = bench_sweep.bench_doc(5.0, ("secn1", "secn2", "acc", "pet"))
    assert doc["agents"] == ["secn1", "secn2", "acc", "pet"]


def test_an_unknown_agent_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="unknown agent 'nope'"):
        bench_sweep.sweep_case("pool", 1, 0.1, 1, ("nope",))
