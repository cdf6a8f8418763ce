"""``p4cc incast`` as a spec run: the spec it builds, and the simulator run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4cc.cli import main
from p4cc.experiment.incast import TestbedConfig, incast_plan, incast_spec
from p4cc.experiment.schedule import build_schedule
from p4cc.scale import get_scale
from p4cc.topo.spec import parse_topo


def test_incast_spec_overloads_the_bottleneck_with_fixed_rate_senders() -> None:
    cfg = TestbedConfig(topo="star,hosts=5", settings=("SECN1", "SECN2"), duration_s=4,
                        interval_s=0.5, load=1.5)
    spec = incast_spec(cfg, "sim")
    topo = parse_topo("star,hosts=5", get_scale("testbed"))
    rx, senders, rate, _ = incast_plan(topo, topo.scale, 1.5)
    assert spec.agents == ("secn1", "secn2") and spec.backend == "sim"
    kind, _, arg = spec.host_cc.partition(":")
    assert kind == "fixed"
    assert float(arg) == pytest.approx(rate, rel=1e-5)
    assert rate * len(senders) == pytest.approx(1.5 * topo.scale.link_rate_bps)
    schedule, events = build_schedule(spec, spec.seeds[0], topo)
    assert len(events) == 0
    assert sorted(schedule["src"]) == senders and set(schedule["dst"]) == {rx}
    assert (schedule["start_s"] == 0).all()
    # every flow outlasts the run even at the full link rate
    assert (schedule["size_bytes"] * 8 > topo.scale.link_rate_bps * cfg.duration_s).all()
    assert incast_spec(TestbedConfig(traffic="dcqcn")).host_cc == "dcqcn"


def test_incast_on_the_simulator_end_to_end(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "incast"
    assert main(["incast", "--backend", "sim", "--topo", "star,hosts=3", "--duration", "1",
                 "--interval", "0.1", "--settings", "SECN1,SECN2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "# SECN1: Kmin=" in text and "# SECN2: Kmin=" in text
    for variant in ("secn1", "secn2"):
        status = json.loads((out / variant / "status.json").read_text())
        assert status["complete"]
        assert (out / variant / "versions.json").is_file()
    assert not (out / "config.json").exists()  # the run store keeps config and versions
    rows = json.loads((out / "summary.json").read_text())
    scale = get_scale("testbed")
    bottleneck = [r for r in rows if (r["switch"], r["port"]) == ("s1", 3)]
    assert [r["setting"] for r in bottleneck] == ["SECN1", "SECN2"]
    for r in bottleneck:  # 1.5 x the link rate offered: the port runs full and drops
        assert r["tx_mbps"] == pytest.approx(scale.link_rate_bps / 1e6, rel=0.05)
        assert r["drops_pkts"] > 0 and r["marked_frac"] > 0
