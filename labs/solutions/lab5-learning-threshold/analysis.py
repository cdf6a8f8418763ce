"""Lab 5: what did each agent decide before and after the traffic switched?

    python analysis.py runs/lab5-switch            # every variant of the run
writes runs/lab5-switch/decisions.yaml and prints it.

A variant's agent.csv has one row per decision that changed a port's setting:
t_s, switch, port, kmin_bytes, kmax_bytes, pmax.  A row's setting is in force on that
port from t_s until the port's next row (empty thresholds: marking off, left out of
the means).  (Solution.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

Setting = tuple[float, float, float]  # (kmin_bytes, kmax_bytes, pmax)


def load_decisions(variant_dir: Path) -> pd.DataFrame:
    """A variant's agent.csv (no rows if the agent never decided)."""
    path = Path(variant_dir) / "agent.csv"
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame(columns=["t_s", "switch", "port", "kmin_bytes", "kmax_bytes",
                                     "pmax"])
    return pd.read_csv(path)


def setting_at(decisions: pd.DataFrame, switch: str, port: int, t: float) -> Setting | None:
    """The setting in force on ``switch``:``port`` at time ``t``: the port's last row with
    t_s <= t, as (kmin_bytes, kmax_bytes, pmax); None before the port's first row."""
    rows = decisions[(decisions["switch"] == switch) & (decisions["port"] == port)
                     & (decisions["t_s"] <= t)]
    if rows.empty:
        return None
    last = rows.sort_values("t_s", kind="stable").iloc[-1]
    return (float(last["kmin_bytes"]), float(last["kmax_bytes"]), float(last["pmax"]))


def window(decisions: pd.DataFrame, t0: float, t1: float) -> dict[str, float]:
    """The settings in force during [t0, t1), over every port that has rows:
    kmin_kb, kmax_kb (kilobytes, 1 kB = 1000 bytes) and pmax, each the time-weighted mean
    over [t0, t1) of a port's setting (only the time after its first row counts), then
    the plain mean over the ports; and ``changes``, the number of rows with
    t0 <= t_s < t1.  NaN means when no port had a setting in the window."""
    per_port = []
    for _, rows in decisions.groupby(["switch", "port"]):
        rows = rows.sort_values("t_s", kind="stable")
        t = rows["t_s"].to_numpy(dtype=float)
        vals = rows[["kmin_bytes", "kmax_bytes", "pmax"]].to_numpy(dtype=float)
        # step function: row i holds from t[i] to t[i+1]; clip every piece to [t0, t1)
        start = np.clip(t, t0, t1)
        end = np.clip(np.append(t[1:], np.inf), t0, t1)
        w = end - start
        if w.sum() <= 0:
            continue
        ok = ~np.isnan(vals)
        per_port.append([np.sum(w[ok[:, j]] * vals[ok[:, j], j]) / w[ok[:, j]].sum()
                         if w[ok[:, j]].sum() > 0 else np.nan for j in range(3)])
    means = np.nanmean(per_port, axis=0) if per_port else np.full(3, np.nan)
    changes = int(((decisions["t_s"] >= t0) & (decisions["t_s"] < t1)).sum())
    return {"kmin_kb": float(means[0]) / 1000, "kmax_kb": float(means[1]) / 1000,
            "pmax": float(means[2]), "changes": changes}


def switch_time(variant_dir: Path) -> tuple[float, float]:
    """(time of the traffic switch, duration) from the run's resolved spec: the end of
    the first window of the first workload."""
    spec = yaml.safe_load((Path(variant_dir) / "spec.resolved.yaml").read_text())
    return float(spec["workloads"][0]["windows"][0][1]), float(spec["duration_s"])


def summarize(variant_dir: Path) -> dict[str, dict[str, float]]:
    """``window`` over equal spans just before and just after the switch."""
    t_sw, duration = switch_time(variant_dir)
    span = min(t_sw, duration - t_sw)
    d = load_decisions(variant_dir)
    return {"before": window(d, t_sw - span, t_sw), "after": window(d, t_sw, t_sw + span)}


def main(run: Path) -> dict[str, dict[str, dict[str, float]]]:
    out = {v.name: summarize(v) for v in sorted(run.iterdir())
           if (v / "spec.resolved.yaml").is_file()}
    clean = {v: {w: {k: x if isinstance(x, int) else round(float(x), 4)
                     for k, x in vals.items()}
                 for w, vals in ws.items()} for v, ws in out.items()}
    text = yaml.safe_dump(clean, sort_keys=False)
    (run / "decisions.yaml").write_text(text)
    print(text, end="")
    return clean


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python analysis.py runs/lab5-switch")
    main(Path(sys.argv[1]))
