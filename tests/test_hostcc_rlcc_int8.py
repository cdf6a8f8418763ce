"""Int8-quantised RL-CC inference (p4cc.hostcc.rlcc_int8): closeness to the float policy on
held-out states, and that the quantised path is integer arithmetic."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc import rlcc
from p4cc.hostcc.cc import policy_by_name
from p4cc.hostcc.rlcc_int8 import (
    CODE_MAX,
    Int8Mlp,
    Int8Trees,
    fixed_multiplier,
    quantize,
    requantize,
)
from p4cc.hostcc.rlcc_policies import data_dir, load_policy
from p4cc.sim.validate import rlcc_fixed_point

PARAMS = rlcc.RlccParams(25e9, 8e-6)
SHIPPED = ["rlcc-adpg-mlp.npz", "rlcc-distilled-trees.json"]


class _Recorder:
    """Wraps a policy and keeps every (observation, state) it was asked about."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.seen = inner, inner.name, []

    def initial_state(self, n: int) -> Any:
        return self.inner.initial_state(n)

    def act(self, obs: np.ndarray, state: Any) -> Any:
        self.seen.append((obs.copy(), tuple(a.copy() for a in state)))
        return self.inner.act(obs, state)


@pytest.fixture(scope="module")
def held_out() -> dict[str, list[Any]]:
    """States each float policy visits on an 8→1 incast (flows joining every 10 RTTs),
    a scenario and seed neither training nor distillation used."""
    out = {}
    for name in SHIPPED:
        rec = _Recorder(load_policy(data_dir() / name))
        rlcc_fixed_point(8, rtts=400, policy=rec, stagger_rtts=10, seed=3)
        out[name] = rec.seen
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_int8_decisions_close_to_float_on_held_out_states(
        name: str, held_out: dict[str, list[Any]]) -> None:
    # Tolerance: the output table quantises y to steps of 3/127, i.e. the action to steps
    # of <= 0.2·3/127 = 0.0047 (rounding: half of it), and δ's 8-bit input step (0.047)
    # moves the MLP's action by <= ~0.005 near the operating point: max 0.01 is two
    # action steps; the mean must stay below the distilled student's own mean error
    # against its teacher (0.0015, docs/results.md "Distillation").
    flt = load_policy(data_dir() / name)
    q = quantize(flt)
    errs, sign_same = [], []
    for obs, st in held_out[name]:
        a_f = np.clip(flt.act(obs, st)[0], 1 / 1.2, 1.2)
        a_q = np.clip(q.act(obs, st)[0], 1 / 1.2, 1.2)
        errs.append(np.abs(a_f - a_q))
        sign_same.append(((a_f >= 1) == (a_q >= 1)) | (np.abs(a_f - 1) < 0.005))
    e = np.concatenate(errs)
    assert e.size > 1000
    assert float(e.max()) <= 0.01, f"{name}: max |Δa| {e.max():.4f}"
    assert float(e.mean()) <= 0.0015, f"{name}: mean |Δa| {e.mean():.5f}"
    assert np.concatenate(sign_same).all()


def _reference_mlp_int(q: Int8Mlp, u: np.ndarray) -> list[int]:
    """The same network in Python integers (no numpy, no floats)."""
    out = []
    for row in u.tolist():
        x = [int(v) for v in row]
        for k, (wq, bq) in enumerate(zip(q.wq, q.bq, strict=True)):
            accs = [sum(int(w) * xi for w, xi in zip(wr, x, strict=True)) + int(b)
                    for wr, b in zip(wq.tolist(), bq.tolist(), strict=True)]
            assert all(-(2**31) <= a < 2**31 for a in accs), "int32 accumulator overflow"
            m0, sh = q.m0[k].tolist(), q.shift[k].tolist()
            last = k == len(q.wq) - 1
            x = []
            for j, a in enumerate(accs):
                a = a if last else max(a, 0)
                v = (a * m0[j] + (1 << (sh[j] - 1))) >> sh[j]
                x.append(min(max(v, -CODE_MAX), CODE_MAX) if last else min(v, 255))
        out.append(x[0])
    return out


