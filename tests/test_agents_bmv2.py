"""A loaded learned agent (ACC, PET) retunes the thresholds of a live BMv2 switch: the
ecn_config entries read back from the switch and the telemetry's setting in force
change to what the agent decided from the switch's own records (issue 9)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from p4cc.bench.agents import random_checkpoint
from p4cc.controlplane.agents.learned import DEFAULT_CHECKPOINTS, LearnedAgent
from p4cc.controlplane.agents.static import make_agent
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.loop import ControlLoop, LoopConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.controlplane.switch import SwitchControl
from p4cc.topo.spec import parse_topo
from tests.live_switch import live_switch

pytestmark = pytest.mark.bmv2


@pytest.fixture(scope="module")
def ctl() -> Iterator[SwitchControl]:
    with live_switch("star,hosts=4") as control:
        yield control


def switch_thresholds(ctl: SwitchControl) -> dict[int, tuple[int, int, int]]:
    """ecn_config read back from the switch: port -> (Kmin pkts, Kmax pkts, Pmax scaled)."""
    out = {}
    for entry in ctl.p4rt.read_table("ecn_config"):
        port = next(int.from_bytes(m.exact.value, "big") for m in entry.match
                    if m.exact.value and m.field_id == 1)
        kmin, kmax, pmax = (int.from_bytes(p.value, "big") for p in entry.action.action.params)
        out[port] = (kmin, kmax, pmax)
    return out


def data_plane_form(cfg: EcnConfig, pkt_bytes: int) -> tuple[int, int, int]:
    return cfg.kmin_pkts(pkt_bytes), cfg.kmax_pkts(pkt_bytes), cfg.pmax_scaled


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_learned_agent_retunes_a_live_switch(ctl: SwitchControl, tmp_path: Path,
                                             algo: str) -> None:
    # the shipped checkpoint when there is one, else one of the paper's size
    path = DEFAULT_CHECKPOINTS[algo] if DEFAULT_CHECKPOINTS[algo].is_file() else \
        random_checkpoint(tmp_path / f"{algo}.npz", algo)
    ctl.set_ecn_all(dict.fromkeys(ctl.ports))  # marking off: no entry in the switch
    assert switch_thresholds(ctl) == {}
    agent = make_agent(f"{algo}:{path}", ctl.scale)
    records: list[PortTelemetry] = []
    loop = ControlLoop.for_switch(ctl, agent, LoopConfig(0.05), sink=records.extend)
    loop.start()
    assert loop.apply_initial() == 0  # a learned agent decides only from records
    steps = 4
    for _ in range(steps):
        loop.step()
    assert loop.stats.agent_errors == loop.stats.switch_errors == 0
    assert loop.stats.invalid_decisions == 0 and len(records) == steps * len(ctl.ports)
    # replay the switch's own records through a fresh agent: the decisions it must take
    replay = LearnedAgent(algo, ctl.scale, path)
    replay.reset(dict.fromkeys(ctl.ports))
    expected: dict[int, EcnConfig] = {}
    by_step = [records[i:i + len(ctl.ports)] for i in range(0, len(records), len(ctl.ports))]
    for k, recs in enumerate(by_step):
        assert {r.port: r.ecn for r in recs} == {p: expected.get(p) for p in ctl.ports}, \
            f"step {k}: the telemetry's setting in force is not the agent's last decision"
        expected.update(replay.act({r.port: r for r in recs}))
    assert set(expected) == set(ctl.ports)  # marking was off: every port got a setting
    assert ctl.ecn == expected
    assert all(c in replay.settings for c in expected.values())
    pkt = ctl.scale.pkt_bytes
    assert switch_thresholds(ctl) == {p: data_plane_form(c, pkt) for p, c in expected.items()}
    # the next record carries the setting now in force in the switch
    loop.step()
    assert {r.port: r.ecn for r in records[-len(ctl.ports):]} == ctl.ecn


@pytest.mark.root
@pytest.mark.parametrize("name", ["secn1", "acc"])
def test_bench_control_loop_under_standing_load(name: str) -> None:
    from p4cc.bench.agents import controlloop
    from p4cc.bench.controlloop import loaded_skip_reason

    reason = loaded_skip_reason()
    if reason:
        pytest.skip(reason)
    rec = controlloop(name, steps=10, interval_s=0.05)
    assert rec["case"] == f"controlloop_bmv2_{name}" and rec["errors"] == 0
    assert rec["ports"] == 8 and rec["steps"] == 10
    assert 0 < rec["step_ms_median"] <= rec["step_ms_p99"]
    assert rec["poll_ms_median"] > 0 and rec["act_ms_median"] >= 0
    # the standing load: queues at least half full (the warm-up's condition)
    buffer = parse_topo("star,hosts=8").scale.buffer_bytes
    assert rec["qlen_bytes_median"] >= buffer / 4
    if name == "secn1":
        assert rec["writes_per_step"] == 0  # static: written before the timed steps
