"""Per-flow state and counters of the receiver (p4cc.hostcc.receiver)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class RxFlow:
    """Receiver state and counters of one flow."""

    src: str
    sport: int
    qpn: int
    first_t: float
    epsn: int = 0
    msg_len: int = -1
    rx_bytes: int = 0
    rx_pkts: int = 0
    ce_pkts: int = 0
    cnps: int = 0
    nacks: int = 0
    acks: int = 0
    dup_pkts: int = 0
    ooo_pkts: int = 0
    injected_drops: int = 0
    probes: int = 0
    max_qdepth: int | None = None
    last_t: float = 0.0
    complete_t: float | None = None
    last_cnp_t: float = float("-inf")
    last_nack_t: float = float("-inf")
    nack_epsn: int = -1
    nack_repeats: int = 0

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("last_cnp_t", "last_nack_t", "nack_epsn", "nack_repeats"):
            d.pop(k)
        return d


@dataclass
class RxCounters:
    datagrams: int = 0
    malformed: int = 0
    unknown_opcode: int = 0
    data_bytes: int = 0
    cnps_sent: int = 0
    send_errors: int = 0
    refused_new: int = 0  # would have created a flow: implausible PSN, QPN or length
    refused_full: int = 0  # would have created a flow beyond max_flows
    expired: int = 0  # flows whose state was dropped after flow_idle_s
    records_dropped: int = 0  # expired flows' records beyond max_records
