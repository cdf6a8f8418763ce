"""PET: IPPO, one independent actor-critic per switch egress queue, on the simulator.

Read top to bottom (cleanrl style).  Paper sections (pet-ippo-ecn-tuning): state §4.2.1
eq. (2)-(3) (ACC's four features + incast degree + mice/elephant ratio over k = 3
intervals; p4cc.controlplane.agents.state), action §4.2.2 (E(n) template with Kmin < Kmax,
Pmax in 5 % steps; p4cc.controlplane.agents.template), reward eq. (6)-(8) β1·T + β2/q_avg
with the empty queue guarded, advantages by GAE eq. (9)-(10), clipped policy loss
eq. (11) (clip 0.2), value loss eq. (12), actor / critic Adam at 4e-4 / 1e-3 (§5.2),
exploration decaying as ε·0.99^(t/T), T = 50 (eq. 13), offline pre-training then
online incremental training (§4.4).  No replay memory, no parameter exchange: every
agent learns from its own trajectory (§4.3.1).  The NCM's expiry of stale state runs in
the deployed agent (p4cc.controlplane.agents.state.History).  The actor's output layer
is one logit per action or, opt-in (``actor_head = "factored"``), the sum of a Kmin, a
Kmax and a Pmax logit (PET gives no architecture).  Choices the paper leaves open and
readings that differ are in docs/learning.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from p4cc.controlplane.agents.mlp import Layers
from p4cc.controlplane.agents.template import PET_TEMPLATE, ActionTemplate
from p4cc.errors import ConfigError
from p4cc.learn.env import EnvConfig, TrainEnv, loss_weights
from p4cc.learn.nets import PAPER_HIDDEN, GroupMLP, per_agent
from p4cc.learn.runlog import Curves, Progress, save_checkpoint
from p4cc.learn.settings import check_ranges

ACTOR_HEADS = ("joint", "factored")


@dataclass(frozen=True)
class PetConfig:
    seed: int = field(default=1, metadata={"help": "seeds torch, numpy and the simulator"})
    steps: int = field(default=20_000, metadata={"help": "offline training intervals"})
    online_steps: int = field(default=0, metadata={
        "help": "online incremental training intervals (0: off; §4.4.2)"})
    env: EnvConfig = field(default_factory=EnvConfig, metadata={"help": "offline env"})
    online_scenarios: tuple[str, ...] = field(default=("websearch", "datamining"), metadata={
        "help": "online traffic (PET §5.3: WebSearch and DataMining)"})
    online_per_port: bool = field(default=True, metadata={
        "help": "online: every port trains its own copy (§4.4.2 'its own local model')"})
    template: ActionTemplate = field(default=PET_TEMPLATE, metadata={
        "help": "action template: 45 x 20 (Kmin < Kmax, §4.2.2)"})
    hidden: tuple[int, ...] = field(default=PAPER_HIDDEN, metadata={
        "help": "hidden sizes of actor and critic (PET gives none; ACC's {20,40,40,20})"})
    q_unit_paper_bytes: float = field(default=20_000, metadata={
        "help": "unit of q_avg in the reward's 1/q_avg, paper bytes (E(0))"})
    q_guard: str = field(default="shift", metadata={
        "help": "empty-queue guard of 1/q_avg: 'shift' 1/(1 + q_avg) or 'floor' "
                "1/max(q_avg, 1), q_avg in q_unit (p4cc.controlplane.agents.state.pet_reward)"})
    entropy_coef: float = field(default=0.02, metadata={
        "help": "weight c of the policy's entropy bonus, loss = eq. (11) - c·H(π) (not in "
                "PET; PPO's eq. 9 term against entropy collapse, which 0.01 did not stop "
                "in 12 000 intervals; 0: off)"})
    gamma: float = field(default=0.9, metadata={"help": "discount γ (not given in PET)"})
    gae_lambda: float = field(default=0.01, metadata={
        "help": "GAE λ (PET §5.2: 'coefficient of GAE ... 0.01')"})
    clip: float = field(default=0.2, metadata={"help": "PPO clip ε (PET §5.2: 0.2)"})
    lr_actor: float = field(default=4e-4, metadata={"help": "actor Adam lr (PET §5.2)"})
    lr_critic: float = field(default=1e-3, metadata={"help": "critic Adam lr (PET §5.2)"})
    rollout: int = field(default=64, metadata={
        "help": "decisions per policy update (intervals when decision_hold = 1)"})
    decision_hold: int = field(default=1, metadata={
        "help": "intervals a sampled action is held in training (1: a decision per "
                "interval, PET Alg. 1).  k > 1 is a semi-MDP: one decision per k intervals, "
                "its reward the discounted sum Σ γ^i r over them, the next state's value "
                "discounted by γ^k, so a setting is judged after the queue responds to it "
                "(ACC's explore_hold for PPO; not in PET)"})
    epochs: int = field(default=4, metadata={"help": "N epochs per update (Alg. 1)"})
    minibatches: int = field(default=4, metadata={"help": "minibatches per epoch"})
    explore: float = field(default=0.2, metadata={
        "help": "exploration ε at t = 0 (eq. 13 decays 'the ε of eq. 11', i.e. 0.2)"})
    explore_decay: float = field(default=0.99, metadata={"help": "eq. 13 decay_rate"})
    explore_steps: int = field(default=50, metadata={"help": "eq. 13 T"})
    log_every: int = field(default=64, metadata={"help": "intervals per curve row"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    learn_idle: bool = field(default=False, metadata={
        "help": "policy loss on idle ports' decisions too (no queue, no traffic: every "
                "action earns the same reward); default weight 0 (the critic learns all)"})
    extra_features: bool = field(default=True, metadata={
        "help": "state = ACC's four + incast degree and mice/elephant ratio (§4.2.1); "
                "false: ACC's four only (the ablation of issue 9)"})
    actor_head: str = field(default="joint", metadata={
        "help": "actor's output layer: 'joint' (one logit per action, 900) or 'factored' "
                "(logit = a(Kmin) + b(Kmax) + c(Pmax), 10 + 10 + 20 outputs expanded to "
                "the 900 actions; PET gives no architecture; exported as a 900-row layer)"})

    def __post_init__(self) -> None:
        check_ranges(self)  # e.g. decision_hold >= 1
        if self.actor_head not in ACTOR_HEADS:
            raise ConfigError(f"actor_head must be one of {ACTOR_HEADS}, got "
                              f"{self.actor_head!r}")


def _features(cfg: PetConfig) -> str:
    """The env's feature set: PET's eight, or ACC's six for the ablation."""
    return "pet" if cfg.extra_features else "acc"


