"""RL-CC trained with ADPG (Tessler et al., ICML '22; NVIDIA RL-CC) on the simulator.

Read top to bottom (cleanrl style).  One policy is shared by every flow (agent).

* Environment: the simulator's many-to-one incasts 2→1, 4→1 and 8→1 only (Tessler §8),
  ``copies`` of each side by side on one star switch (separate egress ports, so separate
  bottlenecks; one engine steps them all).  Every flow runs the deployed RL-CC rule
  (:class:`p4cc.hostcc.rlcc_rule.RlccRule` through ``p4cc.sim.cc.RlccHook``): the
  decision interval, catch-up, NAK decisions and one cut per RTT are those of the hosts.
* Observation (δ_t, a_{t−1}); δ = target − max(inflation − β, 0)·√rate (NVIDIA eq. 4,
  target 0.064, β 1.5; β = 0 is Tessler's reward).  Action: the bounded multiplicative
  rate factor in (1/1.2, 1.2) (``bounded`` output, rlcc_policy_base.BOUNDED_M).
* Rollouts run the exported numpy policy (the runtime's forward pass) through a
  :class:`Recorder`, which logs every decision per flow: the paper's key-separated
  temporal replay (Tessler App. A) -- a dropped cut (one per RTT) is overwritten by the
  flow's next decision, exactly as the runtime discards it.
* ADPG update (Tessler eq. 2-3, NVIDIA eq. 3): ∇θ ρ ≈ mean_t w_t·∇θ π(s_t), where
  w_t is δ after action t (the reward's analytic derivative target − X(a) times ∇_a X,
  a positive constant absorbed into the learning rate), averaged over the next
  ``horizon`` decisions of the flow (the finite-T average).  The LSTM is unrolled over
  the flow's whole segment (BPTT) from the recorded (h, c).  An action-smoothing term
  (consecutive actions alike) stabilises the output.  Details: docs/learning.md "RL-CC".
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc, rlcc_rule
from p4cc.hostcc.rlcc_policy_base import Policy, PolicyState
from p4cc.learn.rlcc_nets import TorchLstm, TorchMlp, mlp_from_policy, windows
from p4cc.learn.runlog import Curves, Progress
from p4cc.scale import get_scale
from p4cc.sim.cc import RlccHook
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo


@dataclass(frozen=True)
class AdpgConfig:
    seed: int = field(default=1, metadata={"help": "seeds torch, numpy and the simulator"})
    arch: str = field(default="lstm", metadata={
        "help": "lstm (in→32→16→LSTM 16→1, Tessler §7) or mlp (window → hidden → 1)"})
    updates: int = field(default=600, metadata={"help": "policy updates (one per rollout)"})
    scenarios: tuple[int, ...] = field(default=(2, 4, 8), metadata={
        "help": "N→1 incasts trained on (Tessler §8: 2, 4 and 8 only)"})
    copies: int = field(default=3, metadata={"help": "copies of each incast per engine"})
    scale: str = field(default="paper", metadata={"help": "scale preset of the simulator"})
    target: float = field(default=rlcc.DEFAULT_TARGET, metadata={"help": "reward target"})
    beta: float = field(default=rlcc.DEFAULT_BETA, metadata={
        "help": "congestion tolerance β (0: Tessler's reward)"})
    rollout_rtts: int = field(default=256, metadata={
        "help": "base RTTs simulated per rollout (decisions: / DECISION_RTTS)"})
    episode_rtts: int = field(default=4096, metadata={
        "help": "base RTTs per episode: then new flows, new seed, new start rate"})
    start_rate_min: float = field(default=0.02, metadata={
        "help": "every flow starts at a rate drawn in [this, 1]·line (log-uniform)"})
    horizon: int = field(default=16, metadata={
        "help": "decisions of δ averaged into each action's weight (finite T, eq. 3)"})
    weight_clip: float = field(default=8.0, metadata={
        "help": "weights are δ/target clipped to [−this, 1] (δ is unbounded below)"})
    smooth_coef: float = field(default=0.05, metadata={
        "help": "action-smoothing loss coefficient (consecutive tanh outputs)"})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate"})
    grad_clip: float = field(default=1.0, metadata={"help": "gradient norm clip"})
    signal: str = field(default="rtt", metadata={
        "help": "rtt, or qdepth: the INT variant (δ from the path's largest queue, NVIDIA "
                "RL-CC eq. 6)"})
    window: int = field(default=2, metadata={"help": "mlp: observations per input"})
    mlp_hidden: tuple[int, ...] = field(default=(12,), metadata={
        "help": "mlp hidden sizes (NVIDIA §4.1: input → 12 → 1)"})
    threads: int = field(default=1, metadata={"help": "torch threads"})
    init: str = field(default="", metadata={
        "help": "mlp: start from this exported bounded-MLP .npz (e.g. a shipped policy) "
                "instead of fresh weights ('' = fresh); window and sizes come from it"})
    rejoin_prob: float = field(default=0.0, metadata={
        "help": "per incast and rollout (after an episode's first), the chance that one of "
                "its flows restarts at the line rate: a flow joining a converged incast, "
                "the transient of the staggered evaluation (NVIDIA RL-CC §2.1)"})
    max_wall_s: float = field(default=0.0, metadata={
        "help": "stop after this much wall time (0: none); the sidecar records the updates "
                "done (rerun with --updates <that> to reproduce)"})


# -- the recording policy (key-separated temporal replay) ----------------------------------
class Recorder:
    """Runs ``inner`` and logs every decision: (slot, decision number, obs, inner state).

    The per-flow state gets two extra arrays, the slot id and a decision counter.  A
    decision the runtime drops (a second cut within one RTT) leaves the state as it was,
    so the next decision has the same counter and overwrites it in :func:`segments`."""

    name = "adpg-recorder"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.next_id = 0
        self.log: list[tuple[np.ndarray, np.ndarray, np.ndarray, PolicyState]] = []

    def initial_state(self, n: int) -> PolicyState:
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.float64)
        self.next_id += n
        return (*self.inner.initial_state(n), ids, np.zeros(n))

    def act(self, obs: np.ndarray, state: PolicyState) -> tuple[np.ndarray, PolicyState]:
        *inner, ids, k = state
        raw, new = self.inner.act(obs, tuple(inner))
        self.log.append((ids.astype(np.int64), k.astype(np.int64), obs.copy(),
                         tuple(a.copy() for a in inner)))
        return raw, (*new, ids, k + 1)


@dataclass
class Segment:
    """One rollout's decisions, time-major over F flows: obs (T, F, 2), the inner state
    before each decision (T, F, ...), valid (T, F)."""

    obs: np.ndarray
    state: tuple[np.ndarray, ...]
    valid: np.ndarray


def segments(log: list[tuple[np.ndarray, np.ndarray, np.ndarray, PolicyState]],
             flow_ids: np.ndarray, k0: np.ndarray, k1: np.ndarray) -> Segment:
    """Decisions k0[f] .. k1[f]−1 of each flow f (recorder id ``flow_ids[f]``)."""
    f, t = len(k0), int(max((k1 - k0).max(), 1))
    flow_of = np.full(int(max(flow_ids.max(), max((x[0].max() for x in log), default=0))) + 1,
                      -1, dtype=np.int64)
    flow_of[flow_ids] = np.arange(f)
    obs = np.zeros((t, f, 2))
    obs[..., 1] = 1.0
    valid = np.zeros((t, f), dtype=np.bool_)
    state: list[np.ndarray] | None = None
    for ids_all, k_all, o_all, st_all in log:
        fl = flow_of[ids_all]
        keep = fl >= 0  # a slot of no flow of ours never decides, but be sure
        ids, k, o, st = fl[keep], k_all[keep], o_all[keep], [a[keep] for a in st_all]
        j = k - k0[ids]
        ok = (j >= 0) & (j < (k1 - k0)[ids])
        if state is None:
            state = [np.zeros((t, f, *a.shape[1:])) for a in st]
        obs[j[ok], ids[ok]] = o[ok]
        valid[j[ok], ids[ok]] = True
        for dst, a in zip(state, st, strict=True):
            dst[j[ok], ids[ok]] = a[ok]
    return Segment(obs, tuple(state or ()), valid)


# -- the ADPG loss ----------------------------------------------------------------------------
def adpg_weights(delta: np.ndarray, valid: np.ndarray, horizon: int, target: float,
                 clip: float) -> tuple[np.ndarray, np.ndarray]:
    """Weight of each decision t: the mean of δ/target over decisions t+1 .. t+horizon of
    the same flow (δ after the action: its consequence), clipped to [−clip, 1].
    Returns (weights, mask) of shape (T, F); a decision with no successor has mask 0."""
    d = np.where(valid, np.clip(delta / target, -clip, 1.0), 0.0)
    nxt, nv = np.zeros_like(d), np.zeros_like(valid)
    nxt[:-1], nv[:-1] = d[1:], valid[1:] & valid[:-1]
    cs = np.concatenate([np.zeros((1, d.shape[1])), np.cumsum(nxt * nv, axis=0)])
    cn = np.concatenate([np.zeros((1, d.shape[1])), np.cumsum(nv, axis=0)])
    t = np.arange(d.shape[0])
    end = np.minimum(t + horizon, d.shape[0])
    tot, cnt = cs[end] - cs[t], cn[end] - cn[t]
    return tot / np.maximum(cnt, 1), nv


def adpg_loss(y: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor,
              smooth_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """−mean(w·tanh y) + smooth_coef·mean((tanh y_t − tanh y_{t+1})²) over the mask.

    tanh y is the policy's action before the monotone ``bounded`` map, whose positive
    derivative -- like ∇_a X of Tessler eq. 2 -- is a positive factor left to the step
    size.  d loss / d y_t = −w_t·(1 − tanh² y_t)/count: its sign is δ's."""
    u = torch.tanh(y)
    n = mask.sum().clamp(min=1.0)
    pg = -(weights * u * mask).sum() / n
    pair = mask[1:] * mask[:-1]
    smooth = ((u[1:] - u[:-1]) ** 2 * pair).sum() / pair.sum().clamp(min=1.0)
    loss = pg + smooth_coef * smooth
    return loss, {"loss": loss.item(), "pg_loss": pg.item(), "smooth_loss": smooth.item()}


