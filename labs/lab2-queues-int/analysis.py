"""Lab 2: read what `p4cc cli` recorded (runs/cli/<time>/telemetry.csv and int.csv)."""

from __future__ import annotations

from pathlib import Path


def queue_series(telemetry_csv: Path, switch: str, port: int) -> tuple[list[float], list[float]]:
    """(times t_s, average queue qlen_avg_bytes) of one port, in time order."""
    raise NotImplementedError  # TODO (step 3)


def int_max_queue(int_csv: Path) -> dict[int, int]:
    """The deepest queue (qdepth_pkts) any INT hop record reported, per hop_switch_id."""
    raise NotImplementedError  # TODO (step 4)


def plot_queue(telemetry_csv: Path, switch: str, port: int, out_png: Path) -> None:
    """Plot queue depth over time of one port into out_png."""
    raise NotImplementedError  # TODO (step 5)
