"""ACC (SIGCOMM '21): one DDQN agent per switch egress queue, trained on the simulator.

Read top to bottom (cleanrl style).  Paper sections: state §3.3 / §4.1 (k = 3 intervals
of queue, tx rate, marked tx rate, setting in force; p4cc.controlplane.agents.state),
actions §3.3 + §5.4 (55 × 20 template, p4cc.controlplane.agents.template), reward
eq. (2) with D(L) of Fig. 4, DDQN with a periodically copied target network
(Algorithm 1, eq. 3-5), local + global replay exchanged periodically (§3.4,
p4cc.learn.replay), offline training on a traffic mix, then online training with an
exponentially decaying exploration rate (§4.3), network {20, 40, 40, 20} (§6).  The
idle-queue rule (§4.2) runs in the deployed agent (p4cc.controlplane.agents.learned).
Deviations and unstated choices (γ, learning rate, ...) are listed in docs/learning.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from p4cc.controlplane.agents.mlp import Layers
from p4cc.controlplane.agents.template import ACC_TEMPLATE, ActionTemplate
from p4cc.errors import ConfigError
from p4cc.learn.env import EnvConfig, TrainEnv, loss_weights
from p4cc.learn.nets import PAPER_HIDDEN, GroupMLP, from_agents, per_agent
from p4cc.learn.replay import Batch, ReplayMemory
from p4cc.learn.runlog import Curves, Progress, save_checkpoint
from p4cc.learn.settings import check_ranges


@dataclass(frozen=True)
class AccConfig:
    seed: int = field(default=1, metadata={"help": "seeds torch, numpy and the simulator"})
    steps: int = field(default=20_000, metadata={"help": "offline training intervals"})
    online_steps: int = field(default=0, metadata={
        "help": "online fine-tuning intervals after offline training (0: off)"})
    env: EnvConfig = field(default_factory=EnvConfig, metadata={"help": "offline env"})
    online_scenarios: tuple[str, ...] = field(default=("websearch", "datamining"), metadata={
        "help": "'realistic' traffic of the online phase (ACC §4.3, PET §5.3)"})
    online_per_port: bool = field(default=True, metadata={
        "help": "online: every port fine-tunes its own copy (ACC §4.3 'local model')"})
    workload: str = field(default="websearch", metadata={
        "help": "workload whose ω the deployed agent's idle rule uses"})
    template: ActionTemplate = field(default=ACC_TEMPLATE, metadata={
        "help": "action template: 55 x 20 (Kmin <= Kmax) by default"})
    hidden: tuple[int, ...] = field(default=PAPER_HIDDEN, metadata={
        "help": "hidden layer sizes (ACC §6: {20, 40, 40, 20})"})
    gamma: float = field(default=0.9, metadata={"help": "discount γ (not given in ACC)"})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate (not given)"})
    batch_size: int = field(default=32, metadata={"help": "minibatch N per agent (Alg. 1)"})
    local_capacity: int = field(default=5_000, metadata={"help": "local memory per agent"})
    global_capacity: int = field(default=50_000, metadata={"help": "global memory (§3.4)"})
    exchange_every: int = field(default=100, metadata={
        "help": "intervals between replay exchanges (§3.4: 'several seconds')"})
    exchange_push: int = field(default=64, metadata={"help": "local -> global per agent"})
    exchange_pull: int = field(default=32, metadata={"help": "global -> local per agent"})
    learning_starts: int = field(default=100, metadata={"help": "intervals before updates"})
    train_every: int = field(default=1, metadata={
        "help": "intervals per DDQN step once updates start (1: a step every interval, "
                "Alg. 1; ACC §3.4 lets a model update take 'several milliseconds', "
                "longer than an interval, so a deployment may step less often)"})
    target_every: int = field(default=200, metadata={
        "help": "gradient steps between target copies (Alg. 1 line 9: 'every n')"})
    eps_start: float = field(default=1.0, metadata={"help": "offline ε-greedy start"})
    eps_end: float = field(default=0.05, metadata={"help": "offline ε-greedy end"})
    eps_fraction: float = field(default=0.5, metadata={
        "help": "share of offline steps over which ε falls linearly"})
    online_eps: float = field(default=0.2, metadata={"help": "online ε at t = 0"})
    online_decay: float = field(default=0.99, metadata={
        "help": "online ε_t = ε·decay^(t/T) (§4.3 'exponentially decayed'; PET's form)"})
    online_decay_steps: int = field(default=50, metadata={"help": "T of the online decay"})
    online_priority: float = field(default=1.0, metadata={
        "help": "online: sample the local memory with P ∝ (r − min r + 1e-3)^α, this α "
                "(§4.3 'actions resulting large reward will be prioritised'; formula ours, "
                "p4cc.learn.replay); 0: uniform.  Offline sampling is uniform"})
    log_every: int = field(default=100, metadata={"help": "intervals per curve row"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    explore_hold: int = field(default=1, metadata={
        "help": "intervals a port keeps an exploratory (random) action; 1: ε-greedy per "
                "interval (Alg. 1 line 4).  > 1 lets the queue respond to the setting "
                "before its reward is read (docs/learning.md, session 9); the share of "
                "exploring intervals stays ε"})
    learn_idle: bool = field(default=False, metadata={
        "help": "learn from idle ports too (no queue, no traffic: every action earns the "
                "same reward); default weight 0, as idle queues skip inference (§4.2)"})

    def __post_init__(self) -> None:
        check_ranges(self)  # e.g. online_priority >= 0 (0: uniform sampling)


# -- the DDQN loss (Algorithm 1, eq. 3-4) -------------------------------------------------
def ddqn_target(q_next_online: torch.Tensor, q_next_target: torch.Tensor,
                rew: torch.Tensor, gamma: float) -> torch.Tensor:
    """eq. (3): y = r + γ·Q(S', argmax_a Q(S', a; θ); θ'): θ selects, θ' evaluates."""
    a_star = q_next_online.argmax(dim=-1, keepdim=True)
    return rew + gamma * q_next_target.gather(-1, a_star).squeeze(-1)


def ddqn_loss(qnet: GroupMLP, target: GroupMLP, b: dict[str, torch.Tensor],
              gamma: float) -> torch.Tensor:
    """eq. (4): mean (y - Q(S, a; θ))² over the batch; ``b`` tensors are (G, B, ...).
    With ``b["w"]``, the mean is weighted (weight 0: an idle port's transition)."""
    q = qnet(b["obs"]).gather(-1, b["act"].unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        y = ddqn_target(qnet(b["next_obs"]), target(b["next_obs"]), b["rew"], gamma)
    if "w" not in b:
        return F.mse_loss(q, y)
    return (b["w"] * (q - y) ** 2).sum() / b["w"].sum().clamp(min=1.0)


def to_tensors(batch: Batch, groups: int) -> dict[str, torch.Tensor]:
    """Agent-major numpy batch (N, B, ...) -> (G, B', ...) tensors."""
    def t(x: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        y = torch.as_tensor(x, dtype=dtype)
        return per_agent(y if y.dim() == 3 else y.unsqueeze(-1), groups)

    out = {"obs": t(batch.obs, torch.float32), "next_obs": t(batch.next_obs, torch.float32),
           "act": t(batch.act, torch.int64).squeeze(-1),
           "rew": t(batch.rew, torch.float32).squeeze(-1)}
    if batch.weight is not None:
        out["w"] = t(batch.weight, torch.float32).squeeze(-1)
    return out


def update(qnet: GroupMLP, target: GroupMLP, opt: torch.optim.Optimizer,
           b: dict[str, torch.Tensor], gamma: float) -> float:
    """One gradient step (eq. 5) on the evaluation network; returns the loss."""
    loss = ddqn_loss(qnet, target, b, gamma)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.item())


# -- exploration --------------------------------------------------------------------------
def update_due(t: int, cfg: AccConfig) -> bool:
    """Does interval ``t`` take a DDQN step?  From ``learning_starts`` on, every
    ``train_every`` intervals (offline ``run_phase`` and the online agents)."""
    return t >= cfg.learning_starts and (t - cfg.learning_starts) % cfg.train_every == 0


def offline_epsilon(step: int, cfg: AccConfig) -> float:
    span = max(1.0, cfg.eps_fraction * cfg.steps)
    return cfg.eps_end + (cfg.eps_start - cfg.eps_end) * max(0.0, 1.0 - step / span)


def sample_priority(phase: str, cfg: AccConfig) -> float:
    """α of the replay's reward priority: ``online_priority`` online (§4.3), 0 offline."""
    return cfg.online_priority if phase == "online" else 0.0


def online_epsilon(t: int, cfg: AccConfig) -> float:
    return cfg.online_eps * cfg.online_decay ** (t / cfg.online_decay_steps)


class Hold:
    """Exploration with held actions (``explore_hold`` = k): a port that starts exploring
    keeps one random action for k intervals.  A start is drawn with probability
    p = ε / (k(1 - ε) + ε), so that the long-run share of exploring intervals,
    pk / (pk + 1 - p), is ε; k = 1 is plain ε-greedy."""

    def __init__(self, n_agents: int, k: int) -> None:
        if k < 1:
            raise ConfigError(f"explore_hold must be >= 1, got {k}")
        self.k = k
        self.act = np.zeros(n_agents, np.int64)
        self.left = np.zeros(n_agents, np.int64)  # intervals the held action still runs

    def start_probability(self, eps: float) -> float:
        return eps / (self.k * (1.0 - eps) + eps)

    def choose(self, greedy: np.ndarray, eps: float, n_actions: int,
               rng: np.random.Generator) -> np.ndarray:
        start = (self.left == 0) & (rng.random(len(greedy)) < self.start_probability(eps))
        self.act[start] = rng.integers(0, n_actions, int(start.sum()))
        self.left[start] = self.k
        out = np.where(self.left > 0, self.act, greedy)
        self.left = np.maximum(self.left - 1, 0)
        return out


def greedy_actions(qnet: GroupMLP, obs: np.ndarray) -> np.ndarray:
    """argmax_a Q(S, a), one action per agent."""
    with torch.no_grad():
        x = per_agent(torch.as_tensor(obs, dtype=torch.float32)[:, None], qnet.groups)
        q = from_agents(qnet(x), len(obs), qnet.groups)[:, 0]
    return q.argmax(-1).numpy()


def select_actions(qnet: GroupMLP, obs: np.ndarray, eps: float, n_actions: int,
                   rng: np.random.Generator, hold: Hold | None = None) -> np.ndarray:
    """ε-greedy on argmax_a Q(S, a) (Alg. 1 line 4), one action per agent; with ``hold``
    exploratory actions are kept for ``hold.k`` intervals."""
    greedy = greedy_actions(qnet, obs)
    if hold is not None:
        return hold.choose(greedy, eps, n_actions, rng)
    explore = rng.random(len(obs)) < eps
    return np.where(explore, rng.integers(0, n_actions, len(obs)), greedy)


# -- one phase (offline or online) ------------------------------------------------------
def run_phase(cfg: AccConfig, env: TrainEnv, qnet: GroupMLP, steps: int, phase: str,
              curves: Curves, rng: np.random.Generator, progress: Progress,
              step0: int = 0) -> GroupMLP:
    target = GroupMLP(qnet.groups, qnet.sizes)
    target.load_state_dict(qnet.state_dict())
    opt = torch.optim.Adam(qnet.parameters(), lr=cfg.lr)
    mem = ReplayMemory(env.n_agents, qnet.sizes[0], cfg.local_capacity, cfg.global_capacity)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    losses: list[float] = []
    rewards: list[float] = []
    grad_steps = 0
    hold = Hold(env.n_agents, cfg.explore_hold) if cfg.explore_hold > 1 else None
    for t in range(steps):
        eps = offline_epsilon(t, cfg) if phase == "offline" else online_epsilon(t, cfg)
        act = select_actions(qnet, obs, eps, env.template.n_actions, rng, hold)
        next_obs, _, _, trunc, info = env.step(act)
        r = info["agent_rewards"]
        w = loss_weights(obs, env.n_feat, cfg.learn_idle)
        mem.add(obs, act, r, next_obs, w)  # Alg. 1 line 6 (local memory)
        rewards.append(float(np.mean(r)))
        obs = next_obs
        if trunc:  # a new traffic scenario; the task itself never terminates
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
        if (t + 1) % cfg.exchange_every == 0:
            mem.exchange(rng, cfg.exchange_push, cfg.exchange_pull)  # §3.4
        if update_due(t, cfg):
            b = to_tensors(mem.sample(rng, cfg.batch_size, sample_priority(phase, cfg)),
                           qnet.groups)  # Alg. 1 line 7
            losses.append(update(qnet, target, opt, b, cfg.gamma))
            grad_steps += 1
            if grad_steps % cfg.target_every == 0:  # Alg. 1 line 9
                target.load_state_dict(qnet.state_dict())
        if (t + 1) % cfg.log_every == 0 or t == steps - 1:
            row = {"step": step0 + t + 1, "phase": phase, "epsilon": eps,
                   "reward": float(np.mean(rewards)),
                   "loss": float(np.mean(losses)) if losses else None,
                   "scenario": env.scenario}
            curves.log(**row)
            rewards, losses = [], []
        progress.update(1, phase=phase, reward=curves.last("reward") or 0.0)
    return qnet


def export(cfg: AccConfig, env: TrainEnv, qnet: GroupMLP) -> tuple[dict[str, Layers],
                                                                  dict[str, Any]]:
    """The offline model as ``main`` and, after per-port online training, one net per
    port (``<switch>:<port>``); metadata for the deployed agent."""
    nets: dict[str, Layers] = {"main": qnet.layers(0)}
    if qnet.groups > 1:
        for g, (sw, port) in enumerate(env.keys):
            nets[f"{sw}:{port}"] = qnet.layers(g)
    meta = {"algo": "acc", "template": cfg.template.to_dict(), "history": env.history,
            "n_feat": env.n_feat, "hidden": list(cfg.hidden), "incast_norm": env.incast_norm,
            "feature_scaling": cfg.env.feature_scaling,
            "workload": cfg.workload, "idle_rule": True,
            "reward": {"w1": cfg.env.weight(cfg.workload),
                       "w2": 1.0 - cfg.env.weight(cfg.workload)},
            "trained_on": env.describe()}
    return nets, meta


def train(cfg: AccConfig, out_dir: Path, progress: bool = True,
          command: list[str] | None = None) -> dict[str, Any]:
    """Offline training, then (``online_steps`` > 0) online fine-tuning; writes curves
    and the checkpoint under ``out_dir`` and returns their paths and final values."""
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    env = TrainEnv(cfg.env, "acc", cfg.template)
    sizes = (env.history * env.n_feat, *cfg.hidden, cfg.template.n_actions)
    qnet = GroupMLP(1, sizes)  # one offline model for every switch (§4.3)
    curves = Curves()
    bar = Progress(cfg.steps + cfg.online_steps, "acc", progress)
    try:
        run_phase(cfg, env, qnet, cfg.steps, "offline", curves, rng, bar)
        if cfg.online_steps > 0:
            online_env = TrainEnv(dataclasses.replace(cfg.env, scenarios=cfg.online_scenarios),
                                  "acc", cfg.template)
            groups = online_env.n_agents if cfg.online_per_port else 1
            qnet = qnet.replicate(groups)
            run_phase(cfg, online_env, qnet, cfg.online_steps, "online", curves, rng, bar,
                      step0=cfg.steps)
    finally:
        bar.close()
    csv_path, png_path = curves.write(out_dir, f"ACC DDQN, seed {cfg.seed}")
    nets, meta = export(cfg, env, qnet)
    npz, side = save_checkpoint(out_dir, "acc", nets, meta, cfg, cfg.seed, curves, command)
    return {"checkpoint": npz, "sidecar": side, "curves_csv": csv_path,
            "curves_png": png_path, "final": curves.final(), "rows": curves.rows}
