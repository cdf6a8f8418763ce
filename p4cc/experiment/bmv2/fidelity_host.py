"""The fidelity verdict's host checks (see :mod:`p4cc.experiment.bmv2.fidelity`).

``host_rate``: did each sender host send what its flows' congestion control asked for?

Per host and window of ``Tolerances.host_window_s``, the flows that ran (and had data to
send) the whole window must have sent at least ``1 - host_rate`` of what their CC asked,
capped at what the host's NIC had left for them: the NIC's rate minus what the host's other
flows -- started, ended or idle during the window -- sent in it (they share the NIC's
HTB class; a host whose two long flows make room for three new ones did not fall behind).

``flow_start``: did each flow start when the schedule said?  The simulator starts a flow
at its scheduled time; a host that starts it later (a late wake-up of its loop on a busy
machine, set-up work before the first packet) changes what the flow meets in the queues
and spreads an incast's flows apart.  A flow may start at most ``start_late_rtts`` base
RTTs after its scheduled time (the time a congestion-control loop takes to react).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pandas as pd


class HostTolerances(Protocol):
    """What the check reads of ``fidelity.Tolerances`` (no import: fidelity imports us)."""

    @property
    def host_rate(self) -> float: ...
    @property
    def host_window_s(self) -> float: ...
    @property
    def start_late_rtts(self) -> float: ...


def _bytes_in_window(g: pd.DataFrame, flows: pd.Index, t0: float, t1: float) -> float:
    """Bytes ``flows`` sent in [t0, t1]: the last cumulative ``bytes_sent`` in the window
    minus the last one before it (0 for a flow that started in the window)."""
    total = 0.0
    for _fid, f in g[g["flow_id"].isin(flows)].groupby("flow_id"):
        inside = f.loc[(f["t_s"] >= t0) & (f["t_s"] <= t1), "bytes_sent"]
        if inside.empty:
            continue
        before = f.loc[f["t_s"] < t0, "bytes_sent"]
        total += float(inside.max()) - (float(before.max()) if len(before) else 0.0)
    return total


def host_rate_check(traces: pd.DataFrame, nic_bps: Mapping[str, float], frame_over_payload:
                    float, tol: HostTolerances) -> tuple[int, list[dict[str, Any]]]:
    """``traces``: t_s, host, flow_id, rate_bps, bytes_sent (cumulative per flow)."""
    rows: list[dict[str, Any]] = []
    checked = 0
    if traces.empty:
        return 0, rows
    w = tol.host_window_s
    for host, g in traces.groupby("host", sort=True):
        span = g.groupby("flow_id")["t_s"].agg(["min", "max"])
        t_end = float(g["t_s"].max())
        t = math.floor(float(g["t_s"].min()) / w) * w
        while t + w <= t_end:
            live = span[(span["min"] <= t) & (span["max"] >= t + w)].index
            if "npkts" in g:  # only flows that had data to send all window long
                busy = g[(g["t_s"] >= t) & (g["t_s"] <= t + w)].groupby("flow_id")
                short = busy["snd_nxt"].max() < busy["npkts"].max()
                live = live.intersection(short[short].index)
            if len(live):
                sel = g[g["flow_id"].isin(live) & (g["t_s"] >= t) & (g["t_s"] <= t + w)]
                by = sel.groupby("flow_id")
                sent = float((by["bytes_sent"].max() - by["bytes_sent"].min()).sum())
                sent_bps = sent * 8.0 * frame_over_payload / w
                asked = float(by["rate_bps"].mean().sum())
                cap = nic_bps.get(str(host), 0.0)
                if cap > 0:  # the NIC less what the host's other flows sent meanwhile
                    others = g.loc[~g["flow_id"].isin(live), "flow_id"].unique()
                    other_bps = (_bytes_in_window(g, pd.Index(others), t, t + w) * 8.0
                                 * frame_over_payload / w)
                    asked = min(asked, max(cap - other_bps, 0.0))
                checked += 1
                if asked > 0 and sent_bps < (1 - tol.host_rate) * asked:
                    rows.append({"t_s": t + w, "interval_s": w, "check": "host_rate",
                                 "where": str(host),
                                 "reason": f"{len(live)} flows sent {sent_bps / 1e6:.2f} Mb/s "
                                           f"of the {asked / 1e6:.2f} Mb/s their CC asked "
                                           "(capped at the NIC's rate less the host's "
                                           "other flows)"})
            t += w
    return checked, rows


START_COLUMNS = ["host", "flow_id", "sched_start_s", "start_s"]


def read_starts(hosts_dir: Path, hosts: Sequence[str]) -> pd.DataFrame:
    """Every sender's flows' scheduled and actual start times (``send/fct.csv``, run
    clock; flows that never started are left out)."""
    frames = []
    for h in hosts:
        try:
            df = pd.read_csv(hosts_dir / h / "send" / "fct.csv",
                             usecols=["flow_id", "sched_start_s", "start_s"])
        except (OSError, ValueError, pd.errors.EmptyDataError):
            continue
        frames.append(df.dropna().assign(host=h)[START_COLUMNS])
    if not frames:
        return pd.DataFrame(columns=START_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def flow_start_check(starts: pd.DataFrame, base_rtt_s: float, tol: HostTolerances
                     ) -> tuple[int, list[dict[str, Any]]]:
    """``starts``: host, flow_id, sched_start_s, start_s (see :func:`read_starts`); one
    checked item per flow.  Not judged without a base RTT."""
    rows: list[dict[str, Any]] = []
    if starts.empty or not base_rtt_s > 0:
        return 0, rows
    limit = tol.start_late_rtts * base_rtt_s
    late = starts["start_s"].astype(float) - starts["sched_start_s"].astype(float)
    r: Any
    for r, lag in zip(starts.itertuples(index=False), late, strict=True):
        if lag > limit:
            rows.append({"t_s": float(r.sched_start_s), "interval_s": float(lag),
                         "check": "flow_start", "where": str(r.host),
                         "reason": f"flow {int(r.flow_id)} started {lag * 1e3:.1f} ms after "
                                   f"its scheduled time (limit {limit * 1e3:.1f} ms = "
                                   f"{tol.start_late_rtts:g} base RTT)"})
    return len(starts), rows
