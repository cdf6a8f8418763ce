"""``p4cc bench sim``: simulator speed, one JSON object per case.

Keys: ``case``, ``sim_s_per_wall_s`` (simulated seconds per wall-clock second),
``agent_steps_per_s`` (flow-steps per wall second: a congestion-control agent acting on
one flow for one step; for RL-CC one decision per flow per base RTT), plus the step
``dt_s``, flow counts and wall time.  All at the paper scale (25 Gb/s, 8 µs RTT).
``ns3_incast_8to1`` and ``ns3_leafspine288_websearch60`` run ns-3 on the same
scenarios in the same run and report the ratio (p4cc.bench.ns3; ``skipped``
records without the ns3 package).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from p4cc.bench.ns3 import ns3_incast, ns3_leafspine
from p4cc.controlplane.ecn import static_setting
from p4cc.hostcc.rlcc_policies import ReferencePolicy
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.sim.envs import RlccEnv
from p4cc.sim.validate import NVIDIA_CNP_INTERVAL_S
from p4cc.topo.spec import TopoSpec, parse_topo
from p4cc.traffic.cdf import load_cdf
from p4cc.traffic.workloads import poisson_flows


def _quiet_gc() -> None:
    """Move the set-up's objects (modules, schedules, topology) out of the collector's
    generations while a case is timed (gc.unfreeze after), so its full collections
    during the timed loop do not walk them."""
    gc.collect()
    gc.freeze()


def _timed(case: str, eng: Engine, sim_s: float) -> dict[str, Any]:
    flow_steps = 0
    _quiet_gc()
    wall = time.perf_counter()
    while eng.t < sim_s - 1e-12:
        eng.step()
        flow_steps += int(np.count_nonzero(eng.active))
    wall = time.perf_counter() - wall
    gc.unfreeze()
    return {"case": case, "sim_s_per_wall_s": sim_s / wall,
            "agent_steps_per_s": flow_steps / wall, "dt_s": eng.dt, "sim_s": sim_s,
            "wall_s": round(wall, 3), "flows": eng.flows.n,
            "mean_active_flows": flow_steps / max(eng.steps, 1)}


def incast(sim_s: float) -> dict[str, Any]:
    topo = parse_topo("star,hosts=9", "paper")
    sched = pd.DataFrame({"flow_id": np.arange(8), "start_s": 0.0,
                          "src": [f"h{i + 1}" for i in range(8)], "dst": "h9",
                          "size_bytes": 0})
    cfg = SimConfig(host_traces=False, cnp_interval_s=NVIDIA_CNP_INTERVAL_S)
    eng = Engine(topo, sched, cfg, ecn=static_setting("VENDOR", topo.scale))
    return _timed("incast_8to1", eng, sim_s)


def websearch(topo_text: str, sim_s: float) -> tuple[TopoSpec, list[str], pd.DataFrame]:
    """The leaf-spine cases' fabric, hosts and WebSearch schedule at 60 % load."""
    topo = parse_topo(topo_text, "paper")
    hosts = [h.name for h in topo.hosts]
    sched = poisson_flows(np.random.default_rng(1), load_cdf("websearch"), hosts, 0.6,
                          topo.scale.link_rate_bps, 0.0, sim_s, "websearch")
    return topo, hosts, sched


def leafspine(case: str, topo_text: str, sim_s: float, dt_s: float | None) -> dict[str, Any]:
    topo, hosts, sched = websearch(topo_text, sim_s)
    eng = Engine(topo, sched, SimConfig(host_traces=False, dt_s=dt_s),
                 ecn=static_setting("SECN1", topo.scale))
    out = _timed(case, eng, sim_s)
    out["hosts"] = len(hosts)
    return out


def rlcc_many(n_flows: int, decisions: int) -> dict[str, Any]:
    env = RlccEnv(n_flows=n_flows, senders=63, episode_steps=decisions)
    obs, _ = env.reset(seed=0)
    pol = ReferencePolicy()
    pst = pol.initial_state(n_flows)
    _quiet_gc()
    wall = time.perf_counter()
    t0 = env.engine.t if env.engine else 0.0
    for _ in range(decisions):
        act, pst = pol.act(obs, pst)
        obs, *_ = env.step(act)
    wall = time.perf_counter() - wall
    gc.unfreeze()
    sim_s = (env.engine.t if env.engine else 0.0) - t0
    return {"case": f"rlcc_many_to_one_{n_flows}", "sim_s_per_wall_s": sim_s / wall,
            "agent_steps_per_s": n_flows * decisions / wall,
            "dt_s": env.engine.dt if env.engine else None, "sim_s": sim_s,
            "wall_s": round(wall, 3), "flows": n_flows, "decisions": decisions}


#: The 288-host leaf-spine (12 leaves x 24 hosts, 6 spines).
LS288 = "leafspine,spines=6,leaves=12,hosts=24"


def ns3_leafspine288(sim_s: float) -> dict[str, Any]:
    _, hosts, sched = websearch(LS288, sim_s)
    return ns3_leafspine(sim_s, sched, hosts, (12, 24, 6), lambda: leafspine(
        "leafspine288_websearch60", LS288, sim_s, None))


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench sim", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="shorter runs (smoke test)")
    ap.add_argument("--case", action="append", help="run only these cases (repeatable)")
    args = ap.parse_args(list(argv))
    k = 0.2 if args.quick else 1.0
    cases = {
        "incast_8to1": lambda: incast(10e-3 * k),
        "leafspine64_websearch60": lambda: leafspine(
            "leafspine64_websearch60", "leafspine,spines=4,leaves=4,hosts=16", 5e-3 * k, None),
        "rlcc_many_to_one_8192": lambda: rlcc_many(8192, max(5, int(100 * k))),
        "leafspine288_websearch60": lambda: leafspine(
            "leafspine288_websearch60", LS288, 5e-3 * k,
            None),
        "leafspine288_websearch60_dt4us": lambda: leafspine(
            "leafspine288_websearch60_dt4us", LS288,
            5e-3 * k, 4e-6),
        # ns-3 on the same scenarios in this run (skipped with the reason without ns3);
        # the leaf-spine: 1 ms, as ns-3 needs about a minute of wall time per ms here
        "ns3_incast_8to1": lambda: ns3_incast(10e-3 * k, lambda: incast(10e-3 * k)),
        "ns3_leafspine288_websearch60": lambda: ns3_leafspine288(1e-3 * k),
    }
    for name, fn in cases.items():
        if args.case and name not in args.case:
            continue
        yield fn()
