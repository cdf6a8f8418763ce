"""ACC's reward-prioritised replay sampling (§4.3 "actions resulting large reward will
be prioritised"; p4cc.learn.replay.reward_priorities): the formula, the uniform case
unchanged, and sampled frequencies that follow the priorities per agent."""

from __future__ import annotations

import numpy as np
import pytest

from p4cc.learn.replay import PRIORITY_EPS, ReplayMemory, reward_priorities


def _memory(rewards: np.ndarray, capacity: int = 50) -> ReplayMemory:
    """One transition per column of ``rewards`` (agents × t); obs = 100·agent + t."""
    n, steps = rewards.shape
    mem = ReplayMemory(n_agents=n, obs_dim=1, local_capacity=capacity, global_capacity=10)
    for t in range(steps):
        obs = (100.0 * np.arange(n) + t)[:, None].astype(np.float32)
        mem.add(obs, np.full(n, t), rewards[:, t].astype(np.float32), obs + 0.5)
    return mem


def test_priorities_follow_the_formula() -> None:
    rew = np.array([[0.2, 0.5, 0.9], [0.3, 0.3, 0.3]])
    p = reward_priorities(rew, 2.0)
    raw = (rew[0] - 0.2 + PRIORITY_EPS) ** 2
    np.testing.assert_allclose(p[0], raw / raw.sum())
    np.testing.assert_allclose(p[1], [1 / 3] * 3)  # equal rewards: uniform
    np.testing.assert_allclose(reward_priorities(rew, 0.0), np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="priority exponent"):
        reward_priorities(rew, -1.0)


def test_uniform_sampling_draws_what_it_drew_before() -> None:
    """priority 0 keeps the uniform draw: the same indices from the same generator."""
    mem = _memory(np.random.default_rng(1).random((3, 20)))
    b = mem.sample(np.random.default_rng(7), 16)
    j = np.random.default_rng(7).integers(0, 20, (3, 16))
    np.testing.assert_array_equal(b.obs[..., 0], 100.0 * np.arange(3)[:, None] + j)


def test_prioritised_sampling_follows_each_agents_priorities() -> None:
    rew = np.zeros((3, 8))
    rew[0, 5] = 1.0  # agent 0: one large reward among small ones
    rew[1] = 0.5  # agent 1: all equal -> uniform
    rew[2] = np.linspace(0.0, 0.7, 8)  # agent 2: graded
    mem = _memory(rew)
    n = 40_000
    b = mem.sample(np.random.default_rng(3), n, priority=1.0)
    t = (b.obs[..., 0] - 100.0 * np.arange(3)[:, None]).astype(int)
    assert np.all(b.agent == np.arange(3)[:, None])  # each agent samples its own memory
    np.testing.assert_array_equal(b.next_obs[..., 0], b.obs[..., 0] + 0.5)  # intact
    np.testing.assert_array_equal(b.act, t)
    np.testing.assert_array_equal(b.rew, rew[np.arange(3)[:, None], t].astype(np.float32))
    expected = reward_priorities(rew, 1.0)
    for i in range(3):
        freq = np.bincount(t[i], minlength=8) / n
        sigma = np.sqrt(expected[i] * (1 - expected[i]) / n)
        assert np.all(np.abs(freq - expected[i]) <= 5 * sigma + 1e-12), (i, freq, expected[i])
    assert np.bincount(t[0], minlength=8)[5] / n > 0.99  # the large reward dominates


def test_only_stored_transitions_are_sampled() -> None:
    """A partly filled ring: the empty slots (reward 0, below every stored reward's
    minimum here) are never drawn, whatever their priority would be."""
    mem = _memory(np.full((2, 4), 0.8), capacity=50)
    b = mem.sample(np.random.default_rng(0), 5_000, priority=3.0)
    t = b.obs[..., 0] - 100.0 * np.arange(2)[:, None]
    assert t.min() >= 0 and t.max() <= 3
    assert set(np.unique(t[0]).tolist()) == {0.0, 1.0, 2.0, 3.0}


def test_transitions_the_loss_ignores_are_not_prioritised() -> None:
    """Idle ports' transitions (loss weight 0) are never drawn by priority, however
    large their reward; an agent with only such transitions samples them all."""
    rew = np.array([[0.1, 0.9, 0.2, 0.95], [0.5, 0.6, 0.7, 0.8]])
    learns = np.array([[True, False, True, False], [False] * 4])
    p = reward_priorities(rew, 1.0, learns)
    np.testing.assert_array_equal(p[0] > 0, learns[0])
    raw = (np.array([0.1, 0.2]) - 0.1 + PRIORITY_EPS)
    np.testing.assert_allclose(p[0, [0, 2]], raw / raw.sum())
    np.testing.assert_allclose(p[1], reward_priorities(rew[1:], 1.0)[0])  # none: all
    mem = ReplayMemory(n_agents=2, obs_dim=1, local_capacity=10, global_capacity=10)
    for t in range(4):
        obs = (100.0 * np.arange(2) + t)[:, None].astype(np.float32)
        mem.add(obs, np.full(2, t), rew[:, t].astype(np.float32), obs, learns[:, t] * 1.0)
    b = mem.sample(np.random.default_rng(0), 2_000, priority=1.0)
    assert set(np.unique(b.obs[0, :, 0]).tolist()) == {0.0, 2.0}
    assert set(np.unique(b.obs[1, :, 0] - 100).tolist()) == {0.0, 1.0, 2.0, 3.0}
