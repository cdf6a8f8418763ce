"""``p4cc bench testbed`` on the simulator: per-run records carry the figures issue 10
compares between backends (mice p99, the bottleneck's utilisation, queue and drops)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from p4cc.bench import testbed
from p4cc.experiment.default import DEFAULT_SPEC
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import load_spec


def test_default_spec_leaves_time_to_drain() -> None:
    spec = load_spec(DEFAULT_SPEC)
    last_window_end = max(t1 for w in spec.workloads for _t0, t1 in w.windows)
    assert spec.duration_s - last_window_end >= 10.0
    sched, _events = build_schedule(spec, seed=1)
    assert len(sched) > 40
    assert sched["start_s"].max() < last_window_end


@pytest.fixture
def short_spec(tmp_path: Path) -> Path:
    raw = yaml.safe_load(Path(DEFAULT_SPEC).read_text())
    raw.update(agents=["secn1"], duration_s=12, backend="sim")
    for w in raw["workloads"]:
        w["windows"] = [[0, 8]]
    p = tmp_path / "testbed.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_records_carry_the_bottleneck_figures(short_spec: Path, tmp_path: Path) -> None:
    recs = list(testbed.run(["--spec", str(short_spec), "--backend", "sim", "--seeds", "1",
                             "--out", str(tmp_path / "runs")]))
    run, total = recs[0], recs[-1]
    json.dumps(recs)  # one JSON object per line
    assert total["case"] == "testbed" and total["runs"] == 1
    # the simulator has no fidelity verdict: neither the run nor the total claims one
    assert run["faithful"] is None and total["faithful_runs"] is None
    assert run["case"] == "testbed_run" and run["completed"] == run["flows"] > 0
    # the incast and WebSearch flows all go to h4, behind leaf2's port toward it
    assert run["bottleneck"] == "leaf2:2"
    assert 0.05 < run["bottleneck_util"] <= 1.0
    assert run["bottleneck_qlen_avg_bytes"] > 0
    assert run["bottleneck_drops_pkts"] >= 0
    assert run["mice_p99_fct_s"] > 0


def test_faithful_runs_counts_verdicts_and_is_none_without_any() -> None:
    assert testbed._faithful_runs([{"faithful": None}, {"faithful": None}]) is None
    assert testbed._faithful_runs([{"faithful": True}, {"faithful": False}]) == 1
    assert testbed._faithful_runs([{"faithful": False}]) == 0
