"""The host side of a BMv2 run: start every process, wait until it is ready, publish t0.

``p4cc host recv`` in every destination host (ready when its log says ``"listening"``),
one synchronised ``p4cc host send --schedule`` per source host through
p4cc.experiment.bmv2.hosts's wrapper (ready when it created its ready file), one
``iperf3 -s`` per bulk flow (ready when its port listens); then the go file with t0.
Bulk iperf3 clients start at their start times (``start_bulk``).  Every process is kept
with its PID and stopped by it (``stop``).
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
    IPERF_BASE_PORT,
    STARTUP_TIMEOUT_S,
    probe_interval_s,
)
from p4cc.experiment.spec import ExperimentSpec
from p4cc.topo.spec import TopoSpec

#: the last lines of a process log quoted when it failed
LOG_TAIL_CHARS = 800
#: senders give up this long after their last scheduled start (or the run's end): the
#: backend stops them by PID at the end; this only bounds an orphaned sender's life
SENDER_DEADLINE_SLACK_S = 30.0
#: shortest bulk client: iperf3 reports once per ``-i`` (1 s, traffic.iperf), so a
#: shorter client would report nothing
MIN_BULK_S = 1.0


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _tail(p: hp.HostProc) -> str:
    try:
        return p.log_path.read_text()[-LOG_TAIL_CHARS:]
    except OSError:
        return ""


class HostProcesses:
    def __init__(self, fabric: Any, spec: ExperimentSpec, topo: TopoSpec,
                 schedule: pd.DataFrame, hosts_dir: Path, log: Callable[[str], None]) -> None:
        self.fabric, self.spec, self.topo, self.log = fabric, spec, topo, log
        self.hosts_dir = hosts_dir
        self.sized = schedule[schedule["cls"] != "bulk"]
        self.bulk_rows = schedule[schedule["cls"] == "bulk"]
        self.procs: list[hp.HostProc] = []
        self.senders: dict[str, list[int]] = {}  # host -> schedule flow ids in start order
        self.sender_procs: dict[str, hp.HostProc] = {}
        self.bulk: list[hp.HostProc] = []  # iperf3 clients
        #: (host, role) -> more options of ``p4cc host <role>`` (CHAMELEON's --monitor)
        self.extra_args: Callable[[str, str], list[str]] = lambda host, role: []

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
        receivers = self._start_receivers(deadline)
        ready = self._start_senders()
        self._start_iperf3_servers(deadline)
        for p, path in ready:
            while not path.is_file():
                if not p.alive() or time.monotonic() > deadline:
                    raise hp.HostsError(f"sender in {p.host} did not get ready: {_tail(p)}")
                time.sleep(hp.LISTEN_POLL_S)  # poll interval of the readiness condition
        # each runs in its own session (mnexec -d): raise its scheduler group (limits.
        # HOST_NICE).  Only now: right after the spawn mnexec may not have called setsid
        # yet, and the write would land on the runner's own group
        for p in self.procs:
            set_autogroup_nice(p.pid, HOST_NICE)
        t0_epoch = time.time() + GO_LEAD_S
        t0_mono = time.monotonic() + GO_LEAD_S
        hp.write_go(self.hosts_dir / "go", t0_epoch)
        self.log(f"bmv2: {len(receivers)} receivers, {len(ready)} senders, "
                 f"{len(self.bulk_rows)} bulk flows; t0 = {t0_epoch:.3f}")
        return t0_epoch, t0_mono

    def _start_receivers(self, deadline: float) -> list[hp.HostProc]:
        scale = self.topo.scale.name
        dsts = sorted(set(self.sized["dst"].astype(str)),
                      key=lambda h: self.topo.hosts.index(self.topo.host(h)))
        receivers = [self._spawn(h, "recv", [sys.executable, "-m", "p4cc", "host", "recv",
                                             "--scale", scale, "--out",
                                             str(self.hosts_dir / h / "recv"),
                                             *self.extra_args(h, "recv")], "recv.log")
                     for h in dsts]
        for p in receivers:
            if not hp.wait_for_text(p.log_path, '"listening"', deadline, [p]):
                raise hp.HostsError(f"p4cc host recv in {p.host} did not start: {_tail(p)}")
        return receivers

    def _start_senders(self) -> list[tuple[hp.HostProc, Path]]:
        cc, scale = self.spec.host_cc, self.topo.scale
        probe = probe_interval_s(cc, self.sized["src"].nunique(),
                                 scale.pps(scale.link_rate_bps), scale.base_rtt_s)
        self.log(f"bmv2: RTT probes every {probe * 1e3:.1f} ms per flow")
        ready = []
        for src, rows in self.sized.groupby("src", sort=False):
            h = str(src)
            d = self.hosts_dir / h
            flows: list[dict[str, Any]] = [
                {"dst": self.topo.host(str(r["dst"])).ip, "size": int(r["size_bytes"]),
                 "start_s": float(r["start_s"]), "cc": cc, "ref": int(r["flow_id"]),
                 "after": int(r.get("after", -1)),
                 "stop_s": None if _nan(r.get("stop_s")) else float(r["stop_s"])}
                for r in rows.to_dict("records")]
            d.mkdir(parents=True, exist_ok=True)
            (d / "schedule.json").write_text(json.dumps(flows))
            self.senders[h] = [int(x) for x in rows["flow_id"]]
            last = max(float(f["start_s"]) for f in flows)
            nic = self.topo.link_at(h, 0).rate_bps
            argv = [sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
                    str(d / "ready"), "--go", str(self.hosts_dir / "go"),
                    "--nic-rate", f"{nic:g}", "--", "host", "send", "--schedule",
                    str(d / "schedule.json"), "--cc", cc, "--scale", scale.name,
                    "--dev", f"{h}-eth0", "--out", str(d / "send"),
                    "--probe-interval", f"{probe:g}",
                    "--completions", str(self.hosts_dir / "completions"), "--deadline",
                    f"{max(self.spec.duration_s, last) + SENDER_DEADLINE_SLACK_S:g}",
                    *self.extra_args(h, "send")]
            p = self._spawn(h, "send", argv, "send.log")
            self.sender_procs[h] = p
            ready.append((p, d / "ready"))
        return ready

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
        from p4cc.traffic.iperf import iperf3_client_argv

        fid = int(row["flow_id"])
        src, dst = str(row["src"]), str(row["dst"])
        stop = float(row["stop_s"])
        if math.isnan(stop):
            stop = float(self.spec.duration_s)
        dur = max(MIN_BULK_S, stop - float(row["start_s"]))
        argv = iperf3_client_argv(self.topo.host(dst).ip, dur, self._iperf3_port(fid))
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

    def stop(self) -> list[str]:
        """Stop every process by PID; returns what needed killing."""
        return hp.stop_all(self.procs)