def policy_outputs(model: torch.nn.Module, seg: Segment) -> torch.Tensor:
    """The model's y at every recorded decision (LSTM: unrolled from the recorded (h, c)
    of each flow's first decision in the segment; MLP: its window of observations)."""
    obs = torch.as_tensor(seg.obs, dtype=torch.float32)
    if isinstance(model, TorchLstm):
        h0, c0 = (torch.as_tensor(a[0], dtype=torch.float32) for a in seg.state[:2])
        y, _, _ = model(obs, h0, c0)
        return y
    assert isinstance(model, TorchMlp)
    hist = torch.as_tensor(seg.state[0][0], dtype=torch.float32)  # (F, window−1, 2)
    full = torch.cat([hist.permute(1, 0, 2), obs])
    return model(windows(full, model.window)[model.window - 1:])


def make_model(cfg: AdpgConfig) -> TorchLstm | TorchMlp:
    if cfg.init:
        from p4cc.hostcc.rlcc_policies import MlpPolicy, load_policy

        start = load_policy(cfg.init)
        if cfg.arch != "mlp" or not isinstance(start, MlpPolicy):
            raise ConfigError(f"init={cfg.init!r}: warm start is for arch=mlp from an MLP .npz")
        return mlp_from_policy(start)
    return TorchLstm() if cfg.arch == "lstm" else TorchMlp(cfg.window, cfg.mlp_hidden)


