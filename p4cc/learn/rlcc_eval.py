"""Evaluate an RL-CC policy against the issue's bar on the simulator's N→1 incasts.

Each N runs :func:`p4cc.sim.validate.rlcc_fixed_point` (the hosts' decision clock,
flows starting at the line rate, measured over the second half): utilisation, Jain's
index, lost bytes, and RTT inflation against the fixed point target·√N + β (NVIDIA
RL-CC eq. 2).  The bar (issue 11): utilisation >= 0.9, Jain >= 0.95, no loss.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from p4cc.hostcc.rlcc_policy_base import Policy
from p4cc.sim.validate import rlcc_fixed_point

BAR_UTIL, BAR_JAIN = 0.9, 0.95
DEFAULT_NS = (2, 4, 8, 16, 32, 64, 128, 256)
#: start patterns: all at once, and flow i starting i·10 base RTTs after flow 0 (into
#: the flows already there, at the line rate) -- fairness must then be reached.
DEFAULT_STAGGERS = (0.0, 10.0)


def evaluate(policy: Policy | None, ns: tuple[int, ...] = DEFAULT_NS, scale: str = "paper",
             rtts: int | None = None, seed: int = 0,
             staggers: tuple[float, ...] = DEFAULT_STAGGERS,
             signal: Literal["rtt", "qdepth"] = "rtt") -> list[dict[str, Any]]:
    """One row per (start pattern, N) (``policy=None``: the PI baseline), ``meets_bar``;
    ``signal="qdepth"``: the INT variant's input."""
    rows = []
    for stagger, n in ((s, n) for s in staggers for n in ns):
        r = rlcc_fixed_point(n, scale=scale, rtts=rtts, policy=policy, seed=seed,
                             stagger_rtts=stagger, signal=signal)
        r["inflation_error"] = r["rtt_inflation"] / r["expected_inflation"] - 1.0
        r["meets_bar"] = bool(r["utilization"] >= BAR_UTIL and r["jain"] >= BAR_JAIN
                              and r["lost_bytes"] == 0.0)
        rows.append(r)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Compact figures for a sidecar: per N (util, Jain, lost, inflation, expected)."""
    return {"all_meet_bar": all(r["meets_bar"] for r in rows),
            "rows": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
                      if k in ("n", "stagger_rtts", "utilization", "jain", "lost_bytes",
                               "rtt_inflation", "expected_inflation", "meets_bar", "policy")}
                     for r in rows]}


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of the rows."""
    out = ["| N | stagger (RTTs) | policy | utilisation | Jain | lost bytes | RTT inflation "
           "| target·√N+β | bar |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['stagger_rtts']:g} | {r['policy']} | "
                   f"{r['utilization']:.3f} | {r['jain']:.3f} | "
                   f"{r['lost_bytes']:.0f} | {r['rtt_inflation']:.3f} | "
                   f"{r['expected_inflation']:.3f} | {'yes' if r['meets_bar'] else 'no'} |")
    return "\n".join(out)


def compare(policies: Mapping[str, Policy | None], ns: tuple[int, ...], scale: str = "paper",
            dcqcn: bool = True, seed: int = 0) -> list[dict[str, Any]]:
    """Many-to-one at each N under each RL-CC policy (all flows starting together at the
    line rate) and under DCQCN (``dcqcn_fairness``, VENDOR ECN setting): utilisation,
    Jain, lost bytes and mean queue (bytes; RL-CC's from its RTT inflation)."""
    from p4cc.hostcc import rlcc
    from p4cc.scale import get_scale
    from p4cc.sim.validate import dcqcn_fairness

    sc = get_scale(scale)
    norm = rlcc.norm_rtt_s(sc)
    rows = []
    for n in ns:
        for name, pol in policies.items():
            r = rlcc_fixed_point(n, scale=scale, policy=pol, seed=seed)
            q = max(r["rtt_inflation"] * norm - sc.base_rtt_s, 0.0) * sc.link_rate_bps / 8
            rows.append({"n": n, "cc": name, "utilization": r["utilization"], "jain": r["jain"],
                         "lost_bytes": r["lost_bytes"], "queue_bytes": q})
        if dcqcn:
            d = dcqcn_fairness(n, scale=scale, rtts=max(3000, 32 * n), seed=seed)
            rows.append({"n": n, "cc": "dcqcn", "utilization": d["utilization"],
                         "jain": d["jain"], "lost_bytes": float(d["drops_pkts"] * sc.pkt_bytes),
                         "queue_bytes": d["qlen_avg_bytes"]})
    for r in rows:
        r["meets_bar"] = bool(r["utilization"] >= BAR_UTIL and r["jain"] >= BAR_JAIN
                              and r["lost_bytes"] == 0.0)
    return rows


def compare_table(rows: list[dict[str, Any]]) -> str:
    out = ["| N | CC | utilisation | Jain | lost bytes | mean queue (bytes) | bar |",
           "|---|---|---|---|---|---|---|"]
    out += [f"| {r['n']} | {r['cc']} | {r['utilization']:.3f} | {r['jain']:.3f} | "
            f"{r['lost_bytes']:.0f} | {r['queue_bytes']:.0f} | "
            f"{'yes' if r['meets_bar'] else 'no'} |" for r in rows]
    return "\n".join(out)
