"""CHAMELEON's evaluation, the command (docs/results.md, "CHAMELEON"); its steps are in
p4cc.experiment.chameleon_sim_eval (simulator) and chameleon_eval_bmv2 (BMv2).

The poster's scenario (§3): an all-to-all of long flows on a two-tier Clos.  Per seed:

1. **tune**: the agent ``chameleon`` runs on the sim backend (a run directory as
   ``p4cc run`` writes it) from the NIC vendor's defaults while the all-to-all repeats
   once per long period (a training job's collective), until the tuner stops (the run
   ends there: the agent option ``end=1``) or ``rounds`` long periods pass; its final
   setting and the round it stopped at are read from the run's ``chameleon`` table;
2. **evaluate**: the all-to-all of ``size`` bytes per flow is run to completion under
   each setting -- ``default`` (NVIDIA's DCQCN parameters, NVIDIA's 4 µs CNP interval,
   the vendor's ECN Kmin 30 KB / Kmax 270 KB / Pmax 0.1), ``expert`` (the HPCC authors'
   DCQCN configuration: the hpcc-ns3 set, Kmin 100 KB / Kmax 400 KB / Pmax 0.2, 4 µs)
   and ``chameleon`` (the tuned one) -- for tail (p99) FCT and the average per-flow
   throughput (size / FCT, as a fraction of the host line rate).

``python -m p4cc.experiment.chameleon_eval --seeds 1 2 3 --out runs/chameleon_eval``
runs the seeds as tasks of ``p4cc sweep``'s executors (a local process pool, one seed per
CPU, or Ray: ``--executor ray [--address ...]``; p4cc.experiment.chameleon_tasks), writes
``results-seed<k>.json`` per seed (a seed already there with the same arguments is not
run again) and ``results-seeds-<seeds>.json``, and prints a Markdown table (mean and
95 % CI over seeds); ``--merge <json files>`` prints the table of results files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.stats import mean_ci
from p4cc.errors import ConfigError, P4ccError
from p4cc.experiment import chameleon_tasks as tasks_mod
from p4cc.experiment.sweep_exec import execute
from p4cc.scale import get_scale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="leafspine,spines=2,leaves=4,hosts=5")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--size", type=int, default=500_000, help="bytes per flow")
    ap.add_argument("--long", type=float, default=None,
                    help="long period (s); default 5 ms paper time (scaled on bmv2)")
    ap.add_argument("--rounds", type=int, default=120, help="tuning rounds at most")
    ap.add_argument("--options", default="", help="more chameleon agent options")
    ap.add_argument("--open-loop", action="store_true",
                    help="tuning runs repeat the all-to-all every long period whatever "
                         "is still running (before session 16); default: a pair's next "
                         "flow also waits for its previous one (chameleon_workload)")
    ap.add_argument("--backend", choices=("sim", "bmv2"), default="sim",
                    help="sim: paper scale; bmv2: testbed scale, every step a real run "
                         "(p4cc.experiment.chameleon_eval_bmv2; --size in testbed bytes, "
                         "--long defaults to 5 ms paper time scaled)")
    ap.add_argument("--scale", default="testbed",
                    help="bmv2: the scale of the runs (testbed, testbed-5m, ...)")
    ap.add_argument("--iterations", type=int, default=3,
                    help="bmv2: all-to-alls per evaluation run, one every 2 long periods")
    ap.add_argument("--out", default="runs/chameleon_eval",
                    help="results-seed<k>.json per seed (a seed already there with the "
                         "same arguments is not run again) and results-seeds-<seeds>.json")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="only print the table of these results files (seeds run apart)")
    ap.add_argument("--executor", choices=("pool", "ray"), default="pool",
                    help="where the seeds run: a local process pool, or Ray tasks "
                         "(p4cc sweep's executors; Ray is an optional extra)")
    ap.add_argument("--workers", type=int, default=None,
                    help="seeds at a time (default: one per CPU on sim, one on bmv2)")
    ap.add_argument("--address", default=None, help="ray: the cluster to join")
    a = ap.parse_args(argv)
    if a.merge:
        parts = [json.loads(Path(f).read_text()) for f in a.merge]
        print(table({"tune": [t for p in parts for t in p["tune"]],
                     "eval": [e for p in parts for e in p["eval"]]}))
        return 0
    if a.backend == "bmv2":
        get_scale(a.scale)  # an unknown scale is refused before anything is written
    if a.address and a.executor != "ray":
        raise ConfigError("--address needs --executor ray")
    out = Path(a.out).resolve()
    tasks, done = tasks_mod.plan(vars(a), a.seeds, out)
    if done:
        print(f"seeds {done}: results in {out} kept (same arguments)", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    failed = [r for r in execute(tasks, a.executor, a.workers, a.address, sys.stderr)
              if not r.ok]
    for r in failed:
        print(f"{r.label} failed: {r.error}", file=sys.stderr)
    res = tasks_mod.gather(out, a.seeds)
    name = "results-seeds-" + "-".join(str(x) for x in a.seeds) + ".json"
    (out / name).write_text(json.dumps({"args": vars(a), **res}, indent=1, default=float))
    if res["eval"]:
        print(table(res))
    return 1 if failed else 0


def table(res: dict[str, Any]) -> str:
    """Mean ± 95 % CI over seeds per setting; runs judged unfaithful (bmv2) are left
    out, and the last column says how many runs each row rests on."""
    ev = pd.DataFrame(res["eval"])
    bmv2 = "faithful" in ev.columns
    lines = ["| setting | p99 FCT (ms), mean ± 95 % CI | mean flow throughput (× line "
             "rate), mean ± 95 % CI |" + (" faithful runs |" if bmv2 else ""),
             "|---|---|---|" + ("---|" if bmv2 else "")]
    for name, g in ev.groupby("setting", sort=False):
        ok = g[g["faithful"].astype(bool)] if bmv2 else g
        cells = []
        for col in ("fct_p99_ms", "thr_mean"):
            m, half, _n = mean_ci(ok[col].to_numpy()) if len(ok) else (np.nan, np.nan, 0)
            cells.append(f"{m:.4g} ± {half:.2g}")
        if bmv2:
            cells.append(f"{len(ok)} of {len(g)}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    rounds = [t["rounds"] for t in res["tune"]]
    lines.append(f"\nrounds to converge per seed: {rounds}")
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except P4ccError as exc:  # bad arguments or results that do not match: no traceback
        print(f"chameleon_eval: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
