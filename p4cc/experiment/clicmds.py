"""The p4cc commands of ``p4cc cli``, apart from Mininet (tests drive them with a fake
session): each takes the rest of the command line and returns the text to print.

The Mininet CLI subclass in p4cc.experiment.mncli forwards ``do_<name>`` to
``TestbedCommands.<name>``.
"""

from __future__ import annotations

import collections
import csv
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4cc.constants import IPPROTO_UDP, ROCE_PORT
from p4cc.controlplane.agents.static import agent_names
from p4cc.errors import ConfigError
from p4cc.experiment.cliparse import format_telemetry, parse_ecn_args, parse_telemetry_args
from p4cc.experiment.cliwork import Jobs, plan_incast, plan_workload
from p4cc.experiment.incast import HEADERS_BYTES, iperf3_app_rate
from p4cc.experiment.session import FabricSession
from p4cc.topo.spec import TopoSpec

#: hop records kept per watched flow
INT_KEEP = 64
INT_COLUMNS = ["t_s", "switch", "src", "dst", "sport", "dport", "hop", "hop_switch_id",
               "ingress_port", "egress_port", "hop_latency_us", "qdepth_pkts", "sojourn_us"]


@dataclass(frozen=True)
class CliContext:
    topo_text: str
    scale: str
    cc: str
    state_dir: Path


class IntWatch:
    """INT on chosen flows: watch entries on every switch, one collector per switch
    (started at the first watch), the latest reports per (src ip, dst ip), and every
    hop appended to ``int.csv`` in the CLI's state directory."""

    def __init__(self, session: FabricSession, csv_path: Path) -> None:
        self.session = session
        self.csv_path = csv_path
        self.watched: set[tuple[str, str]] = set()
        self.reports: dict[tuple[str, str], collections.deque[Any]] = {}
        self._collectors: list[Any] = []
        self._lock = threading.Lock()

    def watch(self, src_ip: str, dst_ip: str) -> bool:
        """Add the watch (once); True if it was new."""
        if (src_ip, dst_ip) in self.watched:
            return False
        if not self._collectors:
            self._start()
        for ctl in self.session.controls.values():
            ctl.add_int_watch(src=src_ip, dst=dst_ip, proto=IPPROTO_UDP, dport=ROCE_PORT)
        self.watched.add((src_ip, dst_ip))
        return True

    def _start(self) -> None:
        from p4cc.controlplane.int_collector import IntCollector, default_decoder

        decode = default_decoder()
        t0 = self.session.t0 or None
        for name, ctl in self.session.controls.items():
            col = IntCollector(name, ctl.p4rt.packet_ins(), decode=decode, sink=self._keep,
                               t0=t0, clock=self.session.clock)
            col.start()
            self._collectors.append(col)

    def _keep(self, rec: Any) -> None:
        from p4cc.experiment.bmv2.collect import int_rows

        key = (str(rec.report.src), str(rec.report.dst))
        with self._lock:
            self.reports.setdefault(key, collections.deque(maxlen=INT_KEEP)).append(rec)
            new = not self.csv_path.exists()
            with self.csv_path.open("a", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=INT_COLUMNS, extrasaction="ignore")
                if new:
                    w.writeheader()
                w.writerows(int_rows(rec))

    def latest(self, src_ip: str, dst_ip: str, n: int = 1) -> list[Any]:
        with self._lock:
            return list(self.reports.get((src_ip, dst_ip), ()))[-n:]

    def stop(self) -> None:
        for col in self._collectors:
            col.stop()
        self._collectors.clear()


def format_int(recs: list[Any], src: str, dst: str) -> str:
    if not recs:
        return (f"INT on {src}->{dst}: no report yet.  Reports come from p4cc's senders "
                f"(UDP to port {ROCE_PORT}): start traffic, e.g. `incast {src} {dst}`, "
                "then run this again")
    rec = recs[-1]
    rep = rec.report
    lines = [f"INT {src}->{dst} (sport {rep.sport}) reported by {rec.switch} at "
             f"t={rec.t_s:.2f}s: {rep.hop_count} hop(s), path {list(rep.path)}, "
             f"latency {rep.path_latency_us} us, max queue {rep.max_qdepth_pkts} pkts"]
    for i, h in enumerate(reversed(rep.hops)):  # first switch first
        lines.append(f"  hop {i}: switch {h.switch_id} port {h.ingress_port}->"
                     f"{h.egress_port}  queue {h.qdepth_pkts} pkts  latency "
                     f"{h.hop_latency_us} us  sojourn {h.sojourn_us} us")
    return "\n".join(lines)


