"""``p4cc bench testbed``: the default experiment's wall time and fidelity verdict.

Runs ``p4cc/data/testbed.yaml`` (or ``--spec``) on the bmv2 backend (``--backend``)
into a temporary directory (or ``--out``) and yields one record per run: wall time,
the fidelity verdict (p4cc.experiment.bmv2.fidelity) and its failed checks, flows
started/completed, mean FCT, mice p99 FCT (the report's mice: < 100 KB x the workloads'
size scale) and the busiest port's mean utilisation, queue and drops (telemetry's
estimate; the figures issue 10 compares with the simulator on the same schedule), the
exact ``switch_drops_pkts`` and ``forward_loss_pkts`` of ``p4cc report --losses``
(p4cc.analysis.losses; the simulator's forward loss is None, and so are the switch drops
of a run without a switch sample before its traffic); then a summary with the machine's
load and BMv2 build.
``--seeds 1,2,3`` plays several seeds.  Without BMv2 or root: one skip record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.analysis.losses import run_losses
from p4cc.analysis.metrics import queue_stats, summary
from p4cc.analysis.runs import open_run
from p4cc.bench.dataplane import bmv2_build_flags
from p4cc.errors import ConfigError, P4ccError
from p4cc.experiment.backend import Backend
from p4cc.experiment.default import DEFAULT_SPEC
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import load_spec
from p4cc.hostcc.sender_config import SenderConfig


def _faithful_runs(recs: list[dict[str, Any]]) -> int | None:
    """Runs the fidelity verdict judged faithful; None when no run has a verdict (the
    simulator's), so that a simulator run does not read as "0 faithful"."""
    if all(r.get("faithful") is None for r in recs):
        return None
    return sum(1 for r in recs if r.get("faithful"))


def _run_record(path: Path) -> dict[str, Any]:
    rec: dict[str, Any] = {"case": "testbed_run", "run": path.name}
    try:
        v = json.loads((path / "fidelity.json").read_text())
        rec.update({"faithful": v["faithful"], "verdict": v["summary"],
                    "failed_checks": {k: f"{c['violations']}/{c['checked']}"
                                      for k, c in v["checks"].items() if not c["ok"]}})
    except (OSError, ValueError, KeyError):
        rec.update({"faithful": None, "verdict": "no verdict (not a bmv2 run?)"})
    try:
        f = pd.read_csv(path / "flows.csv")
        done = f["completed"].astype(str).str.lower() == "true"
        rec.update({"flows": len(f), "completed": int(done.sum()),
                    "completed_frac": round(float(done.mean()), 3) if len(f) else None,
                    "mean_fct_s": round(float(f.loc[done, "fct_s"].mean()), 4)})
    except (OSError, ValueError, KeyError):
        pass
    rec.update(_bottleneck(path))
    return rec


def _bottleneck(path: Path) -> dict[str, Any]:
    """Mice p99 FCT and the busiest port's mean utilisation, queue and drops."""
    try:
        r = open_run(path)
    except P4ccError:
        return {}
    out: dict[str, Any] = {}
    mice = summary(r).get("fct_mice_p99_s")
    if mice is not None and math.isfinite(mice):
        out["mice_p99_fct_s"] = round(mice, 4)
    tel = r.telemetry
    if tel.empty:
        return out
    q = queue_stats(tel)
    b = q.iloc[int(q["tx_pkts"].to_numpy().argmax())]
    sw, port = b.name if isinstance(b.name, tuple) else (b.name, "")
    out.update({"bottleneck": f"{sw}:{port}", "bottleneck_util": round(float(b["utilization"]), 3),
                "bottleneck_qlen_avg_bytes": round(float(b["qlen_avg_bytes"]), 1),
                "bottleneck_drops_pkts": int(b["drops_pkts"])})
    try:  # exact: kernel counters and receivers' datagrams (p4cc.analysis.losses)
        lost = run_losses(r)
        out.update({"switch_drops_pkts": lost.switch_drops, "forward_loss_pkts":
                    lost.forward_loss})
    except P4ccError:  # a run without the files (older runs, other backends)
        pass
    return out


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench testbed")
    ap.add_argument("--spec", default=str(DEFAULT_SPEC))
    ap.add_argument("--backend", default="bmv2")
    ap.add_argument("--seeds", default="", help="comma-separated seeds (default: the spec's)")
    ap.add_argument("--out", default="", help="keep the runs here (default: a temp dir)")
    ap.add_argument("--ack-every", type=int, default=None,
                    help="bmv2: the senders ask for an ACK every N data packets (default: "
                         "the hosts' 16; 1 measures ACK coalescing's saving)")
    args = ap.parse_args(list(argv))
    spec = load_spec(args.spec)
    if args.seeds:
        spec = dataclasses.replace(spec, seeds=tuple(int(s) for s in args.seeds.split(",")))
    if args.backend == "bmv2":
        from p4cc.experiment.bmv2.checks import skip_reason

        reason = skip_reason()
        if reason:
            yield {"case": "testbed", "skipped": reason}
            return
    with tempfile.TemporaryDirectory(prefix="p4cc-bench-testbed-") as tmp:
        out = Path(args.out) if args.out else Path(tmp) / spec.name
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        backend: str | Backend = args.backend
        if args.ack_every is not None:
            if args.backend != "bmv2":
                raise ConfigError("--ack-every applies to the bmv2 backend's hosts only")
            from p4cc.experiment.bmv2.backend import Bmv2Backend

            backend = Bmv2Backend(ack_every=args.ack_every)
        paths = run_spec(spec, backend=backend, out=out,
                         progress=lambda label, d: (lambda t: None))
        wall = time.monotonic() - t0
        recs = [_run_record(p) for p in paths]
        yield from recs
    yield {"case": "testbed", "spec": args.spec, "backend": args.backend,
           "ack_every": (args.ack_every or SenderConfig().ack_every) if args.backend == "bmv2"
           else None, "runs": len(recs), "wall_s": round(wall, 1),
           "wall_per_run_s": round(wall / max(1, len(recs)), 1),
           "faithful_runs": _faithful_runs(recs),
           "loadavg_before": round(load0, 2), "loadavg_after": round(os.getloadavg()[0], 2),
           "cpus": os.cpu_count(), "bmv2_build": bmv2_build_flags()}
