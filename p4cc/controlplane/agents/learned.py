"""ACC and PET as deployed agents: a numpy forward pass of exported weights per interval.

One agent object per switch (p4cc.controlplane.agents.base).  Per port and interval:
features of the record (p4cc.controlplane.agents.state) into the port's k-interval
history with NCM expiry; ACC skips idle queues (ACC §4.2); the network picks an action
index (ACC: argmax Q, ACC Algorithm 1 line 4; PET: the policy's most probable action,
deterministic at deployment); the action template (p4cc.controlplane.agents.template)
turns it into an EcnConfig on this fabric's scale; only changed settings are returned.
Weights come from ``p4cc train`` (.npz, p4cc.controlplane.agents.mlp); no torch here.
Registered as ``acc`` and ``pet``; ``acc:<path>`` picks a checkpoint file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from p4cc.controlplane.agents.mlp import forward, load_npz
from p4cc.controlplane.agents.state import (
    ACC_FEATURES,
    PET_FEATURES,
    History,
    IdleRule,
    acc_reward,
    features,
    unscaled_levels,
)
from p4cc.controlplane.agents.template import ActionTemplate
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.paths import DATA_DIR
from p4cc.scale import Scale

#: Where ``acc`` / ``pet`` without a path look for their checkpoint (p4cc/data/agents).
DEFAULT_CHECKPOINTS = {"acc": DATA_DIR / "agents" / "acc.npz",
                       "pet": DATA_DIR / "agents" / "pet.npz"}


class LearnedAgent:
    """A trained ACC or PET policy for one switch (numpy inference only)."""

    def __init__(self, name: str, scale: Scale, path: str | Path) -> None:
        self.nets, self.meta = load_npz(path)
        algo = self.meta.get("algo")
        if algo != name:
            raise ConfigError(f"checkpoint {path} holds a {algo!r} agent, not {name!r}")
        self.name, self.scale, self.path = name, scale, Path(path)
        self.template = ActionTemplate(**self.meta["template"])
        self.settings = self.template.configs(scale)
        self.pet = name == "pet"
        self.k = int(self.meta["history"])
        # PET trained without its two extra features (PetConfig.extra_features) has 6
        self.n_feat = int(self.meta.get("n_feat", PET_FEATURES if self.pet else ACC_FEATURES))
        self.incast_norm = float(self.meta.get("incast_norm", 1.0))
        # checkpoints before the log scale have no "feature_scaling": linear
        self.feature_scaling = str(self.meta.get("feature_scaling", "linear"))
        n_out = self.nets["main"][-1][0].shape[0]
        n_in = self.nets["main"][0][0].shape[1]
        if n_out != self.template.n_actions or n_in != self.k * self.n_feat:
            raise ConfigError(f"checkpoint {path}: network {n_in}->{n_out} does not match "
                              f"{self.k}x{self.n_feat} features -> "
                              f"{self.template.n_actions} actions")
        self.levels = unscaled_levels(scale.bytes(self.template.alpha_paper_bytes),
                                      self.template.n_levels)
        self.idle_rule: IdleRule | None = None
        self._hist: dict[int, History] = {}
        self.reset({})

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self._current = dict(ports)
        self._hist = {}
        use_idle = not self.pet and bool(self.meta.get("idle_rule", True))
        self.idle_rule = IdleRule() if use_idle else None

    def _net(self, rec: PortTelemetry) -> str:
        key = f"{rec.switch}:{rec.port}"
        return key if key in self.nets else "main"

    def observe(self, obs: Mapping[int, PortTelemetry]) -> dict[int, np.ndarray]:
        """Push this interval's features of every port into its history; returns each
        port's state, the k-interval window (k·n_feat,), oldest first."""
        out: dict[int, np.ndarray] = {}
        for port in sorted(obs):
            rec = obs[port]
            hist = self._hist.setdefault(port, History(self.k, self.n_feat))
            hist.push(rec.t_s, features(rec, self.scale.buffer_bytes,
                                        self.n_feat == PET_FEATURES, self.incast_norm,
                                        self.feature_scaling))
            out[port] = hist.window(rec.t_s, rec.interval_s)
        return out

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        busy: dict[str, list[tuple[int, np.ndarray]]] = {}
        states = self.observe(obs)
        for port in sorted(obs):
            rec, x = obs[port], states[port]
            if self.idle_rule is not None:
                w = self.meta["reward"]
                r = float(acc_reward(rec.utilization, rec.qlen_avg_bytes, self.levels,
                                     w["w1"], w["w2"]))
                kmin = rec.ecn.kmin_bytes if rec.ecn else None
                if self.idle_rule.step(port, rec.qlen_avg_bytes, kmin, r):
                    continue
            busy.setdefault(self._net(rec), []).append((port, x))
        out: dict[int, EcnConfig] = {}
        for net, items in busy.items():
            scores = forward(self.nets[net], np.stack([x for _, x in items]))
            for (port, _), a in zip(items, np.argmax(scores, axis=1), strict=True):
                cfg = self.settings[int(a)]
                if cfg != obs[port].ecn:
                    out[port] = cfg
        self._current.update(out)
        return out

    def decide(self, x: np.ndarray, net: str = "main") -> np.ndarray:
        """Action indices for a batch of states ``x`` (n, k·n_feat): the tested core."""
        return np.argmax(forward(self.nets[net], x), axis=-1)


def _make(name: str, scale: Scale, arg: str | None) -> LearnedAgent:
    path = Path(arg) if arg else DEFAULT_CHECKPOINTS[name]
    return LearnedAgent(name, scale, path)


def make_acc(scale: Scale, arg: str | None = None) -> LearnedAgent:
    return _make("acc", scale, arg)


def make_pet(scale: Scale, arg: str | None = None) -> LearnedAgent:
    return _make("pet", scale, arg)
