"""DCQCN reaction point (RP) as pure, vectorized functions over N flows.

One implementation serves the host sender (N=1, via :mod:`p4cc.hostcc.cc`) and the
simulator (thousands of flows).  Every function takes a frozen :class:`DcqcnState` and
returns a new one; nothing is mutated in place.

Semantics (REFERENCE §2; HPCC ns-3 ``rdma-hw.cc`` "Mellanox's version of DCQCN":
``cnp_received_mlx``, ``UpdateAlphaMlx``, ``CheckRateDecreaseMlx``,
``RateIncEventTimerMlx``; DCQCN paper, Zhu et al. SIGCOMM'15, §3.1):

* The first CNP of a flow sets α = ``alpha_init`` and starts the α timer and the
  decrease-check timer (both periodic from that instant).  It does not count as
  "CNP arrived" for the α update (as in ns-3).
* α timer (period ``alpha_period_s``): α = (1-g)·α + g if a CNP arrived since the last
  update, else α = (1-g)·α.
* Decrease check (period ``decrease_period_s``): if a CNP arrived since the last check,
  Rt = Rc (only if an increase happened since the last cut, or ``clamp_target``),
  Rc = max(min_rate, Rc·max(1-α/2, min_dec_factor)); both increase stages, the byte
  counter and the increase timer restart.  ``decrease_period_s=None`` is the paper's
  variant: cut at once on every CNP, then α = (1-g)·α + g, and restart the α timer.
* Increase events come from the timer (``increase_period_s``, own stage count i) and
  the byte counter (``byte_counter_bytes``, own stage count j); with counts taken
  before the event: max(i,j) < F fast recovery (Rc = (Rt+Rc)/2); min(i,j) > F hyper
  increase (Rt += R_HAI, × (min(i,j)-F) if ``hai_grows``); otherwise additive increase
  (Rt += R_AI); Rt ≤ line rate; Rc = (Rt+Rc)/2.  Without a byte counter j = i, which is
  exactly ns-3's rule (stage < F, == F, > F).
* Events at the same instant run in the order: CNP / byte report, α update, decrease
  check, increase timer.  (ns-3 schedules the check 1 ns after the α update; the golden
  trace with CNPs every 50 µs needs a CNP on the grid to be counted by that instant's
  α update and check.)  If the state was already advanced to t, a CNP at t comes after
  the timer events at t.

Times are held as integer nanoseconds so that one big :func:`advance` and many small
ones give the same trajectory.  α is lazy: no rate depends on it until a cut, so the α
updates (the pending CNP's one, then the pure decays in closed form, (1-g)^k) and the
idle decrease checks are applied only where α is read (a cut, a CNP) and before a
public function returns; the timer loop visits only rate-changing events (decrease
checks with a CNP pending, increase events), so a jump over many periods costs a few
vectorized steps.

Two public forms of the one rule (the in-place steps live in :mod:`p4cc.hostcc.dcqcn_core`):

* the pure functions :func:`on_cnp`, :func:`on_bytes_sent`, :func:`advance` over a frozen
  :class:`DcqcnState` (tests, analysis, one-off use);
* :class:`DcqcnFlows`, a pool of flows stepped in place, with α kept lazy across calls.
  The host's :class:`p4cc.hostcc.cc.DcqcnController` (N = 1) and the simulator's
  ``p4cc.sim.cc.DcqcnHook`` (every flow slot) both step a ``DcqcnFlows``, so a host flow
  and a simulated flow fed the same CNPs, byte counts and rate queries take the same
  decisions to the bit (tests/test_cc_rule_equivalence.py).  The pure functions give the
  same rates within float rounding of α (the closed-form decays are split differently).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.dcqcn_core import (
    ARRAYS,
    BLOCKS,
    NEVER,
    DcqcnState,
    Work,
    any_true,
    check_time,
    init_state,
    lazy_advance,
    lazy_bytes,
    lazy_cnp,
    materialize,
)
from p4cc.hostcc.dcqcn_params import (
    DCQCN_PARAM_SETS,
    DcqcnParams,
    check_run_time_change,
    dcqcn_params,
    to_ns,
)

__all__ = ["DCQCN_PARAM_SETS", "NEVER", "DcqcnFlows", "DcqcnParams", "DcqcnState", "advance",
           "dcqcn_params", "init_state", "on_bytes_sent", "on_cnp", "select", "to_ns",
           "trace_row"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _mask(n: int, mask: npt.ArrayLike | None) -> BoolArray:
    if mask is None:
        return np.ones(n, dtype=np.bool_)
    m = np.asarray(mask)
    if m.dtype != np.bool_:  # flow indices
        out = np.zeros(n, dtype=np.bool_)
        out[m.astype(np.int64)] = True
        return out
    if m.shape != (n,):
        raise ConfigError(f"mask has shape {m.shape}, expected ({n},)")
    return m


def _anything_due(s: DcqcnState, t_ns: int) -> bool:
    """Whether any timer (α, decrease check, increase) of an active flow is due by t."""
    if not any_true(s.active):
        return False
    nxt = np.minimum(np.minimum(s.next_alpha, s.next_dec), s.next_inc)
    return any_true(s.active & (nxt <= t_ns))


def _public(state: DcqcnState, p: DcqcnParams, t_ns: int) -> Work:
    w = Work(state)
    check_time(w, t_ns)
    return w


def advance(state: DcqcnState, params: DcqcnParams, t: float) -> DcqcnState:
    """Process every timer event up to and including time ``t`` (seconds)."""
    t_ns = to_ns(t)
    if t_ns == state.t_ns:  # already there (e.g. a rate query right after an event)
        return state
    if t_ns > state.t_ns and not _anything_due(state, t_ns):
        return replace(state, t_ns=t_ns)
    w = _public(state, params, t_ns)
    lazy_advance(w, params, t_ns)
    materialize(w, params)
    return w.freeze()


def on_cnp(state: DcqcnState, params: DcqcnParams, t: float,
           mask: npt.ArrayLike | None = None) -> DcqcnState:
    """CNPs arrive at time ``t`` for the flows in ``mask`` (bool array or indices; None=all)."""
    t_ns = to_ns(t)
    w = _public(state, params, t_ns)
    m = _mask(w.rc.shape[0], mask).nonzero()[0]
    lazy_cnp(w, params, t_ns, m)
    materialize(w, params)
    return w.freeze()


def on_bytes_sent(state: DcqcnState, params: DcqcnParams, t: float,
                  nbytes: npt.ArrayLike) -> DcqcnState:
    """Flows sent ``nbytes`` (array or scalar) by time ``t``: byte-counter increase events."""
    if params.byte_counter_bytes is None or not any_true(state.active):
        return advance(state, params, t)
    t_ns = to_ns(t)
    w = _public(state, params, t_ns)
    sent = np.broadcast_to(np.asarray(nbytes, dtype=np.int64), w.rc.shape)
    if np.any(sent < 0):
        raise ConfigError("nbytes must be >= 0")
    lazy_bytes(w, params, t_ns, sent)
    materialize(w, params)
    return w.freeze()


def trace_row(state: DcqcnState, i: int = 0) -> dict[str, float]:
    """One flow's state as plain numbers (for logs and the host trace)."""
    return {"t_s": state.t, "rate_bps": float(state.rc[i]), "target_bps": float(state.rt[i]),
            "alpha": float(state.alpha[i]), "timer_stage": float(state.t_stage[i]),
            "byte_stage": float(state.b_stage[i])}


