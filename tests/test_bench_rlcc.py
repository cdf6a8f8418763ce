"""`p4cc bench rlcc`: registered; decision cases time every policy at each N, training
cases report agent-steps per second."""

from __future__ import annotations

import json

import pytest

from p4cc.bench import rlcc as bench
from p4cc.cli import BENCHMARKS, main


def test_registered_and_decision_cases_have_units(capsys: pytest.CaptureFixture[str]) -> None:
    assert BENCHMARKS["rlcc"] == "p4cc.bench.rlcc:run"
    rc = main(["bench", "rlcc", "--no-train", "--reps", "20", "--reps-large", "3",
               "--ns", "1,64", "--policies", "adpg-mlp,adpg-trees-int8"])
    assert rc == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["case"] for r in rows] == ["decision_adpg-mlp_n1", "decision_adpg-mlp_n64",
                                         "decision_adpg-trees-int8_n1",
                                         "decision_adpg-trees-int8_n64"]
    for r in rows:
        assert r["median_us_per_call"] > 0 and r["p99_us_per_call"] >= r["median_us_per_call"]
        assert r["us_per_decision"] == pytest.approx(r["median_us_per_call"] / r["flows"],
                                                     rel=1e-2, abs=1e-4)


def test_training_case_counts_agent_steps() -> None:
    pytest.importorskip("torch")
    rec = bench.training("mlp", 1)
    assert rec["case"] == "train_mlp" and rec["agents"] == 42
    # one rollout of 256 base RTTs, a decision per 2 base RTTs per flow: ~128 per agent
    assert 0.5 * 42 * 128 < rec["agent_steps"] <= 42 * 128
    assert rec["agent_steps_per_s"] > 0
