"""Closed-loop output-offset calibration of a distilled RL-CC student
(p4cc.learn.rlcc_distill_calib): the offset, the search, its effect on the crossing and on
the simulated queue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lightgbm")

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import MlpPolicy, data_dir, load_policy
from p4cc.learn import rlcc_distill as D
from p4cc.learn import rlcc_distill_calib as C

SLOPE, CROSSING = 6.0, 0.004


def linear_teacher(crossing: float = CROSSING) -> MlpPolicy:
    """y = SLOPE·(δ_t − crossing) over the window (δ_{t−1}, a_{t−2}, δ_t, a_{t−1})."""
    w = np.array([[0.0, 0.0, SLOPE, 0.0]])
    return MlpPolicy([(w, np.array([-SLOPE * crossing]))], window=2, output="bounded")


def steady_rows(d: np.ndarray) -> np.ndarray:
    return np.stack([d, np.ones_like(d), d, np.ones_like(d)], axis=1)


def biased_student(bias: float) -> dict:
    """10 trees of depth 4 fitted to the linear teacher's output + ``bias`` on δ ∈
    [−0.05, 0.064] (a = 1): its crossing sits bias/SLOPE below the teacher's."""
    d = np.random.default_rng(0).uniform(-0.05, 0.064, 4000)
    x = steady_rows(d)
    return D.to_p4cc_trees(D.fit(x, D.label(linear_teacher(), x) + bias), window=2)


GRID = np.linspace(-0.05, 0.064, 11401)


def crossing_of(path: Path, grid: np.ndarray = GRID) -> float:
    """The first δ (a = 1) at which the policy's output is ≥ 0 (its action ≥ 1)."""
    pol = load_policy(path)
    y = pol.predict(steady_rows(grid)) if hasattr(pol, "predict") else \
        D.label(pol, steady_rows(grid))  # type: ignore[arg-type]
    return float(grid[np.argmax(y >= 0)])


def test_with_offset_adds_a_constant_to_the_output(tmp_path: Path) -> None:
    doc = biased_student(0.0)
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "b.json").write_text(json.dumps(C.with_offset(doc, -0.03)))
    x = steady_rows(np.linspace(-0.05, 0.06, 50))
    np.testing.assert_allclose(load_policy(tmp_path / "b.json").predict(x),  # type: ignore
                               load_policy(tmp_path / "a.json").predict(x) - 0.03,  # type: ignore
                               atol=1e-12)
    assert doc["base"] == 0.0  # the input is not modified
    with pytest.raises(ConfigError, match="p4cc-trees"):
        C.with_offset({"format": "catboost"}, 0.1)


def toy_queue(teacher_path: Path, n_scale: float = 8.0) -> C.QueueFn:
    """The fixed-point queue of a policy whose closed loop sits at its crossing δ_c:
    (β − 1 + (target − δ_c)·√N) base RTTs (8 µs) -- the relation in the module docstring."""
    def ql(path: Path, n: int) -> float:
        d_c = CROSSING if path == teacher_path else crossing_of(path)
        return n_scale * (0.5 + (0.064 - d_c) * np.sqrt(n))
    return ql


def test_calibration_moves_the_students_crossing_to_the_teachers(tmp_path: Path) -> None:
    doc = biased_student(0.06)  # crossing 0.01 below the teacher's
    before = tmp_path / "before.json"
    before.write_text(json.dumps(doc))
    assert abs(crossing_of(before) - CROSSING) > 0.008
    teacher = tmp_path / "teacher.npz"
    cal = C.calibrate_offset(doc, teacher, (16, 256), toy_queue(teacher), tmp_path / "w",
                             span=0.1, steps=8)
    after = tmp_path / "after.json"
    after.write_text(json.dumps(C.with_offset(doc, cal.offset)))
    assert abs(crossing_of(after) - CROSSING) < 0.0015
    assert cal.offset == pytest.approx(-0.06, abs=0.012)
    assert cal.max_abs_error < 0.02 < max(abs(e) for e in cal.trials[0][1].values())
    assert cal.trials[0][0] == 0.0 and len(cal.trials) == 2 + 8
    assert set(cal.summary()["teacher_ql_us"]) == {"16", "256"}


def test_calibration_keeps_the_student_when_no_offset_helps(tmp_path: Path) -> None:
    doc = biased_student(0.0)

    def ql(path: Path, n: int) -> float:  # the student is 10 % too high at any offset
        return 1.0 if path.suffix == ".npz" else 1.1

    cal = C.calibrate_offset(doc, tmp_path / "t.npz", (8,), ql, tmp_path / "w", steps=5)
    assert cal.offset == 0.0 and len(cal.trials) == 2  # c = 0 and −span: no sign change
    assert cal.max_abs_error == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="validation"):
        C.calibrate_offset(doc, tmp_path / "t.npz", (), ql, tmp_path / "w")


