"""The objective's noise under a fixed setting (p4cc.experiment.chameleon_noise): the
figures that justify a tuner's β (chameleon_eval_bmv2.NOISE_BETA) come from one
command, and they are computed as the tuner computes its gain."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from p4cc.chameleon import space
from p4cc.errors import ConfigError
from p4cc.experiment import chameleon_noise
from p4cc.experiment.chameleon import default_settings
from p4cc.scale import get_scale

TOPO = "leafspine,spines=1,leaves=2,hosts=2"


def test_noise_stats_are_the_tuners_gains() -> None:
    s = chameleon_noise.noise_stats([2.0, 3.0, 1.5, 1.5, 3.0])
    # gains (m_i - m_{i-1}) / m_{i-1}: +0.5, -0.5, 0, +1.0
    assert s["rounds"] == 5 and s["gain_pairs"] == 4
    assert s["mean"] == pytest.approx(2.2)
    assert s["sd"] == pytest.approx(np.std([2, 3, 1.5, 1.5, 3], ddof=1))
    assert s["cv"] == pytest.approx(s["sd"] / 2.2)
    assert s["gain_mean"] == pytest.approx(0.25)
    assert s["gain_sd"] == pytest.approx(np.std([0.5, -0.5, 0.0, 1.0], ddof=1))
    assert s["p_worse"] == pytest.approx(0.25)  # one fall in four: a chance reversal
    assert s["p_gain_ge_0.01"] == s["p_gain_ge_0.2"] == pytest.approx(0.5)


def test_noise_stats_skip_undefined_gains_and_refuse_too_few_rounds() -> None:
    s = chameleon_noise.noise_stats([0.0, 1.0, math.nan, 2.0, 2.0])
    # NaN dropped; the pair starting at 0 has no gain: 1 -> 2 (+1.0), 2 -> 2 (0)
    assert s["rounds"] == 4 and s["gain_pairs"] == 2
    assert s["gain_mean"] == pytest.approx(0.5) and s["p_worse"] == 0.0
    with pytest.raises(ValueError, match="at least 3 finite rounds, got 2"):
        chameleon_noise.noise_stats([1.0, math.inf, 2.0])


def test_a_tuning_table_is_not_a_fixed_run(tmp_path: Path) -> None:
    pd.DataFrame({"round": [0, 1], "metric": [0.5, 0.6],
                  "param": ["rai_bps", "rai_bps"]}).to_csv(tmp_path / "chameleon.csv")
    with pytest.raises(ConfigError, match="no 'fixed' rows: not a tune=0 run"):
        chameleon_noise.fixed_rounds(tmp_path)


def test_bad_arguments_are_refused_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="unknown setting 'best'"):
        chameleon_noise.main(["--setting", "best", "--out", str(out)])
    with pytest.raises(ConfigError, match="unknown scale 'nope'"):
        chameleon_noise.main(["--backend", "bmv2", "--scale", "nope", "--out", str(out)])
    with pytest.raises(ConfigError, match="--skip -1: must be >= 0"):
        chameleon_noise.main(["--skip", "-1", "--out", str(out)])
    assert not out.exists()
    with pytest.raises(ConfigError, match="--rounds 3: need at least 4"):
        chameleon_noise.run_seed("sim", TOPO, "default", 1, 20_000, 3, out)


def test_a_fixed_setting_on_the_simulator(tmp_path: Path) -> None:
    """A real sim run through the controller with tune=0: one row per round, the
    setting never moves, and identical rounds on a deterministic simulator give a
    metric without noise (so every chance-gain share is 0)."""
    out = tmp_path / "noise"
    rc = chameleon_noise.main(["--backend", "sim", "--topology", TOPO, "--size", "20000",
                               "--long", "0.0005", "--rounds", "8", "--seeds", "3",
                               "--setting", "expert", "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "noise-expert-seed3.json").read_text())
    assert doc["args"]["setting"] == "expert" and doc["backend"] == "sim"
    rows = chameleon_noise.fixed_rounds(Path(doc["run"]), skip=0)
    assert len(rows) == 8 and doc["rounds"] == 7  # the first round is skipped
    expert = default_settings(get_scale("paper"), "hpcc-ns3", "SECN2")
    for name in space.NAMES:  # every round served the same, expert, setting
        assert np.allclose(rows[name].to_numpy(dtype=float), expert[name]), name
    assert 0 < doc["mean"] <= 1.0
    assert doc["cv"] < 1e-6 and doc["p_gain_ge_0.01"] == 0.0
