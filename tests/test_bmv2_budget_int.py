"""The machine budget counts INT (p4cc.experiment.bmv2.budget / budget_demand).

A packet that carries INT costs its switches more than one without it (summary-only:
+75 µs, a reported one +134 µs more: p4cc bench intcost; budget.SWITCH_INT_US_PER_PKT),
and a report costs the runner its decode.  Runs that install no INT watch keep their
old prediction to the bit.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from p4cc.experiment.bmv2 import budget
from p4cc.experiment.bmv2.limits import run_int_watch, run_probe_s
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import ExperimentSpec, load_spec

EXAMPLE = Path(__file__).parent.parent / "examples" / "rlcc_bmv2_4to1.yaml"
#: a calibration fixed here (the session-7 numbers), so the cache on the machine does
#: not matter
CAL = budget.Calibration(142.5, 12244.0, 77.8, 2, "test", 1795530200.56, 1.16, 0.062)


def _spec(host_cc: str, outputs: tuple[str, ...] = ("flows",)) -> ExperimentSpec:
    return replace(load_spec(EXAMPLE), host_cc=host_cc, outputs=outputs)


def _demand(spec: ExperimentSpec, watch: dict[str, bool] | None) -> budget.Demand:
    topo = spec.topo()
    sched, _ = build_schedule(spec, spec.seeds[0], topo)
    return budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s),
                         spec.host_cc, run_probe_s(spec.host_cc, topo, sched), watch)


def test_no_watch_keeps_the_old_prediction() -> None:
    spec = _spec("rlcc:adpg-trees")
    a, b = _demand(spec, None), _demand(spec, {})
    assert a.int_pps == b.int_pps == {} and a.report_pps == b.report_pps == 0.0
    assert budget.terms(a, CAL) == budget.terms(b, CAL)


def test_summary_watch_charges_the_switches_per_int_packet() -> None:
    spec = _spec("rlcc:adpg-mlp-int")
    plain = _demand(spec, None)
    watch = {h: False for h in ("h1", "h2", "h3", "h4")}
    d = _demand(spec, watch)
    # every data packet of the 4 -> 1 incast crosses s1 with INT, plus the probes
    assert d.int_pps["s1"] >= plain.data_pps
    assert d.int_pps["s1"] < plain.switch_pps["s1"]  # not the reverse path
    assert d.report_pps == 0.0
    t0, t1 = budget.terms(plain, CAL), budget.terms(d, CAL)
    extra = d.int_pps["s1"] * CAL.switch_int_us_per_pkt * budget.SWITCH_PKT_FACTOR * 1e-6
    assert t1["switches"] - t0["switches"] == pytest.approx(extra)
    assert t1["runner"] == t0["runner"] and t1["senders"] == t0["senders"]


def test_reported_source_costs_a_clone_and_a_decode() -> None:
    spec = _spec("rlcc:adpg-mlp-int")
    summ = _demand(spec, {h: False for h in ("h1", "h2", "h3", "h4")})
    rep = _demand(spec, {"h1": True, "h2": False, "h3": False, "h4": False})
    assert rep.int_pps == summ.int_pps
    assert 0 < rep.report_pps < summ.int_pps["s1"] / 2  # one source of four
    t_s, t_r = budget.terms(summ, CAL), budget.terms(rep, CAL)
    assert t_r["switches"] - t_s["switches"] == pytest.approx(
        rep.report_pps * CAL.switch_report_us_per_pkt * budget.SWITCH_PKT_FACTOR * 1e-6)
    assert t_r["runner"] - t_s["runner"] == pytest.approx(
        rep.report_pps * budget.RUNNER_REPORT_CPU_S)


def test_run_int_watch_is_what_the_backend_installs() -> None:
    """limits.run_int_watch (the budget's input) follows the backend's plan."""
    for cc, outputs, want in [
            ("rlcc:adpg-mlp-int", ("flows",), {h: False for h in ("h1", "h2", "h3", "h4")}),
            ("rlcc:adpg-mlp-int", ("flows", "int"),
             {"h1": True, "h2": False, "h3": False, "h4": False}),
            ("rlcc:adpg-trees", ("flows", "int"), {"h1": True}),
            ("dcqcn", ("flows",), {})]:
        spec = _spec(cc, outputs)
        topo = spec.topo()
        sched, _ = build_schedule(spec, spec.seeds[0], topo)
        assert run_int_watch(spec, topo, sched) == want, (cc, outputs)


def test_old_cache_files_load_with_the_measured_int_costs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration cached before the INT fields existed prices INT with the measured
    defaults (an INT watch never comes for free)."""
    monkeypatch.setenv("P4CC_CACHE_DIR", str(tmp_path))
    old = {"switch_us_per_pkt": 142.5, "switch_sat_pps": 12244, "host_us_per_pkt": 77.8,
           "cores": 2, "build": "b", "measured_unix": 1.0, "switch_idle_cpu": 0.062}
    budget.cache_path("b").parent.mkdir(parents=True, exist_ok=True)
    budget.cache_path("b").write_text(json.dumps(old))
    cal = budget.load("b")
    assert cal.calibrated
    assert (cal.switch_int_us_per_pkt, cal.switch_report_us_per_pkt) == (
        budget.SWITCH_INT_US_PER_PKT, budget.SWITCH_REPORT_US_PER_PKT) and \
        cal.switch_int_us_per_pkt > 0 and cal.switch_report_us_per_pkt > 0
