"""The machine budget's cost model (issue 10) against what recorded BMv2 runs used.

The recorded numbers are session 7's runs on the 2-core reference machine (2026-11-24,
BMv2 1.15.0 with logging macros, calibration 142.5 µs/packet + 0.062 CPU-s/s idle per
switch): the CPU-s/s each run's ``budget.json`` says it used.  The old model predicted
0.49 for the 4 -> 1 RL-CC run that used 1.96 and admitted it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from p4cc.errors import ConfigError
from p4cc.experiment.bmv2 import budget
from p4cc.experiment.bmv2.budget_demand import _Flow, fluid
from p4cc.experiment.bmv2.limits import run_probe_s
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import ExperimentSpec, load_spec, parse_spec
from p4cc.paths import DATA_DIR, REPO_ROOT

#: the calibration the recorded runs were made under (host fields: the measured defaults)
S7 = budget.Calibration(142.5, 12244.0, 77.8, 2, "s7", 1795530200.56, 1.16, 0.062)


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _default_until_session10() -> dict[str, Any]:
    """The default experiment as it was measured up to session 10: 45 s, flows starting
    in the first 35 s, incast sizes (20-200 KB) not scaled with the BDP."""
    doc = _doc(DATA_DIR / "testbed.yaml")
    doc["duration_s"] = 45
    doc["workloads"] = [{**{k: v for k, v in w.items()
                            if not (w["type"] == "incast" and k == "size_scale")},
                         "windows": [[0, 35]]} for w in doc["workloads"]]
    return doc


def _doc_of(spec: ExperimentSpec) -> dict[str, Any]:
    """A spec as the document it was parsed from (the incast specs below)."""
    w = spec.workloads[0]
    return {"name": spec.name, "backend": "bmv2", "topology": spec.topology,
            "scale": spec.scale, "duration_s": spec.duration_s, "agents": list(spec.agents),
            "host_cc": spec.host_cc,
            "workloads": [{"type": w.type, "tag": w.tag, "receiver": w.params.receiver,
                           "senders": list(w.params.senders),
                           "flows_per_sender": list(w.params.flows_per_sender),
                           "size_bytes": list(w.params.size_bytes), "load": w.params.load}]}


def _predict(spec: ExperimentSpec, seed: int, cal: budget.Calibration = S7) -> float:
    topo = spec.topo()
    sched, _ = build_schedule(spec, seed, topo)
    d = budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s),
                      spec.host_cc, run_probe_s(spec.host_cc, topo, sched))
    return budget.cpu(d, cal)


def _incast(n: int, scale: str, duration_s: float, host_cc: str) -> ExperimentSpec:
    """Session 7's N -> 1 spec (examples/rlcc_bmv2_*.yaml then): incast bursts of N
    2 MB flows at load 1.0 on a star, SECN1."""
    return parse_spec({
        "name": f"rlcc_bmv2_{n}to1", "backend": "bmv2", "topology": f"star,hosts={n + 1}",
        "scale": scale, "duration_s": duration_s, "seeds": [1, 2, 3], "agents": ["secn1"],
        "host_cc": host_cc,
        "workloads": [{"type": "incast", "tag": "n_to_1", "receiver": f"h{n + 1}",
                       "senders": [n, n], "flows_per_sender": [1, 1],
                       "size_bytes": [2_000_000, 2_000_000], "load": 1.0}]})


# (N, scale, duration, host CC, seed, CPU-s/s used): budget.json of the recorded runs
RECORDED = [
    (4, "testbed", 20, "rlcc:adpg-trees", 1, 1.96),
    (4, "testbed", 20, "rlcc:adpg-trees", 2, 1.67),
    (4, "testbed", 20, "dcqcn", 1, 1.73),
    (8, "testbed", 20, "rlcc:adpg-trees", 2, 1.69),
    (8, "testbed-5m", 40, "rlcc:adpg-trees", 3, 1.29),
    (8, "testbed-5m", 40, "dcqcn", 3, 1.09),
]


@pytest.mark.parametrize("n, scale, duration, cc, seed, used", RECORDED)
def test_model_predicts_what_recorded_runs_used(n: int, scale: str, duration: float, cc: str,
                                                seed: int, used: float) -> None:
    pred = _predict(_incast(n, scale, duration, cc), seed)
    assert 0.7 <= used / pred <= 1.4, f"used {used} predicted {pred:.2f}"


@pytest.mark.parametrize("seed, used", [(1, 0.65), (2, 0.74), (3, 0.55)])
def test_model_predicts_the_default_experiments_runs(seed: int, used: float) -> None:
    # def5/bmv2c secn1 seeds 1-3 (p4cc bench testbed, 2026-11-24): all three faithful;
    # flows then started over all 45 s (the spec later stopped them at 35 s)
    doc = _default_until_session10()
    doc["workloads"] = [{**w, "windows": [[0, 45]]} for w in doc["workloads"]]
    pred = _predict(parse_spec(doc), seed)
    assert 0.7 <= used / pred <= 1.4, f"used {used} predicted {pred:.2f}"


@pytest.mark.parametrize("seed, used", [(1, 0.509), (2, 0.565), (3, 0.405)])
def test_model_predicts_the_session11_default_experiment(seed: int, used: float) -> None:
    # the spec since session 11 (125 s, incast scaled with the BDP), SECN1 seeds 1-3 on
    # BMv2 (p4cc bench testbed, 2026-11-25, docs/emulation.md): all faithful; that
    # machine had no calibration cached, so the runs were budgeted with UNCALIBRATED.
    # That machine's per-flow host cost was never measured (the term came in session 37,
    # on another VM: tests/test_bmv2_budget_flows.py), so it is left out here; with the
    # other VM's 5.2 ms per flow seed 3 is predicted 0.61 (0.67x what it used: over,
    # the side that refuses rather than admits)
    cal = replace(budget.UNCALIBRATED, host_send_us_per_flow=0.0, host_recv_us_per_flow=0.0)
    pred = _predict(load_spec(DATA_DIR / "testbed.yaml"), seed, cal)
    assert 0.7 <= used / pred <= 1.4, f"used {used} predicted {pred:.2f}"


def _check(spec: ExperimentSpec, cal: budget.Calibration = S7) -> budget.Demand:
    topo = spec.topo()
    sched, _ = build_schedule(spec, spec.seeds[0], topo)
    return budget.check(topo, sched, float(spec.duration_s), float(spec.interval_s), cal,
                        host_cc=spec.host_cc, probe_s=run_probe_s(spec.host_cc, topo, sched))


def test_rlcc_8to1_at_10mbps_is_refused_naming_the_senders() -> None:
    # ran unfaithful at 1.3-2.1 CPU-s/s (session 7); the old model predicted 0.37-0.49
    spec = _incast(8, "testbed", 20, "rlcc:adpg-trees")
    with pytest.raises(ConfigError) as info:
        _check(spec)
    msg = str(info.value)
    assert "senders are the largest part" in msg
    assert "rlcc:adpg-trees" in msg and "per active flow" in msg
    assert "testbed-5m" in msg and "--backend sim" in msg


def test_default_experiment_and_a_faithful_example_are_admitted() -> None:
    for cal in (S7, budget.UNCALIBRATED):
        d = _check(load_spec(DATA_DIR / "testbed.yaml"), cal)
        assert budget.cpu(d, cal) < budget.UTIL_CAP * cal.cores
    # 8 -> 1 RL-CC at testbed-5m, seed 2: faithful in session 7 (1.36 CPU-s/s used)
    spec = _incast(8, "testbed-5m", 40, "rlcc:adpg-trees")
    _check(parse_spec({**_doc_of(spec), "seeds": [2]}))


def test_switch_bound_spec_names_the_switches() -> None:
    # fixed-rate hosts (no CC work) at full load through 4 switches: the switches dominate
    doc = {"name": "sw", "backend": "bmv2", "topology": "leafspine,spines=2,leaves=2,hosts=2",
           "scale": "testbed", "duration_s": 10, "seed": 1, "interval_s": 0.25,
           "agents": ["secn1"], "host_cc": "fixed:15e6",
           "workloads": [{"type": "bulk", "pairs": [["h1", "h3"], ["h2", "h4"],
                                                    ["h3", "h1"], ["h4", "h2"]]}]}
    try:
        spec = parse_spec(doc)
    except ConfigError as exc:  # the bulk workload's keys are the spec parser's
        pytest.skip(f"bulk workload spec: {exc}")
    with pytest.raises(ConfigError) as info:
        _check(spec)
    assert "switches are the largest part" in str(info.value)


def test_chained_flows_are_not_concurrent_and_lone_flows_draw_no_cnps() -> None:
    cap = {"a": 1000.0, "b": 1000.0, "c": 1000.0}
    chain = [_Flow(0.0, 100.0, "a", "b")] + [_Flow(0.0, 100.0, "a", "b", after=i)
                                              for i in range(9)]
    fluid(chain, cap, 10.0)
    assert sum(f.active_s for f in chain) == pytest.approx(1.0)  # one after the other
    assert sum(f.shared for f in chain) == 0.0  # never two at the destination
    two = [_Flow(0.0, 1000.0, "a", "c"), _Flow(0.0, 1000.0, "b", "c")]
    fluid(two, cap, 10.0)
    assert [f.active_s for f in two] == pytest.approx([2.0, 2.0])  # share c's link
    assert [f.shared for f in two] == pytest.approx([1000.0, 1000.0])
    late = [_Flow(0.0, 100.0, "a", "b"), _Flow(0.0, 100.0, "a", "b", after=0, stop_s=0.05)]
    fluid(late, cap, 10.0)
    assert late[1].active_s == 0.0  # released after its stop_s: skipped


def test_rlcc_costs_more_per_active_flow_than_dcqcn() -> None:
    rl = _predict(_incast(4, "testbed-5m", 40, "rlcc:adpg-trees"), 2)
    dc = _predict(_incast(4, "testbed-5m", 40, "dcqcn"), 2)
    assert rl > dc
    cal = S7
    assert cal.per_cc(cal.host_send_flow_cpu, budget.HOST_SEND_FLOW_CPU, "rlcc:other") == \
        budget.HOST_SEND_FLOW_CPU["rlcc"]


def test_old_cache_files_load_with_the_measured_host_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))
    old = {"switch_us_per_pkt": 142.5, "switch_sat_pps": 12244, "host_us_per_pkt": 77.8,
           "cores": 2, "build": "b", "measured_unix": 1.0, "loadavg": 1.2,
           "switch_idle_cpu": 0.062, "a_field_from_the_future": 1}
    budget.cache_path("b").parent.mkdir(parents=True, exist_ok=True)
    budget.cache_path("b").write_text(json.dumps(old))
    cal = budget.load("b")
    assert cal.calibrated and cal.switch_us_per_pkt == 142.5
    assert cal.host_send_flow_cpu == budget.HOST_SEND_FLOW_CPU
    assert cal.host_rate_change_us == budget.HOST_RATE_CHANGE_US
    new = budget.Calibration(100.0, 9000.0, 70.0, 2, "c", 2.0, 1.0, 0.05,
                             host_send_us_per_pkt={"dcqcn": 90.0},
                             host_send_flow_cpu={"rlcc:x": 0.2})
    budget.save(new)
    assert budget.load("c") == new


@pytest.mark.root
@pytest.mark.slow
def test_host_costs_rig_measures_positive_costs() -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (network namespaces, HTB)")
    from p4cc.bench import calibrate_hosts

    hc = calibrate_hosts.host_costs(["dcqcn"], seconds=1.5)
    assert hc["send_us_per_pkt"]["dcqcn"] > 0
    assert hc["recv_us_per_pkt"] > 0
    assert hc["rate_change_us"] > 0
    assert hc["send_us_per_flow"] > 0  # a flow's own cost (session 37's short-flow window)
    assert hc["recv_us_per_flow"] >= 0
    assert 0 <= hc["send_idle_cpu"] < 0.5


def test_every_seed_of_a_spec_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each seed draws its own schedule: the default experiment's seed 6 (89 flows,
    ~0.74 CPU-s/s) against seed 1 (57 flows, ~0.59).  On a machine whose budget lies
    between them (S7's costs on one core: 0.7) seed 1 alone is admitted and the spec
    with seeds 1 and 6 is refused naming seed 6; before, the first seed stood for all."""
    from p4cc.experiment.bmv2.limits import check_budget

    one_core = replace(S7, cores=1)
    monkeypatch.setattr(budget, "load", lambda build=None: one_core)
    doc = _default_until_session10()
    check_budget(parse_spec({**doc, "seeds": [1, 2]}))
    with pytest.raises(ConfigError, match=r"^seed 6: the spec needs ~0\.7"):
        check_budget(parse_spec({**doc, "seeds": [1, 6]}))


