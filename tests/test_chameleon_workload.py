"""CHAMELEON's tuning workload: the all-to-all repeated every long period, open or
closed loop (p4cc.experiment.chameleon_workload.all_to_all).  Open loop, a setting too
slow for the period piles collectives up and the objective drifts whatever the tuner
does; closed loop, a pair's next flow waits for its previous one."""

from __future__ import annotations

import numpy as np
import pandas as pd

from p4cc.experiment.chameleon_workload import all_to_all
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.topo.spec import parse_topo

TOPO = "leafspine,spines=1,leaves=2,hosts=2"


def test_closed_loop_chains_each_pair_to_its_previous_flow() -> None:
    topo = parse_topo(TOPO, "paper")
    open_, closed = (all_to_all(topo, 10_000, 3, 1e-3, jitter_s=1e-5, seed=4, closed=c)
                     for c in (False, True))
    n = 4 * 3  # pairs of 4 hosts
    assert len(closed) == 3 * n and (open_["after"] == -1).all()
    assert (closed["after"].iloc[:n] == -1).all()  # the first collective waits for none
    later = closed.iloc[n:]
    prev = closed.set_index("flow_id").loc[later["after"]]
    assert (prev["src"].to_numpy() == later["src"].to_numpy()).all()
    assert (prev["dst"].to_numpy() == later["dst"].to_numpy()).all()
    assert (prev["tag"].to_numpy() != later["tag"].to_numpy()).all()  # iteration k-1
    # the same starts and pairs as open loop: only the dependency differs
    pd.testing.assert_frame_equal(open_.drop(columns="after"), closed.drop(columns="after"))


def _flows(closed: bool) -> pd.DataFrame:
    """Collectives of 4 x 60 kB flows into 2-host leaves every 40 µs: far more than the
    fabric carries in a period (each host sends 180 kB = 58 µs at 25 Gb/s)."""
    topo = parse_topo(TOPO, "paper")
    sched = all_to_all(topo, 60_000, 6, 40e-6, seed=2, closed=closed)
    eng = Engine(topo, sched, SimConfig(cc="dcqcn", cc_params="nvidia", seed=2,
                                        host_traces=False))
    assert eng.run_to_completion(0.05)
    return eng.flow_records()


def test_closed_loop_bounds_the_backlog_on_a_too_short_period() -> None:
    closed, open_ = _flows(True), _flows(False)
    for df in (closed, open_):
        assert np.isfinite(df["fct_s"].to_numpy(dtype=float)).all()

    def most_in_flight(df: pd.DataFrame) -> int:
        begun, ends = (df[c].to_numpy(dtype=float) for c in ("start_s", "end_s"))
        return max(int(((begun <= t) & (ends > t)).sum()) for t in begun)

    # closed loop: one flow per pair (12 pairs) at most; open loop piles them up
    assert most_in_flight(closed) <= 12 < most_in_flight(open_)
