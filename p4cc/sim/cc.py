"""Congestion-control hooks: the engine's view of the host CC cores, over slots of flows.

The engine keeps flows in a pool of slots (arrays of capacity ``cap``); a hook holds the
CC state of every slot and is stepped over the whole pool at once.  DCQCN is
p4cc.hostcc.dcqcn's pure core (no second implementation): CNPs, bytes sent and time
are fed to ``on_cnp``/``on_bytes_sent``/``advance`` over the slot arrays.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc import dcqcn, rlcc, rlcc_policies
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

    def on_sent(self, t: float, nbytes: FloatArray) -> None:
        pass

    def rate(self, t: float) -> FloatArray:
        return self._rate


class DcqcnHook:
    """DCQCN reaction points of every slot, stepped through p4cc.hostcc.dcqcn.

    The hook keeps the core's mutable working state and calls the core's in-place
    steps (``_lazy_cnp``/``_lazy_bytes``/``_lazy_advance``, the same code the public
    ``on_cnp``/``on_bytes_sent``/``advance`` run), so α updates and idle decrease checks
    stay lazy: they are applied when a flow's α is read (a cut, a CNP), not every α
    period.  ``state`` gives the public (fully applied) state."""

    name = "dcqcn"
    uses_rtt = False  # DCQCN reacts to CNPs only

    #: The core's arrays, grouped by dtype into blocks (rows) so that resetting slots
    #: is a few block writes; the working state's arrays are row views of the blocks.
    _BLOCKS = (("rc", "rt", "alpha", "line"),
               ("next_alpha", "next_dec", "next_inc", "t_stage", "b_stage", "bytes_acc"),
               ("active", "alpha_cnp", "dec_cnp"))

    def __init__(self, params: dcqcn.DcqcnParams) -> None:
        self.params = params
        self._w = dcqcn._Work(dcqcn.init_state(0, params, 0.0))
        fresh = dcqcn.init_state(1, params, 0.0)
        self._fresh = [np.array([getattr(fresh, nm)[0] for nm in names])[:, None]
                       for names in self._BLOCKS]
        self._blocks: list[np.ndarray] = []
        self._next_change_ns = int(dcqcn.NEVER)
        self._carry = np.zeros(0)  # fractional bytes not yet reported to the byte counter
        self._regroup()

    def _regroup(self) -> None:
        w = self._w
        self._blocks = [np.array([getattr(w, nm) for nm in names]) for names in self._BLOCKS]
        for block, names in zip(self._blocks, self._BLOCKS, strict=True):
            for i, nm in enumerate(names):
                setattr(w, nm, block[i])

    @property
    def state(self) -> dcqcn.DcqcnState:
        """Every slot's state with the lazy events applied (a copy)."""
        w = dcqcn._Work(self._w.freeze())
        dcqcn._materialize(w, self.params)
        return w.freeze()

    def grow(self, cap: int, t: float) -> None:
        w = self._w
        extra = dcqcn.init_state(cap - len(w.rc), self.params, w.t_ns * 1e-9)
        for nm in dcqcn._ARRAYS:
            setattr(w, nm, np.concatenate([getattr(w, nm), getattr(extra, nm)]))
        self._carry = np.concatenate([self._carry, np.zeros(cap - len(self._carry))])
        self._regroup()

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        """Fresh flows in ``slots``: the values of ``init_state`` (no CNP seen, no timers)
        at line rates ``line_bps``."""
        if len(slots) == 0:
            return
        f, i, b = self._blocks
        ff, fi, fb = (x[:, 0] for x in self._fresh)
        carry = self._carry
        # slot by slot (usually one or two): column writes are cheaper than scatters
        for s, line in zip(slots.tolist(), line_bps.tolist(), strict=True):
            f[:, s] = ff
            f[0, s] = f[1, s] = f[3, s] = line  # rc, rt, line
            i[:, s] = fi
            b[:, s] = fb
            carry[s] = 0.0

    def _update(self) -> None:
        """The time of the next event that can change a rate."""
        w = self._w
        # a pending CNP implies an active flow, and inactive flows' timers are NEVER
        # (init_state; reset_slots writes fresh values), so no mask on the increase timer
        inc = int(w.next_inc.min(initial=dcqcn.NEVER))
        if self.params.decrease_ns is None:
            self._next_change_ns = inc
            return
        dec = int(np.where(w.dec_cnp, w.next_dec, dcqcn.NEVER).min(initial=dcqcn.NEVER))
        self._next_change_ns = min(dec, inc)

    def on_cnp(self, t: float, mask: BoolArray) -> None:
        ix = mask.nonzero()[0]
        if len(ix):
            w = self._w
            if dcqcn._lazy_cnp(w, self.params, dcqcn.to_ns(t), ix, self._next_change_ns):
                self._update()
            elif self.params.decrease_ns is not None:  # the new checks of these flows
                self._next_change_ns = min(self._next_change_ns, int(w.next_dec[ix].min()))

    def on_rtt(self, t: float, mask: BoolArray, rtt_s: FloatArray) -> None:
        pass  # DCQCN does not use delay

    def on_sent(self, t: float, nbytes: FloatArray) -> None:
        if self.params.byte_counter_bytes is None:
            return
        total = self._carry + nbytes
        whole = np.floor(total)
        self._carry = total - whole
        dcqcn._lazy_bytes(self._w, self.params, dcqcn.to_ns(t), whole.astype(np.int64))
        self._update()

    def rate(self, t: float) -> FloatArray:
        # Rates change only at decrease checks and increase events: until the next one
        # the core need not run (it processes any later jump exactly, α included).
        t_ns = dcqcn.to_ns(t)
        if t_ns >= self._next_change_ns:
            dcqcn._lazy_advance(self._w, self.params, t_ns)
            self._update()
        return self._w.rc


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
    """RL-CC through p4cc.hostcc.rlcc.step: one decision per flow per RTT sample.

    With ``policy=None`` the hook takes no decision by itself: ``decide`` applies actions
    given from outside (the gym environment), still through ``rlcc.step``.  Inflation is
    RTT / the scale's base RTT (every path of the built-in topologies has that RTT).
    """

    name = "rlcc"
    uses_rtt = True

    def __init__(self, params: rlcc.RlccParams, policy: rlcc_policies.Policy | None = None
                 ) -> None:
        self.params = params
        self.external = policy is None
        self.policy: rlcc_policies.Policy = _External() if policy is None else policy
        self.state = rlcc.init_state(0, params, self.policy)

    def grow(self, cap: int, t: float) -> None:
        extra = rlcc.init_state(cap - self.state.n, self.params, self.policy)
        st = self.state
        self.state = rlcc.RlccState(
            rate=np.concatenate([st.rate, extra.rate]),
            prev_action=np.concatenate([st.prev_action, extra.prev_action]),
            delta=np.concatenate([st.delta, extra.delta]),
            inflation=np.concatenate([st.inflation, extra.inflation]),
            policy_state=tuple(np.concatenate([a, b]) for a, b in
                               zip(st.policy_state, extra.policy_state, strict=True)),
            decisions=np.concatenate([st.decisions, extra.decisions]),
            last_cut=np.concatenate([st.last_cut, extra.last_cut]))

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        fresh = rlcc.init_state(len(slots), self.params, self.policy)
        st = self.state
        for nm in ("rate", "prev_action", "delta", "inflation", "decisions", "last_cut"):
            getattr(st, nm)[slots] = getattr(fresh, nm)
        for a, b in zip(st.policy_state, fresh.policy_state, strict=True):
            a[slots] = b

    def on_cnp(self, t: float, mask: BoolArray) -> None:
        pass

    def on_sent(self, t: float, nbytes: FloatArray) -> None:
        pass

    def on_rtt(self, t: float, mask: BoolArray, rtt_s: FloatArray) -> None:
        if self.external or not mask.any():
            return
        rtt = np.nan_to_num(rtt_s, nan=self.params.base_rtt_s)
        infl = rlcc.rtt_inflation(rtt, self.params.base_rtt_s)
        self.state = rlcc.step(self.state, self.params, self.policy, infl, mask, t=t,
                               sent_t=t - rtt)

    def decide(self, mask: BoolArray, rtt_s: FloatArray, actions: FloatArray) -> None:
        """Apply ``actions`` (one per flow in ``mask``, in slot order) through rlcc.step."""
        assert isinstance(self.policy, _External)
        self.policy.pending = np.asarray(actions, dtype=np.float64)
        infl = rlcc.rtt_inflation(np.nan_to_num(rtt_s, nan=self.params.base_rtt_s),
                                  self.params.base_rtt_s)
        self.state = rlcc.step(self.state, self.params, self.policy, infl, mask)

    def rate(self, t: float) -> FloatArray:
        return self.state.rate


