"""``p4cc bench sweep``: runs per minute of a fixed small sweep with 1 and 2 workers.

The grid: the simulator, ``star,hosts=8`` at testbed scale, WebSearch (flow sizes scaled
with the BDP) for ``--duration`` seconds, ``load`` = 0.3, 0.5, 0.7, 0.9, ``--agents``
(default secn1 and secn2; issue #12's bar is 4 agents × 4 loads × 3 seeds:
``--agents secn1,secn2,acc,pet --seeds 3``), ``--seeds`` seeds: 16 runs with the
defaults.  One case per executor (``pool`` =
``p4cc sweep --local``; ``ray`` = a local Ray instance, if Ray is installed) and worker
count; each into a fresh temporary directory.  ``wall_s`` is the whole sweep as the user
waits for it, including starting the workers (spawned processes import p4cc; Ray also
starts its instance: ``ray_init_s`` alone).  ``run_mean_s`` is a run's wall-clock time in
its worker and ``run_cpu_mean_s`` the CPU time it got: when the first grows with the
workers and the second does not, the workers wait for CPU (other work on the machine).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from p4cc.experiment.sweep import plan_sweep
from p4cc.experiment.sweep_exec import execute, have_ray

GRID = ("load=0.3,0.5,0.7,0.9",)
AGENTS = ("secn1", "secn2")


def bench_doc(duration_s: float, agents: Sequence[str] = AGENTS) -> dict[str, Any]:
    return {"name": "benchsweep", "backend": "sim", "topology": "star,hosts=8",
            "scale": "testbed", "duration_s": duration_s, "interval_s": 0.05,
            "agents": list(agents),
            "workloads": [{"type": "websearch", "load": 0.5, "size_scale": "bdp"}]}


def _ray_init_s(workers: int) -> float:
    import ray

    t0 = time.monotonic()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    return time.monotonic() - t0


def sweep_case(executor: str, workers: int, duration_s: float, seeds: int,
               agents: Sequence[str] = AGENTS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="p4cc-bench-sweep-") as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(yaml.safe_dump(bench_doc(duration_s, agents)))
        plan = plan_sweep(spec, GRID, tuple(range(1, seeds + 1)), Path(tmp) / "sweep")
        t0 = time.monotonic()
        init_s = None
        try:
            if executor == "ray":
                init_s = _ray_init_s(workers)
            results = execute(plan.tasks, executor, workers, show=False)
        finally:
            if executor == "ray":
                import ray

                ray.shutdown()
        wall = time.monotonic() - t0
    ok = sum(r.ok for r in results)
    run_s = [r.elapsed_s for r in results if r.ok]
    cpu_s = [r.cpu_s for r in results if r.ok]
    out: dict[str, Any] = {
        "case": f"{executor}_w{workers}", "executor": executor, "workers": workers,
        "agents": ",".join(agents), "runs": len(plan.tasks), "runs_ok": ok,
        "sim_duration_s": duration_s,
        "wall_s": round(wall, 3), "runs_per_min": round(60.0 * ok / wall, 2),
        "run_mean_s": round(sum(run_s) / len(run_s), 3) if run_s else None,
        "run_cpu_mean_s": round(sum(cpu_s) / len(cpu_s), 3) if cpu_s else None,
        "cpus": os.cpu_count(), "loadavg_1min": round(os.getloadavg()[0], 2)}
    if init_s is not None:
        out["ray_init_s"] = round(init_s, 3)
    return out


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    p = argparse.ArgumentParser(prog="p4cc bench sweep", description=__doc__)
    p.add_argument("--duration", type=float, default=5.0, help="simulated seconds per run")
    p.add_argument("--seeds", type=int, default=2, help="seeds per point and agent")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--executor", action="append", choices=("pool", "ray"),
                   help="default: pool, and ray when installed")
    p.add_argument("--agents", default=",".join(AGENTS),
                   help="agents of every grid point, comma-separated")
    args = p.parse_args(list(argv))
    agents = tuple(a for a in args.agents.split(",") if a)
    executors = args.executor or (["pool", "ray"] if have_ray() else ["pool"])
    for executor in executors:
        base = None
        for w in args.workers:
            case = sweep_case(executor, w, args.duration, args.seeds, agents)
            base = base or case["runs_per_min"]
            case["speedup_vs_first"] = round(case["runs_per_min"] / base, 2) if base else None
            yield case
