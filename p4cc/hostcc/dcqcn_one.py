"""One host flow's DCQCN reaction point in Python scalars, step for step the vectorized
core (p4cc.hostcc.dcqcn_core) at N = 1.

A host sender's :class:`p4cc.hostcc.cc.DcqcnController` drives one flow.  Through the
vectorized :class:`p4cc.hostcc.dcqcn.DcqcnFlows` every timer event, CNP and trace row ran
numpy operations on arrays of one element (~1 µs each, dozens per event); in the
calibration rig a DCQCN sender reacting to CNPs cost 1.0-1.3 ms of CPU per CNP, nearly
all of it there (docs/emulation.md, "Session 38").  This class runs the same steps on
floats and ints, in the same order and with the same operations, so its rates, α and
stages equal the vectorized core's to the bit: ``tests/test_dcqcn_one.py`` drives both
with random event sequences, and ``tests/test_cc_rule_equivalence.py`` compares the host
controller with the simulator's hook.  The one operation whose scalar and vector forms
could round differently, α's closed-form decay ``(1-g)**k``, is computed with numpy's
``power`` on a one-element array, as the core does.

The semantics and their sources are in :mod:`p4cc.hostcc.dcqcn`'s docstring; each method
below names the core function it mirrors.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from p4cc.errors import ConfigError
from p4cc.hostcc.dcqcn_core import ARRAYS, NEVER, RECOVERED_RTOL, DcqcnState, init_state
from p4cc.hostcc.dcqcn_params import DcqcnParams, check_run_time_change, to_ns

_NEVER = int(NEVER)


def _decay(base: float, k: int) -> float:
    """``base ** k`` through numpy's power loop on int64 exponents, as in _catch_up."""
    return float(np.power(base, np.array([k], dtype=np.int64))[0])


