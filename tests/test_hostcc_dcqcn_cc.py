"""Single-flow controllers of p4cc.hostcc.cc (N=1 wrappers over the cores)."""

from __future__ import annotations

import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import cc
from p4cc.hostcc.flow import RateController as FlowRateController
from p4cc.scale import get_scale

PAPER = get_scale("paper")


def test_dcqcn_controller_golden_trace() -> None:
    ctl = cc.make_controller("dcqcn:golden", PAPER, 100e9)
    assert isinstance(ctl, cc.DcqcnController) and isinstance(ctl, cc.RateController)
    assert ctl.rate_bps(0.0) == 100e9
    ctl.on_cnp(0.0)
    for t_us, want in [(4, 50.78), (304, 75.39), (604, 87.69), (904, 93.85), (1804, 99.23)]:
        assert ctl.rate_bps(t_us * 1e-6) / 1e9 == pytest.approx(want, rel=1e-3)
    row = ctl.trace(2e-3)
    assert row["rate_bps"] == pytest.approx(ctl.rate_bps(2e-3)) and row["cnps"] == 1.0
    assert 0 <= row["alpha"] <= 1


def test_dcqcn_controller_tolerates_late_events() -> None:
    ctl = cc.make_controller("dcqcn", get_scale("testbed"))
    ctl.rate_bps(1.0)
    ctl.on_cnp(0.5)  # stamped before the last query: applied at t = 1.0
    ctl.on_rtt_sample(1.0, 2e-3, None)
    ctl.on_nack(1.0)
    ctl.on_bytes_sent(1.0, 1000)
    assert ctl.rate_bps(1.0 + 0.1) < get_scale("testbed").link_rate_bps


def test_default_dcqcn_is_scaled_hpcc_set() -> None:
    sc = get_scale("testbed")
    ctl = cc.make_controller("dcqcn", sc)
    assert isinstance(ctl, cc.DcqcnController)
    p = ctl.params
    assert p.name == "hpcc-ns3" and p.line_rate_bps == sc.link_rate_bps
    assert p.increase_period_s == pytest.approx(300e-6 * sc.time_factor)
    assert cc.make_controller("dcqcn:nvidia", sc, clamp_target=True).params.clamp_target  # type: ignore[attr-defined]


def test_fixed_and_errors() -> None:
    sc = get_scale("testbed")
    assert cc.make_controller("fixed:5M", sc).rate_bps(0) == 5e6
    assert cc.make_controller("fixed:2500000", sc).rate_bps(0) == 2.5e6
    assert cc.make_controller("fixed", sc).rate_bps(0) == sc.link_rate_bps
    for bad in ("fixed:fast", "fixed:-1", "bbr", "dcqcn:nope"):
        with pytest.raises(ConfigError):
            cc.make_controller(bad, sc)
    with pytest.raises(ConfigError, match="override"):
        cc.make_controller("dcqcn", sc, bogus=1)


@pytest.mark.parametrize("name", ["dcqcn", "dcqcn:dcqcn-paper", "rlcc", "rlcc:pi",
                                  "rlcc:pi-lstm", "rlcc:pi-mlp", "rlcc:pi-trees",
                                  "rlcc:pi-catboost", "fixed:1M"])
def test_every_controller_fits_the_transport_protocol(name: str) -> None:
    ctl: FlowRateController = cc.make_controller(name, get_scale("testbed"))
    ctl.on_cnp(0.001)
    ctl.on_rtt_sample(0.002, 3e-3, 4)
    ctl.on_bytes_sent(0.002, 1500)
    ctl.on_nack(0.003)
    assert ctl.rate_bps(0.004) > 0
    assert "rate_bps" in ctl.trace(0.004)
