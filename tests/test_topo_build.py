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
