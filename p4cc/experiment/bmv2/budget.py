"""The machine budget of the bmv2 backend: what this machine's BMv2 and hosts can carry.

A calibration (``p4cc bench calibrate``, run once as root; cached per BMv2 build under
``~/.cache/p4cc/``) measures, on this machine and build:

* ``switch_us_per_pkt`` and ``switch_idle_cpu``: simple_switch_grpc's own CPU time
  (``/proc/<pid>/stat``) as idle CPU-s/s + marginal µs per packet forwarded by p4cc's
  program (a configured switch: ECN entry, INT sink, telemetry), fitted from two light
  loads -- less sensitive to other load on the machine than rates;
* ``switch_sat_pps``: what one switch forwards when offered more (its ceiling);
* ``host_us_per_pkt``: CPU time of p4cc's Python sender + receiver per data packet.

``demand`` estimates what a spec asks of the machine from its schedule (packets each
switch must forward: every data packet once per switch on its path, plus ACKs/CNPs/
probes; packets each host sends and receives; the control loops' polls), each capped
at what the configured link rates let through, and ``check`` refuses a spec whose CPU
demand exceeds ``UTIL_CAP`` of the machine's cores, or whose busiest switch needs more
than ``UTIL_CAP`` of its ceiling -- with a message naming what to change.  Without a
calibration, ``UNCALIBRATED`` (numbers measured on the 2-core reference machine's
logging-macros build, docs/emulation.md) stands in and the message says so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.errors import ConfigError
from p4cc.hostcc.wire import DATA_FRAME_OVERHEAD_BYTES
from p4cc.topo.spec import TopoSpec

#: use at most this fraction of the cores (and of a switch's ceiling): the rest absorbs
#: bursts (incast onsets), the runner, Mininet and the OS.  Mininet-HiFi (CoNEXT 2012,
#: §3) likewise keeps the emulation's CPU share below 100 % to keep link invariants.
UTIL_CAP = 0.7
#: reverse-path packets per data packet: ACK requests every 16 packets (hostcc
#: ack_every) or every 2 RL-CC decision intervals, CNPs at most 1/ms/flow, probes
REVERSE_FACTOR = 1.15
#: CPU-seconds of one telemetry poll + agent step (Python + BMv2's Thrift/gRPC side);
#: measured 3-20 ms wall per poll unloaded, most of it waiting (docs/emulation.md)
POLL_CPU_S = 0.004


@dataclass(frozen=True)
class Calibration:
    switch_us_per_pkt: float
    switch_sat_pps: float
    host_us_per_pkt: float
    cores: int
    build: str  # BMv2 build (path, version, logging macros): the cache key
    measured_unix: float = 0.0
    loadavg: float = math.nan
    switch_idle_cpu: float = 0.0  # CPU-s/s a switch uses without packets (its threads)

    @property
    def calibrated(self) -> bool:
        return self.measured_unix > 0


#: stand-in until ``p4cc bench calibrate`` ran: p4cc's program on the reference
#: machine (issue 10: 89 µs/packet on the --disable-logging-macros build; the
#: logging-macros build users get is slower, so 120 µs), ~8 kpps ceiling, Python hosts
#: ~60 µs per packet sent + received
UNCALIBRATED = Calibration(120.0, 8000.0, 60.0, os.cpu_count() or 1, "uncalibrated")


def cache_dir() -> Path:
    return Path(os.environ.get("P4CC_CACHE_DIR", Path.home() / ".cache" / "p4cc"))


def cache_path(build: str) -> Path:
    key = hashlib.sha1(build.encode()).hexdigest()[:12]
    return cache_dir() / f"calibration-{key}.json"


def bmv2_build() -> str:
    """The BMv2 build the backend would run (simple_switch_grpc on PATH: its path,
    size and mtime stand for the build; a rebuild invalidates the calibration)."""
    import shutil

    exe = shutil.which("simple_switch_grpc")
    if not exe:
        return "none"
    st = Path(exe).resolve().stat()
    return f"{Path(exe).resolve()} {st.st_size} {int(st.st_mtime)}"


def save(cal: Calibration) -> Path:
    path = cache_path(cal.build)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(cal), indent=1))
    return path


def load(build: str | None = None) -> Calibration:
    """This build's cached calibration, else UNCALIBRATED."""
    build = bmv2_build() if build is None else build
    try:
        data = json.loads(cache_path(build).read_text())
        return Calibration(**data)
    except (OSError, ValueError, TypeError):
        return UNCALIBRATED