def test_fluid_reports_the_flows_sharing_each_receivers_link() -> None:
    cap = {"a": 1000.0, "b": 1000.0, "c": 1000.0}
    two = [_Flow(0.0, 1000.0, "a", "c"), _Flow(0.0, 1000.0, "b", "c"),
           _Flow(0.0, 500.0, "c", "a")]
    assert fluid(two, cap, 10.0) == pytest.approx({"c": 2.0, "a": 1.0})
    chain = [_Flow(0.0, 100.0, "a", "b")] + [_Flow(0.0, 100.0, "a", "b", after=i)
                                              for i in range(9)]
    assert fluid(chain, cap, 10.0) == pytest.approx({"b": 1.0})  # one at a time


#: the reference machine's calibration the acc_incast runs of session 19 were admitted
#: under (session 16, logging-macros build 1.15.5)
S16 = budget.Calibration(
    switch_us_per_pkt=97.5, switch_sat_pps=19023.0, host_us_per_pkt=69.6, cores=2,
    build="s16", measured_unix=1795841743.0, loadavg=0.79, switch_idle_cpu=0.052,
    host_send_idle_cpu=0.0087, host_recv_idle_cpu=0.0043, host_recv_us_per_pkt=39.5,
    host_send_us_per_pkt={"dcqcn": 87.5, "rlcc:adpg-trees": 100.8},
    host_send_flow_cpu={"dcqcn": 0.0088, "rlcc:adpg-trees": 0.0646},
    host_rate_change_us=690.1)


