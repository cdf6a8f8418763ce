"""``p4cc bench traffic``: schedule generation rate and report time for a 100k-flow run.

Options: ``--flows N`` (default 100000) for the synthetic run's size.  Each case is one
JSON object (units in the keys).  The synthetic run is written through the run store
(``RunWriter``, as a backend's sink) with made-up measurements, so the case times the
store and the report, not a fabric.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.metrics import ideal_fct
from p4cc.analysis.report import report
from p4cc.analysis.runs import FLOW_RECORD_COLUMNS
from p4cc.controlplane.ecn import static_setting
from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import ExperimentSpec, parse_spec, resolve
from p4cc.experiment.store import RunWriter
from p4cc.traffic.cdf import load_cdf

#: telemetry intervals of the synthetic run
INTERVALS = 200


def _spec(workload: dict[str, Any], duration_s: float, interval_s: float | None = None
          ) -> ExperimentSpec:
    return parse_spec({"name": "bench", "backend": "sim", "scale": "paper",
                       "topology": "leafspine,spines=2,leaves=4,hosts=8",
                       "duration_s": duration_s, "interval_s": interval_s or duration_s / 10,
                       "agents": ["secn1"], "workloads": [workload]})


def _telemetry(spec: ExperimentSpec, step: int) -> list[PortTelemetry]:
    """One interval of a made-up port state: sine-wave queue and utilisation."""
    scale, topo = spec.scale_obj, spec.topo()
    ecn = static_setting(spec.agents[0], scale)
    t = min(spec.duration_s, step * spec.interval_s)
    recs = []
    for sw in topo.switches:
        for port in sw.ports:
            q = scale.buffer_bytes * 0.2 * (1 + math.sin(step * 0.7 + port))
            util = 0.5 + 0.4 * math.sin(step * 0.3 + port)
            tx = util * scale.link_rate_bps
            pkts = int(tx * spec.interval_s / 8 / scale.pkt_bytes)
            marked = int(pkts * min(1.0, q / scale.buffer_bytes))
            recs.append(PortTelemetry(
                switch=sw.name, port=port, t_s=t, interval_s=spec.interval_s,
                qlen_avg_bytes=q, qlen_max_bytes=min(scale.buffer_bytes, 2 * q), tx_bps=tx,
                tx_marked_bps=tx * marked / max(1, pkts), tx_pkts=pkts, tx_marked_pkts=marked,
                drops_pkts=0, ecn=ecn, incast_degree=1 + step % 4, active_flows=2 + step % 5,
                elephant_flows=step % 2, sojourn_avg_s=q * 8 / scale.link_rate_bps,
                utilization=util))
    return recs


def _flows(spec: ExperimentSpec, schedule: pd.DataFrame) -> pd.DataFrame:
    """Flow records with FCT = ideal FCT x (1 .. 2), by flow id."""
    scale = spec.scale_obj
    size = schedule["size_bytes"].to_numpy()
    fct = ideal_fct(size, scale.link_rate_bps, scale.base_rtt_s, scale.pkt_bytes) * (
        1.0 + (schedule["flow_id"].to_numpy() % 7) / 7.0)
    start = schedule["start_s"].to_numpy(float)
    done = start + fct <= spec.duration_s
    return schedule.assign(
        end_s=np.where(done, start + fct, np.nan), fct_s=np.where(done, fct, np.nan),
        bytes_rx=np.where(done, size, 0), retransmissions=0, completed=done,
        base_rtt_s=scale.base_rtt_s, cnps=0)[list(FLOW_RECORD_COLUMNS)]


def store_synthetic_run(spec: ExperimentSpec, path: Path) -> Path:
    """Write a complete run of ``spec`` (first agent and seed) with synthetic data."""
    agent, seed = spec.agents[0], spec.seeds[0]
    schedule, events = build_schedule(spec, seed)
    writer = RunWriter(path, {**resolve(spec), "backend": "synthetic"}, variant=agent,
                       agent=agent, seed=seed, backend="synthetic", outputs=spec.outputs)
    writer.write_schedule(schedule, events)
    for step in range(1, INTERVALS + 1):
        writer.telemetry(_telemetry(spec, step))
    writer.flows(_flows(spec, schedule).to_dict("records"))  # type: ignore[arg-type]
    writer.finish(True, "finished")
    return path


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench traffic")
    ap.add_argument("--flows", type=int, default=100_000)
    args = ap.parse_args(list(argv))
    # Generation rate per workload: duration chosen so each yields ~args.flows flows
    # (32 hosts at 25 Gb/s, load 0.5).
    for name in ("websearch", "fbhdp", "alistorage"):
        per_s = 32 * 0.5 * 25e9 / (8 * load_cdf(name).mean)
        spec = _spec({"type": name, "load": 0.5}, args.flows / per_s)
        t0 = time.perf_counter()
        sched, _ = build_schedule(spec, 1)
        dt = time.perf_counter() - t0
        yield {"case": f"schedule_{name}", "flows": len(sched), "seconds": round(dt, 4),
               "flows_per_s": round(len(sched) / dt)}
    with tempfile.TemporaryDirectory(prefix="p4cc-traffic-bench-") as tmp:
        per_s = 32 * 0.5 * 25e9 / (8 * load_cdf("fbhdp").mean)
        duration = args.flows / per_s
        spec = _spec({"type": "fbhdp", "load": 0.5}, duration, duration / INTERVALS)
        t0 = time.perf_counter()
        path = store_synthetic_run(spec, Path(tmp) / "run" / spec.agents[0])
        t_run = time.perf_counter() - t0
        n = sum(1 for _ in (path / "flows.csv").open()) - 1
        t0 = time.perf_counter()
        report([path], out=Path(tmp) / "report")
        t_rep = time.perf_counter() - t0
        yield {"case": "report_synthetic_run", "flows": n, "telemetry_intervals": INTERVALS,
               "store_seconds": round(t_run, 3), "report_seconds": round(t_rep, 3),
               "report_flows_per_s": round(n / t_rep) if t_rep else float(np.inf)}
