"""FCT by flow start window, over seeds: how each agent fares in each phase of a run
whose traffic changes over time (PET §5.5.4 Fig. 6 pattern switch, §5.5.5 Fig. 7 link
failure).  ``p4cc report RUNS... --windows 0.205,0.405,0.455`` prints it.

A flow belongs to the window its start time falls in; windows are [0, e1), [e1, e2), ...,
[e_last, end) in fabric seconds (the run's own time, after scaling).  Runs of the same
variant with different seeds (``acc_seed1``, ``acc_seed2``, ...) are pooled into one row
per (variant, window): mean and 95 % CI over seeds of each seed's statistic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from itertools import pairwise

import numpy as np
import pandas as pd

from p4cc.analysis.metrics import class_thresholds, fct_by_class, sized_flows
from p4cc.analysis.runs import Run
from p4cc.analysis.stats import mean_ci
from p4cc.errors import ConfigError

STATS = ("mice_avg_s", "mice_p99_s", "elephant_avg_s", "all_avg_s", "flows")
_SEED = re.compile(r"_seed\d+$")


def parse_edges(text: str) -> tuple[float, ...]:
    """``"0.2,0.4"`` -> (0.2, 0.4): strictly increasing, positive window edges."""
    try:
        edges = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise ConfigError(f"--windows expects comma-separated seconds, got {text!r}") from exc
    if not edges or any(e <= 0 for e in edges) or any(
            b <= a for a, b in pairwise(edges)):
        raise ConfigError(f"--windows edges must be positive and increasing, got {text!r}")
    return edges


def window_labels(edges: Sequence[float]) -> list[str]:
    starts = [0.0, *edges[:-1]]
    return [f"[{a:g}, {b:g})" for a, b in zip(starts, edges, strict=True)] + \
        [f"[{edges[-1]:g}, end)"]


def _cell_of(table: pd.DataFrame, cls: str, col: str) -> float:
    return float(table.at[cls, col]) if cls in table.index else math.nan  # type: ignore[arg-type]


def run_windows(run: Run, edges: Sequence[float]) -> pd.DataFrame:
    """One row per window of one run: the FCT statistics (p4cc.analysis.metrics.
    fct_by_class) of the flows that started in it."""
    f = sized_flows(run)
    mice_b, ele_b = class_thresholds(run)
    idx = np.searchsorted(np.asarray(edges), f["start_s"].astype(float).to_numpy(),
                          side="right") if len(f) else np.zeros(0, int)
    rows = []
    for i, label in enumerate(window_labels(edges)):
        c = fct_by_class(f[idx == i], mice_b, ele_b)  # empty frame for a window without flows
        rows.append({"window": label, "mice_avg_s": _cell_of(c, "mice", "avg_s"),
                     "mice_p99_s": _cell_of(c, "mice", "p99_s"),
                     "elephant_avg_s": _cell_of(c, "elephant", "avg_s"),
                     "all_avg_s": _cell_of(c, "all", "avg_s"),
                     "flows": float(np.count_nonzero(idx == i))})
    return pd.DataFrame(rows)


def fct_by_window(runs: Iterable[Run], edges: Sequence[float]) -> pd.DataFrame:
    """Rows (variant, window, stat mean, stat half-width, seeds) pooled over seeds."""
    per_run = []
    for run in runs:
        df = run_windows(run, edges)
        df.insert(0, "variant", _SEED.sub("", run.label))
        per_run.append(df)
    if not per_run:
        raise ConfigError("no runs to split into windows")
    allr = pd.concat(per_run, ignore_index=True)
    out = []
    order = window_labels(edges)
    for (variant, window), g in allr.groupby(["variant", "window"], sort=False):
        row: dict[str, object] = {"variant": variant, "window": window}
        for s in STATS:
            mean, half, n = mean_ci(g[s].to_numpy())
            row[s], row[f"{s}_ci"], row["seeds"] = mean, half, n
        out.append(row)
    res = pd.DataFrame(out)
    res["_w"] = res["window"].map(order.index)
    return res.sort_values(["_w", "variant"]).drop(columns="_w").reset_index(drop=True)


def _cell(mean: float, half: float, scale: float) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean * scale:.4g}" + ("" if math.isnan(half) else f" ± {half * scale:.2g}")


def windows_markdown(table: pd.DataFrame) -> str:
    """Markdown: one row per (window, variant); FCTs in µs (mice) and ms (the others)."""
    lines = ["| window (s) | variant | seeds | mice avg (µs) | mice p99 (µs) | "
             "elephant avg (ms) | all avg (ms) | flows |", "|---" * 8 + "|"]
    for d in table.to_dict("records"):
        lines.append(
            f"| {d['window']} | {d['variant']} | {d['seeds']} | "
            f"{_cell(d['mice_avg_s'], d['mice_avg_s_ci'], 1e6)} | "
            f"{_cell(d['mice_p99_s'], d['mice_p99_s_ci'], 1e6)} | "
            f"{_cell(d['elephant_avg_s'], d['elephant_avg_s_ci'], 1e3)} | "
            f"{_cell(d['all_avg_s'], d['all_avg_s_ci'], 1e3)} | "
            f"{_cell(d['flows'], d['flows_ci'], 1)} |")
    return "\n".join(lines)
