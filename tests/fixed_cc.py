"""A test-only fixed-rate controller (p4cc.hostcc.flow.RateController protocol) for the
sender tests over veth and loopback."""

from __future__ import annotations

from typing import Any


class Fixed:
    """Asks for ``bps`` whatever happens; ignores every signal."""

    def __init__(self, bps: float) -> None:
        self.bps = bps

    def on_cnp(self, t: float) -> None: ...
    def on_rtt_sample(self, t: float, rtt_s: float, q: int | None) -> None: ...
    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...
    def on_nack(self, t: float) -> None: ...

    def rate_bps(self, t: float) -> float:
        return self.bps

    def trace(self, t: float) -> dict[str, Any]:
        return {}