class FixedRate(LineRate):
    """Every flow at one constant rate (capped at its line rate); host_cc ``fixed:<rate>``,
    as :class:`p4cc.hostcc.cc.FixedController` on the hosts."""

    name = "fixed"

    def __init__(self, rate_bps: float) -> None:
        super().__init__()
        self.rate_bps = float(rate_bps)

    def reset_slots(self, slots: IntArray, t: float, line_bps: FloatArray) -> None:
        self._rate[slots] = np.minimum(line_bps, self.rate_bps)


def make_hook(name: str, scale: Scale, params: str = "hpcc-ns3",
              policy: rlcc_policies.Policy | None = None) -> CcHook:
    if name == "line":
        return LineRate()
    if name == "fixed":
        from p4cc.hostcc.cc import parse_rate

        return FixedRate(parse_rate(params) if params else scale.link_rate_bps)
    if name == "dcqcn":
        return DcqcnHook(dcqcn.dcqcn_params(params, scale.link_rate_bps, scale))
    if name == "rlcc":
        from p4cc.hostcc.cc import policy_by_name  # the host's own name resolution

        rp = rlcc.RlccParams(scale.link_rate_bps, rlcc.norm_rtt_s(scale),
                             pkt_bytes=scale.pkt_bytes)
        pol = policy or policy_by_name("" if params == "hpcc-ns3" else params, rp)
        return RlccHook(rp, pol)
    raise ConfigError(f"unknown congestion control {name!r}; choose dcqcn, rlcc, fixed or "
                      "line")
