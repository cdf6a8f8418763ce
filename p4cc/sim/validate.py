"""Theory and scale checks of the simulator (docs/simulator.md, ``p4cc sim validate``).

* ``dcqcn_fairness``: N long DCQCN flows into one port share it fairly (Jain's index of
  per-flow throughput >= 0.9) and hold the queue in the marking band [Kmin, Kmax].
* ``rlcc_fixed_point``: N RL-CC flows with a policy (default: the reference policy of
  p4cc.hostcc.rlcc_policies) -- the fixed point of the NVIDIA reward is every flow at
  1/N and RTT inflation ≈ target·√N + β (NVIDIA RL-CC eq. 2); we report what we get.
* ``leafspine_websearch``: the 288-host fabric of ACC/PET (12 leaves x 24 hosts,
  6 spines) with WebSearch at 60 % load runs and completes flows.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

import numpy as np
import pandas as pd

from p4cc.controlplane.ecn import static_setting
from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc, rlcc_policies, rlcc_rule
from p4cc.hostcc.receiver import NVIDIA_CNP_INTERVAL_S
from p4cc.scale import get_scale
from p4cc.sim.cc import RlccHook
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo


def jain(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(x.sum() ** 2 / (len(x) * np.square(x).sum())) if np.any(x > 0) else 0.0


def _incast(n: int, senders: int, stagger_s: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame({"flow_id": np.arange(n), "start_s": np.arange(n) * stagger_s,
                         "src": [f"h{i % senders + 1}" for i in range(n)],
                         "dst": f"h{senders + 1}", "size_bytes": 0})


def dcqcn_fairness(n: int = 8, scale: str = "paper", setting: str = "VENDOR",
                   rtts: int = 3000, cnp_interval_s: float | None = None,
                   params: str = "hpcc-ns3", seed: int = 0) -> dict[str, Any]:
    senders = min(n, 63)
    topo = parse_topo(f"star,hosts={senders + 1}", scale)
    sc = topo.scale
    cnp = cnp_interval_s if cnp_interval_s is not None else sc.time(NVIDIA_CNP_INTERVAL_S)
    ecn = static_setting(setting, sc)
    eng = Engine(topo, _incast(n, senders), SimConfig(cnp_interval_s=cnp, cc_params=params,
                                                      host_traces=False, seed=seed), ecn=ecn)
    t_end = rtts * sc.base_rtt_s
    wall = time.perf_counter()
    eng.run(t_end / 2)
    half = eng.delivered.copy()
    eng.run(t_end)
    wall = time.perf_counter() - wall
    act = eng.active.nonzero()[0]
    thr = (eng.delivered - half)[act] * 8 / (t_end / 2)
    tel = eng.telemetry_frame()
    port = tel[(tel.port == senders + 1) & (tel.t_s > t_end / 2)]
    q = float(port.qlen_avg_bytes.mean())
    return {"check": "dcqcn_fairness", "n": n, "scale": scale, "setting": ecn.describe(),
            "cnp_interval_s": cnp, "jain": jain(thr), "utilization": float(
                port.utilization.mean()), "qlen_avg_bytes": q,
            "in_band": bool(ecn.kmin_bytes <= q <= ecn.kmax_bytes),
            "drops_pkts": int(port.drops_pkts.sum()), "sim_s": t_end,
            "wall_s": round(wall, 3)}


def rlcc_fixed_point(n: int = 8, scale: str = "paper", rtts: int | None = None,
                     policy: rlcc_policies.Policy | None = None, seed: int = 0,
                     stagger_rtts: float = 0.0, target: float = rlcc.DEFAULT_TARGET,
                     beta: float = rlcc.DEFAULT_BETA,
                     signal: Literal["rtt", "qdepth"] = "rtt") -> dict[str, Any]:
    """N flows into one port; flow i starts at i·``stagger_rtts`` base RTTs (each at the
    line rate, into the flows already there).  Measured over the second half of ``rtts``
    base RTTs (default max(4000, 32·N): N flows starting at line rate need ~log_1.2(N)
    cuts of one RTT each, the RTT growing with the start-up queue).  ``target``/``beta``:
    the reward's δ = target − max(inflation − β, 0)·√rate the hosts feed the policy
    (a policy trained for other values runs unchanged; lab 6 changes them).  ``signal``:
    ``qdepth`` feeds δ from the INT path-max queue (RlccHook) instead of the RTT."""
    rtts = max(4000, 32 * n) if rtts is None else rtts
    senders = min(n, 63)
    topo = parse_topo(f"star,hosts={senders + 1}", scale)
    sc = topo.scale
    if not 0 <= stagger_rtts * (n - 1) < rtts / 2:
        raise ConfigError(f"stagger_rtts={stagger_rtts}: every flow must start in the first "
                          f"half of the {rtts} RTTs (need 0 <= stagger_rtts·(N−1) < rtts/2)")
    params = rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc), pkt_bytes=sc.pkt_bytes,
                             target=target, beta=beta, signal=signal)
    hook = RlccHook(params, policy or rlcc_policies.ReferencePolicy(),
                    rlcc_rule.decision_interval_s(sc))  # the hosts' decision clock
    eng = Engine(topo, _incast(n, senders, stagger_rtts * sc.base_rtt_s),
                 SimConfig(cc="rlcc", host_traces=False, seed=seed), cc=hook)
    t_end = rtts * sc.base_rtt_s
    eng.run(t_end / 2)  # flows start at line rate: let the start-up transient pass
    half, lost_half = eng.delivered.copy(), eng.lost.copy()
    infl, k = 0.0, 0
    while eng.t < t_end:
        eng.run(eng.t + sc.base_rtt_s)
        act = eng.active
        infl += float(np.nanmean(eng.rtt_last[act])) / params.base_rtt_s
        k += 1
    act = eng.active.nonzero()[0]
    thr = (eng.delivered - half)[act] * 8 / (t_end / 2)
    expected = params.target * math.sqrt(n) + params.beta
    return {"check": "rlcc_fixed_point", "n": n, "scale": scale, "policy": hook.policy.name,
            "stagger_rtts": stagger_rtts,
            "jain": jain(thr), "utilization": float(thr.sum() / sc.link_rate_bps),
            "rate_share_mean": float(np.mean(thr) / sc.link_rate_bps), "ideal_share": 1 / n,
            "rtt_inflation": infl / max(k, 1), "expected_inflation": expected,
            "lost_bytes": float((eng.lost - lost_half)[act].sum())}


def leafspine_websearch(scale: str = "paper", load: float = 0.6, duration_s: float = 2e-3,
                        dt_s: float | None = None, seed: int = 1) -> dict[str, Any]:
    from p4cc.traffic.cdf import load_cdf
    from p4cc.traffic.workloads import poisson_flows

    topo = parse_topo("leafspine,spines=6,leaves=12,hosts=24", get_scale(scale))
    hosts = [h.name for h in topo.hosts]
    sched = poisson_flows(np.random.default_rng(seed), load_cdf("websearch"), hosts, load,
                          topo.scale.link_rate_bps, 0.0, duration_s, "websearch")
    eng = Engine(topo, sched, SimConfig(dt_s=dt_s, host_traces=False, seed=seed),
                 ecn=static_setting("SECN1", topo.scale))
    wall = time.perf_counter()
    eng.run(duration_s)
    wall = time.perf_counter() - wall
    fr = eng.flow_records()
    return {"check": "leafspine_websearch", "hosts": len(hosts), "flows": len(fr),
            "completed": int(fr.completed.sum()), "sim_s": duration_s, "wall_s": round(wall, 3),
            "sim_s_per_wall_s": duration_s / wall}


def run_all(quick: bool = True) -> list[dict[str, Any]]:
    out = [dcqcn_fairness(8, rtts=1500 if quick else 5000)]
    for n in ((4, 16) if quick else (4, 16, 64, 256)):
        out.append(rlcc_fixed_point(n))
    if not quick:
        out.append(leafspine_websearch())
    return out
