"""ACC's replay memories (§3.4): a local memory per agent plus a global memory.

Every agent (switch egress queue) stores its own transitions (S, a, r, S') in its local
memory.  Periodically (``exchange``) a sample of every local memory is added to the
global memory, and a sample of the global memory is added to every local memory, so
agents learn from each other's parts of the network (ACC §3.4, after A3C [37]).
Local memories are rings written in lockstep (every agent adds one transition per
interval and receives the same number from the global memory), stored as one array.

Online, ACC samples a local memory with priority: "the actions resulting large reward
will be prioritised" (§4.3).  The paper gives no formula; ours (:func:`reward_priorities`)
is proportional prioritisation (Schaul et al., ICLR 2016, eq. 1) with the reward in
place of the TD error: P(i) ∝ (r_i − min r + ε)^α over the agent's stored transitions
that the loss learns from (weight > 0: an idle port's reward is the same for every
action), α = 0 uniform.  As in the paper, no importance-sampling correction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Batch:
    obs: np.ndarray  # (N, B, d)
    act: np.ndarray  # (N, B)
    rew: np.ndarray  # (N, B)
    next_obs: np.ndarray  # (N, B, d)
    agent: np.ndarray  # (N, B) which agent produced the transition
    weight: np.ndarray | None = None  # (N, B) loss weight (0: an idle port's transition)


#: ε of the priorities: the lowest reward in a memory keeps a non-zero chance
PRIORITY_EPS = 1e-3


def reward_priorities(rew: np.ndarray, alpha: float,
                      learns: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``rew`` (agents × stored transitions): the sampling probabilities
    (r − min r + ε)^α, normalised (α = 0: uniform).  ``learns`` (same shape, bool): the
    transitions the loss learns from (weight > 0); the others get probability 0 and
    take no part in the minimum, unless a row has none, which is then sampled over all."""
    if alpha < 0:
        raise ValueError(f"priority exponent must be >= 0, got {alpha}")
    keep = np.ones(rew.shape, bool) if learns is None else learns.astype(bool)
    keep = keep | ~keep.any(axis=1, keepdims=True)  # a row without any: all of it
    low = np.where(keep, rew, np.inf).min(axis=1, keepdims=True)
    base = np.where(keep, rew, low) - low + PRIORITY_EPS  # > 0 everywhere: no NaN powers
    p = np.where(keep, base ** alpha, 0.0)
    return p / p.sum(axis=1, keepdims=True)


class _Ring:
    def __init__(self, shape: tuple[int, ...], cap: int, dim: int) -> None:
        self.cap, self.ptr, self.size = cap, 0, 0
        self.obs = np.zeros((*shape, cap, dim), np.float32)
        self.next_obs = np.zeros_like(self.obs)
        self.act = np.zeros((*shape, cap), np.int64)
        self.rew = np.zeros((*shape, cap), np.float32)
        self.agent = np.zeros((*shape, cap), np.int64)
        self.weight = np.ones((*shape, cap), np.float32)

    def slots(self, n: int) -> np.ndarray:
        idx = (self.ptr + np.arange(n)) % self.cap
        self.ptr = int((self.ptr + n) % self.cap)
        self.size = min(self.cap, self.size + n)
        return idx


class ReplayMemory:
    """``n_agents`` local rings of ``local_capacity`` and one global ring."""

    def __init__(self, n_agents: int, obs_dim: int, local_capacity: int,
                 global_capacity: int) -> None:
        self.n = n_agents
        self.local = _Ring((n_agents,), local_capacity, obs_dim)
        self.glob = _Ring((), global_capacity, obs_dim)

    def __len__(self) -> int:
        return self.local.size

    def add(self, obs: np.ndarray, act: np.ndarray, rew: np.ndarray,
            next_obs: np.ndarray, weight: np.ndarray | None = None) -> None:
        """One transition per agent: obs/next_obs (N, d), act/rew (N,); ``weight`` (N,)
        the transition's loss weight (default 1)."""
        i = self.local.slots(1)[0]
        loc = self.local
        loc.obs[:, i], loc.next_obs[:, i] = obs, next_obs
        loc.act[:, i], loc.rew[:, i] = act, rew
        loc.agent[:, i] = np.arange(self.n)
        loc.weight[:, i] = 1.0 if weight is None else weight

    def sample(self, rng: np.random.Generator, batch: int, priority: float = 0.0) -> Batch:
        """``batch`` transitions per agent from its own local memory: uniformly, or with
        ``priority`` = α > 0 by reward (:func:`reward_priorities`)."""
        loc = self.local
        a = np.arange(self.n)[:, None]
        if priority == 0.0:
            j = rng.integers(0, loc.size, (self.n, batch))
        else:  # inverse CDF per agent, all rows in one search (row k's CDF shifted by k)
            p = reward_priorities(loc.rew[:, :loc.size].astype(np.float64), priority,
                                  loc.weight[:, :loc.size] > 0)
            cdf = np.cumsum(p, axis=1) + a
            u = rng.random((self.n, batch)) + a
            j = np.searchsorted(cdf.ravel(), u.ravel(), side="right").reshape(u.shape)
            j = np.minimum(j - a * loc.size, loc.size - 1)  # float sums short of k + 1
        return Batch(loc.obs[a, j], loc.act[a, j], loc.rew[a, j], loc.next_obs[a, j],
                     loc.agent[a, j], loc.weight[a, j])

    def exchange(self, rng: np.random.Generator, push: int, pull: int) -> None:
        """Local -> global (``push`` per agent), then global -> local (``pull`` each)."""
        loc, glob = self.local, self.glob
        if loc.size == 0:
            return
        j = rng.integers(0, loc.size, (self.n, push))
        a = np.repeat(np.arange(self.n), push)
        g = glob.slots(self.n * push)
        jj = j.reshape(-1)
        glob.obs[g], glob.next_obs[g] = loc.obs[a, jj], loc.next_obs[a, jj]
        glob.act[g], glob.rew[g], glob.agent[g] = loc.act[a, jj], loc.rew[a, jj], \
            loc.agent[a, jj]
        glob.weight[g] = loc.weight[a, jj]
        if pull <= 0:
            return
        k = rng.integers(0, glob.size, (self.n, pull))
        dst = loc.slots(pull)
        rows = np.arange(self.n)[:, None]
        loc.obs[rows, dst], loc.next_obs[rows, dst] = glob.obs[k], glob.next_obs[k]
        loc.act[rows, dst], loc.rew[rows, dst] = glob.act[k], glob.rew[k]
        loc.agent[rows, dst] = glob.agent[k]
        loc.weight[rows, dst] = glob.weight[k]
