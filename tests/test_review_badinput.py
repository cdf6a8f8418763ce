"""Bad input found in review: each gives a clear error naming the cause (no root needed)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from p4cc.cli import main
from p4cc.errors import ConfigError, P4ccError
from p4cc.experiment.spec import parse_spec
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.pacing import HtbPacer, PacerConfig
from p4cc.topo import bmv2
from p4cc.topo.bmv2 import Bmv2Process
from p4cc.topo.build import BMV2_MAX_PORT, FabricOptions, check_ports, preflight
from p4cc.topo.spec import parse_topo
from p4cc.traffic import workloads as wl

SPEC = {"name": "t", "topology": "star,hosts=3", "duration_s": 1,
        "workloads": [{"type": "incast", "load": 0.5}]}


def test_one_host_topology_is_rejected_before_generation() -> None:
    # used to validate, then loop forever in the incast generator (no sender, gap 0)
    doc = {**SPEC, "topology": "leafspine,leaves=1,hosts=1"}
    with pytest.raises(ConfigError, match=r"^topology: .*has 1 host; traffic needs at least"):
        parse_spec(doc)


def test_incast_without_sender_raises_instead_of_looping() -> None:
    rng = np.random.default_rng(1)
    with pytest.raises(ConfigError, match="no sender"):
        wl.incast(rng, ["h1"], senders=(2, 4), flows_per_sender=(1, 1), load=0.5,
                  rate_bps=1e7, t0=0.0, t1=1.0, tag="x")
    with pytest.raises(ConfigError, match="no sender"):
        wl.incast(rng, ["h1", "h2"], senders=(1, 1), flows_per_sender=(0, 0), load=0.5,
                  rate_bps=1e7, t0=0.0, t1=1.0, tag="x")


@pytest.mark.parametrize("gap", [0.0, -1.0, float("inf"), float("nan")])
def test_poisson_arrivals_need_a_positive_gap(gap: float) -> None:
    with pytest.raises(ConfigError, match="positive mean gap"):
        wl.poisson_arrivals(np.random.default_rng(0), gap, 0.0, 1.0)


def test_partition_aggregate_zero_period_raises() -> None:
    with pytest.raises(ConfigError, match="period_s must be > 0"):
        wl.partition_aggregate(np.random.default_rng(0), ["h1", "h2"], aggregator="h1",
                               workers=["h2"], response_bytes=1000, t0=0.0, t1=1.0,
                               tag="pa", period_s=0.0)


def test_infinite_time_string_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"^duration_s: '1e999s' is not a finite time"):
        parse_spec({**SPEC, "duration_s": "1e999s"})


def test_switch_with_more_ports_than_the_p4_arrays_is_refused_before_root() -> None:
    topo = parse_topo("star,hosts=64")  # port 64: outside the 64-entry per-port arrays
    with pytest.raises(ConfigError, match=rf"s1 .*needs 64 ports.*1\.\.{BMV2_MAX_PORT}"):
        check_ports(topo)
    with pytest.raises(ConfigError, match="needs 64 ports"):
        preflight(topo, FabricOptions())
    check_ports(parse_topo("star,hosts=63"))


def test_flow_port_out_of_range() -> None:
    for port in (0, 70000, -1):
        with pytest.raises(ConfigError, match=r"port must be in 1\.\.65535"):
            FlowSpec("10.0.1.2", 1000, port=port)


@pytest.mark.parametrize("rows", [
    [{"size": 1000}],  # no dst
    [{"dst": "10.0.1.2", "size": "big"}],
    ["10.0.1.2"],
    {"dst": "10.0.1.2", "size": 1000},  # not a list
    [{"dst": "10.0.1.2", "size": 1000, "port": 99999}],
])
def test_host_send_bad_schedule_exits_2_with_the_row(
        rows: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sched = tmp_path / "s.json"
    sched.write_text(json.dumps(rows))
    assert main(["host", "send", "--schedule", str(sched)]) == 2
    err = capsys.readouterr().err
    assert f"--schedule {sched}" in err and "Traceback" not in err


def test_pacer_refuses_more_classes_than_a_tc_minor_holds() -> None:
    pacer = HtbPacer(PacerConfig(dev="p4rv-none"))
    pacer._next_minor = 0x10000  # as after 65280 flows
    with pytest.raises(P4ccError, match="more than 65280 paced flows"):
        pacer._add_flow(40000, 1e6)


def test_interrupted_start_stops_the_switch(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "simple_switch_grpc"
    fake.write_text('#!/bin/sh\ncase "$1" in --help) echo "--thrift-port --priority-queues"; '
                    'exit 0;; esac\n'
                    "exec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    bmv2.binary_options.cache_clear()
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, binary=str(fake), out_dir=tmp_path / "out")

    def interrupted(self: Bmv2Process) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Bmv2Process, "_wait_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        p.start()
    assert p.pid is not None and not p.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(p.pid, 0)


@pytest.mark.parametrize("window", [np.array([1, 2]), "x"])
def test_policy_with_a_bad_window_raises_policy_load_error(window: Any,
                                                           tmp_path: Path) -> None:
    from p4cc.hostcc.rlcc_policies import PolicyLoadError, load_policy

    path = tmp_path / "bad.npz"
    np.savez(path, kind="mlp", window=window, w0=np.zeros((3, 4)), b0=np.zeros(3))
    with pytest.raises(PolicyLoadError, match=rf"policy file {path} \(mlp\)"):
        load_policy(path)


@pytest.mark.parametrize(("field", "value"), [("pkt_bytes", "1000"), ("pkt_bytes", 1000.5),
                                              ("buffer_bytes", None)])
def test_scale_sizes_must_be_integers(field: str, value: object) -> None:
    from p4cc.scale import Scale

    with pytest.raises(ConfigError, match=rf"scale\.{field} must be an integer"):
        Scale(**{field: value})  # type: ignore[arg-type]
    assert Scale(pkt_bytes=np.int64(1500)).pkt_bytes == 1500  # type: ignore[arg-type]


@pytest.mark.parametrize("argv", [["--duration", "-1"], ["--settings", "SECN9"],
                                  ["--topo", "ring"]])
def test_testbed_bad_options_fail_before_asking_for_root(
        argv: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from p4cc.experiment import cli as topo_cli

    calls: list[str] = []
    monkeypatch.setattr(topo_cli, "_reexec_as_root", calls.append)
    assert main(["incast", "--backend", "bmv2", *argv]) == 2
    assert calls == [] and "p4cc: error:" in capsys.readouterr().err


def test_leftovers_ignore_interfaces_another_fabric_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.topo import build

    monkeypatch.setattr(build, "interface_exists", lambda name: True)  # s1-eth* exist
    fab = build.Fabric(parse_topo("star,hosts=3"))
    assert fab.leftovers() == []  # this fabric made none of them
    fab._created.add("s1-eth2")
    assert fab.leftovers() == ["s1-eth2"]


def test_sim_testbed_saves_versions_with_commit_and_the_sim_seed(tmp_path: Path) -> None:
    import yaml

    from p4cc.experiment.incast import TestbedConfig, run_testbed

    # the incast is a spec run: the run store keeps versions, seed and host CC per run
    cfg = TestbedConfig(topo="star,hosts=3", backend="sim", settings=("SECN1",),
                        duration_s=0.5, interval_s=0.1, out_dir=tmp_path, traffic="dcqcn")
    run_testbed(cfg)
    run = tmp_path / "secn1"
    saved = {"versions": json.loads((run / "versions.json").read_text())}
    if (Path(__file__).resolve().parents[1] / ".git").exists():
        assert len(saved["versions"]["git_commit"]) == 40
    assert {"python", "numpy", "pandas"} <= set(saved["versions"])
    resolved = yaml.safe_load((run / "spec.resolved.yaml").read_text())
    sim = {"seed": json.loads((run / "seeds.json").read_text())["seed"],
           "cc": resolved["host_cc"]}
    assert sim["seed"] == 0 and sim["cc"] == "dcqcn"


def test_iperf3_rate_leaves_room_for_headers() -> None:
    from p4cc.experiment.incast import HEADERS_BYTES, incast_plan, iperf3_app_rate
    from p4cc.scale import get_scale

    scale = get_scale("testbed")
    _rx, senders, wire_bps, payload = incast_plan(parse_topo("star,hosts=5"), scale, 1.5)
    app = iperf3_app_rate(wire_bps, payload)
    # frames on the wire (payload + headers per datagram) add up to 1.5 x the link rate
    frames_bps = app / (8 * payload) * (payload + HEADERS_BYTES) * 8
    assert frames_bps * len(senders) == pytest.approx(1.5 * scale.link_rate_bps)


def test_missing_thrift_module_is_named_at_once_and_the_switch_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.errors import ToolMissingError

    fake = tmp_path / "simple_switch_grpc"
    fake.write_text('#!/bin/sh\ncase "$1" in --help) echo "--thrift-port --priority-queues"; '
                    'exit 0;; esac\n'
                    "exec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    bmv2.binary_options.cache_clear()

    def no_thrift(port: int) -> int:
        raise ModuleNotFoundError("No module named 'thrift'")

    monkeypatch.setattr(bmv2, "_owns_listener", lambda pid, port: True)
    monkeypatch.setattr(bmv2, "thrift_ping", no_thrift)
    p = Bmv2Process("s1", 1, {1: "s1-eth1"}, binary=str(fake), start_timeout_s=20,
                    out_dir=tmp_path / "out")
    with pytest.raises(ToolMissingError, match="python3-thrift"):
        p.start()
    assert p.pid is not None and not p.is_alive()


def test_stuck_pacer_thread_raises_p4cc_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from p4cc.hostcc import pacing

    monkeypatch.setattr(pacing, "CALL_TIMEOUT_S", 0.05)
    hold = threading.Event()
    pacer = HtbPacer(PacerConfig(dev="p4rv-none"))
    pacer._thread = threading.Thread(target=hold.wait, daemon=True)  # never serves commands
    pacer._thread.start()
    try:
        with pytest.raises(P4ccError, match="did not answer"):
            pacer.add_flow(40000, 1e6)
    finally:
        hold.set()


def test_versions_survive_a_hanging_git(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from p4cc.experiment import store

    real_run = subprocess.run

    def run(argv: list[str], *a: Any, **kw: Any) -> Any:
        if argv[0] == "git":
            raise subprocess.TimeoutExpired(argv, 10)
        return real_run(argv, *a, **kw)

    monkeypatch.setattr(store.subprocess, "run", run)
    v = store.software_versions()
    assert v["git_commit"] is None and v["python"]


@pytest.mark.parametrize(("host_cc", "pattern"), [
    ("dcqcn:nope", r"^host_cc: unknown DCQCN parameter set 'nope'"),
    ("rlcc:/nonexistent/policy.npz", r"^host_cc: policy file /nonexistent/policy.npz does "
                                     r"not exist"),
])
def test_host_cc_variant_is_checked_before_anything_starts(host_cc: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_spec({**SPEC, "host_cc": host_cc})
    parse_spec({**SPEC, "host_cc": "rlcc:pi-lstm"})  # a shipped policy name


def test_iperf3_servers_not_listening_is_a_switch_error_not_a_missing_tool() -> None:
    from p4cc.errors import SwitchError, ToolMissingError
    from p4cc.experiment.bmv2.hosts import wait_listening

    class Host:
        def cmd(self, line: str) -> str:
            return "State Recv-Q Send-Q Local Address:Port\n"  # nothing listens

    # no fabric or iperf3 needed for this check
    with pytest.raises(SwitchError, match=r"h5 did not listen on ports 5201\.\.5202") as err:
        wait_listening(Host(), "h5", [5201, 5202], timeout_s=0.1)
    assert not isinstance(err.value, ToolMissingError)
