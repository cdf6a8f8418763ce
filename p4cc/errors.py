"""Exception types shared across p4cc.

Library code raises these; only ``__main__``/CLI code turns them into exit codes.
Every message names the cause and, where there is one, the fix.
"""

from __future__ import annotations


class P4ccError(Exception):
    """Base class of every error p4cc raises on purpose."""


class ConfigError(P4ccError, ValueError):
    """A spec, topology string, parameter or threshold is invalid."""


class ToolMissingError(P4ccError):
    """An external tool (simple_switch_grpc, p4c, mn, iperf3, ...) is not installed."""


class SwitchError(P4ccError):
    """A switch died, did not start, or refused a request."""
