"""``Bmv2Backend``: p4cc.experiment.backend.Backend played on Mininet + BMv2 (docs/emulation.md).

One run (``_Run.play``): build the Fabric; open its FabricSession
(p4cc.experiment.session: pipeline and static settings on every switch, one ControlLoop
per switch running the agent variant every ``spec.interval_s``, the agent's first
decision written before any traffic); start the host processes (bmv2.launch); at t0
start the loops and the INT collectors; then until ``duration_s`` start bulk flows and
link events (bmv2.links) at their times, drain the records (bmv2.records) into the sink
and watch the fabric and the senders.  Everything started is stopped in ``finally``
(also on SIGINT or SIGTERM, which the runner turns into KeyboardInterrupt), so an
interrupted run keeps its partial results and leaves no process or interface behind.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.experiment import chameleon_bmv2
from p4cc.experiment.agents import RunAgents
from p4cc.experiment.backend import Progress, RunSink
from p4cc.experiment.bmv2 import autocal, collect, int_watch
from p4cc.experiment.bmv2 import control as ctlmod
from p4cc.experiment.bmv2 import verdict as verdictmod
from p4cc.experiment.bmv2.launch import HostProcesses
from p4cc.experiment.bmv2.limits import (
    MAX_HOSTS,
    MAX_SWITCHES,
    SWITCH_NICE,
    check_budget,
    check_schedule_budget,
    check_spec,
)
from p4cc.experiment.bmv2.links import LinkFailures
from p4cc.experiment.bmv2.procmon import SwitchSampler
from p4cc.experiment.bmv2.records import RecordQueues
from p4cc.experiment.chameleon import links as chameleon_links
from p4cc.experiment.session import FabricSession, SessionConfig
from p4cc.experiment.spec import ExperimentSpec
from p4cc.hostcc.sender_config import SenderConfig
from p4cc.topo.spec import TopoSpec

log = logging.getLogger(__name__)

#: the main loop wakes this often (run clock) to start events and drain records
TICK_S = 0.1


class Bmv2Backend:
    name = "bmv2"

    def __init__(self, bmv2_log: bool = False, pcap: bool = False,
                 within_budget: bool = True, one_process_per_host: bool = False,
                 ack_every: int | None = None) -> None:
        self.bmv2_log, self.pcap = bmv2_log, pcap  # BMv2 debug output (slow)
        #: False only to demonstrate what the budget prevents (tests): the run's
        #: fidelity verdict then says whether the emulation kept up
        self.within_budget = within_budget
        #: a host's receiver and sender in one process (bmv2.launch.HostProcesses)
        self.one_process_per_host = one_process_per_host
        #: the senders' ACK request period in data packets (None: the hosts' default, 16)
        if ack_every is not None:
            SenderConfig(ack_every=ack_every)  # its range check, before any run
        self.ack_every = ack_every

    def check(self, spec: ExperimentSpec) -> None:
        check_spec(spec, within_budget=False)  # limits, host CC, tools: fail fast
        if self.within_budget:
            autocal.ensure_calibrated()  # this machine's numbers, once per BMv2 build
            check_budget(spec)

    def run(self, spec: ExperimentSpec, schedule: pd.DataFrame, link_events: pd.DataFrame,
            agent_name: str, sink: RunSink, progress: Progress) -> None:
        check_spec(spec, within_budget=False)
        if self.within_budget:  # this run's own schedule (check() covers every seed)
            check_schedule_budget(spec, spec.topo(), schedule)
        _Run(spec, schedule, link_events, agent_name, sink, progress, self).play()


class _Run:
    """State of one bmv2 run (kept out of Bmv2Backend so the backend is reusable)."""

    def __init__(self, spec: ExperimentSpec, schedule: pd.DataFrame,
                 link_events: pd.DataFrame, agent_name: str, sink: RunSink,
                 progress: Progress | None, backend: Bmv2Backend | None = None) -> None:
        self.spec, self.agent_name, self.sink = spec, agent_name, sink
        self.progress: Progress = progress or (lambda t: None)
        self.backend = backend or Bmv2Backend()
        self.topo: TopoSpec = spec.topo()
        self.schedule = schedule.sort_values(["start_s", "flow_id"], kind="stable")
        self.events = link_events.sort_values("t_s", kind="stable") if len(link_events) else \
            link_events
        # absolute: the host processes run in other working directories
        self.root = Path(sink.path).resolve()
        self.hosts_dir = self.root / "hosts"
        self.records = RecordQueues()
        self.links = LinkFailures(self.topo, lambda line: self.sink.log(line))
        self.fabric: Any = None
        self.session: FabricSession | None = None
        self.hosts: HostProcesses | None = None
        self.collectors: list[Any] = []
        self.sampler: SwitchSampler | None = None
        self.chameleon: chameleon_bmv2.Bmv2Chameleon | None = None
        #: the switches' agents (acc:online / pet:online: fine-tuned, written at the end)
        self.agents = RunAgents(seed=int(sink.seed))
        self.t0_mono = 0.0
        self.t0_epoch = 0.0
        self.runner_cpu_t0 = 0.0  # time.process_time() at t0 (the budget check)
        self.host_cpu: list[dict[str, Any]] = []
        #: the hosts' CC reads the INT queue depth (set with the INT watch)
        self.qdepth_cc = False

    def now(self) -> float:
        """Run time (seconds since t0); 0 before the traffic's t0 is set."""
        return time.monotonic() - self.t0_mono if self.t0_mono else 0.0

    # -- the run ---------------------------------------------------------------------
    def play(self) -> None:
        self.agents.check(self.agent_name)  # e.g. acc:online without torch: before BMv2
        with ctlmod.runner_priority(SWITCH_NICE, self.sink.log):
            self._play()

    def _play(self) -> None:
        try:
            self._start_fabric()
            # CHAMELEON: one controller beside the session (None for per-switch agents)
            self.chameleon = chameleon_bmv2.for_bmv2(self.agent_name, self.topo)
            with chameleon_links(self.chameleon):
                self._open_session()
            self.hosts = HostProcesses(self.fabric, self.spec, self.topo, self.schedule,
                                       self.hosts_dir, self.sink.log,
                                       one_process=self.backend.one_process_per_host,
                                       ack_every=self.backend.ack_every)
            if self.chameleon is not None:
                self.hosts.extra_args = self.chameleon.host_args
            self.t0_epoch, self.t0_mono = self.hosts.start()
            self._sample_before_t0()
            self._start_control_at_t0()
            if self.chameleon is not None:
                self.chameleon.begin(self.t0_mono)
            self._main_loop()
        finally:
            with ctlmod.signals_deferred():
                self._teardown()
                if self.chameleon is not None:
                    self.chameleon.stop(self.sink)

    def _start_fabric(self) -> None:
        from p4cc.topo.build import Fabric, FabricOptions

        self.sink.log(f"bmv2: starting fabric {self.topo.name} ({len(self.topo.switches)} "
                      f"switches, {len(self.topo.hosts)} hosts)")
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
        if load > cores:  # other sessions' work competes with the emulation
            self.sink.log(f"bmv2: machine busy before the run (load {load:.1f} on {cores} "
                          f"cores): the fidelity verdict may mark this run unfaithful")
        self.fabric = Fabric(self.topo, FabricOptions(
            out_dir=self.root / "switches", bmv2_log=self.backend.bmv2_log,
            pcap=self.backend.pcap))
        self.fabric.start()
        for sw in self.topo.switches:  # for leak checks after the run (tests, humans)
            self.sink.log(f"bmv2: switch {sw.name} pid {self.fabric.bmv2(sw.name).pid}")

    def _open_session(self) -> None:
        """Switch clients, loops and agents; the agents' first settings, before traffic."""
        self.session = FabricSession.for_fabric(
            self.fabric, SessionConfig(interval_s=float(self.spec.interval_s),
                                       agent=self.agent_name, history=False),
            on_telemetry=self.records.telemetry, on_action=self.records.actions,
            on_poll=self.records.poll, clock=time.monotonic, agents=self.agents)
        self.session.open()
        for line in ctlmod.prioritise_switches(self.fabric, self.topo, SWITCH_NICE):
            self.sink.log(line)
        self._watch_int()

    def _watch_int(self) -> None:
        """INT reports for the first INT_SOURCES sources if the spec asks for ``int``;
        with a CC that reads the INT queue depth, every other source summary-only
        (p4cc.experiment.bmv2.int_watch)."""
        assert self.session is not None
        plan = int_watch.spec_plan(self.spec.outputs, self.spec.host_cc, self.topo,
                                   self.schedule)
        self.qdepth_cc = int_watch.host_cc_reads_qdepth(self.spec.host_cc, self.topo)
        int_watch.install(plan, self.session.controls)
        if plan:
            self.sink.log(int_watch.describe(plan))

    def _sample_before_t0(self) -> None:
        """The switches' counters once now, GO_LEAD_S before the senders' t0: the
        baseline of the switch drops (p4cc.analysis.losses); the periodic samples start
        at t0 (``_start_control_at_t0``)."""
        assert self.session is not None
        self.sampler = verdictmod.sampler(self.fabric, self.session, self.now,
                                          self.records.switch_cpu)
        self.sampler.baseline()

    def _start_control_at_t0(self) -> None:
        """Build the INT collectors (imports: Scapy takes ~1 s), wait for t0, start them
        and the session's loops."""
        from p4cc.controlplane.int_collector import IntCollector, default_decoder

        assert self.session is not None
        if "int" in self.spec.outputs:
            decode = default_decoder()
            self.collectors = [IntCollector(name, ctl.p4rt.packet_ins(), decode=decode,
                                            t0=self.t0_mono, sink=self.records.int_report)
                               for name, ctl in self.session.controls.items()]
        while time.monotonic() < self.t0_mono:
            time.sleep(max(0.0, self.t0_mono - time.monotonic()))  # until t0 (an instant)
        for col in self.collectors:
            col.start()
        self.runner_cpu_t0 = time.process_time()
        self.session.start(self.t0_mono)
        assert self.sampler is not None
        if self.hosts is not None:  # so host_cpu.csv counts processes that exit early
            self.sampler.extra = self.hosts.sample_cpu
        self.sampler.start()

    def _main_loop(self) -> None:
        assert self.hosts is not None and self.session is not None
        duration = float(self.spec.duration_s)
        bulk: list[Any] = self.hosts.bulk_rows.to_dict("records")
        events: list[Any] = self.events.to_dict("records") if len(self.events) else []
        while True:
            t = self.now()
            while bulk and float(bulk[0]["start_s"]) <= t:
                self.hosts.start_bulk(bulk.pop(0), self.now())
            while events and float(events[0]["t_s"]) <= t:
                self.sink.table("link_events_applied",
                                [self.links.apply(events.pop(0), self.now()).to_row()])
            self.records.drain(self.sink)
            self.fabric.check()
            self.session.check()
            self.hosts.check_senders()
            self.progress(min(t, duration))
            if t >= duration:
                break
            time.sleep(min(TICK_S, max(0.0, duration - t)))  # main-loop tick (run clock)

    # -- teardown and collection ---------------------------------------------------------
    def _teardown(self) -> None:
        problems: list[str] = []
        if self.session is not None:
            self.session.stop()  # loops first: they write to the switches
        if self.sampler is not None:
            self.sampler.stop()
        for col in self.collectors:
            col.stop()
        if self.hosts is not None:
            problems += self._stop_hosts(self.hosts)
        try:
            self.records.drain(self.sink)
            if self.hosts is not None:
                self._collect(self.hosts)
        except Exception as exc:  # keep tearing down; the raw files stay in hosts/
            problems.append(f"collecting host records: {type(exc).__name__}: {exc}")
        if self.session is not None:
            for name, stats in self.session.stats().items():
                self.sink.table("loop_stats", [{"switch": name, **vars(stats)}])
            try:
                self.agents.finish(self.root, self.sink.log)
            except Exception as exc:  # saving fine-tuned weights must not lose the run
                problems.append(f"online agents' weights: {type(exc).__name__}: {exc}")
            try:
                if self.t0_epoch:
                    self._judge()
            except Exception as exc:  # a verdict bug must not lose the run's data
                problems.append(f"fidelity verdict: {type(exc).__name__}: {exc}")
        self.links.restore_all()
        if self.fabric is not None:
            self.fabric.stop()
            left = self.fabric.leftovers()
            if left:
                problems.append(f"left behind: {left}")
        for p in problems:
            self.sink.log(f"bmv2 teardown: {p}")
            log.warning("bmv2 teardown: %s", p)

    def _judge(self) -> None:
        assert self.session is not None
        v = verdictmod.judge(self.spec, self.topo, self.session, self.records,
                             self.hosts_dir, list(self.hosts.senders) if self.hosts else [])
        v.write(self.root)
        self.sink.log(f"bmv2: fidelity {v.summary()}")
        self._budget_check()
        if not v.faithful:
            log.warning("bmv2 run %s: %s (fidelity.csv lists the intervals)", self.root,
                        v.summary())

    def _budget_check(self) -> None:
        """budget.json: the machine budget's prediction beside what the run used."""
        import json

        from p4cc.experiment.bmv2 import budget
        from p4cc.experiment.bmv2.limits import run_int_watch, run_probe_s

        dur = min(self.now(), float(self.spec.duration_s)) if self.t0_mono else 0.0
        used = budget.measured(self.records.kept_cpu, self.host_cpu,
                               time.process_time() - self.runner_cpu_t0, dur)
        cmp = budget.comparison(self.topo, self.schedule, float(self.spec.duration_s),
                                float(self.spec.interval_s), used,
                                host_cc=self.spec.host_cc,
                                probe_s=run_probe_s(self.spec.host_cc, self.topo, self.schedule),
                                int_watch=run_int_watch(self.spec, self.topo, self.schedule))
        (self.root / "budget.json").write_text(json.dumps(cmp, indent=1, default=float))
        self.sink.log(f"bmv2: used {used['cpu_s_per_s']:.2f} CPU-s/s (switches "
                      f"{used['switch_cpu_s']:.1f} s, hosts {used['host_cpu_s']:.1f} s, runner "
                      f"{used['runner_cpu_s']:.1f} s); the budget predicted "
                      f"{cmp['predicted_cpu_s_per_s']:.2f} of {cmp['budget_cpu_s_per_s']:.2f}")

    def _int_coverage(self, hosts: HostProcesses) -> None:
        """int_coverage.json and a log line; a warning when a flow ran on the RTT."""
        import json

        cov = int_watch.coverage(self.hosts_dir, list(hosts.senders))
        (self.root / "int_coverage.json").write_text(json.dumps(cov.to_json(), indent=1))
        self.sink.log(f"bmv2: {cov.summary()}")
        if not cov.ok:
            log.warning("bmv2 run %s: %s", self.root, cov.summary())

    def _stop_hosts(self, hosts: HostProcesses) -> list[str]:
        problems = hosts.save_qdisc_stats()
        cpu = hosts.cpu_rows()
        self.host_cpu = cpu
        if cpu:  # each host process's CPU from t0 to the stop
            self.sink.table("host_cpu", cpu)
            self.sink.log(f"bmv2: host processes used {sum(r['cpu_run_s'] for r in cpu):.2f}"
                          f" CPU s after t0 ({len(cpu)} processes)")
        try:
            killed = hosts.stop()
            if killed:
                problems.append("killed " + ", ".join(killed))
        except Exception as exc:
            problems.append(f"stopping host processes: {exc}")
        return problems

    def _collect(self, hosts: HostProcesses) -> None:
        if self.t0_epoch == 0.0:
            return  # traffic never started
        flows, traces = collect.sender_records(self.schedule, hosts.senders, self.hosts_dir,
                                               self.topo, self.t0_epoch)
        self.sink.flows(flows)
        for rows in traces:
            self.sink.hostcc(rows)
        if self.qdepth_cc:  # a flow that fell back to the RTT must not pass unnoticed
            self._int_coverage(hosts)
        table, bulk_flows = collect.bulk_records(hosts.bulk, hosts.bulk_rows)
        if table:
            self.sink.table("bulk", table)
            self.sink.flows(bulk_flows)


__all__ = ["MAX_HOSTS", "MAX_SWITCHES", "Bmv2Backend", "check_spec"]
