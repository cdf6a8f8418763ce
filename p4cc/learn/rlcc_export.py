"""Trained RL-CC policies on disk: the runtime file plus a JSON sidecar.

``<name>.npz`` is the runtime format (p4cc.hostcc.rlcc_policies: ``kind`` lstm or mlp,
output ``bounded``), loaded by ``rlcc:<file>``; ``<name>.json`` beside it names the exact
command, seed, git commit, configuration and final training figures, any evaluation
(:mod:`p4cc.learn.rlcc_eval`), and the policy's decisions on fixed probe sequences, so a
test can prove a committed file still makes the decisions recorded when it was trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.hostcc.rlcc_policies import LstmPolicy, MlpPolicy, save_lstm, save_mlp
from p4cc.hostcc.rlcc_policy_base import Policy
from p4cc.learn.runlog import provenance

PROBE_SEED, PROBE_FLOWS, PROBE_STEPS = 12345, 16, 12


def probe_obs(seed: int = PROBE_SEED) -> np.ndarray:
    """(steps, flows, 2) observation sequences around and far from the operating point."""
    rng = np.random.default_rng(seed)
    delta = rng.normal(0.0, 0.1, (PROBE_STEPS, PROBE_FLOWS))
    delta[:, : PROBE_FLOWS // 4] -= rng.exponential(2.0, (PROBE_STEPS, PROBE_FLOWS // 4))
    prev = rng.uniform(1 / 1.2, 1.2, (PROBE_STEPS, PROBE_FLOWS))
    return np.stack([np.minimum(delta, 0.064), prev], axis=-1)


def probe_decisions(policy: Policy, obs: np.ndarray | None = None) -> np.ndarray:
    """The policy's raw actions on the probe sequences (its state carried along)."""
    o = probe_obs() if obs is None else obs
    st = policy.initial_state(o.shape[1])
    out = []
    for t in range(o.shape[0]):
        a, st = policy.act(o[t], st)
        out.append(a)
    return np.stack(out)


def save_policy(out_dir: Path, policy: LstmPolicy | MlpPolicy, config: Any,
                final: dict[str, Any], command: list[str] | None = None,
                name: str | None = None) -> tuple[Path, Path]:
    """Write ``<name>.npz`` (default ``rlcc-adpg-<kind>``) and its sidecar ``.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or f"rlcc-adpg-{policy.name}"
    path = out_dir / f"{name}.npz"
    if isinstance(policy, LstmPolicy):
        save_lstm(path, policy)
    else:
        save_mlp(path, policy)
    side = out_dir / f"{name}.json"
    doc = {
        **provenance(path, config, getattr(config, "seed", None), command),
        "policy_file": path.name,
        "final_training": final,
        "probe": {"seed": PROBE_SEED, "flows": PROBE_FLOWS, "steps": PROBE_STEPS,
                  "decisions": np.round(probe_decisions(policy), 12).tolist()},
    }
    side.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path, side


def add_to_sidecar(side: Path, key: str, value: Any) -> None:
    """Record ``value`` under ``key`` in a sidecar (e.g. its evaluation)."""
    doc = json.loads(side.read_text())
    doc[key] = value
    side.write_text(json.dumps(doc, indent=1, default=str) + "\n")
