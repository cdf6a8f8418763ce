"""The DCQCN reaction point's state and its in-place, lazy steps (vectorized over N flows).

The machinery behind :mod:`p4cc.hostcc.dcqcn`, whose public API is what callers use: the
pure functions (``on_cnp``, ``on_bytes_sent``, ``advance`` over a frozen
:class:`DcqcnState`) and :class:`p4cc.hostcc.dcqcn.DcqcnFlows` (a pool of flows stepped
in place: the host controller and the simulator hook).  The semantics and their sources
are in :mod:`p4cc.hostcc.dcqcn`'s docstring.  Here a :class:`Work` (a mutable copy of a
state) is stepped by :func:`lazy_cnp`, :func:`lazy_bytes` and :func:`lazy_advance`;
α updates and idle decrease checks stay lazy until :func:`materialize` (or a cut, or a
CNP) applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.hostcc.dcqcn_params import DcqcnParams, to_ns

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


ARRAYS = ("rc", "rt", "alpha", "line", "active", "alpha_cnp", "dec_cnp", "next_alpha",
           "next_dec", "next_inc", "t_stage", "b_stage", "bytes_acc")
#: The arrays grouped by dtype (float, int, bool): a pool holds each group as one block.
BLOCKS = (("rc", "rt", "alpha", "line"),
          ("next_alpha", "next_dec", "next_inc", "t_stage", "b_stage", "bytes_acc"),
          ("active", "alpha_cnp", "dec_cnp"))


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


class Work:
    """A mutable copy of a state, stepped in place by the ``lazy_*`` functions."""

    def __init__(self, s: DcqcnState) -> None:
        self.t_ns = s.t_ns
        for nm in ARRAYS:
            setattr(self, nm, getattr(s, nm).copy())

    def freeze(self) -> DcqcnState:
        return DcqcnState(t_ns=self.t_ns, **{nm: getattr(self, nm) for nm in ARRAYS})

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


def any_true(m: BoolArray) -> bool:
    """``m.any()`` for a bool array (count_nonzero is several times cheaper per call)."""
    return bool(np.count_nonzero(m))


def _ix(m: BoolArray | IntArray) -> IntArray:
    """Flow indices of a bool mask (index arrays pass through)."""
    ix: IntArray = m.nonzero()[0] if m.dtype == np.bool_ else m.astype(np.int64, copy=False)
    return ix


def _catch_up(w: Work, p: DcqcnParams, upto: IntArray | int, ix: IntArray,
              checks: bool) -> FloatArray:
    """Apply the lazy events of active flows ``ix`` up to ``upto`` (one time or one per
    flow of ``ix``); returns their α.

    α events: a pending CNP's update α = (1-g)·α + g first, then the pure decays in
    closed form ((1-g)^k).  Nothing but a cut reads α, so these are applied only when
    it is read (a cut, a CNP, a public call's result), not every α period.  With
    ``checks``, decrease checks with no CNP pending (which do nothing) move to the
    first check time after ``upto``; the caller has run the timers up to ``upto``, so
    a pending check is already after it."""
    a_ns, g, d_ns = p.alpha_ns, p.g, p.decrease_ns
    na = w.next_alpha[ix]
    k = (upto - na) // a_ns + 1  # α events at or before upto (<= 0: none)
    c = w.alpha_cnp[ix]
    c &= k > 0
    al = w.alpha[ix]
    if any_true(c):  # the first update after a CNP counts it
        al = np.where(c, (1.0 - g) * al + g, al)
        w.alpha_cnp[ix[c]] = False
        k -= c
        na += c * a_ns
    np.maximum(k, 0, out=k)
    al = al * (1.0 - g) ** k
    w.alpha[ix] = al
    w.next_alpha[ix] = na + k * a_ns
    if checks and d_ns is not None:
        # (a pending check is after ``upto``: its events up to there have run, so only
        # idle checks move)
        nd = w.next_dec[ix]
        w.next_dec[ix] = nd + np.maximum((upto - nd) // d_ns + 1, 0) * d_ns
    return al


def _cut(w: Work, p: DcqcnParams, m: IntArray, tm: IntArray | int,
         alpha: FloatArray | None = None) -> None:
    """Rate decrease of flows ``m`` (indices) at ``tm`` (per flow of ``m`` or one time)
    using their α (already brought up to ``tm``; ``alpha``: those values, if at hand)."""
    counts_bytes = p.byte_counter_bytes is not None  # else b_stage, bytes_acc stay 0
    rc = w.rc[m]
    if p.clamp_target:
        w.rt[m] = rc
    else:
        no_inc = w.t_stage[m] == 0
        if counts_bytes:
            no_inc &= w.b_stage[m] == 0
        w.rt[m] = np.where(no_inc, w.rt[m], rc)
    factor = 1.0 - (w.alpha[m] if alpha is None else alpha) / 2.0
    if p.min_dec_factor > 0.0:  # (α <= 1: the factor is >= 1/2 > 0 otherwise)
        factor = np.maximum(factor, p.min_dec_factor)
    w.rc[m] = np.maximum(p.min_rate_bps, rc * factor)
    w.t_stage[m] = 0
    if counts_bytes:
        w.b_stage[m] = 0
        w.bytes_acc[m] = 0
    w.next_inc[m] = tm + p.increase_ns


def _increase(w: Work, p: DcqcnParams, mask: BoolArray | IntArray, by_timer: bool) -> None:
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


def _run_timers(w: Work, p: DcqcnParams, t_ns: int) -> None:
    """Process every rate-changing timer event (decrease checks with a CNP pending,
    increase timers) at or before ``t_ns``, each flow in its own time order; α events
    and idle decrease checks are lazy (_catch_up).  Inactive
    flows' timers are NEVER (init_state; only a CNP starts them)."""
    d_ns, i_ns = p.decrease_ns, p.increase_ns
    while True:
        ti = w.next_inc
        if d_ns is None:
            e = ti
        else:
            td = np.where(w.dec_cnp, w.next_dec, NEVER)
            e = np.minimum(td, ti)
        due = (e <= t_ns).nonzero()[0]
        if not len(due):
            return
        ed = e[due]
        # Only the flows handled now can have another event by t (a flow's events depend
        # on its own state alone): an increase one period after the cut or increase
        # handled now, or a pending check after an increase handled now.
        again = int(ed.min()) + i_ns <= t_ns
        if d_ns is None:
            ii = due
        else:
            is_d = td[due] == ed  # a check before the increase event at the same time
            idd = due[is_d]
            if len(idd):
                ed = ed[is_d]
                al = _catch_up(w, p, ed, idd, checks=False)  # that instant's α update first
                _cut(w, p, idd, ed, al)
                w.dec_cnp[idd] = False
                w.next_dec[idd] += d_ns
            ii = due[~is_d]
            if len(ii) and not again:
                again = int(td[ii].min()) <= t_ns
        if len(ii):
            # Recovered flows (Rc = Rt = line, no cut pending): their increase events
            # only count, all of them up to t at once.
            rec = ~w.dec_cnp[ii]
            rec &= w.rc[ii] >= w.line[ii]
            rec &= w.rt[ii] >= w.line[ii]
            if any_true(rec):
                ix = ii[rec]
                k = (t_ns - w.next_inc[ix]) // i_ns + 1
                w.t_stage[ix] += k
                w.next_inc[ix] += k * i_ns
                ii = ii[~rec]
            if len(ii):
                _increase(w, p, ii, by_timer=True)
                w.next_inc[ii] += i_ns
        if not again:
            return


def check_time(w: Work, t_ns: int) -> None:
    if t_ns < w.t_ns:
        raise ConfigError(f"DCQCN time went backwards: {t_ns} ns < state time {w.t_ns} ns")


def lazy_advance(w: Work, p: DcqcnParams, t_ns: int) -> None:
    """Rate-changing events up to ``t_ns`` in place (α and idle checks stay lazy)."""
    check_time(w, t_ns)
    _run_timers(w, p, t_ns)
    w.t_ns = t_ns


def lazy_cnp(w: Work, p: DcqcnParams, t_ns: int, m: IntArray,
              next_change_ns: int | None = None) -> bool:
    """CNPs at ``t_ns`` for flows ``m`` (unique indices), in place (lazy α).

    ``next_change_ns``: the caller's bound on the earliest pending rate-changing event
    (None: look).  Returns whether timer events ran (else the caller's bound still
    holds, lowered to the new decrease checks of ``m``)."""
    check_time(w, t_ns)
    ran = False
    if t_ns - 1 > w.t_ns:
        if next_change_ns is None or next_change_ns <= t_ns - 1:
            _run_timers(w, p, t_ns - 1)
            ran = True
        w.t_ns = t_ns - 1
    before = w.t_ns  # events up to here come before the CNP (a CNP at t precedes t's)
    act = w.active[m]
    if np.count_nonzero(act) == len(m):  # (usually: no first CNP among them)
        first, old = m[:0], m
    else:
        first, old = m[~act], m[act]
    if len(old):
        _catch_up(w, p, before, old, checks=True)
    if len(first):
        w.alpha[first] = p.alpha_init
        w.rc[first] = np.maximum(p.min_rate_bps, w.rc[first] * p.rate_on_first_cnp)
        w.rt[first] = w.rc[first]
        w.active[first] = True
        w.next_alpha[first] = t_ns + p.alpha_ns
        if p.decrease_ns is not None:
            w.next_dec[first] = t_ns + p.decrease_ns
    if p.decrease_ns is None:  # paper variant: cut now, then update α
        _cut(w, p, m, t_ns)
        w.alpha[m] = (1.0 - p.g) * w.alpha[m] + p.g
        w.next_alpha[m] = t_ns + p.alpha_ns
        _run_timers(w, p, t_ns)
        ran = True
    else:
        w.alpha_cnp[old] = True  # (a first CNP does not count for the α update)
        w.dec_cnp[m] = True
        if (next_change_ns is None or next_change_ns <= t_ns
                or (len(old) and int(w.next_dec[old].min()) <= t_ns)):
            _run_timers(w, p, t_ns)
            ran = True
    w.t_ns = t_ns
    return ran


def lazy_bytes(w: Work, p: DcqcnParams, t_ns: int, sent: IntArray) -> None:
    """Bytes sent by ``t_ns`` (one count per flow): byte-counter events, in place."""
    b = p.byte_counter_bytes
    check_time(w, t_ns)
    if b is None or not any_true(w.active):  # nothing counts bytes: only time moves
        _run_timers(w, p, t_ns)
        w.t_ns = t_ns
        return
    if t_ns - 1 > w.t_ns:
        _run_timers(w, p, t_ns - 1)
        w.t_ns = t_ns - 1
    w.bytes_acc += np.where(w.active, sent, 0)
    while True:
        due = w.bytes_acc >= b
        if not any_true(due):
            break
        ix = due.nonzero()[0]
        _increase(w, p, ix, by_timer=False)
        w.bytes_acc[ix] -= b
    _run_timers(w, p, t_ns)
    w.t_ns = t_ns


def materialize(w: Work, p: DcqcnParams) -> None:
    """Apply every lazy event up to the state's time (α updates, idle checks)."""
    ix = w.active.nonzero()[0]
    if len(ix):
        _catch_up(w, p, w.t_ns, ix, checks=True)
