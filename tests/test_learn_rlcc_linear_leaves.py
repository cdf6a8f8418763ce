"""Linear leaves of the distilled RL-CC student (p4cc.learn.rlcc_distill_fit with
``linear=True``, p4cc.hostcc.rlcc_trees ``"linear"`` leaves): LightGBM's prediction
reproduced by the runtime, the operation count inside the paper's budget, bad files
refused, and the fit they buy on the teacher's near-linear law."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lightgbm")

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_int8 import quantize
from p4cc.hostcc.rlcc_policy_base import PolicyLoadError
from p4cc.hostcc.rlcc_trees import load_tree_policy
from p4cc.learn import rlcc_distill as D
from p4cc.learn.rlcc_distill_fit import MAX_OPS, fit, to_p4cc_trees


def near_linear(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows (δ_{t−1}, a_{t−2}, δ_t, a_{t−1}) around the teacher's crossing and the law
    the docs measured there, y ≈ 13.2·δ_t − 7.1·δ_{t−1} − 4.0·(a_{t−1} − 1), bent by a
    tanh."""
    rng = np.random.default_rng(seed)
    d1, d0 = rng.uniform(-0.05, 0.064, n), rng.uniform(-0.05, 0.064, n)
    a1, a0 = rng.uniform(0.95, 1.05, n), rng.uniform(0.95, 1.05, n)
    x = np.stack([d0, a0, d1, a1], axis=1)
    return x, np.tanh(13.2 * d1 - 7.1 * d0 - 4.0 * (a1 - 1.0))