def test_acc_incast_is_refused_for_the_flows_sharing_the_receiver() -> None:
    """20-29 DCQCN flows share h9's link in examples/acc_incast.yaml; all 12 BMv2 runs of
    it collapsed into go-back-N (docs/emulation.md, session 20), though its CPU fitted."""
    spec = load_spec(REPO_ROOT / "examples" / "acc_incast.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, 1, topo)
    d = budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s),
                      spec.host_cc, run_probe_s(spec.host_cc, topo, sched))
    assert budget.cpu(d, S16) < budget.UTIL_CAP * S16.cores  # the CPU alone admits it
    assert 20 < d.sharing["h9"]
    with pytest.raises(ConfigError) as info:
        _check(spec, S16)
    msg = str(info.value)
    assert "share h9's link" in msg and "go-back-N" in msg
    assert "flows_per_sender" in msg and "io_depth" not in msg and "--backend sim" in msg


@pytest.mark.parametrize("name", ["acc_e2e", "testbed_60"])
def test_faithful_dcqcn_examples_share_few_flows(name: str) -> None:
    spec = load_spec(REPO_ROOT / "examples" / f"{name}.yaml")
    topo = spec.topo()
    for seed in (1, 2, 3):
        sched, _ = build_schedule(spec, seed, topo)
        d = budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s))
        assert max(d.sharing.values()) < budget.MAX_SHARING_FLOWS / 2, (name, seed)


