"""Does the reward rank ECN settings the way the evaluation does?  (issue 9 diagnosis)

A learned agent can only be as good for mice as its reward lets it be.  This module
scores a finished run by the per-interval reward ACC (eq. 2) or PET (eq. 6) would have
earned on it, from the run's ``telemetry.csv`` (one row per port and interval), so that
fixed settings can be ranked by reward and compared with their mice FCT
(docs/learning.md "Does the reward rank the settings right?").

* Only **busy** port-intervals count (a queue or traffic in the interval), as in training
  (``p4cc.learn.env.busy``: an idle port's reward is the same for every action);
* ``hot`` (utilisation above ``hot_util``) is the subset the agent's choice matters most
  for: saturated ports, where ACC's threshold trades queue against throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from p4cc.controlplane.agents.state import acc_reward, pet_reward, unscaled_levels
from p4cc.errors import ConfigError

#: telemetry.csv columns the scores read
COLUMNS = ("qlen_avg_bytes", "utilization")


@dataclass(frozen=True)
class RewardScore:
    """Mean per-interval reward of one run over its busy (and hot) port-intervals."""

    reward_busy: float  # mean reward, busy port-intervals
    reward_hot: float  # mean reward, port-intervals with utilisation > hot_util (nan: none)
    util_busy: float  # mean utilisation T, busy port-intervals
    queue_busy_bytes: float  # mean average queue, busy port-intervals
    n_busy: int
    n_hot: int


def interval_rewards(tel: pd.DataFrame, algo: str, alpha_bytes: float, w1: float,
                     pet_guard: str = "shift") -> np.ndarray:
    """The reward of every row of ``tel``: ACC ω1·T(R) + ω2·D(L) with E(n) = α·2ⁿ
    (ACC eq. 2, Fig. 4) or PET β1·T + β2/q_avg in units of α (PET eq. 6, guard
    ``pet_guard``); ω2 = 1 - ω1 (ACC §3.3)."""
    missing = [c for c in COLUMNS if c not in tel.columns]
    if missing:
        raise ConfigError(f"telemetry lacks columns {missing}")
    if not 0.0 <= w1 <= 1.0:
        raise ConfigError(f"w1 must be in [0, 1], got {w1}")
    util = tel["utilization"].to_numpy(float)
    q = tel["qlen_avg_bytes"].to_numpy(float)
    if algo == "acc":
        return acc_reward(util, q, unscaled_levels(alpha_bytes), w1, 1.0 - w1)
    if algo == "pet":
        return pet_reward(util, q, alpha_bytes, w1, 1.0 - w1, pet_guard)
    raise ConfigError(f"algo must be 'acc' or 'pet', got {algo!r}")


def score(tel: pd.DataFrame, algo: str = "acc", alpha_bytes: float = 20_000.0,
          w1: float = 0.3, hot_util: float = 0.8) -> RewardScore:
    """Mean reward over the busy port-intervals of a run's telemetry (and the hot ones)."""
    r = interval_rewards(tel, algo, alpha_bytes, w1)
    util = tel["utilization"].to_numpy(float)
    q = tel["qlen_avg_bytes"].to_numpy(float)
    busy = (q > 0) | (util > 0)
    hot = busy & (util > hot_util)
    if not busy.any():
        raise ConfigError("no busy port-interval in the telemetry")
    return RewardScore(reward_busy=float(r[busy].mean()),
                       reward_hot=float(r[hot].mean()) if hot.any() else float("nan"),
                       util_busy=float(util[busy].mean()),
                       queue_busy_bytes=float(q[busy].mean()),
                       n_busy=int(busy.sum()), n_hot=int(hot.sum()))
