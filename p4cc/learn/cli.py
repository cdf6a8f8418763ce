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
from typing import Any

from p4cc.errors import ConfigError, P4ccError

ALGOS = {"acc": ("p4cc.learn.acc", "AccConfig"), "pet": ("p4cc.learn.pet", "PetConfig")}


def cast_value(text: str, like: Any) -> Any:
    """``text`` as the type of ``like`` (a config field's default)."""
    if isinstance(like, bool):
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"expected true/false, got {text!r}")
        return text.lower() in ("true", "1", "yes")
    if isinstance(like, tuple):
        parts = [p for p in text.split(",") if p]
        if like and isinstance(like[0], tuple):  # (("websearch", 0.3), ...): name=value
            pairs = [p.split("=", 1) for p in parts]
            return tuple((k, type(like[0][1])(v)) for k, v in pairs)
        kind = type(like[0]) if like else str
        return tuple(kind(p) for p in parts)
    return type(like)(text)


def apply_overrides(cfg: Any, items: list[str], prefix: str = "") -> Any:
    """``field=value`` / ``env.field=value`` onto a frozen config dataclass; errors name
    the field with its full path (``prefix``: the path of ``cfg`` itself, e.g. "env.")."""
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects field=value, got {prefix + item!r}")
        head, _, sub = key.partition(".")
        names = {f.name for f in dataclasses.fields(cfg)}
        if head not in names:
            raise ConfigError(f"unknown config field {prefix + head!r}; see --help-config")
        if sub:
            inner = apply_overrides(getattr(cfg, head), [f"{sub}={text}"], f"{prefix}{head}.")
            cfg = dataclasses.replace(cfg, **{head: inner})
            continue
        try:
            value = cast_value(text, getattr(cfg, head))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--set {prefix}{item}: {exc}") from exc
        cfg = dataclasses.replace(cfg, **{head: value})
    return cfg


def config_help(cfg: Any, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and f.name == "env":
            out += config_help(value, prefix="env.")
            continue
        out.append(f"  {prefix}{f.name} = {value!r}\n      {f.metadata.get('help', '')}")
    return out


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
