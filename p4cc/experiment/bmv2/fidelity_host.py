"""The fidelity verdict's host checks (see :mod:`p4cc.experiment.bmv2.fidelity`).

``host_rate``: did each sender host send what its flows' congestion control asked for?

Per host and window of ``Tolerances.host_window_s``, the flows that ran (and had data to
send) the whole window must have sent at least ``1 - host_rate`` of what they could
have, less one packet per flow (packets are whole): in each of :data:`SLICES` slices of
the window, what their CC asked, capped at
what the host's NIC had left for them -- the NIC's rate minus what the host's other
flows (started, ended or idle during the window) sent in that slice -- added up over
the slices.  (They share the NIC's HTB class: a host whose two long flows make room for
three new ones did not fall behind.  Per slice, because what a flow asks and what the
NIC leaves it both change within a window: a flow cut by CNPs asks little while it has
the NIC to itself and much once new flows share it; capping the window's mean ask at
the window's mean room -- the check until session 15 -- credits it with room it never
had when it asked.)

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

import numpy as np
import pandas as pd


class HostTolerances(Protocol):
    """What the check reads of ``fidelity.Tolerances`` (no import: fidelity imports us)."""

    @property
    def host_rate(self) -> float: ...
    @property
    def host_window_s(self) -> float: ...
    @property
    def start_late_rtts(self) -> float: ...


#: slices per window in which the CC's ask is capped at the NIC's room (0.1 s of a 1 s
#: window: several trace samples of every flow, the senders trace every ~10 ms)
SLICES = 10
#: instants per slice at which the CC's rate in force is read (every 10 ms of a 1 s window)
POINTS = 10


def _steps(g: pd.DataFrame, col: str, flows: pd.Index, at: np.ndarray) -> np.ndarray:
    """Σ over ``flows`` of the flow's last ``col`` sample at or before each time in
    ``at`` (0 before its first sample): cumulative bytes, or the rate in force."""
    out = np.zeros(len(at))
    for _fid, f in g[g["flow_id"].isin(flows)].groupby("flow_id"):
        order = np.argsort(f["t_s"].to_numpy(dtype=float), kind="stable")
        t = f["t_s"].to_numpy(dtype=float)[order]
        v = f[col].to_numpy(dtype=float)[order]
        i = np.searchsorted(t, at, side="right") - 1
        out += np.where(i >= 0, v[np.clip(i, 0, None)], 0.0)
    return out


def _possible_bps(g: pd.DataFrame, live: pd.Index, t0: float, w: float, cap: float,
                  frame_over_payload: float) -> float:
    """What the ``live`` flows could have sent in [t0, t0 + w], b/s: per slice, the rate
    their CC asked (its time average over :data:`POINTS` instants of the slice) capped
    at ``cap`` less what the host's other flows sent in the slice (``cap`` <= 0:
    uncapped)."""
    edges = t0 + w * np.arange(SLICES + 1) / SLICES
    at = t0 + w * (np.arange(SLICES * POINTS) + 0.5) / (SLICES * POINTS)
    asked = _steps(g, "rate_bps", live, at).reshape(SLICES, POINTS).mean(axis=1)
    if cap > 0:
        others = pd.Index(g.loc[~g["flow_id"].isin(live), "flow_id"].unique())
        sent = np.diff(_steps(g, "bytes_sent", others, edges))
        room = np.maximum(cap - sent * 8.0 * frame_over_payload / np.diff(edges), 0.0)
        asked = np.minimum(asked, room)
    return float(asked.mean())


def host_rate_check(traces: pd.DataFrame, nic_bps: Mapping[str, float], frame_over_payload:
                    float, tol: HostTolerances, pkt_bytes: int
                    ) -> tuple[int, list[dict[str, Any]]]:
    """``traces``: t_s, host, flow_id, rate_bps, bytes_sent (cumulative per flow).

    A flow sends whole packets (``pkt_bytes`` on the wire), so a window can hold one
    packet less of each flow than its rate would put in it, whatever the host does: the
    allowed shortfall is ``host_rate`` of what was asked plus one packet per flow.  (On
    BMv2, RL-CC flows held at ~10 kb/s by a TCP flow asked 2.5 packets per second and
    sent 1: "2 flows sent 0.01 Mb/s of the 0.02 Mb/s their CC asked".)  At 1 Mb/s per
    flow and a 1-s window the packet is 0.8 % of the ask."""
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
                asked = _possible_bps(g, live, t, w, nic_bps.get(str(host), 0.0),
                                      frame_over_payload)
                checked += 1
                quantum_bps = len(live) * pkt_bytes * 8.0 / w  # one packet per flow
                if asked > 0 and sent_bps < (1 - tol.host_rate) * asked - quantum_bps:
                    rows.append({"t_s": t + w, "interval_s": w, "check": "host_rate",
                                 "where": str(host),
                                 "reason": f"{len(live)} flows sent {sent_bps / 1e6:.2f} Mb/s "
                                           f"of the {asked / 1e6:.2f} Mb/s their CC asked "
                                           "(capped, per tenth of the window, at the NIC's "
                                           "rate less the host's other flows)"})
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
