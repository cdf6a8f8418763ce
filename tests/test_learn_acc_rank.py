"""p4cc.learn.acc_rank: the reward a run's telemetry earns (issue 9 diagnosis)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from p4cc.errors import ConfigError
from p4cc.learn.acc_rank import interval_rewards, score


def tel(q: list[float], u: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"qlen_avg_bytes": q, "utilization": u})


def test_acc_interval_rewards_follow_eq2_and_fig4() -> None:
    # E(n) = 20 KB·2ⁿ: 10 KB -> n = 0, D = 1; 30 KB -> n = 1, D = 0.9;
    # 100 KB -> n = 3 (E(3) = 160 KB), D = 0.7; 20 MB > E(9) = 10.24 MB -> D = 0
    r = interval_rewards(tel([10e3, 30e3, 100e3, 20e6], [1.0, 0.5, 1.0, 1.0]), "acc",
                         20_000, 0.3)
    np.testing.assert_allclose(r, [0.3 + 0.7, 0.15 + 0.63, 0.3 + 0.49, 0.3])


def test_pet_interval_rewards_shift_guard() -> None:
    # L_a = 1/(1 + q/α): empty -> 1, one α -> 1/2
    r = interval_rewards(tel([0.0, 20e3], [0.0, 1.0]), "pet", 20_000, 0.3)
    np.testing.assert_allclose(r, [0.7, 0.3 + 0.35])


def test_score_counts_busy_and_hot_intervals_only() -> None:
    # idle row (0, 0) is left out; hot = utilisation > 0.8
    s = score(tel([0.0, 10e3, 100e3], [0.0, 0.5, 0.9]), "acc", 20_000, 0.3)
    assert (s.n_busy, s.n_hot) == (2, 1)
    assert s.reward_busy == pytest.approx(((0.15 + 0.7) + (0.27 + 0.49)) / 2)
    assert s.reward_hot == pytest.approx(0.27 + 0.49)
    assert s.queue_busy_bytes == pytest.approx(55e3)
    assert s.util_busy == pytest.approx(0.7)
    assert math.isnan(score(tel([5e3], [0.5])).reward_hot)


def test_a_shorter_queue_at_the_same_utilisation_ranks_higher() -> None:
    low = score(tel([15e3] * 4, [0.9] * 4))
    high = score(tel([150e3] * 4, [0.9] * 4))
    assert low.reward_busy > high.reward_busy


def test_bad_inputs_raise() -> None:
    with pytest.raises(ConfigError):
        interval_rewards(pd.DataFrame({"utilization": [1.0]}), "acc", 20_000, 0.3)
    with pytest.raises(ConfigError):
        interval_rewards(tel([1.0], [1.0]), "dqn", 20_000, 0.3)
    with pytest.raises(ConfigError):
        interval_rewards(tel([1.0], [1.0]), "acc", 20_000, 1.5)
    with pytest.raises(ConfigError):
        score(tel([0.0], [0.0]))
