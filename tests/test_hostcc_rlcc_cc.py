"""RlccController (p4cc.hostcc.cc) over the vectorized RL-CC core."""

from __future__ import annotations

import math

import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import cc, rlcc
from p4cc.hostcc.rlcc_policies import PolicyLoadError, ReferencePolicy
from p4cc.scale import get_scale

SC = get_scale("testbed")


def test_rlcc_controller_raises_when_idle_and_cuts_when_congested() -> None:
    ctl = cc.make_controller("rlcc", SC, initial_rate_frac=0.5)
    assert isinstance(ctl, cc.RlccController)
    r0 = ctl.rate_bps(0.0)
    ctl.on_rtt_sample(0.01, SC.base_rtt_s, None)  # idle: δ = target -> raise
    r1 = ctl.rate_bps(0.01)
    assert r1 == pytest.approx(r0 * math.exp(0.125 * 0.064))
    ctl.on_rtt_sample(0.02, 10 * SC.base_rtt_s, None)  # inflation 10: cut by the bound
    assert ctl.rate_bps(0.02) == pytest.approx(r1 / 1.2)
    row = ctl.trace(0.02)
    assert row["inflation"] == pytest.approx(10.0) and row["decisions"] == 2
    assert row["reward"] == pytest.approx(-row["delta"] ** 2)


def test_decision_interval_and_qdepth_signal() -> None:
    ctl = cc.make_controller("rlcc", SC, signal="qdepth", decision_interval_s=0.01,
                             initial_rate_frac=0.5)
    ctl.on_rtt_sample(0.0, SC.base_rtt_s, 0)
    ctl.on_rtt_sample(0.005, SC.base_rtt_s, 0)  # within the interval: ignored
    assert ctl.trace(0.005)["decisions"] == 1
    ctl.on_rtt_sample(0.011, SC.base_rtt_s, 50)  # 50 packets queued: inflation from INT
    want = rlcc.qdepth_inflation(50, SC.pkt_bytes, SC.link_rate_bps, SC.base_rtt_s)
    assert ctl.trace(0.011)["inflation"] == pytest.approx(float(want))


def test_direct_construction_and_errors() -> None:
    ctl = cc.RlccController(ReferencePolicy(), base_rtt_s=1e-3, line_rate_bps=20e6)
    assert ctl.params.line_rate_bps == 20e6 and ctl.rate_bps(0) == 20e6
    with pytest.raises(ConfigError):
        cc.RlccController(ReferencePolicy())
    with pytest.raises(ConfigError, match="bad RL-CC option"):
        cc.make_controller("rlcc", SC, bogus=1)
    with pytest.raises(PolicyLoadError, match="does not exist"):
        cc.make_controller("rlcc:/nonexistent/policy.npz", SC)


def test_reference_policy_follows_target_option() -> None:
    """The target and bounds enter through δ and the clip, not the policy's gains."""
    ctl = cc.make_controller("rlcc", SC, target=0.5, action_max=1.5)
    assert isinstance(ctl, cc.RlccController) and isinstance(ctl.policy, ReferencePolicy)
    assert ctl.params.target == 0.5 and ctl.params.action_max == 1.5
    r0 = ctl.rate_bps(0.0)
    ctl.on_rtt_sample(0.01, SC.base_rtt_s, None)  # idle: δ = 0.5
    assert ctl.rate_bps(0.01) == pytest.approx(min(r0 * math.exp(0.125 * 0.5),
                                                   SC.link_rate_bps))
