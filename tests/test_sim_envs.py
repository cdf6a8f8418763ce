"""Gymnasium environments on the simulator: env checker, spaces, rewards."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from p4cc.controlplane.ecn import EcnConfig
from p4cc.hostcc import rlcc
from p4cc.sim.envs import KMIN_GRID, PMAX_GRID, EcnTuningEnv, RlccEnv


@pytest.mark.parametrize("variant", ["acc", "pet"])
def test_ecn_env_passes_checker(variant: str) -> None:
    env = EcnTuningEnv(topo="leafspine,spines=2,leaves=2,hosts=2", intervals=3,
                       variant=variant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (env.n_agents, 3 * (8 if variant == "pet" else 6))
    assert env.action_space.shape == (env.n_agents, 3)
    obs, r, _term, _trunc, info = env.step(env.action_space.sample())
    assert info["agent_rewards"].shape == (env.n_agents,)
    assert r == pytest.approx(info["agent_rewards"].mean())
    assert np.all((0 <= info["agent_rewards"]) & (info["agent_rewards"] <= 1))


def test_ecn_env_action_grid_and_reward() -> None:
    env = EcnTuningEnv(topo="star,hosts=3", scale="paper", intervals=2)
    sc = env.scale
    cfg = env.setting(np.array([0, 9, len(PMAX_GRID) - 1]))
    assert isinstance(cfg, EcnConfig)
    assert cfg.kmax_bytes <= sc.buffer_bytes and cfg.kmin_bytes <= cfg.kmax_bytes
    assert cfg.pmax == pytest.approx(1.0)
    assert env.setting(np.array([3, 0, 0])).kmin_bytes == round(sc.bytes(KMIN_GRID[0]))
    env.reset(seed=0)
    recs = env._last
    r = env.rewards(recs)
    # an idle or lightly used queue: D(L) = 1 when L <= E(0); reward = ω1·util + ω2·D
    by_key = {rec.key: rec for rec in recs}
    for i, key in enumerate(env.keys):
        rec = by_key[key]
        if rec.qlen_avg_bytes == 0:
            assert r[i] == pytest.approx(0.3 * rec.utilization + 0.7)


def test_rlcc_env_passes_checker_and_rewards_follow_reference() -> None:
    env = RlccEnv(n_flows=6, senders=3, episode_steps=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (6, 2)
    obs, _r, _term, _trunc, info = env.step(np.full(6, 1.0, np.float32))
    want = rlcc.reward(info["inflation"], info["rate"], rlcc.DEFAULT_TARGET,
                       rlcc.DEFAULT_BETA)
    np.testing.assert_allclose(info["rewards"], want)
    np.testing.assert_allclose(obs[:, 1], 1.0)
    # actions are clipped to [1/1.2, 1.2] by the shared core
    before = info["rate"].copy()
    _, _, _, _, info = env.step(np.full(6, 5.0, np.float32))
    np.testing.assert_allclose(info["rate"], np.minimum(before * 1.2, 1.0))
