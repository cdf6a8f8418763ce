"""Testbed library pieces that need no root: plans, summaries, CLI command parsing."""

from __future__ import annotations

import pytest

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment.incast import TestbedConfig, format_summary, incast_plan, summarize
from p4cc.experiment.mncli import format_telemetry, parse_ecn_args, parse_telemetry_args
from p4cc.topo.spec import parse_topo


def _rec(port: int, t: float, q: float, tx: int, marked: int, drops: int = 0) -> PortTelemetry:
    return PortTelemetry("s1", port, t, 0.5, q, 2 * q, tx * 8000 / 0.5, marked * 8000 / 0.5,
                         tx, marked, drops, EcnConfig(5000, 20000, 0.1), 4, 4, 0)


def test_incast_plan_overloads_the_bottleneck() -> None:
    topo = parse_topo("star,hosts=5")
    rx, senders, rate, payload = incast_plan(topo, topo.scale, 1.5)
    assert rx == "h5" and senders == ["h1", "h2", "h3", "h4"]
    assert rate * len(senders) == pytest.approx(1.5 * topo.scale.link_rate_bps)
    assert payload + 42 == topo.scale.pkt_bytes


def test_summarize_averages_and_skips_idle_ports() -> None:
    recs = [_rec(5, 1.0, 10_000, 600, 60, 3), _rec(5, 1.5, 20_000, 600, 120, 1),
            _rec(1, 1.0, 0, 0, 0)]
    rows = summarize("SECN1", recs)
    assert len(rows) == 1
    r = rows[0]
    assert (r.switch, r.port, r.intervals) == ("s1", 5, 2)
    assert r.qlen_avg_bytes == 15_000 and r.qlen_max_bytes == 40_000
    assert r.marked_frac == pytest.approx(0.15) and r.drops_pkts == 4
    text = format_summary(rows, {"SECN1": EcnConfig(5000, 20000, 0.1)})
    assert "# SECN1: Kmin=5000B" in text and "s1:5" in text


def test_testbed_config_validation() -> None:
    TestbedConfig().validate()
    with pytest.raises(ConfigError, match="backend"):
        TestbedConfig(backend="ns3").validate()
    with pytest.raises(ConfigError, match="interval"):
        TestbedConfig(interval_s=20, duration_s=10).validate()
    with pytest.raises(ConfigError, match="setting"):
        TestbedConfig(settings=()).validate()


def test_cli_command_parsing() -> None:
    assert parse_telemetry_args("s1 5") == ("s1", 5)
    sw, port, cfg = parse_ecn_args("s1 5 5000 20000 0.1")
    assert (sw, port, cfg) == ("s1", 5, EcnConfig(5000, 20000, 0.1))
    for bad, word in [("s1", "usage"), ("s1 x", "integer"), ("s1 5 5k 20000 0.1", "bytes"),
                      ("s1 5 5000 20000 lots", "pmax")]:
        with pytest.raises(ConfigError, match=word):
            (parse_ecn_args if len(bad.split()) > 2 else parse_telemetry_args)(bad)
    with pytest.raises(ConfigError):  # validation happens before anything is written
        parse_ecn_args("s1 5 30000 20000 0.1")[2].validate(100_000)
    assert "no telemetry yet" in format_telemetry(None, "s1", 5)
    assert "drops 3" in format_telemetry(_rec(5, 1.0, 10_000, 600, 60, 3), "s1", 5)
