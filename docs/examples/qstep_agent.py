"""How-to example: a switch agent (docs/howto.md, "Add an agent").

``qstep`` is a hand-made rule, not a learned agent: every port starts at SECN1 (scaled to
the fabric, p4cc.controlplane.ecn.static_setting); when a port's mean queue in the last
interval was above its Kmax, Kmax is halved (never below Kmin), and when it was below
Kmin, Kmax is doubled back toward its starting value.  It returns only the ports it
changes; the control loop validates every setting before anything is written and keeps
the last valid one if ``act`` raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from p4cc.controlplane.agents.static import register_agent
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.records import PortTelemetry
from p4cc.scale import Scale


class QueueStepAgent:
    """Halve Kmax on a port whose mean queue exceeded it; double it back when idle."""

    name = "qstep"

    def __init__(self, scale: Scale) -> None:
        self.start = static_setting("secn1", scale)
        self.current: dict[int, EcnConfig | None] = {}

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        """Called once with the settings in force (None = marking off)."""
        self.current = dict(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        """This interval's records by egress port -> the settings to change."""
        out: dict[int, EcnConfig] = {}
        for port, rec in obs.items():
            cur = self.current.get(port) or self.start
            kmax = cur.kmax_bytes
            if rec.qlen_avg_bytes > kmax:
                kmax = max(cur.kmin_bytes, kmax // 2)
            elif rec.qlen_avg_bytes < cur.kmin_bytes:
                kmax = min(self.start.kmax_bytes, kmax * 2)
            new = replace(cur, kmax_bytes=kmax)
            if new != self.current.get(port):
                out[port] = new
                self.current[port] = new
        return out


def make_qstep(scale: Scale) -> QueueStepAgent:
    """The factory the registry calls: ``factory(scale)`` (or ``factory(scale, arg)`` for
    a name written ``qstep:arg``)."""
    return QueueStepAgent(scale)


def register() -> None:
    """Make ``qstep`` a name that specs, ``p4cc run`` and ``p4cc cli`` accept."""
    register_agent("qstep", make_qstep)
