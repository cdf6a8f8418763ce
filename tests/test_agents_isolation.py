"""Fault isolation between switches: one agent's exception leaves the other switches'
agents running and its own switch on the last valid thresholds (issue 9, Deployment),
with the learned agents (ACC, PET) on fake switches and on the simulator."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
import pytest
from fake_switch import fake_fabric_controls

from p4cc.bench.agents import random_checkpoint
from p4cc.controlplane.agents import static
from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.session import FabricSession, SessionConfig
from p4cc.scale import Scale
from p4cc.topo.spec import parse_topo


class Counting:
    """Forwards to ``agent``; counts the intervals it saw; raises from call ``fail_at``."""

    def __init__(self, agent: Agent, fail_at: int | None = None) -> None:
        self.agent, self.fail_at, self.name = agent, fail_at, agent.name
        self.calls = 0
        self.last_ok: dict[int, EcnConfig] = {}

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self.agent.reset(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        if obs:
            self.calls += 1
            if self.fail_at is not None and self.calls >= self.fail_at:
                raise RuntimeError("agent bug")
        out = dict(self.agent.act(obs))
        self.last_ok.update(out)
        return out


def _wait(cond: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_one_learned_agent_fails_others_keep_running(tmp_path: Path, algo: str) -> None:
    ckpt = random_checkpoint(tmp_path / f"{algo}.npz", algo)
    topo = parse_topo("leafspine,spines=1,leaves=2,hosts=2")
    with ExitStack() as stack:
        servers, controls = fake_fabric_controls(stack, topo, tmp_path)
        session = FabricSession(controls, SessionConfig(interval_s=0.02,
                                                        agent=f"{algo}:{ckpt}"))
        session.open()
        stack.callback(session.stop)
        wrapped = {}
        for name, loop in session.loops.items():
            wrapped[name] = Counting(loop.agent, fail_at=3 if name == "leaf1" else None)
            loop.swap_agent(wrapped[name])
        session.start()
        assert _wait(lambda: wrapped["leaf1"].calls >= 3, 10.0)
        bad = session.loops["leaf1"]
        assert _wait(lambda: bad.stats.agent_errors >= 1, 5.0)
        in_force = controls["leaf1"].ecn
        entries = len(servers["leaf1"].table_entries("ecn_config"))
        counts = {n: w.calls for n, w in wrapped.items()}
        # the others keep stepping and acting, the failing one keeps failing
        assert _wait(lambda: all(wrapped[n].calls >= counts[n] + 5 for n in ("leaf2", "spine1"))
                     and bad.stats.agent_errors >= 5, 10.0)
        session.check()  # no loop thread died
        for name in ("leaf2", "spine1"):
            stats = session.loops[name].stats
            assert stats.agent_errors == 0 and stats.steps > counts[name]
            learned = wrapped[name].agent
            # thresholds written by the learned agent (its template's settings)
            assert set(controls[name].ecn.values()) <= set(learned.settings)  # type: ignore[attr-defined]
        # the failing switch: the last valid thresholds, written before the failure
        assert controls["leaf1"].ecn == in_force
        assert {p: c for p, c in in_force.items() if c is not None} == wrapped["leaf1"].last_ok
        assert wrapped["leaf1"].last_ok, "the agent wrote thresholds before it failed"
        assert len(servers["leaf1"].table_entries("ecn_config")) == entries
        assert "RuntimeError: agent bug" in bad.stats.last_error


class Alternating:
    """Writes one of two settings on every port each interval."""

    name = "alternating"

    def __init__(self) -> None:
        self.k = 0
        self.ports: list[int] = []

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self.ports = sorted(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        self.k += 1
        cfg = (EcnConfig(2000, 20000, 0.1), EcnConfig(3000, 30000, 0.2))[self.k % 2]
        return dict.fromkeys(self.ports, cfg)


def test_sim_backend_isolates_a_failing_agent(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.experiment.runner import run_spec
    from p4cc.experiment.spec import parse_spec

    made: list[str] = []

    def factory(scale: Scale) -> Agent:
        made.append("x")
        return Counting(Alternating(), fail_at=3) if len(made) == 1 else Alternating()

    monkeypatch.setitem(static.AGENTS, "p4cctestbomb", factory)
    doc = {"name": "iso", "backend": "sim", "topology": "leafspine,spines=1,leaves=2,hosts=1",
           "scale": "testbed", "duration_s": 0.5, "interval_s": 0.05, "seed": 1,
           "agents": ["p4cctestbomb"],
           "workloads": [{"type": "websearch", "load": 0.3, "size_scale": "bdp"}]}
    (path,) = run_spec(parse_spec(doc), out=tmp_path / "run",
                       progress=lambda label, d: (lambda t: None))
    actions = pd.read_csv(path / "agent.csv")
    first = parse_topo(doc["topology"]).switches[0].name
    mine, others = actions[actions.switch == first], actions[actions.switch != first]
    assert mine.t_s.max() < 0.15  # wrote before its failure (calls 1-2), never after
    names = {sw.name for sw in parse_topo(doc["topology"]).switches}
    assert others.t_s.max() > 0.4 and set(others.switch) == names - {first}
    log = (path / "log.txt").read_text()
    assert f"on {first} failed (RuntimeError: agent bug)" in log
    tel = pd.read_csv(path / "telemetry.csv")
    late = tel[(tel.switch == first) & (tel.t_s > 0.2)]
    assert len(late) and late.kmin_bytes.nunique() == 1  # its last valid thresholds stay


def test_specs_play_the_learned_agents() -> None:
    from p4cc.experiment.default import DEFAULT_SPEC
    from p4cc.experiment.spec import load_spec
    from p4cc.paths import REPO_ROOT

    assert load_spec(DEFAULT_SPEC).agents == ("secn1", "secn2", "acc", "pet")
    for name in ("acc_e2e", "acc_incast", "acc_storage", "pet_link_failure",
                 "pet_phase_switch"):
        agents = load_spec(REPO_ROOT / "examples" / f"{name}.yaml").agents
        assert "acc" in agents and (not name.startswith("pet") or "pet" in agents), name
