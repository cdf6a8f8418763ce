"""Distillation of RL-CC into boosted trees (p4cc.learn.rlcc_distill): the states gathered
from large incasts, the teacher's crossing, the operating-point weights, the device limits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("lightgbm")

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import MlpPolicy, load_policy
from p4cc.learn import rlcc_distill as D
from p4cc.learn import rlcc_distill_states as S


def linear_teacher(crossing: float, slope: float = 6.0) -> MlpPolicy:
    """y = slope·(δ_t − crossing): one linear layer over the window (δ_{t−1}, a_{t−2},
    δ_t, a_{t−1}), ``bounded`` output; its action crosses 1 at δ_t = crossing."""
    w = np.array([[0.0, 0.0, slope, 0.0]])
    return MlpPolicy([(w, np.array([-slope * crossing]))], window=2, output="bounded")


def test_teacher_crossing_finds_where_the_action_crosses_one() -> None:
    for c in (-0.02, 0.0, 0.013):
        assert D.teacher_crossing(linear_teacher(c)) == pytest.approx(c, abs=1e-9)
    with pytest.raises(ConfigError, match="does not cross"):
        D.teacher_crossing(linear_teacher(0.5))


def test_operating_weights_peak_at_the_crossing() -> None:
    x = np.zeros((5, 4))
    x[:, 2] = [-1.0, -0.02, 0.003, 0.013, 0.05]  # δ_t is the second-last feature
    w = D.operating_weights(x, center=0.003, width=0.01, gain=10.0)
    assert w[2] == pytest.approx(11.0)
    assert w[1] == pytest.approx(1 + 10 * np.exp(-0.5 * 2.3 ** 2))
    assert w[3] == pytest.approx(1 + 10 * np.exp(-0.5))
    assert w[0] == pytest.approx(1.0) and np.argmax(w) == 2
    np.testing.assert_array_equal(D.operating_weights(x, 0.003, 0.0, 10.0), np.ones(5))


def test_operating_weights_move_the_students_crossing_onto_the_teachers() -> None:
    """States spread over δ ∈ [−3, 0.064] (most far below the crossing, as in the
    start-up transients): unweighted, the student's sign change lands > 0.008 from the
    teacher's (0.0116); weighted at the crossing, within 0.002 of it (0.0005)."""
    teacher = linear_teacher(0.004)
    rng = np.random.default_rng(0)
    d = np.concatenate([-np.exp(rng.uniform(np.log(0.05), np.log(3), 4000)),
                        rng.uniform(-0.05, 0.064, 400)])
    x = np.stack([d, np.ones_like(d), d, np.ones_like(d)], axis=1)
    y = D.label(teacher, x)
    grid = np.linspace(-0.05, 0.064, 2001)
    rows = np.stack([grid, np.ones_like(grid), grid, np.ones_like(grid)], axis=1)

    def crossing_error(weight: np.ndarray) -> float:
        booster = D.fit(x, y, weight=weight)  # 10 trees of depth 4
        s = booster.predict(rows)
        return float(np.min(np.abs(grid[np.nonzero(np.diff(np.sign(s)))[0]] - 0.004),
                            initial=1.0))

    assert crossing_error(np.ones(len(y))) > 0.008
    assert crossing_error(D.operating_weights(x, 0.004, 0.01, 50.0)) < 0.002


def test_incast_states_spread_over_63_senders_and_keep_a_fraction() -> None:
    teacher = linear_teacher(0.0)
    full = D.incast_states(teacher, 80, rtts=60, keep=1.0, rng=np.random.default_rng(1))
    part = D.incast_states(teacher, 80, rtts=60, keep=0.1, rng=np.random.default_rng(1))
    assert full.shape[1] == 4 and len(full) >= 80 * 5  # every flow decided repeatedly
    assert 0.05 * len(full) < len(part) < 0.2 * len(full)
    assert np.all(full[:, 2] <= 0.064 + 1e-12)  # δ ≤ target
    assert np.all((full[:, 3] > 1 / 1.2 - 1e-9) & (full[:, 3] < 1.2 + 1e-9))  # a_{t−1}
    assert np.isfinite(full).all()


def test_config_enforces_the_device_limits() -> None:
    with pytest.raises(ConfigError, match="device"):
        D.DistillConfig(trees=11)
    with pytest.raises(ConfigError, match="device"):
        D.DistillConfig(depth=5)
    with pytest.raises(ConfigError, match="large_keep"):
        D.DistillConfig(large_keep=0.0)


def test_distill_small_run_exports_a_student_and_agreement_stats(tmp_path: Path) -> None:
    teacher = linear_teacher(0.002)
    cfg = D.DistillConfig(scenario_sets=((2, 4),), episodes=1, rtts=256, large=(80,),
                          large_rtts=120, large_keep=0.5, min_data_in_leaf=20,
                          weight_width=0.01)
    out = tmp_path / "student.json"
    student, stats = D.distill(teacher, out, cfg)
    assert json.loads(out.read_text())["format"] == "p4cc-trees"
    assert load_policy(out).n_trees == student.n_trees <= 10  # type: ignore[attr-defined]
    assert stats["teacher_crossing"] == pytest.approx(0.002, abs=1e-9)
    assert stats["held_out_near_crossing"] > 0
    assert stats["action_mae_near_crossing"] < 0.01


