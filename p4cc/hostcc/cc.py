"""Single-flow rate controllers for the host sender, and the registry of host CC kinds.

The controllers run the rules the simulator runs: DCQCN through
:class:`p4cc.hostcc.dcqcn_one.DcqcnOne` (the vectorized core's steps on scalars, held
bit-identical to :class:`p4cc.hostcc.dcqcn.DcqcnFlows` at N = 1 by tests), RL-CC through
an N=1 :class:`p4cc.hostcc.rlcc_rule.RlccRule`.  Host CC kinds (``dcqcn``, ``rlcc``, ``fixed``,
``tcp``) are picked by name from :data:`HOST_CC_KINDS` (:func:`make_controller`); the
policy of ``rlcc:<name>`` by :func:`p4cc.hostcc.rlcc_names.policy_by_name` (its names
are re-exported here).

Times are seconds on the caller's monotonic clock.  A controller never goes back in
time: an event stamped before the latest time it has seen is applied at that time
(host events can race with a rate query).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from p4cc.errors import ConfigError
from p4cc.hostcc import dcqcn, rlcc
from p4cc.hostcc.dcqcn_one import DcqcnOne
from p4cc.hostcc.rlcc_names import (  # noqa: F401  (names re-exported)
    DEFAULT_POLICY,
    DEPRECATED_NAMES,
    INT8_SUFFIX,
    PI_NAMES,
    SHIPPED,
    policy_by_name,
    policy_name,
)
from p4cc.hostcc.rlcc_one import RlccOne
from p4cc.hostcc.rlcc_policies import Policy
from p4cc.hostcc.rlcc_rule import MAX_CATCHUP, RlccFlows, RlccRule, decision_interval_s
from p4cc.scale import Scale

__all__ = ["ACK_INTERVALS_PER_DECISION", "DEFAULT_POLICY", "DEPRECATED_NAMES", "HOST_CC_KINDS",
           "MAX_CATCHUP", "DcqcnController", "FixedController", "HostCcKind", "RateController",
           "RlccController", "host_cc_kind", "host_cc_names", "make_controller", "parse_rate",
           "policy_by_name", "policy_name", "register_host_cc", "userspace_cc_names"]

_SET_LOCK = threading.Lock()  # hands run-time parameters to DcqcnControllers


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
    """DCQCN reaction point for one flow (:class:`p4cc.hostcc.dcqcn_one.DcqcnOne`: the
    vectorized core's steps on scalars, bit-identical to a :class:`dcqcn.DcqcnFlows` of
    one).  RTT samples and NACKs do not change DCQCN (counted in the trace)."""

    def __init__(self, params: dcqcn.DcqcnParams, t0: float = 0.0) -> None:
        self.params = params
        self.name = f"dcqcn:{params.name}"
        self.flows = DcqcnOne(params, t0)
        self.now = t0
        self.cnps = 0
        self.nacks = 0
        self._pending: dcqcn.DcqcnParams | None = None

    @property
    def state(self) -> dcqcn.DcqcnState:
        """The flow's state at the latest time seen (lazy events applied; a copy)."""
        return self.flows.state_at(self.now)

    def set_params(self, params: dcqcn.DcqcnParams) -> None:
        """New parameters from another thread (the CHAMELEON monitor): taken over by the
        flow (:meth:`DcqcnOne.set_params`) at the sender's next call."""
        with _SET_LOCK:
            self._pending = params

    def _t(self, t: float) -> float:
        self.now = max(t, self.now)
        if self._pending is not None:
            with _SET_LOCK:  # (the common path only reads the attribute)
                pending, self._pending = self._pending, None
            assert pending is not None
            self.flows.rate(self.now)  # events up to now run with the old parameters
            self.flows.set_params(pending)
            self.params = pending
        return self.now

    def on_cnp(self, t: float) -> None:
        self.cnps += 1
        self.flows.on_cnp(self._t(t))

    def on_rtt_sample(self, t: float, rtt_s: float, max_qdepth_pkts: int | None = None) -> None:
        self.flows.rate(self._t(t))

    def on_bytes_sent(self, t: float, nbytes: int) -> None:
        self.flows.on_bytes_sent(self._t(t), float(nbytes))

    def on_nack(self, t: float) -> None:
        self.nacks += 1

    def rate_bps(self, t: float) -> float:
        return self.flows.rate(self._t(t))

    def trace(self, t: float) -> dict[str, float]:
        t = self._t(t)
        row = self.flows.trace_row_at(t)
        row.update(cnps=float(self.cnps), nacks=float(self.nacks))
        return row


#: AckReq spacing of RL-CC flows in decision intervals: 2 -> with the host sender's
#: 4 ms interval on the testbed scale an ACK per 8 ms at most, every 3rd packet of a
#: flow at a quarter of 10 Mb/s (a packet per 3.2 ms).  An AckReq on every packet
#: (0.25) with the samples between decisions averaged was less fair on BMv2 (Jain
#: 0.66-0.92 against 0.92-0.997; docs/emulation.md).
ACK_INTERVALS_PER_DECISION = 2.0


