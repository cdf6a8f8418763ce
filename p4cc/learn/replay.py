"""ACC's replay memories (§3.4): a local memory per agent plus a global memory.

Every agent (switch egress queue) stores its own transitions (S, a, r, S') in its local
memory.  Periodically (``exchange``) a sample of every local memory is added to the
global memory, and a sample of the global memory is added to every local memory, so
agents learn from each other's parts of the network (ACC §3.4, after A3C [37]).
Local memories are rings written in lockstep (every agent adds one transition per
interval and receives the same number from the global memory), stored as one array.
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

    def sample(self, rng: np.random.Generator, batch: int) -> Batch:
        """``batch`` transitions per agent from its own local memory."""
        j = rng.integers(0, self.local.size, (self.n, batch))
        a = np.arange(self.n)[:, None]
        loc = self.local
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
