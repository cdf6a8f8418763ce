"""RL-CC (ADPG) congestion-control core: signals, δ, reward, and the vectorized step.

Definitions (NVIDIA RL-CC paper, ``papers/rlcc-nvidia-nic-distillation.txt`` §3 eq. 1,
4, 5-6; Tessler et al. ADPG, ``papers/rlcc-tessler-adpg.txt`` §5; REFERENCE §3):

* RTT inflation = RTT / base-RTT (a ratio, 1 in an empty network).  With INT the
  queue variant is inflation = 1 + Q·8/(base-RTT·line rate), Q the bytes queued at the
  most congested port on the path (max queue depth in packets × ``pkt_bytes``).
* δ = target − max(inflation − β, 0)·√rate, rate normalised to the line rate
  (target 0.064, β 1.5).  δ ≤ target; δ > 0 means below the operating point.
* reward r = −δ².
* Action: multiplicative, rate ← clip(a, a_min, a_max)·rate, a_min = 1/1.2, a_max = 1.2.
* Policy input at a decision: the observation (δ_t, a_{t−1}).

:func:`step` applies one decision to the flows in a mask; policies are vectorized over
N flows (:mod:`p4cc.hostcc.rlcc_policies`).  When a flow decides and on what signal is
the decision rule of :mod:`p4cc.hostcc.rlcc_rule`, which the host (N=1, via
:class:`p4cc.hostcc.cc.RlccController`) and the simulator (``p4cc.sim.cc.RlccHook``) run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import Policy, PolicyState, scatter_state, take_state
from p4cc.scale import PAPER_LINK_RATE_BPS, Scale

FloatArray = npt.NDArray[np.float64]

#: Defaults from the NVIDIA paper §4 and §6 (target = 0.064, β = 1.5).
DEFAULT_TARGET = 0.064
DEFAULT_BETA = 1.5
#: The RTT that normalises inflation is at least the time to send this many packets at
#: the line rate.  RL-CC's operating point holds (target·√N + β − 1) normaliser-BDPs of
#: queue: 0.63 at N = 4, i.e. 16 packets on the paper scale (25 Gb/s x 8 µs = 25
#: packets per base RTT) but 1.6 on the testbed scale (10 Mb/s x 2 ms = 2.5 packets),
#: where one packet's serialisation (0.8 ms) and the emulator's RTT jitter (IQR ~2 ms)
#: are as large as the whole operating point.  With 10 packets (8 ms on the testbed) the
#: BMv2 4->1 incast went from Jain 0.66-0.99 to 0.987-0.997 (docs/emulation.md); on the
#: paper scale the base RTT (25 packets) is used as it is.
MIN_NORM_PKTS = 10
#: Default rate floor / line rate: NVIDIA's NIC minimum rate, 1 Mb/s at the papers'
#: 25 Gb/s (REFERENCE §2, NVIDIA firmware column; the ``nvidia`` DCQCN set's
#: ``min_rate_bps`` in p4cc/hostcc/dcqcn_params.py), i.e. scaled with the line rate as
#: ``Scale.rate`` scales DCQCN's floor: 400 b/s on the 10 Mb/s testbed.  8,192 flows at
#: this floor offer 33 % of a port; the former line/1000 alone overloaded a port shared
#: by more than 1,000 flows (docs/results.md, "Longer MLP training").
MIN_RATE_FRAC = 1e6 / PAPER_LINK_RATE_BPS


def norm_rtt_s(scale: Scale) -> float:
    """RL-CC's RTT normaliser ("base RTT") for ``scale``: see :data:`MIN_NORM_PKTS`."""
    return max(scale.base_rtt_s, MIN_NORM_PKTS * scale.pkt_bytes * 8.0 / scale.link_rate_bps)


