"""``p4cc train acc|pet|rlcc``: train an ECN agent or the RL-CC policy on the simulator
(torch: the ``train`` extra; ``rlcc``: p4cc.learn.rlcc_cli).

Writes ``runs/<name>/``: curves.csv, curves.png, ``<algo>.npz`` (weights for
``agents: [acc:<path>]``) and ``<algo>.json`` (command, seed, git commit, config, final
curve values).  Every config field can be set with ``--set field=value`` (``env.field``
for the environment; tuples as comma lists); ``--help-config`` lists them.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
from pathlib import Path

from p4cc.errors import P4ccError
from p4cc.learn.settings import ALGOS, apply_overrides, config_help


def _train(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise P4ccError("training needs torch: pip install -e '.[train]'") from None
    if args.algo == "rlcc":  # ADPG on the RL-CC incasts (p4cc.learn.rlcc_adpg)
        from p4cc.learn import rlcc_cli

        return rlcc_cli.run(args, apply_overrides, config_help)
    module = importlib.import_module(ALGOS[args.algo][0])
    cfg = getattr(module, ALGOS[args.algo][1])()
    env_over = {k: v for k, v in (("topo", args.topo), ("scale", args.scale),
                                  ("intervals", args.intervals)) if v is not None}
    if args.scenarios:
        env_over["scenarios"] = tuple(args.scenarios.split(","))
    cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, **env_over))
    base = {"seed": args.seed, "online_steps": args.online}
    if args.steps is not None:
        base["steps"] = args.steps
    cfg = apply_overrides(dataclasses.replace(cfg, **base), args.set)
    if args.help_config:
        print("\n".join(config_help(cfg)))
        return 0
    name = args.name or f"{args.algo}-seed{cfg.seed}" + ("-online" if cfg.online_steps else "")
    res = module.train(cfg, Path(args.out) / name, progress=not args.quiet)
    print(json.dumps({"checkpoint": str(res["checkpoint"]), "sidecar": str(res["sidecar"]),
                      "curves": str(res["curves_csv"]), "plot": str(res["curves_png"]),
                      "final": res["final"]}, default=str))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("train", help="train the ACC/PET agent or the RL-CC policy (ADPG) "
                                     "on the simulator (torch)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("algo", choices=sorted([*ALGOS, "rlcc"]))
    p.add_argument("--steps", type=int, help="offline training intervals")
    p.add_argument("--online", type=int, nargs="?", const=5000, default=0, metavar="STEPS",
                   help="then fine-tune online for STEPS intervals (default 5000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--topo", help="simulated fabric (default leafspine,spines=2,leaves=2,"
                                  "hosts=4)")
    p.add_argument("--scale", help="scale preset (default paper)")
    p.add_argument("--intervals", type=int, help="intervals per episode")
    p.add_argument("--scenarios", help="comma list of websearch,datamining,incast,storage")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any config field (env.FIELD for the environment)")
    p.add_argument("--name", help="run directory name under --out")
    p.add_argument("--out", default="runs", help="parent directory of the run")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--help-config", action="store_true", help="list config fields and exit")
    from p4cc.learn.rlcc_cli import add_args

    add_args(p)
    p.set_defaults(func=_train)
