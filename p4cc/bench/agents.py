"""``p4cc bench agents``: how fast the ACC and PET agents decide and train.

Cases (one JSON object each):

* ``decision_<algo>``: the deployed agent's ``act`` for one switch of 8 ports, every port
  busy (features, history, numpy forward pass of a network of the paper's size with
  random weights over the full template, and the template's setting): median and p99 µs
  per switch per interval.  ``decision_<algo>_shipped``: the same with the shipped checkpoint
  (p4cc/data/agents), whose template may be smaller.
* ``train_<algo>``: ``p4cc train`` on the simulator (paper scale, leaf-spine 2x2 with 4
  hosts per leaf: 16 agents): environment steps (intervals) per second, and agent-steps
  (one port's transition) per second, including the learning updates.  Skipped without
  torch.
* ``controlloop_bmv2_<agent>`` (secn1, acc, pet): the control-loop time per switch per
  interval with the agent in charge on a real BMv2 switch of 8 ports under a standing
  load (p4cc.bench.controlloop.measure_agent: poll, decision, write; goal ≤ 5 ms).  ACC
  and PET load the shipped checkpoints (p4cc/data/agents) or, without them, random
  weights of the paper's size.  Skipped with the reason without BMv2 or root.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.bench.controlloop import loaded_skip_reason, measure_agent
from p4cc.controlplane.agents.learned import DEFAULT_CHECKPOINTS, LearnedAgent
from p4cc.controlplane.agents.mlp import save_npz
from p4cc.controlplane.agents.state import ACC_FEATURES, PET_FEATURES
from p4cc.controlplane.agents.static import make_agent
from p4cc.controlplane.agents.template import ACC_TEMPLATE, PET_TEMPLATE
from p4cc.controlplane.records import PortTelemetry
from p4cc.scale import get_scale

HIDDEN = (20, 40, 40, 20)  # ACC §6


def random_checkpoint(path: Path, algo: str, seed: int = 0) -> Path:
    """A checkpoint of the paper's network size with random weights (no torch)."""
    rng = np.random.default_rng(seed)
    template = ACC_TEMPLATE if algo == "acc" else PET_TEMPLATE
    n_feat = ACC_FEATURES if algo == "acc" else PET_FEATURES
    sizes = (3 * n_feat, *HIDDEN, template.n_actions)
    layers = [(rng.normal(0, 1 / np.sqrt(i), (o, i)).astype(np.float32),
               rng.normal(0, 0.1, o).astype(np.float32)) for i, o in pairwise(sizes)]
    meta = {"algo": algo, "template": template.to_dict(), "history": 3, "n_feat": n_feat,
            "incast_norm": 8.0, "reward": {"w1": 0.3, "w2": 0.7}, "idle_rule": True}
    return save_npz(path, {"main": layers}, meta)


def synthetic_records(scale_name: str, ports: int, t_s: float, rng: np.random.Generator
                      ) -> dict[int, PortTelemetry]:
    sc = get_scale(scale_name)
    out = {}
    for p in range(1, ports + 1):
        q = float(rng.uniform(0.3, 0.9) * sc.buffer_bytes)  # busy: above any Kmin used
        out[p] = PortTelemetry("s1", p, t_s, 0.01, q, q * 1.5, sc.link_rate_bps * 0.9,
                               sc.link_rate_bps * 0.1, 1000, 100, 0, None,
                               int(rng.integers(1, 8)), 10, 2, 0.0, 0.9)
    return out


