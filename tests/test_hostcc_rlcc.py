"""RL-CC core: signals, δ, reward, the vectorized step, and the reference policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc
from p4cc.hostcc.rlcc_policies import ReferencePolicy, data_dir, load_policy

P = rlcc.RlccParams(line_rate_bps=10e6, base_rtt_s=2e-3)


def test_inflation_signals_on_hand_values() -> None:
    assert rlcc.rtt_inflation(3e-3, 2e-3) == pytest.approx(1.5)
    # 10 packets of 1000 B = 80 kbit; base-RTT·line = 2 ms · 10 Mb/s = 20 kbit -> 1 + 4
    assert rlcc.qdepth_inflation(10, 1000, 10e6, 2e-3) == pytest.approx(5.0)
    assert rlcc.qdepth_inflation(0, 1000, 10e6, 2e-3) == pytest.approx(1.0)
    q = rlcc.RlccParams(line_rate_bps=10e6, base_rtt_s=2e-3, signal="qdepth")
    assert rlcc.inflation_from(q, 3e-3, 10) == pytest.approx(5.0)
    assert rlcc.inflation_from(q, 3e-3, None) == pytest.approx(1.5)  # no INT: RTT
    assert rlcc.inflation_from(P, 3e-3, 10) == pytest.approx(1.5)
    with pytest.raises(ConfigError):
        rlcc.inflation_from(P, None, None)


def test_delta_and_reward_on_hand_values() -> None:
    # inflation 3.5, rate 1/4 of line: δ = 0.064 − (3.5 − 1.5)·0.5 = −0.936
    assert rlcc.compute_delta(3.5, 0.25, 0.064, 1.5) == pytest.approx(-0.936)
    assert rlcc.reward(3.5, 0.25, 0.064, 1.5) == pytest.approx(-(0.936**2))
    # below the tolerance β the penalty term vanishes: δ = target
    assert rlcc.compute_delta(1.2, 1.0, 0.064, 1.5) == pytest.approx(0.064)
    assert rlcc.reward(1.2, 1.0, 0.064, 1.5) == pytest.approx(-(0.064**2))
    # the fixed point: inflation = target/√rate + β gives δ = 0, reward 0 (its maximum)
    infl = 0.064 / math.sqrt(0.16) + 1.5
    assert rlcc.compute_delta(infl, 0.16, 0.064, 1.5) == pytest.approx(0.0, abs=1e-12)
    assert rlcc.reward(infl, 0.16, 0.064, 1.5) == pytest.approx(0.0, abs=1e-20)
    got = rlcc.compute_delta(np.array([1.0, 2.5, 5.5]), np.array([1.0, 1.0, 0.25]), 0.064, 1.5)
    np.testing.assert_allclose(got, [0.064, 0.064 - 1.0, 0.064 - 2.0])


@pytest.mark.parametrize("kw", [
    {"action_min": 1.1}, {"action_max": 0.9}, {"target": 0.0}, {"beta": -1.0},
    {"signal": "ecn"}, {"min_rate_bps": 20e6}, {"base_rtt_s": 0.0}, {"initial_rate_frac": 0},
])
def test_params_validation(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        rlcc.RlccParams(**{"line_rate_bps": 10e6, "base_rtt_s": 2e-3, **kw})  # type: ignore[arg-type]


def test_reference_policy_direction() -> None:
    pol = ReferencePolicy()
    deltas = np.array([-2.0, -0.05, -0.001, 0.0, 0.001, 0.03, 0.064])
    a, st = pol.act(np.stack([deltas, np.ones_like(deltas)], axis=1),
                    pol.initial_state(len(deltas)))
    assert np.all(a[deltas < 0] < 1) and np.all(a[deltas > 0] > 1)
    assert a[deltas == 0][0] == pytest.approx(1.0)
    assert np.all(np.diff(a) > 0)
    np.testing.assert_allclose(np.log(a), pol.ki * pol.squash(deltas))  # first: k_i term only
    # a steady δ keeps the direction; the k_p term only acts on a change of δ
    a2, _ = pol.act(np.stack([deltas, a], axis=1), st)
    np.testing.assert_allclose(a2, a)


def test_reference_policy_damps_a_change() -> None:
    """log a = k_i·δ_t + k_p·(δ_t − δ_{t−1}): δ falling fast (the queue building up)
    lowers the rate even while δ is still positive."""
    pol = ReferencePolicy(ki=0.125, kp=1.0)
    st = pol.initial_state(1)
    _, st = pol.act(np.array([[0.064, 1.0]]), st)
    a, st = pol.act(np.array([[0.02, 1.0]]), st)
    e0, e1 = math.tanh(0.064), math.tanh(0.02)  # e = δ_s·tanh(δ/δ_s), δ_s = 1
    assert math.log(a[0]) == pytest.approx(0.125 * e1 + 1.0 * (e1 - e0))
    assert a[0] < 1
    with pytest.raises(ConfigError):
        ReferencePolicy(ki=0.0)
    with pytest.raises(ConfigError):
        ReferencePolicy(kp=float("nan"))


def test_step_below_and_above_target() -> None:
    pol = ReferencePolicy(ki=0.5)  # deep congestion (e ≈ −1) reaches the 1/1.2 bound
    s = rlcc.init_state(3, P, pol)
    s = s.__class__(**{**s.__dict__, "rate": np.array([2e6, 2e6, 2e6])})
    # flow 0 idle (inflation 1), flow 1 congested, flow 2 untouched (mask)
    s2 = rlcc.step(s, P, pol, np.array([1.0, 6.0, 6.0]), mask=np.array([True, True, False]))
    a_idle = math.exp(pol.ki * float(pol.squash(np.array(0.064))))
    assert s2.rate[0] == pytest.approx(2e6 * a_idle)  # δ = target: k_i·e(target)
    assert s2.rate[1] == pytest.approx(2e6 / 1.2)  # clipped to 1/1.2
    assert s2.rate[2] == 2e6 and s2.decisions.tolist() == [1, 1, 0]
    assert s2.prev_action[0] == pytest.approx(a_idle)
    assert s2.delta[1] == pytest.approx(0.064 - 4.5 * math.sqrt(0.2))


def test_step_cuts_at_most_once_per_round_trip() -> None:
    """A signal sent before the flow's last cut cannot lower the rate again; increases
    are not held back; without t/sent_t every decision applies."""
    pol = ReferencePolicy(ki=0.5)  # so that every congested decision hits the bound
    s = rlcc.init_state(2, P, pol)
    s = rlcc.step(s, P, pol, 60.0, t=1.0, sent_t=0.99)  # both cut at t = 1
    np.testing.assert_allclose(s.rate, P.line_rate_bps / 1.2)
    np.testing.assert_allclose(s.last_cut, [1.0, 1.0])
    # flow 0's signal left before the cut (stale), flow 1's after it (fresh)
    s2 = rlcc.step(s, P, pol, 60.0, t=1.01, sent_t=np.array([0.995, 1.005]))
    assert s2.rate[0] == s.rate[0] and s2.decisions[0] == 1 and s2.last_cut[0] == 1.0
    assert s2.rate[1] == pytest.approx(s.rate[1] / 1.2) and s2.last_cut[1] == 1.01
    # a stale signal that raises the rate is applied
    s3 = rlcc.step(s2, P, pol, 1.0, t=1.02, sent_t=0.5)
    assert np.all(s3.rate > s2.rate) and s3.decisions.tolist() == [2, 3]
    s4 = rlcc.step(s, P, pol, 60.0)  # no times: plain decision (clipped cut)
    np.testing.assert_allclose(s4.rate, P.line_rate_bps / 1.44)


def test_step_clamps_to_line_and_floor() -> None:
    pol = ReferencePolicy()
    s = rlcc.init_state(1, P, pol)
    for _ in range(5):
        s = rlcc.step(s, P, pol, 1.0)
    assert s.rate[0] == P.line_rate_bps
    for _ in range(200):
        s = rlcc.step(s, P, pol, 50.0)
    assert s.rate[0] == pytest.approx(P.floor_bps)


@pytest.mark.parametrize("kind", ["reference", "lstm", "mlp", "trees", "catboost"])
def test_policies_reach_the_fixed_point(kind: str) -> None:
    """Toy bottleneck (NVIDIA RL-CC eq. 5): 4 flows, one decision per base RTT, queue
    q (in base RTTs) grows by load − 1 per step, inflation = 1 + q.  Every shipped policy
    ends near δ = 0 with a full, fairly shared link (Tessler et al. Prop. 1)."""
    files = {"lstm": "rlcc-lstm-ref.npz", "mlp": "rlcc-mlp-ref.npz",
             "trees": "rlcc-trees-ref.json", "catboost": "rlcc-catboost-ref.json"}
    pol = ReferencePolicy() if kind == "reference" else load_policy(data_dir() / files[kind])
    s = rlcc.init_state(4, P, pol)
    s = s.__class__(**{**s.__dict__, "rate": np.array([1e6, 2e6, 4e6, 8e6])})
    q, deltas, loads, rates = 0.0, [], [], []
    for k in range(1500):
        load = s.rate.sum() / P.line_rate_bps
        q = max(0.0, q + load - 1.0)
        s = rlcc.step(s, P, pol, 1.0 + q)
        if k >= 1200:
            deltas.append(s.delta.mean())
            loads.append(load)
            rates.append(s.rate.copy())
    mean_rate = np.mean(rates, axis=0)
    assert abs(np.mean(deltas)) < 0.03
    assert np.mean(loads) == pytest.approx(1.0, abs=0.02)
    assert mean_rate.max() / mean_rate.min() < 1.1


REF_FILES = {"lstm": "rlcc-lstm-ref.npz", "mlp": "rlcc-mlp-ref.npz",
             "trees": "rlcc-trees-ref.json", "catboost": "rlcc-catboost-ref.json"}


def _log_actions_vs_reference(kind: str, lo: float, hi: float,
                              clip: bool) -> tuple[np.ndarray, np.ndarray]:
    """log a of the shipped ``kind`` and of ReferencePolicy over 20 decisions of 500
    flows with δ ~ U(lo, hi) (the first decision included), same observations."""
    pol = load_policy(data_dir() / REF_FILES[kind])
    ref = ReferencePolicy()
    rng = np.random.default_rng(7)
    n = 500
    st, st_ref = pol.initial_state(n), ref.initial_state(n)
    if kind != "lstm":
        # windowed: the window is padded with δ_0 = 0 (WindowedPolicy), i.e. a reference
        # policy whose previous e is 0 rather than "none" (documented in the generators)
        st_ref = (np.zeros(n),)
    prev, got, want = np.ones(n), [], []
    for _ in range(20):
        obs = np.stack([rng.uniform(lo, hi, n), prev], axis=1)
        a, st = pol.act(obs, st)
        a_ref, st_ref = ref.act(obs, st_ref)
        if clip:  # what the core applies (trees/catboost: only that range is fitted)
            a, a_ref = np.clip(a, 1 / 1.2, 1.2), np.clip(a_ref, 1 / 1.2, 1.2)
        got.append(np.log(a))
        want.append(np.log(a_ref))
        prev = np.clip(a_ref, 1 / 1.2, 1.2)
    return np.array(got), np.array(want)


@pytest.mark.parametrize("kind,lo,hi,clip,tol", [
    # MLP/LSTM: 32-knot ReLU squash (max error 0.85e-3) on both terms (measured ≤ 0.002)
    ("lstm", -0.5, 0.5, False, 0.003), ("lstm", -4.0, 1.0, False, 0.003),
    ("mlp", -0.5, 0.5, False, 0.003), ("mlp", -4.0, 1.0, False, 0.003),
    # trees/CatBoost: 21-level staircase, half a step on each term; CatBoost a = 1 + y
    # (measured ≤ 0.095 and ≤ 0.15 for k_i = 0.125..0.5)
    ("trees", -0.5, 0.064, True, 0.11), ("trees", -4.0, 0.064, True, 0.17),
    ("catboost", -0.5, 0.064, True, 0.11), ("catboost", -4.0, 0.064, True, 0.17),
])
def test_shipped_files_follow_the_reference_policy(kind: str, lo: float, hi: float,
                                                   clip: bool, tol: float) -> None:
    """Every shipped file approximates ReferencePolicy on random δ sequences: |Δ log a|
    ≤ tol at every decision (trees/CatBoost: of the action after the core's clip)."""
    got, want = _log_actions_vs_reference(kind, lo, hi, clip)
    err = np.abs(got - want)
    worst = int(err.max(axis=1).argmax())
    assert err.max() <= tol, f"{kind}: max |Δ log a| {err.max():.4g} at decision {worst}"
    if kind in ("trees", "catboost"):
        assert np.mean(err) < tol / 3  # a staircase: large errors only near the steps
