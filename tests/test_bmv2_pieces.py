"""Pieces of the BMv2 backend that need no BMv2: link failures, record queues, the
host-side launcher's parser."""

from __future__ import annotations

import subprocess
from typing import Any

from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.bmv2.hosts import host_parser
from p4cc.experiment.bmv2.links import LinkFailures
from p4cc.experiment.bmv2.records import RecordQueues
from p4cc.experiment.session import AgentAction
from p4cc.topo.spec import parse_topo


def _ev(action: str) -> dict[str, Any]:
    return {"action": action, "a": "leaf1", "a_port": 3, "b": "spine1", "b_port": 1,
            "failure": 0}


def test_link_failure_restores_exactly_what_it_changed() -> None:
    topo = parse_topo("leafspine,spines=2,leaves=2,hosts=1")
    cmds: list[list[str]] = []

    def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        cmds.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    logged: list[str] = []
    links = LinkFailures(topo, logged.append, run)
    links.apply(_ev("up"), 0.5)  # never failed: nothing to undo
    assert cmds == []
    change = links.apply(_ev("down"), 1.0)
    assert change.to_row() == {"t_s": 1.0, "action": "down", "a": "leaf1", "b": "spine1",
                               "failure": 0}
    devs = {c[4] for c in cmds}
    assert devs == {"leaf1-eth3", "spine1-eth1"} and links.down == devs
    assert all(c[:2] in (["tc", "qdisc"], ["tc", "class"]) for c in cmds)
    cmds.clear()
    links.restore_all()
    assert sorted(c[4] for c in cmds) == sorted(devs)
    assert all(c[2] == "del" for c in cmds) and links.down == set()
    links.restore_all()  # idempotent
    assert len(cmds) == 2 and logged == []


class Sink:
    def __init__(self) -> None:
        self.tele: list[PortTelemetry] = []
        self.tables: dict[str, list[Any]] = {}
        self.ints: list[Any] = []

    def telemetry(self, records: Any) -> None:
        self.tele += list(records)

    def table(self, name: str, rows: Any) -> None:
        self.tables.setdefault(name, []).extend(rows)

    def int_reports(self, rows: Any) -> None:
        self.ints += list(rows)


def _rec(t: float) -> PortTelemetry:
    return PortTelemetry("s1", 1, t, 0.1, 0, 0, 0, 0, 0, 0, 0, None, 0, 0, 0)


def test_record_queues_drain_by_type() -> None:
    q = RecordQueues()
    q.telemetry([_rec(0.0), _rec(0.1)])  # the first ended at t0: switches idle
    q.actions([AgentAction(0.0, "s1", 1, 5000, 20000, 0.1)])
    sink = Sink()
    q.drain(sink)  # type: ignore[arg-type]
    assert [r.t_s for r in sink.tele] == [0.1]
    assert sink.tables["agent"] == [{"t_s": 0.0, "switch": "s1", "port": 1,
                                     "kmin_bytes": 5000, "kmax_bytes": 20000, "pmax": 0.1}]
    q.drain(sink)  # type: ignore[arg-type]
    assert len(sink.tele) == 1 and len(sink.tables["agent"]) == 1


def test_record_queues_write_the_cpu_sample_before_t0_but_do_not_keep_it() -> None:
    q = RecordQueues()
    q.switch_cpu([{"t_s": -0.5, "switch": "s1", "rx_pkts": 3, "tx_pkts": 3}])
    q.switch_cpu([{"t_s": 0.02, "switch": "s1", "rx_pkts": 9, "tx_pkts": 4}])
    sink = Sink()
    q.drain(sink)  # type: ignore[arg-type]
    assert [r["t_s"] for r in sink.tables["switch_cpu"]] == [-0.5, 0.02]
    assert [r["t_s"] for r in q.kept_cpu] == [0.02]  # the verdict and budget: from t0


def test_sampler_baseline_is_one_sample_without_the_host_hook() -> None:
    import os

    from p4cc.experiment.bmv2.procmon import SwitchSampler

    written: list[dict[str, Any]] = []
    calls: list[int] = []
    sampler = SwitchSampler({"s1": (os.getpid(), ["p4cc-no-such-if"])}, lambda: -0.5,
                            written.extend)
    sampler.extra = lambda: calls.append(1)
    rows = sampler.baseline()
    assert rows == written and len(rows) == 1 and calls == []
    assert rows[0]["t_s"] == -0.5 and rows[0]["rx_pkts"] == rows[0]["tx_pkts"] == 0
    sampler.sample_once()
    assert len(written) == 2 and calls == [1]


def test_host_launcher_parses_host_commands_without_the_root_cli() -> None:
    import sys

    args = host_parser().parse_args(["host", "send", "--dst", "10.0.0.2", "--size", "1000",
                                     "--cc", "dcqcn"])
    assert args.func.__module__ == "p4cc.hostcc.cli"
    probe = ("import sys; from p4cc.experiment.bmv2.hosts import host_parser; host_parser()"
             ".parse_args(['host', 'recv']); print('p4cc.cli' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert res.stdout.strip() == "False"
