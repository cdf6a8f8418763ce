"""The host side of a BMv2 run: start every process, wait until it is ready, publish t0.

Synchronised host processes through p4cc.experiment.bmv2.hosts's wrapper, each ready
when it created its ready file: per host with sized flows a receive-only ``p4cc host
run`` (if flows go to it; ready once it listens) and a ``p4cc host send --schedule`` (if
flows leave it), or with ``one_process`` one ``host run`` doing both in one event loop;
one ``iperf3 -s`` per bulk flow (ready when its port listens); then the go file with t0.
Bulk iperf3 clients start at their start times (``start_bulk``).  Every process is kept
with its PID and stopped by it (``stop``); each host process's CPU time from t0 to the
stop is kept (``cpu_rows``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.experiment.bmv2 import hosts as hp
from p4cc.experiment.bmv2.control import set_autogroup_nice
from p4cc.experiment.bmv2.limits import (
    GO_LEAD_S,
    HOST_NICE,
    HOST_RT_PRIO,
    HOST_SLICE_S,
    HOST_START_RT_LEAD_S,
    HOST_START_RT_PRIO,
    HOST_SWITCH_INTERVAL_S,
    IPERF_BASE_PORT,
    STARTUP_TIMEOUT_S,
    probe_interval_s,
    probe_max_pps,
)
from p4cc.experiment.bmv2.procmon import tree_cpu_seconds, wait_seconds
from p4cc.experiment.spec import ExperimentSpec
from p4cc.hostcc.rtt_samples import default_probe_quiet_s
from p4cc.hostcc.sender_config import SenderConfig
from p4cc.topo.spec import TopoSpec

#: the last lines of a process log quoted when it failed
LOG_TAIL_CHARS = 800
#: senders give up this long after their last scheduled start (or the run's end): the
#: backend stops them by PID at the end; this only bounds an orphaned sender's life
SENDER_DEADLINE_SLACK_S = 30.0
#: shortest bulk client: iperf3 reports once per ``-i`` (1 s, traffic.iperf), so a
#: shorter client would report nothing
MIN_BULK_S = 1.0
#: With ``one_process``, a host process that sends and receives does the work of a
#: receiving and a sending process, each with an autogroup at HOST_NICE: 3 nice levels
#: less give its group about the weight of the two (kernel/sched/core.c
#: sched_prio_to_weight: nice -5 3121, nice -8 6100 = 1.95 x 3121).  Measured: this did
#: not bring its reply latency back to the split's (docs/emulation.md).
BOTH_ROLES_NICE_STEPS = 3


def host_sched_args() -> list[str]:
    """The wrapper's scheduling options (limits.HOST_SLICE_S, HOST_RT_PRIO,
    HOST_SWITCH_INTERVAL_S; p4cc.hostcc.sched)."""
    return ["--slice-ms", f"{HOST_SLICE_S * 1e3:g}", "--rt-prio", str(HOST_RT_PRIO),
            "--switch-interval-ms", f"{HOST_SWITCH_INTERVAL_S * 1e3:g}"]


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _tail(p: hp.HostProc) -> str:
    try:
        return p.log_path.read_text()[-LOG_TAIL_CHARS:]
    except OSError:
        return ""


class HostProcesses:
    def __init__(self, fabric: Any, spec: ExperimentSpec, topo: TopoSpec,
                 schedule: pd.DataFrame, hosts_dir: Path, log: Callable[[str], None],
                 one_process: bool = False, ack_every: int | None = None) -> None:
        self.fabric, self.spec, self.topo, self.log = fabric, spec, topo, log
        #: the senders' ``--ack-every`` (None: host send's default, an ACK request per 16
        #: data packets; docs/emulation.md "ACK coalescing, before and after")
        self.ack_every = ack_every
        #: one ``host run`` per host (receiver and sender in one loop) instead of a
        #: receiving and a sending process: less CPU, but slower replies on a contended
        #: CPU (docs/emulation.md, "One host process per host")
        self.one_process = one_process
        self.hosts_dir = hosts_dir
        self.sized = schedule[schedule["cls"] != "bulk"]
        self.bulk_rows = schedule[schedule["cls"] == "bulk"]
        self.procs: list[hp.HostProc] = []
        self.senders: dict[str, list[int]] = {}  # host -> schedule flow ids in start order
        self.sender_procs: dict[str, hp.HostProc] = {}  # the host processes that send
        self.host_procs: list[hp.HostProc] = []  # every ``host run`` process
        self.receivers: set[str] = set()  # hosts that receive sized flows
        self.cpu_at_t0: dict[int, float] = {}  # pid -> CPU s when t0 was published
        #: pid -> (CPU s, run-queue wait s) when last sampled (``sample_cpu``): what a
        #: process that exited before the stop used, which /proc no longer shows
        self.cpu_last: dict[int, tuple[float, float]] = {}
        self.bulk: list[hp.HostProc] = []  # iperf3 clients
        #: (host, role) -> more options of ``p4cc host <role>`` (CHAMELEON's --monitor)
        self.extra_args: Callable[[str, str], list[str]] = lambda host, role: []
        self.probe_cap = 0.0  # --probe-max-pps of every sender (set when hosts start)

    def _spawn(self, host: str, role: str, argv: list[str], log_name: str,
               **meta: Any) -> hp.HostProc:
        p = hp.spawn(self.fabric.host(host), host, role, argv, self.hosts_dir / host,
                     log_name, **meta)
        self.procs.append(p)
        self.log(f"bmv2: {host} {role} pid {p.pid}")
        return p

    # -- start -----------------------------------------------------------------------
    def start(self) -> tuple[float, float]:
        """Start and wait for everything; publish t0.  Returns t0 as (Unix, monotonic)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        ready = self._start_hosts()
        self._start_iperf3_servers(deadline)
        for p, path in ready:
            while not path.is_file():
                if not p.alive() or time.monotonic() > deadline:
                    raise hp.HostsError(f"the host process in {p.host} did not get ready: "
                                        f"{_tail(p)}")
                time.sleep(hp.LISTEN_POLL_S)  # poll interval of the readiness condition
        # each runs in its own session (mnexec -d): raise its scheduler group (limits.
        # HOST_NICE).  Only now: right after the spawn mnexec may not have called setsid
        # yet, and the write would land on the runner's own group
        for p in self.procs:
            both = p.role == "host" and p.host in self.senders and p.host in self.receivers
            set_autogroup_nice(p.pid, HOST_NICE - (BOTH_ROLES_NICE_STEPS if both else 0))
        self.cpu_at_t0 = {p.pid: _cpu(p.pid) for p, _path in ready}
        t0_epoch = time.time() + GO_LEAD_S
        t0_mono = time.monotonic() + GO_LEAD_S
        hp.write_go(self.hosts_dir / "go", t0_epoch)
        self.log(f"bmv2: {len(ready)} host processes ({len(self.receivers)} hosts receive, "
                 f"{len(self.senders)} send), {len(self.bulk_rows)} bulk flows; "
                 f"t0 = {t0_epoch:.3f}")
        return t0_epoch, t0_mono

    def _start_hosts(self) -> list[tuple[hp.HostProc, Path]]:
        """Host processes through the wrapper, senders in schedule order, then the hosts
        that only receive: per host one ``host run`` (``one_process``) or a receive-only
        ``host run`` and a ``host send`` (``recv.log``, ``send.log``)."""
        cc, scale = self.spec.host_cc, self.topo.scale
        sources, link_pps = self.sized["src"].nunique(), scale.pps(scale.link_rate_bps)
        probe = probe_interval_s(cc, sources, link_pps, scale.base_rtt_s)
        self.probe_cap = probe_max_pps(sources, link_pps)
        self.log(f"bmv2: RTT probes every {probe * 1e3:.1f} ms per flow, at most "
                 f"{self.probe_cap:.1f}/s per sender; an ACK request every "
                 f"{self.ack_every or SenderConfig().ack_every} data packets")
        srcs = list(dict.fromkeys(self.sized["src"].astype(str)))  # schedule order
        self.receivers = set(self.sized["dst"].astype(str))
        ready = []
        for h in srcs + [x.name for x in self.topo.hosts
                         if x.name in self.receivers and x.name not in srcs]:
            d = self.hosts_dir / h
            d.mkdir(parents=True, exist_ok=True)
            send = self._send_args(h, d, cc, probe) if h in srcs else []
            recv = ["--recv-out", str(d / "recv")] if h in self.receivers else []
            if self.one_process:
                parts = [("host", ["host", "run", *send, *(recv or ["--no-recv"])])]
            else:  # a receive-only ``host run`` (ready = listening) and ``host send``
                parts = ([("recv", ["host", "run", *recv])] if recv else []) + (
                    [("send", ["host", "send", *send])] if send else [])
            for role, cmd in parts:
                tag = "" if role == "host" else f"-{role}"
                argv = [sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
                        str(d / f"ready{tag}"), "--go", str(self.hosts_dir / "go"),
                        *host_sched_args()]
                if send and role != "recv":
                    argv += ["--nic-rate", f"{self.topo.link_at(h, 0).rate_bps:g}"]
                cmd += ["--scale", scale.name, *self.extra_args(h, role)]
                p = self._spawn(h, role, [*argv, "--", *cmd], f"{role}.log")
                self.host_procs.append(p)
                if send and role != "recv":
                    self.sender_procs[h] = p
                ready.append((p, d / f"ready{tag}"))
        return ready

    def _send_args(self, h: str, d: Path, cc: str, probe: float) -> list[str]:
        """``host run`` options of host ``h``'s flows (writes its schedule.json)."""
        rows = self.sized[self.sized["src"].astype(str) == h]
        flows: list[dict[str, Any]] = [
            {"dst": self.topo.host(str(r["dst"])).ip, "size": int(r["size_bytes"]),
             "start_s": float(r["start_s"]), "cc": cc, "ref": int(r["flow_id"]),
             "after": int(r.get("after", -1)),
             "stop_s": None if _nan(r.get("stop_s")) else float(r["stop_s"])}
            for r in rows.to_dict("records")]
        (d / "schedule.json").write_text(json.dumps(flows))
        self.senders[h] = [int(x) for x in rows["flow_id"]]
        last = max(float(f["start_s"]) for f in flows)
        return ["--schedule", str(d / "schedule.json"), "--cc", cc, "--dev", f"{h}-eth0",
                "--out", str(d / "send"), "--probe-interval", f"{probe:g}",
                "--probe-max-pps", f"{self.probe_cap:g}", "--pad",
                *self._chain_args(),
                "--start-rt-prio", str(HOST_START_RT_PRIO),
                "--start-rt-lead", f"{HOST_START_RT_LEAD_S:g}", "--deadline",
                f"{max(self.spec.duration_s, last) + SENDER_DEADLINE_SLACK_S:g}",
                *quiet_args(cc),
                *([] if self.ack_every is None else ["--ack-every", str(self.ack_every)])]

    def _chain_args(self) -> list[str]:
        """The shared completions file, when any flow waits for another (``after``)."""
        after = self.sized["after"] if "after" in self.sized else None
        if after is None or not (after.fillna(-1).astype(int) >= 0).any():
            return []
        return ["--completions", str(self.hosts_dir / "completions")]

    def _iperf3_port(self, flow_id: int) -> int:
        return IPERF_BASE_PORT + [int(x) for x in self.bulk_rows["flow_id"]].index(flow_id)

    def _start_iperf3_servers(self, deadline: float) -> None:
        by_dst: dict[str, list[int]] = {}
        for fid, dst in zip(self.bulk_rows["flow_id"], self.bulk_rows["dst"], strict=True):
            port = self._iperf3_port(int(fid))
            self._spawn(str(dst), "iperf3-server", ["iperf3", "-s", "-1", "-p", str(port)],
                        f"iperf3-s{port}.log")
            by_dst.setdefault(str(dst), []).append(port)
        for dst, ports in by_dst.items():
            hp.wait_listening(self.fabric.host(dst), dst, ports,
                              max(0.0, deadline - time.monotonic()))

    def start_bulk(self, row: dict[str, Any], now_s: float) -> None:
        """Start the iperf3 client of one bulk row (at its start time ``now_s``)."""
        from p4cc.traffic.iperf import iperf3_client_argv, tcp_mss

        fid = int(row["flow_id"])
        src, dst = str(row["src"]), str(row["dst"])
        stop = float(row["stop_s"])
        if math.isnan(stop):
            stop = float(self.spec.duration_s)
        dur = max(MIN_BULK_S, stop - float(row["start_s"]))
        # segments of the packet size the link rate assumes: the ports serve packets/s
        argv = iperf3_client_argv(self.topo.host(dst).ip, dur, self._iperf3_port(fid),
                                  mss=tcp_mss(self.topo.scale.pkt_bytes))
        self.bulk.append(self._spawn(src, "iperf3-client", argv, f"iperf3-c{fid}.json",
                                     flow_id=fid, start_s=now_s, dst=dst))

    # -- while running and after -----------------------------------------------------
    def check_senders(self) -> None:
        """A sender that exited without ever writing fct.csv failed to start: stop."""
        for h, p in self.sender_procs.items():
            if not p.alive() and not (self.hosts_dir / h / "send" / "fct.csv").is_file():
                raise hp.HostsError(f"the sender in {h} exited ({p.proc.returncode}) "
                                    f"before sending: {_tail(p)}")

    def save_qdisc_stats(self) -> list[str]:
        """Each sender host's HTB counters (drops, overlimits) -> hosts/<h>/tc.txt;
        returns what could not be saved (diagnostics only)."""
        problems = []
        for h in self.sender_procs:
            dev = f"{h}-eth0"
            try:
                out = self.fabric.host(h).cmd(f"tc -s qdisc show dev {dev}; "
                                              f"tc -s class show dev {dev}")
                (self.hosts_dir / h / "tc.txt").write_text(out)
            except Exception as exc:  # diagnostics only
                problems.append(f"tc stats of {h}: {exc}")
        return problems

    def sample_cpu(self) -> None:
        """Remember each live host process's CPU and wait (the switch sampler calls this
        every sampling period), so ``cpu_rows`` can count a process that exits early."""
        for p in self.host_procs:
            try:
                cpu, wait = tree_cpu_seconds(p.pid), wait_seconds(p.pid)
            except (OSError, IndexError, ValueError):
                continue  # exited: its last sample stays
            self.cpu_last[p.pid] = (cpu, wait)

    def cpu_rows(self) -> list[dict[str, Any]]:
        """CPU seconds of each host process and its children (its pacer's ``tc -batch``;
        procmon.tree_cpu_seconds) and its run-queue
        wait (schedstat), at t0 and now: call before ``stop``.  A process that already
        exited is counted with its last sample (``exited``: up to one sampling period
        of its CPU is missing); one never sampled is left out."""
        rows = []
        for p in self.host_procs:
            exited = False
            try:
                cpu, wait = tree_cpu_seconds(p.pid), wait_seconds(p.pid)
            except (OSError, IndexError, ValueError):
                if p.pid not in self.cpu_last:
                    continue  # exited before any sample (check_senders says why)
                (cpu, wait), exited = self.cpu_last[p.pid], True
            t0 = self.cpu_at_t0.get(p.pid, math.nan)
            rows.append({"host": p.host, "role": p.role, "pid": p.pid,
                         "sends": p is self.sender_procs.get(p.host),
                         "receives": p.host in self.receivers and p.role != "send",
                         "cpu_s": cpu, "cpu_at_t0_s": t0, "cpu_run_s": cpu - t0,
                         "wait_s": wait, "exited": exited})
        return rows

    def stop(self) -> list[str]:
        """Stop every process by PID; returns what needed killing."""
        return hp.stop_all(self.procs)


def _cpu(pid: int) -> float:
    try:
        return tree_cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return math.nan


def quiet_args(cc: str) -> list[str]:
    """``--probe-quiet`` for a sender under ``cc`` (explicit in the host's command line:
    p4cc.hostcc.rtt_samples.default_probe_quiet_s), or nothing."""
    q = default_probe_quiet_s(cc)
    return [] if q is None else ["--probe-quiet", f"{q:g}"]
