"""Host/switch configuration commands, doctor output and CLI errors (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4cc.cli import main
from p4cc.experiment import doctor
from p4cc.topo import hosts
from p4cc.topo.spec import parse_topo


def test_host_commands_star() -> None:
    topo = parse_topo("star,hosts=3")
    cmds = hosts.host_commands(topo, "h1")
    flat = [" ".join(c) for c in cmds]
    assert "ethtool -K h1-eth0 tx off rx off tso off gso off gro off" in flat
    assert "sysctl -q -w net.ipv4.tcp_ecn=1" in flat
    assert "sysctl -q -w net.ipv6.conf.all.disable_ipv6=1" in flat
    assert "ip route replace 10.0.0.0/8 dev h1-eth0" in flat
    assert "ip link set h1-eth0 address 00:00:0a:00:01:01" in flat
    arp = [c for c in cmds if c[:3] == ["ip", "neigh", "replace"]]
    # static ARP for every *other* host, with its real MAC
    assert [(c[3], c[5]) for c in arp] == [("10.0.1.2", "00:00:0a:00:01:02"),
                                           ("10.0.1.3", "00:00:0a:00:01:03")]
    assert all(c[-2:] == ["nud", "permanent"] for c in arp)
    # nothing shapes the veth: BMv2's queue is the bottleneck
    assert not any(c[0] == "tc" for c in cmds)


def test_switch_commands_and_names_leafspine() -> None:
    topo = parse_topo("leafspine,spines=2,leaves=2,hosts=2")
    cmds = hosts.switch_commands(topo, "leaf1")
    devs = {c[3] for c in cmds if c[:3] == ["ip", "link", "set"]}
    assert devs == {"leaf1-eth1", "leaf1-eth2", "leaf1-eth3", "leaf1-eth4"}
    assert ["ip", "link", "set", "leaf1-eth3", "address", "00:aa:00:01:00:03"] in cmds
    assert ["sysctl", "-q", "-w", "net.ipv6.conf.leaf1-eth1.disable_ipv6=1"] in cmds
    assert not any(c[0] == "tc" for c in cmds)
    names = hosts.interface_names(topo)
    assert len(names) == len(set(names)) == 4 + 2 * 4 + 2 * 2
    assert set(hosts.root_interface_names(topo)) < set(names)


def test_doctor_reports_every_tool_and_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    checks = doctor.run_checks()
    names = {c.name for c in checks}
    for want in ("simple_switch_grpc", "simple_switch_CLI", "p4c", "python module mininet",
                 "mnexec", "iperf3", "root", "python modules bm_runtime, sswitch_runtime",
                 "p4cc/data/p4/p4cc.json"):
        assert want in names
    assert all(c.fix for c in checks if not c.ok)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "BMv2 backend:" in out
    for c in checks:
        if not c.ok:
            assert "fix: " + c.fix in out


def test_doctor_missing_bmv2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    missing = {c.name for c in doctor.bmv2_missing()}
    assert "simple_switch_grpc" in missing and "mnexec" in missing
    report = doctor.format_report(doctor.run_checks())
    assert "BMv2 backend: NOT available" in report
    assert "p4lang-bmv2" in report


@pytest.mark.parametrize("topo, words", [
    ("ring,hosts=3", ["unknown topology", "star"]),
    ("star,hosts=1", ["hosts=1", "[2, 64]"]),
    ("star,hosts=x", ["not an integer"]),
    ("star,switches=2", ["no parameter", "hosts"]),
    ("leafspine,spines", ["key=value"]),
])
def test_topo_cli_bad_input(topo: str, words: list[str],
                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", topo]) == 2
    err = capsys.readouterr().err
    assert err.startswith("p4cc: error:")
    for w in words:
        assert w in err


def test_testbed_cli_bad_topology(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["incast", "--topo", "ring", "--backend", "bmv2"]) == 2
    assert "unknown topology" in capsys.readouterr().err


def test_testbed_without_bmv2_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["incast", "--backend", "bmv2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "BMv2 backend is not available" in err and "simple_switch_grpc" in err
    assert "--backend sim" in err


def test_testbed_falls_back_to_the_simulator(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no BMv2 here
    out = tmp_path / "run"
    assert main(["incast", "--duration", "1", "--interval", "0.1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "running the incast on the SIMULATOR instead" in text
    assert "SECN1" in text and "SECN2" in text and "s1:5" in text
    # a spec run: the resolved config and the telemetry are in the run store, per setting
    for name in ("secn1/spec.resolved.yaml", "summary.json", "summary.txt",
                 "secn1/telemetry.csv"):
        assert (out / name).is_file()


def test_default_experiment_without_bmv2_says_so(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`p4cc testbed --backend bmv2` on a machine without BMv2: exit 2, names what is missing."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["testbed", "--backend", "bmv2", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "BMv2 backend is not available" in err and "simple_switch_grpc" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_default_experiment_falls_back_to_the_simulator(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no BMv2 here
    out = tmp_path / "run"
    assert main(["testbed", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "running the default experiment on the SIMULATOR" in text
    assert "report written to" in text
    assert (out / "report" / "report.md").is_file()
    for agent in ("secn1", "secn2"):
        status = out / agent / "status.json"
        assert status.is_file() and '"complete": true' in status.read_text()