@dataclass(frozen=True)
class RlccParams:
    """RL-CC reward and actuation parameters (SI units)."""

    line_rate_bps: float = field(metadata={"help": "line rate; rates are normalised by it"})
    base_rtt_s: float = field(metadata={"help": "RTT in an empty network"})
    target: float = field(default=DEFAULT_TARGET, metadata={"help": "inflation target"})
    beta: float = field(default=DEFAULT_BETA, metadata={"help": "congestion tolerance β"})
    action_min: float = field(default=1 / 1.2, metadata={"help": "smallest rate factor"})
    action_max: float = field(default=1.2, metadata={"help": "largest rate factor"})
    min_rate_bps: float | None = field(
        default=None, metadata={"help": "rate floor; None = line rate x MIN_RATE_FRAC "
                                         "(NVIDIA's 1 Mb/s at 25 Gb/s)"}
    )
    initial_rate_frac: float = field(default=1.0, metadata={"help": "start rate / line"})
    signal: Literal["rtt", "qdepth"] = field(
        default="rtt", metadata={"help": "δ from RTT inflation or INT max queue depth"}
    )
    pkt_bytes: int = field(default=1000, metadata={"help": "bytes per queued packet (INT)"})

    def __post_init__(self) -> None:
        for nm in ("line_rate_bps", "base_rtt_s", "action_min", "action_max"):
            v = getattr(self, nm)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"RL-CC parameter {nm}={v!r} must be a positive number")
        if not self.action_min <= 1.0 <= self.action_max:
            raise ConfigError(f"RL-CC action bounds [{self.action_min}, {self.action_max}] "
                              "must contain 1")
        if not (math.isfinite(self.target) and self.target > 0):
            raise ConfigError(f"RL-CC target={self.target!r} must be positive")
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise ConfigError(f"RL-CC beta={self.beta!r} must be >= 0")
        if not 0 < self.initial_rate_frac <= 1:
            raise ConfigError(f"initial_rate_frac={self.initial_rate_frac} must be in (0, 1]")
        if self.signal not in ("rtt", "qdepth"):
            raise ConfigError(f"RL-CC signal={self.signal!r}: choose 'rtt' or 'qdepth'")
        if self.pkt_bytes < 1:
            raise ConfigError(f"pkt_bytes={self.pkt_bytes} must be >= 1")
        if not 0 < self.floor_bps <= self.line_rate_bps:
            raise ConfigError(f"min_rate_bps={self.min_rate_bps} must be in (0, line rate]")

    @property
    def floor_bps(self) -> float:
        if self.min_rate_bps is None:
            return self.line_rate_bps * MIN_RATE_FRAC
        return self.min_rate_bps

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


# -- signals -----------------------------------------------------------------------------
def rtt_inflation(rtt_s: npt.ArrayLike, base_rtt_s: float) -> FloatArray:
    """RTT / base-RTT (NVIDIA paper eq. 1)."""
    return np.asarray(rtt_s, dtype=np.float64) / base_rtt_s


def qdepth_inflation(max_qdepth_pkts: npt.ArrayLike, pkt_bytes: int, line_rate_bps: float,
                     base_rtt_s: float) -> FloatArray:
    """1 + queued bytes / (base-RTT · line rate) (NVIDIA paper eq. 6, max queue on path)."""
    q_bytes = np.asarray(max_qdepth_pkts, dtype=np.float64) * pkt_bytes
    return 1.0 + q_bytes * 8.0 / (base_rtt_s * line_rate_bps)


def compute_delta(inflation: npt.ArrayLike, rate_norm: npt.ArrayLike, target: float,
                  beta: float) -> FloatArray:
    """δ = target − max(inflation − β, 0)·√rate (NVIDIA paper eq. 4)."""
    infl = np.asarray(inflation, dtype=np.float64)
    rate = np.clip(np.asarray(rate_norm, dtype=np.float64), 0.0, None)
    return target - np.maximum(infl - beta, 0.0) * np.sqrt(rate)


def reward(inflation: npt.ArrayLike, rate_norm: npt.ArrayLike, target: float,
           beta: float) -> FloatArray:
    """r = −(target − max(inflation − β, 0)·√rate)² (REFERENCE §3, NVIDIA eq. 1)."""
    return -(compute_delta(inflation, rate_norm, target, beta) ** 2)


def inflation_from(params: RlccParams, rtt_s: npt.ArrayLike | None,
                   max_qdepth_pkts: npt.ArrayLike | None) -> FloatArray:
    """The inflation for ``params.signal`` (queue depth falls back to RTT when absent)."""
    if params.signal == "qdepth" and max_qdepth_pkts is not None:
        return qdepth_inflation(max_qdepth_pkts, params.pkt_bytes, params.line_rate_bps,
                                params.base_rtt_s)
    if rtt_s is None:
        raise ConfigError("RL-CC needs an RTT sample (or a queue depth with signal='qdepth')")
    return rtt_inflation(rtt_s, params.base_rtt_s)


