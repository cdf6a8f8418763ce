"""The machine budget of the bmv2 backend: what this machine's BMv2 and hosts can carry.

A calibration (``p4cc bench calibrate``, as root; cached in ``~/.cache/p4cc/`` per BMv2
build and measured code, fingerprint.py) measures, on this machine and build:

* ``switch_us_per_pkt`` and ``switch_idle_cpu``: simple_switch_grpc's own CPU time
  (``/proc/<pid>/stat``) as idle CPU-s/s + marginal µs per packet forwarded by p4cc's
  program (a configured switch: ECN entry, INT sink, telemetry), fitted from two light
  loads -- less sensitive to other load on the machine than rates;
* ``switch_sat_pps``: what one switch forwards when offered more (its ceiling);
* the hosts, the way runs run them (``p4cc.bench.calibrate_hosts``: real ``host send``
  and ``host run`` processes over a veth with HTB pacing): a sender's and a receiver's
  idle CPU-s/s, the sender's µs per data packet and CPU-s/s per active flow by host CC
  (RL-CC decides per flow every decision interval and probes every interval, whatever
  its packet rate), the receiver's µs per packet, and one HTB rate change (a DCQCN
  sender makes one per CNP).

``demand`` (p4cc.experiment.bmv2.budget_demand) estimates from the schedule what a spec
asks: data packets per host and per switch on each flow's path, reverse-path packets
(CNPs, ACKs, probes, by CC), the host processes, the flows active at once, the polls.
``terms`` prices it per part of the machine (switches, senders, receivers, runner);
constants that only recorded runs show (switch cost under contention, the runner, the
CNP share) are derived from 69 recorded runs and say so.  ``check`` refuses a spec whose
CPU demand exceeds ``UTIL_CAP`` of the machine's cores, or whose busiest switch needs
more than ``UTIL_CAP`` of its ceiling, or in which more than ``MAX_SHARING_FLOWS``
DCQCN flows share one receiver's link (a go-back-N collapse whatever the CPU) -- with a
message naming the largest part and what to change.  Without a calibration,
``UNCALIBRATED`` (numbers measured on the 2-core reference machine's logging-macros
build, docs/emulation.md) stands in and the message says so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.errors import ConfigError
from p4cc.experiment.bmv2.budget_demand import Demand, demand, switch_path
from p4cc.experiment.bmv2.fingerprint import measured_code
from p4cc.topo.spec import TopoSpec

__all__ = ["Calibration", "Demand", "check", "comparison", "cpu", "demand", "describe",
           "load", "measured", "save", "summary", "switch_path", "terms"]

#: use at most this fraction of the cores (and of a switch's ceiling): the rest absorbs
#: bursts (incast onsets), the runner, Mininet and the OS.  Mininet-HiFi (CoNEXT 2012,
#: §3) likewise keeps the emulation's CPU share below 100 % to keep link invariants.
UTIL_CAP = 0.7
#: Switch CPU in runs against the calibration's two numbers: a non-negative least-squares
#: fit of the switches' CPU in 69 recorded BMv2 runs (session 7: 24 N -> 1 runs at testbed
#: and testbed-5m scale, DCQCN and RL-CC trees; 45 default-experiment runs) on the
#: calibration's idle CPU x switches and µs/packet x the packets ``demand`` predicts,
#: under the calibration of 2026-11-24 (0.062 CPU-s/s idle, 142.5 µs/packet): 0.74 x
#: the idle and 1.27 x the per-packet cost (switches under contention, the reverse
#: path's small packets, the telemetry reads).  docs/emulation.md "Machine budget".
SWITCH_IDLE_FACTOR = 0.74
SWITCH_PKT_FACTOR = 1.27
#: Flows sharing one receiver's link, on average while it receives (the fluid estimate,
#: Demand.sharing), above which a run of DCQCN hosts collapses on BMv2 whatever the CPU: at
#: testbed scale a link's BDP is 2.5 packets (25 at the papers' scale), so each of n flows sends
#: 2.5/n packets per RTT and DCQCN's per-flow marking feedback is too sparse to bring its
#: rate down to its share; without PFC the port tail-drops and go-back-N resends most
#: bytes.  Measured (docs/emulation.md, "Session 20: why acc_incast collapses"):
#: `examples/acc_incast.yaml` 20-29 flows (0 of 12 runs faithful, 93-95 % of the bytes
#: resent), every faithful spec <= 3.5 (default experiment 1.8-2.0, acc_e2e 2.0-3.3,
#: testbed_60 2.1-3.5).  10 lies between them.
MAX_SHARING_FLOWS = 10.0
#: The runner (control loops, agents, records) per telemetry poll and per host process
#: per second (it samples each host process's CPU and records): fit of the runner's CPU
#: in the same 69 runs (0.73-1.28 of what they used).  The old 4 ms per poll was
#: measured unloaded; loaded polls cost 7 ms.
RUNNER_POLL_CPU_S = 0.007
RUNNER_HOST_PROC_CPU = 0.0085

#: Host costs measured by ``p4cc bench calibrate`` on the 2-core reference machine
#: (2026-11-24 21:55 and 22:20 UTC, load ~2, ``p4cc.bench.calibrate_hosts``: real
#: ``host send``/``host run`` processes over a veth with HTB pacing; means of the two):
#: the defaults for a calibration cached before these fields existed.  Per data packet
#: and per active flow by host CC kind (RL-CC: 83.9-109.1 µs, 0.110-0.125 CPU-s/s per
#: flow; DCQCN 83.9-86.8 µs, 0.014-0.021).  An HTB rate change over netlink (what a
#: DCQCN sender does per CNP) cost 1,244 µs.  A receiver's idle CPU was below the
#: measurement's resolution (10-ms ticks over 2.3 s).
#: ``fixed:<rate>`` senders do what a DCQCN sender does without the CC (not measured
#: apart: DCQCN's numbers stand in).
HOST_SEND_US_PER_PKT = {"dcqcn": 85.4, "rlcc": 98.2, "fixed": 85.4}
HOST_SEND_FLOW_CPU = {"dcqcn": 0.0176, "rlcc": 0.117, "fixed": 0.0176}
HOST_SEND_IDLE_CPU = 0.022
HOST_RECV_IDLE_CPU = 0.0
HOST_RECV_US_PER_PKT = 60.8
HOST_RATE_CHANGE_US = 1244.0
#: A flow's own cost beyond its packets, at its sender and at its receiver (its HTB
#: class, state and records): ``p4cc bench calibrate``'s short-flow window
#: (calibrate_hosts.per_flow_us: 90 two-packet DCQCN flows in 3 s) on the 2-core VM of
#: sessions 36-38, idle, children's CPU counted, 4 runs alternating with the code before
#: session 38 (2026-11-30 13:1x UTC): sender 2,433 / 1,963 / 2,488 / 2,027 µs, receiver
#: 211 / 0 / 222 / 93 µs; means (before: sender 4,014-5,439).  Without this term the
#: budget under-predicted runs that start many flows: session 36's storage runs (~40
#: flows/s) used 1.5-1.7x the prediction (docs/emulation.md "Machine budget").
HOST_SEND_US_PER_FLOW = 2228.0
HOST_RECV_US_PER_FLOW = 132.0
#: INT on the switch, beyond a packet without it (the calibration's switch_us_per_pkt
#: forwards packets without INT): ``p4cc bench intcost --reps 3 --seconds 2``
#: (simple_switch_grpc's own CPU per forwarded 1000-B packet, one switch that is source
#: and sink, at 1000 and 2000 pps, off / summary-only / with report alternating, medians;
#: 2026-11-25 03:01 UTC, load 0.4): off 205.0 / 182.5 µs, summary-only 280.0 / 257.5,
#: report 435.0 / 370.1.  Per INT packet +75 µs (mean over the rates); a reported one a
#: further +134 (save, clone, the clone's egress pass, the PacketIn).  Under load 7-9
#: the same modes measured +59 and +340 (docs/dataplane.md): contention is in
#: SWITCH_PKT_FACTOR, like the calibration's.  Charged at every switch of the path (a
#: transit switch only pushes a record: an upper bound there).
SWITCH_INT_US_PER_PKT = 75.0
SWITCH_REPORT_US_PER_PKT = 134.0
#: the runner decodes each INT report (Scapy, ~0.1-0.2 ms: p4cc.experiment.bmv2.limits;
#: not measured apart)
RUNNER_REPORT_CPU_S = 150e-6


@dataclass(frozen=True)
class Calibration:
    switch_us_per_pkt: float
    switch_sat_pps: float
    host_us_per_pkt: float  # sender + receiver over loopback (the first calibrations)
    cores: int
    build: str  # BMv2 build (path, version, logging macros): the cache key
    measured_unix: float = 0.0
    loadavg: float = math.nan
    switch_idle_cpu: float = 0.0  # CPU-s/s a switch uses without packets (its threads)
    #: CPU-s/s of a sender / receiver host process with nothing to do
    host_send_idle_cpu: float = HOST_SEND_IDLE_CPU
    host_recv_idle_cpu: float = HOST_RECV_IDLE_CPU
    host_recv_us_per_pkt: float = HOST_RECV_US_PER_PKT  # receiver, per data packet
    #: sender µs per data packet and CPU-s/s per active flow, by host_cc (or its kind)
    host_send_us_per_pkt: dict[str, float] = field(
        default_factory=lambda: dict(HOST_SEND_US_PER_PKT))
    host_send_flow_cpu: dict[str, float] = field(
        default_factory=lambda: dict(HOST_SEND_FLOW_CPU))
    host_rate_change_us: float = HOST_RATE_CHANGE_US  # one HTB rate change (netlink)
    #: a flow's own µs at its sender / receiver beyond its packets (start, completion)
    host_send_us_per_flow: float = HOST_SEND_US_PER_FLOW
    host_recv_us_per_flow: float = HOST_RECV_US_PER_FLOW
    #: a switch's extra µs per packet carrying INT / per packet it reports (clone)
    switch_int_us_per_pkt: float = SWITCH_INT_US_PER_PKT
    switch_report_us_per_pkt: float = SWITCH_REPORT_US_PER_PKT

    @property
    def calibrated(self) -> bool:
        return self.measured_unix > 0

    def terms(self, d: Demand) -> dict[str, float]:
        """CPU-seconds per second of run time, per part of the machine."""
        send_us = self.per_cc(self.host_send_us_per_pkt, HOST_SEND_US_PER_PKT, d.cc)
        flow_cpu = self.per_cc(self.host_send_flow_cpu, HOST_SEND_FLOW_CPU, d.cc)
        # a DCQCN sender changes its HTB rate per CNP; others only read the CNP
        cnp_us = (self.host_rate_change_us if d.cc.partition(":")[0] == "dcqcn"
                  else self.host_recv_us_per_pkt)
        return {
            "switches": (len(d.switch_pps) * SWITCH_IDLE_FACTOR * self.switch_idle_cpu
                         + sum(d.switch_pps.values()) * SWITCH_PKT_FACTOR
                         * self.switch_us_per_pkt * 1e-6
                         + (sum(d.int_pps.values()) * self.switch_int_us_per_pkt
                            + d.report_pps * self.switch_report_us_per_pkt)
                         * SWITCH_PKT_FACTOR * 1e-6),
            "senders": (d.send_procs * self.host_send_idle_cpu
                        + d.data_pps * send_us * 1e-6 + d.active_flows * flow_cpu
                        + d.cnp_pps * cnp_us * 1e-6
                        + d.flows_per_s * self.host_send_us_per_flow * 1e-6),
            "receivers": (d.recv_procs * self.host_recv_idle_cpu
                          + (d.data_pps + d.reverse_pps) * self.host_recv_us_per_pkt * 1e-6
                          + d.flows_per_s * self.host_recv_us_per_flow * 1e-6),
            "runner": (d.polls_per_s * RUNNER_POLL_CPU_S
                       + (d.send_procs + d.recv_procs) * RUNNER_HOST_PROC_CPU
                       + d.report_pps * RUNNER_REPORT_CPU_S),
        }

    def per_cc(self, table: dict[str, float], defaults: dict[str, float], cc: str) -> float:
        """``table``'s entry for ``cc``: exact, else the dearest measured variant of its
        kind (the kind itself included: plain ``rlcc`` is the default policy, cheaper
        than others), else the measured default of its kind, else the largest known."""
        kind = cc.partition(":")[0]
        for t in (table, defaults):
            if cc in t:
                return t[cc]
            same = [v for k, v in t.items() if k.partition(":")[0] == kind]
            if same:
                return max(same)
        return max([*table.values(), *defaults.values()])


#: stand-in until ``p4cc bench calibrate`` ran: p4cc's program on the reference
#: machine (issue 10: 89 µs/packet on the --disable-logging-macros build; the
#: logging-macros build users get is slower, so 120 µs), ~8 kpps ceiling, 0.06 CPU-s/s
#: idle per switch (the calibration of 2026-11-24), the measured host defaults above
UNCALIBRATED = Calibration(120.0, 8000.0, 60.0, os.cpu_count() or 1, "uncalibrated",
                           switch_idle_cpu=0.062)


def cache_dir() -> Path:
    return Path(os.environ.get("P4CC_CACHE_DIR", Path.home() / ".cache" / "p4cc"))


def cache_path(build: str) -> Path:
    # the build and the code the calibration measured (fingerprint.py: a change to the
    # hosts' code or the P4 program re-measures the machine)
    key = hashlib.sha1(f"{build} code {measured_code()}".encode()).hexdigest()[:12]
    return cache_dir() / f"calibration-{key}.json"


def bmv2_build() -> str:
    """The BMv2 build the backend would run (simple_switch_grpc on PATH: its path,
    size and mtime stand for the build; a rebuild invalidates the calibration)."""
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
    """This build's cached calibration, else UNCALIBRATED.  A file written before the
    host fields existed loads with their measured defaults (HOST_*)."""
    build = bmv2_build() if build is None else build
    try:
        data = json.loads(cache_path(build).read_text())
        known = {f.name for f in fields(Calibration)}
        return Calibration(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError):
        return UNCALIBRATED


def terms(d: Demand, cal: Calibration) -> dict[str, float]:
    """CPU-seconds per second of run time, per part of the machine (Calibration.terms)."""
    return cal.terms(d)


def cpu(d: Demand, cal: Calibration) -> float:
    """CPU-seconds per second of run time."""
    return sum(terms(d, cal).values())


def _source(cal: Calibration) -> str:
    if cal.calibrated:
        return "calibrated " + time.strftime("%Y-%m-%d", time.localtime(cal.measured_unix))
    return "uncalibrated defaults; run `sudo p4cc bench calibrate`"


def _concurrency_knobs(d: Demand) -> str:
    """The spec fields that set how many flows are active at once."""
    knobs = "workloads' senders/flows_per_sender, load"
    if d.chained_flows:  # closed loops: each request waits for the one before it
        knobs = ("a closed-loop workload's io_depth, as examples/acc_storage_bmv2.yaml "
                 "uses 3; " + knobs)
    return knobs


def _advice(d: Demand, parts: dict[str, float], cal: Calibration) -> str:
    """What to change, for the part that needs the most."""
    top = max(parts, key=lambda k: parts[k])
    if top == "senders":
        flow_cpu = cal.per_cc(cal.host_send_flow_cpu, HOST_SEND_FLOW_CPU, d.cc)
        send_us = cal.per_cc(cal.host_send_us_per_pkt, HOST_SEND_US_PER_PKT, d.cc)
        return (f"The senders are the largest part: {d.send_procs} sender processes, "
                f"~{d.active_flows:.1f} flows active at once under {d.cc} "
                f"({flow_cpu:.3f} CPU-s/s per active flow) and {d.data_pps:.0f} data "
                f"packets/s ({send_us:.0f} µs each) + {d.cnp_pps:.0f} CNPs/s, "
                f"{d.flows_per_s:.1f} flows started a second "
                f"({cal.host_send_us_per_flow:.0f} µs each): use fewer "
                f"senders or fewer concurrent flows ({_concurrency_knobs(d)}), a slower "
                f"scale (testbed-5m), or --backend sim")
    if top == "switches":
        busiest = max(d.switch_pps, key=lambda k: d.switch_pps[k])
        return (f"The switches are the largest part: {len(d.switch_pps)} switches "
                f"forwarding {sum(d.switch_pps.values()):.0f} packets/s (busiest "
                f"{busiest}: {d.switch_pps[busiest]:.0f}, data + {d.reverse_pps:.0f}/s "
                f"CNPs/ACKs/probes): lower the load (workloads[].load), use a slower scale "
                f"or a smaller topology, or --backend sim")
    if top == "receivers":
        return (f"The receivers are the largest part: {d.recv_procs} receiver processes "
                f"taking {d.data_pps:.0f} data packets/s: lower the load "
                f"(workloads[].load) or use fewer hosts, or --backend sim")
    return (f"The control loops are the largest part ({d.polls_per_s:.0f} polls/s): raise "
            f"interval_s or use fewer switches, or --backend sim")


def check(topo: TopoSpec, schedule: pd.DataFrame, duration_s: float, interval_s: float,
          cal: Calibration | None = None, host_cc: str = "dcqcn",
          probe_s: float | None = None, int_watch: Mapping[str, bool] | None = None
          ) -> Demand:
    """ConfigError if the spec needs more than this machine's budget, naming the part
    of the machine that needs the most and what to change (``host_cc``, ``probe_s``,
    ``int_watch``: the hosts' CC, RTT probe interval and INT watch,
    budget_demand.demand)."""
    cal = cal or load()
    d = demand(topo, schedule, duration_s, interval_s, host_cc, probe_s, int_watch)
    parts = terms(d, cal)
    need = sum(parts.values())
    budget = UTIL_CAP * cal.cores
    source = _source(cal)
    busiest = max(d.switch_pps, key=lambda k: d.switch_pps[k]) if d.switch_pps else ""
    if busiest and d.switch_pps[busiest] > UTIL_CAP * cal.switch_sat_pps:
        raise ConfigError(
            f"switch {busiest} would forward ~{d.switch_pps[busiest]:.0f} packets/s, more "
            f"than {UTIL_CAP:.0%} of what one BMv2 switch forwards here "
            f"({cal.switch_sat_pps:.0f} pps; {source}): offer fewer packets "
            f"({_concurrency_knobs(d)}), use a slower scale or a topology that spreads "
            f"the traffic, or --backend sim")
    if need > budget:
        split = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
        raise ConfigError(
            f"the spec needs ~{need:.2f} CPU-s/s on the bmv2 backend ({split}); this "
            f"machine's budget is {UTIL_CAP:.0%} of {cal.cores} cores = {budget:.2f} "
            f"({source}).  {_advice(d, parts, cal)}")
    _check_sharing(d, topo)
    return d


def _check_sharing(d: Demand, topo: TopoSpec) -> None:
    """ConfigError if too many DCQCN flows share one receiver's link
    (MAX_SHARING_FLOWS; measured with DCQCN hosts only, so other host CCs pass)."""
    if not d.sharing or d.cc.partition(":")[0] != "dcqcn":
        return
    dst = max(d.sharing, key=lambda k: d.sharing[k])
    n = d.sharing[dst]
    if n <= MAX_SHARING_FLOWS:
        return
    scale = topo.scale
    bdp = scale.pps(topo.link_at(dst, 0).rate_bps) * scale.base_rtt_s
    raise ConfigError(
        f"~{n:.0f} flows would share {dst}'s link at a time (on average while it receives; "
        f"the bmv2 backend stays faithful up to {MAX_SHARING_FLOWS:g}): at scale "
        f"{scale.name!r} a link's BDP is {bdp:.1f} packets, so each flow sends "
        f"{bdp / n:.2f} packets per RTT and DCQCN's marking feedback is too sparse to "
        f"slow it to its share; BMv2 has no PFC, so the port tail-drops and go-back-N "
        f"resends most of the bytes (examples/acc_incast.yaml: 20-29 flows, 93-95 % of "
        f"the bytes resent).  Use fewer concurrent flows ({_concurrency_knobs(d)}), or "
        f"--backend sim")


def describe(cal: Calibration) -> dict[str, Any]:
    return {**asdict(cal), "calibrated": cal.calibrated,
            "budget_cpu_s_per_s": UTIL_CAP * cal.cores}


def summary(cal: Calibration) -> str:
    """One line: the switch's cost and ceiling, the cores, where the numbers come from."""
    return (f"switch {cal.switch_us_per_pkt:g} µs/packet + {cal.switch_idle_cpu:g} CPU-s/s "
            f"idle, ceiling {cal.switch_sat_pps:.0f} packets/s; {cal.cores} cores "
            f"({_source(cal)})")


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
               used: dict[str, float], cal: Calibration | None = None,
               host_cc: str = "dcqcn", probe_s: float | None = None,
               int_watch: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The budget's prediction for a run beside what it used (``budget.json``): a run
    that used far more than predicted means the calibration underestimates this
    machine's cost and the budget admits too much."""
    cal = cal or load()
    d = demand(topo, schedule, duration_s, interval_s, host_cc, probe_s, int_watch)
    parts = terms(d, cal)
    predicted = sum(parts.values())
    return {"predicted_cpu_s_per_s": predicted, "budget_cpu_s_per_s": UTIL_CAP * cal.cores,
            "predicted_terms": parts, "receiver_sharing_flows": d.sharing,
            "used": used,
            "used_over_predicted": used["cpu_s_per_s"] / predicted if predicted > 0 else None,
            "calibration": describe(cal)}