def select(state: DcqcnState, idx: npt.ArrayLike) -> DcqcnState:
    """The sub-state of some flows (e.g. to compare one flow with a batch)."""
    ix = np.asarray(idx)
    return replace(state, **{nm: getattr(state, nm)[ix] for nm in ARRAYS})


class DcqcnFlows:
    """DCQCN reaction points of a pool of N flows, stepped in place.

    The one DCQCN rule as the host controller (N = 1) and the simulator's hook (a slot
    per flow) run it: CNPs (:meth:`on_cnp`), bytes sent (:meth:`on_bytes_sent`) and rate
    queries (:meth:`rate`, which runs the timers) over the whole pool at once.  α
    updates and idle decrease checks stay lazy: they are applied where α is read (a cut,
    a CNP) and in :attr:`state`, not every α period.  The core runs only when a rate can
    change: a CNP, a decrease check with a CNP pending, an increase event (the pool keeps
    a bound on the next one), so a rate query between events costs a comparison.  Time
    must not go backwards (the host controller clamps its events).
    """

    def __init__(self, params: DcqcnParams, n: int = 0, t0: float = 0.0) -> None:
        self.params = params
        self._w = Work(init_state(n, params, t0))
        fresh = init_state(1, params, 0.0)
        self._fresh = [np.array([getattr(fresh, nm)[0] for nm in names])[:, None]
                       for names in BLOCKS]
        self._blocks: list[npt.NDArray[np.generic]] = []
        self._next_change_ns = int(NEVER)
        self._carry = np.zeros(n)  # fractional bytes not yet reported to the byte counter
        self._regroup()

    @property
    def n(self) -> int:
        return int(self._w.rc.shape[0])

    def _regroup(self) -> None:
        """Hold the arrays in a few blocks (rows) so that resetting slots is a few writes."""
        w = self._w
        self._blocks = [np.array([getattr(w, nm) for nm in names]) for names in BLOCKS]
        for block, names in zip(self._blocks, BLOCKS, strict=True):
            for i, nm in enumerate(names):
                setattr(w, nm, block[i])

    @property
    def state(self) -> DcqcnState:
        """Every flow's state with the lazy events applied (a copy)."""
        w = Work(self._w.freeze())
        materialize(w, self.params)
        return w.freeze()

    def state_at(self, t: float) -> DcqcnState:
        """:attr:`state` advanced to ``t`` (a copy; the pool itself does not move)."""
        w = Work(self._w.freeze())
        t_ns = max(to_ns(t), w.t_ns)
        lazy_advance(w, self.params, t_ns)
        materialize(w, self.params)
        return w.freeze()

    def grow(self, n: int) -> None:
        """Extend the pool to ``n`` flows (the new ones idle at the params' line rate)."""
        w = self._w
        extra = init_state(n - self.n, self.params, w.t_ns * 1e-9)
        for nm in ARRAYS:
            setattr(w, nm, np.concatenate([getattr(w, nm), getattr(extra, nm)]))
        self._carry = np.concatenate([self._carry, np.zeros(n - len(self._carry))])
        self._regroup()

    def reset(self, slots: IntArray, line_bps: FloatArray) -> None:
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
        # (init_state; reset writes fresh values), so no mask on the increase timer
        inc = int(w.next_inc.min(initial=NEVER))
        if self.params.decrease_ns is None:
            self._next_change_ns = inc
            return
        dec = int(np.where(w.dec_cnp, w.next_dec, NEVER).min(initial=NEVER))
        self._next_change_ns = min(dec, inc)

    def set_params(self, params: DcqcnParams) -> None:
        """Change the parameters of the running pool in place (CHAMELEON's run-time tuning).

        The lazy α events up to the pool's time are applied with the old α period and gain
        first, so the change takes effect from now on; timers already scheduled fire at
        their old times and then run with the new periods (as a NIC register written
        between two timer events).  The line rate and whether decreases are checked
        periodically (``decrease_period_s`` None or not) cannot change: ConfigError."""
        old = self.params
        check_run_time_change(old, params)
        materialize(self._w, old)
        self.params = params
        fresh = init_state(1, params, 0.0)
        self._fresh = [np.array([getattr(fresh, nm)[0] for nm in names])[:, None]
                       for names in BLOCKS]
        self._update()

    def on_cnp(self, t: float, ix: IntArray) -> None:
        """CNPs at ``t`` for the flows ``ix`` (unique indices)."""
        if len(ix):
            w = self._w
            if lazy_cnp(w, self.params, to_ns(t), ix, self._next_change_ns):
                self._update()
            elif self.params.decrease_ns is not None:  # the new checks of these flows
                self._next_change_ns = min(self._next_change_ns, int(w.next_dec[ix].min()))

    def on_bytes_sent(self, t: float, nbytes: FloatArray) -> None:
        """Every flow sent ``nbytes`` (fractions carried over) by ``t``: the byte counter."""
        if self.params.byte_counter_bytes is None:
            return
        total = self._carry + nbytes
        whole = np.floor(total)
        self._carry = total - whole
        lazy_bytes(self._w, self.params, to_ns(t), whole.astype(np.int64))
        self._update()

    def rate(self, t: float) -> FloatArray:
        """Run the timers to ``t``; every flow's current rate Rc (b/s; do not modify)."""
        # Rates change only at decrease checks and increase events: until the next one
        # the core need not run (it processes any later jump exactly, α included).
        t_ns = to_ns(t)
        if t_ns >= self._next_change_ns:
            lazy_advance(self._w, self.params, t_ns)
            self._update()
        return self._w.rc
