"""The control loop of one switch: poll -> agent.act -> validate -> apply, every Δt.

Fail-safe (docs/architecture.md, agents/base.py): thresholds are only ever replaced by
validated ones, so when the agent raises, returns something invalid, or the switch
connection drops, the last valid thresholds stay in the switch.  The error is logged
and counted; a dropped connection is re-established with exponential backoff (bounded
by ``max_backoff_s``), at most one attempt per interval, so the loop keeps its cadence.
Intervals are kept by deadline (t0 + k·Δt), not by sleeping Δt after each step, so
processing time does not accumulate as drift; missed deadlines are skipped.

Every ECN write of a switch goes through its loop (agent decisions in ``step``, the
agent's first decision before any traffic in ``apply_initial``, operator settings in
``apply``), serialised by ``lock``; SwitchControl.set_ecn_all validates them (once) and
writes only what changes.  The loop owns the switch's only TelemetryPoller: polling
resets the interval registers, so a second poller would steal the loop's intervals.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.controlplane.switch import SwitchControl
from p4cc.controlplane.telemetry import TelemetryPoller
from p4cc.errors import ConfigError, P4ccError

log = logging.getLogger(__name__)

RecordSink = Callable[[list[PortTelemetry]], None]


@dataclass(frozen=True)
class PollTiming:
    """When one step's poll ran (run clock, the poller's t0): for the fidelity verdict."""

    switch: str
    deadline_s: float  # when the step was due (NaN for a step outside ``run``)
    start_s: float  # the poll began
    end_s: float  # the poll returned
    read_span_s: float  # first counter read to last register read

    def to_row(self) -> dict[str, float | str]:
        return {"switch": self.switch, "deadline_s": self.deadline_s,
                "start_s": self.start_s, "end_s": self.end_s,
                "read_span_s": self.read_span_s}


PollSink = Callable[[PollTiming], None]


@dataclass(frozen=True)
class LoopConfig:
    interval_s: float = field(default=0.01, metadata={"help": "agent interval Δt"})
    backoff_s: float = field(default=0.05, metadata={"help": "first reconnect delay"})
    max_backoff_s: float = field(default=2.0, metadata={"help": "cap of the reconnect delay"})

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ConfigError(f"loop interval must be > 0 s, got {self.interval_s}")
        if not 0 < self.backoff_s <= self.max_backoff_s:
            raise ConfigError("loop backoff must satisfy 0 < backoff_s <= max_backoff_s")


@dataclass
class LoopStats:
    steps: int = 0
    applied: int = 0  # port settings written
    agent_errors: int = 0
    invalid_decisions: int = 0
    switch_errors: int = 0
    reconnects: int = 0
    missed_deadlines: int = 0
    last_error: str = ""
    poll_ms: float = 0.0  # of the last step
    act_ms: float = 0.0
    write_ms: float = 0.0


class ControlLoop:
    def __init__(self, control: SwitchControl, poller: TelemetryPoller, agent: Agent,
                 config: LoopConfig | None = None, sink: RecordSink | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_poll: PollSink | None = None) -> None:
        self.control = control
        self.on_poll = on_poll
        self._deadline = float("nan")  # of the step running (``run``)
        self.poller = poller
        self.agent = agent
        self.config = config or LoopConfig()
        self.sink = sink
        self.clock = clock
        self.stats = LoopStats()
        self.connected = True
        #: held for a whole step and for every write (loop thread vs. operator)
        self.lock = threading.RLock()
        self._backoff = self.config.backoff_s
        self._next_reconnect = 0.0
        self._started = False
        self._agent_told = False

    @classmethod
    def for_switch(cls, control: SwitchControl, agent: Agent, config: LoopConfig | None = None,
                   sink: RecordSink | None = None, t0: float | None = None,
                   clock: Callable[[], float] = time.monotonic,
                   on_poll: PollSink | None = None) -> ControlLoop:
        """A loop with the switch's (only) TelemetryPoller; records are timed from ``t0``."""
        poller = TelemetryPoller(control.name, control.ports, control.p4rt, control.thrift,
                                 control.scale,
                                 {p: control.port_rate_bps(p) for p in control.ports},
                                 lambda: control.ecn, t0=t0, clock=clock)
        return cls(control, poller, agent, config, sink, clock, on_poll)

    def _error(self, kind: str, exc: BaseException) -> None:
        setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        self.stats.last_error = f"{type(exc).__name__}: {exc}"
        log.error("%s: %s (%s); last valid thresholds stay in force", self.control.name,
                  kind.replace("_", " "), self.stats.last_error)

    def _tell_agent(self) -> None:
        """Tell the agent the settings in force, once per agent."""
        if not self._agent_told:
            self.agent.reset(self.control.ecn)
            self._agent_told = True

    def start(self, t0: float | None = None) -> None:
        """Tell the agent the settings in force (once) and prime the poller; records are
        then timed from ``t0`` (the poller's clock) if given."""
        with self.lock:
            self._tell_agent()
            if t0 is not None:
                self.poller.t0 = t0
            self.poller.prime()
            self._started = True

    def apply_initial(self) -> int:
        """Before any traffic: write what the agent decides with no observation (static
        schemes set their thresholds here); raises if that decision is invalid.
        Returns the number of ports written."""
        with self.lock:
            self._tell_agent()
            changed = self._changed(self.check_decision(self.agent.act({})))
            self.control.set_ecn_all(changed)
            self.stats.applied += len(changed)
            return len(changed)

    def apply(self, settings: Mapping[int, EcnConfig | None]) -> None:
        """An operator's settings (None = marking off), written between two steps;
        raises ConfigError/SwitchError (nothing is written if any setting is invalid)."""
        with self.lock:
            self.control.set_ecn_all(settings)

    def swap_agent(self, agent: Agent) -> None:
        """Run ``agent`` from the next step on (told the settings in force first)."""
        with self.lock:
            self.agent = agent
            self._agent_told = False
            self._tell_agent()

    def check_decision(self, decision: Mapping[int, EcnConfig]) -> dict[int, EcnConfig]:
        """ConfigError unless the agent returned a mapping of EcnConfigs (agents cannot
        turn marking off); ports and thresholds are validated by SwitchControl."""
        if not isinstance(decision, Mapping):
            raise ConfigError(f"agent returned {type(decision).__name__}, not a mapping")
        for port, cfg in decision.items():
            if not isinstance(cfg, EcnConfig):
                raise ConfigError(f"agent returned {cfg!r} for port {port}, not an EcnConfig")
        return dict(decision)

    def _changed(self, decision: Mapping[int, EcnConfig]) -> dict[int, EcnConfig]:
        ecn = self.control.ecn
        return {p: c for p, c in decision.items() if ecn.get(p) != c}

    def _try_reconnect(self) -> None:
        now = self.clock()
        if now < self._next_reconnect:
            return
        try:
            self.control.reconnect()
        except P4ccError as exc:
            self._next_reconnect = now + self._backoff
            self._backoff = min(self._backoff * 2, self.config.max_backoff_s)
            self._error("switch_errors", exc)
            return
        self.stats.reconnects += 1
        self.connected = True
        self._backoff = self.config.backoff_s
        log.info("%s: reconnected", self.control.name)
        self.poller.prime()  # the interval spanning the outage is not reported

    def step(self) -> list[PortTelemetry]:
        """One interval; never raises for switch or agent faults."""
        with self.lock:
            return self._step()

    def _step(self) -> list[PortTelemetry]:
        if not self._started:
            self.start()
        self.stats.steps += 1
        if not self.connected:
            self._try_reconnect()
            if not self.connected:
                return []
        t = self.clock()
        try:
            obs = self.poller.poll()
        except P4ccError as exc:
            self._error("switch_errors", exc)
            self.connected = False
            return []
        t_poll = self.clock()
        self.stats.poll_ms = (t_poll - t) * 1e3
        if self.on_poll is not None:
            t0 = self.poller.t0
            first, last = getattr(self.poller, "last_read", (0.0, 0.0))
            self.on_poll(PollTiming(self.control.name, self._deadline - t0, t - t0,
                                    t_poll - t0, max(0.0, last - first)))
        records = [obs[p] for p in sorted(obs)]
        if records and self.sink is not None:
            self.sink(records)
        if not obs:
            return records
        try:
            decision = self.agent.act(obs)
        except Exception as exc:  # any agent bug must not take the switch down
            self._error("agent_errors", exc)
            return records
        t_act = self.clock()
        self.stats.act_ms = (t_act - t_poll) * 1e3
        try:  # nothing is written if any setting is invalid
            changed = self._changed(self.check_decision(decision))
            checked = self.control.validated(changed)
        except (ConfigError, TypeError, AttributeError) as exc:
            self._error("invalid_decisions", exc)
            return records
        try:
            self.control.set_ecn_all(checked)
        except P4ccError as exc:
            self._error("switch_errors", exc)
            self.connected = False
            return records
        self.stats.write_ms = (self.clock() - t_act) * 1e3
        self.stats.applied += len(changed)
        return records

    def run(self, duration_s: float | None = None,
            stop: threading.Event | None = None) -> LoopStats:
        """Step every interval until ``stop`` is set or ``duration_s`` has passed."""
        stop = stop or threading.Event()
        dt = self.config.interval_s
        start = self.clock()
        if not self._started:
            self.start()
        deadline = start + dt
        while not stop.is_set():
            now = self.clock()
            if duration_s is not None and now - start >= duration_s:
                break
            if stop.wait(max(0.0, deadline - now)):
                break
            self._deadline = deadline
            self.step()
            deadline += dt
            now = self.clock()
            if now > deadline:  # overran: skip the missed ticks, keep the phase
                missed = int((now - deadline) // dt) + 1
                self.stats.missed_deadlines += missed
                deadline += missed * dt
        return self.stats