# -- the environment ---------------------------------------------------------------------------
def incast_schedule(scenarios: tuple[int, ...], copies: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Every incast side by side on one star: flows (one per sender) and their incast."""
    rows: list[dict[str, Any]] = []
    group, host = [], 0
    for _ in range(copies):
        for n in scenarios:
            dst = f"h{host + n + 1}"
            for i in range(n):
                rows.append({"flow_id": len(rows), "start_s": 0.0, "src": f"h{host + i + 1}",
                             "dst": dst, "size_bytes": 0})
                group.append(host)
            host += n + 1
    return pd.DataFrame(rows), np.unique(group, return_inverse=True)[1]


class Episode:
    """One engine with the incasts, run by the recorder around the current policy."""

    def __init__(self, cfg: AdpgConfig, policy: Policy, rng: np.random.Generator) -> None:
        sched, self.group = incast_schedule(cfg.scenarios, cfg.copies)
        hosts = cfg.copies * sum(n + 1 for n in cfg.scenarios)
        topo = parse_topo(f"star,hosts={hosts}", get_scale(cfg.scale))
        sc = self.scale = topo.scale
        self.params = rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc), target=cfg.target,
                                      beta=cfg.beta, pkt_bytes=sc.pkt_bytes,
                                      signal=signal_of(cfg))
        self.recorder = Recorder(policy)
        self.hook = RlccHook(self.params, self.recorder, rlcc_rule.decision_interval_s(sc))
        seed = int(rng.integers(2**31))
        self.engine = Engine(topo, sched, SimConfig(cc="rlcc", host_traces=False, seed=seed),
                             cc=self.hook)
        self.engine.step()  # admit every flow (slot i = flow i)
        # unequal starts, so that fairness has to be learned: rates log-uniform in
        # [start_rate_min, 1]·line, drawn per flow
        n = len(self.group)
        frac = np.exp(rng.uniform(np.log(cfg.start_rate_min), 0.0, n))
        self.hook.state.rate[:n] = frac * sc.link_rate_bps
        self.t_end = cfg.episode_rtts * sc.base_rtt_s
        self.rng, self.rejoin_prob = rng, cfg.rejoin_prob

    def rejoin(self) -> np.ndarray:
        """With probability ``rejoin_prob`` per incast, one random flow of it restarts at
        the line rate (as a newly joined flow does).  Returns the flows restarted."""
        groups = np.nonzero(self.rng.random(self.group.max() + 1) < self.rejoin_prob)[0]
        flows = np.array([self.rng.choice(np.nonzero(self.group == g)[0]) for g in groups],
                         dtype=np.int64)
        self.hook.state.rate[flows] = self.scale.link_rate_bps
        return flows

    def counters(self) -> np.ndarray:
        return self.hook.state.policy_state[-1].astype(np.int64)[:len(self.group)]

    def flow_ids(self) -> np.ndarray:
        """The recorder's id of each flow (slot i holds flow i: all start at t = 0)."""
        return self.hook.state.policy_state[-2].astype(np.int64)[:len(self.group)]

    def rollout(self, rtts: int) -> tuple[Segment, dict[str, float]]:
        """Run ``rtts`` base RTTs; the decisions taken and the incasts' figures."""
        eng, n = self.engine, len(self.group)
        self.recorder.log.clear()
        if eng.t > 2 * self.scale.base_rtt_s and self.rejoin_prob > 0:
            self.rejoin()
        k0 = self.counters()
        d0, l0, t0 = eng.delivered[:n].copy(), eng.lost[:n].copy(), eng.t
        eng.run(eng.t + rtts * self.scale.base_rtt_s)
        seg = segments(self.recorder.log, self.flow_ids(), k0, self.counters())
        thr = (eng.delivered[:n] - d0) * 8 / (eng.t - t0) / self.scale.link_rate_bps
        util = np.bincount(self.group, thr)
        jain = util ** 2 / (np.bincount(self.group) * np.bincount(self.group, thr ** 2) + 1e-30)
        infl = self.hook.state.inflation[:n]
        return seg, {"util": float(util.mean()), "util_min": float(util.min()),
                     "jain": float(jain.mean()), "jain_min": float(jain.min()),
                     "inflation": float(np.mean(infl)),
                     "lost_bytes": float((eng.lost[:n] - l0).sum())}


# -- one update --------------------------------------------------------------------------------
def update(model: torch.nn.Module, opt: torch.optim.Optimizer, seg: Segment,
           cfg: AdpgConfig) -> dict[str, float]:
    """One ADPG step on a rollout's decisions."""
    w, m = adpg_weights(seg.obs[..., 0], seg.valid, cfg.horizon, cfg.target, cfg.weight_clip)
    y = policy_outputs(model, seg)
    loss, parts = adpg_loss(y, torch.as_tensor(w, dtype=torch.float32),
                            torch.as_tensor(m, dtype=torch.float32), cfg.smooth_coef)
    opt.zero_grad()
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    d = seg.obs[..., 0][seg.valid]
    return {**parts, "grad_norm": float(gnorm), "delta": float(np.mean(d)),
            "reward": float(-np.mean(d ** 2)), "decisions": int(seg.valid.sum())}


# -- training ----------------------------------------------------------------------------------
def train(cfg: AdpgConfig, out_dir: Path, progress: bool = True,
          command: list[str] | None = None, write: bool = True) -> dict[str, Any]:
    """Train; write curves and the exported policy with its sidecar under ``out_dir``
    (``write=False``: nothing written, e.g. in tests)."""
    from p4cc.learn.rlcc_export import save_policy

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    model = make_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    curves, bar = Curves(), Progress(cfg.updates, f"adpg-{cfg.arch}", enabled=progress)
    episode: Episode | None = None
    agent_steps, t0 = 0, time.monotonic()
    for k in range(cfg.updates):
        if cfg.max_wall_s and time.monotonic() - t0 > cfg.max_wall_s:
            break  # the wall-time budget: keep what was learned so far
        policy = model.export()
        if episode is None or episode.engine.t >= episode.t_end:
            episode = Episode(cfg, policy, rng)
        episode.recorder.inner = policy  # on-policy: the rollout runs the current weights
        seg, figs = episode.rollout(cfg.rollout_rtts)
        stats = update(model, opt, seg, cfg)
        agent_steps += int(stats["decisions"])
        curves.log(step=k, agent_steps=agent_steps, **figs, **stats,
                   wall_s=round(time.monotonic() - t0, 2))
        bar.update(1, reward=stats["reward"], util=figs["util"], jain=figs["jain"])
    bar.close()
    final = {**_final(curves), "updates_done": len(curves.rows)}
    out: dict[str, Any] = {"final": final, "model": model, "curves": curves}
    if write:
        out["curves_csv"], out["curves_png"] = curves.write(
            out_dir, f"ADPG RL-CC ({cfg.arch}), seed {cfg.seed}")
        out["checkpoint"], out["sidecar"] = save_policy(out_dir, model.export(), cfg, final,
                                                        command)
    return out


def _final(curves: Curves, last: int = 20) -> dict[str, float]:
    """Means over the last ``last`` updates of the logged figures."""
    rows = curves.rows[-last:]
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float))] if rows else []
    return {k: round(float(np.mean([r[k] for r in rows])), 6) for k in keys}


def signal_of(cfg: AdpgConfig) -> Literal["rtt", "qdepth"]:
    """The core's signal for ``cfg.signal`` (raises on anything else)."""
    if cfg.signal not in ("rtt", "qdepth"):
        raise ConfigError(f"signal={cfg.signal!r}: choose rtt or qdepth (INT)")
    return "qdepth" if cfg.signal == "qdepth" else "rtt"


def config_from(**over: Any) -> AdpgConfig:
    return dataclasses.replace(AdpgConfig(), **over)