@dataclass(frozen=True)
class Demand:
    switch_pps: dict[str, float]
    host_pps: dict[str, float]  # sent + received data packets
    polls_per_s: float

    def cpu(self, cal: Calibration) -> float:
        """CPU-seconds per second of run time."""
        return (sum(self.switch_pps.values()) * cal.switch_us_per_pkt * 1e-6
                + len(self.switch_pps) * cal.switch_idle_cpu
                + sum(self.host_pps.values()) * cal.host_us_per_pkt * 1e-6
                + self.polls_per_s * POLL_CPU_S)


def _switch_path(topo: TopoSpec, src: str, dst: str) -> list[str]:
    """Switches on one shortest path from host src to host dst (BFS; ECMP picks one of
    equal length, which does not change the total)."""
    a, b = topo.host(src).switch, topo.host(dst).switch
    prev: dict[str, str | None] = {a: None}
    todo = deque([a])
    while todo:
        sw = todo.popleft()
        if sw == b:
            break
        for _p, peer, _pp, _l in topo.switch_links(sw):
            if not topo.is_host(peer) and peer not in prev:
                prev[peer] = sw
                todo.append(peer)
    path: list[str] = []
    cur: str | None = b
    while cur is not None:
        path.append(cur)
        cur = prev.get(cur)
    return path[::-1]


def demand(topo: TopoSpec, schedule: pd.DataFrame, duration_s: float,
           interval_s: float) -> Demand:
    scale = topo.scale
    pkt = scale.pkt_bytes
    dur = max(duration_s, 1e-9)
    tx: dict[str, float] = {h.name: 0.0 for h in topo.hosts}
    rx = dict(tx)
    flows: list[tuple[str, str, float]] = []  # (src, dst, packets/s over the run)
    for r in schedule.to_dict("records"):
        start = float(r["start_s"])
        if start >= duration_s:
            continue
        if r["cls"] == "bulk":
            stop = float(r["stop_s"]) if not math.isnan(float(r["stop_s"])) else duration_s
            pkts = scale.pps(topo.link_at(str(r["src"]), 0).rate_bps) * \
                max(0.0, min(stop, duration_s) - start)
        else:
            pkts = math.ceil(int(r["size_bytes"]) / max(1, pkt - DATA_FRAME_OVERHEAD_BYTES))
        flows.append((str(r["src"]), str(r["dst"]), pkts / dur))
        tx[str(r["src"])] += pkts / dur
        rx[str(r["dst"])] += pkts / dur
    nic = {h.name: scale.pps(topo.link_at(h.name, 0).rate_bps) for h in topo.hosts}
    # no host sends or receives more than its link carries: scale each flow by its
    # ends' overload (closed-loop storage asks for far more than one storage node takes)
    sw: dict[str, float] = {s.name: 0.0 for s in topo.switches}
    host: dict[str, float] = dict.fromkeys(nic, 0.0)
    for src, dst, pps in flows:
        f = min(1.0, nic[src] / tx[src] if tx[src] else 1.0,
                nic[dst] / rx[dst] if rx[dst] else 1.0)
        for s in _switch_path(topo, src, dst):
            sw[s] += pps * f * REVERSE_FACTOR
        host[src] += pps * f
        host[dst] += pps * f
    return Demand(sw, host, len(topo.switches) / interval_s)