class RlccController:
    """RL-CC for one flow: the RL-CC rule (:class:`p4cc.hostcc.rlcc_rule.RlccRule`, N=1),
    run on scalars by :class:`p4cc.hostcc.rlcc_one.RlccOne` (the same decisions to the bit).

    ``decision_interval_s`` 0 (default): one decision per sample.  Above 0 (the host
    sender uses :func:`rlcc_rule.decision_interval_s`, ``DECISION_RTTS`` base RTTs: RL-CC
    decides once per RTT): at most one per interval, with the catch-up of late samples;
    the samples since the last decision count as their mean δ; a NAK is a decision point
    on the last sample; at most one cut per round trip (the rule's docstring has each
    part and why).  Samples come from probe replies and data ACKs; ``ack_interval_s``
    (:data:`ACK_INTERVALS_PER_DECISION` decision intervals, or RTT normalisers without
    an interval) is how often the host sender asks for an ACK, i.e. an RTT sample.
    """

    def __init__(self, policy: Policy, params: rlcc.RlccParams | None = None,
                 base_rtt_s: float | None = None, line_rate_bps: float | None = None,
                 decision_interval_s: float | None = None, name: str | None = None) -> None:
        if params is None:
            if base_rtt_s is None or line_rate_bps is None:
                raise ConfigError("RlccController needs params or base_rtt_s and line_rate_bps")
            params = rlcc.RlccParams(line_rate_bps=line_rate_bps, base_rtt_s=base_rtt_s)
        else:
            if base_rtt_s is not None:
                params = replace(params, base_rtt_s=base_rtt_s)
            if line_rate_bps is not None:
                params = replace(params, line_rate_bps=line_rate_bps)
        self.rule = RlccRule(params, policy, decision_interval_s or 0.0)
        self.policy, self.params = policy, params
        #: ``rlcc:<shortcut>`` when built from one (make_controller), else the policy's kind
        self.name = name or f"rlcc:{policy.name}"
        self.interval = self.rule.decision_interval_s
        self.ack_interval_s = ACK_INTERVALS_PER_DECISION * (self.interval or
                                                            params.base_rtt_s)
        self.one = RlccOne(self.rule)  # the rule at N = 1 on scalars, to the bit
        self.cnps = self.nacks = self.samples = 0
        self.bytes_sent = 0
        self.last_rtt: float | None = None
        self.last_qdepth: int | None = None

    @property
    def flows(self) -> RlccFlows:
        """The flow as the vectorized rule's one-flow state (a copy)."""
        return self.one.flows()

    @property
    def state(self) -> rlcc.RlccState:
        return self.flows.cc

    def on_cnp(self, t: float) -> None:
        self.cnps += 1

    def on_rtt_sample(self, t: float, rtt_s: float, max_qdepth_pkts: int | None = None) -> None:
        self.samples += 1
        self.last_rtt, self.last_qdepth = rtt_s, max_qdepth_pkts
        q = None if max_qdepth_pkts is None else float(max_qdepth_pkts)
        self.one.on_rtt_sample(t, rtt_s, q)

    def on_bytes_sent(self, t: float, nbytes: int) -> None:
        self.bytes_sent += int(nbytes)

    def on_nack(self, t: float) -> None:
        """A NAK (a drop at a full queue) is a decision point on the last RTT sample; its
        decisions never raise the rate (the rule's item 4)."""
        self.nacks += 1
        self.one.on_nack(t)

    def rate_bps(self, t: float) -> float:
        return self.one.rate

    def trace(self, t: float) -> dict[str, float]:
        s = self.one
        return {"t_s": t, "rate_bps": s.rate, "action": s.prev_action, "delta": s.delta,
                "inflation": s.inflation, "reward": -s.delta ** 2,
                "decisions": float(s.decisions), "cnps": float(self.cnps),
                "nacks": float(self.nacks)}


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


def parse_rate(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgG]?)(?:b(?:ps|/s)?)?\s*", text)
    try:
        value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"bad rate {text!r}: use b/s with an optional k/M/G suffix, e.g. 5M")
    return value


# -- host CC kinds -------------------------------------------------------------------------
#: ``make(variant, scale, line_rate_bps, opts)``: a controller for ``kind[:variant]``.
ControllerMaker = Callable[[str, Scale, float, dict[str, Any]], RateController]


def _no_opts(scale: Scale) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class HostCcKind:
    """One host CC kind: its name (the part of ``host_cc`` before ``:``) and builder."""

    name: str
    usage: str  # e.g. "dcqcn[:<parameter set>]" (errors, help)
    #: builds a controller; None: not p4cc's transport (kernel TCP through iperf3)
    make: ControllerMaker | None
    #: options the host sender adds for this kind (RL-CC: its decision interval)
    sender_opts: Callable[[Scale], dict[str, Any]] = _no_opts


#: Host CC kinds by name (:func:`register_host_cc`); ``p4cc.sim.cc`` keys its hooks by the
#: same names, and the experiment spec accepts exactly these.
HOST_CC_KINDS: dict[str, HostCcKind] = {}


