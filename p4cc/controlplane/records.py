"""Typed telemetry records: what agents observe and what experiments store.

One ``PortTelemetry`` per switch egress port per poll interval.  The emulated fabric
(p4cc.controlplane.telemetry) and the simulator (p4cc.sim) both emit exactly this type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from p4cc.controlplane.ecn import EcnConfig

PortKey = tuple[str, int]  # (switch name, egress port)


@dataclass(frozen=True)
class PortTelemetry:
    switch: str
    port: int
    t_s: float  # end of the interval, seconds since the run started
    interval_s: float  # length of the interval actually measured
    qlen_avg_bytes: float  # mean queue depth seen at enqueue (packets x pkt_bytes)
    qlen_max_bytes: float  # maximum queue depth seen at enqueue since the last poll
    tx_bps: float  # bits/s sent by the port
    tx_marked_bps: float  # bits/s of CE-marked packets sent by the port
    tx_pkts: int
    tx_marked_pkts: int
    drops_pkts: int  # offered to the port but not sent (tail drops), this interval
    ecn: EcnConfig | None  # setting in force during the interval (None = marking off)
    incast_degree: int  # distinct senders toward the port this interval
    active_flows: int  # distinct flows toward the port this interval
    elephant_flows: int  # of which crossed the elephant size
    sojourn_avg_s: float = 0.0  # mean queueing delay (deq_timedelta)
    utilization: float = 0.0  # tx_bps / port rate
    # time between the reads of the port counters (tx_pkts, tx_bps, marked, offered) of
    # this and the previous poll; 0: not recorded, the same as interval_s.  The counters
    # are read first in a poll, the interval ends at the epoch switch after them, and
    # when one poll's reads take 5 ms and the next's 60 ms the two spans differ by ~20 %
    # of a 250 ms interval: tx_pkts / interval_s then read "more than the port can send"
    counter_interval_s: float = 0.0

    @property
    def key(self) -> PortKey:
        return (self.switch, self.port)

    @property
    def mice_elephant_ratio(self) -> float:
        """PET's mix feature: mice flows per elephant flow (mice count if no elephant)."""
        mice = max(0, self.active_flows - self.elephant_flows)
        return mice / self.elephant_flows if self.elephant_flows else float(mice)

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        ecn = row.pop("ecn")
        row["kmin_bytes"] = ecn["kmin_bytes"] if ecn else None
        row["kmax_bytes"] = ecn["kmax_bytes"] if ecn else None
        row["pmax"] = ecn["pmax"] if ecn else None
        row["mice_elephant_ratio"] = self.mice_elephant_ratio
        return row
