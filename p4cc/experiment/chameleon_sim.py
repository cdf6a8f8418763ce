"""CHAMELEON on the simulator: the controller in process (docs/chameleon.md).

The simulator is one process, stepped by one thread: its hosts and switch proxies talk
to the controller (p4cc.experiment.chameleon) in process (:class:`DirectLink`, the same
wire format, encoded and decoded), so a run stays deterministic.  :class:`SimChameleon`
samples the simulated hosts every interval; each long period the new host parameters
go into the simulator's DCQCN hook (DcqcnFlows.set_params) and the CNP interval into
the engine, and the proxies return the new thresholds in the same interval.
:func:`for_sim` makes the run's SimChameleon from the agent name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from p4cc.analysis import metrics
from p4cc.chameleon import space
from p4cc.chameleon.client import ReportBuilder
from p4cc.chameleon.stats import Counter, busy
from p4cc.chameleon.wire import Message, encode
from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.chameleon import (
    BUSY_METRIC,
    ChameleonConfig,
    ChameleonController,
    own_controller,
    parse_options,
)
from p4cc.topo.spec import TopoSpec


def jain(x: np.ndarray) -> float | None:
    """Jain's fairness index of the finite values of ``x`` (None: none, or all zero)."""
    j = metrics.jain(x[np.isfinite(x)])
    return None if math.isnan(j) else j


class DirectLink:
    """A reporter's link to an in-process controller (the sim backend): reports go
    through the wire format into the controller's MonitorState; settings are read back."""

    def __init__(self, ctl: ChameleonController, rid: str, role: str) -> None:
        self.ctl = ctl
        self.periods = ctl.periods
        ctl.state.handle_line(encode(Message("hello", rid, role=role)))

    def send(self, msg: Message) -> None:
        self.ctl.state.handle_line(encode(msg))

    def settings(self) -> Mapping[str, float] | None:
        return self.ctl.settings


