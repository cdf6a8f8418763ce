"""The RL-CC decision rule: when a flow decides, and on what signal (vectorized over N flows).

:func:`p4cc.hostcc.rlcc.step` is one decision.  This module is the rule around it -- what
a flow does with its sequence of RTT samples and NAKs -- and the host and the simulator
both run it: the host's :class:`p4cc.hostcc.cc.RlccController` (N = 1) and the
simulator's ``p4cc.sim.cc.RlccHook`` (every flow slot).  Training happens in the
simulator and deployment on the hosts, so a policy must see the same decisions in both.
Each part was measured as necessary on BMv2 (docs/emulation.md, "RL-CC, second
session"; docs/hostcc-cc.md "Decision rule"):

1. **Samples.**  An RTT sample (with an INT queue depth if ``signal="qdepth"``) gives an
   inflation (:func:`rlcc.inflation_from`); the samples since a flow's last decision are
   pending.
2. **Decision clock.**  With an interval I > 0 a flow decides at most once per I; a
   sample (or NAK) k whole intervals after the last decision makes k decisions on the
   same signal (at most :data:`MAX_CATCHUP`), and the flow keeps its interval grid.
   Without it a flow decided once per sample, and faster flows (more ACKs, more samples)
   took more ×1.2 steps per second (BMv2: Jain 0.47).  I = 0: every sample decides.
3. **Signal.**  The pending samples count as their mean δ: inflation β + mean((inflation
   − β)⁺) (δ is linear in that term; averaging the inflation instead favoured fast
   flows, BMv2 Jain 0.66-0.83); when none exceeds β, the smallest (δ = target either
   way).  No pending sample (a NAK): the last sample's inflation.
4. **NAKs** are decision points on the last RTT sample (none yet: nothing): in deep
   congestion the ACKs that carry samples are few (drops; resends are not timed), and
   on BMv2 the flows decided ~5 times a second while the buffer stayed full for 2.75 s.
   A NAK's decisions never raise the rate (the action is at most 1): a loss is
   congestion whatever the last sample said.  Without that, on BMv2 (the RL-CC 8 -> 1
   spec, 32 flows at 5 Mb/s) flows whose last sample was 15-25 ms old and low kept
   raising their rates x1.033 per NAK to the line rate while h9's buffer stayed full
   for 25 s (docs/emulation.md, "Session 42").
5. **At most one cut per round trip**: every decision passes ``t`` and ``sent_t`` = t −
   the RTT of its signal to :func:`rlcc.step` (a 1000-fold fall for a 4-fold overload
   without it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc
from p4cc.hostcc.rlcc_policy_base import Policy
from p4cc.scale import Scale

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Most decisions one sample or NAK makes (the catch-up of a late signal).
MAX_CATCHUP = 8
#: RL-CC's decision interval in base RTTs of the scale, on the hosts and in the simulator.
#: RL-CC decides once per RTT; on BMv2 (testbed: base RTT 2 ms, measured RTTs 0.5-7 ms)
#: the 4->1 incast gave Jain 0.93/0.96 at utilisation 0.65/0.60 with 1 base RTT (ACK
#: every 4 ms) and 0.98 at 0.70 with 2 (ACK every 8 ms) (docs/emulation.md).
DECISION_RTTS = 2.0


def decision_interval_s(scale: Scale) -> float:
    """The RL-CC decision interval of ``scale``: :data:`DECISION_RTTS` base RTTs."""
    return DECISION_RTTS * scale.base_rtt_s


@dataclass(frozen=True)
class RlccFlows:
    """The rule's per-flow state (arrays of length N) around the core's :class:`RlccState`."""

    cc: rlcc.RlccState
    last_decision: FloatArray  # time of the last decision (-inf: none yet)
    last_rtt: FloatArray  # the last RTT sample (NaN: none yet)
    last_qdepth: FloatArray  # its INT max queue depth in packets (NaN: none)
    pend_n: IntArray  # samples since the last decision
    pend_excess: FloatArray  # their Σ (inflation − β)⁺
    pend_min: FloatArray  # their smallest inflation (+inf: none)

    @property
    def n(self) -> int:
        return self.cc.n

    @property
    def rate(self) -> FloatArray:
        return self.cc.rate


_RULE_ARRAYS = ("last_decision", "last_rtt", "last_qdepth", "pend_n", "pend_excess",
                "pend_min")
_CC_ARRAYS = ("rate", "prev_action", "delta", "inflation", "decisions", "last_cut")


@dataclass(frozen=True)
class RlccRule:
    """The RL-CC rule of a set of flows: parameters, policy and decision interval.

    A policy trained on the INT queue depth (``policy.signal == "qdepth"``,
    p4cc.hostcc.rlcc_policies.SIGNALS) is fed it whatever ``params.signal`` says
    (``rule.params`` is what the rule runs): it never saw an RTT.  Other policies run on
    the signal of ``params`` (RTT-trained ones included: the two inflations are the same
    quantity on a single-bottleneck path, NVIDIA RL-CC eq. 5-6)."""

    params: rlcc.RlccParams
    policy: Policy
    decision_interval_s: float = field(
        default=0.0, metadata={"help": "at most one decision per interval; 0: per sample"})
    max_catchup: int = MAX_CATCHUP

    def __post_init__(self) -> None:
        if getattr(self.policy, "signal", None) == "qdepth" != self.params.signal:
            object.__setattr__(self, "params", replace(self.params, signal="qdepth"))
        if not self.decision_interval_s >= 0:
            raise ConfigError(f"decision_interval_s={self.decision_interval_s} must be >= 0")
        if self.max_catchup < 1:
            raise ConfigError(f"max_catchup={self.max_catchup} must be >= 1")

    # -- state -----------------------------------------------------------------------
    def init(self, n: int) -> RlccFlows:
        """N fresh flows: at the initial rate, no sample, no decision yet."""
        return RlccFlows(cc=rlcc.init_state(n, self.params, self.policy),
                         last_decision=np.full(n, -np.inf), last_rtt=np.full(n, np.nan),
                         last_qdepth=np.full(n, np.nan), pend_n=np.zeros(n, dtype=np.int64),
                         pend_excess=np.zeros(n), pend_min=np.full(n, np.inf))

    def grow(self, st: RlccFlows, n: int) -> RlccFlows:
        """``st`` extended to ``n`` flows (the new ones fresh)."""
        extra = self.init(n - st.n)
        cat = {nm: np.concatenate([getattr(st, nm), getattr(extra, nm)])
               for nm in _RULE_ARRAYS}
        cc = replace(st.cc, policy_state=tuple(
            np.concatenate([a, b]) for a, b in
            zip(st.cc.policy_state, extra.cc.policy_state, strict=True)),
            **{nm: np.concatenate([getattr(st.cc, nm), getattr(extra.cc, nm)])
               for nm in _CC_ARRAYS})
        return replace(st, cc=cc, **cat)

    def reset(self, st: RlccFlows, slots: npt.ArrayLike) -> None:
        """Start fresh flows in ``slots`` of ``st`` (in place: a pool's slot reuse)."""
        ix = np.asarray(slots, dtype=np.int64)
        fresh = self.init(len(ix))
        for nm in _RULE_ARRAYS:
            getattr(st, nm)[ix] = getattr(fresh, nm)
        for nm in _CC_ARRAYS:
            getattr(st.cc, nm)[ix] = getattr(fresh.cc, nm)
        for a, b in zip(st.cc.policy_state, fresh.cc.policy_state, strict=True):
            a[ix] = b

    # -- events ----------------------------------------------------------------------
    def inflation(self, rtt_s: FloatArray, max_qdepth_pkts: FloatArray | None) -> FloatArray:
        """Per-flow inflation of samples (queue depth NaN or absent: from the RTT)."""
        p = self.params
        infl = rlcc.rtt_inflation(rtt_s, p.base_rtt_s)
        if p.signal == "qdepth" and max_qdepth_pkts is not None:
            q = np.asarray(max_qdepth_pkts, dtype=np.float64)
            qi = rlcc.qdepth_inflation(np.nan_to_num(q), p.pkt_bytes, p.line_rate_bps,
                                       p.base_rtt_s)
            infl = np.where(np.isnan(q), infl, qi)
        return infl

    def on_rtt_sample(self, st: RlccFlows, t: float, mask: BoolArray, rtt_s: npt.ArrayLike,
                      max_qdepth_pkts: npt.ArrayLike | None = None) -> RlccFlows:
        """RTT samples at ``t`` for the flows in ``mask`` (``rtt_s``, and the INT queue
        depths, per flow or one for all; NaN depth: none): pending, then decisions."""
        n = st.n
        rtt = np.broadcast_to(np.asarray(rtt_s, dtype=np.float64), (n,))
        q = (None if max_qdepth_pkts is None else
             np.broadcast_to(np.asarray(max_qdepth_pkts, dtype=np.float64), (n,)))
        infl = self.inflation(rtt, q)
        excess = np.maximum(infl - self.params.beta, 0.0)
        st = replace(
            st, last_rtt=np.where(mask, rtt, st.last_rtt),
            last_qdepth=st.last_qdepth if q is None else np.where(mask, q, st.last_qdepth),
            pend_n=st.pend_n + mask, pend_excess=np.where(mask, st.pend_excess + excess,
                                                          st.pend_excess),
            pend_min=np.where(mask, np.minimum(st.pend_min, infl), st.pend_min))
        return self._decide(st, t, mask, rtt, q)

    def on_nack(self, st: RlccFlows, t: float, mask: BoolArray) -> RlccFlows:
        """NAKs at ``t``: decision points on each flow's last RTT sample (none: nothing)."""
        m = mask & ~np.isnan(st.last_rtt)
        q = None if self.params.signal != "qdepth" else st.last_qdepth
        return self._decide(st, t, m, st.last_rtt, q, no_raise=True)

    def _decide(self, st: RlccFlows, t: float, mask: BoolArray, rtt: FloatArray,
                q: FloatArray | None, no_raise: bool = False) -> RlccFlows:
        iv = self.decision_interval_s
        due = mask & ((t - st.last_decision) >= iv)
        if not np.count_nonzero(due):
            return st
        beta = self.params.beta
        has = st.pend_n > 0
        mean_excess = st.pend_excess / np.maximum(st.pend_n, 1)
        pending = np.where(mean_excess > 0, beta + mean_excess, st.pend_min)
        infl = np.where(has, pending, self.inflation(rtt, q))
        last = st.last_decision
        finite = np.isfinite(last)
        if iv > 0:  # whole intervals since the last decision (>= 1 where due)
            k = np.floor(np.where(finite, t - last, iv) / iv)
        else:
            k = np.ones(st.n)
        steps = np.minimum(k, self.max_catchup)
        cc, sent = st.cc, t - rtt
        for j in range(int(steps[due].max())):  # (at most one of them a cut: rlcc.step)
            cc = rlcc.step(cc, self.params, self.policy, infl, due & (steps > j), t=t,
                           sent_t=sent, no_raise=no_raise)
        # keep the interval grid (a sample 2.5 intervals late leaves 0.5 for the next)
        grid = finite & (k <= self.max_catchup) if iv > 0 else np.zeros(st.n, np.bool_)
        decided = np.where(grid, last + k * iv, t)
        return replace(st, cc=cc, last_decision=np.where(due, decided, last),
                       pend_n=np.where(due, 0, st.pend_n),
                       pend_excess=np.where(due, 0.0, st.pend_excess),
                       pend_min=np.where(due, np.inf, st.pend_min))
