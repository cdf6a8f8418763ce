"""``p4cc bench rlcc``: how fast RL-CC trains and decides.

Cases (one JSON object each; units in the keys):

* ``train_<arch>`` (lstm, mlp): a tiny fixed ADPG run (``p4cc.learn.rlcc_adpg.train``,
  default 4 updates of 256 base RTTs on the 2/4/8→1 incasts × 3 copies, seed 1, nothing
  written): agent-steps (decisions of one flow, learned from) per second and updates per
  second, simulator and gradient step included.  Skipped without torch.
* ``decision_<policy>_n<N>``: one vectorized ``act`` call for N flows on random
  observations (δ ~ N(0, 0.1) and −Exp(1), a_{t−1} ∈ [1/1.2, 1.2]) with the policy's
  carried state, for the shipped ``adpg-lstm``, ``adpg-mlp``, the default
  ``adpg-mlp-long`` (plain ``rlcc``), ``adpg-trees`` and the int8 versions
  ``adpg-mlp-long-int8``, ``adpg-trees-int8``, ``adpg-lstm-int8``
  (p4cc.hostcc.rlcc_int8, rlcc_int8_lstm), N = 1 and
  8,192: median and p99 µs per call, and µs per decision (median / N).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.hostcc import rlcc
from p4cc.hostcc.cc import policy_by_name

POLICIES = ("adpg-lstm", "adpg-mlp", "adpg-mlp-long", "adpg-trees", "adpg-mlp-long-int8",
            "adpg-trees-int8", "adpg-lstm-int8")
NS = (1, 8192)


def observations(n: int, reps: int, seed: int = 1) -> np.ndarray:
    """(reps, n, 2) random observations around and below the operating point."""
    rng = np.random.default_rng(seed)
    delta = np.where(rng.random((reps, n)) < 0.7, rng.normal(0.0, 0.1, (reps, n)),
                     -rng.exponential(1.0, (reps, n)))
    prev = rng.uniform(1 / 1.2, 1.2, (reps, n))
    return np.stack([np.minimum(delta, rlcc.DEFAULT_TARGET), prev], axis=-1)


def decision(name: str, n: int, reps: int) -> dict[str, Any]:
    params = rlcc.RlccParams(25e9, 8e-6)
    pol = policy_by_name(name, params)
    obs = observations(n, reps + 5)
    state = pol.initial_state(n)
    for k in range(5):  # warm-up (first-call allocations)
        _, state = pol.act(obs[k], state)
    times = []
    for k in range(5, reps + 5):
        t = time.perf_counter()
        _, state = pol.act(obs[k], state)
        times.append((time.perf_counter() - t) * 1e6)
    med = statistics.median(times)
    return {"case": f"decision_{name}_n{n}", "policy": name, "flows": n, "reps": reps,
            "median_us_per_call": round(med, 2),
            "p99_us_per_call": round(statistics.quantiles(times, n=100)[98], 2),
            "us_per_decision": round(med / n, 4)}


def training(arch: str, updates: int) -> dict[str, Any]:
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"case": f"train_{arch}", "skipped": "torch not installed (the train extra)"}
    from p4cc.learn import rlcc_adpg

    cfg = dataclasses.replace(rlcc_adpg.AdpgConfig(), arch=arch, updates=updates, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        res = rlcc_adpg.train(cfg, Path(tmp), progress=False, write=False)
        wall = time.perf_counter() - t
    steps = int(res["curves"].rows[-1]["agent_steps"])
    agents = sum(cfg.scenarios) * cfg.copies
    return {"case": f"train_{arch}", "arch": arch, "updates": updates, "agents": agents,
            "rollout_base_rtts": cfg.rollout_rtts, "agent_steps": steps,
            "agent_steps_per_s": round(steps / wall, 1),
            "updates_per_s": round(updates / wall, 3), "wall_s": round(wall, 2)}


def cases(updates: int, reps: int, reps_large: int, ns: Sequence[int],
          policies: Sequence[str], train: bool) -> Iterator[dict[str, Any]]:
    for name in policies:
        for n in ns:
            yield decision(name, n, reps if n < 1024 else reps_large)
    if train:
        for arch in ("mlp", "lstm"):
            yield training(arch, updates)


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="p4cc bench rlcc")
    parser.add_argument("--updates", type=int, default=4, help="ADPG updates to time")
    parser.add_argument("--reps", type=int, default=2000, help="decisions to time at small N")
    parser.add_argument("--reps-large", type=int, default=50,
                        help="calls to time at N >= 1024")
    parser.add_argument("--ns", default=",".join(map(str, NS)), help="flows per call")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help="rlcc:<name> policies to time")
    parser.add_argument("--no-train", action="store_true", help="skip the training cases")
    args = parser.parse_args(list(argv))
    ns = [int(x) for x in args.ns.split(",") if x]
    return cases(args.updates, args.reps, args.reps_large, ns,
                 [p for p in args.policies.split(",") if p], not args.no_train)
