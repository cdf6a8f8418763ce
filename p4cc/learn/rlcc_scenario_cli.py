"""``p4cc train rlcc --evaluate SCENARIO``: one evaluation scenario, one command.

Runs :mod:`p4cc.learn.rlcc_scenarios` for every CC of ``--compare`` (RL-CC policy names
as for ``rlcc:<name>``, or ``dcqcn``; default adpg-mlp-long (plain ``rlcc``), adpg-trees,
pi, dcqcn) at every value of ``--eval-ns``; prints one JSON line per run as it finishes
and, at the end, a markdown table; writes both to ``runs/<name>/`` (default name
``rlcc-eval-<scenario>``): ``rows.jsonl`` and ``table.md``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from p4cc.learn import rlcc_scenarios as sc

DEFAULT_COMPARE = "adpg-mlp-long,adpg-trees,pi,dcqcn"


def cc_names(text: str | None) -> list[str]:
    """``--compare`` items as CC names: ``dcqcn`` or ``rlcc:<policy>``."""
    items = [x.strip() for x in (text or DEFAULT_COMPARE).split(",") if x.strip()]
    return [x if x.startswith(("dcqcn", "rlcc:")) else f"rlcc:{x}" for x in items]


def runs(scenario: str, ccs: list[str], ns: list[int], scale: str, seed: int,
         rtts: int | None, jitter_rtts: float = 0.0,
         floor_frac: float | None = None,
         buffer_bytes: int | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(label, keyword arguments) of every run, in order (a plan: nothing runs here)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for n in ns:
        for cc in ccs:
            kw: dict[str, Any] = {"cc": cc, "scale": scale, "seed": seed,
                                  "buffer_bytes": buffer_bytes}
            if scenario != "long-short":
                kw["jitter_rtts"] = jitter_rtts
            if scenario == "many-to-one":
                out.append(("many_to_one", {**kw, "n": n, "rtts": rtts,
                                            "floor_frac": floor_frac}))
            elif scenario == "all-to-all":
                out.append(("all_to_all", {**kw, "hosts": n, "rtts": rtts or 4000}))
            elif scenario == "long-short":
                out.append(("long_short", {**kw, "shorts": n - 1}))
            else:  # operating points: DCQCN has no target -- one row
                points = (["standard"] if cc.startswith("dcqcn")
                          else list(sc.OPERATING_POINTS))
                for name in points:
                    target, beta = sc.OPERATING_POINTS[name]
                    out.append(("many_to_one", {**kw, "n": n, "rtts": rtts, "target": target,
                                                "beta": beta, "point": name}))
    return out


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}f}" if abs(v) < 1e5 else f"{v:.3g}"
    return str(v)


def table(scenario: str, rows: list[dict[str, Any]]) -> str:
    if scenario == "long-short":
        head = ["flows", "CC", "long bw before", "long bw during", "long bw after",
                "short FCT max (µs)", "recovery (µs)", "max queue (µs)", "lost bytes",
                "wall (s)"]
        keys = ["flows", "cc", "long_bw_before", "long_bw_during", "long_bw_after",
                "short_fct_max_us", "recovery_us", "ql_max_us", "lost_bytes", "wall_s"]
    else:
        first = {"all-to-all": ("hosts", "hosts")}.get(scenario, ("N", "n"))
        head = [first[0], *(["point", "target"] if scenario == "operating-points" else []),
                "CC", "SU (%)", "FR (%)", "Jain", "QL (µs)", "DR (Gbit/s)", "lost bytes",
                "RTTs", "wall (s)"]
        keys = [first[1], *(["point", "target"] if scenario == "operating-points" else []),
                "cc", "su_pct", "fr_pct", "jain", "ql_us", "dr_gbps", "lost_bytes",
                "sim_rtts", "wall_s"]
        if scenario != "all-to-all":  # many-to-one: the first half, not in DR / lost
            head.insert(-2, "lost 1st half")
            keys.insert(-2, "startup_lost_bytes")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [_fmt(r.get(k), 0 if k in ("lost_bytes", "startup_lost_bytes") else 1 if k in (
            "su_pct", "fr_pct", "ql_us", "short_fct_max_us", "recovery_us", "ql_max_us",
            "wall_s") else 3) for k in keys]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def run_scenario(args: argparse.Namespace, scale: str) -> int:
    ns = [int(x) for x in args.eval_ns.split(",") if x]
    plan = runs(args.evaluate, cc_names(args.compare), ns, scale, args.seed, args.rtts,
                args.jitter or 0.0, args.floor, args.buffer_bytes)
    out_dir = Path(args.out) / (args.name or f"rlcc-eval-{args.evaluate}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with (out_dir / "rows.jsonl").open("w") as fh:
        for fn, kw in plan:
            point = kw.pop("point", None)
            row = getattr(sc, fn)(**kw)
            if point:
                row["point"] = point
            rows.append(row)
            line = json.dumps(row, default=str)
            fh.write(line + "\n")
            fh.flush()
            print(line, flush=True)
    md = table(args.evaluate, rows)
    (out_dir / "table.md").write_text(md + "\n")
    print(md)
    return 0
