"""Shared by the RL-CC tests: a trained policy on a simulated 2→1 incast."""

from __future__ import annotations

from typing import Any

import numpy as np


def two_to_one_shares(policy: Any) -> tuple[np.ndarray, Any]:
    """Each flow's share of the bottleneck over RTTs 1000-3000 of a 2→1 incast at paper
    scale (the second flow starts 10 RTTs after the first); also the simulator's hook."""
    from p4cc.hostcc import rlcc, rlcc_rule
    from p4cc.sim.cc import RlccHook
    from p4cc.sim.config import SimConfig
    from p4cc.sim.engine import Engine
    from p4cc.sim.validate import _incast
    from p4cc.topo.spec import parse_topo

    topo = parse_topo("star,hosts=3", "paper")
    sc = topo.scale
    hook = RlccHook(rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc)), policy,
                    rlcc_rule.decision_interval_s(sc))
    eng = Engine(topo, _incast(2, 2, 10 * sc.base_rtt_s),
                 SimConfig(cc="rlcc", host_traces=False), cc=hook)
    eng.run(1000 * sc.base_rtt_s)
    d0 = eng.delivered[:2].copy()
    eng.run(2000 * sc.base_rtt_s)
    share = (eng.delivered[:2] - d0) * 8 / (1000 * sc.base_rtt_s) / sc.link_rate_bps
    return share, hook