# -- state and step ----------------------------------------------------------------------
@dataclass(frozen=True)
class RlccState:
    """Per-flow RL-CC state (arrays of length N)."""

    rate: FloatArray  # current rate (b/s)
    prev_action: FloatArray  # a_{t-1}
    delta: FloatArray  # last δ
    inflation: FloatArray  # last inflation
    policy_state: PolicyState
    decisions: npt.NDArray[np.int64]
    last_cut: FloatArray  # time of the last decision that lowered the rate (-inf: none)

    @property
    def n(self) -> int:
        return int(self.rate.shape[0])


def init_state(n: int, params: RlccParams, policy: Policy) -> RlccState:
    rate = np.full(n, params.line_rate_bps * params.initial_rate_frac)
    return RlccState(rate=rate, prev_action=np.ones(n), delta=np.full(n, params.target),
                     inflation=np.ones(n), policy_state=policy.initial_state(n),
                     decisions=np.zeros(n, dtype=np.int64), last_cut=np.full(n, -np.inf))


def step(state: RlccState, params: RlccParams, policy: Policy, inflation: npt.ArrayLike,
         mask: npt.ArrayLike | None = None, t: float | None = None,
         sent_t: npt.ArrayLike | None = None, no_raise: bool = False) -> RlccState:
    """One decision for the flows in ``mask`` given their current inflation.

    ``no_raise``: the action is at most 1 (a decision a loss triggered: the rule's NAK).

    δ uses the rate the flow was sending at (normalised); the policy sees (δ, a_{t−1});
    the new rate is clip(a, bounds)·rate, kept in [floor, line rate].

    With ``t`` (now) and ``sent_t`` (when the packet behind each flow's signal left the
    host): a flow lowers its rate at most once per round trip, as DCTCP and Swift do --
    a decision whose action is below 1 is dropped (the flow's state stays as it was)
    when the signal left before the flow's last cut, so that signal cannot show the
    cut's effect yet.  Increases are never held back.  Without this, a queue of 40 base
    RTTs (all flows starting at line rate into one port) drew a cut of 1/1.2 at every
    decision for a whole queueing delay: the flows fell 1000-fold for a 4-fold overload
    (docs/hostcc-cc.md "Decision clock").
    """
    n = state.n
    m = np.ones(n, dtype=np.bool_) if mask is None else np.asarray(mask, dtype=np.bool_)
    if m.shape != (n,):
        raise ConfigError(f"mask has shape {m.shape}, expected ({n},)")
    infl_all = np.broadcast_to(np.asarray(inflation, dtype=np.float64), (n,))
    idx = np.flatnonzero(m)
    if idx.size == 0:
        return state
    infl = infl_all[idx]
    delta = compute_delta(infl, state.rate[idx] / params.line_rate_bps, params.target,
                          params.beta)
    obs = np.stack([delta, state.prev_action[idx]], axis=1)
    raw, sub_state = policy.act(obs, take_state(state.policy_state, idx))
    action = np.clip(np.nan_to_num(raw, nan=1.0), params.action_min, params.action_max)
    if no_raise:
        action = np.minimum(action, 1.0)
    last_cut = state.last_cut
    if t is not None and sent_t is not None:
        sent = np.broadcast_to(np.asarray(sent_t, dtype=np.float64), (n,))[idx]
        cut = action < 1.0
        keep = ~cut | (sent >= last_cut[idx])
        if not keep.all():
            idx, infl, delta, action = idx[keep], infl[keep], delta[keep], action[keep]
            sub_state = tuple(a[keep] for a in sub_state)
            cut = cut[keep]
        last_cut = last_cut.copy()
        last_cut[idx[cut]] = t
    rate = state.rate.copy()
    rate[idx] = np.clip(rate[idx] * action, params.floor_bps, params.line_rate_bps)
    prev = state.prev_action.copy()
    prev[idx] = action
    d_all = state.delta.copy()
    d_all[idx] = delta
    i_all = state.inflation.copy()
    i_all[idx] = infl
    dec = state.decisions.copy()
    dec[idx] += 1
    return replace(state, rate=rate, prev_action=prev, delta=d_all, inflation=i_all,
                   policy_state=scatter_state(state.policy_state, idx, sub_state),
                   decisions=dec, last_cut=last_cut)
