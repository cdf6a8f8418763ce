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
ones give the same trajectory.  Pure α decays between significant events are applied in
closed form ((1-g)^k), so a jump over many periods costs a few vectorized steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.dcqcn_params import DCQCN_PARAM_SETS, DcqcnParams, dcqcn_params, to_ns

__all__ = ["DCQCN_PARAM_SETS", "NEVER", "DcqcnParams", "DcqcnState", "advance", "dcqcn_params",
           "init_state", "on_bytes_sent", "on_cnp", "select", "to_ns", "trace_row"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: "No event scheduled" (a timer of an inactive flow).
NEVER = np.iinfo(np.int64).max
#: Rc within this fraction of the line rate after an increase counts as recovered.
RECOVERED_RTOL = 1e-12


# -- state -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DcqcnState:
    """RP state of N flows (arrays of length N); ``t_ns`` is the time it is valid at."""

    t_ns: int
    rc: FloatArray  # current rate Rc (b/s)
    rt: FloatArray  # target rate Rt (b/s)
    alpha: FloatArray
    line: FloatArray  # per-flow line rate (b/s)
    active: BoolArray  # has seen a CNP (timers running)
    alpha_cnp: BoolArray  # CNP since the last α update
    dec_cnp: BoolArray  # CNP since the last decrease check
    next_alpha: IntArray
    next_dec: IntArray
    next_inc: IntArray
    t_stage: IntArray  # increase-timer events since the last cut (i)
    b_stage: IntArray  # byte-counter events since the last cut (j)
    bytes_acc: IntArray  # bytes counted toward the next byte-counter event

    @property
    def n(self) -> int:
        return int(self.rc.shape[0])

    @property
    def t(self) -> float:
        return self.t_ns * 1e-9


_ARRAYS = ("rc", "rt", "alpha", "line", "active", "alpha_cnp", "dec_cnp", "next_alpha",
           "next_dec", "next_inc", "t_stage", "b_stage", "bytes_acc")


def init_state(n: int, params: DcqcnParams, t0: float = 0.0,
               line_rate_bps: float | npt.ArrayLike | None = None) -> DcqcnState:
    """N flows at line rate, no CNP seen yet (per-flow line rates optional)."""
    if n < 0:
        raise ConfigError(f"number of flows must be >= 0, got {n}")
    line = np.full(n, params.line_rate_bps, dtype=np.float64)
    if line_rate_bps is not None:
        line = np.broadcast_to(np.asarray(line_rate_bps, dtype=np.float64), (n,)).copy()
    if n and (not np.all(np.isfinite(line)) or np.any(line < params.min_rate_bps)):
        raise ConfigError(f"per-flow line rates must be finite and >= min_rate_bps="
                          f"{params.min_rate_bps}")
    never = np.full(n, NEVER, dtype=np.int64)
    zeros_i = np.zeros(n, dtype=np.int64)
    false = np.zeros(n, dtype=np.bool_)
    return DcqcnState(
        t_ns=to_ns(t0), rc=line.copy(), rt=line.copy(), alpha=np.full(n, params.alpha_init),
        line=line, active=false.copy(), alpha_cnp=false.copy(), dec_cnp=false.copy(),
        next_alpha=never.copy(), next_dec=never.copy(), next_inc=never.copy(),
        t_stage=zeros_i.copy(), b_stage=zeros_i.copy(), bytes_acc=zeros_i.copy())


class _Work:
    """Private mutable copy of a state used inside one pure call."""

    def __init__(self, s: DcqcnState) -> None:
        self.t_ns = s.t_ns
        for nm in _ARRAYS:
            setattr(self, nm, getattr(s, nm).copy())

    def freeze(self) -> DcqcnState:
        return DcqcnState(t_ns=self.t_ns, **{nm: getattr(self, nm) for nm in _ARRAYS})

    rc: FloatArray
    rt: FloatArray
    alpha: FloatArray
    line: FloatArray
    active: BoolArray
    alpha_cnp: BoolArray
    dec_cnp: BoolArray
    next_alpha: IntArray
    next_dec: IntArray
    next_inc: IntArray
    t_stage: IntArray
    b_stage: IntArray
    bytes_acc: IntArray


def _any(m: BoolArray) -> bool:
    """``m.any()`` for a bool array (count_nonzero is several times cheaper per call)."""
    return bool(np.count_nonzero(m))


def _ix(m: BoolArray | IntArray) -> IntArray:
    """Flow indices of a bool mask (index arrays pass through)."""
    ix: IntArray = m.nonzero()[0] if m.dtype == np.bool_ else m.astype(np.int64, copy=False)
    return ix


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


def _sync_alpha(w: _Work, p: DcqcnParams, upto: IntArray | int, m: BoolArray | None) -> None:
    """Apply the pure α decays (no CNP pending) of flows ``m`` (None: all) due at or
    before ``upto``."""
    period = p.alpha_ns
    due = w.active & ~w.alpha_cnp & (w.next_alpha <= upto)
    if m is not None:
        due &= m
    d = due.nonzero()[0]  # indices: cheaper than a bool mask for several gathers
    if len(d):
        lim = upto[d] if isinstance(upto, np.ndarray) else upto
        k = (lim - w.next_alpha[d]) // period + 1
        w.alpha[d] *= (1.0 - p.g) ** k
        w.next_alpha[d] += k * period


def _cut(w: _Work, p: DcqcnParams, mask: BoolArray | IntArray, t_ns: IntArray | int) -> None:
    """Rate decrease of flows ``mask`` at ``t_ns`` using their current α."""
    m = _ix(mask)
    no_inc = (w.t_stage[m] == 0) & (w.b_stage[m] == 0)
    clamp = np.ones_like(no_inc) if p.clamp_target else ~no_inc
    w.rt[m] = np.where(clamp, w.rc[m], w.rt[m])
    factor = np.maximum(1.0 - w.alpha[m] / 2.0, p.min_dec_factor)
    w.rc[m] = np.maximum(p.min_rate_bps, w.rc[m] * factor)
    w.t_stage[m] = 0
    w.b_stage[m] = 0
    w.bytes_acc[m] = 0
    tm = t_ns[m] if isinstance(t_ns, np.ndarray) else t_ns
    w.next_inc[m] = tm + p.increase_ns


def _increase(w: _Work, p: DcqcnParams, mask: BoolArray | IntArray, by_timer: bool) -> None:
    """One increase event of flows ``mask`` (stage counts taken before the event)."""
    m = _ix(mask)
    i = w.t_stage[m]
    j = w.b_stage[m] if p.byte_counter_bytes is not None else i
    f = p.fast_recovery_stages
    hi_stage, lo_stage = np.maximum(i, j), np.minimum(i, j)
    hyper = lo_stage > f
    additive = (hi_stage >= f) & ~hyper
    step = np.where(additive, p.rai_bps, 0.0)
    mult = (lo_stage - f) if p.hai_grows else 1
    step = step + np.where(hyper, p.rhai_bps * mult, 0.0)
    line = w.line[m]
    rt = np.minimum(w.rt[m] + step, line)
    rc = np.minimum((w.rc[m] + rt) / 2.0, line)
    w.rt[m] = rt
    # Snap the last 1e-12 to the line rate so a recovered flow is exactly at line rate
    # (then its increase events are no-ops that _run_timers may skip in bulk).
    w.rc[m] = np.where(line - rc <= RECOVERED_RTOL * line, line, rc)
    if by_timer:
        w.t_stage[m] += 1
    else:
        w.b_stage[m] += 1


def _run_timers(w: _Work, p: DcqcnParams, t_ns: int) -> None:
    """Process every timer event at or before ``t_ns``, each flow in its own time order."""
    g, a_ns, d_ns, i_ns = p.g, p.alpha_ns, p.decrease_ns, p.increase_ns
    while True:
        ti = np.where(w.active, w.next_inc, NEVER)
        if _any(ti <= t_ns):  # (increase timers are rarely due: skip the mask otherwise)
            # Recovered flows (Rc = Rt = line, no cut pending): increase events only count.
            idle = (w.active & ~w.dec_cnp & (w.rc >= w.line) & (w.rt >= w.line)
                    & (w.next_inc <= t_ns))
            if _any(idle):
                ix = idle.nonzero()[0]
                k = (t_ns - w.next_inc[ix]) // i_ns + 1
                w.t_stage[ix] += k
                w.next_inc[ix] += k * i_ns
                ti = np.where(w.active, w.next_inc, NEVER)
        ta = np.where(w.active & w.alpha_cnp, w.next_alpha, NEVER)
        td = np.where(w.active & w.dec_cnp, w.next_dec, NEVER)
        e = np.minimum(np.minimum(ta, td), ti)
        due = e <= t_ns
        if not _any(due):
            return
        is_a = due & (ta == e)
        is_d = due & ~is_a & (td == e)
        is_i = due & ~is_a & ~is_d
        ia = is_a.nonzero()[0]
        if len(ia):
            w.alpha[ia] = (1.0 - g) * w.alpha[ia] + g
            w.alpha_cnp[ia] = False
            w.next_alpha[ia] += a_ns
        if d_ns is not None and _any(is_d):
            _sync_alpha(w, p, e, is_d)
            idd = is_d.nonzero()[0]
            _cut(w, p, idd, e)
            w.dec_cnp[idd] = False
            w.next_dec[idd] += d_ns
        if _any(is_i):
            _sync_alpha(w, p, e, is_i)  # keeps α current; increases do not read it
            ii = is_i.nonzero()[0]
            _increase(w, p, ii, by_timer=True)
            w.next_inc[ii] += i_ns


def _advance(w: _Work, p: DcqcnParams, t_ns: int) -> None:
    if t_ns < w.t_ns:
        raise ConfigError(f"DCQCN time went backwards: {t_ns} ns < state time {w.t_ns} ns")
    if not _timer_due(w, t_ns):  # every step below would be a no-op
        w.t_ns = t_ns
        return
    _run_timers(w, p, t_ns)
    _sync_alpha(w, p, t_ns, None)
    d_ns = p.decrease_ns
    if d_ns is not None:  # idle decrease checks (no CNP pending) skip to the grid after t
        idle = w.active & ~w.dec_cnp & (w.next_dec <= t_ns)
        if _any(idle):
            k = (t_ns - w.next_dec[idle]) // d_ns + 1
            w.next_dec[idle] += k * d_ns
    w.t_ns = t_ns


def _timer_due(s: DcqcnState | _Work, t_ns: int) -> bool:
    """Whether any timer (α, decrease check, increase) of an active flow is due by t."""
    nxt = np.minimum(np.minimum(s.next_alpha, s.next_dec), s.next_inc)
    return _any(s.active & (nxt <= t_ns))


def _anything_due(s: DcqcnState, t_ns: int) -> bool:
    """Whether any timer (α, decrease check, increase) of an active flow is due by t."""
    return _any(s.active) and _timer_due(s, t_ns)


def advance(state: DcqcnState, params: DcqcnParams, t: float) -> DcqcnState:
    """Process every timer event up to and including time ``t`` (seconds)."""
    t_ns = to_ns(t)
    if t_ns == state.t_ns:  # already there (e.g. a rate query right after an event)
        return state
    if t_ns > state.t_ns and not _anything_due(state, t_ns):
        return replace(state, t_ns=t_ns)
    w = _Work(state)
    _advance(w, params, t_ns)
    return w.freeze()


def _advance_before(w: _Work, p: DcqcnParams, t: float) -> int:
    """Process the timer events strictly before ``t``; returns ``t`` in ns."""
    t_ns = to_ns(t)
    if t_ns < w.t_ns:
        raise ConfigError(f"DCQCN time went backwards: {t_ns} ns < state time {w.t_ns} ns")
    if t_ns - 1 > w.t_ns:
        _advance(w, p, t_ns - 1)
    return t_ns


def on_cnp(state: DcqcnState, params: DcqcnParams, t: float,
           mask: npt.ArrayLike | None = None) -> DcqcnState:
    """CNPs arrive at time ``t`` for the flows in ``mask`` (bool array or indices; None=all)."""
    w = _Work(state)
    t_ns = _advance_before(w, params, t)
    m = _mask(w.rc.shape[0], mask)
    first_m = m & ~w.active
    first = first_m.nonzero()[0]
    if len(first):
        w.alpha[first] = params.alpha_init
        w.rc[first] = np.maximum(params.min_rate_bps, w.rc[first] * params.rate_on_first_cnp)
        w.rt[first] = w.rc[first]
        w.active[first] = True
        w.next_alpha[first] = t_ns + params.alpha_ns
        if params.decrease_ns is not None:
            w.next_dec[first] = t_ns + params.decrease_ns
    if params.decrease_ns is None:  # paper variant: cut now, then update α
        _cut(w, params, m, t_ns)
        w.alpha[m] = (1.0 - params.g) * w.alpha[m] + params.g
        w.next_alpha[m] = t_ns + params.alpha_ns
    else:
        w.alpha_cnp[m & ~first_m] = True
        w.dec_cnp[m] = True
    _advance(w, params, t_ns)
    return w.freeze()


def on_bytes_sent(state: DcqcnState, params: DcqcnParams, t: float,
                  nbytes: npt.ArrayLike) -> DcqcnState:
    """Flows sent ``nbytes`` (array or scalar) by time ``t``: byte-counter increase events."""
    b = params.byte_counter_bytes
    if b is None or not _any(state.active):  # nothing counts bytes: only time moves
        return advance(state, params, t)
    w = _Work(state)
    t_ns = _advance_before(w, params, t)
    sent = np.broadcast_to(np.asarray(nbytes, dtype=np.int64), w.rc.shape)
    if np.any(sent < 0):
        raise ConfigError("nbytes must be >= 0")
    w.bytes_acc += np.where(w.active, sent, 0)
    while True:
        due = w.bytes_acc >= b
        if not _any(due):
            break
        _increase(w, params, due, by_timer=False)
        w.bytes_acc[due] -= b
    _advance(w, params, t_ns)
    return w.freeze()


def trace_row(state: DcqcnState, i: int = 0) -> dict[str, float]:
    """One flow's state as plain numbers (for logs and the host trace)."""
    return {"t_s": state.t, "rate_bps": float(state.rc[i]), "target_bps": float(state.rt[i]),
            "alpha": float(state.alpha[i]), "timer_stage": float(state.t_stage[i]),
            "byte_stage": float(state.b_stage[i])}


def select(state: DcqcnState, idx: npt.ArrayLike) -> DcqcnState:
    """The sub-state of some flows (e.g. to compare one flow with a batch)."""
    ix = np.asarray(idx)
    return replace(state, **{nm: getattr(state, nm)[ix] for nm in _ARRAYS})
