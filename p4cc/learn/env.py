"""The training environment: EcnTuningEnv with the action template, offline traffic mix
and the algorithm's reward.

* actions: one index per agent into the template (p4cc.controlplane.agents.template),
  EcnTuningEnv's template mode;
* traffic (ACC §4.3, PET §5.3): every episode draws one scenario and a load uniformly in
  ``load``: WebSearch or DataMining flows (Poisson, REFERENCE §4), ACC's incast (p senders
  in [2, 64] x q flows each in ``incast_flows``, 10 KB-10 MB), or a storage pattern of
  ACC Table 1 with an IO depth in ``io_depth``;
* reward per agent: ACC eq. (2) or PET eq. (6) (p4cc.controlplane.agents.state) with the
  weights of the episode's workload (``w_throughput``: ω1 / β1, and ω2 = 1 - ω1);
* hosts: ``host_cc``, as a spec's ``host_cc`` (default ``dcqcn``: the hpcc-ns3 set, whose
  rate floor is 1 Gb/s at 25 Gb/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from p4cc.controlplane.agents.state import (
    FEATURE_SCALINGS,
    acc_reward,
    features,
    pet_reward,
    unscaled_levels,
)
from p4cc.controlplane.agents.template import ActionTemplate
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.scale import get_scale
from p4cc.sim.cc import sim_cc
from p4cc.sim.envs import EcnTuningEnv
from p4cc.traffic import workloads as wl
from p4cc.traffic.cdf import load_cdf

SCENARIOS = ("websearch", "datamining", "incast", "storage")


@dataclass(frozen=True)
class EnvConfig:
    """Where the agents train: fabric, interval count, offline traffic, reward weights."""

    topo: str = field(default="leafspine,spines=2,leaves=2,hosts=4", metadata={
        "help": "simulated fabric (ACC §5.1 testbed: leafspine,spines=2,leaves=4,hosts=6)"})
    scale: str = field(default="paper", metadata={"help": "p4cc.scale preset of the sim"})
    intervals: int = field(default=100, metadata={"help": "intervals Δt per episode"})
    history: int = field(default=3, metadata={"help": "k past intervals (ACC §3.3: 3)"})
    scenarios: tuple[str, ...] = field(default=SCENARIOS, metadata={
        "help": "offline traffic drawn per episode (ACC §4.3, PET §5.3)"})
    load: tuple[float, float] = field(default=(0.1, 0.9), metadata={
        "help": "load range, uniform per episode (ACC §4.3: 10-90 %)"})
    incast_senders: tuple[int, int] = field(default=(2, 64), metadata={
        "help": "incast fan-in p (ACC §4.3: [2, 64], capped at the hosts)"})
    incast_flows: tuple[int, int] = field(default=(1, 100), metadata={
        "help": "flows per incast sender q (ACC §4.3: [1, 1000]; capped for sim speed)"})
    io_depth: tuple[int, int] = field(default=(1, 32), metadata={
        "help": "storage IO depth (REFERENCE §4: 1-128; capped for sim speed)"})
    w_throughput: tuple[tuple[str, float], ...] = field(default=(
        ("websearch", 0.3), ("datamining", 0.7), ("incast", 0.3), ("storage", 0.7)),
        metadata={"help": "ω1 (ACC) / β1 (PET) per workload, ω2 = 1 - ω1 (ACC §3.3, "
                          "PET §5.2: WebSearch 0.3, DataMining and storage 0.7)"})
    feature_scaling: str = field(default="log", metadata={
        "help": "queue and thresholds in the state: 'log' (log2 scale, one packet to the "
                "buffer) or 'linear' (/ buffer, the first shipped agents); "
                "p4cc.controlplane.agents.state.features"})
    host_cc: str = field(default="dcqcn", metadata={
        "help": "the hosts' congestion control, as a spec's host_cc (sim kinds): dcqcn "
                "(hpcc-ns3 set, 1 Gb/s rate floor at 25 Gb/s), dcqcn:<set>[,field=value...] "
                "e.g. dcqcn:hpcc-ns3,min_rate_bps=1e8 (floor 100 Mb/s, paper units), "
                "fixed:<rate>, rlcc[:<policy>]"})
    pfc: bool = field(default=False, metadata={
        "help": "lossless training fabric: PFC pauses the upstream port instead of dropping "
                "(p4cc.sim.pfc, alpha 1/8 of each switch's shared 10 MB pool; ACC §5.1 and "
                "PET §5.1 train and test on lossless fabrics); false: the lossy fabric of "
                "BMv2 and of checkpoints before session 25"})

    def __post_init__(self) -> None:
        bad = [s for s in self.scenarios if s not in SCENARIOS]
        if bad or not self.scenarios:
            raise ConfigError(f"scenarios must be among {SCENARIOS}, got {self.scenarios}")
        if not 0 < self.load[0] <= self.load[1] <= 1:
            raise ConfigError(f"load range must be within (0, 1], got {self.load}")
        if self.intervals < 1 or self.history < 1:
            raise ConfigError("intervals and history must be >= 1")
        if self.feature_scaling not in FEATURE_SCALINGS:
            raise ConfigError(f"feature_scaling must be one of {FEATURE_SCALINGS}, got "
                              f"{self.feature_scaling!r}")
        scale = get_scale(self.scale)
        try:  # the kind, and that the variant builds (DCQCN set and fields, RL-CC policy)
            sim_cc(self.host_cc, scale)
        except ConfigError as exc:
            raise ConfigError(f"env.host_cc {self.host_cc!r}: {exc}") from None

    def weight(self, workload: str) -> float:
        return dict(self.w_throughput).get(workload, 0.5)


def busy(obs: np.ndarray, n_feat: int) -> np.ndarray:
    """Per agent: did its port hold a queue or send anything in the state's latest
    interval (features 0 and 1 of the last ``n_feat``)?  An idle port's decision changes
    nothing it is paid for (ACC §4.2 lets idle queues skip inference)."""
    last = obs[:, -n_feat:]
    return (last[:, 0] > 0) | (last[:, 1] > 0)


def loss_weights(obs: np.ndarray, n_feat: int, learn_idle: bool) -> np.ndarray:
    """Per agent, the loss weight of the transition from ``obs``: 0 for an idle port
    (:func:`busy`) unless ``learn_idle``, else 1.  The one rule of ``p4cc train`` (ACC's
    and PET's ``run_phase``) and of the online agents (p4cc.learn.online)."""
    if learn_idle:
        return np.ones(len(obs), np.float32)
    return busy(obs, n_feat).astype(np.float32)


class TrainEnv(EcnTuningEnv):
    """EcnTuningEnv in template mode with the offline traffic mix and ACC's or PET's
    reward; ``info["agent_rewards"]`` holds the per-agent rewards of the algorithm."""

    def __init__(self, cfg: EnvConfig, algo: str, template: ActionTemplate,
                 q_unit_paper_bytes: float | None = None, feature_set: str | None = None,
                 pet_guard: str = "floor") -> None:
        """``feature_set``: the observation's features, "acc" (6) or "pet" (8); default
        the algorithm's own (PET without its two extra features: "acc").  ``pet_guard``:
        the empty-queue guard of PET's reward (p4cc.controlplane.agents.state.PET_GUARDS)."""
        if algo not in ("acc", "pet"):
            raise ConfigError(f"algo must be 'acc' or 'pet', got {algo!r}")
        scale = get_scale(cfg.scale)
        super().__init__(topo=cfg.topo, scale=cfg.scale, variant=feature_set or algo,
                         intervals=cfg.intervals, history=cfg.history,
                         settings=template.configs(scale), host_cc=cfg.host_cc,
                         pfc=cfg.pfc)
        self.env_cfg, self.algo, self.template = cfg, algo, template
        self.levels = unscaled_levels(scale.bytes(template.alpha_paper_bytes),
                                      template.n_levels)
        self.q_unit = scale.bytes(q_unit_paper_bytes or template.alpha_paper_bytes)
        self.incast_norm = float(len(self.topo.hosts))
        self.scenario, self.load = cfg.scenarios[0], cfg.load[0]
        self.pet_guard = pet_guard

    def _features(self, recs: list[PortTelemetry]) -> np.ndarray:
        """The deployed agent's features (p4cc.controlplane.agents.state.features) with
        this config's scaling, one row per agent."""
        by_key = {r.key: r for r in recs}
        pet, buf = self.n_feat == 8, self.scale.buffer_bytes
        return np.stack([features(by_key[k], buf, pet, self.incast_norm,
                                  self.env_cfg.feature_scaling) for k in self.keys])

    def _schedule(self, rng: np.random.Generator) -> pd.DataFrame:
        c = self.env_cfg
        hosts = [h.name for h in self.topo.hosts]
        choices = [s for s in c.scenarios if s != "storage" or len(hosts) >= 4]
        if not choices:
            raise ConfigError(f"no scenario of {c.scenarios} fits {len(hosts)} hosts")
        self.scenario = str(choices[int(rng.integers(len(choices)))])
        self.load = float(rng.uniform(*c.load))
        rate, t1 = self.scale.link_rate_bps, self.intervals * self.dt_interval
        if self.scenario == "incast":
            return wl.incast(rng, hosts, senders=c.incast_senders,
                             flows_per_sender=c.incast_flows, load=self.load, rate_bps=rate,
                             t0=0.0, t1=t1, tag="incast")
        if self.scenario == "storage":
            compute, storage = wl.storage_split(hosts)
            pattern = sorted(wl.STORAGE_PATTERNS)[int(rng.integers(len(wl.STORAGE_PATTERNS)))]
            depth = int(rng.integers(c.io_depth[0], c.io_depth[1] + 1))
            return wl.storage(rng, pattern=pattern, compute=compute, storage_nodes=storage,
                              io_depth=depth, rate_bps=rate, t0=0.0, t1=t1,
                              tag=f"storage-{pattern}", max_requests=20_000)
        return wl.poisson_flows(rng, load_cdf(self.scenario), hosts, self.load, rate, 0.0,
                                t1, self.scenario)

    def rewards(self, recs: list[PortTelemetry]) -> np.ndarray:
        by_key = {r.key: r for r in recs}
        util = np.array([by_key[k].utilization for k in self.keys])
        qlen = np.array([by_key[k].qlen_avg_bytes for k in self.keys])
        w1 = self.env_cfg.weight(self.scenario)
        if self.algo == "acc":
            return acc_reward(util, qlen, self.levels, w1, 1.0 - w1)
        return pet_reward(util, qlen, self.q_unit, w1, 1.0 - w1, self.pet_guard)

    def describe(self) -> dict[str, Any]:
        return {"topo": self.env_cfg.topo, "scale": self.scale.name, "agents": self.n_agents,
                "interval_s": self.dt_interval, "actions": self.template.n_actions,
                "obs_dim": self.history * self.n_feat, "incast_norm": self.incast_norm,
                "feature_scaling": self.env_cfg.feature_scaling,
                "host_cc": self.env_cfg.host_cc, "pfc": self.env_cfg.pfc}
