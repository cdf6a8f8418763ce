"""One sending flow: go-back-N transport state and its reaction to replies.

Pure logic (no sockets, no clock): :class:`p4cc.hostcc.sender.Sender` feeds it the
time and datagrams, tests feed it crafted ones.  The flow reports to a
:class:`RateController` (the protocol of ``p4cc.hostcc.cc``) and sends at that rate.

Go-back-N as RoCE RC does it: a NAK (PSN sequence error) carries the receiver's next
expected PSN; the sender acknowledges everything before it and rewinds to it.  When
everything has been sent and no ACK arrives for one RTO the sender rewinds to the
oldest unacknowledged PSN (this also recovers a lost tail or a lost final ACK); the
first retransmitted packet asks for an ACK (AckReq), so a receiver that already has it
answers at once with its ePSN (and ``COMPLETE``) and the sender skips ahead.

RTO = min(max(2·srtt, ``rto_s``) · 2^k, ``rto_max_s``): srtt is the smoothed RTT of
probe replies and of ACKs of first transmissions (Karn's rule; RFC 6298 gains 1/8),
k the timeouts in a row without progress (bounded exponential backoff, reset by any
ACK that advances).  A fixed RTO below the RTT of a full queue (40 ms vs ~80 ms for
100 packets at 1250 pps) fired on every small flow and resent it over and over: on
BMv2 one-packet flows took ~4 s and fewer than 2/3 of a workload's flows completed.

RTT samples for the controller come from probe replies and from the ACKs of first
transmissions that asked for one (Karn's rule): every ``ack_every``-th packet asks, and
with ``ack_interval_s`` also the first new packet sent that long after the previous
AckReq, so an RTT-driven controller (RL-CC) gets about one sample per interval without
extra packets (on BMv2 a probe costs a data packet's slot in the packets/s queue, so
probes alone gave one sample per 64 ms).  With HTB pacing a datagram waits in the
flow's host queue before it leaves, so the controller's sample starts when the packet
left the host (:meth:`Flow.departed`, from the kernel's software TX timestamp) and is
the network RTT, not the host queue delay (which grows as a flow slows down: a slow
flow would see a larger RTT and slow down further; an estimate of the departure from
the queued bytes and the rate was off by a frame-time, 80 ms at 100 kb/s, on BMv2).
A timed packet whose departure is unknown gives srtt a sample (from the socket) but not
the controller.

After a NAK's rewind, an RTT-driven flow (one with ``ack_interval_s``: RL-CC) that has
not yet given its controller a sample also times its first resend, with an AckReq, for
the controller.  On a FIFO path that sample is not ambiguous: the NAK means a later
packet reached the receiver before ePSN did, so ePSN's original copy was lost; the
originals sent after it arrive before the resend and are discarded out of order; so the
only copy of ePSN the receiver can acknowledge is the resend.  Without it, a flow that
started into a full buffer never got a sample (every ACK it could time was lost or
rewound), and RL-CC's rule does nothing on a NAK before the first sample: on BMv2 such
flows stayed at line rate with hundreds of NAKs and held the bottleneck's buffer full
for 30 s (docs/emulation.md, "Session 42").  Timing every first resend, also of flows
that had samples, made RL-CC's flows less fair on the seeds that had no such flow (Jain
0.45-0.81 against 0.82-0.99), so it is only the first sample's fallback.  srtt, and so
the RTO, keeps Karn's rule: only first transmissions and probes feed it.  A timeout's
rewind is not timed, because there the originals may only have been late.

The RTO clock starts when the last packet left the host, as a RoCE NIC arms its
retransmission timer when it transmits (its rate limiter holds packets before that):
at the later of the last ACK progress and the last packet's departure
(:meth:`Flow.timeout_at`).  That packet is always timed, so its software TX timestamp
says when it left; while it waits in the flow's HTB class no timeout fires.  Counting
from the hand-off to HTB instead (before 2026-11-28) fired spuriously on every mouse
DCQCN had throttled: its last 3-4 packets took longer than the 80 ms RTO floor to
leave the host (docs/emulation.md, "what the slowest mice share").  If the timestamp
never comes (the qdisc dropped the packet, the socket refused timestamps) the hand-off
time stands in after ``rto_max_s``.  srtt, from which the RTO is made, is measured the
same way: from the departure to the ACK where the departure is known (RFC 6298 times a
segment from its transmission), from the socket where it is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from p4cc.errors import ConfigError
from p4cc.hostcc import wire
from p4cc.hostcc.cc import RateController  # what a flow needs from a CC core


@dataclass(frozen=True)
class FlowSpec:
    """One flow to send: destination, payload bytes, start time (s after the sender's
    start), CC name for ``make_controller`` ("dcqcn", "rlcc", "fixed:<bps>")."""

    dst: str
    size: int
    start_s: float = 0.0
    cc: str = "dcqcn"
    port: int = field(default=wire.ROCE_PORT, metadata={"help": "receiver UDP port"})
    ref: int = field(default=-1, metadata={"help": "the schedule's id of the flow (-1: none)"})
    after: int = field(
        default=-1, metadata={"help": "start when the flow with this ref completes "
                              "(p4cc.hostcc.chain; -1: at start_s)"})
    stop_s: float = field(default=math.inf, metadata={"help": "never start after this"})

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ConfigError(f"flow size must be >= 1 byte, got {self.size}")
        if self.start_s < 0 or not math.isfinite(self.start_s):
            raise ConfigError(f"flow start time must be >= 0 s, got {self.start_s}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) \
                or not 1 <= self.port <= 65535:
            raise ConfigError(f"flow receiver port must be in 1..65535, got {self.port!r}")


class Flow:
    """Transport state of one flow (sequence numbers are unwrapped ints)."""

    def __init__(self, flow_id: int, spec: FlowSpec, ctl: RateController, pkt_bytes: int,
                 rto_s: float, ack_every: int = 16, rto_max_s: float | None = None,
                 srtt_s: float | None = None, rtt_window: int = 1,
                 ack_interval_s: float | None = None, pad: bool = False) -> None:
        self.id = flow_id
        #: pad a short last packet to the full size (SenderConfig.pad_data)
        self.pad = pad
        self.spec = spec
        self.ctl = ctl
        self.payload = pkt_bytes - wire.data_overhead()
        if self.payload < 1:
            raise ConfigError(f"packet size {pkt_bytes} B leaves no room for payload; use "
                              f"more than {wire.data_overhead()} B")
        self.npkts = -(-spec.size // self.payload)
        if self.npkts >= 1 << 23:
            raise ConfigError(f"flow of {spec.size} B needs {self.npkts} packets; the 24-bit "
                              "PSN allows < 2^23 in flight, split the flow or raise pkt_bytes")
        self.rto_s = rto_s  # the RTO floor
        self.rto_max_s = max(rto_s, rto_max_s if rto_max_s is not None else 16 * rto_s)
        self.srtt_s = srtt_s  # seeded from earlier flows of the host to the same dst
        self.backoff = 0
        self._ackreq_next = False
        # psn -> (time on the socket, departure from the host or None) of timed packets
        self._timed: dict[int, tuple[float, float | None]] = {}
        self.last_departed_t = -math.inf  # the latest TX timestamp of this flow's packets
        # (psn, hand-off time) of the latest timed packet still waiting in the host queue
        self._waiting: tuple[int, float] | None = None
        self.ack_interval_s = ack_interval_s if ack_interval_s and ack_interval_s > 0 else None
        self._last_ackreq_t = -math.inf
        self._ackreq_seq = -1  # the PSN next_datagram last built with AckReq set
        self.ack_rtt_samples = 0
        self._rewind: tuple[int, float] = (-1, -math.inf)  # last NAK rewind (psn, t)
        # the go-back-N resend to time after a NAK rewind (RTT-driven flows; -1: none),
        # and the timed one awaiting its ACK (its sample goes to the controller only)
        self._resend_psn = -1
        self._resend_timed = -1
        self.resend_rtt_samples = 0
        self.stale_nacks = 0
        self.ack_every = max(1, ack_every)
        self.snd_una = 0
        self.snd_nxt = 0
        self.max_sent = 0
        self.done = False
        self.start_t: float | None = None
        self.end_t: float | None = None
        self.last_progress_t = 0.0
        self.bytes_sent = 0
        self.retx_bytes = 0
        self.nacks = 0
        self.cnps = 0
        self.timeouts = 0
        self.probes = 0
        self.rtt_s: float | None = None  # latest RTT sample, probe or ACK (raw)
        self.rtt_window = max(1, rtt_window)
        self._rtts: list[float] = []
        self.rtt_ctl_s: float | None = None  # what the controller gets (see rtt_window)
        self.max_qdepth: int | None = None
        self.rx_bytes = 0
        self.bad_replies = 0
        self.unknown_cnps = 0
        self._zeros = bytes(self.payload)

    # -- sending -----------------------------------------------------------------------
    def has_data(self) -> bool:
        return not self.done and self.snd_nxt < self.npkts

    def next_datagram(self, t: float) -> bytes:
        """The datagram for ``snd_nxt``; call :meth:`sent` once it is on the socket."""
        seq = self.snd_nxt
        last = seq == self.npkts - 1
        plen = self.spec.size - seq * self.payload if last else self.payload
        ackreq = (seq + 1) % self.ack_every == 0 or last or self._ackreq_next or (
            self.ack_interval_s is not None and seq >= self.max_sent
            and t - self._last_ackreq_t >= self.ack_interval_s) or seq == self._resend_psn
        self._ackreq_seq = seq if ackreq else -1
        body = self._zeros[:self.payload if self.pad else plen]
        return wire.encode_data(self.id, seq, self.spec.size, body, last=last,
                                ackreq=ackreq, retx=seq < self.max_sent)

    def times_next(self) -> bool:
        """Whether the datagram :meth:`next_datagram` just built is timed for an RTT
        sample (a first transmission asking for an ACK): its departure time is wanted."""
        seq = self.snd_nxt
        if seq == self._resend_psn:  # the first resend after a NAK (see _on_ack)
            return self._ackreq_seq == seq
        return seq >= self.max_sent and len(self._timed) < 256 and (
            self._ackreq_seq == seq or (seq + 1) % self.ack_every == 0
            or seq == self.npkts - 1)

    def sent(self, t: float, datagram_len: int, departs_now: bool = True,
             stamped: bool | None = None) -> None:
        """``datagram_len`` bytes of ``snd_nxt`` went on the socket at ``t``; with
        ``departs_now`` False it waits in a host queue (HTB) and, if it is ``stamped``
        (default: whenever it is timed), :meth:`departed` tells when it left."""
        if self.start_t is None:
            self.start_t = t
            self.last_progress_t = t
        plen = datagram_len - wire.DATA_HDR_LEN - wire.ICRC_LEN
        self._ackreq_next = False
        if departs_now:
            self.last_departed_t = t
        if self.times_next():
            self._last_ackreq_t = t
            self._timed[self.snd_nxt] = (t, t if departs_now else None)
            if not departs_now and (stamped is None or stamped):
                self._waiting = (self.snd_nxt, t)
            if self.snd_nxt == self._resend_psn:
                self._resend_timed, self._resend_psn = self._resend_psn, -1
        if self.snd_nxt < self.max_sent:
            self.retx_bytes += plen
        self._ackreq_seq = -1
        self.bytes_sent += plen
        self.snd_nxt += 1
        self.max_sent = max(self.max_sent, self.snd_nxt)
        if self.snd_nxt == self.npkts:
            self.last_progress_t = max(self.last_progress_t, t)
        self.ctl.on_bytes_sent(t, datagram_len + wire.IP_UDP_LEN)

    def departed(self, psn: int, t: float) -> None:
        """Timed packet ``psn`` (unwrapped) left the host at ``t`` (TX timestamp)."""
        self.last_departed_t = max(self.last_departed_t, t)
        if self._waiting is not None and psn >= self._waiting[0]:
            self._waiting = None
        timed = self._timed.get(psn)
        if timed is not None:
            self._timed[psn] = (timed[0], max(t, timed[0]))

    def rto(self) -> float:
        """The current timeout: min(max(2·srtt, floor)·2^backoff, cap)."""
        base = max(2.0 * self.srtt_s, self.rto_s) if self.srtt_s is not None else self.rto_s
        return min(base * (1 << min(self.backoff, 16)), self.rto_max_s)

    def rtt_sample(self, rtt_s: float) -> None:
        """Fold one RTT sample into srtt (RFC 6298 §2: gain 1/8)."""
        self.srtt_s = rtt_s if self.srtt_s is None else 0.875 * self.srtt_s + 0.125 * rtt_s

    def timeout_at(self) -> float:
        """When the RTO fires if nothing comes: one RTO after the later of the last ACK
        progress and the last departure from the host.  While the latest timed packet
        still waits in the host queue, not before it leaves, or (its TX timestamp lost)
        ``rto_max_s`` after its hand-off."""
        start = max(self.last_progress_t, self.last_departed_t)
        if self._waiting is not None:
            start = max(start, self._waiting[1] + self.rto_max_s)
        return start + self.rto()

    def check_timeout(self, t: float) -> bool:
        """Rewind to ``snd_una`` when all is sent and nothing was acked for one RTO
        after the last packet left the host (:meth:`timeout_at`)."""
        if self.done or self.start_t is None or self.snd_nxt < self.npkts:
            return False
        if t < self.timeout_at():
            return False
        self.timeouts += 1
        self.backoff += 1
        self.snd_nxt = self.snd_una
        self._ackreq_next = True  # the receiver answers with its ePSN at once
        self._timed = {}  # Karn: no RTT from retransmitted data
        self.last_progress_t = t
        return True

    # -- replies -----------------------------------------------------------------------
    def _unwrap(self, psn: int) -> int:
        return self.snd_una + ((psn - self.snd_una) & wire.PSN_MASK)

    def on_datagram(self, buf: bytes, t: float, now_ns: int) -> None:
        """Handle one reply (ACK/NAK, CNP, probe reply); malformed ones are counted."""
        try:
            bth = wire.decode_bth(buf)
            if bth.opcode == wire.OP_CNP:
                wire.check_cnp(buf)
                if bth.qpn != self.id:
                    self.unknown_cnps += 1
                    return
                self.cnps += 1
                self.ctl.on_cnp(t)
            elif bth.qpn != self.id:
                self.bad_replies += 1
            elif bth.opcode == wire.OP_ACK:
                self._on_ack(bth, wire.decode_ack(buf), t)
            elif bth.opcode == wire.OP_PROBE_REPLY:
                p = wire.decode_probe(buf)
                rtt = (now_ns - p.t_send_ns) / 1e9
                if rtt < 0:
                    raise wire.WireError("probe reply from the future")
                self.rtt_sample(rtt)
                self.max_qdepth = p.max_qdepth
                self._ctl_rtt(t, rtt, p.max_qdepth)
            else:
                self.bad_replies += 1
        except wire.WireError:
            self.bad_replies += 1

    def _ctl_rtt(self, t: float, rtt: float, qdepth: int | None) -> None:
        """Hand one RTT sample to the controller (the median of the last rtt_window)."""
        self.rtt_s = rtt
        self._rtts = [*self._rtts, rtt][-self.rtt_window:]
        self.rtt_ctl_s = sorted(self._rtts)[(len(self._rtts) - 1) // 2]
        self.ctl.on_rtt_sample(t, self.rtt_ctl_s, qdepth)

    def _on_ack(self, bth: wire.Bth, ack: wire.Ack, t: float) -> None:
        epsn = self._unwrap(bth.psn)
        if epsn > self.max_sent:  # acknowledges something never sent: ignore
            self.bad_replies += 1
            return
        if ack.max_qdepth is not None:
            self.max_qdepth = ack.max_qdepth
        self.rx_bytes = max(self.rx_bytes, ack.rx_bytes)
        if epsn > self.snd_una:
            self.snd_una = epsn
            self.last_progress_t = t
            self.backoff = 0
            timed = self._timed.pop(epsn - 1, None)  # the ACK of that very packet
            for psn in [p for p in self._timed if p < epsn]:
                del self._timed[psn]  # acked by a later ACK: no clean sample
            resend = epsn - 1 == self._resend_timed
            if epsn > self._resend_timed:
                self._resend_timed = -1
            if epsn > self._resend_psn:  # acknowledged before it was resent
                self._resend_psn = -1
            if timed is not None and not ack.nak:
                if not resend:  # srtt (the RTO) keeps Karn's rule
                    self.rtt_sample(t - (timed[0] if timed[1] is None else timed[1]))
                if timed[1] is not None:
                    self.ack_rtt_samples += 1
                    self.resend_rtt_samples += resend
                    self._ctl_rtt(t, max(t - timed[1], 0.0), ack.max_qdepth)
            if self.snd_nxt < epsn:  # the receiver already has these: skip ahead
                self.snd_nxt = epsn
        if ack.nak:
            self.nacks += 1
            self.ctl.on_nack(t)
            # A repeat of the NAK we already rewound to, less than an RTT after that
            # rewind, was triggered by packets sent before it: rewinding again would
            # resend the same packets once more.
            psn, t_rw = self._rewind
            guard = self.srtt_s if self.srtt_s is not None else self.rto_s
            if epsn == psn and t - t_rw < guard:
                self.stale_nacks += 1
            elif epsn < self.snd_nxt:
                self.snd_nxt = epsn  # go back N
                self._rewind = (epsn, t)
                self._timed = {}
                if self.ack_interval_s is not None and self.rtt_ctl_s is None:
                    self._resend_psn = epsn  # time the first resend (see the docstring)
            self.last_progress_t = t
        if ack.complete and self.snd_una >= self.npkts and not self.done:
            self.done = True
            self.end_t = t

    # -- records -----------------------------------------------------------------------
    def record(self, sport: int, t0_epoch: float) -> dict[str, Any]:
        start = self.start_t
        end = self.end_t
        return {
            "flow_id": self.id, "dst": self.spec.dst, "sport": sport, "cc": self.spec.cc,
            "size": self.spec.size, "sched_start_s": self.spec.start_s,
            "start_s": start, "end_s": end,
            "fct_s": (end - start) if (start is not None and end is not None) else None,
            "start_epoch": None if start is None else t0_epoch + start,
            "completed": self.done, "bytes_sent": self.bytes_sent,
            "retx_bytes": self.retx_bytes, "nacks": self.nacks, "cnps": self.cnps,
            "timeouts": self.timeouts, "probes": self.probes,
            "srtt_s": self.srtt_s, "stale_nacks": self.stale_nacks,
            "ack_rtt_samples": self.ack_rtt_samples,
            "resend_rtt_samples": self.resend_rtt_samples, "bad_replies": self.bad_replies,
            "unknown_cnps": self.unknown_cnps,
        }
