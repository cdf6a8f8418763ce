"""``Bmv2Backend``: p4cc.experiment.backend.Backend played on Mininet + BMv2 (docs/emulation.md).

One run: build the Fabric, push p4cc's pipeline and static settings to every switch
(SwitchControl.setup), give every switch one ControlLoop running the agent variant every
``spec.interval_s``, start ``p4cc host recv`` in every destination host and one
synchronised ``p4cc host send --schedule`` per source host (bmv2_hosts), iperf3 for
``bulk`` rows, link events with ``ip link set``; after ``duration_s`` stop everything
by PID and read the hosts' records back into the sink.  Telemetry, agent actions and
INT reports go to the sink while the run goes (the loop threads queue them; only the
main thread writes).  Everything started is stopped in ``finally`` (also on SIGINT or
SIGTERM, which the runner turns into KeyboardInterrupt), so an interrupted run keeps
its partial results and leaves no process or interface behind.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.experiment.bmv2 import collect
from p4cc.experiment.bmv2 import control as ctlmod
from p4cc.experiment.bmv2 import hosts as hp
from p4cc.experiment.bmv2.limits import (
    GO_LEAD_S,
    INT_SOURCES,
    IPERF_BASE_PORT,
    MAX_HOSTS,
    MAX_SWITCHES,
    STARTUP_TIMEOUT_S,
    SWITCH_NICE,
    check_spec,
    probe_interval_s,
)
from p4cc.experiment.spec import ExperimentSpec
from p4cc.scale import Scale
from p4cc.topo.spec import TopoSpec

log = logging.getLogger(__name__)

class Bmv2Backend:
    name = "bmv2"

    def check(self, spec: ExperimentSpec) -> None:
        check_spec(spec)

    def run(self, spec: ExperimentSpec, schedule: pd.DataFrame, link_events: pd.DataFrame,
            agent_name: str, sink: Any, progress: Any) -> None:
        self.check(spec)
        _Run(spec, schedule, link_events, agent_name, sink, progress).play()


class _Run:
    """State of one bmv2 run (kept out of Bmv2Backend so the backend is reusable)."""

    def __init__(self, spec: ExperimentSpec, schedule: pd.DataFrame,
                 link_events: pd.DataFrame, agent_name: str, sink: Any, progress: Any) -> None:
        self.spec, self.agent_name, self.sink, self.progress = spec, agent_name, sink, progress
        self.topo: TopoSpec = spec.topo()
        self.scale: Scale = self.topo.scale
        self.schedule = schedule.sort_values(["start_s", "flow_id"], kind="stable")
        self.events = link_events.sort_values("t_s", kind="stable") if len(link_events) else \
            link_events
        # absolute: the host processes run in other working directories
        self.root = Path(sink.path).resolve()
        self.hosts_dir = self.root / "hosts"
        self.q: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.procs: list[hp.HostProc] = []
        self.fabric: Any = None
        self.controls: dict[str, Any] = {}
        self.loops: list[tuple[Any, threading.Thread]] = []
        self.collectors: list[Any] = []
        self.stop_evt = threading.Event()
        self.t0_mono = 0.0
        self.t0_epoch = 0.0
        self.senders: dict[str, list[int]] = {}  # host -> schedule flow ids in start order
        self.sender_procs: dict[str, hp.HostProc] = {}
        self.bulk_rows = self.schedule[self.schedule["cls"] == "bulk"]
        self.bulk: list[hp.HostProc] = []

    def now(self) -> float:
        """Run time (seconds since t0); 0 before the traffic's t0 is set."""
        return time.monotonic() - self.t0_mono if self.t0_mono else 0.0

    # -- the run ---------------------------------------------------------------------
    def play(self) -> None:
        try:
            self._start_fabric()
            self._start_control()
            self._start_hosts()
            self._loop()
        finally:
            with ctlmod.signals_deferred():
                self._teardown()

    def _start_fabric(self) -> None:
        from p4cc.topo.build import Fabric, FabricOptions

        self.sink.log(f"bmv2: starting fabric {self.topo.name} ({len(self.topo.switches)} "
                      f"switches, {len(self.topo.hosts)} hosts)")
        self.fabric = Fabric(self.topo, FabricOptions(out_dir=self.root / "switches"))
        self.fabric.start()
        for sw in self.topo.switches:  # for leak checks after the run (tests, humans)
            self.sink.log(f"bmv2: switch {sw.name} pid {self.fabric.bmv2(sw.name).pid}")

    def _start_control(self) -> None:
        """SwitchControl per switch (not FabricControl: its own poll thread would reset
        the interval registers under the agents' pollers)."""
        from p4cc.controlplane.agents.static import make_agent
        from p4cc.controlplane.p4runtime import P4RuntimeClient
        from p4cc.controlplane.switch import SwitchControl
        from p4cc.controlplane.thrift import ThriftClient

        opts = self.fabric.options
        for sw in self.topo.switches:
            device_id, grpc_addr, thrift_port = self.fabric.endpoints()[sw.name]
            ctl = SwitchControl(sw, self.topo, opts.p4info, opts.p4_json,
                                p4rt=P4RuntimeClient(grpc_addr, device_id),
                                thrift=ThriftClient(f"127.0.0.1:{thrift_port}", opts.p4_json))
            self.controls[sw.name] = ctl
            ctl.connect()
            ctl.setup()
        for line in ctlmod.prioritise_switches(self.fabric, self.topo, SWITCH_NICE):
            self.sink.log(line)
        self.agents = {}
        for name, ctl in self.controls.items():
            agent = ctlmod.RecordingAgent(make_agent(self.agent_name, self.scale), name, self.q,
                                    self.now)
            agent.reset(ctl.ecn)
            first = dict(agent.act({}))  # static settings before any traffic
            if first:
                for p, cfg in first.items():
                    cfg.validate(self.scale.buffer_bytes)
                    _ = p
                ctl.set_ecn_all(first)
            self.agents[name] = agent
        if "int" in self.spec.outputs:
            self._watch_int()

    def _watch_int(self) -> None:
        sources = list(dict.fromkeys(str(s) for s in self.schedule.loc[
            self.schedule["cls"] != "bulk", "src"]))[:INT_SOURCES]
        for src in sources:
            ip = self.topo.host(src).ip
            for ctl in self.controls.values():
                ctl.add_int_watch(src=ip, proto=17, dport=4791)
        self.sink.log(f"bmv2: INT on the p4cc flows of {sources}")
        self.int_sources = sources

    def _spawn(self, host: str, role: str, argv: list[str], log_name: str,
               **meta: Any) -> hp.HostProc:
        p = hp.spawn(self.fabric.host(host), host, role, argv, self.hosts_dir / host,
                     log_name, **meta)
        self.procs.append(p)
        self.sink.log(f"bmv2: {host} {role} pid {p.pid}")
        return p

    def _start_hosts(self) -> None:
        py = sys.executable
        scale = self.scale.name
        cc = self.spec.host_cc
        sized = self.schedule[self.schedule["cls"] != "bulk"]
        dsts = sorted(set(sized["dst"].astype(str)), key=lambda h: self.topo.hosts.index(
            self.topo.host(h)))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        receivers = []
        for h in dsts:
            d = self.hosts_dir / h
            receivers.append(self._spawn(h, "recv", [py, "-m", "p4cc", "host", "recv",
                                                     "--scale", scale, "--out", str(d / "recv")],
                                         "recv.log"))
        for p in receivers:
            if not hp.wait_for_text(p.log_path, '"listening"', deadline, [p]):
                raise hp.HostsError(f"p4cc host recv in {p.host} did not start: "
                                    f"{p.log_path.read_text()[-800:]}")
        go = self.root / "hosts" / "go"
        ready = []
        probe = probe_interval_s(cc, sized["src"].nunique(),
                                 self.scale.pps(self.scale.link_rate_bps), self.scale.base_rtt_s)
        self.sink.log(f"bmv2: RTT probes every {probe * 1e3:.1f} ms per flow")
        for src, rows in sized.groupby("src", sort=False):
            h = str(src)
            d = self.hosts_dir / h
            flows: list[dict[str, Any]] = [
                {"dst": self.topo.host(str(r["dst"])).ip, "size": int(r["size_bytes"]),
                 "start_s": float(r["start_s"]), "cc": cc} for r in rows.to_dict("records")]
            d.mkdir(parents=True, exist_ok=True)
            (d / "schedule.json").write_text(json.dumps(flows))
            self.senders[h] = [int(x) for x in rows["flow_id"]]
            last = max(float(f["start_s"]) for f in flows)
            nic = self.topo.link_at(h, 0).rate_bps
            argv = [py, "-m", "p4cc.experiment.bmv2.hosts", "--ready", str(d / "ready"),
                    "--go", str(go), "--nic-rate", f"{nic:g}", "--", "host", "send", "--schedule",
                    str(d / "schedule.json"), "--cc", cc, "--scale", scale,
                    "--dev", f"{h}-eth0", "--out", str(d / "send"),
                    "--probe-interval", f"{probe:g}",
                    "--deadline", f"{max(self.spec.duration_s, last) + 30:g}"]
            p = self._spawn(h, "send", argv, "send.log")
            self.sender_procs[h] = p
            ready.append((p, d / "ready"))
        for i, row in enumerate(self.bulk_rows.itertuples()):
            dst = str(row.dst)
            port = IPERF_BASE_PORT + i
            self._spawn(dst, "iperf3-server", ["iperf3", "-s", "-1", "-p", str(port)],
                        f"iperf3-s{port}.log")
        for p, path in ready:
            while not path.is_file():
                if not p.alive() or time.monotonic() > deadline:
                    raise hp.HostsError(f"sender in {p.host} did not get ready: "
                                        f"{p.log_path.read_text()[-800:]}")
                time.sleep(0.02)  # poll interval of the readiness condition
        self.t0_epoch = time.time() + GO_LEAD_S
        self.t0_mono = time.monotonic() + GO_LEAD_S
        hp.write_go(go, self.t0_epoch)
        self.sink.log(f"bmv2: {len(receivers)} receivers, {len(ready)} senders, "
                      f"{len(self.bulk_rows)} bulk flows; t0 = {self.t0_epoch:.3f}")
        self._start_loops()

    def _start_loops(self) -> None:
        """Build loops and collectors (imports: Scapy takes ~1 s), wait for t0, start."""
        from p4cc.controlplane.int_collector import IntCollector, default_decoder
        from p4cc.controlplane.loop import ControlLoop, LoopConfig
        from p4cc.controlplane.telemetry import TelemetryPoller

        want_int = "int" in self.spec.outputs
        decode = default_decoder() if want_int else None
        for name, ctl in self.controls.items():
            spec = ctl.spec
            poller = TelemetryPoller(name, spec.ports, ctl.p4rt, ctl.thrift, self.scale,
                                     {p: ctl.port_rate_bps(p) for p in spec.ports},
                                     ctlmod.ecn_source(ctl), t0=self.t0_mono)
            loop = ControlLoop(ctl, poller, self.agents[name],
                               LoopConfig(interval_s=float(self.spec.interval_s)),
                               sink=lambda recs: self.q.put(("telemetry", recs)))
            th = threading.Thread(target=loop.run, kwargs={"stop": self.stop_evt},
                                  name=f"p4cc-loop-{name}", daemon=True)
            self.loops.append((loop, th))
            if want_int:
                self.collectors.append(IntCollector(
                    name, ctl.p4rt.packet_ins(), decode=decode, t0=self.t0_mono,
                    sink=lambda rec: self.q.put(("int", rec))))
        while time.monotonic() < self.t0_mono:
            time.sleep(max(0.0, self.t0_mono - time.monotonic()))  # until t0 (an instant)
        for col in self.collectors:
            col.start()
        for _loop, th in self.loops:
            th.start()

    def _loop(self) -> None:
        duration = float(self.spec.duration_s)
        bulk: list[Any] = self.bulk_rows.to_dict("records")
        events: list[Any] = self.events.to_dict("records") if len(self.events) else []
        while True:
            t = self.now()
            while bulk and float(bulk[0]["start_s"]) <= t:
                self._start_bulk(bulk.pop(0))
            while events and float(events[0]["t_s"]) <= t:
                self._link_event(events.pop(0))
            self._drain()
            self.fabric.check()
            self._check_senders()
            self.progress(min(t, duration))
            if t >= duration:
                break
            time.sleep(min(0.1, max(0.0, duration - t)))  # main-loop tick (run clock)

    def _check_senders(self) -> None:
        """A sender that exited without ever writing fct.csv failed to start: stop."""
        for h, p in self.sender_procs.items():
            if not p.alive() and not (self.hosts_dir / h / "send" / "fct.csv").is_file():
                raise hp.HostsError(f"the sender in {h} exited ({p.proc.returncode}) "
                                    f"before sending: {p.log_path.read_text()[-800:]}")

    def _start_bulk(self, row: dict[str, Any]) -> None:
        from p4cc.traffic.iperf import iperf3_client_argv

        fid = int(row["flow_id"])
        i = [int(x) for x in self.bulk_rows["flow_id"]].index(fid)
        src, dst = str(row["src"]), str(row["dst"])
        stop = float(row["stop_s"])
        if math.isnan(stop):
            stop = float(self.spec.duration_s)
        dur = max(1.0, stop - float(row["start_s"]))
        argv = iperf3_client_argv(self.topo.host(dst).ip, dur, IPERF_BASE_PORT + i)
        self.bulk.append(self._spawn(src, "iperf3-client", argv, f"iperf3-c{fid}.json",
                                     flow_id=fid, start_s=self.now(), dst=dst))

    def _link_event(self, ev: dict[str, Any]) -> None:
        """Fail or restore a switch-to-switch link by black-holing both switch ends.

        Not ``ip link set down``: BMv2's libpcap ports stopped forwarding for good after
        one down/up (measured: no packet crossed leaf1 again, even on its other ports).
        Instead an HTB root whose only class runs at 8 bit/s into a 1-packet pfifo eats
        everything BMv2 sends on the port (the kernel here lacks netem and matchall);
        ``up`` deletes it.
        """
        from p4cc.topo.hosts import switch_intf

        state = "down" if ev["action"] == "down" else "up"
        for node, port in ((ev["a"], ev["a_port"]), (ev["b"], ev["b_port"])):
            if self.topo.is_host(str(node)):
                continue
            dev = switch_intf(str(node), int(port))
            cmds = [["tc", "qdisc", "del", "dev", dev, "root"]] if state == "up" else [
                ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "e2:", "htb",
                 "default", "1"],
                ["tc", "class", "add", "dev", dev, "parent", "e2:", "classid", "e2:1", "htb",
                 "rate", "8bit", "ceil", "8bit", "burst", "1", "cburst", "1"],
                ["tc", "qdisc", "add", "dev", dev, "parent", "e2:1", "pfifo", "limit", "1"]]
            for cmd in cmds:
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    self.sink.log(f"link event: `{' '.join(cmd)}` failed: {res.stderr.strip()}")
        self.sink.table("link_events_applied", [{"t_s": self.now(), "action": state,
                                                 "a": ev["a"], "b": ev["b"],
                                                 "failure": ev["failure"]}])

    def _drain(self) -> None:
        tele: list[Any] = []
        while True:
            try:
                kind, item = self.q.get_nowait()
            except queue.Empty:
                break
            if kind == "telemetry":
                tele += [r for r in item if r.t_s > 0]
            elif kind == "agent":
                self.sink.table("agent", item)
            elif kind == "int":
                self.sink.int_reports(collect.int_rows(item))
        if tele:
            self.sink.telemetry(tele)

    # -- teardown and collection ---------------------------------------------------------
    def _teardown(self) -> None:
        problems: list[str] = []
        self.stop_evt.set()
        for _loop, th in self.loops:
            th.join(timeout=5.0)
        for col in self.collectors:
            col.stop()
        self._save_qdisc_stats()
        try:
            killed = hp.stop_all(self.procs)
            if killed:
                problems.append("killed " + ", ".join(killed))
        except Exception as exc:
            problems.append(f"stopping host processes: {exc}")
        try:
            self._drain()
            self._collect()
        except Exception as exc:  # keep tearing down; the raw files stay in hosts/
            problems.append(f"collecting host records: {type(exc).__name__}: {exc}")
        for loop, _th in self.loops:
            self.sink.table("loop_stats", [{"switch": loop.control.name,
                                            **{k: v for k, v in vars(loop.stats).items()}}])
        for ctl in self.controls.values():
            try:
                ctl.close()
            except Exception as exc:
                log.debug("closing control session: %s", exc)
        if self.fabric is not None:
            self.fabric.stop()
            left = self.fabric.leftovers()
            if left:
                problems.append(f"left behind: {left}")
        for p in problems:
            self.sink.log(f"bmv2 teardown: {p}")
            log.warning("bmv2 teardown: %s", p)

    def _save_qdisc_stats(self) -> None:
        """Each sender host's HTB counters (drops, overlimits) -> hosts/<h>/tc.txt."""
        for h in self.sender_procs:
            try:
                dev = f"{h}-eth0"
                out = self.fabric.host(h).cmd(f"tc -s qdisc show dev {dev}; "
                                              f"tc -s class show dev {dev}")
                (self.hosts_dir / h / "tc.txt").write_text(out)
            except Exception as exc:  # diagnostics only
                log.debug("tc stats of %s: %s", h, exc)

    def _collect(self) -> None:
        if self.t0_epoch == 0.0:
            return  # traffic never started
        flows, traces = collect.sender_records(self.schedule, self.senders, self.hosts_dir,
                                               self.topo, self.t0_epoch)
        self.sink.flows(flows)
        for rows in traces:
            self.sink.hostcc(rows)
        table, bulk_flows = collect.bulk_records(self.bulk, self.bulk_rows)
        if table:
            self.sink.table("bulk", table)
            self.sink.flows(bulk_flows)


__all__ = ["MAX_HOSTS", "MAX_SWITCHES", "Bmv2Backend", "check_spec"]