class DcqcnOne:
    """One flow's DCQCN state and its lazy steps (dcqcn.DcqcnFlows at N = 1)."""

    def __init__(self, params: DcqcnParams, t0: float = 0.0) -> None:
        self.params = params
        s = init_state(1, params, t0)  # the initial values, exactly as the pool's
        self.t_ns = s.t_ns
        self.rc, self.rt = float(s.rc[0]), float(s.rt[0])
        self.alpha, self.line = float(s.alpha[0]), float(s.line[0])
        self.active = self.alpha_cnp = self.dec_cnp = False
        self.next_alpha = self.next_dec = self.next_inc = _NEVER
        self.t_stage = self.b_stage = self.bytes_acc = 0
        self._carry = 0.0  # fractional bytes not yet reported to the byte counter
        self._next_change_ns = _NEVER

    # -- the pool's public steps (DcqcnFlows) ---------------------------------------
    def on_cnp(self, t: float) -> None:
        """A CNP at ``t`` (DcqcnFlows.on_cnp)."""
        if self._lazy_cnp(to_ns(t), self._next_change_ns):
            self._update()
        elif self.params.decrease_ns is not None:  # the flow's new check
            self._next_change_ns = min(self._next_change_ns, self.next_dec)

    def on_bytes_sent(self, t: float, nbytes: float) -> None:
        """``nbytes`` sent by ``t``, fractions carried over (DcqcnFlows.on_bytes_sent)."""
        if self.params.byte_counter_bytes is None:
            return
        total = self._carry + nbytes
        whole = float(math.floor(total))
        self._carry = total - whole
        self._lazy_bytes(to_ns(t), int(whole))
        self._update()

    def rate(self, t: float) -> float:
        """Run the timers to ``t``; the current rate Rc (DcqcnFlows.rate)."""
        t_ns = to_ns(t)
        if t_ns >= self._next_change_ns:
            self._check_time(t_ns)
            self._run_timers(t_ns)
            self.t_ns = t_ns
            self._update()
        return self.rc

    def set_params(self, params: DcqcnParams) -> None:
        """New parameters from now on (DcqcnFlows.set_params): the lazy α events up to
        now run with the old ones."""
        check_run_time_change(self.params, params)
        self._materialize()
        self.params = params
        self._update()

    def state_at(self, t: float) -> DcqcnState:
        """The state advanced to ``t`` with the lazy events applied (a copy)."""
        w = self._at(t)  # (its attributes carry the core's array names)
        return DcqcnState(t_ns=w.t_ns, **{nm: np.array([getattr(w, nm)]) for nm in ARRAYS})

    def trace_row_at(self, t: float) -> dict[str, float]:
        """dcqcn.trace_row(state_at(t)) without building the arrays."""
        w = self._at(t)
        return {"t_s": w.t_ns * 1e-9, "rate_bps": w.rc, "target_bps": w.rt,
                "alpha": w.alpha, "timer_stage": float(w.t_stage),
                "byte_stage": float(w.b_stage)}

    def _at(self, t: float) -> DcqcnOne:
        w = copy.copy(self)
        t_ns = max(to_ns(t), w.t_ns)
        w._run_timers(t_ns)  # (lazy_advance)
        w.t_ns = t_ns
        w._materialize()
        return w

    def _update(self) -> None:
        """DcqcnFlows._update: the time of the next event that can change the rate."""
        if self.params.decrease_ns is None:
            self._next_change_ns = self.next_inc
            return
        dec = self.next_dec if self.dec_cnp else _NEVER
        self._next_change_ns = min(dec, self.next_inc)

    # -- the core's steps (p4cc.hostcc.dcqcn_core) ----------------------------------
    def _check_time(self, t_ns: int) -> None:
        """check_time: time must not go backwards."""
        if t_ns < self.t_ns:
            raise ConfigError(f"DCQCN time went backwards: {t_ns} ns < state time "
                              f"{self.t_ns} ns")

    def _catch_up(self, upto: int, checks: bool) -> float:
        """_catch_up: the lazy α events (and idle checks) up to ``upto``; α."""
        p = self.params
        a_ns, g, d_ns = p.alpha_ns, p.g, p.decrease_ns
        na = self.next_alpha
        k = (upto - na) // a_ns + 1
        al = self.alpha
        if self.alpha_cnp and k > 0:  # the first update after a CNP counts it
            al = (1.0 - g) * al + g
            self.alpha_cnp = False
            k -= 1
            na += a_ns
        k = max(k, 0)
        al = al * _decay(1.0 - g, k)
        self.alpha = al
        self.next_alpha = na + k * a_ns
        if checks and d_ns is not None:
            nd = self.next_dec
            self.next_dec = nd + max((upto - nd) // d_ns + 1, 0) * d_ns
        return al

    def _cut(self, tm: int, alpha: float | None = None) -> None:
        """_cut: a rate decrease at ``tm``."""
        p = self.params
        counts_bytes = p.byte_counter_bytes is not None
        rc = self.rc
        if p.clamp_target:
            self.rt = rc
        else:
            no_inc = self.t_stage == 0
            if counts_bytes:
                no_inc = no_inc and self.b_stage == 0
            if not no_inc:
                self.rt = rc
        factor = 1.0 - (self.alpha if alpha is None else alpha) / 2.0
        if p.min_dec_factor > 0.0:
            factor = max(factor, p.min_dec_factor)
        self.rc = max(p.min_rate_bps, rc * factor)
        self.t_stage = 0
        if counts_bytes:
            self.b_stage = 0
            self.bytes_acc = 0
        self.next_inc = tm + p.increase_ns

    def _increase(self, by_timer: bool) -> None:
        """_increase: one increase event (stage counts taken before it)."""
        p = self.params
        i = self.t_stage
        j = self.b_stage if p.byte_counter_bytes is not None else i
        f = p.fast_recovery_stages
        hi_stage, lo_stage = max(i, j), min(i, j)
        hyper = lo_stage > f
        additive = hi_stage >= f and not hyper
        step = p.rai_bps if additive else 0.0
        mult = (lo_stage - f) if p.hai_grows else 1
        step = step + (p.rhai_bps * mult if hyper else 0.0)
        line = self.line
        rt = min(self.rt + step, line)
        rc = min((self.rc + rt) / 2.0, line)
        self.rt = rt
        self.rc = line if line - rc <= RECOVERED_RTOL * line else rc
        if by_timer:
            self.t_stage += 1
        else:
            self.b_stage += 1

    def _run_timers(self, t_ns: int) -> None:
        """_run_timers: every rate-changing timer event at or before ``t_ns``."""
        p = self.params
        d_ns, i_ns = p.decrease_ns, p.increase_ns
        while True:
            td = self.next_dec if (d_ns is not None and self.dec_cnp) else _NEVER
            e = self.next_inc if d_ns is None else min(td, self.next_inc)
            if e > t_ns:
                return
            again = e + i_ns <= t_ns
            if d_ns is not None and td == e:  # a check before the increase at that time
                al = self._catch_up(e, checks=False)
                self._cut(e, al)
                self.dec_cnp = False
                self.next_dec += d_ns
            else:
                if d_ns is not None and not again:
                    again = td <= t_ns
                if not self.dec_cnp and self.rc >= self.line and self.rt >= self.line:
                    k = (t_ns - self.next_inc) // i_ns + 1  # recovered: count them all
                    self.t_stage += k
                    self.next_inc += k * i_ns
                else:
                    self._increase(by_timer=True)
                    self.next_inc += i_ns
            if not again:
                return

    def _lazy_cnp(self, t_ns: int, next_change_ns: int) -> bool:
        """lazy_cnp: a CNP at ``t_ns``; whether timer events ran."""
        p = self.params
        self._check_time(t_ns)
        ran = False
        if t_ns - 1 > self.t_ns:
            if next_change_ns <= t_ns - 1:
                self._run_timers(t_ns - 1)
                ran = True
            self.t_ns = t_ns - 1
        first = not self.active
        if not first:
            self._catch_up(self.t_ns, checks=True)
        else:
            self.alpha = p.alpha_init
            self.rc = max(p.min_rate_bps, self.rc * p.rate_on_first_cnp)
            self.rt = self.rc
            self.active = True
            self.next_alpha = t_ns + p.alpha_ns
            if p.decrease_ns is not None:
                self.next_dec = t_ns + p.decrease_ns
        if p.decrease_ns is None:  # paper variant: cut now, then update α
            self._cut(t_ns)
            self.alpha = (1.0 - p.g) * self.alpha + p.g
            self.next_alpha = t_ns + p.alpha_ns
            self._run_timers(t_ns)
            ran = True
        else:
            if not first:
                self.alpha_cnp = True  # (a first CNP does not count for the α update)
            self.dec_cnp = True
            if next_change_ns <= t_ns or (not first and self.next_dec <= t_ns):
                self._run_timers(t_ns)
                ran = True
        self.t_ns = t_ns
        return ran

    def _lazy_bytes(self, t_ns: int, sent: int) -> None:
        """lazy_bytes: ``sent`` bytes by ``t_ns`` (byte-counter events)."""
        b = self.params.byte_counter_bytes
        self._check_time(t_ns)
        if b is None or not self.active:  # nothing counts bytes: only time moves
            self._run_timers(t_ns)
            self.t_ns = t_ns
            return
        if t_ns - 1 > self.t_ns:
            self._run_timers(t_ns - 1)
            self.t_ns = t_ns - 1
        self.bytes_acc += sent
        while self.bytes_acc >= b:
            self._increase(by_timer=False)
            self.bytes_acc -= b
        self._run_timers(t_ns)
        self.t_ns = t_ns

    def _materialize(self) -> None:
        """materialize: the lazy events up to the state's time."""
        if self.active:
            self._catch_up(self.t_ns, checks=True)
