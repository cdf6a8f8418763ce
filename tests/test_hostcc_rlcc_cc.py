"""RlccController (p4cc.hostcc.cc) over the RL-CC rule (on scalars: p4cc.hostcc.rlcc_one)."""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import cc, rlcc, rlcc_names
from p4cc.hostcc.rlcc_policies import PolicyLoadError, ReferencePolicy
from p4cc.scale import get_scale

SC = get_scale("testbed")


def test_rlcc_controller_raises_when_idle_and_cuts_when_congested() -> None:
    ctl = cc.make_controller("rlcc:pi", SC, initial_rate_frac=0.5)
    assert isinstance(ctl, cc.RlccController)
    r0 = ctl.rate_bps(0.0)
    ctl.on_rtt_sample(0.01, SC.base_rtt_s, None)  # idle: δ = target -> raise
    r1 = ctl.rate_bps(0.01)
    ref = ReferencePolicy()
    assert r1 == pytest.approx(r0 * math.exp(ref.ki * float(ref.squash(np.array(0.064)))))
    base = ctl.params.base_rtt_s
    assert base == pytest.approx(rlcc.norm_rtt_s(SC)) == pytest.approx(8e-3)  # 10 packets
    ctl.on_rtt_sample(0.02, 10 * base, None)  # inflation 10: cut
    assert ctl.rate_bps(0.02) < r1
    row = ctl.trace(0.02)
    assert row["inflation"] == pytest.approx(10.0) and row["decisions"] == 2
    assert row["reward"] == pytest.approx(-row["delta"] ** 2)


def test_decision_interval_and_qdepth_signal() -> None:
    ctl = cc.make_controller("rlcc", SC, signal="qdepth", decision_interval_s=0.01,
                             initial_rate_frac=0.5)
    ctl.on_rtt_sample(0.0, SC.base_rtt_s, 0)
    ctl.on_rtt_sample(0.005, SC.base_rtt_s, 0)  # within the interval: no decision
    assert ctl.trace(0.005)["decisions"] == 1
    ctl.on_rtt_sample(0.011, SC.base_rtt_s, 50)  # 50 packets queued: inflation from INT
    # the decision takes the samples since the last one (0 and 50 packets) as their mean
    # δ: inflation β + mean((inflation − β)⁺)
    w = float(rlcc.qdepth_inflation(50, SC.pkt_bytes, SC.link_rate_bps,
                                    ctl.params.base_rtt_s))
    beta = ctl.params.beta
    want = beta + (max(1.0 - beta, 0.0) + (w - beta)) / 2
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
    ctl = cc.make_controller("rlcc:pi", SC, target=0.5, action_max=1.5)
    assert isinstance(ctl, cc.RlccController) and isinstance(ctl.policy, ReferencePolicy)
    assert ctl.params.target == 0.5 and ctl.params.action_max == 1.5
    r0 = ctl.rate_bps(0.0)
    ctl.on_rtt_sample(0.01, SC.base_rtt_s, None)  # idle: δ = 0.5
    assert ctl.rate_bps(0.01) == pytest.approx(min(r0 * math.exp(0.125 * 0.5),
                                                   SC.link_rate_bps))


def test_nack_is_a_decision_point_on_the_last_sample() -> None:
    """Deep congestion: NAKs make decisions on the last RTT sample, one cut per RTT."""
    ctl = cc.make_controller("rlcc", SC, decision_interval_s=0.004)
    assert isinstance(ctl, cc.RlccController)
    ctl.on_nack(0.0)  # no sample yet: nothing to decide on
    assert ctl.trace(0.0)["decisions"] == 0
    rtt = 0.08  # a full buffer: 80 ms
    ctl.on_rtt_sample(0.1, rtt, None)
    r1 = ctl.rate_bps(0.1)
    assert r1 < SC.link_rate_bps and ctl.samples == 1
    ctl.on_nack(0.15)  # 50 ms after the cut < one RTT: held back
    assert ctl.rate_bps(0.15) == r1
    ctl.on_nack(0.19)  # 90 ms after the cut: cut again, without a new sample
    assert ctl.rate_bps(0.19) < r1 and ctl.samples == 1 and ctl.nacks == 3


