"""SwitchControl and the control loop against the fake P4Runtime server (fail-safe)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from fake_switch import FakeP4RuntimeServer, FakeThrift

from p4cc.controlplane.agents.static import make_agent
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.loop import ControlLoop, LoopConfig
from p4cc.controlplane.p4runtime import P4RuntimeClient
from p4cc.controlplane.records import PortTelemetry
from p4cc.controlplane.switch import CPU_PORT, INT_REPORT_SESSION, SwitchControl
from p4cc.controlplane.telemetry import TelemetryPoller
from p4cc.errors import ConfigError
from p4cc.topo.spec import parse_topo

FIXTURE = Path(__file__).parent / "data" / "controlplane_p4info.txtpb"
REAL = Path(__file__).parent.parent / "p4cc" / "data" / "p4" / "p4cc.p4info.txtpb"
REGS = {"q_enq_sum": 64, "q_enq_cnt": 64, "q_enq_max": 64, "q_sojourn_sum": 64,
        "incast_bits": 256, "flow_bits": 256, "elephant_bits": 256,
        "flow_bytes_r0": 1024, "flow_bytes_r1": 1024}


@pytest.fixture(params=["fixture", "real"])
def rig(request: pytest.FixtureRequest, tmp_path: Path):
    p4info = FIXTURE if request.param == "fixture" else REAL
    if not p4info.is_file():
        pytest.skip(f"{p4info} not built yet (make p4)")
    js = tmp_path / "p4cc.json"
    js.write_text("{}")
    topo = parse_topo("leafspine,spines=2,leaves=2,hosts=2")
    spec = topo.switch("leaf1")
    with FakeP4RuntimeServer(device_id=spec.device_id) as srv:
        thrift = FakeThrift(REGS)
        p4rt = P4RuntimeClient(srv.address, spec.device_id, timeout_s=0.5)
        ctl = SwitchControl(spec, topo, p4info, js, p4rt=p4rt, thrift=thrift)
        ctl.connect()
        yield srv, thrift, ctl
        ctl.close()


def test_setup_installs_everything(rig) -> None:
    srv, thrift, ctl = rig
    ctl.setup(static_setting("secn2", ctl.scale))
    # 2 local /32 + 2 remote /32 via ECMP over 2 spines
    lpm = srv.table_entries("ipv4_lpm")
    assert len(lpm) == 4
    assert len(srv.table_entries("ecmp_nhop")) == 2
    assert len(srv.table_entries("int_sink")) == 2  # ports 1, 2 face hosts
    assert len(srv.table_entries("ecn_config")) == 4
    default = srv.default_action("switch_config")
    params = [p.value for p in default.action.action.params]
    assert params == [b"\x01", (100_000).to_bytes(3, "big")]
    info = ctl.p4rt.p4info
    assert info is not None
    # no watch yet: the INT source lookup is off (the fixture's older P4Info has no
    # no-watch action: the lookup then stays on)
    off = (".set_switch_config_no_watch" if any(
        n.endswith(".set_switch_config_no_watch") for n in info.table_actions("switch_config"))
        else ".set_switch_config")
    assert info.by_id(default.action.action.action_id).preamble.name.endswith(off)
    assert ("pre", "clone_session_entry", INT_REPORT_SESSION) in srv.servicer.entries
    assert srv.servicer.entries[("pre", "clone_session_entry", INT_REPORT_SESSION)] \
        .clone_session_entry.replicas[0].egress_port == CPU_PORT
    # 10 Mb/s host links at 1000 B packets -> 1250 pps; uplinks 10 Mb/s too (2x5/2)
    assert thrift.queue_rate == {1: 1250.0, 2: 1250.0, 3: 1250.0, 4: 1250.0}
    assert set(thrift.queue_depth.values()) == {100}
    ctl.add_int_watch(dst="10.0.2.1", proto=17, dport=4791)
    (watch,) = srv.table_entries("int_watchlist")
    assert len(watch.match) == 3
    # the first watch turns the lookup on, same settings; a second changes nothing
    default = srv.default_action("switch_config")
    assert info.by_id(default.action.action.action_id).preamble.name.endswith(
        ".set_switch_config")
    assert [p.value for p in default.action.action.params] == params
    writes = len(srv.update_types("switch_config"))
    ctl.add_int_watch(dst="10.0.2.2", proto=17, dport=4791)
    assert len(srv.update_types("switch_config")) == writes
    # a new pipeline (setup again) has no watch: off again
    ctl.setup()
    default = srv.default_action("switch_config")
    assert info.by_id(default.action.action.action_id).preamble.name.endswith(off)


def test_constants_match_packets_module() -> None:
    ints = pytest.importorskip("p4cc.packets.int")
    assert (INT_REPORT_SESSION, CPU_PORT) == (ints.INT_REPORT_SESSION, ints.CPU_PORT)


def test_set_ecn_insert_then_modify_and_validation(rig) -> None:
    srv, _thrift, ctl = rig
    ctl.setup()
    cfg = EcnConfig(5000, 20000, 0.1)
    ctl.set_ecn(3, cfg)
    ctl.set_ecn(3, EcnConfig(6000, 20000, 0.1))  # MODIFY
    (entry,) = srv.table_entries("ecn_config")
    params = [p.value for p in entry.action.action.params]
    assert params == [b"\x06", b"\x14", (6554).to_bytes(2, "big")]
    with pytest.raises(ConfigError, match="exceeds the port buffer"):
        ctl.set_ecn(3, EcnConfig(5000, 10**6, 0.1))
    with pytest.raises(ConfigError, match="no port 9"):
        ctl.set_ecn(9, cfg)
    assert ctl.ecn[3] == EcnConfig(6000, 20000, 0.1)
    ctl.set_ecn(3, None)
    assert srv.table_entries("ecn_config") == []
    # stale view: the switch already holds an entry we did not install -> MODIFY fallback
    other = SwitchControl(ctl.spec, ctl.topo, ctl.p4info_path, ctl.json_path, p4rt=ctl.p4rt,
                          thrift=ctl.thrift)
    ctl.set_ecn(4, cfg)
    other.set_ecn(4, EcnConfig(7000, 20000, 0.1))
    assert len(srv.table_entries("ecn_config")) == 1


class FlakyAgent:
    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        pass

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        self.calls += 1
        if self.calls == 1:
            return {p: EcnConfig(5000, 20000, 0.1) for p in obs}
        if self.calls == 2:
            raise RuntimeError("agent bug")
        if self.calls == 3:
            return {1: EcnConfig(50_000, 10_000, 0.1)}  # invalid: kmin > kmax
        return {1: EcnConfig(8000, 30000, 0.2)}


def _loop(ctl: SwitchControl, thrift: FakeThrift, agent, records: list) -> ControlLoop:
    t = [0.0]

    def clock() -> float:
        t[0] += 0.01
        return t[0]

    poller = TelemetryPoller(ctl.name, ctl.ports, ctl.p4rt, thrift, ctl.scale,
                             {p: ctl.port_rate_bps(p) for p in ctl.ports}, lambda: ctl.ecn,
                             clock=clock)
    return ControlLoop(ctl, poller, agent, LoopConfig(0.01, 0.01, 0.04), records.extend,
                       clock=clock)


def test_loop_fail_safe(rig) -> None:
    srv, thrift, ctl = rig
    ctl.setup()
    records: list[PortTelemetry] = []
    loop = _loop(ctl, thrift, FlakyAgent(), records)
    loop.start()
    srv.set_counter("port_tx", {1: (10, 10_000)})
    good = EcnConfig(5000, 20000, 0.1)
    loop.step()  # applies `good` on all 4 ports
    assert loop.stats.applied == 4 and len(records) == 4
    assert records[0].tx_pkts == 10 and records[0].ecn is None
    loop.step()  # agent raises
    loop.step()  # invalid decision
    assert (loop.stats.agent_errors, loop.stats.invalid_decisions) == (1, 1)
    assert ctl.ecn[1] == good and len(srv.table_entries("ecn_config")) == 4
    # the switch connection drops: errors, backoff, then reconnect with state intact
    srv.stop()
    thrift.fail = True
    loop.step()
    assert not loop.connected and loop.stats.switch_errors == 1
    for _ in range(3):
        loop.step()  # reconnect attempts fail (bounded backoff)
    assert loop.stats.reconnects == 0
    srv.start()
    thrift.fail = False
    for _ in range(10):
        loop.step()
        if loop.connected:
            break
    assert loop.connected and loop.stats.reconnects == 1
    loop.step()
    assert ctl.ecn[1] == EcnConfig(8000, 30000, 0.2)
    assert len(srv.table_entries("ecn_config")) == 4
    # the switch restarts and loses its state: reconnect sets it up again
    srv.stop()
    srv.wipe()
    loop.step()
    srv.start()
    for _ in range(10):
        loop.step()
        if loop.connected:
            break
    assert loop.stats.reconnects == 2
    assert len(srv.table_entries("ecn_config")) == 4 and len(srv.table_entries("ipv4_lpm")) == 4
    assert ctl.ecn[1] == EcnConfig(8000, 30000, 0.2)


def test_loop_run_by_deadline_with_static_agent(rig) -> None:
    _srv, thrift, ctl = rig
    ctl.setup()
    records: list[PortTelemetry] = []
    poller = TelemetryPoller(ctl.name, ctl.ports, ctl.p4rt, thrift, ctl.scale, {},
                             lambda: ctl.ecn)
    loop = ControlLoop(ctl, poller, make_agent("secn1", ctl.scale), LoopConfig(0.02),
                       records.extend)
    stats = loop.run(duration_s=0.15)
    assert 3 <= stats.steps <= 8
    assert set(ctl.ecn.values()) == {static_setting("secn1", ctl.scale)}
    assert stats.applied == 4 and stats.agent_errors == stats.switch_errors == 0


def test_make_agent_name_with_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.controlplane.agents import static
    from p4cc.controlplane.agents.static import make_agent
    from p4cc.errors import ConfigError
    from p4cc.scale import get_scale

    scale = get_scale("testbed")
    with pytest.raises(ConfigError, match="static setting and takes no argument"):
        make_agent("secn1:model.pt", scale)
    seen: list[str] = []

    def factory(sc: object, arg: str = "") -> object:
        seen.append(arg)
        return make_agent("secn2", scale)

    monkeypatch.setitem(static.AGENTS, "p4cctestagent", factory)
    assert make_agent("p4cctestagent:weights.npz", scale).name == "secn2"
    assert seen == ["weights.npz"]


def test_ecn_config_accepts_numpy_integers() -> None:
    import numpy as np

    from p4cc.controlplane.ecn import EcnConfig

    cfg = EcnConfig(np.int64(1000), np.int64(20_000), np.float32(0.5))  # type: ignore[arg-type]
    assert cfg.validate(100_000) is cfg