def test_int8_mlp_is_integer_arithmetic() -> None:
    q = policy_by_name("adpg-mlp-int8", PARAMS)
    assert isinstance(q, Int8Mlp)
    for arr in (*q.wq, *q.bq, *q.m0, *q.shift, q.lut):
        assert arr.dtype.kind == "i"
    assert all(int(np.abs(w).max()) <= 127 for w in q.wq)  # int8 weights
    assert q.weight_bytes() < 150  # 4·12 + 12 int8 weights, 13 int32 biases
    rng = np.random.default_rng(5)
    u = rng.integers(0, 256, (300, 4))
    got = q.forward_int(u)
    assert got.dtype.kind == "i"
    assert got.tolist() == _reference_mlp_int(q, u)
    with pytest.raises(ConfigError, match="integer"):
        q.forward_int(u.astype(np.float64))


def test_int8_trees_compare_bins_and_sum_integer_leaves() -> None:
    flt = load_policy(data_dir() / "rlcc-distilled-trees.json")
    q = policy_by_name("adpg-trees-int8", PARAMS)
    assert isinstance(q, Int8Trees)
    for arr in (q.tq, q.leaf_q, q.feat, q.lut):
        assert arr.dtype.kind == "i"
    assert max(b.size for b in q.borders) <= 255
    rng = np.random.default_rng(2)
    x = np.stack([np.minimum(rng.normal(0, 0.5, 4000), 0.064), rng.uniform(0.83, 1.2, 4000),
                  np.minimum(rng.normal(0, 0.5, 4000), 0.064), rng.uniform(0.83, 1.2, 4000)],
                 axis=1)
    # binarisation is lossless for the splits: the integer code differs from the float
    # ensemble's output only by the leaves' fixed point and the final rounding
    y = flt.predict(x)
    code = q.forward_codes(x)
    inside = np.abs(y) < CODE_MAX * q.y_step
    assert np.all(np.abs(code[inside] * q.y_step - y[inside]) <= 0.51 * q.y_step + 1e-9)
    with pytest.raises(ConfigError, match="integer"):
        q.forward_int(x)


def test_requantize_rounds_like_the_real_multiplier() -> None:
    m = np.array([0.3, 1e-3, 0.77, 2.5e-5])
    m0, sh = fixed_multiplier(m)
    acc = np.array([123456, -98765, 7, 2**30], dtype=np.int64)
    np.testing.assert_array_equal(requantize(acc, m0, sh), np.round(acc * m))
    with pytest.raises(ConfigError):
        fixed_multiplier([0.0])


def test_int8_names_and_unsupported_policies() -> None:
    assert isinstance(policy_by_name("adpg-mlp-int8", PARAMS), Int8Mlp)
    assert isinstance(policy_by_name("trees-int8", PARAMS), Int8Trees)
    with pytest.raises(ConfigError, match="int8"):
        policy_by_name("adpg-lstm-int8", PARAMS)
    with pytest.raises(ConfigError, match="int8"):
        policy_by_name("pi-int8", PARAMS)


def test_int8_policy_tracks_float_on_a_simulated_incast() -> None:
    # 600 RTTs: the measured half still holds the end of the start-up transient (the float
    # MLP is at 0.74 utilisation there, 1.00 at 1500 RTTs); the int8 copy must follow it.
    flt = load_policy(data_dir() / "rlcc-adpg-mlp.npz")
    r_f = rlcc_fixed_point(4, rtts=600, policy=flt)
    r_q = rlcc_fixed_point(4, rtts=600, policy=policy_by_name("adpg-mlp-int8", PARAMS))
    assert r_q["policy"] == "mlp-int8"
    assert abs(r_q["utilization"] - r_f["utilization"]) < 0.03
    assert r_q["jain"] > 0.99 and r_q["lost_bytes"] == 0.0
    assert abs(r_q["rtt_inflation"] / r_f["rtt_inflation"] - 1) < 0.05
