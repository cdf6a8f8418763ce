"""One explicit scale between the papers' fabrics and the emulated testbed.

REFERENCE §5: the papers run 25-100 Gb/s links with µs RTTs; a BMv2 fabric runs at
Mb/s with ms RTTs.  Marking thresholds scale with the bandwidth-delay product,
DCQCN rates with link rate, DCQCN timers and the agents' interval Δt with RTT.
Every experiment reports its scale and both the paper value and the value used.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field

from p4cc.errors import ConfigError

#: Link rate of the papers' testbeds (ACC §5, PET §5, DCQCN paper): 25 Gb/s.
PAPER_LINK_RATE_BPS = 25e9
#: Base RTT assumed for the papers' fabrics: HPCC's ns-3 topology has 1 µs links and
#: up to 4 hops each way, i.e. about 8 µs (assumption, documented in docs/scaling.md).
PAPER_BASE_RTT_S = 8e-6


@dataclass(frozen=True)
class Scale:
    """How paper quantities map onto this fabric (all fields in SI units)."""

    name: str = field(default="testbed", metadata={"help": "preset name, stored with runs"})
    link_rate_bps: float = field(default=10e6, metadata={"help": "host link rate"})
    base_rtt_s: float = field(default=2e-3, metadata={"help": "unloaded RTT host to host"})
    pkt_bytes: int = field(default=1000, metadata={"help": "data packet size on the wire"})
    buffer_bytes: int = field(default=100_000, metadata={"help": "egress queue limit per port"})
    paper_link_rate_bps: float = field(default=PAPER_LINK_RATE_BPS, metadata={"help": "paper"})
    paper_base_rtt_s: float = field(default=PAPER_BASE_RTT_S, metadata={"help": "paper RTT"})

    def __post_init__(self) -> None:
        for name in ("link_rate_bps", "base_rtt_s", "paper_link_rate_bps", "paper_base_rtt_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"scale.{name} must be a positive number, got {value!r}")
        for name in ("pkt_bytes", "buffer_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ConfigError(f"scale.{name} must be an integer number of bytes, "
                                  f"got {value!r}")
        if self.pkt_bytes < 64 or self.pkt_bytes > 9000:
            raise ConfigError(f"scale.pkt_bytes must be in [64, 9000], got {self.pkt_bytes}")
        if self.buffer_bytes < self.pkt_bytes:
            raise ConfigError(
                f"scale.buffer_bytes ({self.buffer_bytes}) must hold at least one packet "
                f"({self.pkt_bytes} B)"
            )

    # -- factors ---------------------------------------------------------------------
    @property
    def rate_factor(self) -> float:
        """Testbed link rate / paper link rate."""
        return self.link_rate_bps / self.paper_link_rate_bps

    @property
    def time_factor(self) -> float:
        """Testbed RTT / paper RTT."""
        return self.base_rtt_s / self.paper_base_rtt_s

    @property
    def bdp_factor(self) -> float:
        """Testbed BDP / paper BDP."""
        return self.rate_factor * self.time_factor

    # -- conversions -----------------------------------------------------------------
    def bytes(self, paper_bytes: float) -> float:
        """A paper byte quantity tied to the BDP (queue thresholds, buffers)."""
        return paper_bytes * self.bdp_factor

    def rate(self, paper_bps: float) -> float:
        """A paper rate (DCQCN R_AI, min rate, ...)."""
        return paper_bps * self.rate_factor

    def time(self, paper_s: float) -> float:
        """A paper time (DCQCN timers, agent interval Δt, CNP interval)."""
        return paper_s * self.time_factor

    @property
    def buffer_pkts(self) -> int:
        return self.buffer_bytes // self.pkt_bytes

    def pps(self, rate_bps: float) -> float:
        """Packets per second of `pkt_bytes` packets at `rate_bps` (BMv2 queue rates)."""
        return rate_bps / (8.0 * self.pkt_bytes)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


#: Named presets.  ``testbed``: BMv2 on two cores; ``paper``: unscaled, for the simulator.
SCALES: dict[str, Scale] = {
    "testbed": Scale(),
    "testbed-fast": Scale(name="testbed-fast", link_rate_bps=20e6, base_rtt_s=1e-3),
    # the testbed's BDP (2.5 kB) at half its packet rate: 625 pps per port, a packet time
    # of 1.6 ms -- twice the slack for the emulation's scheduling delays, which do not
    # shrink with the rate (docs/emulation.md "The default experiment at 5 Mb/s")
    "testbed-5m": Scale(name="testbed-5m", link_rate_bps=5e6, base_rtt_s=4e-3),
    "paper": Scale(
        name="paper",
        link_rate_bps=PAPER_LINK_RATE_BPS,
        base_rtt_s=PAPER_BASE_RTT_S,
        buffer_bytes=1_000_000,
    ),
}


def get_scale(name: str) -> Scale:
    try:
        return SCALES[name]
    except KeyError:
        raise ConfigError(f"unknown scale {name!r}; choose one of {sorted(SCALES)}") from None
