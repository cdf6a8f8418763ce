"""Single-flow rate controllers for the host sender: N=1 wrappers over the vectorized
cores in :mod:`p4cc.hostcc.dcqcn` and :mod:`p4cc.hostcc.rlcc` (no separate logic).

Times are seconds on the caller's monotonic clock.  A controller never goes back in
time: an event stamped before the controller's current time is applied at its current
time (host events can race with a rate query).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from p4cc.errors import ConfigError
from p4cc.hostcc import dcqcn, rlcc
from p4cc.hostcc.rlcc_policies import Policy, ReferencePolicy, data_dir, load_policy
from p4cc.scale import Scale


@runtime_checkable
class RateController(Protocol):
    """What the host sender calls; ``rate_bps(t)`` advances timers to ``t``."""

    name: str

    def on_cnp(self, t: float) -> None: ...

    def on_rtt_sample(self, t: float, rtt_s: float,
                      max_qdepth_pkts: int | None = None) -> None: ...

    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...

    def on_nack(self, t: float) -> None: ...

    def rate_bps(self, t: float) -> float: ...

    def trace(self, t: float) -> dict[str, float]: ...


class DcqcnController:
    """DCQCN reaction point for one flow.  RTT samples and NACKs do not change DCQCN."""

    def __init__(self, params: dcqcn.DcqcnParams, t0: float = 0.0) -> None:
        self.params = params
        self.name = f"dcqcn:{params.name}"
        self.state = dcqcn.init_state(1, params, t0)
        self.cnps = 0
        self.nacks = 0

    def _t(self, t: float) -> float:
        return max(t, self.state.t)

    def on_cnp(self, t: float) -> None:
        self.cnps += 1
        self.state = dcqcn.on_cnp(self.state, self.params, self._t(t))

    def on_rtt_sample(self, t: float, rtt_s: float, max_qdepth_pkts: int | None = None) -> None:
        self.state = dcqcn.advance(self.state, self.params, self._t(t))

    def on_bytes_sent(self, t: float, nbytes: int) -> None:
        self.state = dcqcn.on_bytes_sent(self.state, self.params, self._t(t), nbytes)

    def on_nack(self, t: float) -> None:
        self.nacks += 1

    def rate_bps(self, t: float) -> float:
        self.state = dcqcn.advance(self.state, self.params, self._t(t))
        return float(self.state.rc[0])

    def trace(self, t: float) -> dict[str, float]:
        self.rate_bps(t)
        row = dcqcn.trace_row(self.state)
        row.update(cnps=float(self.cnps), nacks=float(self.nacks))
        return row


#: AckReq spacing of RL-CC flows in decision intervals: 2 -> with the host sender's
#: 4 ms interval on the testbed scale an ACK per 8 ms at most, every 3rd packet of a
#: flow at a quarter of 10 Mb/s (a packet per 3.2 ms).  An AckReq on every packet
#: (0.25) with the samples between decisions averaged was less fair on BMv2 (Jain
#: 0.66-0.92 against 0.92-0.997; docs/emulation.md).
ACK_INTERVALS_PER_DECISION = 2.0
#: most decisions one RTT sample makes (RlccController with a decision interval)
MAX_CATCHUP = 8


class RlccController:
    """RL-CC for one flow: decisions on RTT samples.

    ``decision_interval_s`` 0 (default): one decision per sample.  Above 0 (the host
    sender uses ``api.RLCC_DECISION_RTTS`` base RTTs: RL-CC decides once per RTT): at
    most one per interval, and a sample that comes k whole intervals after the last
    decision makes k decisions (at most :data:`MAX_CATCHUP`) on that sample, as a
    per-interval agent seeing the same latest signal would.  Without the catch-up a
    flow decided once per sample, and the sample rate grows with the flow's own packet
    rate, so faster flows took more ×1.2 steps per second than slower ones (BMv2, RTT
    samples from ACKs: Jain 0.47).  Samples come from probe replies and data ACKs;
    ``ack_interval_s`` (:data:`ACK_INTERVALS_PER_DECISION` decision intervals, or RTT
    normalisers without an interval) is how often the host sender asks for an ACK, i.e.
    an RTT sample.  The samples since the last decision count as their mean δ; at most
    one of a sample's decisions is a cut, one per round trip (:func:`rlcc.step`); a NAK
    is a decision point on the last sample (:meth:`on_nack`).
    """

    def __init__(self, policy: Policy, params: rlcc.RlccParams | None = None,
                 base_rtt_s: float | None = None, line_rate_bps: float | None = None,
                 decision_interval_s: float | None = None) -> None:
        if params is None:
            if base_rtt_s is None or line_rate_bps is None:
                raise ConfigError("RlccController needs params or base_rtt_s and line_rate_bps")
            params = rlcc.RlccParams(line_rate_bps=line_rate_bps, base_rtt_s=base_rtt_s)
        else:
            if base_rtt_s is not None:
                params = replace(params, base_rtt_s=base_rtt_s)
            if line_rate_bps is not None:
                params = replace(params, line_rate_bps=line_rate_bps)
        if decision_interval_s is not None and not decision_interval_s >= 0:
            raise ConfigError(f"decision_interval_s={decision_interval_s} must be >= 0")
        self.policy, self.params = policy, params
        self.name = f"rlcc:{policy.name}"
        self.interval = decision_interval_s or 0.0
        self.ack_interval_s = ACK_INTERVALS_PER_DECISION * (self.interval or
                                                            params.base_rtt_s)
        self.state = rlcc.init_state(1, params, policy)
        self.last_decision = -math.inf
        self.cnps = self.nacks = self.samples = 0
        self.bytes_sent = 0
        self.last_rtt: float | None = None
        self.last_qdepth: int | None = None
        self._pending: list[float] = []  # inflation samples since the last decision

    def on_cnp(self, t: float) -> None:
        self.cnps += 1

    def on_rtt_sample(self, t: float, rtt_s: float, max_qdepth_pkts: int | None = None) -> None:
        self.samples += 1
        self.last_rtt, self.last_qdepth = rtt_s, max_qdepth_pkts
        self._pending.append(float(rlcc.inflation_from(
            self.params, np.array([rtt_s]),
            None if max_qdepth_pkts is None else [max_qdepth_pkts])[0]))
        self._decide(t, rtt_s, max_qdepth_pkts)

    def _decide(self, t: float, rtt_s: float, max_qdepth_pkts: int | None) -> None:
        if t - self.last_decision < self.interval:
            return
        # the samples since the last decision, averaged as δ is: β + mean((inflation − β)⁺)
        # gives the mean of the samples' δ (δ is linear in that term).  Averaging the
        # inflation instead would favour fast flows: more samples, less noise, a smaller
        # mean of the convex (·)⁺ term, smaller cuts (BMv2: Jain 0.66-0.83).
        beta = self.params.beta
        if self._pending:
            excess = float(np.mean(np.maximum(np.array(self._pending) - beta, 0.0)))
            infl = np.array([beta + excess if excess > 0 else min(self._pending)])
        else:
            infl = rlcc.inflation_from(self.params, np.array([rtt_s]),
                                       None if max_qdepth_pkts is None else [max_qdepth_pkts])
        self._pending.clear()
        k = 1
        if self.interval > 0 and math.isfinite(self.last_decision):
            k = int((t - self.last_decision) / self.interval)
        for _ in range(min(k, MAX_CATCHUP)):  # (at most one of them a cut: rlcc.step)
            self.state = rlcc.step(self.state, self.params, self.policy, infl, t=t,
                                   sent_t=t - rtt_s)
        # keep the interval grid (a sample 2.5 intervals late leaves 0.5 for the next)
        grid = self.interval > 0 and math.isfinite(self.last_decision) and k <= MAX_CATCHUP
        self.last_decision = self.last_decision + k * self.interval if grid else t

    def on_bytes_sent(self, t: float, nbytes: int) -> None:
        self.bytes_sent += int(nbytes)

    def on_nack(self, t: float) -> None:
        """A NAK (a drop at a full queue) is a decision point too, on the last RTT sample.

        In deep congestion the ACKs that carry RTT samples are few (drops, go-back-N
        resends are not timed: Karn's rule), so decisions on samples alone came ~5 times
        a second while the buffer stayed full for 2.75 s (BMv2 4->1 incast, start-up);
        a NAK lets the flow cut once per round trip (:func:`rlcc.step`) meanwhile."""
        self.nacks += 1
        if self.last_rtt is not None:
            self._decide(t, self.last_rtt, self.last_qdepth)

    def rate_bps(self, t: float) -> float:
        return float(self.state.rate[0])

    def trace(self, t: float) -> dict[str, float]:
        s = self.state
        return {"t_s": t, "rate_bps": float(s.rate[0]), "action": float(s.prev_action[0]),
                "delta": float(s.delta[0]), "inflation": float(s.inflation[0]),
                "reward": float(-s.delta[0] ** 2), "decisions": float(s.decisions[0]),
                "cnps": float(self.cnps), "nacks": float(self.nacks)}


class FixedController:
    """A constant rate (baseline; ignores all feedback)."""

    def __init__(self, rate_bps: float) -> None:
        if not (math.isfinite(rate_bps) and rate_bps > 0):
            raise ConfigError(f"fixed rate {rate_bps!r} must be a positive number of b/s")
        self.rate = float(rate_bps)
        self.name = f"fixed:{self.rate:g}"

    def on_cnp(self, t: float) -> None:
        pass

    def on_rtt_sample(self, t: float, rtt_s: float, max_qdepth_pkts: int | None = None) -> None:
        pass

    def on_bytes_sent(self, t: float, nbytes: int) -> None:
        pass

    def on_nack(self, t: float) -> None:
        pass

    def rate_bps(self, t: float) -> float:
        return self.rate

    def trace(self, t: float) -> dict[str, float]:
        return {"t_s": t, "rate_bps": self.rate}


_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
#: ``rlcc:<name>`` shortcuts for the shipped reference policy files.
SHIPPED = {"lstm": "rlcc-lstm-ref.npz", "mlp": "rlcc-mlp-ref.npz",
           "trees": "rlcc-trees-ref.json", "catboost": "rlcc-catboost-ref.json"}
CONTROLLER_NAMES = ("dcqcn", "dcqcn:<paramset>", "rlcc", "rlcc:<policyfile|reference|"
                    + "|".join(SHIPPED) + ">", "fixed", "fixed:<rate, e.g. 5M>")


def parse_rate(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgG]?)(?:b(?:ps|/s)?)?\s*", text)
    try:
        value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"bad rate {text!r}: use b/s with an optional k/M/G suffix, e.g. 5M")
    return value


def policy_by_name(arg: str, params: rlcc.RlccParams) -> Policy:
    """The policy of ``rlcc:<arg>``: ``reference`` (or empty), a shipped name, or a file."""
    if arg in ("", "reference"):
        return ReferencePolicy()
    if arg in SHIPPED:
        return load_policy(data_dir() / SHIPPED[arg])
    return load_policy(Path(arg))


def make_controller(name: str, scale: Scale | None = None, line_rate_bps: float | None = None,
                    **opts: Any) -> RateController:
    """Build a controller by name (see :data:`CONTROLLER_NAMES`).

    ``dcqcn[:set]``: options are :class:`~p4cc.hostcc.dcqcn.DcqcnParams` overrides
    (default set ``hpcc-ns3``, scaled with ``scale``).  ``rlcc[:policy]``: options are
    :class:`~p4cc.hostcc.rlcc.RlccParams` fields plus ``decision_interval_s``; base RTT
    and packet size default to the scale's.  ``fixed[:rate]``: default the line rate.
    """
    sc = scale if scale is not None else Scale()
    line = float(line_rate_bps if line_rate_bps is not None else sc.link_rate_bps)
    kind, _, arg = name.partition(":")
    if kind == "dcqcn":
        return DcqcnController(dcqcn.dcqcn_params(arg or "hpcc-ns3", line, sc, **opts))
    if kind == "rlcc":
        interval = opts.pop("decision_interval_s", None)
        opts.setdefault("base_rtt_s", rlcc.norm_rtt_s(sc))
        opts.setdefault("pkt_bytes", sc.pkt_bytes)
        try:
            rparams = rlcc.RlccParams(line_rate_bps=line, **opts)
        except TypeError as exc:
            raise ConfigError(f"bad RL-CC option: {exc}") from None
        return RlccController(policy_by_name(arg, rparams), rparams, decision_interval_s=interval)
    if kind == "fixed":
        return FixedController(parse_rate(arg) if arg else line)
    raise ConfigError(f"unknown controller {name!r}; choose one of {list(CONTROLLER_NAMES)}")
