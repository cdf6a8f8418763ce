"""``p4cc train rlcc``: ADPG training of the RL-CC policy (p4cc.learn.rlcc_adpg).

Writes ``runs/<name>/``: curves.csv, curves.png, ``rlcc-adpg-<arch>.npz`` (load with
``host_cc: rlcc:<path>``) and its sidecar ``.json`` (command, seed, git commit, config,
final training figures, probe decisions and, unless ``--eval-ns ''``, the evaluation on
N→1 incasts against the issue's bar).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from p4cc.learn.rlcc_export import add_to_sidecar


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", choices=("lstm", "mlp"), help="rlcc: policy network (lstm)")
    p.add_argument("--updates", type=int, help="rlcc: policy updates")
    p.add_argument("--eval-ns", default="2,4,8,16,32,64,128,256",
                   help="rlcc: N of the N→1 evaluation after training ('' = none)")
    p.add_argument("--compare", metavar="NAMES",
                   help="rlcc: instead of training, compare RL-CC policies (comma list of "
                        "rlcc:<name> names or files, e.g. pi,adpg-mlp) and DCQCN on N→1")
    p.add_argument("--evaluate", metavar="SCENARIO",
                   choices=("many-to-one", "all-to-all", "long-short", "operating-points"),
                   help="rlcc: instead of training, run one evaluation scenario "
                        "(p4cc.learn.rlcc_scenarios) for the CCs of --compare (default "
                        "adpg-mlp-long,adpg-trees,pi,dcqcn) at each --eval-ns (flows; hosts for "
                        "all-to-all; flows in all for long-short; N→1 for operating-points)")
    p.add_argument("--rtts", type=int,
                   help="rlcc --evaluate: base RTTs per run (default: the scenario's)")
    p.add_argument("--jitter", type=float, metavar="RTTS",
                   help="rlcc --evaluate: long flows start uniformly in [0, RTTS) base RTTs "
                        "(seeded; default 0: together, fair by symmetry)")
    p.add_argument("--floor", type=float, metavar="FRAC",
                   help="rlcc --evaluate many-to-one: RL-CC rate floor / line rate (default "
                        "rlcc.MIN_RATE_FRAC = 1 Mb/s / 25 Gb/s)")
    p.add_argument("--buffer-bytes", type=int, metavar="BYTES",
                   help="rlcc --evaluate: every port's buffer (default: the scale's, 1 MB "
                        "at paper scale; Tessler et al.'s long-short allocates 5 MB)")
    p.add_argument("--distill", metavar="TEACHER_NPZ",
                   help="rlcc: instead of training, distil this windowed MLP policy into "
                        "<= 10 trees of depth <= 4 (LightGBM) and evaluate both")


def run(args: argparse.Namespace, apply_overrides: Callable[[Any, list[str]], Any],
        config_help: Callable[[Any], list[str]]) -> int:
    from p4cc.learn import rlcc_adpg, rlcc_eval  # torch: only when training

    if args.distill:  # --set and --help-config then address DistillConfig
        return _distill(args, apply_overrides, config_help)
    cfg = rlcc_adpg.AdpgConfig(seed=args.seed)
    over = {k: v for k, v in (("arch", args.arch), ("updates", args.updates or args.steps),
                              ("scale", args.scale)) if v is not None}
    cfg = apply_overrides(dataclasses.replace(cfg, **over), args.set)
    if args.help_config:
        print("\n".join(config_help(cfg)))
        return 0
    if args.evaluate:
        from p4cc.learn.rlcc_scenario_cli import run_scenario

        return run_scenario(args, cfg.scale)
    if args.compare:
        return _compare(args, cfg.scale)
    name = args.name or f"rlcc-{cfg.arch}-seed{cfg.seed}"
    res = rlcc_adpg.train(cfg, Path(args.out) / name, progress=not args.quiet)
    summary = None
    if args.eval_ns:
        ns = tuple(int(x) for x in args.eval_ns.split(",") if x)
        rows = rlcc_eval.evaluate(res["model"].export(), ns, scale=cfg.scale,
                                  signal=rlcc_adpg.signal_of(cfg))
        summary = rlcc_eval.summary(rows)
        add_to_sidecar(res["sidecar"], "evaluation", summary)
        print(rlcc_eval.table(rows))
    print(json.dumps({"checkpoint": str(res["checkpoint"]), "sidecar": str(res["sidecar"]),
                      "curves": str(res["curves_csv"]), "plot": str(res["curves_png"]),
                      "final": res["final"],
                      "meets_bar": summary["all_meet_bar"] if summary else None}, default=str))
    return 0


def _distill(args: argparse.Namespace, apply_overrides: Callable[[Any, list[str]], Any],
             config_help: Callable[[Any], list[str]]) -> int:
    from p4cc.errors import ConfigError
    from p4cc.hostcc.rlcc_policies import MlpPolicy, load_policy
    from p4cc.learn import rlcc_distill, rlcc_eval
    from p4cc.learn.rlcc_export import probe_decisions
    from p4cc.learn.runlog import git_commit

    dcfg = apply_overrides(rlcc_distill.DistillConfig(seed=args.seed), args.set)
    if args.help_config:
        print("\n".join(config_help(dcfg)))
        return 0
    scale = args.scale or "paper"
    teacher = load_policy(args.distill)
    if not isinstance(teacher, MlpPolicy):
        raise ConfigError(f"{args.distill}: the teacher must be a windowed MLP policy")
    out_dir = Path(args.out) / (args.name or "rlcc-distill")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "rlcc-distilled-trees.json"
    student, stats = rlcc_distill.distill(teacher, path, dcfg, teacher_file=Path(args.distill))
    ns = tuple(int(x) for x in args.eval_ns.split(",") if x)
    rows = []
    for pol, who in ((teacher, "teacher"), (student, "student")):
        for r in rlcc_eval.evaluate(pol, ns, scale=scale, staggers=(0.0,)):
            rows.append({**r, "policy": who})
    side = path.with_suffix(".sidecar.json")
    side.write_text(json.dumps({"command": " ".join(["p4cc", *sys.argv[1:]]),
                                "policy_file": path.name, "teacher": str(args.distill),
                                "seed": args.seed, "config": dataclasses.asdict(dcfg),
                                "git_commit": git_commit(), "agreement": stats,
                                "evaluation": rlcc_eval.summary(rows),
                                "probe": {"decisions": probe_decisions(student).tolist()}},
                               indent=1, default=str) + "\n")
    print(rlcc_eval.table(rows))
    print(json.dumps({"student": str(path), "sidecar": str(side), "agreement": stats}))
    return 0


def _compare(args: argparse.Namespace, scale: str) -> int:
    from p4cc.hostcc import rlcc
    from p4cc.hostcc.cc import policy_by_name
    from p4cc.learn import rlcc_eval
    from p4cc.scale import get_scale

    sc = get_scale(scale)
    params = rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc))
    pols = {f"rlcc:{nm}": policy_by_name(nm, params) for nm in args.compare.split(",")}
    ns = tuple(int(x) for x in args.eval_ns.split(",") if x)
    rows = rlcc_eval.compare(pols, ns, scale=scale, seed=args.seed)
    print(rlcc_eval.compare_table(rows))
    return 0
