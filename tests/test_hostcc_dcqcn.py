"""DCQCN RP core: golden traces (REFERENCE §2), batching, big jumps, validation."""

from __future__ import annotations

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import dcqcn as d
from p4cc.scale import Scale

US = 1e-6
GOLDEN_SINGLE = [(4, 50.78), (304, 75.39), (604, 87.69), (904, 93.85), (1804, 99.23)]
# CNPs every 50 µs from 0 to 950 µs (1 ms), then silence.
GOLDEN_TRAIN = [(4, 50.78), (52, 29.97), (100, 19.73), (952, 3.24), (1252, 51.6),
                (1552, 75.8), (1852, 87.9), (2152, 94.0), (2452, 97.0), (2752, 98.5)]


def _golden_single(params: d.DcqcnParams, tf: float = 1.0) -> list[float]:
    s = d.on_cnp(d.init_state(1, params), params, 0.0)
    out = []
    for t_us, _ in GOLDEN_SINGLE:
        s = d.advance(s, params, t_us * US * tf)
        out.append(float(s.rc[0]))
    return out


def _golden_train(params: d.DcqcnParams, tf: float = 1.0) -> list[float]:
    s = d.init_state(1, params)
    cnps = [k * 50 for k in range(20)]
    out = []
    events = sorted({*cnps, *(t for t, _ in GOLDEN_TRAIN)})
    for t_us in events:
        if t_us in cnps:
            s = d.on_cnp(s, params, t_us * US * tf)
        s = d.advance(s, params, t_us * US * tf)
        if t_us in dict(GOLDEN_TRAIN):
            out.append(float(s.rc[0]))
    return out


def test_golden_single_cnp() -> None:
    p = d.dcqcn_params("golden", 100e9)
    got = _golden_single(p)
    for (t_us, want), rate in zip(GOLDEN_SINGLE, got, strict=True):
        assert rate / 1e9 == pytest.approx(want, rel=1e-3), t_us


def test_golden_cnp_train_and_recovery() -> None:
    p = d.dcqcn_params("golden", 100e9)
    got = _golden_train(p)
    for (t_us, want), rate in zip(GOLDEN_TRAIN, got, strict=True):
        assert rate / 1e9 == pytest.approx(want, rel=1e-3), t_us


def test_golden_trace_survives_scaling() -> None:
    sc = Scale(link_rate_bps=10e6, base_rtt_s=2e-3)
    line = 100e9 * sc.rate_factor
    p = d.dcqcn_params("golden", line, sc)
    assert p.increase_period_s == pytest.approx(300e-6 * sc.time_factor)
    assert p.rai_bps == pytest.approx(20e6 * sc.rate_factor)
    got = _golden_train(p, sc.time_factor)
    for (t_us, want), rate in zip(GOLDEN_TRAIN, got, strict=True):
        assert rate / sc.rate_factor / 1e9 == pytest.approx(want, rel=1e-3), t_us


def test_named_sets_and_scaling() -> None:
    sc = Scale()
    for name in d.DCQCN_PARAM_SETS:
        p = d.dcqcn_params(name, sc.link_rate_bps, sc)
        assert p.name == name and p.line_rate_bps == sc.link_rate_bps
        assert p.min_rate_bps <= p.line_rate_bps
    p = d.dcqcn_params("hpcc-ns3", 25e9)
    assert (p.rai_bps, p.rhai_bps, p.byte_counter_bytes) == (5e6, 50e6, None)
    assert d.dcqcn_params("hpcc-ns3", 100e9).rai_bps == pytest.approx(20e6)
    paper = d.dcqcn_params("dcqcn-paper", 25e9)
    assert paper.decrease_period_s is None and paper.fast_recovery_stages == 5
    nv = d.dcqcn_params("nvidia", sc.link_rate_bps, sc)
    assert nv.byte_counter_bytes == max(1, round(32767 * sc.bdp_factor))
    assert nv.alpha_period_s == pytest.approx(1e-6 * sc.time_factor)


