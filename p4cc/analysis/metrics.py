"""Metrics of stored runs as pandas tables (the papers' evaluation metrics).

* FCT average / median / p95 / p99 / p99.9 by size class: mice < 100 KB, elephants
  >= 10 MB (PET §5.5.1 Fig. 4: "(0,100KB]" and "[10MB, inf)"; ACC §5.4), both multiplied
  by the run's flow-size scale when the workload sizes were scaled (the report says so).
* HPCC-style slowdown (REFERENCE §4): FCT / (base_RTT + total_bytes*8/rate), total bytes
  including per-packet headers, clipped at >= 1; flows sorted by size and cut into 5 %
  groups by flow count, median / p95 / p99 per group.
* Queue length average and standard deviation (ACC §5.2, PET Table I), link utilisation,
  ECN marks, drops, Jain's fairness index, IOPS of storage runs (ACC §5.3.1).
* ``compare``: several runs side by side, normalised to a baseline run as the papers do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.runs import Run
from p4cc.errors import P4ccError
from p4cc.hostcc import wire

MICE_BYTES = 100_000  # mice < 100 KB (ACC §5; PET Fig. 4 (b)(c) says (0, 100KB])
ELEPHANT_BYTES = 10_000_000  # elephants >= 10 MB (PET Fig. 4 (d): [10MB, inf))
#: Per-packet header bytes of the p4cc transport on the wire: Ethernet 14 + IPv4 20 +
#: UDP 8 + BTH 12 + p4cc data header 8 + ICRC 4 = 66 (p4cc.hostcc.wire, docs/hostcc.md);
#: HPCC's analysis adds its own header size per packet the same way.
HEADER_BYTES = wire.DATA_FRAME_OVERHEAD_BYTES
STORAGE_CLASSES = ("read", "write")


def percentile(x: Sequence[float] | np.ndarray | pd.Series, q: float) -> float:
    """Linear-interpolated percentile (numpy's default), NaN for no data."""
    a = np.asarray(x, dtype=float)
    a = a[~np.isnan(a)]
    return float(np.percentile(a, q)) if len(a) else math.nan


def jain(x: Sequence[float] | np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2); 1 = equal shares."""
    a = np.asarray(x, dtype=float)
    if len(a) == 0 or not np.any(a):
        return math.nan
    return float(a.sum() ** 2 / (len(a) * np.square(a).sum()))


def size_scale_of(run: Run) -> float:
    """The flow-size scale of the run's sized workloads (1 if none or if they differ)."""
    scales = {float(w.get("size_scale", 1.0)) for w in run.meta.get("workloads", [])
              if w.get("type") != "bulk"}
    return scales.pop() if len(scales) == 1 else 1.0


def class_thresholds(run: Run) -> tuple[float, float]:
    s = size_scale_of(run)
    return MICE_BYTES * s, ELEPHANT_BYTES * s


def sized_flows(run: Run) -> pd.DataFrame:
    """Completed flows with a size (not bulk), with ``fct_s`` as float."""
    f = run.flows
    if f.empty:
        return f
    f = f[(f["cls"] != "bulk") & f["completed"].astype(str).isin(["True", "true", "1"])]
    return f.assign(fct_s=f["fct_s"].astype(float))


def _stats(fct: pd.Series) -> dict[str, float]:
    return {"count": len(fct), "avg_s": float(fct.mean()) if len(fct) else math.nan,
            "p50_s": percentile(fct, 50), "p95_s": percentile(fct, 95),
            "p99_s": percentile(fct, 99), "p999_s": percentile(fct, 99.9)}


def fct_by_class(flows: pd.DataFrame, mice_bytes: float, elephant_bytes: float) -> pd.DataFrame:
    """FCT statistics for all flows, mice (< mice_bytes), medium, elephants (>= elephant)."""
    if flows.empty:
        return pd.DataFrame(columns=["count", "avg_s", "p50_s", "p95_s", "p99_s", "p999_s"])
    size = flows["size_bytes"]
    groups = {"all": flows, "mice": flows[size < mice_bytes],
              "medium": flows[(size >= mice_bytes) & (size < elephant_bytes)],
              "elephant": flows[size >= elephant_bytes]}
    return pd.DataFrame({k: _stats(v["fct_s"]) for k, v in groups.items()}).T


def fct_by_size(flows: pd.DataFrame, max_sizes: int = 12) -> pd.DataFrame:
    """FCT statistics per distinct flow size, for workloads with a few fixed sizes (ACC
    Fig. 7: {1K, 10K, 100K, 1M, 10M}); empty if there are more than ``max_sizes``."""
    if flows.empty or flows["size_bytes"].nunique() > max_sizes:
        return pd.DataFrame()
    out = pd.DataFrame({s: _stats(g["fct_s"]) for s, g in flows.groupby("size_bytes")}).T
    out.index.name = "size_bytes"
    return out


def ideal_fct(size_bytes: np.ndarray, rate_bps: float, base_rtt_s: float | np.ndarray,
              pkt_bytes: int, header_bytes: int = HEADER_BYTES) -> np.ndarray:
    """base_RTT + total_bytes*8/rate with total bytes = payload + headers per packet."""
    payload = pkt_bytes - header_bytes
    if payload <= 0:
        raise P4ccError(f"packet size {pkt_bytes} B leaves no payload after {header_bytes} B "
                        f"of headers")
    size = np.asarray(size_bytes, dtype=float)
    pkts = np.maximum(1, np.ceil(size / payload))
    return base_rtt_s + (size + pkts * header_bytes) * 8.0 / rate_bps


def slowdown(flows: pd.DataFrame, rate_bps: float, base_rtt_s: float, pkt_bytes: int,
             header_bytes: int = HEADER_BYTES) -> pd.Series:
    """HPCC slowdown per flow, clipped at >= 1; a ``base_rtt_s`` column overrides the
    run-wide base RTT for each flow where it is a number."""
    rtt: Any = base_rtt_s
    if "base_rtt_s" in flows:
        per_flow = flows["base_rtt_s"].to_numpy(float)
        rtt = np.where(np.isfinite(per_flow), per_flow, base_rtt_s)
    ideal = ideal_fct(flows["size_bytes"].to_numpy(), rate_bps, rtt, pkt_bytes, header_bytes)
    return pd.Series(np.maximum(1.0, flows["fct_s"].to_numpy(float) / ideal),
                     index=flows.index, name="slowdown")


def slowdown_groups(flows: pd.DataFrame, sd: pd.Series, groups: int = 20) -> pd.DataFrame:
    """Sort by size, cut into ``groups`` equal-count groups (20 = 5 % each), and give
    the size range, median, p95 and p99 slowdown of each group."""
    cols = ["group", "count", "size_min", "size_max", "p50", "p95", "p99"]
    n = len(flows)
    if n == 0:
        return pd.DataFrame(columns=cols)
    order = np.argsort(flows["size_bytes"].to_numpy(), kind="stable")
    size = flows["size_bytes"].to_numpy()[order]
    s = sd.to_numpy()[order]
    gid = (np.arange(n) * groups) // n
    rows = []
    for g in range(groups):
        m = gid == g
        if not m.any():
            continue
        rows.append({"group": g, "count": int(m.sum()), "size_min": int(size[m].min()),
                     "size_max": int(size[m].max()), "p50": percentile(s[m], 50),
                     "p95": percentile(s[m], 95), "p99": percentile(s[m], 99)})
    return pd.DataFrame(rows, columns=cols)


def queue_stats(telemetry: pd.DataFrame) -> pd.DataFrame:
    """Per switch port: queue average/std (of the per-interval averages), max, mean
    utilisation, marked and dropped packets, mark fraction."""
    if telemetry.empty:
        return pd.DataFrame()
    g = telemetry.groupby(["switch", "port"])
    out = pd.DataFrame({
        "qlen_avg_bytes": g["qlen_avg_bytes"].mean(),
        "qlen_std_bytes": g["qlen_avg_bytes"].std(ddof=0),
        "qlen_max_bytes": g["qlen_max_bytes"].max(),
        "utilization": g["utilization"].mean(),
        "tx_pkts": g["tx_pkts"].sum(),
        "marked_pkts": g["tx_marked_pkts"].sum(),
        "drops_pkts": g["drops_pkts"].sum(),
    })
    out["mark_fraction"] = out["marked_pkts"] / out["tx_pkts"].where(out["tx_pkts"] > 0)
    return out


def fairness(run: Run) -> float:
    """Jain's index over bulk-flow throughputs if the run has bulk flows, else over the
    goodput of each sending host."""
    f = run.flows
    if f.empty:
        return math.nan
    b = f[f["cls"] == "bulk"]
    if len(b):
        dur = (b["end_s"].astype(float) - b["start_s"].astype(float)).replace(0, np.nan)
        return jain((b["bytes_rx"].astype(float) / dur).dropna().to_numpy())
    return jain(f.groupby("src")["bytes_rx"].sum().to_numpy(float))


def iops(run: Run) -> pd.DataFrame:
    """Completed IOs per second by storage tag and direction (ACC §5.3.1's metric)."""
    f = sized_flows(run)
    if f.empty or not f["cls"].isin(STORAGE_CLASSES).any():
        return pd.DataFrame(columns=["tag", "cls", "ios", "iops"])
    dur = float(run.meta.get("duration_s", 0)) or float(f["end_s"].max())
    s = f[f["cls"].isin(STORAGE_CLASSES)]
    out = s.groupby(["tag", "cls"]).size().rename("ios").reset_index()
    total = s.groupby("tag").size().rename("ios").reset_index().assign(cls="all")
    out = pd.concat([out, total], ignore_index=True)
    out["iops"] = out["ios"] / dur
    return out


def summary(run: Run) -> dict[str, float]:
    """Headline numbers of one run (the rows of the comparison table)."""
    scale = run.meta.get("scale", {})
    mice, eleph = class_thresholds(run)
    flows = sized_flows(run)
    fct: dict[Any, dict[Any, Any]] = fct_by_class(flows, mice, eleph).to_dict("index")
    out: dict[str, float] = {}
    for cls in ("all", "mice", "elephant"):
        if cls in fct and fct[cls]["count"] > 0:
            for stat in ("avg_s", "p99_s"):
                out[f"fct_{cls}_{stat}"] = float(fct[cls][stat])
    if len(flows):
        sd = slowdown(flows, float(scale.get("link_rate_bps", 1e7)),
                      float(scale.get("base_rtt_s", 0.0)), int(scale.get("pkt_bytes", 1000)))
        out["slowdown_p50"] = percentile(sd, 50)
        out["slowdown_p99"] = percentile(sd, 99)
    tel = run.telemetry
    if not tel.empty:
        out["qlen_avg_bytes"] = float(tel["qlen_avg_bytes"].mean())
        out["qlen_std_bytes"] = float(tel["qlen_avg_bytes"].std(ddof=0))
        out["utilization"] = float(tel["utilization"].mean())
        out["marked_pkts"] = float(tel["tx_marked_pkts"].sum())
        out["drops_pkts"] = float(tel["drops_pkts"].sum())
    pfc = run.path / "pfc.csv"  # a simulator run with PFC (p4cc.sim.pfc)
    if pfc.is_file():
        paused = pd.read_csv(pfc).groupby("kind")["paused_s"].sum()
        out["pfc_pause_s"] = float(paused.get("switch", 0.0))
        out["pfc_host_pause_s"] = float(paused.get("host", 0.0))
    out["jain"] = fairness(run)
    io = iops(run)
    if not io.empty:
        out["iops"] = float(io.loc[io["cls"] == "all", "iops"].sum())
    out["flows_completed"] = float(len(flows))
    return out


def compare(runs: Sequence[Run], baseline: str | None = None) -> tuple[pd.DataFrame,
                                                                      pd.DataFrame]:
    """(values, normalised): metrics x run labels; normalised = value / baseline's."""
    labels = run_labels(runs)
    values = pd.DataFrame({lab: summary(r) for lab, r in zip(labels, runs, strict=True)})
    base = baseline or labels[0]
    if base not in values.columns:
        raise P4ccError(f"baseline {base!r} is not one of the runs {labels}")
    denom = values[base].where(values[base] != 0)
    return values, values.div(denom, axis=0)


def run_labels(runs: Sequence[Run]) -> list[str]:
    labels = [r.label for r in runs]
    if len(set(labels)) == len(labels):
        return labels
    labels = [f"{r.path.parent.name}/{r.path.name}" for r in runs]
    if len(set(labels)) == len(labels):
        return labels
    return [f"{i}:{lab}" for i, lab in enumerate(labels)]