def decision(algo: str, ports: int = 8, reps: int = 2000, scale: str = "testbed",
             shipped: bool = False) -> dict[str, Any]:
    """``decision_<algo>`` (random weights, full template) or, with ``shipped``,
    ``decision_<algo>_shipped`` (the default checkpoint; skipped if it is absent)."""
    case = f"decision_{algo}_shipped" if shipped else f"decision_{algo}"
    rng = np.random.default_rng(1)
    if shipped:
        path = DEFAULT_CHECKPOINTS[algo]
        if not path.is_file():
            return {"case": case, "skipped": f"no shipped checkpoint at {path}"}
        agent = LearnedAgent(algo, get_scale(scale), path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            agent = LearnedAgent(algo, get_scale(scale),
                                 random_checkpoint(Path(tmp) / "a.npz", algo))
    agent.reset({})
    obs = [synthetic_records(scale, ports, 0.01 * (k + 1), rng) for k in range(reps)]
    times = []
    for o in obs:
        t = time.perf_counter()
        agent.act(o)
        times.append((time.perf_counter() - t) * 1e6)
    return {"case": case, "ports": ports, "reps": reps,
            "actions": agent.template.n_actions,
            "median_us": round(statistics.median(times), 1),
            "p99_us": round(statistics.quantiles(times, n=100)[98], 1),
            "per_port_us": round(statistics.median(times) / ports, 1)}


def training(algo: str, steps: int = 300) -> dict[str, Any]:
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"case": f"train_{algo}", "skipped": "torch not installed (the train extra)"}
    import dataclasses

    from p4cc.learn import acc, pet
    from p4cc.learn.env import EnvConfig

    env = EnvConfig(intervals=100)
    cfg: Any
    if algo == "acc":
        cfg = acc.AccConfig(steps=steps, env=env, learning_starts=50, log_every=steps)
        mod: Any = acc
    else:
        cfg = pet.PetConfig(steps=steps, env=env, rollout=64, log_every=steps)
        mod = pet
    cfg = dataclasses.replace(cfg, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        mod.train(cfg, Path(tmp), progress=False)
        wall = time.perf_counter() - t
        agents = mod.TrainEnv(cfg.env, algo, cfg.template).n_agents
    return {"case": f"train_{algo}", "topo": env.topo, "agents": agents, "steps": steps,
            "env_steps_per_s": round(steps / wall, 1),
            "agent_steps_per_s": round(steps * agents / wall, 1), "wall_s": round(wall, 2)}


def controlloop(name: str, steps: int = 200, interval_s: float = 0.05) -> dict[str, Any]:
    """``controlloop_bmv2_<name>``: p4cc.bench.controlloop.measure_agent with ``name``."""
    case: dict[str, Any] = {"case": f"controlloop_bmv2_{name}"}
    reason = loaded_skip_reason()
    if reason is not None:
        return {**case, "skipped": reason, "goal_ms": 5.0}
    scale = get_scale("testbed")
    weights = "static"
    with tempfile.TemporaryDirectory() as tmp:
        if name in DEFAULT_CHECKPOINTS:
            path = DEFAULT_CHECKPOINTS[name]
            if not path.is_file():
                path = random_checkpoint(Path(tmp) / f"{name}.npz", name)
            weights = str(path) if path == DEFAULT_CHECKPOINTS[name] else "random"
            agent = make_agent(f"{name}:{path}", scale)
        else:
            agent = make_agent(name, scale)
        return {**case, "weights": weights, **measure_agent(agent, steps, interval_s)}


def cases(steps: int, reps: int, loop_steps: int = 200,
          agents: Sequence[str] = ("secn1", "acc", "pet")) -> Iterator[dict[str, Any]]:
    for algo in ("acc", "pet"):
        yield decision(algo, reps=reps)
        yield decision(algo, reps=reps, shipped=True)
    for algo in ("acc", "pet"):
        yield training(algo, steps)
    for name in agents:
        yield controlloop(name, loop_steps)


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="p4cc bench agents")
    parser.add_argument("--steps", type=int, default=300, help="training intervals to time")
    parser.add_argument("--reps", type=int, default=2000, help="decisions to time")
    parser.add_argument("--loop-steps", type=int, default=200,
                        help="control-loop steps to time per agent on BMv2")
    parser.add_argument("--only", choices=("decision", "train", "controlloop"),
                        help="run only these cases")
    args = parser.parse_args(list(argv))
    if args.only == "controlloop":
        return (controlloop(n, args.loop_steps) for n in ("secn1", "acc", "pet"))
    out = cases(args.steps, args.reps, args.loop_steps)
    if args.only is not None:
        return (c for c in out if c["case"].startswith(args.only))
    return out
