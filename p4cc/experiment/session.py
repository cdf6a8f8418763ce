"""The control plane of a running fabric: ONE ``FabricSession`` per fabric.

Per switch it holds the switch client (p4cc.controlplane.switch.SwitchControl over a
P4RuntimeClient and a ThriftClient), the agent, and one ControlLoop that runs the agent
every ``interval_s`` and owns the switch's only TelemetryPoller (polling resets the
interval registers, so nothing else may poll).  Without an agent the loop runs a
HoldAgent, so it still polls.  The BMv2 backend (and so ``p4cc incast`` and ``p4cc run``)
and ``p4cc cli`` all use it::

    with FabricSession.for_fabric(fabric, SessionConfig(interval_s=0.5)) as session:
        session.set_ecn("s1", 5, EcnConfig(5000, 20000, 0.1))
        session.latest("s1", 5)

Lifecycle: ``open()`` connects, pushes the pipeline and static settings (``setup``),
builds the loops, tells each agent the settings in force (once) and writes its first
decision before any traffic; ``start(t0)`` primes the pollers and starts one thread per
loop; ``stop()`` stops the threads and closes the clients.  Records and agent actions
are handed to the ``on_telemetry``/``on_action`` callbacks from the loop threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.agents.static import HoldAgent
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.loop import ControlLoop, LoopConfig, LoopStats, PollSink
from p4cc.controlplane.p4runtime import P4RuntimeClient
from p4cc.controlplane.records import PortKey, PortTelemetry
from p4cc.controlplane.switch import SwitchControl
from p4cc.controlplane.thrift import ThriftClient
from p4cc.errors import ConfigError, SwitchError
from p4cc.experiment.agents import RunAgents
from p4cc.topo.build import Fabric

log = logging.getLogger(__name__)

#: a loop thread gets this long (or 3 intervals) to finish its step when stopped
JOIN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class AgentAction:
    """One port setting an agent decided (the run's ``agent`` table)."""

    t_s: float  # run time (0 before the session started)
    switch: str
    port: int
    kmin_bytes: int | None
    kmax_bytes: int | None
    pmax: float | None

    def to_row(self) -> dict[str, Any]:
        return {"t_s": self.t_s, "switch": self.switch, "port": self.port,
                "kmin_bytes": self.kmin_bytes, "kmax_bytes": self.kmax_bytes,
                "pmax": self.pmax}


TelemetrySink = Callable[[list[PortTelemetry]], None]
ActionSink = Callable[[list[AgentAction]], None]


@dataclass(frozen=True)
class SessionConfig:
    interval_s: float = 0.5  # control-loop (and telemetry) interval
    agent: str | None = None  # p4cc.controlplane.agents name; None: hold (poll only)
    initial_ecn: EcnConfig | None = None  # on every port at setup
    history: bool = True  # keep every record (records_between); else only the latest


class _RecordingAgent:
    """Forwards to the agent; reports what it decided."""

    def __init__(self, agent: Agent, switch: str, out: ActionSink,
                 clock: Callable[[], float]) -> None:
        self.agent, self.switch, self.out, self.clock = agent, switch, out, clock
        self.name = agent.name

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self.agent.reset(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        todo = self.agent.act(obs)
        if todo:
            t = self.clock()
            self.out([AgentAction(t, self.switch, p, getattr(s, "kmin_bytes", None),
                                  getattr(s, "kmax_bytes", None), getattr(s, "pmax", None))
                      for p, s in dict(todo).items()])
        return todo


def switch_controls(fabric: Fabric) -> dict[str, SwitchControl]:
    """One SwitchControl per switch of a started ``fabric``, on the ports it really uses."""
    opts, topo = fabric.options, fabric.topo
    out = {}
    for spec in topo.switches:
        device_id, grpc_addr, thrift_port = fabric.endpoints()[spec.name]
        out[spec.name] = SwitchControl(
            spec, topo, opts.p4info, opts.p4_json,
            p4rt=P4RuntimeClient(grpc_addr, device_id),
            thrift=ThriftClient(f"127.0.0.1:{thrift_port}", opts.p4_json),
            source_info=opts.bmv2_log)  # a logging switch keeps source lines for traces
    return out


class FabricSession:
    def __init__(self, controls: Mapping[str, SwitchControl],
                 config: SessionConfig | None = None, *,
                 on_telemetry: TelemetrySink | None = None,
                 on_action: ActionSink | None = None,
                 on_poll: PollSink | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 agents: RunAgents | None = None) -> None:
        self.controls = dict(controls)
        #: makes every switch's agent by name (also acc:online, pet:online)
        self.agents = agents or RunAgents()
        self.on_poll = on_poll
        self.config = config or SessionConfig()
        self.loop_config = LoopConfig(interval_s=float(self.config.interval_s))
        self.on_telemetry, self.on_action, self.clock = on_telemetry, on_action, clock
        self.loops: dict[str, ControlLoop] = {}
        self.t0 = 0.0
        self._records: list[PortTelemetry] = []
        self._latest: dict[PortKey, PortTelemetry] = {}
        self._rec_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: dict[str, BaseException] = {}

    @classmethod
    def for_fabric(cls, fabric: Fabric, config: SessionConfig | None = None,
                   **kw: Any) -> FabricSession:
        return cls(switch_controls(fabric), config, **kw)

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> FabricSession:
        """Connect and set up every switch, build the loops, write the agents' first
        decisions (before any traffic)."""
        try:
            for ctl in self.controls.values():
                ctl.connect()
                ctl.setup(self.config.initial_ecn)
            for name, ctl in self.controls.items():
                loop = ControlLoop.for_switch(ctl, self._agent(self.config.agent, name, ctl),
                                              self.loop_config,
                                              sink=self._record, clock=self.clock,
                                              on_poll=self.on_poll)
                loop.apply_initial()
                self.loops[name] = loop
        except BaseException:
            self.stop()
            raise
        return self

    def _agent(self, name: str | None, switch: str, ctl: SwitchControl) -> Agent:
        agent: Agent = self.agents.make(name, ctl.scale) if name else HoldAgent()
        if self.on_action is not None:
            agent = _RecordingAgent(agent, switch, self.on_action, self.now)
        return agent

    def start(self, t0: float | None = None) -> FabricSession:
        """Prime the pollers (records are timed from ``t0`` on ``clock``, default now)
        and start one thread per loop."""
        if not self.loops:
            self.open()
        self.t0 = self.clock() if t0 is None else t0
        for name, loop in self.loops.items():
            loop.start(self.t0)
            th = threading.Thread(target=self._run, args=(name, loop),
                                  name=f"p4cc-loop-{name}", daemon=True)
            self._threads.append(th)
            th.start()
        return self

    def _run(self, name: str, loop: ControlLoop) -> None:
        try:
            loop.run(stop=self._stop)
        except BaseException as exc:  # the loop is fail-safe; this is a bug: report it
            log.exception("%s: control loop stopped", name)
            self._errors[name] = exc

    def stop(self) -> None:
        """Stop the loops and close every client (idempotent)."""
        self._stop.set()
        for th in self._threads:
            th.join(timeout=max(JOIN_TIMEOUT_S, 3 * self.loop_config.interval_s))
        self._threads.clear()
        for ctl in self.controls.values():
            try:
                ctl.close()
            except Exception as exc:  # closing a dead session must not stop teardown
                log.debug("closing control session: %s", exc)

    def __enter__(self) -> FabricSession:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- records ---------------------------------------------------------------------
    def now(self) -> float:
        """Run time: seconds since ``t0`` (0 before the session started)."""
        return self.clock() - self.t0 if self.t0 else 0.0

    def _record(self, records: list[PortTelemetry]) -> None:
        with self._rec_lock:
            if self.config.history:
                self._records += records
            for r in records:
                self._latest[r.key] = r
        if self.on_telemetry is not None:
            self.on_telemetry(records)

    def check(self) -> None:
        """Raise SwitchError if a loop thread stopped on an error."""
        for name, exc in self._errors.items():
            raise SwitchError(f"control loop of {name} stopped: {exc}") from exc

    def records_between(self, t0: float, t1: float) -> list[PortTelemetry]:
        """Records whose interval ended within [t0, t1] (run time; needs ``history``)."""
        with self._rec_lock:
            return [r for r in self._records if t0 <= r.t_s <= t1]

    def latest(self, switch: str, port: int) -> PortTelemetry | None:
        """The newest record of ``switch``'s ``port`` (None before the first interval)."""
        ctl = self._control(switch)
        if port not in ctl.ports:
            raise ConfigError(f"{switch} has no port {port}; ports are {list(ctl.ports)}")
        with self._rec_lock:
            return self._latest.get((switch, port))

    def stats(self) -> dict[str, LoopStats]:
        return {name: loop.stats for name, loop in self.loops.items()}

    # -- settings --------------------------------------------------------------------
    def _control(self, switch: str) -> SwitchControl:
        ctl = self.controls.get(switch)
        if ctl is None:
            raise ConfigError(f"no switch {switch!r}; switches are {sorted(self.controls)}")
        return ctl

    def _loop(self, switch: str) -> ControlLoop:
        self._control(switch)
        loop = self.loops.get(switch)
        if loop is None:
            raise ConfigError("the session is not open: call open() or start() first")
        return loop

    def set_ecn(self, switch: str, port: int, cfg: EcnConfig | None) -> None:
        """One port's thresholds (None = marking off), through its loop."""
        self._loop(switch).apply({port: cfg})

    def set_ecn_all(self, cfg: EcnConfig | None) -> None:
        """The same setting on every port of every switch."""
        for name, ctl in self.controls.items():
            self._loop(name).apply(dict.fromkeys(ctl.ports, cfg))

    def set_agent(self, name: str | None, switches: Iterable[str] | None = None) -> None:
        """Run agent ``name`` (None: hold) on every switch (or on ``switches``) from the
        next interval on, writing its first decision now."""
        for switch in self.controls if switches is None else list(switches):
            loop = self._loop(switch)
            loop.swap_agent(self._agent(name, switch, loop.control))
            loop.apply_initial()
