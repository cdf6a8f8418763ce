"""Fabric start-up checks that need no tools: each failure names its cause and fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from p4cc.errors import ConfigError, P4ccError, SwitchError, ToolMissingError
from p4cc.topo import build
from p4cc.topo.build import Fabric, FabricOptions, artifacts_missing, preflight
from p4cc.topo.spec import parse_topo


def test_missing_tool_or_root_is_reported_before_anything_is_created(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    fab = Fabric(parse_topo("star,hosts=3"))
    with pytest.raises(P4ccError) as err:
        fab.start()
    if os.geteuid() == 0:
        assert isinstance(err.value, ToolMissingError)
        assert "simple_switch_grpc" in str(err.value)
    else:
        assert isinstance(err.value, SwitchError) and "root" in str(err.value)
    assert fab.net is None and fab.leftovers() == []
    fab.stop()
    fab.stop()


def test_missing_artifacts_named(tmp_path: Path) -> None:
    opts = FabricOptions(p4_json=tmp_path / "p4cc.json", p4info=tmp_path / "x.txtpb")
    assert artifacts_missing(opts) == [tmp_path / "p4cc.json", tmp_path / "x.txtpb"]


def test_artifact_and_interface_checks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # pretend every tool is there, to reach the later checks
    monkeypatch.setattr(build.os, "geteuid", lambda: 0)
    monkeypatch.setattr(build, "find_binary", lambda *a: "/bin/true")
    monkeypatch.setattr(build, "mininet_classes", lambda: (None, None, None, None))
    monkeypatch.setattr(build.shutil, "which", lambda name: "/bin/" + name)
    topo = parse_topo("star,hosts=2")
    opts = FabricOptions(p4_json=tmp_path / "p4cc.json", p4info=tmp_path / "p.txtpb")
    with pytest.raises(ToolMissingError, match="make p4"):
        preflight(topo, opts)
    (tmp_path / "p4cc.json").write_text("{}")
    (tmp_path / "p.txtpb").write_text("")
    monkeypatch.setattr(build, "interface_exists", lambda name: name == "s1-eth2")
    with pytest.raises(SwitchError, match=r"s1-eth2 already exist.*ip link del s1-eth2"):
        preflight(topo, opts)
    monkeypatch.setattr(build, "interface_exists", lambda name: False)
    preflight(topo, opts)


def test_empty_topology_rejected() -> None:
    topo = parse_topo("star,hosts=2")
    empty = type(topo)(topo.name, topo.params, topo.scale, (), topo.switches, ())
    with pytest.raises(ConfigError, match="at least one host"):
        preflight(empty, FabricOptions())


FAKE_SWITCH = '''#!/usr/bin/env python3
# listens on its control ports but speaks no Thrift: like a BMv2 built without it
import socket, sys
a = sys.argv[1:]
if "--help" in a:
    print("--thrift-port --device-id --no-p4 --priority-queues")
    sys.exit(0)
ports = [int(a[a.index("--thrift-port") + 1]),
         int(a[a.index("--grpc-server-addr") + 1].rsplit(":", 1)[1])]
socks = []
for p in ports:
    s = socket.socket()
    s.bind(("127.0.0.1", p))
    s.listen()
    socks.append(s)
print("fake switch up", flush=True)
while True:
    c, _ = socks[0].accept()
    c.close()
'''


@pytest.mark.mininet
@pytest.mark.root
def test_mininet_fabric_with_a_bad_switch_tears_down(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    import importlib.util
    import shutil
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, veth pairs)")
    if importlib.util.find_spec("mininet") is None or shutil.which("mnexec") is None:
        pytest.skip("Mininet not installed (apt-get install mininet)")
    if shutil.which("ethtool") is None:
        pytest.skip("ethtool not installed")
    topo = parse_topo("star,hosts=2")
    if any(build.interface_exists(i) for i in ("s1-eth1", "s1-eth2")):
        pytest.skip("another fabric uses s1-eth* right now")
    fake_dir = tmp_path / "bin"
    fake_dir.mkdir()
    fake = fake_dir / "simple_switch_grpc"
    fake.write_text(FAKE_SWITCH)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_dir}:{os.environ['PATH']}")
    from p4cc.topo import bmv2

    bmv2.binary_options.cache_clear()
    fab = Fabric(topo, FabricOptions(check_artifacts=False, auto_ports=True,
                                     start_timeout_s=2, out_dir=tmp_path / "out"))
    with pytest.raises(SwitchError, match="Thrift service does not answer") as err:
        fab.start()
    assert "fake switch up" in str(err.value)  # the switch's own output is quoted
    assert fab.leftovers() == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "s1-eth" not in links and "h1-eth" not in links
    bmv2.binary_options.cache_clear()
