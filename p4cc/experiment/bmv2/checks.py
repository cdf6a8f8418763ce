"""Checks on stored BMv2 runs (used by tests/test_e2e_*.py and docs/emulation.md).

* ``skip_reason()``: why end-to-end BMv2 runs cannot happen on this machine (or None).
* ``steady_goodput``: per-flow delivered rate over a window, from the senders' traces
  (``hostcc.csv``: ``snd_una`` is the cumulative number of acknowledged packets).
* ``port_window``: mean queue, utilisation, marks and drops of one port over a window.
* ``run_leftovers``: processes and interfaces of a finished run still present (the
  backend logs every PID it started to ``log.txt``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.runs import open_run


def skip_reason() -> str | None:
    """None when root, BMv2, Mininet, iperf3 and the compiled program are all here."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs)"
    for tool in ("simple_switch_grpc", "mnexec", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (see `p4cc doctor`)"
    if importlib.util.find_spec("mininet") is None:
        return "Mininet's Python module is not importable (apt-get install mininet)"
    from p4cc.experiment.doctor import bmv2_missing

    missing = bmv2_missing()
    if missing:
        return "BMv2 backend unavailable: " + ", ".join(c.name for c in missing)
    return None


def _interp(df: pd.DataFrame, t: float) -> float:
    return float(np.interp(t, df["t_s"].to_numpy(float), df["snd_una"].to_numpy(float)))


def steady_goodput(run_dir: str | Path, t1: float, t2: float) -> pd.Series:
    """Delivered payload rate (b/s) of each flow over [t1, t2], from hostcc.csv."""
    run = open_run(run_dir)
    h = run.table("hostcc")
    if h.empty:
        return pd.Series(dtype=float)
    scale = run.meta.get("scale", {})
    from p4cc.hostcc.wire import frame_payload_bytes

    payload = frame_payload_bytes(int(scale.get("pkt_bytes", 1000)))
    out = {}
    for fid, df in h.groupby("flow_id"):
        df = df.sort_values("t_s")
        if df["t_s"].iloc[0] > t1 + 0.5:
            continue  # started late: not in the steady window
        out[int(str(fid))] = (_interp(df, t2) - _interp(df, t1)) * payload * 8.0 / (t2 - t1)
    return pd.Series(out, dtype=float)


def port_window(run_dir: str | Path, switch: str, port: int, t1: float,
                t2: float) -> dict[str, float]:
    """Mean queue (bytes), utilisation, marked fraction and drops of one port."""
    tel = open_run(run_dir).telemetry
    df = tel[(tel["switch"] == switch) & (tel["port"] == port) & (tel["t_s"] > t1)
             & (tel["t_s"] <= t2)]
    if df.empty:
        return {"intervals": 0}
    tx = float(df["tx_pkts"].sum())
    return {"intervals": float(len(df)), "qlen_avg_bytes": float(df["qlen_avg_bytes"].mean()),
            "qlen_max_bytes": float(df["qlen_max_bytes"].max()),
            "utilization": float(df["utilization"].mean()),
            "marked_frac": float(df["tx_marked_pkts"].sum() / tx) if tx else 0.0,
            "drops_pkts": float(df["drops_pkts"].sum()),
            "kmin_bytes": float(df["kmin_bytes"].iloc[-1]),
            "kmax_bytes": float(df["kmax_bytes"].iloc[-1])}


def fct_stats(run_dir: str | Path, cls: str | None = None) -> dict[str, Any]:
    f = open_run(run_dir).flows
    if cls is not None and not f.empty:
        f = f[f["cls"] == cls]
    done = f[f["completed"].astype(str).str.lower() == "true"] if not f.empty else f
    return {"flows": len(f), "completed": len(done),
            "fct_mean_s": float(done["fct_s"].mean()) if len(done) else float("nan"),
            "fct_max_s": float(done["fct_s"].max()) if len(done) else float("nan")}


_PID = re.compile(r"bmv2: (\S+) (\S+) pid (\d+)")
_SWITCH_PID = re.compile(r"bmv2: switch (\S+) pid (\d+)")


def run_leftovers(run_dir: str | Path, interfaces: list[str]) -> list[str]:
    """Logged PIDs still alive and ``interfaces`` still present in this namespace."""
    text = (Path(run_dir) / "log.txt").read_text()
    pids = [int(m.group(2)) for m in _SWITCH_PID.finditer(text)]
    pids += [int(m.group(3)) for m in _PID.finditer(text) if m.group(1) != "switch"]
    left = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.append(f"pid {pid}")
    left += [i for i in interfaces if Path("/sys/class/net", i).exists()]
    return left
