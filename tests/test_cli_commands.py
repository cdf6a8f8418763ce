"""The p4cc commands of ``p4cc cli`` against fake switches (no root), the workload plans,
and ``p4cc shell`` (p4runtime-shell in its own venv) reading a table of a fake switch
without taking primary from p4cc's controller."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from fake_switch import FakeP4RuntimeServer, FakeThrift, fake_fabric_controls

from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.p4runtime import P4RuntimeClient
from p4cc.controlplane.switch import SwitchControl
from p4cc.errors import ConfigError
from p4cc.experiment import clistate, p4shell
from p4cc.experiment.clicmds import CliContext, TestbedCommands
from p4cc.experiment.cliwork import parse_size, plan_incast, plan_workload
from p4cc.experiment.session import FabricSession, SessionConfig
from p4cc.scale import get_scale
from p4cc.topo.spec import parse_topo

FIXTURE = Path(__file__).parent / "data" / "controlplane_p4info.txtpb"
REGS = {"q_enq_sum": 64, "q_enq_cnt": 64, "q_enq_max": 64, "q_sojourn_sum": 64,
        "incast_bits": 256, "flow_bits": 256, "elephant_bits": 256,
        "flow_bytes_r0": 1024, "flow_bytes_r1": 1024}
TOPO = "leafspine,spines=1,leaves=2,hosts=2"


@contextmanager
def commands(tmp_path: Path, agent: str | None = "secn1"
             ) -> Iterator[tuple[TestbedCommands, dict[str, FakeP4RuntimeServer]]]:
    topo = parse_topo(TOPO)
    with ExitStack() as stack:
        servers, controls = fake_fabric_controls(stack, topo, tmp_path)
        session = FabricSession(controls, SessionConfig(interval_s=0.05, agent=agent))
        cmds = TestbedCommands(session.open(), topo,
                               CliContext(TOPO, "testbed", "dcqcn", tmp_path))
        try:
            yield cmds, servers
        finally:
            cmds.close()
            session.stop()


def test_thresholds_agents_and_swapping_an_agent(tmp_path: Path) -> None:
    with commands(tmp_path) as (cmds, _servers):
        assert cmds.agents().splitlines() == ["leaf1: secn1", "leaf2: secn1", "spine1: secn1"]
        lines = cmds.thresholds("leaf1").splitlines()
        assert len(lines) == 3 and all(ln.startswith("leaf1:") for ln in lines)
        assert "(to h1  )" in lines[0] and "(to spine1)" in lines[2]
        in_force = cmds.session.controls["leaf1"].ecn[1]
        assert in_force == static_setting("SECN1", get_scale("testbed"))
        assert in_force.describe() in lines[0]
        out = cmds.agent("leaf1 secn2")
        assert out == "leaf1: now secn2"
        assert cmds.agents().splitlines() == ["leaf1: secn2", "leaf2: secn1", "spine1: secn1"]
        assert cmds.session.controls["leaf1"].ecn != cmds.session.controls["leaf2"].ecn
        with pytest.raises(ConfigError, match=r"choose one of \[.*'secn0'.*'hold'\]"):
            cmds.agent("leaf1 nosuch")
        with pytest.raises(ConfigError, match="no switch 'x9'"):
            cmds.agent("x9 secn0")
        cmds.agent("hold")
        assert set(cmds.agents().split()) >= {"hold"}
        cfg = EcnConfig(4000, 16000, 0.2)
        assert cmds.ecn("leaf2 1 4000 16000 0.2") == "leaf2:1: " + cfg.describe()
        assert cfg.describe() in cmds.thresholds("leaf2").splitlines()[0]
        with pytest.raises(ConfigError, match="no switch"):
            cmds.thresholds("s9")


def test_top_telemetry_and_hints(tmp_path: Path) -> None:
    with commands(tmp_path, agent=None) as (cmds, _servers):
        assert "no telemetry yet" in cmds.top()
        cmds.session.start()
        # poll until the loops produced a record of every port (0.05 s interval)
        import time
        deadline = time.monotonic() + 5
        while "no telemetry" in cmds.telemetry("spine1 1") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "queue avg" in cmds.telemetry("spine1 1")
        table = cmds.top()
        assert "spine1:1" in table and "leaf2:3" in table
        assert "p4cc shell leaf1" in cmds.shell("leaf1")
        pkt = get_scale("testbed").pkt_bytes
        assert f"-l {pkt - 42}" in cmds.iperf_hint() and "-u" in cmds.iperf_hint()
        with pytest.raises(ConfigError, match="usage: int"):
            cmds.int_("h1")
        assert "no jobs" in cmds.list_jobs()


def test_int_command_watches_the_flow_on_every_switch(tmp_path: Path) -> None:
    pytest.importorskip("scapy")
    with commands(tmp_path) as (cmds, servers):
        out = cmds.int_("h1 h4")
        assert "INT watch on h1->h4 added" in out and "no report yet" in out
        for srv in servers.values():
            assert srv.update_types("int_watchlist") == ["INSERT"]
        assert "added" not in cmds.int_("h1 h4")  # watched once


def test_workload_and_incast_plans() -> None:
    topo = parse_topo(TOPO)
    plan = plan_workload(["websearch", "0.5", "5"], TOPO, "testbed", "dcqcn")
    assert plan.spec.host_cc == "dcqcn" and plan.spec.duration_s == 5
    assert len(plan.schedule) > 0 and plan.schedule["start_s"].max() < 5
    with pytest.raises(ConfigError, match="unknown workload 'nosuch'"):
        plan_workload(["nosuch", "0.5"], TOPO, "testbed", "dcqcn")
    with pytest.raises(ConfigError, match="usage: workload"):
        plan_workload(["websearch"], TOPO, "testbed", "dcqcn")
    inc = plan_incast(["h1,h2,h3", "h4", "1M"], topo, TOPO, "testbed", "rlcc")
    assert list(inc.schedule["src"]) == ["h1", "h2", "h3"]
    assert set(inc.schedule["dst"]) == {"h4"} and set(inc.schedule["size_bytes"]) == {10**6}
    assert inc.spec.host_cc == "rlcc" and inc.spec.duration_s >= 3 * 8e6 / 10e6
    with pytest.raises(ConfigError, match="none of them the receiver"):
        plan_incast(["h1,h4", "h4"], topo, TOPO, "testbed", "dcqcn")
    with pytest.raises(ConfigError):
        plan_incast(["h1,h9", "h4"], topo, TOPO, "testbed", "dcqcn")
    assert parse_size("2.5M") == 2_500_000 and parse_size("500k") == 500_000
    with pytest.raises(ConfigError):
        parse_size("lots")


# -- p4runtime-shell ------------------------------------------------------------------
def test_shell_election_ids_stay_below_and_above_p4ccs() -> None:
    ours = inspect.signature(P4RuntimeClient.__init__).parameters["election_id"].default
    assert p4shell.BACKUP_ELECTION_ID < ours < p4shell.PRIMARY_ELECTION_ID
    argv = p4shell.shell_argv("127.0.0.1:50051", 3, python=Path(sys.executable))
    assert argv[-6:] == ["--grpc-addr", "127.0.0.1:50051", "--device-id", "3",
                         "--election-id", "0,0"]
    assert "--config" not in argv  # never re-push the pipeline
    assert p4shell.shell_argv("a:1", 1, write=True, python=Path("py"))[-1] == "1,0"


def shell_venv() -> Path:
    try:
        return p4shell.shell_python()
    except Exception as exc:
        pytest.skip(f"no p4runtime-shell venv: {exc}")


def test_p4cc_shell_reads_a_table_without_taking_primary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shell_venv()
    topo = parse_topo("star,hosts=2")
    sw = topo.switches[0]
    js = tmp_path / "p4cc.json"
    js.write_text("{}")
    with FakeP4RuntimeServer(device_id=sw.device_id) as srv:
        ctl = SwitchControl(sw, topo, FIXTURE, js, thrift=FakeThrift(REGS),
                            p4rt=P4RuntimeClient(srv.address, sw.device_id, timeout_s=1))
        ctl.connect()
        ctl.setup()
        state = tmp_path / "cli"
        monkeypatch.setattr(clistate, "pointer_path", lambda: tmp_path / "ptr")
        clistate.write_session(state, topo="star,hosts=2", scale="testbed", agent="hold",
                               cc="dcqcn", interval_s=0.5, pkt_bytes=1000,
                               endpoints={sw.name: (sw.device_id, srv.address, 9090)})
        code = ("n = sum(1 for _ in table_entry['ipv4_lpm'].read())\n"
                "print('ROUTES', n)")
        res = subprocess.run([sys.executable, "-m", "p4cc", "shell", sw.name, "--dir",
                              str(state), "-c", code], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "not the primary client" in res.stdout  # a backup: read-only
        assert len(srv.table_entries("ipv4_lpm")) >= 2
        assert f"ROUTES {len(srv.table_entries('ipv4_lpm'))}" in res.stdout
        ctl.set_ecn(1, EcnConfig(5000, 20000, 0.1))  # p4cc still writes: still primary
        ctl.close()
