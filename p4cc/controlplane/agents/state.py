"""What ACC and PET see and are paid, computed from PortTelemetry with numpy only.

Shared by training (p4cc.learn, through p4cc.learn.env) and deployment
(p4cc.controlplane.agents.learned), so an agent sees the same numbers in both places.

* ``features``: ACC §3.3 / §4.1 QS_t = (qlen, txRate, txRate^(m), ECN^(c)), normalised:
  queue / buffer, tx rate / port rate, marked rate / port rate, and the setting in force
  as Kmin / buffer, Kmax / buffer, Pmax (1, 1, 0 when marking is off): 6 numbers.  PET
  §4.2.1 eq. (2) adds incast degree / ``incast_norm`` and the mice/elephant ratio r as
  r / (1 + r): 8 numbers.  Identical to p4cc.sim.envs.EcnTuningEnv's features.
  ``scaling="log"`` puts the queue, Kmin and Kmax on one log scale instead,
  log2(1 + x/u) / log2(1 + B/u) with u = B/1000 (0 when empty, 1 at the buffer B; u is
  one packet at the papers' scale): with a 1 MB buffer, queue/buffer lies in 0-0.05 in
  most busy intervals, the log scale spreads 1 KB-1 MB over 0.1-1 (docs/learning.md).
* ``History``: the last k intervals (ACC §3.3, PET eq. 3: k = 3) with PET's Network
  Condition Monitor expiry (§4.5.1): an entry from slot t-k or earlier is expired at
  slot t and dropped (scheduled cleanup), the store never holds more than k entries
  (threshold cleanup), and a slot with no fresh record is zero, never a stale copy.
* ``acc_reward``: ACC eq. (2), ω1·T(R) + ω2·D(L), D(L) = 1 - n/10 with n the first
  level with E(n) ≥ L (Fig. 4), 0 beyond E(9).
* ``pet_reward``: PET eq. (6)-(8), β1·T + β2·L_a with L_a = 1/q_avg; q_avg is counted in
  units of ``q_unit`` bytes (E(0) by default) and floored at one unit ("floor"), so an
  empty or near-empty queue earns L_a = 1 instead of dividing by zero (the guard), or
  shifted by one unit ("shift": 1/(1 + q_avg)), which still tells short queues apart.
* ``IdleRule``: ACC §4.2: a queue below Kmin, or whose reward has not changed for three
  intervals, is idle and skips inference until its queue exceeds Kmin again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError

ACC_FEATURES = 6
PET_FEATURES = 8


#: How queue length and thresholds are normalised: "linear" (/ buffer, the first trained
#: agents) or "log" (``log_bytes``); a checkpoint names its scaling in its metadata.
FEATURE_SCALINGS = ("linear", "log")
#: ``log_bytes``: the scale spans buffer/LOG_RANGE .. buffer (1 KB-1 MB at paper scale)
LOG_RANGE = 1000.0


def log_bytes(x: float | np.ndarray, buffer_bytes: float) -> np.ndarray:
    """log2(1 + x/u) / log2(1 + B/u), u = B/LOG_RANGE: 0 at 0, 1 at the buffer B.  The
    same at every scale (buffers scale with the BDP, REFERENCE §5)."""
    u = buffer_bytes / LOG_RANGE
    return np.log2(1.0 + np.maximum(np.asarray(x, float), 0.0) / u) / np.log2(1.0 + LOG_RANGE)


def features(rec: PortTelemetry, buffer_bytes: int, pet: bool = False,
             incast_norm: float = 1.0, scaling: str = "linear") -> np.ndarray:
    """One interval's normalised features of one port (ACC 6, PET 8), clipped to [0, 1];
    ``scaling``: queue and thresholds / buffer ("linear") or by ``log_bytes`` ("log")."""
    if scaling not in FEATURE_SCALINGS:
        raise ConfigError(f"feature scaling must be one of {FEATURE_SCALINGS}, got {scaling!r}")
    f = np.zeros(PET_FEATURES if pet else ACC_FEATURES, np.float32)
    rate = rec.tx_bps / rec.utilization if rec.utilization > 0 else 1.0
    e = rec.ecn
    kmin, kmax = (e.kmin_bytes, e.kmax_bytes) if e else (buffer_bytes, buffer_bytes)
    q_kmin_kmax = [rec.qlen_avg_bytes / buffer_bytes, kmin / buffer_bytes,
                   kmax / buffer_bytes]
    if scaling == "log":
        q_kmin_kmax = [float(v) for v in log_bytes(np.array([rec.qlen_avg_bytes, kmin, kmax]),
                                                   buffer_bytes)]
    f[:6] = (q_kmin_kmax[0], rec.utilization,
             rec.tx_marked_bps / rate if rec.utilization > 0 else 0.0,
             q_kmin_kmax[1], q_kmin_kmax[2], e.pmax if e else 0.0)
    if pet:
        me = rec.mice_elephant_ratio
        f[6:] = (rec.incast_degree / incast_norm, me / (1.0 + me))
    return np.clip(f, 0.0, 1.0)


class History:
    """The last ``k`` feature vectors of one port, with NCM expiry (PET §4.5.1)."""

    def __init__(self, k: int, n_feat: int) -> None:
        self.k, self.n_feat = k, n_feat
        self._items: deque[tuple[float, np.ndarray]] = deque(maxlen=k)  # threshold cleanup

    def push(self, t_s: float, feat: np.ndarray) -> None:
        self._items.append((t_s, np.asarray(feat, np.float32)))

    def window(self, now_s: float, interval_s: float) -> np.ndarray:
        """(k·n_feat,) oldest first; slot i holds the record of interval now-(k-1-i)·Δt."""
        out = np.zeros((self.k, self.n_feat), np.float32)
        dt = max(interval_s, 1e-12)
        # scheduled cleanup: slot t-k and earlier has expired at slot t
        while self._items and (now_s - self._items[0][0]) / dt > self.k - 0.5:
            self._items.popleft()
        for t, feat in self._items:
            slot = self.k - 1 - round((now_s - t) / dt)
            if 0 <= slot < self.k:
                out[slot] = feat
        return out.reshape(-1)

    def __len__(self) -> int:
        return len(self._items)


def d_of_l(qlen_bytes: float | np.ndarray, levels: Sequence[float]) -> np.ndarray:
    """ACC Fig. 4: D(L) = 1 - n/10, n = argmin_n E(n) ≥ L; 0 when L > E(9)."""
    n = np.searchsorted(np.asarray(levels, float), np.asarray(qlen_bytes, float), side="left")
    return 1.0 - np.minimum(n, len(levels)) / float(len(levels))


def acc_reward(util: float | np.ndarray, qlen_bytes: float | np.ndarray,
               levels: Sequence[float], w1: float, w2: float) -> np.ndarray:
    """ACC eq. (2): ω1·T(R) + ω2·D(L) with T(R) = txRate/BW (the port's utilisation)."""
    return w1 * np.asarray(util, float) + w2 * d_of_l(qlen_bytes, levels)


#: PET's empty-queue guards of L_a = 1/q_avg (q_avg in units of q_unit): "floor"
#: 1/max(q, 1) (flat for every queue below one unit), "shift" 1/(1 + q) (1 when empty,
#: falling from the first byte, ≈ 1/q for long queues); docs/learning.md.
PET_GUARDS = ("floor", "shift")


def pet_reward(util: float | np.ndarray, qlen_bytes: float | np.ndarray, q_unit: float,
               b1: float, b2: float, guard: str = "floor") -> np.ndarray:
    """PET eq. (6): β1·T + β2/q_avg, q_avg in units of ``q_unit`` bytes, guarded by
    ``guard`` (PET_GUARDS): floored at one unit, or shifted by one unit."""
    if guard not in PET_GUARDS:
        raise ConfigError(f"PET reward guard must be one of {PET_GUARDS}, got {guard!r}")
    q = np.asarray(qlen_bytes, float) / q_unit
    q = np.maximum(q, 1.0) if guard == "floor" else 1.0 + np.maximum(q, 0.0)
    return b1 * np.asarray(util, float) + b2 / q


def unscaled_levels(alpha_bytes: float, n_levels: int = 10) -> list[float]:
    """E(n) = α·2ⁿ for the reward (not clipped to the buffer: D(L) keeps its 10 steps)."""
    return [alpha_bytes * 2**n for n in range(n_levels)]


class IdleRule:
    """ACC §4.2: busy -> idle when qlen < Kmin or the reward was unchanged for
    ``unchanged`` intervals; idle -> busy when qlen > Kmin.  ``step`` says whether the
    port is idle (skip its inference) this interval."""

    def __init__(self, unchanged: int = 3, tol: float = 1e-9) -> None:
        self.unchanged, self.tol = unchanged, tol
        self._rewards: dict[int, deque[float]] = {}
        self._idle: dict[int, bool] = {}

    def step(self, port: int, qlen_bytes: float, kmin_bytes: float | None,
             reward: float) -> bool:
        hist = self._rewards.setdefault(port, deque(maxlen=self.unchanged + 1))
        idle = self._idle.get(port, False)
        if idle and qlen_bytes > (kmin_bytes or 0.0):
            idle = False
            hist.clear()
        hist.append(float(reward))
        if not idle:
            below = kmin_bytes is not None and qlen_bytes < kmin_bytes
            flat = len(hist) == hist.maxlen and max(hist) - min(hist) <= self.tol
            idle = below or flat
        self._idle[port] = idle
        return idle
