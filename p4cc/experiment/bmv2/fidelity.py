"""Was this BMv2 run a faithful emulation?  Network invariants checked per interval.

Mininet-HiFi (Handigol et al., "Reproducible network experiments using container-based
emulation", CoNEXT 2012, §3.3) monitors invariants during every run -- e.g. that a busy
link dequeues packets at its configured rate -- and flags a run whose emulation fell
behind instead of reporting it.  This module does that for a p4cc BMv2 run, from what
the run records (pure functions of tables; ``verdict`` returns a ``Verdict``):

``port_rate``   a port with a queue (mean enqueue depth >= ``standing_pkts``) dequeued
                at its configured packets/s (BMv2's queue rate, REFERENCE §1) while it
                had packets: a packet waited (``sojourn_avg_s``) at most 1 + ``port_rate``
                packet times per packet ahead of it (mean depth at enqueue, + 1 for the
                packet in service) -- Mininet-
                HiFi's "a busy link dequeues at its rate", which holds for bursty queues
                that drain within the interval too; and no port sent more than
                1 + ``port_rate`` of its packets/s (more: the interval's timing is wrong,
                reads far apart).  Records without sojourn times are judged on the
                served rate alone (``tx_pkts / interval`` within ``port_rate``).
``byte_rate``   the same port's bytes per packet served within ``byte_rate`` of
                ``Scale.pkt_bytes``, weighted by the fraction of its packet rate it
                served (the link time the mix gained or lost): BMv2 serves packets/s, so
                a link is only ``rate`` for packets of that size; at its packet rate a
                port serving a mix of larger or smaller packets serves a byte rate other
                than the link's.
``switch_cpu``  each switch process's threads waited on a run queue (schedstat run
                delay, summed over threads) at most ``switch_wait`` packet times (of its
                fastest port) per packet it received, per sampling window: a switch that
                wants the CPU and does not get it falls behind.
``switch_backlog`` packets the kernel delivered to the switch's interfaces but the
                pipeline has not processed (kernel rx - (sent + dropped + queued)),
                at most ``backlog_s`` of the switch's configured packet rate.
``host_rate``   per sender host and window, what its flows sent (trace ``bytes_sent``)
                is at least ``1 - host_rate`` of what their CC asked for (trace
                ``rate_bps``, capped per tenth of the window at the host's NIC rate less
                what its other flows sent in it), less one packet per flow (whole
                packets: a flow asking 2.5 packets a window may send 1 or 2 of
                them); only windows in which the host had
                flows running throughout (:mod:`p4cc.experiment.bmv2.fidelity_host`).
``flow_start``  every flow started at most ``start_late_rtts`` base RTTs after its
                scheduled time (:mod:`p4cc.experiment.bmv2.fidelity_host`).
``poll``        every telemetry poll started within ``poll_late`` of Δt after its
                deadline and read its counters and registers within ``read_span`` of Δt.

A check fails when more than ``allowed`` of the intervals it checked, and more than
``single`` intervals, violate it (a single preemption is tolerated, a pattern is not);
the run is faithful when no check fails.  The tolerances are stated in ``Tolerances``
and stored with the verdict.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.experiment.bmv2.fidelity_host import flow_start_check, host_rate_check

CHECKS = ("port_rate", "byte_rate", "switch_cpu", "switch_backlog", "host_rate", "flow_start",
          "poll")
#: violations kept in fidelity.json (all of them go to fidelity.csv)
JSON_VIOLATIONS = 50


@dataclass(frozen=True)
class Tolerances:
    # 10 %: a saturated 10 Mb/s port served 0.963-0.975 of nominal on a loaded 2-core
    # machine (docs/emulation.md "Calibrated utilisation"); 10 % leaves room for that
    port_rate: float = 0.10
    byte_rate: float = 0.10
    standing_pkts: float = 8.0  # mean enqueue depth that counts as a standing queue
    # run-queue wait of the switch's threads per packet it received, in packet times of
    # its fastest port (1/pps): BMv2 hands each packet from thread to thread (ingress,
    # egress, transmit), so it waits some even when it keeps up -- 0.5-0.8 packet times
    # measured on a light, faithful run at load 12 -- but a switch whose threads wait
    # longer than a packet time per packet cannot hold the queue rate (9 packet times
    # when a starved switch served 337 of 1250 pps)
    switch_wait: float = 1.0
    switch_idle_pps: float = 50.0  # below this the switch is idle: not judged
    backlog_s: float = 0.05  # unprocessed ingress, in seconds of the switch's packet rate
    backlog_min_pkts: float = 50.0  # floor (IPv6/ARP noise, interpolation of counters)
    host_rate: float = 0.30  # go-back-N rewinds and flow ends make hosts send less
    host_window_s: float = 1.0
    start_late_rtts: float = 1.0  # a flow's start, after its scheduled time (base RTTs)
    poll_late: float = 0.5  # of Δt
    read_span: float = 0.2  # of Δt
    allowed: float = 0.02  # fraction of checked intervals that may violate a check
    single: int = 1  # ...or this many intervals, whatever their fraction (one preemption)


@dataclass
class Verdict:
    faithful: bool
    checks: dict[str, dict[str, Any]]
    violations: pd.DataFrame  # t_s, interval_s, check, where, reason
    tolerances: Tolerances = field(default_factory=Tolerances)

    def summary(self) -> str:
        if self.faithful:
            return "faithful"
        bad = [f"{k} ({c['violations']}/{c['checked']})" for k, c in self.checks.items()
               if not c["ok"]]
        return "UNFAITHFUL: " + ", ".join(bad)

    def to_json(self) -> dict[str, Any]:
        v = self.violations.head(JSON_VIOLATIONS)
        return {"faithful": self.faithful, "summary": self.summary(), "checks": self.checks,
                "tolerances": asdict(self.tolerances),
                "violations": v.to_dict("records"),
                "violations_total": len(self.violations)}

    def write(self, run_dir: Path) -> None:
        (run_dir / "fidelity.json").write_text(json.dumps(self.to_json(), indent=1,
                                                          default=float))
        self.violations.to_csv(run_dir / "fidelity.csv", index=False)


VIOLATION_COLUMNS = ["t_s", "interval_s", "check", "where", "reason"]


def _viol(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=VIOLATION_COLUMNS)


# -- checks (each returns (checked intervals, violation rows)) -------------------------
def port_checks(tele: pd.DataFrame, port_rate_bps: Mapping[tuple[str, int], float],
                pkt_bytes: int, tol: Tolerances) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """``port_rate`` and ``byte_rate`` over the telemetry table."""
    out: dict[str, tuple[int, list[dict[str, Any]]]] = {"port_rate": (0, []),
                                                        "byte_rate": (0, [])}
    if tele.empty:
        return out
    pr, br = [], []
    checked = 0
    r: Any
    for r in tele.itertuples(index=False):
        rate = port_rate_bps.get((str(r.switch), int(r.port)), 0.0)
        iv = float(r.interval_s)
        depth = float(r.qlen_avg_bytes) / pkt_bytes
        if rate <= 0 or iv <= 0 or depth < tol.standing_pkts:
            continue
        checked += 1
        pps = rate / (8.0 * pkt_bytes)
        # the counters' own interval when recorded (p4cc.controlplane.records)
        civ = float(getattr(r, "counter_interval_s", 0.0) or 0.0)
        served = float(r.tx_pkts) / (civ if civ > 0 and math.isfinite(civ) else iv)
        where = f"{r.switch}:{int(r.port)}"
        why = _port_rate_violation(served, pps, depth, _sojourn(r), tol)
        if why:
            pr.append({"t_s": float(r.t_s), "interval_s": iv, "check": "port_rate",
                       "where": where, "reason": why})
        # bytes at the served packet rate: the packet mix, separately from the pps check
        # (a port short of packets/s is short of bytes/s too; that is reported once).
        # The error is the link time the mix gained or lost: each packet took one slot
        # where the link would have taken its bytes' time, i.e. the per-packet deviation
        # times the fraction of the interval the port spent serving; a port at its
        # packet rate keeps the whole deviation, a nearly idle one (a few ACKs and CNPs
        # after a burst had drained) loses next to nothing.
        bps = float(r.tx_bps)
        mean_pkt = bps / 8.0 / served if served > 0 else float(pkt_bytes)
        busy = min(served / pps, 1.0)
        if abs(mean_pkt / pkt_bytes - 1) * busy > tol.byte_rate:
            at_rate = pps * mean_pkt * 8.0
            br.append({"t_s": float(r.t_s), "interval_s": iv, "check": "byte_rate",
                       "where": where,
                       "reason": f"served {bps / 1e6:.2f} Mb/s on a {rate / 1e6:g} Mb/s link: "
                                 f"mean packet {mean_pkt:.0f} B, the rate assumes {pkt_bytes} "
                                 f"B, so at its packet rate the port serves "
                                 f"{at_rate / 1e6:.2f} Mb/s "
                                 f"({100 * (at_rate / rate - 1):+.1f} %)"})
    return {"port_rate": (checked, pr), "byte_rate": (checked, br)}


def _sojourn(r: Any) -> float:
    v = getattr(r, "sojourn_avg_s", math.nan)
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _port_rate_violation(served: float, pps: float, depth: float, sojourn_s: float,
                         tol: Tolerances) -> str:
    """Why a port with a queue broke the dequeue-rate invariant ('' if it did not)."""
    if served > (1 + tol.port_rate) * pps:
        return (f"served {served:.0f} pps of the configured {pps:.0f} "
                f"({100 * (served / pps - 1):+.1f} %): more than the port can send, the "
                f"interval's timing is wrong")
    if not math.isfinite(sojourn_s):  # no dequeue times: the served rate alone
        if served < (1 - tol.port_rate) * pps:
            return (f"served {served:.0f} pps of the configured {pps:.0f} "
                    f"({100 * (served / pps - 1):+.1f} %) with a standing queue "
                    f"(mean {depth:.0f} pkts)")
        return ""
    # a packet that finds d packets queued leaves after them plus what is left of the
    # slot of the one being sent: at most (d + 1) packet times at the port's rate
    per_pkt = sojourn_s / (depth + 1)
    if per_pkt * pps > 1 + tol.port_rate:
        return (f"dequeued at {1 / per_pkt:.0f} pps of the configured {pps:.0f} "
                f"({100 * (1 / (per_pkt * pps) - 1):+.1f} %) while it had packets: a packet "
                f"waited {per_pkt * 1e3:.2f} ms per packet ahead of it (mean queue "
                f"{depth:.0f} pkts + the one in service, sojourn {sojourn_s * 1e3:.1f} ms; "
                f"served {served:.0f} pps)")
    return ""


def switch_cpu_check(cpu: pd.DataFrame, port_pps: Mapping[str, float],
                     tol: Tolerances) -> tuple[int, list[dict[str, Any]]]:
    """Run-queue wait of each switch per packet, per sampling window (``cpu``: t_s,
    switch, cpu_s, wait_s, rx_pkts cumulative; ``port_pps``: its fastest port's rate)."""
    rows: list[dict[str, Any]] = []
    checked = 0
    if cpu.empty or "rx_pkts" not in cpu:
        return 0, rows
    for sw, g in cpu.sort_values("t_s").groupby("switch", sort=True):
        t, w, c, n = (g[k].to_numpy(float) for k in ("t_s", "wait_s", "cpu_s", "rx_pkts"))
        pkt_time = 1.0 / port_pps.get(str(sw), 1.0)
        for i in range(1, len(t)):
            dt, pkts = t[i] - t[i - 1], n[i] - n[i - 1]
            if dt <= 0 or pkts < tol.switch_idle_pps * dt:
                continue
            checked += 1
            per_pkt = (w[i] - w[i - 1]) / pkts
            if per_pkt > tol.switch_wait * pkt_time:
                rows.append({"t_s": t[i], "interval_s": dt, "check": "switch_cpu",
                             "where": str(sw),
                             "reason": f"threads waited {per_pkt * 1e3:.2f} ms for a CPU per "
                                       f"packet ({(w[i] - w[i - 1]) / dt:.2f} s/s; a packet "
                                       f"time is {pkt_time * 1e3:.2f} ms; the switch ran "
                                       f"{(c[i] - c[i - 1]) / dt:.2f} CPU-s/s)"})
    return checked, rows


def backlog_check(tele: pd.DataFrame, cpu: pd.DataFrame, switch_pps: Mapping[str, float],
                  pkt_bytes: int, tol: Tolerances) -> tuple[int, list[dict[str, Any]]]:
    """Kernel rx on the switch's interfaces (``cpu.rx_pkts``, cumulative) against what
    the switch processed: sent (the kernel's ``cpu.tx_pkts`` when sampled -- data and
    control packets; else the telemetry's tx, which since control packets are accounted
    at index 0 (p4src/include/forwarding.p4) counts data only), dropped (telemetry) and
    queued (telemetry), all cumulative."""
    rows: list[dict[str, Any]] = []
    checked = 0
    if tele.empty or cpu.empty or "rx_pkts" not in cpu:
        return 0, rows
    for sw, g in tele.groupby("switch", sort=True):
        c = cpu[cpu["switch"] == sw].sort_values("t_s")
        if len(c) < 2:
            continue
        per_t = g.groupby("t_s").agg(done=("tx_pkts", "sum"), drops=("drops_pkts", "sum"),
                                      q=("qlen_avg_bytes", "sum")).sort_index()
        t = per_t.index.to_numpy(float)
        inside = (t >= c["t_s"].iloc[0]) & (t <= c["t_s"].iloc[-1])
        if inside.sum() < 2:
            continue
        ct = c["t_s"].to_numpy(float)
        if "tx_pkts" in c and c["tx_pkts"].notna().all():
            done = (np.interp(t, ct, c["tx_pkts"].to_numpy(float))
                    + np.cumsum(per_t["drops"].to_numpy(float)))
        else:  # runs sampled before tx_pkts existed
            done = np.cumsum((per_t["done"] + per_t["drops"]).to_numpy(float))
        rx = np.interp(t, ct, c["rx_pkts"].to_numpy(float))
        queued = per_t["q"].to_numpy(float) / pkt_bytes
        first = int(np.argmax(inside))
        backlog = (rx - rx[first]) - (done - done[first]) - (queued - queued[first])
        limit = max(tol.backlog_min_pkts, tol.backlog_s * switch_pps.get(str(sw), 0.0))
        for i in np.nonzero(inside)[0][1:]:
            checked += 1
            if backlog[i] > limit:
                rows.append({"t_s": t[i], "interval_s": t[i] - t[i - 1],
                             "check": "switch_backlog", "where": str(sw),
                             "reason": f"{backlog[i]:.0f} packets received by the kernel "
                                       f"but not processed (limit {limit:.0f})"})
    return checked, rows


def poll_check(polls: pd.DataFrame, interval_s: float,
               tol: Tolerances) -> tuple[int, list[dict[str, Any]]]:
    """``polls``: switch, deadline_s, start_s, end_s, read_span_s (run clock)."""
    rows: list[dict[str, Any]] = []
    if polls.empty:
        return 0, rows
    r: Any
    for r in polls.itertuples(index=False):
        late = float(r.start_s) - float(r.deadline_s)
        span = float(r.read_span_s)
        why = []
        if late > tol.poll_late * interval_s:
            why.append(f"started {late * 1e3:.0f} ms after its deadline")
        if span > tol.read_span * interval_s:
            why.append(f"counters and registers read {span * 1e3:.0f} ms apart")
        if why:
            rows.append({"t_s": float(r.end_s), "interval_s": interval_s, "check": "poll",
                         "where": str(r.switch),
                         "reason": "; ".join(why) + f" (Δt {interval_s * 1e3:.0f} ms)"})
    return len(polls), rows


def verdict(results: Mapping[str, tuple[int, list[dict[str, Any]]]],
            tol: Tolerances | None = None) -> Verdict:
    tol = tol or Tolerances()
    checks: dict[str, dict[str, Any]] = {}
    allrows: list[dict[str, Any]] = []
    for name in CHECKS:
        checked, rows = results.get(name, (0, []))
        frac = len(rows) / checked if checked else 0.0
        # a single violating interval is tolerated however few were checked (a 30-s
        # run checks a busy port in ~30 intervals: 2 % of them is less than one)
        ok = frac <= tol.allowed or len(rows) <= tol.single
        checks[name] = {"checked": checked, "violations": len(rows),
                        "fraction": round(frac, 4), "ok": ok}
        allrows += rows
    v = _viol(allrows).sort_values(["t_s", "check"], kind="stable").reset_index(drop=True)
    return Verdict(all(c["ok"] for c in checks.values()), checks, v, tol)


@dataclass(frozen=True)
class RunFacts:
    """What the checks need to know about the run (from its topology and scale)."""

    port_rate_bps: Mapping[tuple[str, int], float]
    pkt_bytes: int
    interval_s: float
    nic_bps: Mapping[str, float]
    frame_over_payload: float = 1.0
    base_rtt_s: float = 0.0  # the scale's (0: flow starts are not judged)

    @property
    def port_pps(self) -> dict[str, float]:
        """Each switch's fastest port, packets/s."""
        out: dict[str, float] = {}
        for (sw, _p), rate in self.port_rate_bps.items():
            out[sw] = max(out.get(sw, 0.0), rate / (8.0 * self.pkt_bytes))
        return out

    @property
    def switch_pps(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for (sw, _p), rate in self.port_rate_bps.items():
            out[sw] = out.get(sw, 0.0) + rate / (8.0 * self.pkt_bytes)
        return out


def evaluate(facts: RunFacts, tele: pd.DataFrame, cpu: pd.DataFrame, polls: pd.DataFrame,
             traces: pd.DataFrame, tol: Tolerances | None = None,
             starts: pd.DataFrame | None = None) -> Verdict:
    tol = tol or Tolerances()
    res = port_checks(tele, facts.port_rate_bps, facts.pkt_bytes, tol)
    res["switch_cpu"] = switch_cpu_check(cpu, facts.port_pps, tol)
    res["switch_backlog"] = backlog_check(tele, cpu, facts.switch_pps, facts.pkt_bytes, tol)
    res["host_rate"] = host_rate_check(traces, facts.nic_bps, facts.frame_over_payload, tol,
                                       facts.pkt_bytes)
    if starts is not None:
        res["flow_start"] = flow_start_check(starts, facts.base_rtt_s, tol)
    res["poll"] = poll_check(polls, facts.interval_s, tol)
    return verdict(res, tol)


def _packets(fct: Path, payload: int) -> dict[int, int]:
    """Local flow id -> packets of the flow, from a sender's fct.csv."""
    try:
        df = pd.read_csv(fct, usecols=["flow_id", "size"]).dropna()
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return {}
    return {int(f): math.ceil(int(s) / payload) for f, s in zip(df["flow_id"], df["size"],
                                                              strict=True)}


def read_traces(hosts_dir: Path, hosts: Sequence[str], payload: int = 1) -> pd.DataFrame:
    """Every sender's trace.csv as one table (t_s on the sender's clock: windows only
    need one clock per host)."""
    frames = []
    for h in hosts:
        path = hosts_dir / h / "send" / "trace.csv"
        try:
            df = pd.read_csv(path, usecols=["t", "flow_id", "rate_bps", "bytes_sent",
                                            "snd_nxt"])
        except (OSError, ValueError, pd.errors.EmptyDataError):
            continue
        df = df.rename(columns={"t": "t_s"}).assign(host=h)
        npkts = _packets(hosts_dir / h / "send" / "fct.csv", payload)
        if npkts:
            df["npkts"] = df["flow_id"].map(npkts)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=["t_s", "host", "flow_id", "rate_bps", "bytes_sent"])
    return pd.concat(frames, ignore_index=True)
