"""The ``p4cc`` command.  Each area registers its own subcommands; only this module exits."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from p4cc.errors import P4ccError

#: Modules that add subcommands: each has ``register(subparsers) -> None``; a subcommand
#: stores its handler as ``func`` (``func(args) -> int``).
COMMAND_MODULES = (
    "p4cc.experiment.cli",
    "p4cc.hostcc.cli",
    "p4cc.experiment.run_cli",
    "p4cc.experiment.sweep_cli",
    "p4cc.sim.cli",
    "p4cc.learn.cli",
)

#: ``p4cc bench NAME``: NAME -> "module:function"; the function takes the remaining
#: argv and yields one dict per case, printed as one JSON object per line.
BENCHMARKS = {
    "dataplane": "p4cc.bench.dataplane:run",
    "dataplane_ir": "p4cc.bench.dataplane_ir:run",
    "intcost": "p4cc.bench.intcost:run",
    "controlloop": "p4cc.bench.controlloop:run",
    "hostcc": "p4cc.bench.hostcc:run",
    "traffic": "p4cc.bench.traffic:run",
    "sim": "p4cc.bench.sim:run",
    "agents": "p4cc.bench.agents:run",
    "rlcc": "p4cc.bench.rlcc:run",
    "sweep": "p4cc.bench.sweep:run",
    "calibrate": "p4cc.bench.calibrate:run",
    "testbed": "p4cc.bench.testbed:run",
}


def _load(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _bench(args: argparse.Namespace) -> int:
    if args.name not in BENCHMARKS:
        raise P4ccError(f"unknown benchmark {args.name!r}; choose one of {sorted(BENCHMARKS)}")
    cases: Iterable[dict[str, Any]] = _load(BENCHMARKS[args.name])(list(args.rest))
    for case in cases:
        print(json.dumps(case, sort_keys=False), flush=True)
    return 0


def _topo(args: argparse.Namespace) -> int:
    from p4cc.topo.spec import parse_topo

    print(parse_topo(args.topo, args.scale).describe())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="p4cc", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("bench", help="run a benchmark; prints one JSON object per case")
    p.add_argument("name", help=f"one of {sorted(BENCHMARKS)}")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options for the benchmark")
    p.set_defaults(func=_bench)

    p = sub.add_parser("topo", help="print a topology description (no root needed)")
    p.add_argument("topo", help="e.g. leafspine,spines=2,leaves=4,hosts=4")
    p.add_argument("--scale", default="testbed", help="scale preset (p4cc.scale.SCALES)")
    p.set_defaults(func=_topo)

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


#: commands that may start bmv2 runs: their preflight measures the machine budget once
#: per BMv2 build when none is cached (p4cc.experiment.bmv2.autocal)
RUN_COMMANDS = frozenset({"run", "sweep", "testbed", "incast", "bench"})


def _register_calibrator() -> None:
    """Hand the bench layer's measurement to the bmv2 backend's preflight (the backend
    sits below the bench layer and cannot import it)."""
    from p4cc.experiment.bmv2 import autocal

    autocal.set_calibrator(_load("p4cc.bench.calibrate:calibrator"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command in RUN_COMMANDS:
        _register_calibrator()
    try:
        return int(args.func(args) or 0)
    except P4ccError as exc:
        print(f"p4cc: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("p4cc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