@pytest.mark.slow
def test_calibration_on_the_simulator_brings_the_queue_to_the_teachers(tmp_path: Path) -> None:
    """Closed loop (8→1 on the paper-scale simulator, 2000 base RTTs): a student of the
    shipped teacher whose output is 0.05 too high holds a longer queue than the teacher
    (+7 %); after the calibration its queue is within 2 % of the teacher's."""
    teacher = data_dir() / "rlcc-adpg-mlp-long.npz"
    x, y = D.gather(load_policy(teacher), episodes=1, rtts=512,  # type: ignore[arg-type]
                    scenario_sets=((2, 4, 8),), noise=0.005)
    doc = D.to_p4cc_trees(D.fit(x, y + 0.05, min_data_in_leaf=100), window=2)
    queue = C.many_to_one_queue(rtts=2000)
    cal = C.calibrate_offset(doc, teacher, (8,), queue, tmp_path / "w", span=0.1, steps=4)
    assert cal.trials[0][0] == 0.0 and cal.trials[0][1][8] > 0.04
    assert abs(cal.trials[-1][1][8]) < abs(cal.trials[0][1][8])
    assert cal.max_abs_error < 0.02 and -0.1 < cal.offset < 0
    out = tmp_path / "s.json"
    out.write_text(json.dumps(C.with_offset(doc, cal.offset)))
    assert queue(out, 8) / cal.teacher_ql[8] - 1 == pytest.approx(
        dict(cal.trials)[cal.offset][8], abs=1e-12)  # the file written decides the same


def test_config_checks_the_calibration_fields() -> None:
    with pytest.raises(ConfigError, match="calibrate_span"):
        D.DistillConfig(calibrate_span=0.0)
    with pytest.raises(ConfigError, match="calibrate_ns"):
        D.DistillConfig(calibrate_ns=(0,))
    with pytest.raises(ConfigError, match="calibrate_ns"):
        D.DistillConfig(calibrate_ns=())
    assert not D.DistillConfig().calibrate  # off by default
    assert D.DistillConfig().calibrate_ns == C.VALIDATION_NS
    assert not set(C.VALIDATION_NS) & {8, 32, 128, 512, 1024, 2048}  # not the Table-2 N


def test_distill_applies_the_calibrated_offset_to_the_exported_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """distill(teacher_file=…) with calibrate_ns: the offset chosen on the (here: stand-in)
    closed loop is the exported file's base and is recorded with its trials."""
    teacher_file = tmp_path / "teacher.npz"

    def fake_queue(rtts: int) -> C.QueueFn:
        def ql(path: Path, n: int) -> float:  # the queue is right at an offset of +0.01
            if path == teacher_file:
                return 10.0
            return 10.0 * (1 + 5 * (json.loads(path.read_text())["base"] - 0.01))
        return ql

    monkeypatch.setattr(C, "many_to_one_queue", fake_queue)
    cfg = D.DistillConfig(scenario_sets=((2, 4),), episodes=1, rtts=128, min_data_in_leaf=20,
                          calibrate=True, calibrate_ns=(16,), calibrate_steps=6)
    out = tmp_path / "student.json"
    _, stats = D.distill(linear_teacher(0.002), out, cfg, teacher_file=teacher_file)
    assert stats["offset"] == pytest.approx(0.01, abs=0.02 / 2 ** 6)
    assert json.loads(out.read_text())["base"] == stats["offset"]
    assert len(stats["calibration"]["trials"]) == 2 + 6
    _, plain = D.distill(linear_teacher(0.002), out, cfg)  # no teacher file: no calibration
    assert plain["offset"] == 0.0 and "calibration" not in plain


def test_distill_cli_set_and_help_config_address_the_distill_config() -> None:
    pytest.importorskip("torch")
    teacher = str(data_dir() / "rlcc-adpg-mlp-long.npz")
    base = [sys.executable, "-m", "p4cc", "train", "rlcc", "--distill", teacher]
    out = subprocess.run([*base, "--set", "calibrate=true", "--set", "calibrate_ns=16,64",
                          "--set", "linear_leaves=false", "--set", "monotone=1,-1,1,-1",
                          "--help-config"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "calibrate = True" in out and "calibrate_ns = (16, 64)" in out
    assert "monotone = (1, -1, 1, -1)" in out
    bad = subprocess.run([*base, "--set", "horizon=3", "--help-config"],  # an ADPG field
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "horizon" in bad.stderr
