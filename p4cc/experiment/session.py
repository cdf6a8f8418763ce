"""The control plane of a running Fabric: one SwitchControl per switch plus a poll thread.

Connects p4cc.controlplane.switch.SwitchControl to the control ports the fabric's
switches actually use (fixed 50050+id / 9090+id, or free ports in tests), pushes the
pipeline and static settings (``setup``), and polls p4cc.controlplane.telemetry's
TelemetryPoller for every switch every ``interval_s`` in a background thread, keeping
the records for the experiment and the CLI.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.p4runtime import P4RuntimeClient
from p4cc.controlplane.records import PortKey, PortTelemetry
from p4cc.controlplane.switch import SwitchControl
from p4cc.controlplane.telemetry import TelemetryPoller
from p4cc.controlplane.thrift import ThriftClient
from p4cc.errors import ConfigError, SwitchError
from p4cc.topo.build import Fabric

log = logging.getLogger(__name__)


def _ecn_source(ctl: SwitchControl) -> Callable[[], Mapping[int, EcnConfig | None]]:
    def source() -> Mapping[int, EcnConfig | None]:
        return ctl.ecn

    return source


class FabricControl:
    """``with FabricControl(fabric, 0.5) as ctl: ctl.set_ecn_all(cfg); ctl.latest("s1", 5)``."""

    def __init__(self, fabric: Fabric, interval_s: float = 0.5,
                 initial_ecn: EcnConfig | None = None) -> None:
        if not 0.01 <= interval_s <= 60:
            raise ConfigError(f"poll interval {interval_s} s must be in [0.01, 60]")
        self.fabric = fabric
        self.interval_s = interval_s
        self.initial_ecn = initial_ecn
        self.controls: dict[str, SwitchControl] = {}
        self._pollers: dict[str, TelemetryPoller] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._records: list[PortTelemetry] = []
        self._latest: dict[PortKey, PortTelemetry] = {}
        self._rec_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.t0 = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FabricControl:
        opts = self.fabric.options
        p4info, bmv2_json = Path(opts.p4info), Path(opts.p4_json)
        topo = self.fabric.topo
        try:
            for spec in topo.switches:
                device_id, grpc_addr, thrift_port = self.fabric.endpoints()[spec.name]
                ctl = SwitchControl(
                    spec, topo, p4info, bmv2_json,
                    p4rt=P4RuntimeClient(grpc_addr, device_id),
                    thrift=ThriftClient(f"127.0.0.1:{thrift_port}", bmv2_json))
                self.controls[spec.name] = ctl
                ctl.connect()
                ctl.setup(self.initial_ecn)
                self._locks[spec.name] = threading.Lock()
                self._pollers[spec.name] = TelemetryPoller(
                    spec.name, spec.ports, ctl.p4rt, ctl.thrift, topo.scale,
                    {p: ctl.port_rate_bps(p) for p in spec.ports}, _ecn_source(ctl),
                    t0=self.t0)
            for name, poller in self._pollers.items():
                with self._locks[name]:
                    poller.prime()
        except BaseException:
            self.stop()
            raise
        self._thread = threading.Thread(target=self._loop, name="p4cc-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 3 * self.interval_s))
            self._thread = None
        for ctl in self.controls.values():
            try:
                ctl.close()
            except Exception as exc:  # closing a dead session must not stop teardown
                log.debug("closing control session: %s", exc)
        self.controls.clear()

    def __enter__(self) -> FabricControl:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- polling ---------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    def _loop(self) -> None:
        next_t = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            next_t += self.interval_s
            try:
                self.poll_once()
            except BaseException as exc:  # reported to the main thread by check()
                self._error = exc
                return

    def poll_once(self) -> list[PortTelemetry]:
        got: list[PortTelemetry] = []
        for name, poller in self._pollers.items():
            with self._locks[name]:
                got += list(poller.poll().values())
        with self._rec_lock:
            self._records += got
            for r in got:
                self._latest[r.key] = r
        return got

    def check(self) -> None:
        """Raise the poll thread's error, if it stopped on one."""
        if self._error is not None:
            raise SwitchError(f"telemetry polling stopped: {self._error}") from self._error

    # -- queries ---------------------------------------------------------------------
    def records_between(self, t0: float, t1: float) -> list[PortTelemetry]:
        """Records whose interval ended within [t0, t1] (seconds since start)."""
        with self._rec_lock:
            return [r for r in self._records if t0 <= r.t_s <= t1]

    def latest(self, switch: str, port: int) -> PortTelemetry | None:
        """The newest record of ``switch``'s ``port`` (None before the first interval)."""
        ctl = self._control(switch)
        if port not in ctl.ports:
            raise ConfigError(f"{switch} has no port {port}; ports are {list(ctl.ports)}")
        with self._rec_lock:
            return self._latest.get((switch, port))

    # -- settings --------------------------------------------------------------------
    def _control(self, switch: str) -> SwitchControl:
        ctl = self.controls.get(switch)
        if ctl is None:
            raise ConfigError(f"no switch {switch!r}; switches are {sorted(self.controls)}")
        return ctl

    def set_ecn(self, switch: str, port: int, cfg: EcnConfig | None) -> None:
        """Validate, then write one port's thresholds (None = marking off)."""
        ctl = self._control(switch)
        with self._locks[switch]:
            ctl.set_ecn(port, cfg)

    def set_ecn_all(self, cfg: EcnConfig | None) -> None:
        """The same setting on every port of every switch."""
        for name, ctl in self.controls.items():
            with self._locks[name]:
                ctl.set_ecn_all(dict.fromkeys(ctl.ports, cfg))
