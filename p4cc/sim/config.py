"""Simulator configuration and the list of fabric features only BMv2 has."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from p4cc.errors import ConfigError

# the hosts' CNP interval (NVIDIA's 4 µs, REFERENCE §2), scaled by the scale's time factor
from p4cc.hostcc.receiver import DEFAULT_CNP_INTERVAL_S
from p4cc.scale import Scale
from p4cc.sim.gobackn import check_mode
from p4cc.sim.pfc import DEFAULT_POOL_BYTES, check_alpha, check_buffer, check_pool
from p4cc.sim.tail_loss import TAIL_LOSSES

#: SimConfig.queue_tail values (p4cc.sim.fifo_tail)
QUEUE_TAILS = ("fifo", "fluid")
#: SimConfig.mark_depth values (p4cc.sim.enqmark)
MARK_DEPTHS = ("enqueue", "departure")

#: Options of an experiment spec that need the real data plane.  Keys are the option
#: names the runner passes; values say what the option does, for the refusal message.
BMV2_ONLY_FEATURES: dict[str, str] = {
    "int_watchlist": "INT-MD telemetry on selected flows (p4cc's INT over UDP)",
    "int": "INT-MD telemetry",
    "int_reports": "INT reports cloned to the CPU port",
    "pcap": "packet capture on switch interfaces",
    "capture": "packet capture on switch interfaces",
    "thrift": "direct Thrift register access",
    "p4runtime": "direct P4Runtime access",
    "switch_log": "BMv2 event/console logs",
    "cpu_port": "packets to/from BMv2's CPU port",
}


def refuse_unsupported(options: Mapping[str, Any], backend: str = "sim") -> None:
    """Raise ConfigError naming the first enabled option only the BMv2 backend has."""
    for key, value in options.items():
        if key in BMV2_ONLY_FEATURES and value not in (None, False, "", 0, (), [], {}):
            raise ConfigError(
                f"option {key!r} ({BMV2_ONLY_FEATURES[key]}) needs the bmv2 backend; the "
                f"{backend} backend cannot honour it: drop the option or run with backend bmv2"
            )


@dataclass(frozen=True)
class SimConfig:
    """How the simulator steps; ``None`` fields are derived from the scale."""

    dt_s: float | None = field(
        default=None, metadata={"help": "time step; default base_rtt/8 (at least 1 pkt time)"})
    telemetry_interval_s: float | None = field(
        default=None, metadata={"help": "PortTelemetry interval Δt; default 10 x base RTT "
                                        "(ACC §3.3: an order of magnitude above the RTT)"})
    cc: str = field(default="dcqcn", metadata={"help": "dcqcn | rlcc | fixed (cc_params: "
                                                       "the rate) | line (no CC)"})
    cc_params: str = field(default="hpcc-ns3", metadata={"help": "DCQCN parameter set name"})
    cnp_interval_s: float | None = field(
        default=None, metadata={"help": "NP: at most one CNP per flow per interval"})
    rtt_probe_interval_s: float | None = field(
        default=None, metadata={"help": "RTT sample period per flow; default base RTT"})
    elephant_bytes: int | None = field(
        default=None, metadata={"help": "bytes after which a flow counts as an elephant; "
                                        "default 1 MB scaled by the BDP"})
    seed: int = field(default=0, metadata={"help": "RNG seed (marking, CNP draws)"})
    host_traces: bool = field(default=True, metadata={"help": "record per-flow host traces"})
    rtt_probes: bool | None = field(
        default=None, metadata={"help": "take RTT samples (Engine.rtt_last, host traces); "
                                        "None: when the CC uses delay or traces are on"})
    max_hops: int = field(default=8, metadata={"help": "longest path in switch egress queues"})
    loss_recovery: str = field(
        default="go-back-n", metadata={"help": "go-back-n (RoCE, p4cc's hosts, the papers' "
                                       "ns-3: everything after a loss is sent again) | "
                                       "selective (only the lost bytes)"})
    queue_tail: str = field(
        default="fifo", metadata={"help": "fifo: a flow's last bytes leave a queue when a "
                                  "FIFO would have sent them (p4cc.sim.fifo_tail) | fluid: "
                                  "proportional service only (before session 11; the "
                                  "last bytes linger ~20 drain times)"})
    tail_loss: str = field(
        default="packet", metadata={"help": "packet: a flow with nothing left to inject "
                                    "loses whole packets, drawn (p4cc.sim.tail_loss) | "
                                    "fluid: a fraction of whatever it brings (before "
                                    "session 29; go-back-N resends of its last bytes "
                                    "then lose a fraction again, round after round)"})
    mark_depth: str = field(
        default="enqueue", metadata={"help": "the depth an ECN mark is drawn from: "
                                     "enqueue (the depth the departing bytes found when "
                                     "they arrived, FIFO, as BMv2 marks by enq_qdepth; "
                                     "the mark reaches the receiver one queueing delay "
                                     "later) | departure (the depth when they leave; "
                                     "sessions <= 21)"})
    pfc: bool = field(
        default=False, metadata={"help": "lossless fabric: priority flow control pauses "
                                 "the upstream port instead of dropping (p4cc.sim.pfc; "
                                 "the papers' fabrics have it, BMv2 does not)"})
    pfc_alpha: float = field(
        default=0.125, metadata={"help": "PFC dynamic threshold: an ingress pauses its "
                                 "sender at alpha x the free buffer "
                                 "(ACC §5.1: 1/8, i.e. 11.1 % of the buffer)"})
    pfc_buffer: str = field(
        default="shared", metadata={"help": "whose free buffer PFC compares with: shared "
                                    "(one pool per switch, pfc_pool_bytes; an ingress's "
                                    "bytes over all egress queues) | per-queue (the egress "
                                    "queue's own buffer, per (ingress, egress) pair; "
                                    "sessions 12-25)"})
    pfc_pool_bytes: float = field(
        default=DEFAULT_POOL_BYTES, metadata={"help": "each switch's shared buffer at the "
                                              "papers' scale (ACC §5.4: 10 MB per service "
                                              "pool), scaled with the BDP"})

    def __post_init__(self) -> None:
        for name in ("dt_s", "telemetry_interval_s", "cnp_interval_s", "rtt_probe_interval_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"SimConfig.{name} must be a positive number or None, got {v!r}")
        if self.cc not in ("dcqcn", "rlcc", "fixed", "line"):
            raise ConfigError(f"SimConfig.cc must be dcqcn, rlcc, fixed or line, got "
                              f"{self.cc!r}")
        check_mode(self.loss_recovery)
        check_alpha(self.pfc_alpha)
        check_buffer(self.pfc_buffer)
        check_pool(self.pfc_pool_bytes)
        for name, choices in (("mark_depth", MARK_DEPTHS), ("tail_loss", TAIL_LOSSES),
                              ("queue_tail", QUEUE_TAILS)):
            value = getattr(self, name)
            if value not in choices:
                raise ConfigError(f"SimConfig.{name} must be one of {', '.join(choices)}, "
                                  f"got {value!r}")

    # -- resolved values -------------------------------------------------------------
    def dt(self, scale: Scale) -> float:
        if self.dt_s is not None:
            return float(self.dt_s)
        pkt_time = scale.pkt_bytes * 8 / scale.link_rate_bps
        return max(scale.base_rtt_s / 8, pkt_time)

    def interval(self, scale: Scale) -> float:
        return float(self.telemetry_interval_s or 10 * scale.base_rtt_s)

    def cnp_interval(self, scale: Scale) -> float:
        return float(self.cnp_interval_s or scale.time(DEFAULT_CNP_INTERVAL_S))

    def probe_interval(self, scale: Scale) -> float:
        return float(self.rtt_probe_interval_s or scale.base_rtt_s)

    def elephant(self, scale: Scale) -> int:
        return int(self.elephant_bytes or max(scale.pkt_bytes, round(scale.bytes(1_000_000))))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
