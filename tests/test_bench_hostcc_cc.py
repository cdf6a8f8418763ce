"""`p4cc bench hostcc`'s CC-core cases (p4cc.bench.hostcc_cc): the host RL-CC
controller's per-sample case reports µs per sample and per decision."""

from __future__ import annotations

import pytest

from p4cc.bench import hostcc_cc


def test_the_host_rlcc_case_times_samples_and_decisions() -> None:
    row = hostcc_cc._rlcc_host_case("pi", 0.02)
    assert row["case"] == "rlcc_host_pi_sample" and row["flows"] == 1
    assert 0 < row["decisions_per_sample"] <= 1 and row["samples"] >= 3
    assert row["us_per_decision"] == pytest.approx(
        row["us_per_sample"] / row["decisions_per_sample"])


def test_cases_include_the_default_policy_on_the_host() -> None:
    names = [r["case"] for r in hostcc_cc.cases(sizes=(1,), min_time_s=0.0)]
    assert "rlcc_host_adpg-mlp-long_sample" in names and "rlcc_host_pi_sample" in names
    assert "dcqcn_decision" in names
