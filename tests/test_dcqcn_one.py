"""The host's one-flow DCQCN core on scalars (p4cc.hostcc.dcqcn_one.DcqcnOne) against the
vectorized pool at N = 1 (p4cc.hostcc.dcqcn.DcqcnFlows): the same events give the same
rates, states and trace rows, to the bit, for every parameter set and the variants its
options select (cut on each CNP, byte counter, hyper-increase growth, target clamp, cut
floor, first-CNP rate), with run-time parameter changes in between."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4cc.errors import ConfigError
from p4cc.hostcc import dcqcn
from p4cc.hostcc.dcqcn_core import ARRAYS
from p4cc.hostcc.dcqcn_one import DcqcnOne
from p4cc.scale import get_scale

SC = get_scale("testbed")

VARIANTS = {
    "plain": {},
    "cut-on-cnp": {"decrease_period_s": None},
    "byte-counter": {"byte_counter_bytes": 3000},
    "hai-grows": {"byte_counter_bytes": 2000, "hai_grows": True, "fast_recovery_stages": 2},
    "clamp": {"clamp_target": True, "min_dec_factor": 0.6},
    "first-cnp": {"rate_on_first_cnp": 0.5, "g": 1 / 16},
}

# (gap since the previous event in s, kind, value): testbed timers are ms apart
events_st = st.lists(
    st.tuples(st.floats(0.0, 0.05), st.sampled_from(["cnp", "bytes", "rate", "trace", "tune"]),
              st.integers(0, 20_000)), min_size=1, max_size=80)


def _params(name: str, variant: str) -> dcqcn.DcqcnParams:
    return replace(dcqcn.dcqcn_params(name, SC.link_rate_bps, SC), **VARIANTS[variant])


def _state(s: dcqcn.DcqcnState) -> tuple[object, ...]:
    return (s.t_ns, *(tuple(getattr(s, nm).tolist()) for nm in ARRAYS))


def _run(events: list[tuple[float, str, int]], params: dcqcn.DcqcnParams) -> None:
    pool, one = dcqcn.DcqcnFlows(params, 1, 0.0), DcqcnOne(params, 0.0)
    t = 0.0
    for gap, kind, value in events:
        t += gap
        if kind == "cnp":
            pool.on_cnp(t, np.zeros(1, dtype=np.int64))
            one.on_cnp(t)
        elif kind == "bytes":
            pool.on_bytes_sent(t, np.array([value / 7.0]))  # (fractions carried over)
            one.on_bytes_sent(t, value / 7.0)
        elif kind == "trace":
            assert one.trace_row_at(t) == dcqcn.trace_row(pool.state_at(t))
            assert _state(one.state_at(t)) == _state(pool.state_at(t))
        elif kind == "tune":  # CHAMELEON's run-time change
            new = replace(pool.params, rai_bps=pool.params.rai_bps * (1 + value % 5),
                          increase_period_s=pool.params.increase_period_s * 0.5)
            pool.rate(t)
            one.rate(t)
            pool.set_params(new)
            one.set_params(new)
        assert one.rate(t) == float(pool.rate(t)[0])
    assert _state(one.state_at(t + 1.0)) == _state(pool.state_at(t + 1.0))


@settings(max_examples=120, deadline=None)
@given(events=events_st, name=st.sampled_from(list(dcqcn.DCQCN_PARAM_SETS)),
       variant=st.sampled_from(list(VARIANTS)))
def test_the_scalar_core_is_the_vectorized_one_at_n_1(events: list, name: str,
                                                       variant: str) -> None:
    _run(events, _params(name, variant))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cnp_train_a_recovery_and_a_long_jump(variant: str) -> None:
    """Hand-made: CNPs every 1 ms (cuts), a recovery in small steps, then one jump over
    many increase periods (the recovered flow's events counted in bulk)."""
    seq = ([(1e-3, "cnp", 0)] * 20 + [(2e-3, "bytes", 7000), (1e-3, "trace", 0)] * 60
           + [(30.0, "rate", 0), (0.0, "trace", 0)])
    _run(seq, _params("hpcc-ns3", variant))
    one = DcqcnOne(_params("hpcc-ns3", variant))
    for k in range(20):
        one.on_cnp(1e-3 * (k + 1))
    assert one.rate(0.021) < SC.link_rate_bps  # cut
    assert one.rate(100.0) == SC.link_rate_bps  # recovered


def test_time_going_back_and_forbidden_changes_are_refused_as_by_the_pool() -> None:
    params = _params("hpcc-ns3", "plain")
    one = DcqcnOne(params)
    one.on_cnp(0.5)
    with pytest.raises(ConfigError, match="time went backwards"):
        one.on_cnp(0.1)
    with pytest.raises(ConfigError, match="line_rate_bps cannot change"):
        one.set_params(replace(params, line_rate_bps=params.line_rate_bps * 2))
    with pytest.raises(ConfigError, match="decrease_period_s cannot switch"):
        one.set_params(replace(params, decrease_period_s=None))