@pytest.mark.parametrize("kw", [
    {"g": 0.0}, {"g": 1.5}, {"alpha_init": -0.1}, {"alpha_period_s": -1.0},
    {"increase_period_s": 0.0}, {"decrease_period_s": 0.0}, {"byte_counter_bytes": 0},
    {"min_rate_bps": 200e9}, {"fast_recovery_stages": -1}, {"min_dec_factor": 1.0},
    {"rate_on_first_cnp": 0.0}, {"alpha_period_s": 1e-12}, {"rai_bps": float("nan")},
])
def test_param_validation(kw: dict[str, float]) -> None:
    base = dict(line_rate_bps=100e9, rai_bps=20e6, rhai_bps=200e6, min_rate_bps=1e9)
    base.update(kw)
    with pytest.raises(ConfigError) as err:
        d.DcqcnParams(**base)  # type: ignore[arg-type]
    assert next(iter(kw)) in str(err.value)


def test_param_set_errors() -> None:
    with pytest.raises(ConfigError, match="unknown DCQCN parameter set"):
        d.dcqcn_params("nope", 1e9)
    with pytest.raises(ConfigError, match="override"):
        d.dcqcn_params("golden", 100e9, bogus=1)
    p = d.dcqcn_params("golden", 100e9)
    s = d.advance(d.init_state(2, p), p, 1e-3)
    with pytest.raises(ConfigError, match="backwards"):
        d.advance(s, p, 0.5e-3)
    with pytest.raises(ConfigError):
        d.init_state(2, p, line_rate_bps=[100e9, 1.0])


def _random_run(params: d.DcqcnParams, n: int, seed: int, steps: int = 60) -> list[d.DcqcnState]:
    rng = np.random.default_rng(seed)
    s = d.init_state(n, params, line_rate_bps=rng.uniform(0.5, 1.0, n) * params.line_rate_bps)
    t, out = 0.0, []
    for _ in range(steps):
        t += float(rng.exponential(30e-6))
        kind = rng.integers(3)
        if kind == 0:
            s = d.on_cnp(s, params, t, rng.random(n) < 0.3)
        elif kind == 1:
            s = d.on_bytes_sent(s, params, t, rng.integers(0, 60_000, n))
        else:
            s = d.advance(s, params, t)
        out.append(s)
    return out


@pytest.mark.parametrize("name", d.DCQCN_PARAM_SETS)
def test_single_flow_equals_flow_in_batch(name: str) -> None:
    p = d.dcqcn_params(name, 100e9)
    n = 1000
    batch = _random_run(p, n, seed=7)
    # Replay flows 0, 417 and 999 alone with exactly the events they saw in the batch.
    rng = np.random.default_rng(7)
    lines = rng.uniform(0.5, 1.0, n) * p.line_rate_bps
    for k in (0, 417, 999):
        rng = np.random.default_rng(7)
        rng.uniform(0.5, 1.0, n)
        s = d.init_state(1, p, line_rate_bps=lines[k])
        t = 0.0
        for b in batch:
            t += float(rng.exponential(30e-6))
            kind = rng.integers(3)
            if kind == 0:
                s = d.on_cnp(s, p, t, (rng.random(n) < 0.3)[k:k + 1])
            elif kind == 1:
                s = d.on_bytes_sent(s, p, t, rng.integers(0, 60_000, n)[k:k + 1])
            else:
                s = d.advance(s, p, t)
            one = d.select(b, [k])
            for f in ("rc", "rt", "alpha", "t_stage", "b_stage", "next_inc"):
                np.testing.assert_array_equal(getattr(s, f), getattr(one, f), err_msg=f)


@pytest.mark.parametrize("name", d.DCQCN_PARAM_SETS)
def test_one_big_jump_equals_many_small_steps(name: str) -> None:
    p = d.dcqcn_params(name, 100e9)
    s0 = _random_run(p, 50, seed=3, steps=30)[-1]
    end = s0.t + 5e-3
    big = d.advance(s0, p, end)
    small, t = s0, s0.t
    rng = np.random.default_rng(1)
    while t < end:
        t = min(end, t + float(rng.uniform(0.1e-6, 40e-6)))
        small = d.advance(small, p, t)
    for f in ("rt", "rc", "alpha"):
        np.testing.assert_allclose(getattr(big, f), getattr(small, f), rtol=1e-12, err_msg=f)
    for f in ("t_stage", "next_alpha", "next_dec", "next_inc", "active"):
        np.testing.assert_array_equal(getattr(big, f), getattr(small, f), err_msg=f)


