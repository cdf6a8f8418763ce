"""RL-CC's INT variant in the simulator: the path-max queue depth travels with each RTT
answer into RlccHook (δ from NVIDIA RL-CC eq. 6), RlccEnv and the ADPG trainer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc, rlcc_rule
from p4cc.hostcc.rlcc_policies import ReferencePolicy
from p4cc.sim.cc import RlccHook
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.sim.envs import RlccEnv
from p4cc.sim.validate import rlcc_fixed_point
from p4cc.topo.spec import parse_topo


def _incast(signal: str) -> tuple[Engine, RlccHook]:
    topo = parse_topo("star,hosts=5", "paper")
    sc = topo.scale
    params = rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc), pkt_bytes=sc.pkt_bytes,
                             signal=signal)  # type: ignore[arg-type]
    hook = RlccHook(params, ReferencePolicy(), rlcc_rule.decision_interval_s(sc))
    sched = pd.DataFrame({"flow_id": range(4), "start_s": 0.0,
                          "src": [f"h{i + 1}" for i in range(4)], "dst": "h5",
                          "size_bytes": 0})
    eng = Engine(topo, sched, SimConfig(cc="rlcc", host_traces=False), cc=hook)
    return eng, hook


def test_int_depth_reaches_the_hook_and_matches_the_rtt_on_one_bottleneck() -> None:
    eng, hook = _incast("qdepth")
    assert hook.uses_int and eng._int and eng.fb_int.shape[0] == eng.Dr
    eng.run(200 * eng.scale.base_rtt_s)  # start-up: the port's queue is deep
    act = eng.active.nonzero()[0]
    q = hook.int_last[act]
    assert np.all(q > 1.0)  # packets queued at the incast port
    # one congested queue on the path: RTT inflation = 1 + queue/(base RTT·line rate)
    infl_q = hook.inflation(eng.rtt_last)[act]
    infl_rtt = eng.rtt_last[act] / hook.params.base_rtt_s
    np.testing.assert_allclose(infl_q, infl_rtt, rtol=1e-6)
    assert np.all(hook.state.decisions[act] > 0)


def test_rtt_signal_takes_no_int() -> None:
    eng, hook = _incast("rtt")
    assert not hook.uses_int and not eng._int and eng.fb_int.shape[0] == 1
    eng.run(50 * eng.scale.base_rtt_s)
    assert np.all(np.isnan(hook.int_last))


def test_int_variant_holds_the_fixed_point() -> None:
    r = rlcc_fixed_point(4, rtts=2000, signal="qdepth")
    assert r["utilization"] > 0.95 and r["jain"] > 0.99 and r["lost_bytes"] == 0.0
    assert abs(r["rtt_inflation"] / r["expected_inflation"] - 1) < 0.05


def test_env_observation_uses_int_depth() -> None:
    env = RlccEnv(n_flows=4, senders=4, episode_steps=3, signal="qdepth")
    env.reset(seed=1)
    assert env.hook is not None and env.hook.uses_int
    for _ in range(3):
        obs, _r, _term, _trunc, info = env.step(np.full(4, 1.2, np.float32))
    assert env.engine is not None
    slots = env._slots()
    q = np.nan_to_num(env.hook.int_last[slots], nan=0.0)
    expect = rlcc.qdepth_inflation(q, env.params.pkt_bytes, env.params.line_rate_bps,
                                   env.params.base_rtt_s)
    np.testing.assert_allclose(info["inflation"], expect)
    assert obs.shape == (4, 2)
    with pytest.raises(ConfigError):
        RlccEnv(signal="ecn")  # type: ignore[arg-type]


def test_adpg_config_signal() -> None:
    pytest.importorskip("torch")
    from p4cc.learn import rlcc_adpg

    cfg = rlcc_adpg.config_from(signal="qdepth", scenarios=(2,), copies=1, arch="mlp")
    ep = rlcc_adpg.Episode(cfg, ReferencePolicy(), np.random.default_rng(0))
    assert ep.hook.uses_int and ep.engine._int
    _seg, figs = ep.rollout(64)
    assert figs["util"] > 0
    with pytest.raises(ConfigError, match="qdepth"):
        rlcc_adpg.signal_of(rlcc_adpg.config_from(signal="int"))