def write(doc: dict, tmp_path: Path, name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_runtime_reproduces_lightgbm_linear_leaves(tmp_path: Path) -> None:
    x, y = near_linear(20_000)
    model = fit(x, y, linear=True, min_data_in_leaf=200)
    doc = to_p4cc_trees(model, window=2, output="identity")
    assert any("linear" in nd for t in doc["trees"] for nd in t["nodes"])
    student = load_tree_policy(write(doc, tmp_path))
    xt, _ = near_linear(5_000, seed=1)
    np.testing.assert_allclose(student.predict(xt), model.predict(xt), rtol=0, atol=1e-9)
    assert student.linear and student.n_trees == 10 and student.depth <= 4
    assert student.ops() <= MAX_OPS  # ≤ 4 terms per leaf at depth 4: ≤ 130


def test_linear_terms_are_bounded_to_their_leafs_training_rows(tmp_path: Path) -> None:
    x, y = near_linear(20_000)
    model = fit(x, y, linear=True, min_data_in_leaf=200)
    free = load_tree_policy(write(to_p4cc_trees(model, 2, output="identity"), tmp_path))
    doc = to_p4cc_trees(model, 2, output="identity", fitted_on=x)
    bounded = load_tree_policy(write(doc, tmp_path, "b.json"))
    terms = [t for tr in doc["trees"] for nd in tr["nodes"] for t in nd.get("linear", [])]
    assert terms and all(len(t) == 4 and t[2] < t[3] for t in terms if t[0] % 2 == 0)
    assert all(len(t) == 2 for t in terms if t[0] % 2 == 1)  # a_{t−1}: bounded by design
    # on the training rows each leaf's bounds hold by construction: LightGBM's answers
    np.testing.assert_allclose(bounded.predict(x), model.predict(x), rtol=0, atol=1e-9)
    deep = np.array([[0.0, 1.0, d, 1.0] for d in (-1e3, -1e6)])
    assert bounded.predict(deep)[0] == bounded.predict(deep)[1]  # no extrapolation
    assert free.predict(deep)[0] != free.predict(deep)[1]
    assert free.ops() < bounded.ops() <= MAX_OPS + 40
    high = np.array([[0.0, 1.0, d, 1.0] for d in (10.0, 1e3)])  # above every leaf's rows
    assert bounded.predict(high)[0] == bounded.predict(high)[1]


def test_constant_leaves_have_no_linear_terms_and_cost_50_ops(tmp_path: Path) -> None:
    x, y = near_linear(5_000)
    doc = to_p4cc_trees(fit(x, y), window=2)
    assert not any("linear" in nd for t in doc["trees"] for nd in t["nodes"])
    student = load_tree_policy(write(doc, tmp_path))
    assert not student.linear and student.coef is None
    assert student.ops() == 4 * 10 + 10


def test_linear_leaves_fit_the_teachers_law_far_better(tmp_path: Path) -> None:
    x, y = near_linear(20_000)
    xt, yt = near_linear(5_000, seed=2)
    err = {}
    for linear in (False, True):
        doc = to_p4cc_trees(fit(x, y, linear=linear, min_data_in_leaf=200), window=2,
                            output="identity")
        pred = load_tree_policy(write(doc, tmp_path, f"{linear}.json")).predict(xt)
        err[linear] = float(np.sqrt(np.mean((pred - yt) ** 2)))
    assert err[True] < 0.75 * err[False], err  # measured: 0.028 against 0.048


@pytest.mark.parametrize("terms, why", [
    ([[4, 1.0]], "feature in 0..3"),
    ([[0, 1.0], [0, 2.0]], "appears twice"),
    ([[0, "x"]], "finite number"),
    ([[True, 1.0]], "feature in 0..3"),
    ("0:1", "list of"),
    ([[k % 4, 1.0] for k in range(9)], "list of"),
    ([[0, 1.0, 2.0, 1.0]], "lo > hi"),
    ([[0, 1.0, -1.0]], "feature in 0..3"),
])
def test_bad_linear_leaves_are_refused_by_name(tmp_path: Path, terms: object,
                                               why: str) -> None:
    doc = {"format": "p4cc-trees", "version": 1, "window": 2, "output": "bounded",
           "trees": [{"nodes": [{"feature": 2, "threshold": 0.0, "left": 1, "right": 2},
                                {"leaf": 0.1, "linear": terms}, {"leaf": -0.1}]}]}
    with pytest.raises(PolicyLoadError, match="tree 0 node 1") as exc:
        load_tree_policy(write(doc, tmp_path))
    assert why in str(exc.value)


def test_int8_linear_leaves_track_the_float_trees(tmp_path: Path) -> None:
    x, y = near_linear(20_000)
    doc = to_p4cc_trees(fit(x, y, linear=True, min_data_in_leaf=200), window=2)
    student = load_tree_policy(write(doc, tmp_path))
    q = quantize(student)
    xt, _ = near_linear(5_000, seed=3)
    state = (xt[:, :2].reshape(-1, 1, 2),)
    a_f, _ = student.act(xt[:, 2:], state)
    a_q, _ = q.act(xt[:, 2:], state)
    assert np.max(np.abs(a_q - a_f)) < 2e-3, np.max(np.abs(a_q - a_f))
    codes = q.forward_codes(xt)  # integer only after the two input codes
    assert codes.dtype == np.int64 and np.all(np.abs(codes) <= 127)
    with pytest.raises(ConfigError, match="value codes"):
        q.leaf_sum(q.input_codes(xt))


def test_config_refuses_linear_leaves_with_monotone_or_negative_lambda() -> None:
    assert D.DistillConfig().linear_leaves  # the default since session 17
    with pytest.raises(ConfigError, match="linear_leaves=false"):
        D.DistillConfig(monotone=(1, -1, 1, -1))
    assert D.DistillConfig(linear_leaves=False, monotone=(1, -1, 1, -1)).monotone
    with pytest.raises(ConfigError, match="linear_lambda"):
        D.DistillConfig(linear_lambda=-1.0)
    with pytest.raises(ConfigError, match="monotone"):
        fit(*near_linear(100), monotone=(1, -1, 1, -1), linear=True)


def test_clip_bounds_the_features_before_the_trees(tmp_path: Path) -> None:
    doc = {"format": "p4cc-trees", "version": 1, "window": 2, "output": "identity",
           "clip": [[-12.0, None], [None, None], [-12.0, None], [None, None]],
           "trees": [{"nodes": [{"feature": 2, "threshold": 0.0, "left": 1, "right": 2},
                                {"leaf": 0.5, "linear": [[2, 1.0]]}, {"leaf": 0.0}]}]}
    pol = load_tree_policy(write(doc, tmp_path))
    x = np.array([[0.0, 1.0, -39.0, 1.0], [0.0, 1.0, -3.0, 1.0]])
    np.testing.assert_allclose(pol.predict(x), [0.5 - 12.0, 0.5 - 3.0])
    for bad, why in (([[-1.0, None]] * 3, "4 \\[lo, hi\\] pairs"),
                     ([[1.0, 0.0]] * 4, "lo <= hi"), ([[-1.0, "x"]] * 4, "finite number")):
        with pytest.raises(PolicyLoadError, match=why):
            load_tree_policy(write({**doc, "clip": bad}, tmp_path, "bad.json"))


def test_distilled_rows_are_clipped_like_the_file() -> None:
    from p4cc.learn.rlcc_distill_fit import clip_bounds, clip_rows

    assert D.DistillConfig().clip_delta == 0.0  # off by default: per-leaf bounds instead
    clip = clip_bounds(2, 12.0)
    assert clip == [[-12.0, None], [None, None]] * 2
    x = np.array([[-39.0, 0.5, -0.1, 1.3]])
    np.testing.assert_allclose(clip_rows(x, clip), [[-12.0, 0.5, -0.1, 1.3]])
    assert clip_bounds(2, 0.0) is None and clip_rows(x, None) is x
    with pytest.raises(ConfigError, match="clip_delta"):
        D.DistillConfig(clip_delta=-1.0)
    with pytest.raises(ConfigError, match=r"leaf_margin_high=-0\.5 must be >= 0"):
        D.DistillConfig(leaf_margin_high=-0.5)



def test_shipped_student_is_within_the_device_budget() -> None:
    from p4cc.hostcc.rlcc_policies import data_dir

    student = load_tree_policy(data_dir() / "rlcc-distilled-trees.json")
    assert student.linear and student.n_trees <= 10 and student.depth <= 4
    assert student.ops() <= MAX_OPS


def test_shipped_student_cuts_the_rate_deep_in_the_queue() -> None:
    """The teacher's action is its minimum (y = −3.8) at every δ ≤ −1; the linear
    student fitted without a clip answered 'increase' (y = +1.8) at δ_t = −39.4 on a
    first decision (window padding δ_{t−1} = 0).  The shipped student must cut."""
    from p4cc.hostcc.rlcc_policies import data_dir

    student = load_tree_policy(data_dir() / "rlcc-distilled-trees.json")
    deltas = np.array([-1.0, -2.0, -5.0, -12.0, -39.4, -80.0, -1000.0])
    for prev in (0.0, -0.5):
        x = np.stack([np.full_like(deltas, prev), np.ones_like(deltas), deltas,
                      np.ones_like(deltas)], axis=1)
        assert np.all(student.predict(x) < -1.5), student.predict(x)
    x = np.stack([deltas, np.ones_like(deltas), deltas, np.ones_like(deltas)], axis=1)
    assert np.all(student.predict(x) < -1.5)