def test_sharing_is_checked_for_dcqcn_hosts_only() -> None:
    topo = load_spec(DATA_DIR / "testbed.yaml").topo()
    crowded = budget.Demand({}, {}, 1.0, cc="dcqcn:nvidia", sharing={"h4": 30.0})
    with pytest.raises(ConfigError, match="30 flows would share h4"):
        budget._check_sharing(crowded, topo)
    budget._check_sharing(budget.Demand({}, {}, 1.0, cc="rlcc", sharing={"h4": 30.0}), topo)
    budget._check_sharing(budget.Demand({}, {}, 1.0, cc="dcqcn", sharing={"h4": 9.0}), topo)


def test_an_unmeasured_variant_is_priced_as_the_dearest_measured_one_of_its_kind() -> None:
    """Plain ``rlcc`` (the default MLP) is measured beside the trees: a spec with another
    policy gets the dearer of the two, never the default's lower cost."""
    cal = replace(S7, host_send_flow_cpu={"dcqcn": 0.0, "rlcc": 0.01, "rlcc:adpg-trees": 0.05})
    price = functools.partial(cal.per_cc, cal.host_send_flow_cpu, budget.HOST_SEND_FLOW_CPU)
    assert price("rlcc") == 0.01 and price("rlcc:adpg-trees") == 0.05
    assert price("rlcc:adpg-lstm") == 0.05 and price("dcqcn:nvidia") == 0.0