class TestbedCommands:
    __test__ = False  # not a pytest class

    def __init__(self, session: FabricSession, topo: TopoSpec, ctx: CliContext,
                 fabric: Any = None, log: Callable[[str], None] = lambda s: None) -> None:
        self.session, self.topo, self.ctx, self.fabric = session, topo, ctx, fabric
        self.jobs = Jobs(fabric, topo, ctx.state_dir / "jobs", log)
        self.int = IntWatch(session, ctx.state_dir / "int.csv")

    # -- looking ---------------------------------------------------------------------
    def telemetry(self, line: str) -> str:
        switch, port = parse_telemetry_args(line)
        return format_telemetry(self.session.latest(switch, port), switch, port)

    def _switches(self, line: str) -> list[str]:
        names = line.split() or sorted(self.session.controls)
        for n in names:
            if n not in self.session.controls:
                raise ConfigError(f"no switch {n!r}; switches are "
                                  f"{sorted(self.session.controls)}")
        return names

    def thresholds(self, line: str) -> str:
        """``thresholds [switch ...]``: the ECN setting in force per port."""
        out = []
        for name in self._switches(line):
            ctl = self.session.controls[name]
            for port, cfg in sorted(ctl.ecn.items()):
                peer = self.topo.link_at(name, port)
                other = peer.b if peer.a == name else peer.a
                out.append(f"{name}:{port:<3} (to {other:<4}) "
                           + (cfg.describe() if cfg is not None else "marking off"))
        return "\n".join(out)

    def agents(self, line: str = "") -> str:
        """The agent in charge of each switch (and the checkpoint a learned one loaded)."""
        return "\n".join(f"{name}: {loop.agent.name}" + _checkpoint(loop.agent)
                         for name, loop in sorted(self.session.loops.items()))

    def top(self, line: str = "") -> str:
        from p4cc.experiment.tui import render_text
        from p4cc.scale import get_scale

        scale = get_scale(self.ctx.scale)
        recs = [r for name, ctl in self.session.controls.items() for p in ctl.ports
                if (r := self.session.latest(name, p)) is not None]
        return render_text(recs, buffer_bytes=scale.buffer_bytes, pkt_bytes=scale.pkt_bytes)

    def int_(self, line: str) -> str:
        """``int <src host> <dst host>``: watch the flow, show its latest INT report."""
        words = line.split()
        if len(words) != 2:
            raise ConfigError("usage: int <src host> <dst host>")
        src, dst = (self.topo.host(w) for w in words)
        new = self.int.watch(src.ip, dst.ip)
        text = format_int(self.int.latest(src.ip, dst.ip), src.name, dst.name)
        return (f"INT watch on {src.name}->{dst.name} added on every switch\n" if new
                else "") + text

    # -- changing --------------------------------------------------------------------
    def ecn(self, line: str) -> str:
        switch, port, cfg = parse_ecn_args(line)
        self.session.set_ecn(switch, port, cfg)
        return f"{switch}:{port}: {cfg.describe()}"

    def agent(self, line: str) -> str:
        """``agent [switch] <name>``: run agent ``name`` on one switch (or all)."""
        words = line.split()
        if len(words) not in (1, 2):
            raise ConfigError(f"usage: agent [switch] <name>; agents: {agent_names()}, hold")
        name = words[-1]
        switches = self._switches(words[0] if len(words) == 2 else "")
        if name.partition(":")[0].lower() not in (*agent_names(), "hold"):
            raise ConfigError(f"unknown agent {name!r}; choose one of "
                              f"{[*agent_names(), 'hold']}")
        self.session.set_agent(None if name == "hold" else name, switches)
        return "\n".join(f"{s}: now {self.session.loops[s].agent.name}" for s in switches)

    # -- traffic ---------------------------------------------------------------------
    def workload(self, line: str) -> str:
        plan = plan_workload(line.split(), self.ctx.topo_text, self.ctx.scale, self.ctx.cc,
                             seed=len(self.jobs.jobs) + 1)
        job = self.jobs.start(plan)
        return f"started {job.describe()}"

    def incast(self, line: str) -> str:
        plan = plan_incast(line.split(), self.topo, self.ctx.topo_text, self.ctx.scale,
                           self.ctx.cc)
        job = self.jobs.start(plan)
        return f"started {job.describe()}"

    def list_jobs(self, line: str = "") -> str:
        return self.jobs.describe()

    def stop(self, line: str) -> str:
        return "\n".join(self.jobs.stop(line.strip() or "all")) or "nothing to stop"

    # -- hints -----------------------------------------------------------------------
    def shell(self, line: str) -> str:
        switch = line.strip() or sorted(self.session.controls)[0]
        self._switches(switch)
        return (f"p4runtime-shell on {switch}: in a second terminal run\n"
                f"  p4cc shell {switch}          (read-only: p4cc's controller stays "
                f"primary)\n  p4cc shell {switch} --write  (takes primary while it runs: "
                "the control loop's writes fail until you leave the shell)")

    def iperf_hint(self) -> str:
        """iperf3 with datagrams of the scale's packet size (UDP payload = pkt - headers)."""
        from p4cc.scale import get_scale

        scale = get_scale(self.ctx.scale)
        payload = scale.pkt_bytes - HEADERS_BYTES
        rx, tx = self.topo.hosts[-1], self.topo.hosts[0]
        # a third of the receiver's link per sender: three senders overload it
        rate = iperf3_app_rate(self.topo.link_at(rx.name, 0).rate_bps / 3, payload)
        return (f"  {rx.name} iperf3 -s -D ; {tx.name} iperf3 -c {rx.ip} -u -b {rate:.0f} "
                f"-l {payload} -t 10   (-l {payload}: {scale.pkt_bytes} B frames, the "
                f"scale's packet size)")

    def close(self) -> None:
        self.jobs.stop("all")
        self.int.stop()


def _checkpoint(agent: object) -> str:
    """`` (<path>)`` for an agent that loaded a checkpoint (ACC, PET, their online
    variants), else ''."""
    path = getattr(agent, "path", None) or getattr(getattr(agent, "base", None), "path", None)
    return f" ({path})" if path is not None else ""
