"""The fidelity verdict's ``flow_start`` check: flows must start within one base RTT of
their scheduled time (p4cc.experiment.bmv2.fidelity_host)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from p4cc.experiment.bmv2 import fidelity as fid
from p4cc.experiment.bmv2.fidelity_host import read_starts

RTT = 4e-3  # testbed-5m's base RTT
FACTS = fid.RunFacts({("s1", 1): 5e6}, 1000, 0.25, {"h1": 5e6}, base_rtt_s=RTT)
EMPTY = pd.DataFrame()


def _starts(lags_s: list[float], host: str = "h1") -> pd.DataFrame:
    return pd.DataFrame([{"host": host, "flow_id": i + 1, "sched_start_s": 0.1 * i,
                          "start_s": 0.1 * i + lag} for i, lag in enumerate(lags_s)])


def _judge(starts: pd.DataFrame | None, facts: fid.RunFacts = FACTS) -> fid.Verdict:
    return fid.evaluate(facts, EMPTY, EMPTY, EMPTY, EMPTY, starts=starts)


def test_flows_started_within_an_rtt_are_faithful() -> None:
    v = _judge(_starts([0.2e-3] * 99 + [3.9e-3]))
    assert v.faithful and v.checks["flow_start"] == {"checked": 100, "violations": 0,
                                                     "fraction": 0.0, "ok": True}


def test_flows_started_late_are_unfaithful() -> None:
    """Session 12's BMv2 hosts: every flow 4.5-19 ms late (the HTB class set-up)."""
    v = _judge(_starts([8e-3] * 100))
    assert not v.faithful and v.checks["flow_start"]["violations"] == 100
    row = v.violations.iloc[0]
    assert row["check"] == "flow_start" and row["where"] == "h1"
    assert "started 8.0 ms after its scheduled time (limit 4.0 ms = 1 base RTT)" in row["reason"]


def test_a_few_late_flows_are_tolerated() -> None:
    """2 % of the flows (a preemption now and then) may start late; 3 % may not."""
    assert _judge(_starts([0.0] * 98 + [0.05] * 2)).faithful
    assert not _judge(_starts([0.0] * 97 + [0.05] * 3)).faithful


def test_without_start_records_or_base_rtt_starts_are_not_judged() -> None:
    assert "flow_start" in fid.CHECKS
    assert _judge(None).checks["flow_start"]["checked"] == 0
    no_rtt = fid.RunFacts({("s1", 1): 5e6}, 1000, 0.25, {"h1": 5e6})
    assert _judge(_starts([1.0] * 10), no_rtt).faithful


def test_read_starts_skips_flows_that_never_started(tmp_path: Path) -> None:
    send = tmp_path / "h2" / "send"
    send.mkdir(parents=True)
    (send / "fct.csv").write_text("flow_id,sched_start_s,start_s,completed\n"
                                  "1,0.0,0.0002,True\n2,0.5,0.5031,True\n,9.0,,False\n")
    starts = read_starts(tmp_path, ["h1", "h2"])  # h1 has no records
    assert starts.to_dict("records") == [
        {"host": "h2", "flow_id": 1, "sched_start_s": 0.0, "start_s": 0.0002},
        {"host": "h2", "flow_id": 2, "sched_start_s": 0.5, "start_s": 0.5031}]
    v = _judge(starts)
    assert v.checks["flow_start"]["checked"] == 2 and v.checks["flow_start"]["violations"] == 0
