"""``p4cc bench testbed``: the default experiment's wall time and fidelity verdict.

Runs ``p4cc/data/testbed.yaml`` (or ``--spec``) on the bmv2 backend (``--backend``)
into a temporary directory (or ``--out``) and yields one record per run: wall time,
the fidelity verdict (p4cc.experiment.bmv2.fidelity) and its failed checks, flows
started/completed, mean FCT; then a summary with the machine's load and BMv2 build.
``--seeds 1,2,3`` plays several seeds.  Without BMv2 or root: one skip record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.bench.dataplane import bmv2_build_flags
from p4cc.experiment.default import DEFAULT_SPEC
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import load_spec


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
    return rec


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench testbed")
    ap.add_argument("--spec", default=str(DEFAULT_SPEC))
    ap.add_argument("--backend", default="bmv2")
    ap.add_argument("--seeds", default="", help="comma-separated seeds (default: the spec's)")
    ap.add_argument("--out", default="", help="keep the runs here (default: a temp dir)")
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
        paths = run_spec(spec, backend=args.backend, out=out,
                         progress=lambda label, d: (lambda t: None))
        wall = time.monotonic() - t0
        recs = [_run_record(p) for p in paths]
        yield from recs
    yield {"case": "testbed", "spec": args.spec, "backend": args.backend,
           "runs": len(recs), "wall_s": round(wall, 1),
           "wall_per_run_s": round(wall / max(1, len(recs)), 1),
           "faithful_runs": sum(1 for r in recs if r.get("faithful")),
           "loadavg_before": round(load0, 2), "loadavg_after": round(os.getloadavg()[0], 2),
           "cpus": os.cpu_count(), "bmv2_build": bmv2_build_flags()}
