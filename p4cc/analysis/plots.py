"""PNG plots for the report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

#: At most this many ports get a queue time-series panel (the busiest by mean queue).
MAX_PORT_PANELS = 6


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def normalised_bars(norm: pd.DataFrame, metrics: Sequence[str], path: Path,
                    baseline: str) -> Path | None:
    """Grouped bars of selected metrics, each normalised to ``baseline`` (= 1)."""
    rows = [m for m in metrics if m in norm.index and norm.loc[m].notna().any()]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rows) * max(1, len(norm.columns)) / 2),
                                    4))
    width = 0.8 / max(1, len(norm.columns))
    x = np.arange(len(rows))
    for i, col in enumerate(norm.columns):
        ax.bar(x + i * width, norm.loc[rows, col].to_numpy(float), width, label=col)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x + width * (len(norm.columns) - 1) / 2)
    ax.set_xticklabels(rows, rotation=30, ha="right")
    ax.set_ylabel(f"normalised to {baseline}")
    ax.legend(fontsize="small")
    return _save(fig, path)


def slowdown_curves(groups: dict[str, pd.DataFrame], path: Path) -> Path | None:
    """Median and p99 slowdown per 5 % size group, one line per run (HPCC Fig. style)."""
    groups = {k: v for k, v in groups.items() if not v.empty}
    if not groups:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for label, g in groups.items():
        for ax, col in zip(axes, ("p50", "p99"), strict=True):
            ax.plot(g["group"] * 5 + 5, g[col], marker=".", label=label)
    for ax, col in zip(axes, ("median", "p99"), strict=True):
        ax.set_xlabel("flows sorted by size (percentile of flow count)")
        ax.set_ylabel(f"{col} slowdown")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    return _save(fig, path)


def fct_cdf(fcts: dict[str, pd.Series], path: Path) -> Path | None:
    fcts = {k: v.dropna() for k, v in fcts.items() if len(v.dropna())}
    if not fcts:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, s in fcts.items():
        x = np.sort(s.to_numpy(float))
        ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=label)
    ax.set_xscale("log")
    ax.set_xlabel("FCT (s)")
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)


def queue_timeseries(telemetry: pd.DataFrame, path: Path, title: str) -> Path | None:
    """Queue length (avg and max) and the ECN thresholds over time, busiest ports."""
    if telemetry.empty:
        return None
    busiest = (telemetry.groupby(["switch", "port"])["qlen_avg_bytes"].mean()
               .sort_values(ascending=False).index[:MAX_PORT_PANELS])
    fig, axes = plt.subplots(len(busiest), 1, figsize=(8, 2.2 * len(busiest)), sharex=True,
                             squeeze=False)
    for ax, (sw, port) in zip(axes[:, 0], busiest, strict=False):
        d = telemetry[(telemetry["switch"] == sw) & (telemetry["port"] == port)]
        ax.plot(d["t_s"], d["qlen_avg_bytes"] / 1e3, label="queue avg")
        ax.plot(d["t_s"], d["qlen_max_bytes"] / 1e3, lw=0.6, alpha=0.6, label="queue max")
        for col, style in (("kmin_bytes", "--"), ("kmax_bytes", ":")):
            if col in d and d[col].notna().any():
                ax.step(d["t_s"], d[col].astype(float) / 1e3, style, where="post",
                        label=col.replace("_bytes", ""))
        ax.set_ylabel(f"{sw}:{port}\nKB")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize="x-small", ncol=4)
    axes[0, 0].set_title(title)
    axes[-1, 0].set_xlabel("time (s)")
    return _save(fig, path)
