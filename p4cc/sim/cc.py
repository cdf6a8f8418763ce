"""Congestion-control hooks: the engine's view of the host CC rules, over slots of flows.

The engine keeps flows in a pool of slots (arrays of capacity ``cap``); a hook holds the
CC state of every slot and is stepped over the whole pool at once.  The hooks run the
host's rules through their public API only (no second implementation):
:class:`p4cc.hostcc.dcqcn.DcqcnFlows` for DCQCN and :class:`p4cc.hostcc.rlcc_rule.RlccRule`
for RL-CC, the same objects the host controllers of :mod:`p4cc.hostcc.cc` step for one
flow.  Hooks are picked by the host CC names of :data:`p4cc.hostcc.cc.HOST_CC_KINDS`
(:data:`SIM_HOOKS`, plus the simulator's own ``line``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc import dcqcn, rlcc, rlcc_policies
from p4cc.hostcc.cc import HOST_CC_KINDS, parse_rate, policy_by_name
from p4cc.hostcc.rlcc_rule import RlccRule, decision_interval_s
from p4cc.scale import Scale

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class CcHook(Protocol):
    name: str

    def grow(self, cap: int, t: float) -> None:
        """Extend the pool to ``cap`` slots (new slots idle)."""

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        """Start fresh flows in ``slots`` at time ``t``."""

    def on_cnp(self, t: float, mask: BoolArray) -> None: ...

    def on_rtt(self, t: float, mask: BoolArray, rtt_s: FloatArray) -> None: ...

    def on_nack(self, t: float, mask: BoolArray) -> None:
        """Loss notices (the hosts' NAKs) for the flows in ``mask``."""

    def on_sent(self, t: float, nbytes: FloatArray) -> None: ...

    def rate(self, t: float) -> FloatArray:
        """Advance to ``t`` and return every slot's sending rate (b/s)."""
        ...


class LineRate:
    """No congestion control: every flow sends at its line rate (a baseline)."""

    name = "line"
    uses_rtt = False

    def __init__(self) -> None:
        self._rate = np.zeros(0)

    def grow(self, cap: int, t: float) -> None:
        self._rate = np.concatenate([self._rate, np.zeros(cap - len(self._rate))])

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        self._rate[slots] = line_bps

    def on_cnp(self, t: float, mask: BoolArray) -> None:
        pass

    def on_rtt(self, t: float, mask: BoolArray, rtt_s: FloatArray) -> None:
        pass

    def on_nack(self, t: float, mask: BoolArray) -> None:
        pass

    def on_sent(self, t: float, nbytes: FloatArray) -> None:
        pass

    def rate(self, t: float) -> FloatArray:
        return self._rate


class DcqcnHook:
    """DCQCN reaction points of every slot: a :class:`p4cc.hostcc.dcqcn.DcqcnFlows`, the
    pool the host's DcqcnController steps for one flow.  ``state`` gives the public (fully
    applied) state."""

    name = "dcqcn"
    uses_rtt = False  # DCQCN reacts to CNPs only

    def __init__(self, params: dcqcn.DcqcnParams) -> None:
        self.params = params
        self.flows = dcqcn.DcqcnFlows(params)

    @property
    def state(self) -> dcqcn.DcqcnState:
        """Every slot's state with the lazy events applied (a copy)."""
        return self.flows.state

    def grow(self, cap: int, t: float) -> None:
        self.flows.grow(cap)

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        self.flows.reset(slots, line_bps)

    def on_cnp(self, t: float, mask: BoolArray) -> None:
        self.flows.on_cnp(t, mask.nonzero()[0])

    def on_rtt(self, t: float, mask: BoolArray, rtt_s: FloatArray) -> None:
        pass  # DCQCN does not use delay

    def on_nack(self, t: float, mask: BoolArray) -> None:
        pass  # nor losses

    def on_sent(self, t: float, nbytes: FloatArray) -> None:
        self.flows.on_bytes_sent(t, nbytes)

    def rate(self, t: float) -> FloatArray:
        return self.flows.rate(t)


class _External:
    """A policy whose actions are set from outside before each decision (the gym env)."""

    name = "external"

    def __init__(self) -> None:
        self.pending = np.ones(0)

    def initial_state(self, n: int) -> tuple[FloatArray, ...]:
        return ()

    def act(self, obs: FloatArray, state: tuple[FloatArray, ...]
            ) -> tuple[FloatArray, tuple[FloatArray, ...]]:
        return self.pending, state


class RlccHook:
    """RL-CC of every slot through the host's rule (:class:`p4cc.hostcc.rlcc_rule.RlccRule`):
    decisions at most once per ``decision_interval_s`` on the mean δ of the samples since
    the last one, with catch-up, loss notices as NAK decision points, at most one cut per
    round trip -- what the host's RlccController does for one flow.

    With ``policy=None`` the hook takes no decision by itself: ``decide`` applies actions
    given from outside (the gym environment, whose step is the decision clock), through
    ``rlcc.step``.  Inflation is RTT / ``params.base_rtt_s`` (every path of the built-in
    topologies has the scale's base RTT), or with ``params.signal == "qdepth"`` (the INT
    variant, NVIDIA RL-CC eq. 6) 1 + Q·8/(base RTT·line rate), Q the largest queue on
    the flow's path when its RTT probe passed (the engine delivers it with the RTT answer
    to a hook whose ``uses_int`` is true; ``int_last`` keeps each slot's latest, packets).
    """

    name = "rlcc"
    uses_rtt = True

    def __init__(self, params: rlcc.RlccParams, policy: rlcc_policies.Policy | None = None,
                 decision_interval_s: float = 0.0) -> None:
        self.external = policy is None
        self.policy: rlcc_policies.Policy = _External() if policy is None else policy
        self.rule = RlccRule(params, self.policy, decision_interval_s)
        self.params = self.rule.params  # the policy's own input signal, if it names one
        self.flows = self.rule.init(0)
        self.uses_int = self.params.signal == "qdepth"
        self.int_last = np.full(0, np.nan)

    @property
    def state(self) -> rlcc.RlccState:
        """The core's per-slot state (rate, last action, δ, ...)."""
        return self.flows.cc

    def grow(self, cap: int, t: float) -> None:
        self.flows = self.rule.grow(self.flows, cap)
        self.int_last = np.concatenate([self.int_last, np.full(cap - self.int_last.size,
                                                                np.nan)])

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        self.rule.reset(self.flows, slots)
        self.int_last[slots] = np.nan

    def on_cnp(self, t: float, mask: BoolArray) -> None:
        pass

    def on_sent(self, t: float, nbytes: FloatArray) -> None:
        pass

    def on_rtt(self, t: float, mask: BoolArray, rtt_s: FloatArray,
               max_qdepth_pkts: FloatArray | None = None) -> None:
        if max_qdepth_pkts is not None:
            self.int_last = np.where(mask, max_qdepth_pkts, self.int_last)
        if self.external or not mask.any():
            return
        self.flows = self.rule.on_rtt_sample(self.flows, t, mask, rtt_s, max_qdepth_pkts)

    def on_nack(self, t: float, mask: BoolArray) -> None:
        if self.external or not mask.any():
            return
        self.flows = self.rule.on_nack(self.flows, t, mask)

    def decide(self, mask: BoolArray, rtt_s: FloatArray, actions: FloatArray) -> None:
        """Apply ``actions`` (one per flow in ``mask``, in slot order) through rlcc.step."""
        assert isinstance(self.policy, _External)
        self.policy.pending = np.asarray(actions, dtype=np.float64)
        infl = self.inflation(rtt_s)
        cc = rlcc.step(self.flows.cc, self.params, self.policy, infl, mask)
        self.flows = replace(self.flows, cc=cc)

    def inflation(self, rtt_s: FloatArray) -> FloatArray:
        """Each slot's inflation on its latest signal (no sample yet: 1)."""
        rtt = np.nan_to_num(rtt_s, nan=self.params.base_rtt_s)
        q = None if not self.uses_int else np.nan_to_num(self.int_last[:rtt.size], nan=0.0)
        return rlcc.inflation_from(self.params, rtt, q)

    def rate(self, t: float) -> FloatArray:
        return self.flows.rate


class FixedRate(LineRate):
    """Every flow at one constant rate (capped at its line rate); host_cc ``fixed:<rate>``,
    as :class:`p4cc.hostcc.cc.FixedController` on the hosts."""

    name = "fixed"

    def __init__(self, rate_bps: float) -> None:
        super().__init__()
        self.rate_bps = float(rate_bps)

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        self._rate[slots] = np.minimum(line_bps, self.rate_bps)


#: ``make(variant, scale, policy)``: a hook for ``kind[:variant]``.
HookMaker = Callable[[str, Scale, "rlcc_policies.Policy | None"], CcHook]


def _dcqcn_hook(variant: str, scale: Scale, policy: rlcc_policies.Policy | None) -> CcHook:
    return DcqcnHook(dcqcn.dcqcn_params(variant or "hpcc-ns3", scale.link_rate_bps, scale))


def _rlcc_hook(variant: str, scale: Scale, policy: rlcc_policies.Policy | None) -> CcHook:
    rp = rlcc.RlccParams(scale.link_rate_bps, rlcc.norm_rtt_s(scale), pkt_bytes=scale.pkt_bytes)
    # the host's own policy names and decision interval
    pol = policy or policy_by_name("" if variant == "hpcc-ns3" else variant, rp)
    return RlccHook(rp, pol, decision_interval_s(scale))


def _fixed_hook(variant: str, scale: Scale, policy: rlcc_policies.Policy | None) -> CcHook:
    return FixedRate(parse_rate(variant) if variant else scale.link_rate_bps)


def _line_hook(variant: str, scale: Scale, policy: rlcc_policies.Policy | None) -> CcHook:
    return LineRate()


#: Simulator hooks by name: the host CC kinds the simulator models (the same names as
#: p4cc.hostcc.cc.HOST_CC_KINDS; ``tcp`` is not modelled) and ``line`` (no CC).
SIM_HOOKS: dict[str, HookMaker] = {"dcqcn": _dcqcn_hook, "rlcc": _rlcc_hook,
                                   "fixed": _fixed_hook, "line": _line_hook}


def sim_host_cc_names() -> tuple[str, ...]:
    """The host CC kinds (``host_cc`` of a spec) the simulator models."""
    return tuple(nm for nm in HOST_CC_KINDS if nm in SIM_HOOKS)


def sim_cc(host_cc: str, scale: Scale | None = None) -> tuple[str, str]:
    """The simulator's ``(SimConfig.cc, SimConfig.cc_params)`` for ``host_cc`` as a spec
    names it (``kind[:variant]``; DCQCN's set defaults to ``hpcc-ns3``), e.g.
    ``dcqcn:hpcc-ns3,min_rate_bps=1e8`` -> ``("dcqcn", "hpcc-ns3,min_rate_bps=1e8")``.
    ConfigError when the simulator does not model the kind; with ``scale``, also when the
    variant does not build (an unknown DCQCN set or field, a policy that does not load)."""
    if not isinstance(host_cc, str):
        raise ConfigError(f"host CC must be a string like 'dcqcn:hpcc-ns3', got {host_cc!r}")
    cc, _, variant = host_cc.partition(":")
    if cc not in sim_host_cc_names():
        raise ConfigError(f"unknown host CC {host_cc!r}; the simulator models "
                          f"{list(sim_host_cc_names())} (optionally ':variant', e.g. "
                          f"'dcqcn:hpcc-ns3,min_rate_bps=1e8')")
    params = variant or ("hpcc-ns3" if cc == "dcqcn" else "")
    if scale is not None:
        make_hook(cc, scale, params)
    return cc, params


def make_hook(name: str, scale: Scale, params: str = "hpcc-ns3",
              policy: rlcc_policies.Policy | None = None) -> CcHook:
    """The hook ``name`` (a key of :data:`SIM_HOOKS`); ``params`` is the variant (DCQCN
    parameter set, RL-CC policy, fixed rate)."""
    make = SIM_HOOKS.get(name)
    if make is None:
        raise ConfigError(f"unknown congestion control {name!r}; choose one of "
                          f"{sorted(SIM_HOOKS)}")
    return make(params, scale, policy)
