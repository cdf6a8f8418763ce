"""ACC session-9 options: held exploratory actions (``explore_hold``) and the template
without duplicate threshold pairs (``ActionTemplate.pair_levels``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from p4cc.controlplane.agents.learned import LearnedAgent  # noqa: E402
from p4cc.controlplane.agents.mlp import save_npz  # noqa: E402
from p4cc.controlplane.agents.template import ACC_TEMPLATE, ActionTemplate  # noqa: E402
from p4cc.controlplane.ecn import EcnConfig  # noqa: E402
from p4cc.errors import ConfigError  # noqa: E402
from p4cc.learn import acc  # noqa: E402
from p4cc.learn.cli import apply_overrides  # noqa: E402
from p4cc.learn.nets import GroupMLP  # noqa: E402
from p4cc.scale import get_scale  # noqa: E402


def _setting(c: EcnConfig) -> tuple[int, int, float]:
    return (c.kmin_bytes, c.kmax_bytes, c.pmax)


@pytest.mark.parametrize("scale", ["paper", "testbed"])
def test_pair_levels_7_keeps_exactly_the_distinct_settings(scale: str) -> None:
    s = get_scale(scale)
    full = {_setting(c) for c in ACC_TEMPLATE.configs(s)}
    dedup = ActionTemplate(pair_levels=7)
    mine = [_setting(c) for c in dedup.configs(s)]
    assert ACC_TEMPLATE.n_actions == 55 * 20  # the paper's count stays the default
    assert dedup.n_actions == 28 * 20 == len(set(mine))  # no duplicate left
    assert set(mine) == full  # and none lost: E(6..9) all clip to the buffer
    assert all(k1 <= k2 for k1, k2, _ in mine)
    # D(L) keeps the paper's ten levels (the reward does not change)
    assert len(dedup.levels(s)) == 10


def test_pair_levels_bounds_and_cli() -> None:
    with pytest.raises(ConfigError):
        ActionTemplate(pair_levels=11)
    with pytest.raises(ConfigError):
        ActionTemplate(pair_levels=-1)
    cfg = apply_overrides(acc.AccConfig(), ["template.pair_levels=7", "explore_hold=4"])
    assert cfg.template.n_actions == 560 and cfg.explore_hold == 4
    # a hold below one interval is refused when the config is made, not silently ignored
    with pytest.raises(ConfigError, match="explore_hold=0 is out of range"):
        apply_overrides(acc.AccConfig(), ["explore_hold=0"])


def test_deployed_agent_reads_the_deduplicated_template(tmp_path: Path) -> None:
    t = ActionTemplate(pair_levels=7)
    torch.manual_seed(0)
    net = GroupMLP(1, (18, 20, t.n_actions))
    meta = {"algo": "acc", "template": t.to_dict(), "history": 3, "n_feat": 6,
            "reward": {"w1": 0.3, "w2": 0.7}}
    agent = LearnedAgent("acc", get_scale("paper"), save_npz(tmp_path / "m.npz",
                                                            {"main": net.layers(0)}, meta))
    assert agent.template.n_actions == 560 and len(agent.settings) == 560


def test_hold_keeps_a_random_action_for_k_intervals() -> None:
    rng = np.random.default_rng(0)
    hold = acc.Hold(3, k=4)
    greedy = np.array([7, 8, 9])
    first = hold.choose(greedy, 1.0, 100, rng)  # ε = 1: every port starts exploring
    for _ in range(3):
        np.testing.assert_array_equal(hold.choose(greedy, 0.0, 100, rng), first)
    np.testing.assert_array_equal(hold.choose(greedy, 0.0, 100, rng), greedy)  # expired
    with pytest.raises(ConfigError):
        acc.Hold(1, k=0)


@pytest.mark.parametrize("k", [1, 5])
def test_hold_explores_a_share_eps_of_intervals(k: int) -> None:
    rng = np.random.default_rng(1)
    hold = acc.Hold(200, k=k)
    greedy = np.full(200, -1)
    explored = np.mean([(hold.choose(greedy, 0.3, 50, rng) >= 0).mean()
                        for _ in range(2000)])
    assert explored == pytest.approx(0.3, abs=0.02)
    assert hold.start_probability(1.0) == 1.0 and hold.start_probability(0.0) == 0.0


def test_select_actions_with_hold_is_greedy_at_eps_0() -> None:
    torch.manual_seed(0)
    qnet = GroupMLP(1, (4, 8, 6))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    rng = np.random.default_rng(0)
    want = acc.select_actions(qnet, obs, 0.0, 6, rng)
    got = acc.select_actions(qnet, obs, 0.0, 6, rng, acc.Hold(5, 3))
    np.testing.assert_array_equal(got, want)
