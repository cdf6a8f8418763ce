"""Pieces of the interactive testbed that need no root: the port view (rich), the CLI's
published state (session.json, telemetry.csv tail) and the host-namespace sweep on a
fake /proc."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment import clistate, hostns
from p4cc.experiment.tui import port_table, render_text

ECN = EcnConfig(5000, 20000, 0.1)


def rec(port: int, t: float = 1.0, q: float = 5000.0, drops: int = 0,
        ecn: EcnConfig | None = ECN) -> PortTelemetry:
    return PortTelemetry("s1", port, t, 0.5, q, 2 * q, 8e6, 1e6, 1000, 125, drops, ecn,
                         3, 4, 1, 0.002, 0.8)


# -- the view -----------------------------------------------------------------------
def test_port_table_renders_every_port_with_its_numbers() -> None:
    text = render_text([rec(1), rec(2, q=0, drops=7, ecn=None), rec(1, t=1.5, q=9000)],
                       buffer_bytes=100_000, pkt_bytes=1000)
    lines = [ln for ln in text.splitlines() if "s1:" in ln]
    assert [ln.split()[1] for ln in lines] == ["s1:1", "s1:2"]
    assert "9,000" in lines[0] and "(9.0p)" in lines[0]  # the newest record of s1:1
    assert "5000/20000/0.1" in lines[0] and "12.5" in lines[0]  # ECN, marked %
    assert "off" in lines[1] and " 7 " in lines[1]  # marking off, drops
    assert "no telemetry yet" in render_text([])
    assert port_table([rec(1)]).row_count == 1


# -- published state ------------------------------------------------------------------
def test_telemetry_csv_tail_reads_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.csv"
    sink = clistate.TelemetryCsv(path)
    tail = clistate.TelemetryTail(path)
    assert tail.poll() == []
    sink([rec(1), rec(2, ecn=None)])
    got = tail.poll()
    assert got == [rec(1), rec(2, ecn=None)]
    with path.open("a") as fh:
        fh.write("s1,3,2.0")  # a line being written
    assert tail.poll() == []
    with path.open("a") as fh:
        fh.write("\n")
    sink([rec(1, t=2.0)])
    assert [r.t_s for r in tail.poll()] == [2.0]  # the damaged line skipped
    assert tail.latest[("s1", 1)].t_s == 2.0
    sink.close()
    sink([rec(1)])  # after close: ignored, no error


def test_session_state_found_through_pointer(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clistate, "pointer_path", lambda: tmp_path / "ptr" / "current")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="no running `p4cc cli`"):
        clistate.find_session()
    d = tmp_path / "runs" / "cli" / "x"
    s = clistate.write_session(d, topo="star,hosts=3", scale="testbed", agent="secn1",
                               cc="dcqcn", interval_s=0.5, pkt_bytes=1000,
                               endpoints={"s1": (1, "127.0.0.1:50051", 9091)})
    assert clistate.find_session() == s and s.running()
    assert s.endpoint("s1") == (1, "127.0.0.1:50051")
    with pytest.raises(ConfigError, match="switches are"):
        s.endpoint("s9")
    doc = (d / "session.json").read_text().replace(f'"pid": {os.getpid()}', '"pid": 999999999')
    (d / "session.json").write_text(doc)
    with pytest.raises(ConfigError):  # its CLI is gone
        clistate.find_session()
    assert clistate.find_session(d).pid == 999999999  # given explicitly: read anyway


# -- host namespaces ------------------------------------------------------------------
class FakeProc:
    """/proc with ns/net links and stat files; signals 'kill' a process unless it
    ignores SIGTERM."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sent: list[tuple[int, int]] = []
        self.ignores_term: set[int] = set()

    def add(self, pid: int, ns: str, state: str = "S") -> None:
        d = self.root / str(pid)
        (d / "ns").mkdir(parents=True)
        (d / "ns" / "net").symlink_to(f"net:[{ns}]")
        (d / "stat").write_text(f"{pid} (some (odd) name) {state} 1 2 3\n")

    def send(self, pid: int, sig: int) -> None:
        self.sent.append((pid, sig))
        if sig == signal.SIGKILL or pid not in self.ignores_term:
            (self.root / str(pid) / "stat").write_text(f"{pid} (x) Z 1\n")


def test_sweep_ends_only_processes_in_host_namespaces(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.add(1, "root")
    proc.add(os.getpid(), "root")
    proc.add(100, "h1")  # h1's shell
    proc.add(200, "h2")  # h2's shell
    proc.add(300, "root")  # a host that is not namespaced: never swept
    proc.add(101, "h1")  # iperf3 -s -D in h1
    proc.add(102, "h1")  # ignores SIGTERM
    proc.add(201, "h2")
    proc.add(202, "h2", state="Z")  # already exited
    proc.add(500, "root")  # an unrelated process
    proc.add(600, "other")  # another fabric's host
    proc.ignores_term.add(102)
    shells = {"h1": 100, "h2": 200, "h3": 300}
    assert hostns.host_namespaces(shells, tmp_path) == {"net:[h1]": "h1", "net:[h2]": "h2"}
    assert hostns.processes_in({"net:[h1]": "h1", "net:[h2]": "h2"}, tmp_path,
                               exclude={100, 200}) == {101: "h1", 102: "h1", 201: "h2"}
    result = hostns.sweep(shells, tmp_path, grace_s=0.2, send=proc.send)
    assert sorted(result.terminated) == [101, 201] and result.killed == (102,)
    assert sorted(proc.sent) == sorted([(101, signal.SIGTERM), (102, signal.SIGTERM),
                                        (102, signal.SIGKILL), (201, signal.SIGTERM)])
    assert "3 process(es)" in result.describe()
    assert hostns.sweep(shells, tmp_path, send=proc.send).describe() == \
        "no processes left in the hosts"


def test_pid_reused_in_another_namespace_is_left_alone(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.add(1, "root")
    proc.add(101, "root")  # was in h1 when found; now an unrelated process
    res = hostns.stop_pids({101: "h1"}, {"net:[h1]": "h1"}, tmp_path, 0.1, proc.send)
    assert proc.sent == [] and res.killed == ()
