"""``p4cc bench traffic``: schedule generation rate and report time for a 100k-flow run.

Options: ``--flows N`` (default 100000) for the synthetic run's size.  Each case is one
JSON object (units in the keys).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from replay_backend import ReplayBackend

from p4cc.analysis.report import report
from p4cc.experiment.runner import run_spec
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import parse_spec


def _spec(workload: dict[str, Any], duration_s: float, interval_s: float | None = None) -> Any:
    return parse_spec({"name": "bench", "backend": "replay", "scale": "paper",
                       "topology": "leafspine,spines=2,leaves=4,hosts=8",
                       "duration_s": duration_s, "interval_s": interval_s or duration_s / 10,
                       "agents": ["secn1"], "workloads": [workload]})


def _quiet(label: str, duration: float) -> Any:
    return lambda t: None


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench traffic")
    ap.add_argument("--flows", type=int, default=100_000)
    args = ap.parse_args(list(argv))
    # Generation rate per workload: duration chosen so each yields ~args.flows flows
    # (32 hosts at 25 Gb/s, load 0.5).
    for name in ("websearch", "fbhdp", "alistorage"):
        from p4cc.traffic.cdf import load_cdf

        per_s = 32 * 0.5 * 25e9 / (8 * load_cdf(name).mean)
        spec = _spec({"type": name, "load": 0.5}, args.flows / per_s)
        t0 = time.perf_counter()
        sched, _ = build_schedule(spec, 1)
        dt = time.perf_counter() - t0
        yield {"case": f"schedule_{name}", "flows": len(sched), "seconds": round(dt, 4),
               "flows_per_s": round(len(sched) / dt)}
    with tempfile.TemporaryDirectory(prefix="p4cc-traffic-bench-") as tmp:
        per_s = 32 * 0.5 * 25e9 / (8 * 120_421)
        spec = _spec({"type": "fbhdp", "load": 0.5}, args.flows / per_s,
                     interval_s=args.flows / per_s / 200)
        t0 = time.perf_counter()
        paths = run_spec(spec, ReplayBackend(), out=Path(tmp) / "run", progress=_quiet)
        t_run = time.perf_counter() - t0
        n = sum(1 for _ in (paths[0] / "flows.csv").open()) - 1
        t0 = time.perf_counter()
        report([paths[0]], out=Path(tmp) / "report")
        t_rep = time.perf_counter() - t0
        yield {"case": "report_synthetic_run", "flows": n, "telemetry_intervals": 200,
               "store_seconds": round(t_run, 3), "report_seconds": round(t_rep, 3),
               "report_flows_per_s": round(n / t_rep) if t_rep else float(np.inf)}
