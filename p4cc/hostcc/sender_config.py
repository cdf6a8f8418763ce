"""How a sender runs its flows (p4cc.hostcc.sender): :class:`SenderConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field

from p4cc.errors import ConfigError
from p4cc.hostcc import wire

#: the sparsest ACK request a sender accepts (``ack_every``): go-back-N resends from
#: the last ACK, so a sparser one only delays loss recovery
MAX_ACK_EVERY = 256


@dataclass(frozen=True)
class SenderConfig:
    """How a sender runs its flows (times in seconds)."""

    pkt_bytes: int = field(
        default=1000,
        metadata={"help": "IPv4 datagram size of data; the frame on the wire is 14 B more "
                  "(runners: Scale.pkt_bytes - 14, api.datagram_bytes)"})
    dev: str | None = field(default=None, metadata={"help": "pace with HTB on this device"})
    netns: str | None = field(default=None, metadata={"help": "named netns to run in"})
    sport_base: int = field(
        default=0, metadata={"help": "flow i uses sport_base+i (0: a scheduled flow uses "
                             "p4cc.topo.ecmp.flow_sport(its id), others any port)"})
    sndbuf_bytes: int = field(default=65536, metadata={"help": "SO_SNDBUF with HTB pacing"})
    host_queue_bytes: int = field(
        default=8192,
        metadata={"help": "min bytes (skb truesize, SIOCOUTQ; ~2.3 KB per 1000-B packet) a "
                  "flow keeps queued in its HTB class; the rest of SO_SNDBUF stays free "
                  "for probes"},
    )
    host_queue_s: float = field(
        default=5e-3, metadata={"help": "...or this much time at the flow's rate, if more"})
    probe_interval_s: float = field(
        default=8e-3, metadata={"help": "RTT probe period of a flow that is probed"})
    probe_quiet_s: float | None = field(
        default=None,
        metadata={"help": "probe a flow only once it has had no ACK RTT sample for this "
                  "long (from its start or its latest one; p4cc.hostcc.rtt_samples): None "
                  "= probe_interval_s; 0 = probe every probe_interval_s whatever the ACKs"})
    probe_max_pps: float = field(
        default=0.0, metadata={"help": "cap of this sender's probes in all, probes/s: with "
                               "n flows each is probed at most every n / cap s (0: none)"})
    rtt_window: int = field(
        default=1,
        metadata={"help": "the controller gets the median of the last N RTT samples "
                  "(probes, ACKs; 1: each raw sample, the RL-CC definition)"})
    rto_s: float = field(default=50e-3, metadata={"help": "go-back-N timeout floor"})
    rto_max_s: float = field(
        default=0.5, metadata={"help": "RTO cap (RTO = min(max(2·srtt, rto_s)·2^k, this))"})
    link_rate_bps: float | None = field(
        default=None, metadata={"help": "with dev: cap the flows' sum at the host link rate"})
    max_token_debt_s: float = field(
        default=0.01,
        metadata={"help": "with dev: HTB charges a frame at its class's ceiling and keeps "
                  "the debt when `tc class change` raises the ceiling, so a flow cut to a "
                  "few kb/s stalls for up to a second after a rate increase; a flow slower "
                  "than one data frame per this many seconds is paced in userspace instead, "
                  "its HTB ceiling held at that rate (0: off, HTB paces every rate)"})
    ack_every: int = field(default=16, metadata={"help": "AckReq every N data packets"})
    ack_interval_s: float | None = field(
        default=None,
        metadata={"help": "also AckReq on the first new packet this long after the last "
                  "AckReq: the ACKs are RTT samples for the controller (None: the "
                  "controller's ack_interval_s attribute if it has one, as RL-CC does; "
                  "0: off)"})
    trace_interval_s: float = field(default=10e-3, metadata={"help": "trace row period"})
    completions: str | None = field(
        default=None, metadata={"help": "file shared by the senders of a run: completed "
                                "flows' refs, for flows that start ``after`` one"})
    ecn: bool = field(default=True, metadata={"help": "send data as ECT(0)"})
    t0_epoch: float | None = field(
        default=None,
        metadata={"help": "Unix time the flows' start times count from (the run's t0, "
                  "shared by every host of a run); None: when the sender opens.  Hosts "
                  "that open later (netns, files, HTB set-up on a busy machine) then start "
                  "their first flows late instead of shifting all of them"})
    pad_data: bool = field(
        default=False,
        metadata={"help": "pad every data packet to pkt_bytes (a flow's short last packet "
                  "too): on a packets/s queue (BMv2) every data packet then holds the "
                  "bytes its slot stands for; the receiver counts the message bytes only"})
    prepare_ahead_s: float = field(
        default=0.05,
        metadata={"help": "open a scheduled flow's socket and HTB class this long before "
                  "its start time, so that setting them up (~3 ms of netlink per flow on an "
                  "idle machine, ~8 ms on a loaded 2-core BMv2 run) does not make the flow "
                  "start late; flows that start ``after`` another are set up when released "
                  "(0: every flow at its start)"})

    start_rt_prio: int = field(
        default=0,
        metadata={"help": "run the sending thread and the HTB pacer's thread SCHED_RR at "
                  "this real-time priority from start_rt_lead_s before each flow's start "
                  "until the pass that starts it, then back to their own policy "
                  "(p4cc.hostcc.sched.StartBoost: on a CPU shared with busier processes "
                  "the sender woke late for a start); needs CAP_SYS_NICE (0: off)"})
    chain_rt: bool = field(
        default=True,
        metadata={"help": "with start_rt_prio: also boost while a chained flow, set up "
                  "ahead, waits for the flow it starts after, which may complete any "
                  "moment (its last ACK wakes the sender at once, not after the switches' "
                  "slice).  BMv2 storage, 9 runs each (docs/emulation.md): 5-15 % of the "
                  "flows more than a base RTT late without it, 0.1-0.7 % with it"})
    start_rt_lead_s: float = field(
        default=0.02,
        metadata={"help": "with start_rt_prio: how long before a flow's start the boost "
                  "begins.  Measured on the default experiment on BMv2 (session 14, "
                  "docs/emulation.md): boosting for the last wait only left 2.4-4.5 % of "
                  "the flows > 4 ms late; 0.1 s starved the switches in three of four "
                  "runs; 0.02 s left 0.3-1.3 % late and one of four runs just over the "
                  "switches' CPU check"})

    def __post_init__(self) -> None:
        if self.pkt_bytes <= wire.data_overhead() or self.pkt_bytes > 9000:
            raise ConfigError(f"pkt_bytes must be in {wire.data_overhead() + 1}..9000")
        if not 1 <= self.ack_every <= MAX_ACK_EVERY:
            raise ConfigError(f"ack_every={self.ack_every} must be in 1..{MAX_ACK_EVERY}")
        if not 1 <= self.rtt_window <= 64:
            raise ConfigError(f"rtt_window={self.rtt_window} must be in 1..64")
        if self.ack_interval_s is not None and not self.ack_interval_s >= 0:
            raise ConfigError(f"ack_interval_s={self.ack_interval_s} must be >= 0 (0: off)")
        if self.probe_quiet_s is not None and not 0 <= self.probe_quiet_s < float("inf"):
            raise ConfigError(f"probe_quiet_s={self.probe_quiet_s} must be >= 0 (0: off)")
        if not 0 <= self.max_token_debt_s < float("inf"):
            raise ConfigError(f"max_token_debt_s={self.max_token_debt_s} must be >= 0 (0: off)")
        if not 0 <= self.prepare_ahead_s < float("inf"):
            raise ConfigError(f"prepare_ahead_s={self.prepare_ahead_s} must be >= 0 (0: off)")
        if not 0 <= self.start_rt_prio <= 99:
            raise ConfigError(f"start_rt_prio={self.start_rt_prio} must be in 1..99 (0: off)")
        if not 0 <= self.start_rt_lead_s < float("inf"):
            raise ConfigError(f"start_rt_lead_s={self.start_rt_lead_s} must be >= 0")
        if not 0 <= self.probe_max_pps < float("inf"):
            raise ConfigError(f"probe_max_pps={self.probe_max_pps} must be >= 0 (0: no cap)")
        for name in ("probe_interval_s", "rto_s", "rto_max_s", "trace_interval_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0")