# -- the actor: one logit per action, or a sum of per-component logits ------------------
def head_expansion(template: ActionTemplate) -> torch.Tensor:
    """The 0/1 matrix M (actions × (levels + levels + Pmax values)) with logits = M·h:
    action (Kmin n, Kmax m, Pmax j) sums outputs n, levels + m and 2·levels + j."""
    n, pm = template.n_levels, len(template.pmax_values)
    m = torch.zeros(template.n_actions, 2 * n + pm)
    for a in range(template.n_actions):
        kmin_n, kmax_n, _ = template.decode(a)
        m[a, kmin_n] = m[a, n + kmax_n] = m[a, 2 * n + a % pm] = 1.0
    return m


class FactoredActor(torch.nn.Module):
    """A GroupMLP with one output per Kmin level, Kmax level and Pmax value; the action's
    logit is the sum of its three.  The softmax is over the template's actions, so the
    policy, its ε mixing and the losses are the joint actor's; every action's logit
    shares the weights of its components (40 outputs learn from every sample instead
    of 900).  Linear in the last layer, so it exports as a plain 900-row layer."""

    trunk: GroupMLP
    expand: torch.Tensor

    def __init__(self, trunk: GroupMLP, expand: torch.Tensor) -> None:
        super().__init__()
        self.trunk, self.groups = trunk, trunk.groups
        self.register_buffer("expand", expand)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trunk(x) @ self.expand.T

    def replicate(self, groups: int) -> FactoredActor:
        return FactoredActor(self.trunk.replicate(groups), self.expand)

    def layers(self, group: int = 0) -> Layers:
        """The trunk's layers with the last one expanded: W = M·W_h, b = M·b_h."""
        out = self.trunk.layers(group)
        w, b = out[-1]
        m = self.expand.numpy().astype(np.float32)
        return [*out[:-1], (m @ w, m @ b)]


Actor = GroupMLP | FactoredActor


def make_actor(cfg: PetConfig, d: int) -> Actor:
    """The offline actor (G = 1), small initial logits (near-uniform policy)."""
    if cfg.actor_head == "factored":
        m = head_expansion(cfg.template)
        return FactoredActor(GroupMLP(1, (d, *cfg.hidden, m.shape[1]), out_gain=0.01), m)
    return GroupMLP(1, (d, *cfg.hidden, cfg.template.n_actions), out_gain=0.01)


