"""The control loop of one switch: poll -> agent.act -> validate -> apply, every Δt.

Fail-safe (docs/architecture.md, agents/base.py): thresholds are only ever replaced by
validated ones, so when the agent raises, returns something invalid, or the switch
connection drops, the last valid thresholds stay in the switch.  The error is logged
and counted; a dropped connection is re-established with exponential backoff (bounded
by ``max_backoff_s``), at most one attempt per interval, so the loop keeps its cadence.
Intervals are kept by deadline (t0 + k·Δt), not by sleeping Δt after each step, so
processing time does not accumulate as drift; missed deadlines are skipped.
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
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self.poller = poller
        self.agent = agent
        self.config = config or LoopConfig()
        self.sink = sink
        self.clock = clock
        self.stats = LoopStats()
        self.connected = True
        self._backoff = self.config.backoff_s
        self._next_reconnect = 0.0
        self._started = False

    def _error(self, kind: str, exc: BaseException) -> None:
        setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        self.stats.last_error = f"{type(exc).__name__}: {exc}"
        log.error("%s: %s (%s); last valid thresholds stay in force", self.control.name,
                  kind.replace("_", " "), self.stats.last_error)

    def start(self) -> None:
        """Prime the poller and tell the agent the settings in force."""
        self.agent.reset(self.control.ecn)
        self.poller.prime()
        self._started = True

    def validate(self, decision: Mapping[int, EcnConfig]) -> dict[int, EcnConfig]:
        """ConfigError unless every entry is a valid EcnConfig for an existing port."""
        if not isinstance(decision, Mapping):
            raise ConfigError(f"agent returned {type(decision).__name__}, not a mapping")
        out = {}
        for port, cfg in decision.items():
            if port not in self.control.ports:
                raise ConfigError(f"agent chose unknown port {port!r}")
            if not isinstance(cfg, EcnConfig):
                raise ConfigError(f"agent returned {cfg!r} for port {port}, not an EcnConfig")
            out[port] = cfg.validate(self.control.scale.buffer_bytes)
        return out

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
        try:
            valid = self.validate(decision)
        except (ConfigError, TypeError, AttributeError) as exc:
            self._error("invalid_decisions", exc)
            return records
        changed = {p: c for p, c in valid.items() if self.control.ecn.get(p) != c}
        try:
            self.control.set_ecn_all(changed)
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
            self.step()
            deadline += dt
            now = self.clock()
            if now > deadline:  # overran: skip the missed ticks, keep the phase
                missed = int((now - deadline) // dt) + 1
                self.stats.missed_deadlines += missed
                deadline += missed * dt
        return self.stats
