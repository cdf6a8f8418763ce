"""FabricSession over fake switches: one loop (and poller) per switch, ECN written once,
validated once, INSERT then MODIFY; the agent told the settings in force once."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fake_switch import FakeP4RuntimeServer, fake_fabric_controls

from p4cc.controlplane.agents import static
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment.session import AgentAction, FabricSession, SessionConfig
from p4cc.scale import Scale
from p4cc.topo.spec import parse_topo

FIXTURE = Path(__file__).parent / "data" / "controlplane_p4info.txtpb"
REGS = {"q_enq_sum": 64, "q_enq_cnt": 64, "q_enq_max": 64, "q_sojourn_sum": 64,
        "incast_bits": 256, "flow_bits": 256, "elephant_bits": 256,
        "flow_bytes_r0": 1024, "flow_bytes_r1": 1024}
FIRST = EcnConfig(5000, 20000, 0.1)


class CountingAgent:
    """Sets FIRST everywhere before any traffic; counts how often it is told the state."""

    name = "counting"
    instances: ClassVar[list[CountingAgent]] = []

    def __init__(self, scale: Scale) -> None:
        self.resets = 0
        self.acts = 0
        self.ports: list[int] = []
        CountingAgent.instances.append(self)

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self.resets += 1
        self.ports = sorted(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        self.acts += 1
        return dict.fromkeys(self.ports, FIRST) if self.acts == 1 else {}


@contextmanager
def fake_session(tmp_path: Path, topo_text: str = "star,hosts=3",
                 **cfg: Any) -> Iterator[tuple[FabricSession, dict[str, FakeP4RuntimeServer]]]:
    topo = parse_topo(topo_text)
    with ExitStack() as stack:
        servers, controls = fake_fabric_controls(stack, topo, tmp_path)
        actions: list[AgentAction] = []
        session = FabricSession(controls, SessionConfig(**cfg), on_action=actions.extend)
        session.actions = actions  # type: ignore[attr-defined]
        try:
            yield session, servers
        finally:
            session.stop()


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingAgent]:
    CountingAgent.instances = []
    monkeypatch.setitem(static.AGENTS, "p4cctestcount", CountingAgent)
    return CountingAgent


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[EcnConfig]:
    seen: list[EcnConfig] = []
    real = EcnConfig.validate

    def counted(self: EcnConfig, buffer_bytes: int) -> EcnConfig:
        seen.append(self)
        return real(self, buffer_bytes)

    monkeypatch.setattr(EcnConfig, "validate", counted)
    return seen


def test_ecn_written_once_validated_once_insert_then_modify(
        tmp_path: Path, counting: type[CountingAgent], validations: list[EcnConfig]) -> None:
    with fake_session(tmp_path, agent="p4cctestcount", interval_s=0.05) as (session, srvs):
        srv = srvs["s1"]
        session.open()
        ports = list(session.controls["s1"].ports)
        # the agent's first decision: validated once, one INSERT per port, one request
        assert validations == [FIRST]
        assert srv.update_types("ecn_config") == ["INSERT"] * len(ports)
        (agent,) = counting.instances
        assert agent.resets == 1 and agent.acts == 1
        assert [a.port for a in session.actions] == ports  # type: ignore[attr-defined]
        # the loop starts: the agent is not told again, nothing unchanged is rewritten
        srv.set_counter("port_tx", {1: (10, 10_000)})
        session.start()
        loop = session.loops["s1"]
        deadline = time.monotonic() + 5
        while loop.stats.steps < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # poll interval of the condition
        assert loop.stats.steps >= 3 and agent.resets == 1
        assert srv.update_types("ecn_config") == ["INSERT"] * len(ports)
        assert validations == [FIRST]
        # a change: validated once, written once as MODIFY
        new = EcnConfig(6000, 20000, 0.1)
        session.set_ecn("s1", ports[0], new)
        assert validations == [FIRST, new]
        assert srv.update_types("ecn_config") == ["INSERT"] * len(ports) + ["MODIFY"]
        session.set_ecn("s1", ports[0], new)  # no change: nothing written
        assert srv.update_types("ecn_config")[-1:] == ["MODIFY"]
        assert len(srv.update_types("ecn_config")) == len(ports) + 1
        # marking off: DELETE; invalid: refused before anything is written
        session.set_ecn("s1", ports[0], None)
        with pytest.raises(ConfigError, match="exceeds the port buffer"):
            session.set_ecn("s1", ports[1], EcnConfig(5000, 10**9, 0.1))
        assert srv.update_types("ecn_config")[len(ports) + 1:] == ["DELETE"]
        assert session.controls["s1"].ecn[ports[1]] == FIRST


def test_session_polls_through_one_loop_per_switch(tmp_path: Path) -> None:
    with fake_session(tmp_path, "leafspine,spines=1,leaves=2,hosts=1",
                      interval_s=0.05) as (session, srvs):
        with pytest.raises(ConfigError, match="not open"):
            session.set_ecn("leaf1", 1, FIRST)
        session.start()  # opens: no agent -> the loops hold and poll
        assert sorted(session.loops) == ["leaf1", "leaf2", "spine1"]
        assert all(loop.agent.name == "hold" for loop in session.loops.values())
        srvs["leaf1"].set_counter("port_tx", {1: (25, 25_000)})
        deadline = time.monotonic() + 5
        rec = None
        while time.monotonic() < deadline:
            rec = session.latest("leaf1", 1)
            if rec is not None and rec.tx_pkts:
                break
            session.check()
            time.sleep(0.01)  # poll interval of the condition
        assert rec is not None and rec.tx_pkts == 25
        assert session.records_between(0, 1e9)
        assert all(srv.update_types("ecn_config") == [] for srv in srvs.values())
        with pytest.raises(ConfigError, match="no port 9"):
            session.latest("leaf1", 9)
        with pytest.raises(ConfigError, match="no switch"):
            session.set_ecn("s9", 1, FIRST)
        session.set_ecn_all(FIRST)
        assert all(len(srv.update_types("ecn_config")) == len(session.controls[n].ports)
                   for n, srv in srvs.items())
    assert all(not loop.control.thrift.is_connected  # type: ignore[attr-defined]
               for loop in session.loops.values())


def test_set_agent_swaps_and_writes_its_settings_as_modify(tmp_path: Path) -> None:
    from p4cc.controlplane.ecn import static_setting

    with fake_session(tmp_path, agent="secn1") as (session, srvs):
        session.open()
        n = len(session.controls["s1"].ports)
        session.set_agent("secn2")
        assert srvs["s1"].update_types("ecn_config") == ["INSERT"] * n + ["MODIFY"] * n
        want = static_setting("secn2", session.controls["s1"].scale)
        assert set(session.controls["s1"].ecn.values()) == {want}
        assert session.loops["s1"].agent.name == "secn2"