def test_jitter_moves_the_executed_action_but_labels_stay_the_teachers() -> None:
    teacher = linear_teacher(0.0)
    obs = np.tile([[0.01, 1.0]], (20000, 1))
    state = (np.tile([[[0.01, 1.0]]], (20000, 1, 1)),)
    clean, _ = teacher.act(obs, state)
    jit = S._Jitter(teacher, 0.01, np.random.default_rng(0))
    noisy, _ = jit.act(obs, state)
    assert np.std(np.log(noisy / clean)) == pytest.approx(0.01, rel=0.05)
    top = jit.act(np.tile([[0.064, 1.2]], (1000, 1)), (np.tile([[[0.064, 1.2]]], (1000, 1, 1)),))
    assert np.all(top[0] <= 1.2)  # still within the bounded range
    quiet_x, quiet_y = D.gather(teacher, episodes=1, rtts=128, scenario_sets=((4,),))
    x, y = D.gather(teacher, episodes=1, rtts=128, scenario_sets=((4,),), noise=0.02)
    np.testing.assert_allclose(y, D.label(teacher, x), atol=1e-12)  # clean teacher labels
    # same seed, same episode draws: only the jitter makes the rollouts differ
    assert x.shape != quiet_x.shape or not np.allclose(x, quiet_x)
    np.testing.assert_allclose(quiet_y, D.label(teacher, quiet_x), atol=1e-12)


def test_monotone_constraints_follow_the_teachers_signs() -> None:
    """Labels of a teacher increasing in δ_t and decreasing in a_{t−1}, with noise: the
    unconstrained fit has steps against those signs somewhere on a grid, the constrained
    fit none."""
    rng = np.random.default_rng(3)
    x = np.stack([rng.uniform(-0.05, 0.064, 6000), rng.uniform(0.9, 1.1, 6000),
                  rng.uniform(-0.05, 0.064, 6000), rng.uniform(0.9, 1.1, 6000)], axis=1)
    y = 2.0 * x[:, 2] - 0.5 * (x[:, 3] - 1) + rng.normal(0, 0.05, len(x))
    d = np.linspace(-0.05, 0.064, 300)
    grid = np.stack([np.zeros_like(d), np.ones_like(d), d, np.ones_like(d)], axis=1)
    a = np.linspace(0.9, 1.1, 300)
    grid_a = np.stack([np.zeros_like(a), np.ones_like(a), np.zeros_like(a), a], axis=1)

    def worst(model) -> tuple[float, float]:  # largest step against the sign, δ_t and a_{t−1}
        return (float(-np.min(np.diff(model.predict(grid)))),
                float(np.max(np.diff(model.predict(grid_a)))))

    free = worst(D.fit(x, y, min_data_in_leaf=5))
    mono = worst(D.fit(x, y, min_data_in_leaf=5, monotone=(1, -1, 1, -1)))
    assert max(free) > 0.005
    assert max(mono) <= 1e-12
    with pytest.raises(ConfigError, match="entries"):
        D.fit(x, y, monotone=(1, -1))
    np.testing.assert_array_equal(D.fit(x, y, monotone=(0, 0, 0, 0)).predict(x),
                                  D.fit(x, y).predict(x))  # all 0: unconstrained


def test_default_constraints_make_the_output_monotone_along_the_steady_diagonal() -> None:
    """Noisy labels of the teacher's law at its crossing (y ≈ 13.2·δ_t − 7.1·δ_{t−1} −
    4.0·(a_{t−1} − 1), docs/hostcc-cc.md): with the teacher's own signs (δ_{t−1}: −1) the
    student can step down along δ_{t−1} = δ_t (a spurious crossing a large incast gets
    caught on); with δ_{t−1}: +1 it cannot."""
    rng = np.random.default_rng(5)
    n = 20000
    d0 = rng.uniform(-0.1, 0.064, n)
    d1 = d0 + rng.normal(0, 0.01, n)
    a1, a2 = rng.uniform(0.95, 1.05, n), rng.uniform(0.95, 1.05, n)
    x = np.stack([d1, a2, d0, a1], axis=1)
    y = 13.2 * d0 - 7.1 * d1 - 4.0 * (a1 - 1) - 0.9 * (a2 - 1) + rng.normal(0, 0.03, n)
    d = np.linspace(-0.1, 0.064, 2000)
    diag = np.stack([d, np.ones_like(d), d, np.ones_like(d)], axis=1)

    def worst_drop(monotone: tuple[int, ...]) -> float:
        return float(-np.min(np.diff(D.fit(x, y, min_data_in_leaf=20,
                                           monotone=monotone).predict(diag))))

    assert worst_drop((-1, -1, 1, -1)) > 0.002
    assert worst_drop((1, -1, 1, -1)) <= 1e-12
    assert not any(D.DistillConfig().monotone)  # free by default
