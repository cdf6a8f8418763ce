"""`p4cc bench sim`: the optional ns-3 case skips with a reason, cases run (short)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pandas as pd
import pytest

from p4cc.bench import ns3 as ns3bench
from p4cc.bench import sim as bench


def test_ns3_case_skips_with_reason_when_bindings_missing(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    ran: list[int] = []

    def p4cc_case() -> dict[str, Any]:
        ran.append(1)
        return {}

    rec = ns3bench.ns3_incast(1e-3, p4cc_case)
    assert rec["case"] == "ns3_incast_8to1"
    assert "ns3" in rec["skipped"] and not ran  # no wasted p4cc run either
    rec = ns3bench.ns3_leafspine(1e-3, pd.DataFrame(), [], (1, 1, 1), p4cc_case)
    assert rec["case"] == "ns3_leafspine288_websearch60"
    assert "ns3" in rec["skipped"] and not ran


def test_incast_case_reports_rates() -> None:
    rec = bench.incast(50e-6)
    assert rec["case"] == "incast_8to1" and rec["sim_s_per_wall_s"] > 0
    assert rec["mean_active_flows"] == 8.0