class SimChameleon:
    """CHAMELEON on the simulator: hosts sampled from the engine, one controller round
    every long period, host parameters into the DCQCN hook, thresholds via the proxies."""

    def __init__(self, topo: TopoSpec, sink: Any, config: ChameleonConfig | None = None,
                 interval_s: float | None = None) -> None:
        self.topo, self.sink = topo, sink
        cfg = config or ChameleonConfig()
        if interval_s is not None and cfg.short_period_s is None:
            cfg = replace(cfg, short_period_s=float(interval_s))  # sampled each Δt
        self._t = 0.0
        self.ctl = ChameleonController(topo.scale, cfg, clock=lambda: self._t)
        self.hosts = {h.name: (h.switch, h.switch_port) for h in topo.hosts}
        self.builders = {h: ReportBuilder(h, self.ctl.periods) for h in self.hosts}
        self.links = {h: DirectLink(self.ctl, h, "host") for h in self.hosts}
        self._cnps = {h: Counter() for h in self.hosts}
        self._delivered: dict[int, tuple[float, float]] = {}  # flow row -> (t, bytes)
        self._next_round: float | None = None
        self.applied = 0
        self.stopped_at: float | None = None  # when the tuner stopped (simulated s)

    def link(self, switch: str) -> DirectLink:
        return DirectLink(self.ctl, switch, "switch")

    def on_interval(self, eng: Any, t: float, recs: list[PortTelemetry]) -> None:
        self._t = t
        by_port = {r.key: r for r in recs}
        act = eng.active
        src = eng.src_i
        rate = self._flow_goodputs(eng, t)
        names = list(self.hosts)
        for i, h in enumerate(names):
            r = by_port.get(self.hosts[h])
            mine = act & (src == i) if len(src) else act
            rtt = eng.rtt_last[mine] if np.count_nonzero(mine) else np.zeros(0)
            rtt = rtt[np.isfinite(rtt)]
            rx_bps = r.tx_bps if r is not None else 0.0
            self.builders[h].sample(t, {
                "rx_bps": rx_bps, BUSY_METRIC: busy(rx_bps),
                "flow_jain": jain(rate[mine]) if rate is not None else None,
                "rtt_s": float(rtt.mean()) if len(rtt) else None,
                "cnps_rx_per_s": self._cnps[h].rate(t, float(eng.cnps[mine].sum()))})
            if self.builders[h].due(t):
                self.links[h].send(self.builders[h].report(t))
        if self._next_round is None:
            self._next_round = t + self.ctl.periods.long_s
            self._apply_start(eng)
        if t >= self._next_round - 1e-12:
            self._next_round += self.ctl.periods.long_s
            n_rows = len(self.ctl.rows)
            msg = self.ctl.decide(t)
            if msg is not None:
                self._apply(eng, msg.params)
            if len(self.ctl.rows) > n_rows:  # the round's row (and the final row at a stop)
                self.sink.table("chameleon", self.ctl.rows[n_rows:])
            if self.ctl.tuner.done and self.stopped_at is None:
                self._stopped(t)

    def _stopped(self, t: float) -> None:
        self.stopped_at = t
        tuner = self.ctl.tuner
        self.sink.log(f"chameleon: the tuner stopped after {tuner.rounds} rounds "
                      f"({tuner.stop_reason}) at t={t:.6g} s; " +
                      ("the run ends here (end=1)" if self.ctl.config.end_run else
                       "its final setting stays in force to the end of the run"))

    def ended(self) -> bool:
        """True once the run should end: ``end=1`` and the tuner has stopped (the sim
        backend checks it after every step)."""
        return self.stopped_at is not None and self.ctl.config.end_run

    def _flow_goodputs(self, eng: Any, t: float) -> np.ndarray | None:
        """Each slot's goodput (b/s) since the last sample (NaN: a flow new since then);
        None on the first sample."""
        out = np.full(len(eng.active), np.nan)
        last, self._delivered = self._delivered, {}
        for s in np.flatnonzero(eng.active):
            row, d = int(eng.row[s]), float(eng.delivered[s])
            self._delivered[row] = (t, d)
            if row in last and t > last[row][0]:
                out[s] = 8.0 * (d - last[row][1]) / (t - last[row][0])
        return out if last else None

    def _apply_start(self, eng: Any) -> None:
        """The starting setting into the hosts where it differs from the run's host CC
        (``initial``/``from`` options; the BMv2 controller broadcasts it at t0)."""
        start = self.ctl.settings
        hook = getattr(eng, "cc", None)
        params = getattr(hook, "params", None)
        differs = {k: v for k, v in start.items() if k in space.HOST_PARAMS
                   and params is not None and getattr(params, k, v) != v}
        if start["cnp_interval_s"] != getattr(eng, "cnp_interval", start["cnp_interval_s"]):
            differs["cnp_interval_s"] = start["cnp_interval_s"]
        if differs:
            self._apply(eng, differs)

    def _apply(self, eng: Any, params: Mapping[str, float]) -> None:
        host = {k: v for k, v in params.items() if k in space.HOST_PARAMS}
        hook = eng.cc
        if host and hasattr(hook, "flows") and hasattr(hook.flows, "set_params"):
            hook.flows.rate(eng.t)  # events up to now under the old parameters
            hook.params = replace(hook.params, **host)
            hook.flows.set_params(hook.params)
        if "cnp_interval_s" in params:
            eng.set_cnp_interval(float(params["cnp_interval_s"]))
        self.applied += 1


def for_sim(agent_name: str, topo: TopoSpec, sink: Any,
            interval_s: float | None = None) -> SimChameleon | None:
    """The run's controller when ``agent_name`` is ``chameleon[:options]`` (else None)."""
    opts = own_controller(agent_name)
    if opts is None:
        return None
    return SimChameleon(topo, sink, parse_options(opts), interval_s=interval_s)