def test_default_is_the_trained_mlp_and_pi_is_named() -> None:
    """Plain ``rlcc`` (and ``rlcc:``) is the shipped trained MLP; ``rlcc:pi`` the PI."""
    from p4cc.hostcc.rlcc_policies import MlpPolicy, data_dir

    want = load_mlp = cc.policy_by_name("adpg-mlp-long", rlcc.RlccParams(10e6, 8e-3))
    assert cc.DEFAULT_POLICY == "adpg-mlp-long" and isinstance(load_mlp, MlpPolicy)
    assert (data_dir() / cc.SHIPPED[cc.DEFAULT_POLICY]).is_file()
    obs = np.array([[0.064, 1.0], [-0.5, 1 / 1.2], [0.0, 1.2], [-3.0, 1.0]])
    for name in ("rlcc", "rlcc:"):
        ctl = cc.make_controller(name, SC)
        assert isinstance(ctl, cc.RlccController) and isinstance(ctl.policy, MlpPolicy)
        got, _ = ctl.policy.act(obs, ctl.policy.initial_state(len(obs)))
        np.testing.assert_array_equal(got, want.act(obs, want.initial_state(len(obs)))[0])
    for name in ("rlcc:pi", "rlcc:reference"):
        ctl = cc.make_controller(name, SC)
        assert isinstance(ctl, cc.RlccController) and isinstance(ctl.policy, ReferencePolicy)
        assert ctl.name == "rlcc:pi"


#: What ``rlcc:lstm|mlp|trees|catboost`` loaded before issue 11's renames.
OLD_SHORTCUTS = {"lstm": "rlcc-lstm-ref.npz", "mlp": "rlcc-mlp-ref.npz",
                 "trees": "rlcc-trees-ref.json", "catboost": "rlcc-catboost-ref.json"}


def test_pi_files_are_named_pi_and_old_names_alias_with_a_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """``rlcc:pi-<format>`` loads the file the old ``rlcc:<format>`` did (the PI baseline
    wired into that format, not learned); the old name still resolves to it, with one
    logged warning naming the new name; plain ``rlcc`` stays the trained adpg-mlp-long."""
    monkeypatch.setattr(rlcc_names, "_WARNED", set())
    params = rlcc.RlccParams(10e6, 8e-3)
    obs = np.array([[0.064, 1.0], [-0.5, 1 / 1.2], [0.0, 1.2], [-3.0, 1.0], [0.02, 1.1]])
    # every shortcut says what it is: the PI baseline in a file, or trained (adpg-*)
    assert all(k.startswith(("pi-", "adpg-")) for k in cc.SHIPPED)
    assert {k for k, f in cc.SHIPPED.items() if f.endswith(("-ref.npz", "-ref.json"))} == {
        f"pi-{k}" for k in OLD_SHORTCUTS}
    for old, file in OLD_SHORTCUTS.items():
        new = cc.DEPRECATED_NAMES[old]
        assert new == f"pi-{old}" and cc.SHIPPED[new] == file and old not in cc.SHIPPED
        caplog.clear()
        with caplog.at_level("WARNING", logger="p4cc.hostcc.cc"):
            pol_new = cc.policy_by_name(new, params)
            assert not caplog.records  # the new name is quiet
            pol_old = cc.policy_by_name(old, params)
            ctl = cc.make_controller(f"rlcc:{old}", SC)
            assert cc.policy_name(f"{old}-int8") == f"{new}-int8"  # warned already
        warned = [r.getMessage() for r in caplog.records]
        assert len(warned) == 1 and f"use rlcc:{new}" in warned[0], warned
        assert "not a learned policy" in warned[0]
        assert ctl.name == f"rlcc:{new}" and type(ctl.policy) is type(pol_new)
        for a, b in ((pol_old, pol_new), (ctl.policy, pol_new)):
            np.testing.assert_array_equal(a.act(obs, a.initial_state(len(obs)))[0],
                                          b.act(obs, b.initial_state(len(obs)))[0])
    assert cc.policy_name("") == cc.policy_name("adpg-mlp-long") == "adpg-mlp-long"
    assert cc.policy_name("reference") == "pi" and cc.policy_name("/x/p.npz") is None
    ctl = cc.make_controller("rlcc", SC)
    assert ctl.name == "rlcc:adpg-mlp-long" and cc.SHIPPED[cc.DEFAULT_POLICY] == (
        "rlcc-adpg-mlp-long.npz")
    assert "pi-lstm" in cc.host_cc_kind("rlcc").usage
    assert "|lstm|" not in cc.host_cc_kind("rlcc").usage


