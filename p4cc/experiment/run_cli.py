"""``p4cc run SPEC.yaml`` and ``p4cc report RUN...``."""

from __future__ import annotations

import argparse
from typing import Any

from p4cc.experiment.spec import BACKENDS


def _run(args: argparse.Namespace) -> int:
    from p4cc.experiment.runner import run_spec
    from p4cc.experiment.spec import load_spec

    spec = load_spec(args.spec)  # ConfigError -> exit 2 with the message (p4cc.cli)
    if args.check:
        from p4cc.experiment.backend import get_backend

        # what the chosen backend cannot honour, too (e.g. storage workloads on bmv2)
        get_backend(args.backend or spec.backend).check(spec)
        print(f"{args.spec}: ok ({len(spec.agents)} variant(s) x {len(spec.seeds)} seed(s), "
              f"backend {args.backend or spec.backend})")
        return 0
    paths = run_spec(spec, backend=args.backend, out=args.out, runs_root=args.runs)
    for p in paths:
        print(p)
    return 0


def _report(args: argparse.Namespace) -> int:
    if args.losses:  # where/when packets were lost, one Markdown row per run (no report)
        from p4cc.analysis.losses import losses_markdown
        from p4cc.analysis.runs import find_runs

        print(losses_markdown(find_runs(args.runs)), end="")
        return 0
    if args.windows:  # FCT per flow-start window, pooled over seeds (no report written)
        from p4cc.analysis.runs import find_runs
        from p4cc.analysis.windows import fct_by_window, parse_edges, windows_markdown

        edges = parse_edges(args.windows)
        print(windows_markdown(fct_by_window(find_runs(args.runs), edges)))
        return 0
    from p4cc.analysis.report import report

    print(report(args.runs, out=args.out, baseline=args.baseline))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run an experiment spec (all agent variants)")
    p.add_argument("spec", help="experiment YAML (see examples/ and docs/traffic.md)")
    p.add_argument("--backend", choices=BACKENDS, help="override the spec's backend")
    p.add_argument("--out", help="output directory (default: RUNS/<name>)")
    p.add_argument("--runs", default="runs", help="root of run directories (default: runs)")
    p.add_argument("--check", action="store_true",
                   help="only validate the spec and exit")
    p.set_defaults(func=_run)

    p = subparsers.add_parser("report", help="tables, plots and a Markdown report of runs")
    p.add_argument("runs", nargs="+", help="run directories (runs/<name>/<variant>) or "
                                           "experiment directories (runs/<name>)")
    p.add_argument("--out", help="report directory (default: <experiment dir>/report)")
    p.add_argument("--baseline", help="run label the others are normalised to "
                                      "(default: the first)")
    p.add_argument("--windows", metavar="T1,T2,...",
                   help="instead of the report, print FCT by flow start window [0,T1), "
                        "[T1,T2), ... (fabric seconds), mean ± 95 %% CI over the runs' seeds")
    p.add_argument("--losses", action="store_true",
                   help="instead of the report, print per run the switch drops, forward "
                        "loss, start-up overflow and the NAKs/resends in and after it "
                        "(p4cc.analysis.losses; BMv2 and sim runs)")
    p.set_defaults(func=_report)