def register_host_cc(kind: HostCcKind) -> HostCcKind:
    if kind.name in HOST_CC_KINDS or ":" in kind.name:
        raise ConfigError(f"host CC kind {kind.name!r} is registered already or has a ':'")
    HOST_CC_KINDS[kind.name] = kind
    return kind


def host_cc_names() -> tuple[str, ...]:
    return tuple(HOST_CC_KINDS)


def userspace_cc_names() -> tuple[str, ...]:
    """The kinds p4cc's userspace transport runs (a controller; not ``tcp``)."""
    return tuple(nm for nm, k in HOST_CC_KINDS.items() if k.make is not None)


def host_cc_kind(name: str) -> HostCcKind:
    """The kind of ``name`` (``kind`` or ``kind:variant``); ConfigError when unknown."""
    kind = HOST_CC_KINDS.get(name.partition(":")[0])
    if kind is None:
        raise ConfigError(f"unknown host CC {name!r}; choose one of "
                          f"{[k.usage for k in HOST_CC_KINDS.values()]}")
    return kind


def make_controller(name: str, scale: Scale | None = None, line_rate_bps: float | None = None,
                    **opts: Any) -> RateController:
    """Build a controller by name (a kind of :data:`HOST_CC_KINDS`, ``kind[:variant]``).

    ``dcqcn[:set]``: options are :class:`~p4cc.hostcc.dcqcn.DcqcnParams` overrides
    (default set ``hpcc-ns3``, scaled with ``scale``).  ``rlcc[:policy]``: options are
    :class:`~p4cc.hostcc.rlcc.RlccParams` fields plus ``decision_interval_s``; base RTT
    and packet size default to the scale's.  ``fixed[:rate]``: default the line rate.
    """
    sc = scale if scale is not None else Scale()
    line = float(line_rate_bps if line_rate_bps is not None else sc.link_rate_bps)
    kind = host_cc_kind(name)
    if kind.make is None:
        raise ConfigError(f"host CC {name!r} is the kernel's (iperf3 bulk flows), not a p4cc "
                          f"controller; p4cc's transport runs {list(userspace_cc_names())}")
    return kind.make(name.partition(":")[2], sc, line, dict(opts))


def _make_dcqcn(arg: str, sc: Scale, line: float, opts: dict[str, Any]) -> RateController:
    return DcqcnController(dcqcn.dcqcn_params(arg or "hpcc-ns3", line, sc, **opts))


def _make_rlcc(arg: str, sc: Scale, line: float, opts: dict[str, Any]) -> RateController:
    interval = opts.pop("decision_interval_s", None)
    opts.setdefault("base_rtt_s", rlcc.norm_rtt_s(sc))
    opts.setdefault("pkt_bytes", sc.pkt_bytes)
    try:
        rparams = rlcc.RlccParams(line_rate_bps=line, **opts)
    except TypeError as exc:
        raise ConfigError(f"bad RL-CC option: {exc}") from None
    name = policy_name(arg)
    return RlccController(_policy(arg, rparams), rparams, decision_interval_s=interval,
                          name=None if name is None else f"rlcc:{name}")


#: Policies loaded by this process, shared by its flows: a policy holds weights only
#: (a flow's recurrent state is the flow's own, RlccState.policy_state), and loading one
#: per flow cost 0.7-1.0 ms of a sender's CPU at each flow's start.  Keyed by the name or
#: path (with the file's size and modification time) and the target (int8 quantisation
#: depends on it).
_POLICIES: dict[tuple[object, ...], Policy] = {}


def _policy(arg: str, rparams: rlcc.RlccParams) -> Policy:
    name = policy_name(arg)
    if name is None:  # a file of the user's: reloaded when it changes
        try:
            st = Path(arg).stat()
            key: tuple[object, ...] = (arg, st.st_size, st.st_mtime_ns, rparams.target)
        except OSError:
            return policy_by_name(arg, rparams)  # (its error names the file)
    else:
        key = (name, rparams.target)
    if key not in _POLICIES:
        _POLICIES[key] = policy_by_name(arg, rparams)
    return _POLICIES[key]


def _make_fixed(arg: str, sc: Scale, line: float, opts: dict[str, Any]) -> RateController:
    return FixedController(parse_rate(arg) if arg else line)


def _rlcc_sender_opts(scale: Scale) -> dict[str, Any]:
    return {"decision_interval_s": decision_interval_s(scale)}


register_host_cc(HostCcKind("dcqcn", "dcqcn[:<parameter set>]", _make_dcqcn))
register_host_cc(HostCcKind(
    "rlcc", "rlcc[:<policy file>|pi|" + "|".join(SHIPPED) + "]", _make_rlcc,
    _rlcc_sender_opts))
register_host_cc(HostCcKind("fixed", "fixed[:<rate, e.g. 5M>]", _make_fixed))
register_host_cc(HostCcKind("tcp", "tcp (kernel TCP, bulk workloads only)", None))
#: every name ``make_controller`` and the spec accept (usage strings)
CONTROLLER_NAMES = tuple(k.usage for k in HOST_CC_KINDS.values())
