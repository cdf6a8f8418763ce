"""Hypothesis properties of the DCQCN RP core."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from p4cc.hostcc import dcqcn as d

SETS = st.sampled_from(d.DCQCN_PARAM_SETS)
EVENT = st.tuples(
    st.floats(min_value=0.0, max_value=400e-6),  # gap to the previous event (s)
    st.sampled_from(["cnp", "bytes", "advance"]),
    st.integers(min_value=0, max_value=200_000),  # bytes sent
)


@settings(max_examples=60, deadline=None)
@given(SETS, st.lists(EVENT, min_size=1, max_size=40), st.integers(1, 4))
def test_rate_and_alpha_stay_in_bounds(name: str, events: list, n: int) -> None:
    """Rc and Rt stay in [min rate, line rate] and α in [0, 1] after any event sequence."""
    p = d.dcqcn_params(name, 10e9)
    s = d.init_state(n, p)
    t = 0.0
    for gap, kind, nbytes in events:
        t += gap
        if kind == "cnp":
            s = d.on_cnp(s, p, t, np.arange(n) % 2 == 0)
        elif kind == "bytes":
            s = d.on_bytes_sent(s, p, t, nbytes)
        else:
            s = d.advance(s, p, t)
        for arr in (s.rc, s.rt):
            assert np.all(arr >= p.min_rate_bps * (1 - 1e-12))
            assert np.all(arr <= s.line * (1 + 1e-12))
        assert np.all((s.alpha >= 0) & (s.alpha <= 1))
        assert np.all(s.rc <= s.rt * (1 + 1e-12))


@settings(max_examples=60, deadline=None)
@given(SETS, st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=2, max_size=40),
       st.floats(min_value=0.0, max_value=1.0))
def test_no_increase_while_cnps_keep_coming(name: str, gaps: list[float],
                                            probe: float) -> None:
    """Without byte reports, if consecutive CNPs are less than T - D apart (T = increase
    timer, D = decrease-check period, 0 for the cut-on-CNP variant), every cut restarts
    the increase timer before it fires: Rc never increases from the first CNP until
    the last CNP's cut (sampled at every CNP and between them)."""
    p = d.dcqcn_params(name, 10e9)
    dec = p.decrease_period_s or 0.0
    # Strictly less than T - D: a CNP landing exactly on the timer instant is delivered
    # after that instant's increase event (the core's same-instant event order).
    max_gap = p.increase_period_s - dec - 2e-9  # the core keeps time in integer ns
    s = d.on_cnp(d.init_state(1, p), p, 0.0)
    t, last = 0.0, float(s.rc[0])
    for g in gaps:
        mid = d.advance(s, p, t + probe * g * max_gap)
        assert mid.rc[0] <= last * (1 + 1e-12)
        last = float(mid.rc[0])
        t += g * max_gap
        s = d.on_cnp(mid, p, t)
        assert s.rc[0] <= last * (1 + 1e-12)
        last = float(s.rc[0])
    s = d.advance(s, p, t + dec)  # the last CNP's cut
    assert s.rc[0] <= last * (1 + 1e-12)
