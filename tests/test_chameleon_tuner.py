"""The greedy tuner's step logic on scripted metric sequences (CHAMELEON poster §2.2)."""

from __future__ import annotations

import pytest

from p4cc.chameleon.tuner import GreedyTuner, Knob, TunerConfig
from p4cc.errors import ConfigError


def tuner(n: int = 2, **kw: object) -> GreedyTuner:
    cfg = TunerConfig(**{"beta": 0.05, "patience": 2, "lam": 0.5, **kw})  # type: ignore[arg-type]
    return GreedyTuner([Knob(f"p{i}", 10.0, 0.0, 100.0, 4.0) for i in range(n)], cfg)


def actions(t: GreedyTuner) -> list[str]:
    return [e.action for e in t.history]


def test_keep_direction_while_gain_at_least_beta_and_step_shrinks() -> None:
    t = tuner()
    assert t.step(1.0) == {"p0": 14.0, "p1": 10.0}  # baseline, then v + s
    assert t.step(1.1) == {"p0": 16.0, "p1": 10.0}  # +10 % >= β: keep, s = 4·0.5
    assert t.step(1.2) == {"p0": 17.0, "p1": 10.0}  # keep again, s = 1
    assert actions(t) == ["baseline", "keep", "keep"]
    assert t.param == "p0"


def test_reverse_on_worse_then_keep_the_new_direction() -> None:
    t = tuner()
    t.step(1.0)                 # baseline p0=10 -> 14
    assert t.step(0.9)["p0"] == 12.0  # worse: reverse, v - s with s = 2
    assert t.step(1.0)["p0"] == 11.0  # +11 % >= β: keep going down, s = 1
    assert actions(t) == ["baseline", "reverse", "keep"]


def test_move_on_when_gains_stall_and_keep_the_best_value() -> None:
    t = tuner()
    t.step(1.0)            # baseline p0=10 -> 14
    t.step(1.2)            # keep (p0=14 earned 1.2, the best) -> 16
    t.step(1.19)           # worse at 16: reverse -> 15 (1 round without a gain)
    v = t.step(1.195)      # slight at 15 (2): move on, p0 back to its best, 14
    assert v == {"p0": 14.0, "p1": 10.0}
    assert t.param == "p1"
    assert actions(t)[-2:] == ["slight", "next"]
    assert t.step(1.2)["p1"] == 14.0  # p1's baseline round, then its first move


def test_worse_rounds_count_toward_patience() -> None:
    t = tuner(patience=2)
    t.step(1.0)
    t.step(0.9)   # reverse (1 round without a gain)
    t.step(0.85)  # reverse again (2): move on
    assert t.param == "p1"


def test_stop_when_all_traversed() -> None:
    t = tuner(n=2, patience=1)
    t.step(1.0)
    t.step(1.0)          # slight -> next parameter
    t.step(1.0)          # p1 baseline
    final = t.step(1.0)  # slight -> done: the final setting still goes out
    assert t.done and t.stop_reason == "every parameter traversed"
    assert final == {"p0": 10.0, "p1": 10.0}
    assert t.step(2.0) is None  # stopped: nothing more
    assert t.rounds == 4


def test_stop_at_target() -> None:
    t = tuner(target=0.95)
    t.step(0.5)
    assert t.step(0.96) is None
    assert t.done and "target" in t.stop_reason
    assert actions(t)[-1] == "target"


def test_clamped_at_the_range_and_reversed_when_stuck() -> None:
    t = GreedyTuner([Knob("p", 99.0, 0.0, 100.0, 4.0)], TunerConfig(beta=0.05, lam=1.0))
    assert t.step(1.0) == {"p": 100.0}  # clamped
    assert t.step(1.2) == {"p": 96.0}   # keep, but cannot go up: reversed


def test_log_knob_steps_by_factors_of_two() -> None:
    t = GreedyTuner([Knob("rate", 10.0, 0.0, 20.0, 1.0, log=True)], TunerConfig(lam=0.95))
    assert t.values() == {"rate": 1024.0}
    assert t.step(1.0) == {"rate": 2048.0}


def test_max_rounds_per_param() -> None:
    t = tuner(n=2, max_rounds_per_param=3, patience=10)
    for m in (1.0, 1.1, 1.21, 1.34):
        t.step(m)
    assert t.param == "p1"


def test_bad_config() -> None:
    with pytest.raises(ConfigError, match="λ"):
        TunerConfig(lam=0.0)
    with pytest.raises(ConfigError, match="at least one"):
        GreedyTuner([])
