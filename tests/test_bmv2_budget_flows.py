"""The machine budget's per-flow host cost (session 37): what a flow costs its sender and
receiver beyond its packets, measured by ``p4cc bench calibrate``'s short-flow window.

Before it, the budget under-predicted runs that start many flows: the closed-loop storage
runs of session 36 (``examples/acc_storage_bmv2.yaml``, 37-40 flows a second by the fluid
model) used 1.5-1.7x their prediction on this machine, their host processes ~2x.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from p4cc.bench.calibrate_hosts import SHORT_FLOW_PKTS, per_flow_us
from p4cc.experiment.bmv2 import budget
from p4cc.experiment.bmv2.limits import run_int_watch, run_probe_s
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import load_spec
from p4cc.paths import REPO_ROOT
from p4cc.topo.spec import parse_topo

#: the calibration session 36 cached on its 2-core AMD EPYC VM (BMv2 1.15.5 with logging
#: macros), with the per-flow costs of session 37's calibration on the same machine
S36 = budget.Calibration(
    103.6, 19140.0, 134.6, 2, "s36", 1796028587.6, 0.71, 0.056,
    host_send_idle_cpu=0.0174, host_recv_idle_cpu=0.0, host_recv_us_per_pkt=70.3,
    host_send_us_per_pkt={"dcqcn": 182.3, "rlcc:adpg-trees": 169.0},
    host_send_flow_cpu={"dcqcn": 0.0, "rlcc:adpg-trees": 0.0747}, host_rate_change_us=30.9,
    host_send_us_per_flow=5222.0, host_recv_us_per_flow=189.0)
NO_FLOW_COST = replace(S36, host_send_us_per_flow=0.0, host_recv_us_per_flow=0.0)


def _storage_demand(seed: int) -> budget.Demand:
    spec = load_spec(REPO_ROOT / "examples" / "acc_storage_bmv2.yaml")
    topo = spec.topo()
    sched, _ = build_schedule(spec, seed, topo)
    return budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s),
                         spec.host_cc, run_probe_s(spec.host_cc, topo, sched),
                         run_int_watch(spec, topo, sched))


def test_per_flow_cost_is_what_the_window_leaves_beyond_idle_and_packets() -> None:
    # 90 flows of 2 packets in 3 s; sender 0.5 CPU-s, idle 0.02 CPU-s/s, 180 µs/packet
    short = {"send_cpu": 0.5, "send_idle": 0.02, "recv_cpu": 0.2, "recv_idle": 0.0,
             "pkts": 180.0, "flows": 90.0}
    got = per_flow_us(short, 3.0, 180e-6, 70e-6)
    assert got["send_us_per_flow"] == pytest.approx((0.5 - 0.06 - 180 * 180e-6) / 90 * 1e6,
                                                    abs=0.1)
    assert got["recv_us_per_flow"] == pytest.approx((0.2 - 180 * 70e-6) / 90 * 1e6, abs=0.1)
    # a window that cost less than its packets predict gives 0, never a negative cost
    assert per_flow_us({**short, "send_cpu": 0.01}, 3.0, 180e-6, 70e-6)[
        "send_us_per_flow"] == 0.0
    assert SHORT_FLOW_PKTS >= 1


def test_demand_counts_the_flows_started_in_the_run() -> None:
    topo = parse_topo("star,hosts=3", "testbed-5m")
    rows = [{"flow_id": i, "start_s": float(s), "src": "h1", "dst": "h3", "size_bytes": 2000,
             "cls": "mice", "after": -1, "stop_s": float("nan")}
            for i, s in enumerate([0.0, 1.0, 2.0, 3.0, 25.0])]  # the last starts after 20 s
    d = budget.demand(topo, pd.DataFrame(rows), 20.0, 0.25)
    assert d.flows_per_s == pytest.approx(4 / 20.0)


def test_each_started_flow_costs_its_sender_and_receiver() -> None:
    d = _storage_demand(1)
    with_cost, without = S36.terms(d), NO_FLOW_COST.terms(d)
    assert with_cost["senders"] - without["senders"] == pytest.approx(
        d.flows_per_s * S36.host_send_us_per_flow * 1e-6)
    assert with_cost["receivers"] - without["receivers"] == pytest.approx(
        d.flows_per_s * S36.host_recv_us_per_flow * 1e-6)
    assert with_cost["switches"] == without["switches"]


#: CPU-s/s the storage runs of session 36 used (budget.json; SECN1, seeds 1-3)
STORAGE_USED = [(1, 1.04), (2, 1.18), (3, 1.05)]


@pytest.mark.parametrize("seed, used", STORAGE_USED)
def test_storage_runs_are_predicted_with_the_per_flow_cost(seed: int, used: float) -> None:
    d = _storage_demand(seed)
    assert 30 < d.flows_per_s < 50  # closed-loop IO at depth 3: tens of flows a second
    assert used / budget.cpu(d, NO_FLOW_COST) > 1.4  # the model before session 37
    assert 0.7 <= used / budget.cpu(d, S36) <= 1.4


def test_default_experiment_is_still_predicted_and_admitted() -> None:
    """tb23_s36 (session 36, this machine): the default experiment's seeds 2 and 3 used
    0.42-0.55 CPU-s/s; ~8 flows a second add little, and the spec stays admitted."""
    spec = load_spec(REPO_ROOT / "p4cc" / "data" / "testbed.yaml")
    topo = spec.topo()
    for seed, lo, hi in ((2, 0.45, 0.55), (3, 0.42, 0.43)):
        sched, _ = build_schedule(spec, seed, topo)
        d = budget.demand(topo, sched, float(spec.duration_s), float(spec.interval_s),
                          spec.host_cc, run_probe_s(spec.host_cc, topo, sched))
        pred = budget.cpu(d, S36)
        assert 0.7 <= lo / pred and hi / pred <= 1.4, (seed, pred)
        assert pred < budget.UTIL_CAP * S36.cores


def test_old_cache_files_get_the_measured_per_flow_defaults() -> None:
    # (a live measurement: tests/test_bmv2_budget_model.py::
    # test_host_costs_rig_measures_positive_costs, root)
    old = budget.Calibration(142.5, 12244.0, 77.8, 2, "s7", 1.0, 1.2, 0.062)
    assert old.host_send_us_per_flow == budget.HOST_SEND_US_PER_FLOW > 0
    assert old.host_recv_us_per_flow == budget.HOST_RECV_US_PER_FLOW >= 0



def test_host_costs_need_a_host_cc() -> None:
    from p4cc.bench import calibrate_hosts
    from p4cc.errors import P4ccError

    # refused before any namespace or process is made (no root needed)
    with pytest.raises(P4ccError, match="at least one host CC"):
        calibrate_hosts.host_costs([])