# -- exploration (eq. 13) and the behaviour policy ---------------------------------------
def exploration(t: int, cfg: PetConfig) -> float:
    """ε_t = decay^(t/T)·ε when t > T, else ε."""
    return cfg.explore * cfg.explore_decay ** (t / cfg.explore_steps) if t > \
        cfg.explore_steps else cfg.explore


def mixed_log_prob(logits: torch.Tensor, act: torch.Tensor, eps: torch.Tensor
                   ) -> torch.Tensor:
    """log of (1-ε)·π(a|s) + ε/|A|: the policy with uniform exploration mixed in, used
    for acting and in the ratio of eq. (11) so the update stays on-policy."""
    p = torch.softmax(logits, -1).gather(-1, act.unsqueeze(-1)).squeeze(-1)
    return torch.log((1.0 - eps) * p + eps / logits.shape[-1])


# -- GAE (eq. 9-10) and the losses (eq. 11-12) -------------------------------------------
def gae(rew: torch.Tensor, val: torch.Tensor, next_val: torch.Tensor, done: torch.Tensor,
        gamma: float | torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns; time is the last axis.  δ_t = r_t + γ·V(s_{t+1}) - V(s_t)
    (bootstrapped also at an episode's truncation), Â_t = δ_t + γλ·(1-done_t)·Â_{t+1}.
    ``gamma`` may be a tensor shaped like ``rew``: each step's own discount (γ^k for a
    decision held k intervals, :func:`hold_step`)."""
    delta = rew + gamma * next_val - val
    adv = torch.zeros_like(rew)
    run = torch.zeros_like(rew[..., 0])
    for t in reversed(range(rew.shape[-1])):
        g = gamma[..., t] if isinstance(gamma, torch.Tensor) else gamma
        run = delta[..., t] + g * lam * (1.0 - done[..., t]) * run
        adv[..., t] = run
    return adv, adv + val


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                clip: float, w: torch.Tensor | None = None) -> torch.Tensor:
    """eq. (11), negated for gradient descent: -E[min(ρ·Â, clip(ρ, 1±ε)·Â)]; ``w``:
    per-sample weights of the mean (0: an idle port's decision)."""
    ratio = torch.exp(logp - old_logp)
    obj = torch.min(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    if w is None:
        return -obj.mean()
    return -(w * obj).sum() / w.sum().clamp(min=1.0)


def entropy(logits: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """Mean entropy H(π(·|s)) = -Σ_a π log π of the policy (without the ε mixing),
    weighted by ``w`` when given."""
    logp = torch.log_softmax(logits, -1)
    h = -(logp.exp() * logp).sum(-1)
    return h.mean() if w is None else (w * h).sum() / w.sum().clamp(min=1.0)


def actor_loss(logits: torch.Tensor, act: torch.Tensor, eps: torch.Tensor,
               old_logp: torch.Tensor, adv: torch.Tensor, clip: float, entropy_coef: float,
               w: torch.Tensor | None = None) -> torch.Tensor:
    """eq. (11) on the ε-mixed policy minus ``entropy_coef``·H(π) (PPO eq. 9's bonus)."""
    loss = policy_loss(mixed_log_prob(logits, act, eps), old_logp, adv, clip, w)
    return loss - entropy_coef * entropy(logits, w) if entropy_coef else loss


def value_loss(v: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
    """eq. (12): E[(V(s_t) - R̂_t)²]."""
    return ((v - ret) ** 2).mean()


def update(actor: Actor, critic: GroupMLP, opt_a: torch.optim.Optimizer,
           opt_c: torch.optim.Optimizer, b: dict[str, torch.Tensor], cfg: PetConfig,
           gen: torch.Generator) -> tuple[float, float]:
    """Algorithm 1 lines 8-12: N epochs of minibatch Adam on eq. (11) (actor) and
    eq. (12) (critic); ``b`` tensors are (G, B, ...).  Returns the mean losses."""
    adv = b["adv"]
    adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
    n = b["obs"].shape[1]
    size = max(1, n // cfg.minibatches)
    pl, vl = [], []
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, size):
            j = perm[i:i + size]
            w = b["w"][:, j] if "w" in b else None
            loss_pi = actor_loss(actor(b["obs"][:, j]), b["act"][:, j], b["eps"][:, j],
                                 b["logp"][:, j], adv[:, j], cfg.clip, cfg.entropy_coef, w)
            opt_a.zero_grad()
            loss_pi.backward()
            opt_a.step()
            loss_v = value_loss(critic(b["obs"][:, j]).squeeze(-1), b["ret"][:, j])
            opt_c.zero_grad()
            loss_v.backward()
            opt_c.step()
            pl.append(float(loss_pi.item()))
            vl.append(float(loss_v.item()))
    return float(np.mean(pl)), float(np.mean(vl))


# -- rollouts and one phase -------------------------------------------------------------
def act(actor: Actor, obs: np.ndarray, eps: float, gen: torch.Generator
        ) -> tuple[np.ndarray, np.ndarray]:
    """Sample one action per agent from the ε-mixed policy; returns (actions, log-probs)."""
    with torch.no_grad():
        x = torch.as_tensor(obs, dtype=torch.float32)[:, None]
        logits = actor(per_agent(x, actor.groups)).reshape(len(obs), -1)
        probs = (1 - eps) * torch.softmax(logits, -1) + eps / logits.shape[-1]
        a = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
        logp = torch.log(probs.gather(-1, a[:, None]).squeeze(-1))
    return a.numpy(), logp.numpy()


def values(critic: GroupMLP, obs: np.ndarray) -> np.ndarray:
    """V(s) per agent: obs (N, T, d) -> (N, T)."""
    with torch.no_grad():
        x = per_agent(torch.as_tensor(obs, dtype=torch.float32), critic.groups)
        return critic(x).reshape(obs.shape[0], obs.shape[1]).numpy()


def rollout_batch(arr: dict[str, np.ndarray], critic: GroupMLP, groups: int,
                  cfg: PetConfig) -> dict[str, torch.Tensor]:
    """Rollout arrays (N, T, ...) -> GAE (Alg. 1 lines 6-7) -> (G, B, ...) tensors."""
    f32 = torch.float32
    # held decisions: each step's discount γ^k; a float otherwise (bit-identical to
    # the checkpoints trained before decision_hold existed)
    gamma = torch.as_tensor(arr["disc"], dtype=f32) if cfg.decision_hold > 1 else cfg.gamma
    adv, ret = gae(torch.as_tensor(arr["rew"], dtype=f32),
                   torch.as_tensor(values(critic, arr["obs"])),
                   torch.as_tensor(values(critic, arr["next"])),
                   torch.as_tensor(arr["done"], dtype=f32), gamma, cfg.gae_lambda)

    def grp(x: torch.Tensor) -> torch.Tensor:
        return per_agent(x if x.dim() == 3 else x.unsqueeze(-1), groups)

    out = {"obs": grp(torch.as_tensor(arr["obs"], dtype=f32)),
           "act": grp(torch.as_tensor(arr["act"], dtype=torch.int64)).squeeze(-1)}
    for k, x in (("logp", torch.as_tensor(arr["logp"])), ("eps", torch.as_tensor(arr["eps"])),
                 ("adv", adv), ("ret", ret)):
        out[k] = grp(x.to(f32)).squeeze(-1)
    if "w" in arr:
        out["w"] = grp(torch.as_tensor(arr["w"], dtype=f32)).squeeze(-1)
    return out


def hold_step(env: TrainEnv, a: np.ndarray, k: int, gamma: float) -> dict[str, Any]:
    """Play actions ``a`` for up to ``k`` intervals (fewer when the episode ends): the
    semi-MDP step of ``decision_hold``.  Returns the state after it (``next``), the
    discounted reward Σ_i γ^i r_i per agent (``rew``; r_0 exactly when k = 1), the mean
    per-interval reward (``r1``, for the curves), the next state's discount γ^n
    (``disc``), the intervals played and whether the episode ended (``trunc``)."""
    rew, total = np.zeros(env.n_agents), np.zeros(env.n_agents)  # 0 + 1·r is r exactly
    disc, played, trunc, nxt = 1.0, 0, False, None
    while played < k and not trunc:
        nxt, _, _, trunc, info = env.step(a)
        r = np.asarray(info["agent_rewards"])
        rew, total = rew + disc * r, total + r
        disc *= gamma
        played += 1
    return {"next": nxt, "rew": rew, "r1": total / played, "disc": disc,
            "intervals": played, "trunc": trunc}


def run_phase(cfg: PetConfig, env: TrainEnv, actor: Actor, critic: GroupMLP, steps: int,
              phase: str, curves: Curves, rng: np.random.Generator, gen: torch.Generator,
              progress: Progress, step0: int = 0) -> None:
    opt_a = torch.optim.Adam(actor.parameters(), lr=cfg.lr_actor)
    opt_c = torch.optim.Adam(critic.parameters(), lr=cfg.lr_critic)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    n, t_done = env.n_agents, 0
    while t_done < steps:
        buf: dict[str, list[np.ndarray]] = {k: [] for k in (
            "obs", "next", "act", "logp", "rew", "done", "eps", "w", "disc", "r1")}
        for _ in range(cfg.rollout):
            if t_done >= steps:
                break
            eps = exploration(t_done, cfg)
            a, logp = act(actor, obs, eps, gen)
            step = hold_step(env, a, min(cfg.decision_hold, steps - t_done), cfg.gamma)
            w = loss_weights(obs, env.n_feat, cfg.learn_idle)
            for k, v in (("obs", obs), ("next", step["next"]), ("act", a), ("logp", logp),
                         ("rew", step["rew"]), ("done", np.full(n, float(step["trunc"]))),
                         ("eps", np.full(n, eps)), ("w", w),
                         ("disc", np.full(n, step["disc"])), ("r1", step["r1"])):
                buf[k].append(np.asarray(v))
            obs = env.reset(seed=int(rng.integers(2**31)))[0] if step["trunc"] \
                else step["next"]
            t_done += step["intervals"]
            progress.update(step["intervals"], phase=phase,
                            reward=curves.last("reward") or 0.0)
        arr = {k: np.stack(v, axis=1) for k, v in buf.items()}  # agent-major (N, T, ...)
        b = rollout_batch(arr, critic, actor.groups, cfg)
        pl, vl = update(actor, critic, opt_a, opt_c, b, cfg, gen)
        with torch.no_grad():
            ent = float(entropy(actor(b["obs"])).item())
        curves.log(step=step0 + t_done, phase=phase, epsilon=float(arr["eps"][0, -1]),
                   reward=float(arr["r1"].mean()), policy_loss=pl, value_loss=vl,
                   entropy=ent, scenario=env.scenario)


def export(cfg: PetConfig, env: TrainEnv, actor: Actor) -> tuple[dict[str, Layers],
                                                                dict[str, Any]]:
    """The actor only (the critic is not needed to act): ``main`` and per-port copies."""
    nets: dict[str, Layers] = {"main": actor.layers(0)}
    if actor.groups > 1:
        for g, (sw, port) in enumerate(env.keys):
            nets[f"{sw}:{port}"] = actor.layers(g)
    meta = {"algo": "pet", "template": cfg.template.to_dict(), "history": env.history,
            "n_feat": env.n_feat, "hidden": list(cfg.hidden), "incast_norm": env.incast_norm,
            "q_unit_paper_bytes": cfg.q_unit_paper_bytes, "q_guard": cfg.q_guard,
            "feature_scaling": cfg.env.feature_scaling, "actor_head": cfg.actor_head,
            "trained_on": env.describe()}
    return nets, meta


def train(cfg: PetConfig, out_dir: Path, progress: bool = True,
          command: list[str] | None = None) -> dict[str, Any]:
    """Offline pre-training, then (``online_steps`` > 0) online incremental training."""
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    env = TrainEnv(cfg.env, "pet", cfg.template, cfg.q_unit_paper_bytes, _features(cfg),
                   cfg.q_guard)
    d = env.history * env.n_feat
    actor = make_actor(cfg, d)
    critic = GroupMLP(1, (d, *cfg.hidden, 1))
    curves = Curves()
    bar = Progress(cfg.steps + cfg.online_steps, "pet", progress)
    try:
        run_phase(cfg, env, actor, critic, cfg.steps, "offline", curves, rng, gen, bar)
        if cfg.online_steps > 0:
            online_env = TrainEnv(dataclasses.replace(cfg.env, scenarios=cfg.online_scenarios),
                                  "pet", cfg.template, cfg.q_unit_paper_bytes, _features(cfg),
                                  cfg.q_guard)
            groups = online_env.n_agents if cfg.online_per_port else 1
            actor, critic = actor.replicate(groups), critic.replicate(groups)
            run_phase(cfg, online_env, actor, critic, cfg.online_steps, "online", curves, rng,
                      gen, bar, step0=cfg.steps)
    finally:
        bar.close()
    csv_path, png_path = curves.write(out_dir, f"PET IPPO, seed {cfg.seed}")
    nets, meta = export(cfg, env, actor)
    npz, side = save_checkpoint(out_dir, "pet", nets, meta, cfg, cfg.seed, curves, command)
    return {"checkpoint": npz, "sidecar": side, "curves_csv": csv_path,
            "curves_png": png_path, "final": curves.final(), "rows": curves.rows}
