"""CHAMELEON on a host: run-time DCQCN parameters and the host's metric reporter.

* :class:`RuntimeParams` holds the host's run-time DCQCN parameters: ``wrap`` a
  controller factory so that every DCQCN flow of the sender (running or started later)
  uses them; ``apply`` validates a ``settings`` message's sender-side values (each
  against its CHAMELEON range, p4cc.chameleon.space, then as a whole by
  :class:`~p4cc.hostcc.dcqcn.DcqcnParams`: ConfigError naming the parameter) before it
  changes anything, then hands them to every running controller
  (:meth:`~p4cc.hostcc.cc.DcqcnController.set_params`, taken over by the flow's core at
  the sender thread's next call).  The receiver side (the NP's CNP interval) is applied to
  the receiver's core under its lock.
* :func:`sender_sampler` / :func:`receiver_sampler`: the raw samples a host takes every
  short period: goodput (acknowledged bytes) and probe RTT of its flows, CNPs received;
  bytes received and CNPs sent.  A host has no PFC (p4cc's hosts are userspace UDP): no
  PFC counters.
* :func:`start_reporter`: a :class:`p4cc.chameleon.client.ReporterThread` for
  ``p4cc host send/recv --monitor ADDR``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from p4cc.chameleon import space
from p4cc.chameleon.client import MonitorClient, ReporterThread, Sample
from p4cc.chameleon.stats import Counter, Periods, busy
from p4cc.chameleon.wire import Message
from p4cc.errors import ConfigError
from p4cc.hostcc.cc import DcqcnController
from p4cc.hostcc.dcqcn import DcqcnParams
from p4cc.hostcc.flow import FlowSpec, RateController
from p4cc.hostcc.receiver import Receiver
from p4cc.hostcc.sender import ControllerFactory, Sender
from p4cc.scale import Scale

log = logging.getLogger(__name__)


class RuntimeParams:
    """The run-time DCQCN parameters of one host process (sender and/or receiver)."""

    def __init__(self, scale: Scale, receiver: Receiver | None = None) -> None:
        self.scale = scale
        self.receiver = receiver
        self.overrides: dict[str, float] = {}
        self.applied = 0  # settings messages taken
        self._ctls: weakref.WeakSet[DcqcnController] = weakref.WeakSet()
        self._lock = threading.Lock()

    def wrap(self, make: ControllerFactory) -> ControllerFactory:
        """``make``, with every DCQCN controller it builds following these parameters."""
        def made(spec: FlowSpec) -> RateController:
            ctl = make(spec)
            if isinstance(ctl, DcqcnController):
                with self._lock:
                    self._ctls.add(ctl)
                    if self.overrides:
                        ctl.set_params(_with(ctl.params, self.overrides))
            return ctl
        return made

    def apply(self, params: dict[str, float]) -> None:
        """Validate, then apply: sender-side values to every DCQCN flow (and the flows
        started later), the receiver's CNP interval to the receiver."""
        host = {k: v for k, v in params.items() if k in space.HOST_PARAMS}
        recv = {k: v for k, v in params.items() if k in space.RECEIVER_PARAMS}
        space.check({k: v for k, v in params.items() if k not in space.SWITCH_PARAMS},
                    self.scale, ("host", "receiver"))
        with self._lock:
            merged = {**self.overrides, **host}
            ctls = list(self._ctls)
            if "decrease_period_s" in merged and any(c.params.decrease_period_s is None
                                                     for c in ctls):
                raise ConfigError("run-time parameter decrease_period_s cannot be set on "
                                  "flows that cut on each CNP (decrease_period_s None)")
            try:  # every new parameter set is valid before any flow changes
                new = [(c, _with(c.params, merged)) for c in ctls]
            except TypeError as exc:  # (cannot happen: names are checked above)
                raise ConfigError(f"bad DCQCN parameter: {exc}") from None
            for c, p in new:
                c.set_params(p)
            self.overrides = merged
            self.applied += 1
        if recv and self.receiver is not None:
            rx = self.receiver
            with rx.lock:
                rx.core.cfg = replace(rx.core.cfg, cnp_interval_s=recv["cnp_interval_s"])

    def on_settings(self, msg: Message) -> None:
        self.apply(msg.params)


def _with(p: DcqcnParams, values: dict[str, Any]) -> DcqcnParams:
    """``p`` with ``values`` (DcqcnParams validates the whole set: ConfigError)."""
    return replace(p, **values)


def sender_sampler(sender: Sender) -> Callable[[float], Sample]:
    """Raw samples of a sender: goodput b/s (bytes acknowledged), Jain's index of its
    active flows' goodputs, their mean probe RTT (s), CNPs received per second, active
    flows, and the DCQCN parameters in force in its newest running flow's core
    (``core_<name>``: what the controller can check its settings against)."""
    acked, cnps = Counter(), Counter()
    per_flow: dict[int, Counter] = {}

    def sample(t: float) -> Sample:
        with sender._lock:
            flows = [f for f, _s in sender.flows]
        acks = {f.id: min(f.snd_una * f.payload, f.spec.size) for f in flows}
        rates = [r for f in flows if not f.done and (r := per_flow.setdefault(
            f.id, Counter()).rate(t, acks[f.id])) is not None]
        sq = sum(r * r for r in rates)
        rtts = [f.rtt_s for f in flows if not f.done and f.rtt_s is not None]
        cores = [f.ctl.flows.params for f in flows
                 if not f.done and isinstance(f.ctl, DcqcnController)]
        core: Sample = {f"core_{k}": getattr(cores[-1], k) for k in space.HOST_PARAMS
                        if cores and getattr(cores[-1], k) is not None}
        return {**core, "goodput_bps": _bps(acked.rate(t, sum(acks.values()))),
                "flow_jain": sum(rates) ** 2 / (len(rates) * sq) if sq > 0 else None,
                "rtt_s": sum(rtts) / len(rtts) if rtts else None,
                "cnps_rx_per_s": cnps.rate(t, sum(f.cnps for f in flows)),
                "active_flows": float(sum(not f.done for f in flows))}
    return sample


def receiver_sampler(rx: Receiver) -> Callable[[float], Sample]:
    """Raw samples of a receiver: bytes received b/s (``rx_bps``; ``rx_busy_bps`` the
    same but no sample when nothing arrived: see :func:`busy`), CNPs sent per second."""
    data, cnps = Counter(), Counter()

    def sample(t: float) -> Sample:
        c = rx.counters()
        rx_bps = _bps(data.rate(t, c["data_bytes"]))
        return {"rx_bps": rx_bps, "rx_busy_bps": busy(rx_bps),
                "cnps_tx_per_s": cnps.rate(t, c["cnps_sent"])}
    return sample



def _bps(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else 8.0 * bytes_per_s


def start_reporter(address: str, rid: str, sample: Callable[[float], Sample],
                   params: RuntimeParams, periods: Periods | None = None,
                   **client_kw: Any) -> ReporterThread:
    """Report ``sample`` to the controller at ``address``; its settings go to ``params``."""
    client = MonitorClient(address, rid, "host", params.on_settings, **client_kw)
    return ReporterThread(client, sample, periods or Periods.for_scale(params.scale)).start()
