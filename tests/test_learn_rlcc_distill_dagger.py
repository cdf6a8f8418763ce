"""DAgger for the distilled RL-CC student (p4cc.learn.rlcc_distill_dagger): the mixture
policy, the aggregation step (student-visited states labelled by the teacher), the loop,
and the opt-in ``DistillConfig.dagger_*`` fields."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("lightgbm")

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import MlpPolicy
from p4cc.learn import rlcc_distill as D
from p4cc.learn import rlcc_distill_dagger as G


def linear(crossing: float, slope: float = 6.0) -> MlpPolicy:
    """y = slope·(δ_t − crossing) over the window (δ_{t−1}, a_{t−2}, δ_t, a_{t−1})."""
    w = np.array([[0.0, 0.0, slope, 0.0]])
    return MlpPolicy([(w, np.array([-slope * crossing]))], window=2, output="bounded")


def window_state(x: np.ndarray) -> tuple[np.ndarray, ...]:
    return (x[:, :2].reshape(len(x), 1, 2),)


def test_mixture_takes_the_teachers_action_with_probability_beta() -> None:
    teacher, student = linear(0.0), linear(0.03)
    rng = np.random.default_rng(0)
    x = np.stack([rng.uniform(-0.05, 0.06, 4000), np.ones(4000),
                  rng.uniform(-0.05, 0.06, 4000), np.ones(4000)], axis=1)
    obs, st = x[:, 2:], window_state(x)
    a_t, a_s = teacher.act(obs, st)[0], student.act(obs, st)[0]
    assert np.all(a_t != a_s)
    np.testing.assert_array_equal(G.Mixture(teacher, student, 0.0, rng).act(obs, st)[0], a_s)
    np.testing.assert_array_equal(G.Mixture(teacher, student, 1.0, rng).act(obs, st)[0], a_t)
    mixed, new = G.Mixture(teacher, student, 0.3, rng).act(obs, st)
    assert np.all((mixed == a_t) | (mixed == a_s))
    assert np.mean(mixed == a_t) == pytest.approx(0.3, abs=0.03)
    np.testing.assert_array_equal(new[0], teacher.act(obs, st)[1][0])  # same window
    with pytest.raises(ConfigError, match="beta"):
        G.Mixture(teacher, student, 1.5, rng)
    with pytest.raises(ConfigError, match="window"):
        G.Mixture(teacher, MlpPolicy([(np.zeros((1, 2)), np.zeros(1))], window=1), 0.0, rng)


def test_round_beta_decays_geometrically() -> None:
    assert [G.round_beta(0.5, i) for i in (1, 2, 3)] == [0.5, 0.25, 0.125]
    assert G.round_beta(0.0, 1) == 0.0  # Ross et al.'s β_i = I(i = 1): the student alone
    with pytest.raises(ConfigError):
        G.round_beta(0.5, 0)


def test_aggregation_labels_the_students_states_with_the_teachers_outputs() -> None:
    """A student whose closed loop sits elsewhere (crossing −0.2 vs the teacher's 0.0: it
    holds a larger queue, δ lower): its rollout visits other states than the teacher's,
    and the aggregated rows carry the teacher's output there, not the student's."""
    teacher, student = linear(0.0), linear(-0.2)
    x_t, y_t = D.gather(teacher, episodes=1, rtts=256, scenario_sets=((4,),))
    x_s, _ = D.gather(teacher, episodes=1, rtts=256, scenario_sets=((4,),),
                      actor=G.Mixture(teacher, student, 0.0, np.random.default_rng(1)))
    late_t, late_s = x_t[len(x_t) // 2:, 2], x_s[len(x_s) // 2:, 2]  # δ_t, second half
    assert np.median(late_s) < np.median(late_t) - 0.5
    data = G.Aggregate(x_t, y_t, np.ones(len(y_t)), np.zeros(len(y_t), bool),
                       np.zeros(len(y_t), dtype=np.int64))
    G.aggregate(data, x_s, lambda xn: D.label(teacher, xn), 2.5,
                np.random.default_rng(2), rnd=1)
    new = data.round == 1
    assert new.sum() == len(x_s) and len(data.y) == len(y_t) + len(x_s)
    np.testing.assert_array_equal(data.x[new], x_s)
    np.testing.assert_allclose(data.y[new], D.label(teacher, x_s), atol=1e-12)
    assert np.mean(np.abs(data.y[new] - D.label(student, x_s))) > 0.3  # not the student's
    assert np.all(data.w[new] == 2.5) and np.all(data.w[~new] == 1.0)
    assert 0.1 < data.test[new].mean() < 0.3  # a held-out share of the new rows
    with pytest.raises(ConfigError, match="length"):
        data.add(x_s, data.y[:3], 1.0, np.zeros(len(x_s), bool), 2)


def test_run_refits_once_per_round_on_the_growing_data() -> None:
    teacher = linear(0.0)
    x0 = np.zeros((10, 4))
    data = G.Aggregate(x0, np.zeros(10), np.ones(10), np.zeros(10, bool),
                       np.zeros(10, dtype=np.int64))
    fits: list[int] = []
    betas: list[float] = []

    def refit(d: G.Aggregate) -> MlpPolicy:
        fits.append(len(d.y))
        return linear(0.01 * len(fits))

    def visit(actor: G.Mixture, i: int) -> np.ndarray:
        betas.append(actor.beta)
        assert actor.student.act(np.zeros((1, 2)), window_state(np.zeros((1, 4))))[0][0] \
            == linear(0.01 * len(fits)).act(np.zeros((1, 2)), window_state(np.zeros((1, 4))))[0][0]
        return np.full((5 * i, 4), 0.02)

    last = G.run(data, 3, 0.5, refit, visit, lambda xn: D.label(teacher, xn),
                 lambda xn: np.full(len(xn), 2.0), np.random.default_rng(0), teacher)
    assert fits == [10, 15, 25, 40] and betas == [0.5, 0.25, 0.125]
    assert [h["added"] for h in data.history] == [5, 10, 15]
    assert isinstance(last, MlpPolicy) and np.all(data.w[10:] == 2.0)
    G.run(data, 0, 0.5, refit, visit, lambda xn: xn[:, 0], lambda xn: xn[:, 0],
          np.random.default_rng(0), teacher)
    assert fits[-1] == 40 and len(betas) == 3  # 0 rounds: one fit, no rollout


def test_dagger_is_opt_in_and_adds_the_students_states(tmp_path: Path) -> None:
    teacher = linear(0.002)
    base = dict(scenario_sets=((2, 4),), episodes=1, rtts=200, min_data_in_leaf=20)
    off = tmp_path / "off.json"
    _, s_off = D.distill(teacher, off, D.DistillConfig(**base))  # type: ignore[arg-type]
    ignored = tmp_path / "ignored.json"  # dagger_* without rounds: the default student
    D.distill(teacher, ignored, D.DistillConfig(**base, dagger_beta=0.5,  # type: ignore[arg-type]
                                                dagger_weight=3.0, dagger_large=(80,)))
    assert off.read_text() == ignored.read_text() and "dagger" not in s_off
    on = tmp_path / "on.json"
    _, s_on = D.distill(teacher, on, D.DistillConfig(  # type: ignore[arg-type]
        **base, dagger_rounds=2, dagger_large=(80,), large_rtts=100, large_keep=0.5))
    hist = s_on["dagger"]
    assert [h["round"] for h in hist] == [1, 2] and all(h["added"] > 0 for h in hist)
    assert hist[-1]["states"] == s_on["states"] == s_off["states"] + sum(
        h["added"] for h in hist)
    assert json.loads(on.read_text())["format"] == "p4cc-trees"
    assert s_on["action_mae_near_crossing"] < 0.01


def test_config_checks_the_dagger_fields() -> None:
    assert D.DistillConfig().dagger_rounds == 0  # off by default
    for bad in ({"dagger_rounds": -1}, {"dagger_beta": 1.5}, {"dagger_weight": 0.0},
                {"dagger_large": (0,)}):
        with pytest.raises(ConfigError, match="dagger"):
            D.DistillConfig(**bad)  # type: ignore[arg-type]
    assert D.DistillConfig(dagger_large=("128", "512")).dagger_large == (128, 512)  # type: ignore[arg-type]