def test_paper_variant_cuts_on_cnp() -> None:
    p = d.dcqcn_params("dcqcn-paper", 40e9)
    s = d.on_cnp(d.init_state(1, p), p, 0.0)
    assert s.rc[0] == pytest.approx(20e9)  # α = 1 at the first CNP: halve at once
    assert s.alpha[0] == pytest.approx(1.0)  # then α = (1-g)·1 + g


def test_stage_rules_with_timer_and_byte_counter() -> None:
    """max(i,j) < F: fast recovery; min(i,j) > F: hyper (× (min-F)); else additive."""
    p = d.DcqcnParams(line_rate_bps=100e9, rai_bps=1e6, rhai_bps=1e7, min_rate_bps=1e6,
                      decrease_period_s=None, increase_period_s=10e-6, alpha_period_s=1.0,
                      byte_counter_bytes=1000, fast_recovery_stages=1, hai_grows=True,
                      rate_on_first_cnp=0.1)
    s = d.on_cnp(d.init_state(1, p), p, 0.0)
    assert (s.rc[0], s.rt[0]) == (pytest.approx(5e9), pytest.approx(10e9))
    rt = 10e9
    # (time µs, event, expected Rt increment); timer fires at 10, 20, 30 µs
    plan = [(1, "b", 0.0), (10, "t", 1e6), (11, "b", 1e6), (20, "t", 1e6), (21, "b", 1e7),
            (30, "t", 1e7), (31, "b", 2e7)]
    rc = 5e9
    for t_us, ev, inc in plan:
        if ev == "b":
            s = d.on_bytes_sent(s, p, t_us * US, 1000)
        else:
            s = d.advance(s, p, t_us * US)
        rt += inc
        rc = (rc + rt) / 2
        assert s.rt[0] == pytest.approx(rt), (t_us, ev)
        assert s.rc[0] == pytest.approx(rc), (t_us, ev)
    assert (s.t_stage[0], s.b_stage[0]) == (3, 4)


def test_clamp_target_option() -> None:
    base = d.dcqcn_params("golden", 100e9)
    clamp = d.dcqcn_params("golden", 100e9, clamp_target=True)
    s_b = d.advance(d.on_cnp(d.init_state(1, base), base, 0.0), base, 4e-6)
    s_c = d.advance(d.on_cnp(d.init_state(1, clamp), clamp, 0.0), clamp, 4e-6)
    s_b = d.advance(d.on_cnp(s_b, base, 10e-6), base, 12e-6)
    s_c = d.advance(d.on_cnp(s_c, clamp, 10e-6), clamp, 12e-6)
    assert s_b.rt[0] == pytest.approx(100e9)  # no increase since the cut: Rt kept
    assert s_c.rt[0] == pytest.approx(50.7767e9, rel=1e-4)  # clamped to Rc before the cut


def test_long_jump_after_recovery_is_exact_and_cheap() -> None:
    p = d.dcqcn_params("hpcc-ns3", 25e9)
    s0 = d.on_cnp(d.init_state(3, p), p, 0.0, [True, False, True])
    big = d.advance(s0, p, 2.0)  # ~6,700 increase-timer periods
    small = s0
    for k in range(1, 2001):
        small = d.advance(small, p, k * 1e-3)
    np.testing.assert_array_equal(big.rc, small.rc)
    np.testing.assert_array_equal(big.t_stage, small.t_stage)
    np.testing.assert_array_equal(big.next_inc, small.next_inc)
    np.testing.assert_allclose(big.alpha, small.alpha, rtol=1e-9)
    assert np.all(big.rc == 25e9)
