"""The agent interface: observe records -> choose EcnConfig per port -> (caller) apply.

One agent object per switch.  ``act`` returns settings only for ports it wants to
change; the caller validates them and writes them through the switch client.  If
``act`` raises, the caller keeps the last valid thresholds in the switch (fail-safe).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import P4ccError


class AgentError(P4ccError):
    """An agent failed to produce a decision."""


@runtime_checkable
class Agent(Protocol):
    name: str

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        """Called once before the first interval with the settings in force."""

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        """Given this interval's records keyed by egress port, return new settings."""
        ...
