"""Online fine-tuning during a deployment run: ``acc:online`` and ``pet:online``.

The deployed agents (p4cc.controlplane.agents.learned) only run inference.  With
``acc:online[:<checkpoint>]`` or ``pet:online[:<checkpoint>]`` in a spec (or in the
Mininet CLI's ``agent`` command) every switch's agent keeps learning from the run's
own transitions, on either backend, as in the online phase of training (ACC §4.3 "online
training", PET §4.4.2 "online incremental training"):

* every port of the switch gets its own copy of the checkpoint's network (its
  ``<switch>:<port>`` net when the checkpoint has one, else ``main``), G = ports;
* a transition is (state at interval t, action chosen at t, reward of the record of
  interval t+1, state at t+1): the record after a decision shows its effect;
* ACC: ε-greedy with ε_t = 0.2·0.99^(t/50) (p4cc.learn.acc.online_epsilon), local
  replay per port, sampled by reward priority (``online_priority``, §4.3), plus ONE
  global memory shared by every switch's agents of the run,
  exchanged every ``exchange_every`` intervals (§3.4), one DDQN step every
  ``train_every`` intervals after ``learning_starts`` (p4cc.learn.acc.update), target
  copy every ``target_every`` steps;
* PET: actions sampled from the ε-mixed policy (eq. 13, p4cc.learn.pet.act), one IPPO
  update (GAE, clipped objective; p4cc.learn.pet.rollout_batch / update) per
  ``rollout`` intervals.  The checkpoint holds the actor only, so the critic starts
  untrained (a fresh network of the actor's hidden sizes).

Like training on the simulator, the online agent infers on every port (ACC's idle-queue
rule saves switch CPU and is not part of learning).  ``OnlineRun.save`` writes the
fine-tuned weights (``<algo>-online.npz``, loadable as ``acc:<path>``) and a JSON
sidecar to the run directory.  torch is imported only when an OnlineRun is created;
without the ``train`` extra that raises a ConfigError saying how to install it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.controlplane.agents.learned import DEFAULT_CHECKPOINTS, LearnedAgent
from p4cc.controlplane.agents.mlp import Layers, save_npz
from p4cc.controlplane.agents.state import acc_reward, pet_reward
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.scale import Scale

#: what to run when torch is missing (the ``train`` extra of pyproject.toml)
TRAIN_EXTRA = "pip install -e '.[train]'"


def require_torch(what: str) -> None:
    """ConfigError naming the ``train`` extra unless torch can be imported."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{what}: online fine-tuning needs torch, which is not "
                          f"installed ({exc}); install the train extra: {TRAIN_EXTRA}"
                          ) from None


#: the AccConfig / PetConfig fields an online agent reads (OnlineAcc / OnlinePet below), the
#: ones ``acc:online,field=value`` may set; the others (template, network, training
#: fabric, ...) come from the checkpoint or the run
ONLINE_FIELDS: dict[str, tuple[str, ...]] = {
    "acc": ("gamma", "lr", "batch_size", "local_capacity", "global_capacity",
            "exchange_every", "exchange_push", "exchange_pull", "learning_starts",
            "train_every", "target_every", "online_eps", "online_decay",
            "online_decay_steps", "online_priority", "learn_idle"),
    "pet": ("gamma", "gae_lambda", "clip", "lr_actor", "lr_critic", "rollout", "epochs",
            "minibatches", "entropy_coef", "explore", "explore_decay", "explore_steps",
            "learn_idle"),
}


def online_overrides(algo: str, items: list[str], name: str = "") -> tuple[tuple[str, Any], ...]:
    """``["online_priority=0", "learning_starts=20"]`` -> the typed (field, value) pairs
    for OnlineConfig.settings, checked against ONLINE_FIELDS and the config's ranges
    (ConfigError naming ``name``, the agent, and the item).  Needs torch (the configs
    live beside the training code, which imports it)."""
    label = name or f"{algo}:online"
    if not items:
        return ()
    require_torch(label)
    from p4cc.learn.settings import ALGOS, cast_value

    module, cls = ALGOS[algo]
    base = getattr(importlib.import_module(module), cls)()
    allowed = ONLINE_FIELDS[algo]
    values: dict[str, Any] = {}
    for item in items:
        key, _, text = (x.strip() for x in item.partition("="))
        if key not in allowed:
            raise ConfigError(f"agent {label!r}: {key!r} is not an online setting of "
                              f"{algo}; choose from {', '.join(allowed)}")
        try:
            value = cast_value(text, getattr(base, key))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"agent {label!r}: {key}={text}: {exc}") from None
        values[key] = value
    try:  # the config's own checks (p4cc.learn.settings.RANGES)
        dataclasses.replace(base, **values)
    except ConfigError as exc:
        raise ConfigError(f"agent {label!r}: {exc}") from None
    return tuple(values.items())


