"""One host flow's RL-CC rule in Python scalars, step for step the vectorized rule
(p4cc.hostcc.rlcc_rule.RlccRule and p4cc.hostcc.rlcc.step) at N = 1.

A host sender's :class:`p4cc.hostcc.cc.RlccController` drives one flow.  Through the
vectorized rule every RTT sample ran some sixty numpy operations on arrays of one
element (~1-3 µs each) around the policy's forward pass, and a late sample runs the
decision step several times (catch-up): in the calibration rig an RL-CC sender with 16
flows spent about half its CPU there (docs/hostcc-cc.md, "The host's rule on scalars").
This class runs the same operations on floats, in the same order, so its rates,
actions, δ and decisions equal the vectorized rule's to the bit; only the policy's
forward pass stays a numpy call on a (1, 2) observation, the same call the vectorized
step makes.  ``tests/test_rlcc_one.py`` drives both with random event sequences, and
``tests/test_cc_rule_equivalence.py`` compares the host controller with the simulator's
hook.

numpy semantics kept on floats: ``np.maximum``/``np.minimum`` propagate NaN (Python's
``max``/``min`` do not), ``np.nan_to_num`` maps NaN to the given value and ±inf to the
largest finite floats, and ``np.sqrt``/``math.sqrt`` are both correctly rounded.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from p4cc.hostcc import rlcc
from p4cc.hostcc.rlcc_policies import PolicyState
from p4cc.hostcc.rlcc_rule import RlccFlows, RlccRule

_BIG = sys.float_info.max


def _maximum(a: float, b: float) -> float:
    """``np.maximum`` on two floats (NaN if either is)."""
    return a if (a != a or a >= b) else b


def _minimum(a: float, b: float) -> float:
    """``np.minimum`` on two floats (NaN if either is)."""
    if a != a or b != b:
        return math.nan
    return a if a <= b else b


def _nan_to_num(x: float, nan: float) -> float:
    """``np.nan_to_num(x, nan=nan)`` on a float."""
    if x != x:
        return nan
    if x == math.inf:
        return _BIG
    return -_BIG if x == -math.inf else x


class RlccOne:
    """One flow's RL-CC state and its decisions (RlccRule at N = 1, on scalars)."""

    def __init__(self, rule: RlccRule) -> None:
        self.rule = rule
        p = rule.params
        self.params, self.policy = p, rule.policy
        self._iv = rule.decision_interval_s
        fresh = rule.init(1)  # the initial values, exactly as the vectorized rule's
        cc = fresh.cc
        self.rate = float(cc.rate[0])
        self.prev_action = float(cc.prev_action[0])
        self.delta = float(cc.delta[0])
        self.inflation = float(cc.inflation[0])
        self.decisions = int(cc.decisions[0])
        self.last_cut = float(cc.last_cut[0])
        self.policy_state: PolicyState = cc.policy_state
        self.last_decision = float(fresh.last_decision[0])
        self.last_rtt = float(fresh.last_rtt[0])
        self.last_qdepth = float(fresh.last_qdepth[0])
        self.pend_n = int(fresh.pend_n[0])
        self.pend_excess = float(fresh.pend_excess[0])
        self.pend_min = float(fresh.pend_min[0])

    # -- the rule's events (RlccRule) ---------------------------------------------------
    def signal_inflation(self, rtt: float, q: float | None) -> float:
        """RlccRule.inflation: from the queue depth where the signal is it and the depth
        is known (not NaN), else from the RTT."""
        p = self.params
        infl = rtt / p.base_rtt_s  # rlcc.rtt_inflation
        if p.signal == "qdepth" and q is not None:
            q_bytes = _nan_to_num(q, 0.0) * p.pkt_bytes  # rlcc.qdepth_inflation
            qi = 1.0 + q_bytes * 8.0 / (p.base_rtt_s * p.line_rate_bps)
            return infl if q != q else qi
        return infl

    def on_rtt_sample(self, t: float, rtt_s: float, q: float | None = None) -> None:
        """RlccRule.on_rtt_sample for this flow: the sample is pending, then a decision
        if one is due."""
        rtt = float(rtt_s)
        infl = self.signal_inflation(rtt, q)
        excess = _maximum(infl - self.params.beta, 0.0)
        self.last_rtt = rtt
        if q is not None:
            self.last_qdepth = q
        self.pend_n += 1
        self.pend_excess = self.pend_excess + excess
        self.pend_min = _minimum(self.pend_min, infl)
        self._decide(t, rtt, q)

    def on_nack(self, t: float) -> None:
        """RlccRule.on_nack: a decision point on the last RTT sample (none: nothing)."""
        if self.last_rtt != self.last_rtt:
            return
        q = None if self.params.signal != "qdepth" else self.last_qdepth
        self._decide(t, self.last_rtt, q, no_raise=True)

    def _decide(self, t: float, rtt: float, q: float | None, no_raise: bool = False) -> None:
        """RlccRule._decide: whole intervals since the last decision, each a step (at
        most ``max_catchup``), on the pending samples' signal; the interval grid kept."""
        iv, last = self._iv, self.last_decision
        if not (t - last) >= iv:
            return
        beta = self.params.beta
        if self.pend_n > 0:
            mean_excess = self.pend_excess / max(self.pend_n, 1)
            infl = beta + mean_excess if mean_excess > 0 else self.pend_min
        else:
            infl = self.signal_inflation(rtt, q)
        finite = math.isfinite(last)
        k = float(math.floor((t - last if finite else iv) / iv)) if iv > 0 else 1.0
        cap = self.rule.max_catchup
        steps = k if k < cap else float(cap)
        sent = t - rtt
        for _ in range(int(steps)):
            self._step(infl, t, sent, no_raise)
        grid = finite and k <= cap if iv > 0 else False
        self.last_decision = last + k * iv if grid else t
        self.pend_n, self.pend_excess, self.pend_min = 0, 0.0, math.inf

    def _step(self, infl: float, t: float, sent: float, no_raise: bool = False) -> None:
        """rlcc.step for this flow, with the once-per-round-trip hold on cuts (and, for a
        NAK's decision, ``no_raise``)."""
        p = self.params
        rate_norm = self.rate / p.line_rate_bps
        delta = p.target - _maximum(infl - p.beta, 0.0) * math.sqrt(_maximum(rate_norm, 0.0))
        obs = np.array([[delta, self.prev_action]], dtype=np.float64)
        raw, new_state = self.policy.act(obs, self.policy_state)
        action = _nan_to_num(float(raw[0]), 1.0)
        action = min(max(action, p.action_min), p.action_max)  # np.clip
        if no_raise and action > 1.0:  # np.minimum(action, 1.0)
            action = 1.0
        cut = action < 1.0
        if cut and not sent >= self.last_cut:
            return  # the signal left before the last cut: it cannot show it yet
        if cut:
            self.last_cut = t
        self.rate = min(max(self.rate * action, p.floor_bps), p.line_rate_bps)
        self.prev_action, self.delta, self.inflation = action, delta, infl
        self.decisions += 1
        # scatter_state writes the new state into copies of the old arrays: their dtype
        self.policy_state = tuple(b.astype(a.dtype, copy=False)
                                  for a, b in zip(self.policy_state, new_state, strict=True))

    # -- the vectorized form, for readers of RlccController.state ---------------------
    def flows(self) -> RlccFlows:
        """This flow as the vectorized rule's one-flow state (new arrays)."""
        cc = rlcc.RlccState(
            rate=np.array([self.rate]), prev_action=np.array([self.prev_action]),
            delta=np.array([self.delta]), inflation=np.array([self.inflation]),
            policy_state=self.policy_state,
            decisions=np.array([self.decisions], dtype=np.int64),
            last_cut=np.array([self.last_cut]))
        return RlccFlows(cc=cc, last_decision=np.array([self.last_decision]),
                         last_rtt=np.array([self.last_rtt]),
                         last_qdepth=np.array([self.last_qdepth]),
                         pend_n=np.array([self.pend_n], dtype=np.int64),
                         pend_excess=np.array([self.pend_excess]),
                         pend_min=np.array([self.pend_min]))
