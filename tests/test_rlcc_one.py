"""The host's one-flow RL-CC rule on scalars (p4cc.hostcc.rlcc_one.RlccOne) against the
vectorized rule at N = 1 (p4cc.hostcc.rlcc_rule.RlccRule around p4cc.hostcc.rlcc.step):
the same samples and NAKs give the same rates, actions, δ, inflations, decisions, cut
times, pending sums and policy states, to the bit, for every shipped policy, both
signals (RTT, INT queue depth with missing depths), a decision per sample and per
interval (catch-up, held-back cuts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4cc.hostcc import rlcc, rlcc_one
from p4cc.hostcc.rlcc_names import SHIPPED
from p4cc.hostcc.rlcc_one import RlccOne
from p4cc.hostcc.rlcc_policies import Policy, ReferencePolicy, data_dir, load_policy
from p4cc.hostcc.rlcc_rule import RlccFlows, RlccRule, decision_interval_s
from p4cc.scale import get_scale

SC = get_scale("testbed")
IV = decision_interval_s(SC)
_POLICIES: dict[str, Policy] = {}


def _policy(name: str) -> Policy:
    if name not in _POLICIES:
        _POLICIES[name] = (ReferencePolicy() if name == "pi"
                           else load_policy(data_dir() / SHIPPED[name]))
    return _POLICIES[name]


# (gap since the previous event in s, kind, RTT in normaliser units, queue depth in
# packets; NaN: the sample carries none)
events_st = st.lists(
    st.tuples(st.floats(0.0, 4 * IV), st.sampled_from(["rtt", "rtt", "nak"]),
              st.floats(0.3, 12.0), st.one_of(st.just(math.nan), st.floats(0.0, 120.0))),
    min_size=1, max_size=60)


def _fields(f: RlccFlows) -> tuple[object, ...]:
    """Every array of the one-flow state, as lists (NaN compared as a value)."""
    arrays = [f.cc.rate, f.cc.prev_action, f.cc.delta, f.cc.inflation, f.cc.decisions,
              f.cc.last_cut, f.last_decision, f.last_rtt, f.last_qdepth, f.pend_n,
              f.pend_excess, f.pend_min, *f.cc.policy_state]
    return tuple(repr(np.asarray(a).tolist()) for a in arrays)


def _rule(policy: str, signal: str, interval: float) -> RlccRule:
    params = rlcc.RlccParams(SC.link_rate_bps, rlcc.norm_rtt_s(SC), pkt_bytes=SC.pkt_bytes,
                             signal=signal)  # type: ignore[arg-type]
    return RlccRule(params, _policy(policy), interval)


def _run(events: list[tuple[float, str, float, float]], rule: RlccRule,
         with_depth: bool) -> list[tuple[float, int]]:
    """Both forms through ``events``, compared after each; the (rate, decisions) seen."""
    vec, one = rule.init(1), RlccOne(rule)
    assert _fields(one.flows()) == _fields(vec)
    on = np.ones(1, dtype=np.bool_)
    norm, t, seen = rule.params.base_rtt_s, 0.0, []
    for gap, kind, rtt, depth in events:
        t += gap
        if kind == "rtt":
            q = depth if with_depth else None
            vec = rule.on_rtt_sample(vec, t, on, rtt * norm, q)
            one.on_rtt_sample(t, rtt * norm, q)
        else:
            vec = rule.on_nack(vec, t, on)
            one.on_nack(t)
        assert _fields(one.flows()) == _fields(vec)
        seen.append((one.rate, one.decisions))
    return seen


@settings(max_examples=150, deadline=None)
@given(events=events_st, policy=st.sampled_from(["pi", *SHIPPED]),
       signal=st.sampled_from(["rtt", "qdepth"]), per_sample=st.booleans(),
       with_depth=st.booleans())
def test_the_scalar_rule_is_the_vectorized_one_at_n_1(events: list, policy: str, signal: str,
                                                      per_sample: bool,
                                                      with_depth: bool) -> None:
    _run(events, _rule(policy, signal, 0.0 if per_sample else IV), with_depth)


@pytest.mark.parametrize("policy", ["pi", "adpg-mlp-long", "adpg-lstm", "adpg-mlp-int"])
def test_catch_up_held_cuts_and_naks_by_hand(policy: str) -> None:
    """A congested flow: samples far above the operating point (cuts), one 3.5 intervals
    late (catch-up; the cuts after the first held back), NAKs with and without a sample,
    a sample 30 intervals late (catch-up capped at MAX_CATCHUP)."""
    seq = [(0.0, "nak", 1.0, math.nan),  # no sample yet: nothing
           (0.1 * IV, "rtt", 9.0, 80.0), (0.3 * IV, "rtt", 9.0, math.nan),
           (0.8 * IV, "rtt", 1.0, 10.0), (3.5 * IV, "rtt", 10.0, 90.0),
           (0.2 * IV, "nak", 0.0, math.nan), (1.0 * IV, "nak", 0.0, math.nan),
           (30 * IV, "rtt", 1.0, 0.0), (30 * IV, "nak", 0.0, math.nan)]
    seen = _run(seq, _rule(policy, "rtt", IV), with_depth=True)
    assert seen[0] == (SC.link_rate_bps, 0)  # a NAK before any sample: nothing
    assert min(r for r, _ in seen) < SC.link_rate_bps  # cut
    assert seen[-2][1] - seen[-3][1] == 8  # 30 intervals late: MAX_CATCHUP decisions


def test_numpy_semantics_on_floats() -> None:
    nan = math.nan
    assert math.isnan(rlcc_one._maximum(nan, 0.0)) and math.isnan(rlcc_one._maximum(0.0, nan))
    assert rlcc_one._maximum(-1.0, 0.0) == 0.0 and rlcc_one._maximum(2.0, 0.0) == 2.0
    assert math.isnan(rlcc_one._minimum(nan, 1.0)) and math.isnan(rlcc_one._minimum(1.0, nan))
    assert rlcc_one._minimum(math.inf, 3.0) == 3.0
    for x in (nan, math.inf, -math.inf, 0.5):
        assert rlcc_one._nan_to_num(x, 1.0) == float(np.nan_to_num(np.array([x]), nan=1.0)[0])


class _Wild:
    """A policy answering NaN, then ±inf: the action falls back to 1, then to its bounds."""

    name = "wild"

    def __init__(self) -> None:
        self.out = [math.nan, math.inf, -math.inf]

    def initial_state(self, n: int) -> tuple[np.ndarray, ...]:
        return ()

    def act(self, obs: np.ndarray, state: tuple) -> tuple[np.ndarray, tuple]:
        return np.full(obs.shape[0], self.out.pop(0) if self.out else 1.0), state


def test_a_policy_answering_nan_or_inf_is_bounded_as_in_the_vectorized_step() -> None:
    params = rlcc.RlccParams(SC.link_rate_bps, rlcc.norm_rtt_s(SC))
    vec_rule, one_rule = RlccRule(params, _Wild(), 0.0), RlccRule(params, _Wild(), 0.0)
    vec, one = vec_rule.init(1), RlccOne(one_rule)
    on = np.ones(1, dtype=np.bool_)
    actions = []
    for k in range(3):
        t = 0.01 * (k + 1)
        vec = vec_rule.on_rtt_sample(vec, t, on, 0.5 * params.base_rtt_s)
        one.on_rtt_sample(t, 0.5 * params.base_rtt_s)
        assert _fields(one.flows()) == _fields(vec)
        actions.append(one.prev_action)
    assert actions == [1.0, params.action_max, params.action_min]


def test_a_signal_sent_at_the_cut_itself_may_cut_again() -> None:
    """``sent >= last_cut``: a sample whose packet left at the instant of the last cut
    shows it (exact binary times make the equality happen)."""
    rule = _rule("pi", "rtt", 0.0)
    vec, one = rule.init(1), RlccOne(rule)
    on = np.ones(1, dtype=np.bool_)
    for t, rtt in ((1.0, 0.25), (1.5, 0.5), (1.75, 0.5)):  # each far above the target
        vec = rule.on_rtt_sample(vec, t, on, rtt)
        one.on_rtt_sample(t, rtt)
        assert _fields(one.flows()) == _fields(vec)
    # 1.0 cuts; 1.5's packet left at 1.0, the cut: cuts; 1.75's left at 1.25 < 1.5: held
    assert one.decisions == 2 and one.last_cut == 1.5


@pytest.mark.parametrize("policy", ["pi", "adpg-mlp-long"])
def test_a_naks_decision_never_raises_the_rate(policy: str) -> None:
    """Below the line rate, a low last sample makes a sample's decision raise the rate;
    a NAK on that same sample decides too, but holds the rate (a loss is congestion)."""
    params = rlcc.RlccParams(SC.link_rate_bps, rlcc.norm_rtt_s(SC), pkt_bytes=SC.pkt_bytes,
                             initial_rate_frac=0.5)
    rule = RlccRule(params, _policy(policy), IV)
    vec, one = rule.init(1), RlccOne(rule)
    on = np.ones(1, dtype=np.bool_)
    low = 0.8 * params.base_rtt_s
    vec = rule.on_rtt_sample(vec, 0.0, on, low)
    one.on_rtt_sample(0.0, low)
    assert one.rate > 0.5 * SC.link_rate_bps  # the sample raised it
    raised = one.rate
    vec = rule.on_nack(vec, 1.5 * IV, on)
    one.on_nack(1.5 * IV)
    assert _fields(one.flows()) == _fields(vec)
    assert one.decisions == 2 and one.rate == raised and one.prev_action == 1.0
    vec = rule.on_rtt_sample(vec, 2.5 * IV, on, low)  # a sample again: raises
    one.on_rtt_sample(2.5 * IV, low)
    assert _fields(one.flows()) == _fields(vec) and one.rate > raised