@dataclass(frozen=True)
class OnlineConfig:
    """How a run's online agents learn (defaults: the online phase of ``p4cc train``)."""

    seed: int = field(default=1, metadata={
        "help": "seeds exploration and updates (switch i of the run uses seed + i)"})
    workload: str = field(default="websearch", metadata={
        "help": "workload whose reward weights ω1/β1 the agents are paid with when the "
                "checkpoint names none (ACC §3.3, PET §5.2: WebSearch 0.3, DataMining 0.7)"})
    settings: tuple[tuple[str, Any], ...] = field(default=(), metadata={
        "help": "AccConfig / PetConfig fields to override, e.g. (('learning_starts', 20),)"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads of the process"})


def group_from_layers(per_group: list[Layers]) -> Any:
    """A p4cc.learn.nets.GroupMLP whose group g holds the numpy layers ``per_group[g]``."""
    import torch

    from p4cc.learn.nets import GroupMLP

    first = per_group[0]
    sizes = (first[0][0].shape[1], *(w.shape[0] for w, _ in first))
    net = GroupMLP(len(per_group), sizes)
    with torch.no_grad():
        for i in range(len(first)):
            net.weights[i].copy_(torch.as_tensor(np.stack([g[i][0] for g in per_group])))
            net.biases[i].copy_(torch.as_tensor(np.stack([g[i][1] for g in per_group])[:, None]))
    return net


class _OnlineAgent:
    """One switch: the deployed agent's features and template, a torch copy per port."""

    cfg: Any  # the AccConfig / PetConfig the subclass builds from the run's settings

    def __init__(self, run: OnlineRun, scale: Scale, seed: int) -> None:
        import torch

        self.run, self.seed = run, seed
        self.base = LearnedAgent(run.algo, scale, run.path)
        self.name = f"{run.algo}:online"
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.ports: list[int] = []
        self.keys: list[str] = []
        self.t = 0  # intervals acted online
        self.updates = 0
        self.last_loss: float | None = None
        self._prev: tuple[np.ndarray, np.ndarray] | None = None
        meta, w = self.base.meta, run.config.workload
        weights = meta.get("reward") or {"w1": _w1(w), "w2": 1.0 - _w1(w)}
        self.w1, self.w2 = float(weights["w1"]), float(weights["w2"])
        self.q_unit = scale.bytes(float(meta.get("q_unit_paper_bytes",
                                                 self.base.template.alpha_paper_bytes)))

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self.base.reset(ports)
        self._prev = None  # no transition spans a reset (or a swap)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        if not obs:
            return {}
        states = self.base.observe(obs)
        if not self.ports:
            self.ports = sorted(obs)
            self.keys = [f"{obs[p].switch}:{p}" for p in self.ports]
            with self.run.lock:
                self._build([self.base.nets.get(k, self.base.nets["main"]) for k in self.keys])
        if any(p not in obs for p in self.ports):  # a port without a record: no step
            self._prev = None
            return {}
        x = np.stack([states[p] for p in self.ports])
        recs = [obs[p] for p in self.ports]
        util = np.array([r.utilization for r in recs])
        qlen = np.array([r.qlen_avg_bytes for r in recs])
        if self.run.algo == "acc":
            rew = acc_reward(util, qlen, self.base.levels, self.w1, self.w2)
        else:
            rew = pet_reward(util, qlen, self.q_unit, self.w1, self.w2,
                             str(self.base.meta.get("q_guard", "floor")))
        if self._prev is not None:
            from p4cc.learn.env import loss_weights  # training's rule (idle ports: 0)

            self._learn(self._prev[0], self._prev[1], np.asarray(rew, np.float32), x,
                        loss_weights(self._prev[0], self.base.n_feat, self.cfg.learn_idle))
        act = self._choose(x)
        self._prev = (x, act)
        self.t += 1
        out: dict[int, EcnConfig] = {}
        for port, a in zip(self.ports, act, strict=True):
            cfg = self.base.settings[int(a)]
            if cfg != obs[port].ecn:
                out[port] = cfg
        return out

    def layers(self) -> dict[str, Layers]:
        """The fine-tuned network of every port, keyed ``<switch>:<port>``."""
        net = self._net()
        if net is None:
            return {}
        return {k: net.layers(g) for g, k in enumerate(self.keys)}

    def summary(self) -> dict[str, Any]:
        return {"ports": self.keys, "intervals": self.t, "updates": self.updates,
                "last_loss": self.last_loss, "seed": self.seed}

    # -- per algorithm ---------------------------------------------------------------
    def _build(self, layers: list[Layers]) -> None:
        raise NotImplementedError

    def _net(self) -> Any:
        raise NotImplementedError

    def _choose(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _learn(self, obs: np.ndarray, act: np.ndarray, rew: np.ndarray,
               next_obs: np.ndarray, weight: np.ndarray) -> None:
        raise NotImplementedError


def _w1(workload: str) -> float:
    from p4cc.learn.env import EnvConfig

    return EnvConfig().weight(workload)


class OnlineAcc(_OnlineAgent):
    """ACC's online DDQN (Algorithm 1, §3.4, §4.3) on this switch's ports."""

    def _build(self, layers: list[Layers]) -> None:
        import torch

        from p4cc.learn import acc
        from p4cc.learn.replay import ReplayMemory

        self.cfg = dataclasses.replace(acc.AccConfig(), **dict(self.run.config.settings))
        self.qnet = group_from_layers(layers)
        self.target = group_from_layers(layers)
        self.opt = torch.optim.Adam(self.qnet.parameters(), lr=self.cfg.lr)
        self.mem = ReplayMemory(len(layers), self.qnet.sizes[0], self.cfg.local_capacity,
                                self.cfg.global_capacity)
        if self.run.shared is None:  # one global memory for the run's agents (§3.4)
            self.run.shared = self.mem.glob
        elif self.run.shared.obs.shape[-1] == self.mem.glob.obs.shape[-1]:
            self.mem.glob = self.run.shared
        self.grad_steps = 0

    def _net(self) -> Any:
        return getattr(self, "qnet", None)

    def _choose(self, x: np.ndarray) -> np.ndarray:
        from p4cc.learn import acc

        eps = acc.online_epsilon(self.t, self.cfg)
        return acc.select_actions(self.qnet, x, eps, self.base.template.n_actions, self.rng)

    def _learn(self, obs: np.ndarray, act: np.ndarray, rew: np.ndarray,
               next_obs: np.ndarray, weight: np.ndarray) -> None:
        from p4cc.learn import acc

        cfg = self.cfg
        self.mem.add(obs, act, rew, next_obs, weight)  # Alg. 1 line 6
        if self.t % cfg.exchange_every == 0:
            with self.run.lock:
                self.mem.exchange(self.rng, cfg.exchange_push, cfg.exchange_pull)
        if not acc.update_due(self.t, cfg):
            return
        b = acc.to_tensors(self.mem.sample(self.rng, cfg.batch_size, cfg.online_priority),
                           self.qnet.groups)
        self.last_loss = acc.update(self.qnet, self.target, self.opt, b, cfg.gamma)
        self.updates += 1
        if self.updates % cfg.target_every == 0:  # Alg. 1 line 9
            self.target.load_state_dict(self.qnet.state_dict())


class OnlinePet(_OnlineAgent):
    """PET's online IPPO (§4.3-4.4) on this switch's ports: one actor-critic per port."""

    _KEYS = ("obs", "next", "act", "logp", "rew", "done", "eps", "w")

    def _build(self, layers: list[Layers]) -> None:
        import torch

        from p4cc.learn import pet
        from p4cc.learn.nets import PAPER_HIDDEN, GroupMLP

        self.cfg = dataclasses.replace(pet.PetConfig(), **dict(self.run.config.settings))
        self.actor = group_from_layers(layers)
        hidden = tuple(self.base.meta.get("hidden", PAPER_HIDDEN))
        torch.manual_seed(self.seed)
        self.critic = GroupMLP(len(layers), (self.actor.sizes[0], *hidden, 1))
        self.opt_a = torch.optim.Adam(self.actor.parameters(), lr=self.cfg.lr_actor)
        self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=self.cfg.lr_critic)
        self.buf: dict[str, list[np.ndarray]] = {k: [] for k in self._KEYS}
        self._pending: tuple[np.ndarray, float] = (np.zeros(0), 0.0)

    def _net(self) -> Any:
        return getattr(self, "actor", None)

    def _choose(self, x: np.ndarray) -> np.ndarray:
        from p4cc.learn import pet

        eps = pet.exploration(self.t, self.cfg)
        a, logp = pet.act(self.actor, x, eps, self.gen)
        self._pending = (logp, eps)
        return a

    def _learn(self, obs: np.ndarray, act: np.ndarray, rew: np.ndarray,
               next_obs: np.ndarray, weight: np.ndarray) -> None:
        from p4cc.learn import pet

        n = len(obs)
        logp, eps = self._pending
        for k, v in (("obs", obs), ("next", next_obs), ("act", act), ("logp", logp),
                     ("rew", rew), ("done", np.zeros(n)), ("eps", np.full(n, eps)),
                     ("w", weight)):
            self.buf[k].append(np.asarray(v))
        if len(self.buf["obs"]) < self.cfg.rollout:
            return
        arr = {k: np.stack(v, axis=1) for k, v in self.buf.items()}  # (N, T, ...)
        self.buf = {k: [] for k in self._KEYS}
        b = pet.rollout_batch(arr, self.critic, self.actor.groups, self.cfg)
        pl, _vl = pet.update(self.actor, self.critic, self.opt_a, self.opt_c, b, self.cfg,
                             self.gen)
        self.last_loss = pl
        self.updates += 1


class OnlineRun:
    """The online agents of one run (one per switch): they share ACC's global replay
    memory; ``save`` writes their fine-tuned weights and a sidecar."""

    def __init__(self, algo: str, path: str | Path | None = None,
                 config: OnlineConfig | None = None) -> None:
        if algo not in ("acc", "pet"):
            raise ConfigError(f"online fine-tuning exists for acc and pet, not {algo!r}")
        require_torch(f"{algo}:online")
        import torch

        self.algo = algo
        self.path = Path(path) if path else DEFAULT_CHECKPOINTS[algo]
        self.config = config or OnlineConfig()
        torch.set_num_threads(self.config.threads)
        self.agents: list[_OnlineAgent] = []
        self.lock = threading.Lock()
        self.shared: Any = None  # ACC's global memory (p4cc.learn.replay._Ring)

    def make(self, scale: Scale) -> _OnlineAgent:
        """A new agent for one switch (seeded seed + its index in the run)."""
        cls = OnlineAcc if self.algo == "acc" else OnlinePet
        agent = cls(self, scale, self.config.seed + len(self.agents))
        self.agents.append(agent)
        return agent

    def save(self, out_dir: str | Path, command: list[str] | None = None
             ) -> tuple[Path, Path] | None:
        """``<algo>-online.npz`` (the checkpoint's nets, each port's fine-tuned net as
        ``<switch>:<port>``) and ``<algo>-online.json``; None if no agent acted."""
        from p4cc.learn.runlog import provenance

        tuned: dict[str, Layers] = {}
        for agent in self.agents:
            tuned.update(agent.layers())
        if not tuned:
            return None
        base = self.agents[0].base
        nets = {**base.nets, **tuned}
        meta = {**base.meta, "online": {"base_checkpoint": str(self.path),
                                        "tuned": sorted(tuned)}}
        out = Path(out_dir)
        npz = save_npz(out / f"{self.algo}-online.npz", nets, meta)
        side = out / f"{self.algo}-online.json"
        doc = {**provenance(npz, self.config, self.config.seed, command),
               "checkpoint": npz.name, "base_checkpoint": str(self.path),
               "agents": [a.summary() for a in self.agents], "meta": meta}
        side.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        return npz, side
