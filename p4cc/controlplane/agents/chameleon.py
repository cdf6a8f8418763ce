"""CHAMELEON on a switch: a per-switch proxy agent of the one fabric-wide controller.

CHAMELEON tunes hosts and switches together from ONE controller, while the control loop
runs one :class:`~p4cc.controlplane.agents.base.Agent` per switch.  The agent registered
as ``chameleon`` is therefore a proxy: each interval (the short period) it takes one raw
sample of its switch's records -- queue length (mean and max over the ports), ECN
marking rate (marked / sent packets), throughput, drops -- and every long period uploads
their filtered statistics (p4cc.chameleon.stats) to the controller over its
:class:`SwitchLink`; it returns the ECN setting the controller dispatched last, on every
port where it is not in force yet.  The controller decides; the proxies only carry.  PFC
counters: BMv2 has no PFC (and the simulator models none), so none are reported.

Links: ``chameleon:<address>`` connects to a controller at ``unix:<path>`` or
``tcp:<host>:<port>`` (p4cc.chameleon.client); plain ``chameleon`` uses the link of the
controller the backend started for this run (:func:`controller_links`, set by
p4cc.experiment.chameleon); without one it is a ConfigError.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from p4cc.chameleon import space
from p4cc.chameleon.client import MonitorClient, ReportBuilder
from p4cc.chameleon.stats import Periods
from p4cc.chameleon.wire import Message
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.scale import Scale


class SwitchLink(Protocol):
    def send(self, msg: Message) -> None:
        """Upload one report."""

    def settings(self) -> Mapping[str, float] | None:
        """The controller's latest settings (None before the first)."""
        ...


LinkFactory = Callable[[str], SwitchLink]  # switch name -> its link
_LINKS: list[LinkFactory] = []


@contextlib.contextmanager
def controller_links(factory: LinkFactory) -> Iterator[None]:
    """Plain ``chameleon`` agents made inside this block link through ``factory``."""
    _LINKS.append(factory)
    try:
        yield
    finally:
        _LINKS.remove(factory)


class SocketLink:
    """A switch's connection to the controller (non-blocking for the control loop)."""

    def __init__(self, address: str, switch: str, scale: Scale,
                 periods: Periods | None = None) -> None:
        self.scale, self.periods = scale, periods  # (None: the scale's)
        self._latest: dict[str, float] | None = None
        self.client = MonitorClient(address, switch, "switch", self._on_settings)

    def _on_settings(self, msg: Message) -> None:
        sw = {k: v for k, v in msg.params.items() if k in space.SWITCH_PARAMS}
        space.check(sw, self.scale, ("switch",))
        ecn_setting(sw, self.scale)  # refuse (nack) what the switch could not take
        self._latest = sw

    def send(self, msg: Message) -> None:
        self.client.send(msg)

    def settings(self) -> Mapping[str, float] | None:
        self.client.poll(0.0)
        return self._latest


def ecn_setting(params: Mapping[str, float], scale: Scale) -> EcnConfig | None:
    """The EcnConfig of the switch parameters (Kmax raised to Kmin if below), validated
    against the scale's buffer; None when the parameters do not name all three."""
    if not all(k in params for k in space.SWITCH_PARAMS):
        return None
    kmin = max(1, round(params["kmin_bytes"]))
    kmax = max(kmin, round(params["kmax_bytes"]))
    return EcnConfig(kmin, kmax, float(params["pmax"])).validate(scale.buffer_bytes)


def switch_sample(obs: Mapping[int, PortTelemetry]) -> dict[str, float | None]:
    """One raw sample of a switch from its ports' records of one interval."""
    recs = list(obs.values())
    tx = sum(r.tx_pkts for r in recs)
    iv = max((r.interval_s for r in recs), default=0.0)
    return {"qlen_avg_bytes": sum(r.qlen_avg_bytes for r in recs) / len(recs),
            "qlen_max_bytes": max(r.qlen_max_bytes for r in recs),
            "mark_rate": sum(r.tx_marked_pkts for r in recs) / tx if tx else None,
            "tx_bps": sum(r.tx_bps for r in recs),
            "utilization_max": max(r.utilization for r in recs),
            "drops_per_s": sum(r.drops_pkts for r in recs) / iv if iv > 0 else None}


class ChameleonProxy:
    """One switch's end of CHAMELEON (see the module docstring)."""

    name = "chameleon"

    def __init__(self, scale: Scale, links: LinkFactory) -> None:
        self.scale, self.links = scale, links
        self.periods = Periods.for_scale(scale)
        self.link: SwitchLink | None = None
        self.builder: ReportBuilder | None = None
        self._current: dict[int, EcnConfig | None] = {}

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self._current = dict(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        if obs:
            first = next(iter(obs.values()))
            if self.link is None:
                self.link = self.links(first.switch)
                # the controller's periods if its link knows them (in process)
                self.periods = getattr(self.link, "periods", None) or self.periods
                self.builder = ReportBuilder(first.switch, self.periods)
            assert self.builder is not None
            t = max(r.t_s for r in obs.values())
            self.builder.sample(t, switch_sample(obs))
            if self.builder.due(t):
                self.link.send(self.builder.report(t))
        if self.link is None:
            return {}
        params = self.link.settings()
        cfg = ecn_setting(params, self.scale) if params else None
        if cfg is None:
            return {}
        todo = {p: cfg for p in sorted(set(obs) | set(self._current))
                if self._current.get(p) != cfg}
        self._current.update(todo)
        return todo


def make_chameleon(scale: Scale, arg: str | None = None) -> ChameleonProxy:
    """``chameleon`` (the run's controller; ``chameleon:<key>=<value>,...`` are options
    of that controller, p4cc.experiment.chameleon) or ``chameleon:<address>``."""
    if arg and "=" not in arg:
        return ChameleonProxy(scale, lambda sw: SocketLink(arg, sw, scale))
    if not _LINKS:
        raise ConfigError("agent 'chameleon' needs its fabric-wide controller: run it "
                          "through `p4cc run` (backends sim and bmv2 start one) or give "
                          "chameleon:<controller address>")
    return ChameleonProxy(scale, _LINKS[-1])
