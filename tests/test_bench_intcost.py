"""``p4cc bench intcost``'s summary of its per-mode runs (the live part needs BMv2 and
root: docs/benchmarks.md has its numbers)."""

from __future__ import annotations

import json

from p4cc.bench.intcost import CASES, summarise


def test_summary_is_what_int_and_a_report_add_per_packet() -> None:
    runs = {"off": {1000.0: [200.0, 210.0, 205.0], 2000.0: [180.0, 185.0, 182.0]},
            "summary": {1000.0: [280.0, 281.0, 279.0], 2000.0: [257.0, 258.0, 256.0]},
            "report": {1000.0: [435.0, 430.0, 440.0], 2000.0: [370.0, 371.0, 369.0]}}
    rec = summarise(runs)
    # medians 205 / 182 off, 280 / 257 summary, 435 / 370 report; means over the rates
    assert rec == {"case": "int_cost", "rates_pps": [1000.0, 2000.0],
                   "int_us_per_pkt": 75.0, "report_us_per_pkt": 134.0}
    json.dumps(rec)  # one JSON object per line
    assert rec["case"] in CASES