@pytest.mark.parametrize("name", ["rlcc", "rlcc:pi"])
def test_testbed_floor_and_decisions_go_on_at_it(name: str) -> None:
    """The default floor is NVIDIA's 1 Mb/s per 25 Gb/s (400 b/s at 10 Mb/s).  A flow cut
    to it keeps deciding once per interval on the probes' RTT samples (the host sender
    probes every 8 ms whatever the rate) and climbs back to the line rate."""
    iv = 2 * SC.base_rtt_s
    # start at the former floor (line/1000), below which the default one lies
    ctl = cc.make_controller(name, SC, decision_interval_s=iv, initial_rate_frac=1e-3)
    assert isinstance(ctl, cc.RlccController)
    assert ctl.params.floor_bps == pytest.approx(SC.rate(1e6)) == pytest.approx(400.0)
    probe, t = 8e-3, 0.0
    while ctl.rate_bps(t) > ctl.params.floor_bps and t < 120.0:  # queue of 50 RTTs
        t += probe
        ctl.on_rtt_sample(t, 50 * ctl.params.base_rtt_s)
    assert ctl.rate_bps(t) == pytest.approx(400.0)
    d0, t0 = ctl.trace(t)["decisions"], t
    rates = []
    while t < t0 + 20.0 and ctl.rate_bps(t) < SC.link_rate_bps:  # an empty network
        t += probe
        ctl.on_rtt_sample(t, ctl.params.base_rtt_s)
        rates.append(ctl.rate_bps(t))
    made = ctl.trace(t)["decisions"] - d0
    assert ctl.rate_bps(t) == SC.link_rate_bps
    assert made == pytest.approx((t - t0) / iv, abs=2)  # one decision per interval
    assert all(b >= a for a, b in itertools.pairwise(rates))


def test_flows_of_one_process_share_a_loaded_policy_and_a_changed_file_reloads(
        tmp_path) -> None:
    """A policy is loaded once per process and shared by the flows (weights only: each
    flow keeps its own recurrent state); a user's file is read again once it changes."""
    from p4cc.hostcc.rlcc_policies import MlpPolicy, save_mlp

    a, b = cc.make_controller("rlcc", SC), cc.make_controller("rlcc", SC)
    assert isinstance(a, cc.RlccController) and isinstance(b, cc.RlccController)
    assert a.policy is b.policy
    a.on_rtt_sample(0.01, 5 * a.params.base_rtt_s)  # one flow's decision moves only it
    assert a.state.decisions[0] == 1 and b.state.decisions[0] == 0
    path = tmp_path / "p.npz"
    layer = [(np.zeros((1, 2)), np.array([0.0]))]
    save_mlp(path, MlpPolicy(layer, window=1, output="exp"))
    one = cc.make_controller(f"rlcc:{path}", SC)
    assert cc.make_controller(f"rlcc:{path}", SC).policy is one.policy  # type: ignore[attr-defined]
    save_mlp(path, MlpPolicy([(np.zeros((1, 2)), np.array([0.1]))], window=1, output="exp"))
    os.utime(path, ns=(1, 1))  # a different modification time whatever the clock
    two = cc.make_controller(f"rlcc:{path}", SC)
    assert two.policy is not one.policy  # type: ignore[attr-defined]
    pol = two.policy  # type: ignore[attr-defined]
    got, _ = pol.act(np.zeros((1, 2)), pol.initial_state(1))
    assert got[0] == pytest.approx(math.exp(0.1))
