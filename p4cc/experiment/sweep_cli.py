"""``p4cc sweep SPEC.yaml --grid KEY=V1,V2 [--seeds N] ...`` (docs/sweeps.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from p4cc.experiment.spec import BACKENDS


def _sweep(args: argparse.Namespace) -> int:
    from p4cc.experiment.grid import parse_seeds
    from p4cc.experiment.sweep import pending, plan_sweep, write_plan
    from p4cc.experiment.sweep_exec import choose_executor, execute
    from p4cc.experiment.sweep_report import build_sweep_report

    plan = plan_sweep(args.spec, args.grid or [], parse_seeds(args.seeds), args.out,
                      args.runs, args.backend)  # ConfigError -> exit 2 (p4cc.cli)
    todo = pending(plan)
    spec = plan.points[0].spec
    print(f"{plan.root}: {len(plan.points)} point(s) x {len(spec.agents)} agent(s) x "
          f"{len(spec.seeds)} seed(s) = {len(plan.tasks)} runs, "
          f"{len(plan.tasks) - len(todo)} already complete, backend {plan.backend}",
          flush=True)
    if args.check:
        return 0
    executor = choose_executor(args.local, args.address) if todo else "pool"
    write_plan(plan)
    results = execute(todo, executor, args.workers, args.address) if todo else []
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"failed: {r.label}: {r.error}", file=sys.stderr)
    print(build_sweep_report(plan.root))
    if failed:
        print(f"p4cc sweep: {len(failed)} run(s) failed; run the same command again to "
              f"retry them (complete runs are skipped)", file=sys.stderr)
        return 1
    return 0


def _sweep_report(args: argparse.Namespace) -> int:
    from p4cc.experiment.sweep_report import build_sweep_report

    print(build_sweep_report(args.sweep, args.out))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("sweep", help="run a spec over a grid x agents x seeds "
                                            "(Ray tasks, or --local processes)")
    p.add_argument("spec", help="experiment YAML (agents come from it)")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...",
                   help="a grid axis; KEY: load (every workload's), workloads[I].KEY, "
                        "duration_s, interval_s, host_cc, topology, scale (repeatable)")
    p.add_argument("--seeds", help="N (seeds 1..N) or a list 4,7,9 (default: the spec's)")
    p.add_argument("--out", help="sweep directory (default: RUNS/<name>-sweep)")
    p.add_argument("--runs", default="runs", help="root of run directories (default: runs)")
    p.add_argument("--backend", choices=BACKENDS, help="override the spec's backend")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--address", help="join the Ray cluster at this address "
                                         "(ray start --head prints it)")
    where.add_argument("--local", action="store_true",
                       help="a local process pool instead of Ray (no Ray needed)")
    p.add_argument("--workers", type=int, help="parallel runs on this machine (default: "
                                               "one per CPU; bmv2: always 1)")
    p.add_argument("--check", action="store_true",
                   help="only validate the grid and every point's spec, then exit")
    p.set_defaults(func=_sweep)

    p = subparsers.add_parser("sweep-report", help="(re)write the combined report of a sweep")
    p.add_argument("sweep", help="sweep directory (runs/<name>-sweep)")
    p.add_argument("--out", help="report directory (default: <sweep>/report)")
    p.set_defaults(func=_sweep_report)
