"""The data of the RL-CC distillation (p4cc.learn.rlcc_distill): states and labels.

States are the feature rows the student sees (window state, then observation: the trees'
input order), gathered from rollouts through the deployed rule: :func:`gather` on the
training episodes (p4cc.learn.rlcc_adpg.Episode; optionally with the executed action
jittered, :class:`_Jitter`, or another actor such as DAgger's mixture) and
:func:`incast_states` on one large N→1 incast (a random fraction of the decisions,
:class:`_Sampler`).  Labels are the teacher's pre-tanh output y (:func:`teacher_y`,
:func:`label`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from p4cc.hostcc import rlcc, rlcc_rule
from p4cc.hostcc.rlcc_policies import MlpPolicy
from p4cc.hostcc.rlcc_policy_base import BOUNDED_M, Policy, PolicyState
from p4cc.learn.rlcc_adpg import AdpgConfig, Episode
from p4cc.learn.rlcc_distill_dagger import Mixture
from p4cc.scale import get_scale
from p4cc.sim.cc import RlccHook
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo


def teacher_y(action: np.ndarray) -> np.ndarray:
    """The pre-tanh output y of a ``bounded`` action (inverse of apply_output)."""
    a = np.asarray(action, dtype=np.float64)
    u = np.where(a >= 1.0, (a - 1.0) / BOUNDED_M, (1.0 - 1.0 / a) / BOUNDED_M)
    return np.arctanh(np.clip(u, -0.999, 0.999))


class _Jitter:
    """Runs ``inner`` with its executed action multiplied by exp(σ·N(0, 1)) (kept in the
    bounded range): the rollout leaves the teacher's exact path, while the recorded labels
    stay the teacher's clean outputs at the states reached (DART, Laskey et al., CoRL
    2017: noise injected into the supervisor's own demonstrations)."""

    name = "distill-jitter"

    def __init__(self, inner: Policy, sigma: float, rng: np.random.Generator) -> None:
        self.inner, self.sigma, self.rng = inner, sigma, rng

    def initial_state(self, n: int) -> PolicyState:
        return self.inner.initial_state(n)

    def act(self, obs: np.ndarray, state: PolicyState) -> tuple[np.ndarray, PolicyState]:
        a, new = self.inner.act(obs, state)
        a = a * np.exp(self.sigma * self.rng.standard_normal(len(a)))
        return np.clip(a, 1.0 / (1.0 + BOUNDED_M), 1.0 + BOUNDED_M), new


def gather(teacher: MlpPolicy, seed: int | tuple[int, ...] = 7, episodes: int = 2,
           rtts: int = 2048, scenario_sets: tuple[tuple[int, ...], ...] = ((2, 4, 8), (16, 32)),
           noise: float = 0.0, actor: Policy | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features, teacher y) of every decision of the teacher's rollouts (``noise``: σ of
    :class:`_Jitter` on the executed action, 0: none; ``actor``: roll out this policy
    instead, e.g. DAgger's mixture, still labelled by the teacher)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    if actor is None:
        actor = _Jitter(teacher, noise, rng) if noise > 0 else teacher
    for scen in scenario_sets:
        cfg = AdpgConfig(scenarios=scen, copies=1, episode_rtts=rtts)
        for _ in range(episodes):
            ep = Episode(cfg, actor, rng)
            ep.rollout(rtts)
            for _ids, _k, obs, st in ep.recorder.log:
                feats = np.concatenate([st[0].reshape(len(obs), -1), obs], axis=1)
                xs.append(feats)
                ys.append(teacher_y(teacher.act(obs, st)[0]))
    return np.concatenate(xs), np.concatenate(ys)


class _Sampler:
    """Runs ``inner``; keeps a random ``keep`` fraction of its decisions as features
    (window state, then observation: the trees' input order)."""

    name = "distill-sampler"

    def __init__(self, inner: Policy, keep: float,
                 rng: np.random.Generator) -> None:
        self.inner, self.keep, self.rng = inner, keep, rng
        self.rows: list[np.ndarray] = []

    def initial_state(self, n: int) -> PolicyState:
        return self.inner.initial_state(n)

    def act(self, obs: np.ndarray, state: PolicyState) -> tuple[np.ndarray, PolicyState]:
        kept = self.rng.random(len(obs)) < self.keep
        if kept.any():
            self.rows.append(np.concatenate([state[0].reshape(len(obs), -1), obs], 1)[kept])
        return self.inner.act(obs, state)


def incast_states(teacher: MlpPolicy | Mixture, n: int, rtts: int, keep: float,
                  rng: np.random.Generator, start_rate_min: float = 0.02,
                  noise: float = 0.0) -> np.ndarray:
    """Features of a random ``keep`` fraction of the teacher's decisions on one N→1
    incast: the flows (over ≤ 63 senders, as ``rlcc_fixed_point``) start together, each
    at its own log-uniform rate in [start_rate_min, 1]·line (as the training episodes);
    ``noise``: σ of :class:`_Jitter` on the executed action."""
    senders = min(n, 63)
    topo = parse_topo(f"star,hosts={senders + 1}", get_scale("paper"))
    sc = topo.scale
    sched = pd.DataFrame({"flow_id": np.arange(n), "start_s": 0.0,
                          "src": [f"h{i % senders + 1}" for i in range(n)],
                          "dst": f"h{senders + 1}", "size_bytes": 0})
    sampler = _Sampler(_Jitter(teacher, noise, rng) if noise > 0 else teacher, keep, rng)
    params = rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc), pkt_bytes=sc.pkt_bytes)
    hook = RlccHook(params, sampler, rlcc_rule.decision_interval_s(sc))
    eng = Engine(topo, sched, SimConfig(cc="rlcc", host_traces=False,
                                        seed=int(rng.integers(2**31))), cc=hook)
    eng.step()  # admit every flow
    hook.state.rate[:n] = np.exp(rng.uniform(np.log(start_rate_min), 0.0, n)) * sc.link_rate_bps
    eng.run(rtts * sc.base_rtt_s)
    return np.concatenate(sampler.rows) if sampler.rows else np.zeros((0, 2 * teacher.window))


def label(teacher: MlpPolicy, x: np.ndarray) -> np.ndarray:
    """The teacher's pre-tanh output y on feature rows (window state, observation)."""
    k = teacher.window - 1
    state = (x[:, : 2 * k].reshape(len(x), k, 2),)
    return teacher_y(teacher.act(x[:, 2 * k:], state)[0])
