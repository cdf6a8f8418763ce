"""Gymnasium environments on the simulator.

``EcnTuningEnv`` -- multi-agent ECN tuning (ACC, PET): one agent per switch egress queue,
all stepped together once per interval Δt.  Per agent:

* observation: the last ``history`` intervals (ACC §3.3: k = 3) of queue length / buffer,
  tx rate / port rate, marked tx rate / port rate, and the setting in force (Kmin/buffer,
  Kmax/buffer, Pmax); ``variant="pet"`` adds PET's incast degree / hosts and
  mice-elephant ratio r/(1+r) (PET §4.2.1 eq. 2).
* action (MultiDiscrete per agent): (Kmax index, Kmin index, Pmax index) on ACC's grid
  (ACC §3.3): Kmin ∈ E(n) = 20·2^n KB, n = 0..9; Kmax ∈ {1, 2, 5, 10} MB; Pmax ∈
  {1 %, 5 %, 10 %, ..., 100 %}; thresholds scaled by the BDP factor, Kmax clipped to the
  buffer and Kmin to Kmax.
* hosts: ``host_cc`` as a spec names it (default ``dcqcn``, the hpcc-ns3 set; e.g.
  ``dcqcn:hpcc-ns3,min_rate_bps=1e8`` for a 100 Mb/s rate floor; p4cc.sim.cc.sim_cc).
* fabric: lossy by default; ``pfc=True`` makes it lossless (SimConfig.pfc, α = 1/8 of
  each switch's shared pool as ACC §5.1/§5.4), as the papers' testbeds are.
* reward: ACC eq. 2, r = ω1·txRate/BW + ω2·D(L), D(L) = 1 − n/10 with n the first grid
  index with E(n) ≥ L (L the mean queue length; 0 beyond E(9)); ω1 = 0.3, ω2 = 0.7 for
  WebSearch (PET §5.1 / ACC).  ``step`` returns the mean over agents; per-agent rewards
  are ``info["agent_rewards"]``.

``RlccEnv`` -- vectorized RL-CC: N long flows many-to-one into one port; every flow is an
agent deciding once per base RTT.  Observation per flow (δ, previous action), action per
flow a multiplicative rate change in [1/1.2, 1.2], reward per flow −δ² (REFERENCE §3),
all through p4cc.hostcc.rlcc.step.  ``step`` returns the mean reward; per-flow rewards
are ``info["rewards"]``.  ``signal="qdepth"``: the INT variant -- δ from the largest queue
on the flow's path (delivered with each RTT answer) instead of the RTT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc
from p4cc.scale import get_scale
from p4cc.sim.cc import RlccHook, sim_cc
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo

#: ACC §3.3 grids (paper bytes, before BDP scaling).
KMIN_GRID = tuple(20_000 * 2**n for n in range(10))
KMAX_GRID = (1_000_000, 2_000_000, 5_000_000, 10_000_000)
PMAX_GRID = (0.01, *(0.05 * j for j in range(1, 21)))


class EcnTuningEnv(gym.Env[np.ndarray, np.ndarray]):
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, topo: str = "leafspine,spines=2,leaves=2,hosts=4", scale: str = "paper",
                 load: float = 0.6, workload: str = "websearch", variant: str = "acc",
                 intervals: int = 20, interval_s: float | None = None, history: int = 3,
                 w_throughput: float = 0.3, w_delay: float = 0.7, dt_s: float | None = None,
                 settings: Sequence[EcnConfig] | None = None, host_cc: str = "dcqcn",
                 pfc: bool = False) -> None:
        if variant not in ("acc", "pet"):
            raise ConfigError(f"variant must be 'acc' or 'pet', got {variant!r}")
        self.topo = parse_topo(topo, get_scale(scale))
        self.scale = self.topo.scale
        self.variant, self.load, self.workload = variant, load, workload
        self.intervals, self.history = intervals, history
        self.w1, self.w2 = w_throughput, w_delay
        cc, cc_params = sim_cc(host_cc, self.scale)
        self.cfg = SimConfig(telemetry_interval_s=interval_s, dt_s=dt_s, host_traces=False,
                             cc=cc, cc_params=cc_params, pfc=pfc)
        self.dt_interval = self.cfg.interval(self.scale)
        self.keys = [(sw.name, p) for sw in self.topo.switches
                     for p, *_ in sorted(self.topo.switch_links(sw.name))]
        self.n_agents = len(self.keys)
        buf = self.scale.buffer_bytes
        self.kmin = [max(self.scale.pkt_bytes, min(buf, round(self.scale.bytes(k))))
                     for k in KMIN_GRID]
        self.kmax = [max(self.scale.pkt_bytes, min(buf, round(self.scale.bytes(k))))
                     for k in KMAX_GRID]
        self.n_feat = 8 if variant == "pet" else 6
        self.action_space = spaces.MultiDiscrete(
            np.tile([len(KMAX_GRID), len(KMIN_GRID), len(PMAX_GRID)], (self.n_agents, 1)))
        # template mode (p4cc.learn): one index per agent into ``settings``
        self.settings = list(settings) if settings is not None else None
        if self.settings is not None:
            self.action_space = spaces.MultiDiscrete([len(self.settings)] * self.n_agents)
        self.observation_space = spaces.Box(0.0, 1.0, (self.n_agents, history * self.n_feat),
                                            np.float32)
        self._hist = np.zeros((self.n_agents, history, self.n_feat), np.float32)
        self.engine: Engine | None = None
        self._k = 0

    def setting(self, action: np.ndarray) -> EcnConfig:
        ki, kn, pj = (int(x) for x in action)
        kmax = self.kmax[ki]
        return EcnConfig(min(self.kmin[kn], kmax), kmax, float(PMAX_GRID[pj]))

    def _schedule(self, rng: np.random.Generator) -> pd.DataFrame:
        from p4cc.traffic.cdf import load_cdf
        from p4cc.traffic.workloads import poisson_flows

        hosts = [h.name for h in self.topo.hosts]
        return poisson_flows(rng, load_cdf(self.workload), hosts, self.load,
                             self.scale.link_rate_bps, 0.0,
                             self.intervals * self.dt_interval, self.workload)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        s = int(self.np_random.integers(2**31))
        cfg = SimConfig(**{**self.cfg.to_dict(), "seed": s})
        self.engine = Engine(self.topo, self._schedule(np.random.default_rng(s)), cfg,
                             ecn=self.setting(np.array([0, 0, 0])))
        self._hist[:] = 0.0
        self._k = 0
        return self._obs_after(self._run()), {}

    def _run(self) -> list[PortTelemetry]:
        eng = self.engine
        assert eng is not None
        n0 = len(eng.telemetry)
        while len(eng.telemetry) == n0:
            eng.step()
        recs = eng.telemetry[n0:]
        eng.telemetry.clear()  # the env keeps no history beyond its window
        return recs

    def _features(self, recs: list[PortTelemetry]) -> np.ndarray:
        buf, n_hosts = self.scale.buffer_bytes, len(self.topo.hosts)
        f = np.zeros((self.n_agents, self.n_feat), np.float32)
        by_key = {r.key: r for r in recs}
        for i, key in enumerate(self.keys):
            r = by_key[key]
            rate = r.tx_bps / max(r.utilization, 1e-12) if r.utilization > 0 else 1.0
            e = r.ecn
            f[i, :6] = (r.qlen_avg_bytes / buf, r.utilization, r.tx_marked_bps / rate
                        if r.utilization > 0 else 0.0, e.kmin_bytes / buf if e else 1.0,
                        e.kmax_bytes / buf if e else 1.0, e.pmax if e else 0.0)
            if self.variant == "pet":
                me = r.mice_elephant_ratio
                f[i, 6:] = (r.incast_degree / n_hosts, me / (1.0 + me))
        return np.clip(f, 0.0, 1.0)

    def _obs_after(self, recs: list[PortTelemetry]) -> np.ndarray:
        self._hist = np.roll(self._hist, -1, axis=1)
        self._hist[:, -1] = self._features(recs)
        self._last = recs
        return self._hist.reshape(self.n_agents, -1).copy()

    def rewards(self, recs: list[PortTelemetry]) -> np.ndarray:
        by_key = {r.key: r for r in recs}
        out = np.zeros(self.n_agents)
        grid = np.array([self.scale.bytes(k) for k in KMIN_GRID])
        for i, key in enumerate(self.keys):
            r = by_key[key]
            n = int(np.searchsorted(grid, r.qlen_avg_bytes, side="left"))
            out[i] = self.w1 * r.utilization + self.w2 * (1.0 - min(n, 10) / 10.0)
        return out

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        eng = self.engine
        if eng is None:
            raise ConfigError("call reset() before step()")
        a = np.asarray(action).reshape(self.n_agents, 3 if self.settings is None else 1)
        for key, act in zip(self.keys, a, strict=True):
            eng.set_ecn(key, self.setting(act) if self.settings is None
                        else self.settings[int(act[0])])
        recs = self._run()
        r = self.rewards(recs)
        self._k += 1
        return (self._obs_after(recs), float(r.mean()), False, self._k >= self.intervals,
                {"agent_rewards": r, "t_s": eng.t})


class RlccEnv(gym.Env[np.ndarray, np.ndarray]):
    """N flows from ``senders`` hosts into one receiver; one decision per flow per step."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, n_flows: int = 16, senders: int = 8, scale: str = "paper",
                 episode_steps: int = 200, decision_s: float | None = None,
                 dt_s: float | None = None, target: float = rlcc.DEFAULT_TARGET,
                 beta: float = rlcc.DEFAULT_BETA,
                 signal: Literal["rtt", "qdepth"] = "rtt") -> None:
        if not 1 <= senders <= 63 or n_flows < 1:
            raise ConfigError("RlccEnv needs 1..63 senders and at least one flow")
        self.topo = parse_topo(f"star,hosts={senders + 1}", get_scale(scale))
        self.scale = self.topo.scale
        self.n, self.senders, self.episode_steps = n_flows, senders, episode_steps
        self.params = rlcc.RlccParams(self.scale.link_rate_bps, rlcc.norm_rtt_s(self.scale),
                                      target=target, beta=beta, pkt_bytes=self.scale.pkt_bytes,
                                      signal=signal)
        self.decision_s = decision_s or self.scale.base_rtt_s
        self.cfg = SimConfig(cc="rlcc", dt_s=dt_s, host_traces=False,
                             rtt_probe_interval_s=self.decision_s,
                             telemetry_interval_s=1e6)  # no telemetry needed
        self.action_space = spaces.Box(self.params.action_min, self.params.action_max,
                                       (n_flows,), np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, (n_flows, 2), np.float32)
        self.engine: Engine | None = None
        self.hook: RlccHook | None = None
        self._k = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        s = int(self.np_random.integers(2**31))
        n, k = self.n, self.senders
        sched = pd.DataFrame({"flow_id": np.arange(n), "start_s": 0.0,
                              "src": [f"h{i % k + 1}" for i in range(n)],
                              "dst": f"h{k + 1}", "size_bytes": 0})
        self.hook = RlccHook(self.params, None)
        cfg = SimConfig(**{**self.cfg.to_dict(), "seed": s})
        self.engine = Engine(self.topo, sched, cfg, cc=self.hook)
        self.engine.step()  # admit every flow
        self._k = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        assert self.hook is not None and self.engine is not None
        st, slots = self.hook.state, self._slots()
        return np.stack([st.delta[slots], st.prev_action[slots]], axis=1).astype(np.float32)

    def _slots(self) -> np.ndarray:
        assert self.engine is not None
        eng = self.engine
        order = np.argsort(eng.row[:eng.cap][eng.active])
        return eng.active.nonzero()[0][order]

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        eng, hook = self.engine, self.hook
        if eng is None or hook is None:
            raise ConfigError("call reset() before step()")
        slots = self._slots()
        mask = np.zeros(eng.cap, dtype=np.bool_)
        mask[slots] = True
        hook.decide(mask, eng.rtt_last, np.asarray(action, dtype=np.float64).reshape(-1))
        eng.run(eng.t + self.decision_s)
        # δ of the new state: latest RTT sample (signal "qdepth": its INT path-max queue),
        # current rate (what the next decision sees)
        infl = hook.inflation(eng.rtt_last)[slots]
        rate = hook.state.rate[slots] / self.params.line_rate_bps
        delta = rlcc.compute_delta(infl, rate, self.params.target, self.params.beta)
        hook.state.delta[slots] = delta
        rewards = -(delta ** 2)
        self._k += 1
        info = {"rewards": rewards, "inflation": infl, "rate": rate, "t_s": eng.t}
        return self._obs(), float(rewards.mean()), False, self._k >= self.episode_steps, info
