"""``p4cc sim ...``: theory checks of the simulator and a quick single run."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _validate(args: argparse.Namespace) -> int:
    from p4cc.sim import validate

    if args.check == "all":
        results = validate.run_all(quick=not args.full)
    elif args.check == "dcqcn":
        results = [validate.dcqcn_fairness(args.n, scale=args.scale)]
    elif args.check == "rlcc":
        results = [validate.rlcc_fixed_point(args.n, scale=args.scale)]
    else:
        results = [validate.leafspine_websearch(scale=args.scale)]
    for r in results:
        print(json.dumps(r), flush=True)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("sim", help="simulator: theory checks (p4cc sim validate)")
    sub = p.add_subparsers(dest="sim_command", required=True, metavar="SUBCOMMAND")
    v = sub.add_parser("validate", help="run the theory/scale checks, one JSON line each")
    v.add_argument("check", nargs="?", default="all",
                   choices=["all", "dcqcn", "rlcc", "leafspine"])
    v.add_argument("--n", type=int, default=8, help="flows for dcqcn/rlcc")
    v.add_argument("--scale", default="paper", help="scale preset")
    v.add_argument("--full", action="store_true", help="longer runs, more N, the 288 hosts")
    v.set_defaults(func=_validate)
