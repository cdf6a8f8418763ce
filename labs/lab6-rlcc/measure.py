"""Lab 6 measurements: DCQCN against the learned RL-CC policy on an N→1 incast, and the
policy under another target/β.  Writes runs/lab6/<step>/result.json.

    python measure.py compare                  # simulator (p4cc.sim): DCQCN and RL-CC
    sudo python measure.py compare --backend bmv2   # the same on BMv2 (incast-*.yaml)
    python measure.py change                   # RL-CC at prediction.yaml's target/β

``change`` refuses to run before prediction.yaml holds a prediction, and keeps a copy of
it in the run directory: the check compares your prediction with what was measured.

Simulator: the N→1 incast of p4cc.sim.validate (``rlcc_fixed_point``: N flows at the
line rate into one port, measured over the second half of max(4000, 32·N) base RTTs;
``dcqcn_fairness``: the same incast with DCQCN hosts and the VENDOR ECN setting).  The
learned policy is ``rlcc:adpg-mlp`` (ADPG, docs/learning.md §RL-CC), never the
hand-made PI baseline ``rlcc:pi``.  target and β enter only through the δ the hosts feed
the policy (δ = target − max(inflation − β, 0)·√rate), so changing them needs no
retraining.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

LAB = Path(__file__).resolve().parent
N = 8  # senders of the incast (the bmv2 specs: star,hosts=9, 8 senders -> h9)
POLICY = "adpg-mlp"  # rlcc:adpg-mlp, trained with ADPG (p4cc/hostcc/data/rlcc-adpg-mlp.json)
SPECS = {"dcqcn": "incast-dcqcn.yaml", f"rlcc:{POLICY}": "incast-rlcc.yaml"}


def _policy() -> Any:
    from p4cc.hostcc import rlcc
    from p4cc.hostcc.cc import policy_by_name
    from p4cc.scale import get_scale

    sc = get_scale("paper")
    return policy_by_name(POLICY, rlcc.RlccParams(sc.link_rate_bps, rlcc.norm_rtt_s(sc)))


def rlcc_row(target: float, beta: float) -> dict[str, Any]:
    """RL-CC on the simulator's N→1 incast at this target/β (paper scale)."""
    from p4cc.hostcc import rlcc
    from p4cc.scale import get_scale
    from p4cc.sim.validate import rlcc_fixed_point

    sc = get_scale("paper")
    r = rlcc_fixed_point(N, policy=_policy(), target=target, beta=beta)
    # queue = (inflation − 1) normaliser-RTTs of line-rate data (rlcc.norm_rtt_s)
    q = max(r["rtt_inflation"] * rlcc.norm_rtt_s(sc) - sc.base_rtt_s, 0.0) * sc.link_rate_bps / 8
    return {"utilization": r["utilization"], "jain": r["jain"], "queue_kb": q / 1000,
            "rtt_inflation": r["rtt_inflation"], "lost_bytes": r["lost_bytes"],
            "target": target, "beta": beta, "formula": target * math.sqrt(N) + beta}


def dcqcn_row() -> dict[str, Any]:
    from p4cc.sim.validate import dcqcn_fairness

    d = dcqcn_fairness(N)
    return {"utilization": d["utilization"], "jain": d["jain"],
            "queue_kb": d["qlen_avg_bytes"] / 1000, "drops_pkts": float(d["drops_pkts"])}


def spec_rows(out: Path, backend: str = "bmv2") -> dict[str, dict[str, Any]]:
    """Both incast specs (p4cc run on ``backend``): the bottleneck port's (the busiest
    one's) utilisation and average queue, Jain over the flows, drops."""
    from p4cc.analysis.metrics import fairness
    from p4cc.analysis.runs import open_run

    rows = {}
    for cc, spec in SPECS.items():
        run_dir = out / cc.replace(":", "_")
        subprocess.run([sys.executable, "-m", "p4cc", "run", str(LAB / spec), "--backend",
                        backend, "--out", str(run_dir)], check=True)
        run = open_run(next(p for p in sorted(run_dir.iterdir()) if p.is_dir()))
        tel = run.telemetry
        port = tel.groupby(["switch", "port"])["tx_bps"].mean().idxmax()
        busy = tel[(tel["switch"] == port[0]) & (tel["port"] == port[1])]
        rows[cc] = {"utilization": float(busy["utilization"].mean()), "jain": fairness(run),
                    "queue_kb": float(busy["qlen_avg_bytes"].mean()) / 1000,
                    "drops_pkts": float(tel["drops_pkts"].sum()), "port": f"{port[0]}:{port[1]}"}
    return rows


def read_prediction(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text()) or {}
    pred = doc.get("prediction") or {}
    todo = [k for k in ("target", "beta") if not isinstance(doc.get(k), (int, float))]
    todo += [f"prediction.{k}" for k in ("rtt_inflation", "utilization", "rtt_inflation_value")
             if str(pred.get(k, "TODO")).strip().upper() == "TODO"]
    if todo:
        sys.exit(f"prediction.yaml: fill in {todo} first -- predict, then measure "
                 "(README step 4)")
    return doc


def main() -> int:
    from p4cc.hostcc.rlcc import DEFAULT_BETA, DEFAULT_TARGET

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("compare", "change"))
    ap.add_argument("--backend", choices=("sim", "bmv2"), default="sim",
                    help="compare: the simulator (default) or BMv2 (root)")
    ap.add_argument("--runs", type=Path, default=LAB / "runs" / "lab6")
    ap.add_argument("--prediction", type=Path, default=LAB / "prediction.yaml")
    args = ap.parse_args()
    doc = read_prediction(args.prediction) if args.step == "change" else {}
    out = args.runs / args.step
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if args.step == "compare":
        rows = (spec_rows(out) if args.backend == "bmv2" else
                {"dcqcn": dcqcn_row(), f"rlcc:{POLICY}": rlcc_row(DEFAULT_TARGET, DEFAULT_BETA)})
        result: dict[str, Any] = {"step": "compare", "backend": args.backend, "n": N, **rows}
    else:
        shutil.copy(args.prediction, out / "prediction.yaml")  # what you predicted, before
        result = {"step": "change", "backend": "sim", "n": N,
                  "default": rlcc_row(DEFAULT_TARGET, DEFAULT_BETA),
                  "changed": rlcc_row(float(doc["target"]), float(doc["beta"]))}
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