def check(topo: TopoSpec, schedule: pd.DataFrame, duration_s: float, interval_s: float,
          cal: Calibration | None = None) -> Demand:
    """ConfigError if the spec needs more than this machine's budget."""
    cal = cal or load()
    d = demand(topo, schedule, duration_s, interval_s)
    cpu = d.cpu(cal)
    budget = UTIL_CAP * cal.cores
    source = ("calibrated " + time.strftime("%Y-%m-%d", time.localtime(cal.measured_unix))
              if cal.calibrated else "uncalibrated defaults; run `sudo p4cc bench calibrate`")
    busiest = max(d.switch_pps, key=lambda k: d.switch_pps[k]) if d.switch_pps else ""
    if busiest and d.switch_pps[busiest] > UTIL_CAP * cal.switch_sat_pps:
        raise ConfigError(
            f"switch {busiest} would forward ~{d.switch_pps[busiest]:.0f} packets/s, more "
            f"than {UTIL_CAP:.0%} of what one BMv2 switch forwards here "
            f"({cal.switch_sat_pps:.0f} pps; {source}): lower the workloads' load, use a "
            f"slower scale or a topology that spreads the traffic, or --backend sim")
    if cpu > budget:
        sw_pps, host_pps = sum(d.switch_pps.values()), sum(d.host_pps.values())
        raise ConfigError(
            f"the spec needs ~{cpu:.2f} CPU-s/s on the bmv2 backend: switches "
            f"{sw_pps:.0f} pps x {cal.switch_us_per_pkt:.0f} µs, hosts {host_pps:.0f} pps x "
            f"{cal.host_us_per_pkt:.0f} µs, {d.polls_per_s:.0f} polls/s; this machine's "
            f"budget is {UTIL_CAP:.0%} of {cal.cores} cores = {budget:.2f} ({source}).  "
            f"Lower the load (workloads[].load) or the number of hosts/switches "
            f"(topology), raise interval_s, or run with --backend sim")
    return d


def describe(cal: Calibration) -> dict[str, Any]:
    return {**asdict(cal), "calibrated": cal.calibrated,
            "budget_cpu_s_per_s": UTIL_CAP * cal.cores}


def measured(switch_cpu: list[dict[str, Any]], host_cpu: list[dict[str, Any]],
             runner_cpu_s: float, duration_s: float) -> dict[str, float]:
    """What a run actually used, CPU-seconds per second of run time: the switches (their
    sampled CPU from first to last sample), the host processes (from t0 to the stop)
    and the runner (its control loops, agents and records)."""
    dur = max(duration_s, 1e-9)
    sw = 0.0
    if switch_cpu:
        df = pd.DataFrame(switch_cpu)
        if {"switch", "cpu_s"} <= set(df.columns):
            span = df.groupby("switch")["cpu_s"].agg(["min", "max"])
            sw = float((span["max"] - span["min"]).sum())
    hosts = float(sum(float(r.get("cpu_run_s", 0.0)) for r in host_cpu
                      if math.isfinite(float(r.get("cpu_run_s", math.nan)))))
    return {"switch_cpu_s": sw, "host_cpu_s": hosts, "runner_cpu_s": runner_cpu_s,
            "cpu_s_per_s": (sw + hosts + runner_cpu_s) / dur}


def comparison(topo: TopoSpec, schedule: pd.DataFrame, duration_s: float, interval_s: float,
               used: dict[str, float], cal: Calibration | None = None) -> dict[str, Any]:
    """The budget's prediction for a run beside what it used (``budget.json``): a run
    that used far more than predicted means the calibration underestimates this
    machine's cost and the budget admits too much."""
    cal = cal or load()
    d = demand(topo, schedule, duration_s, interval_s)
    predicted = d.cpu(cal)
    return {"predicted_cpu_s_per_s": predicted, "budget_cpu_s_per_s": UTIL_CAP * cal.cores,
            "used": used,
            "used_over_predicted": used["cpu_s_per_s"] / predicted if predicted > 0 else None,
            "calibration": describe(cal)}
