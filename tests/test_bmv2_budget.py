"""The bmv2 backend's machine budget (p4cc.experiment.bmv2.budget), without BMv2."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4cc.errors import ConfigError
from p4cc.experiment.bmv2 import budget
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import load_spec, parse_spec
from p4cc.paths import DATA_DIR, REPO_ROOT

CAL = budget.Calibration(switch_us_per_pkt=100.0, switch_sat_pps=10_000.0,
                         host_us_per_pkt=60.0, cores=2, build="test", measured_unix=1.0)


def _check(doc: dict[str, object], cal: budget.Calibration = CAL) -> budget.Demand:
    spec = parse_spec(doc)
    topo = spec.topo()
    sched, _ = build_schedule(spec, spec.seeds[0], topo)
    return budget.check(topo, sched, float(spec.duration_s), float(spec.interval_s), cal)


BASE = {"name": "b", "backend": "bmv2", "topology": "star,hosts=4", "scale": "testbed",
        "duration_s": 10, "seed": 1, "interval_s": 0.25, "agents": ["secn1"],
        "host_cc": "dcqcn"}


def test_light_spec_fits() -> None:
    d = _check({**BASE, "workloads": [{"type": "websearch", "load": 0.3,
                                       "size_scale": "bdp"}]})
    assert 0 < d.cpu(CAL) < budget.UTIL_CAP * CAL.cores


def test_too_many_hosts_at_too_high_a_rate_is_refused_with_what_to_change() -> None:
    doc = {**BASE, "topology": "star,hosts=10", "scale": "testbed-fast",
           "workloads": [{"type": "websearch", "load": 1.0, "size_scale": "bdp"}]}
    with pytest.raises(ConfigError) as info:
        _check(doc)
    msg = str(info.value)
    assert "packets/s" in msg or "CPU-s/s" in msg
    assert "load" in msg and "--backend sim" in msg


def test_demand_is_capped_by_the_links() -> None:
    # closed-loop storage asks for far more than one storage node's link carries
    spec = load_spec(REPO_ROOT / "examples" / "acc_storage.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, 1, topo)
    d = budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s))
    nic = topo.scale.pps(topo.scale.link_rate_bps)
    assert all(v <= 2 * nic + 1e-6 for v in d.host_pps.values())


def test_a_closed_loop_spec_is_told_to_lower_its_io_depth() -> None:
    # acc_storage.yaml's concurrency is its io_depth (16), not a load: the refusal says so
    spec = load_spec(REPO_ROOT / "examples" / "acc_storage.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, 1, topo)
    fast_switch = budget.Calibration(switch_us_per_pkt=1.0, switch_sat_pps=1e6,
                                     host_us_per_pkt=60.0, cores=2, build="test",
                                     measured_unix=1.0)
    for cal, why in ((CAL, "switch s1 would forward"), (fast_switch, "senders are the largest")):
        with pytest.raises(ConfigError, match=why) as info:
            budget.check(topo, sched, float(spec.duration_s), float(spec.interval_s), cal)
        assert "io_depth" in str(info.value)
    # an open-loop spec is not told about io_depth
    with pytest.raises(ConfigError) as info:
        _check({**BASE, "topology": "star,hosts=10", "scale": "testbed-fast",
                "workloads": [{"type": "websearch", "load": 1.0, "size_scale": "bdp"}]})
    assert "io_depth" not in str(info.value)
    # the BMv2 variant (io_depth 3) passes, and its chained requests are counted
    spec = load_spec(REPO_ROOT / "examples" / "acc_storage_bmv2.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, 1, topo)
    d = budget.check(topo, sched, float(spec.duration_s), float(spec.interval_s), CAL)
    assert d.chained_flows == int((sched["after"] >= 0).sum()) > 0


def test_default_experiment_fits_the_reference_budget() -> None:
    spec = load_spec(DATA_DIR / "testbed.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, spec.seeds[0], topo)
    budget.check(topo, sched, float(spec.duration_s), float(spec.interval_s),
                 budget.UNCALIBRATED)


def test_calibration_cache_roundtrip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))
    assert budget.load("build-x") == budget.UNCALIBRATED
    cal = budget.Calibration(90.0, 20_000.0, 50.0, 2, "build-x", 123.0, 1.5)
    path = budget.save(cal)
    assert path.parent == tmp_path and budget.load("build-x") == cal
    assert budget.load("another build") == budget.UNCALIBRATED


def test_measured_use_and_the_comparison_with_the_prediction() -> None:
    cpu = [{"t_s": 0.0, "switch": "s1", "cpu_s": 1.0}, {"t_s": 10.0, "switch": "s1", "cpu_s": 4.0},
           {"t_s": 0.0, "switch": "s2", "cpu_s": 0.5}, {"t_s": 10.0, "switch": "s2", "cpu_s": 2.5}]
    hosts = [{"host": "h1", "cpu_run_s": 3.0}, {"host": "h2", "cpu_run_s": float("nan")}]
    used = budget.measured(cpu, hosts, runner_cpu_s=1.0, duration_s=10.0)
    assert used == {"switch_cpu_s": 5.0, "host_cpu_s": 3.0, "runner_cpu_s": 1.0,
                    "cpu_s_per_s": 0.9}
    spec = load_spec(DATA_DIR / "testbed.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, spec.seeds[0], topo)
    cmp = budget.comparison(topo, sched, float(spec.duration_s), float(spec.interval_s), used,
                            budget.UNCALIBRATED)
    assert cmp["predicted_cpu_s_per_s"] > 0
    assert cmp["used_over_predicted"] == pytest.approx(0.9 / cmp["predicted_cpu_s_per_s"])
    assert cmp["calibration"]["calibrated"] is False


BMV2_EXAMPLES = sorted(p for p in (REPO_ROOT / "examples").glob("*.yaml")
                       if load_spec(p).backend == "bmv2")


def test_the_bmv2_examples_are_the_expected_ones() -> None:
    # a spec that says `backend: bmv2` must run on the 2-core reference machine; the ones
    # it refuses (acc_incast, rlcc_many_to_one, acc_storage at IO depth 16) say `sim`
    assert [p.stem for p in BMV2_EXAMPLES] == [
        "acc_e2e", "acc_storage_bmv2", "rlcc_bmv2_4to1", "rlcc_bmv2_8to1", "testbed",
        "testbed_60"]


@pytest.mark.parametrize("path", BMV2_EXAMPLES, ids=lambda p: p.stem)
def test_every_bmv2_example_fits_the_reference_budget_on_every_seed(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.experiment.bmv2.limits import check_budget

    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))  # no calibration: the reference
    assert budget.load() == budget.UNCALIBRATED
    check_budget(load_spec(path))
