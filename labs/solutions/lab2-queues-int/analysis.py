"""Lab 2 (solution)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def queue_series(telemetry_csv: Path, switch: str, port: int) -> tuple[list[float], list[float]]:
    df = pd.read_csv(telemetry_csv)
    df = df[(df["switch"] == switch) & (df["port"] == port)].sort_values("t_s")
    return df["t_s"].tolist(), df["qlen_avg_bytes"].tolist()


def int_max_queue(int_csv: Path) -> dict[int, int]:
    df = pd.read_csv(int_csv)
    return {int(k): int(v) for k, v in df.groupby("hop_switch_id")["qdepth_pkts"].max().items()}


def plot_queue(telemetry_csv: Path, switch: str, port: int, out_png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t, q = queue_series(telemetry_csv, switch, port)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(t, [x / 1000 for x in q], drawstyle="steps-post")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"{switch}:{port} queue (kB)")
    fig.tight_layout()
    fig.savefig(out_png)
    plt.close(fig)
