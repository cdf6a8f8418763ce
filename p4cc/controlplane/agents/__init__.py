"""Switch agents: observe PortTelemetry, choose an EcnConfig per port."""

from p4cc.controlplane.agents.base import Agent, AgentError

__all__ = ["Agent", "AgentError"]
