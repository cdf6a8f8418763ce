"""Where a sender's RTT samples come from, per flow (used by p4cc.hostcc.sender).

* :class:`TxStamps`: with HTB pacing a datagram waits in the flow's host queue before it
  leaves, so a packet timed for an RTT sample (an ACK sample, p4cc.hostcc.flow) carries
  a request for the kernel's software TX timestamp; the stamps are read off the socket's
  error queue in send order and tell the flow when each timed packet left the host.
  Replies carry their kernel RX time too (:func:`kernel_time`).
* :class:`ProbeSchedule`: when a flow sends an RTT probe.  A probe (64 B) costs a data
  packet's slot in BMv2's packets/s queue, so a flow is probed only while it has no
  recent ACK RTT sample: a probe goes once the flow has had none for ``quiet_s`` (from
  its start, or from its latest one) and then every ``interval_s`` until one comes.  A
  flow whose ACKs stop (stalled, at the rate floor, go-back-N) keeps being probed, so
  its controller keeps getting samples.  ``quiet_s`` 0 probes every ``interval_s``
  whatever the ACKs (the behaviour before).  ``max_pps`` caps the sender's probes in
  all: with n flows each is probed at most every n / max_pps seconds, so a host whose
  flows pile up (overlapping incast bursts, go-back-N-stalled flows) does not fill the
  bottleneck's packet slots with probes (BMv2's ``byte_rate`` check: 12 flows of one
  RL-CC host probing every 128 ms made 12 % of the port's packets 64-B probes).
"""

from __future__ import annotations

import logging
import math
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass

from p4cc.errors import ConfigError
from p4cc.hostcc.flow import Flow

log = logging.getLogger(__name__)

# Software TX timestamps (linux/net_tstamp.h, Documentation/networking/timestamping.rst):
# report software stamps without payload on the socket; generate one per timed packet
SO_TIMESTAMPING = 37
# SOF_TIMESTAMPING_SOFTWARE | OPT_TSONLY | RX_SOFTWARE: replies carry their kernel
# arrival time too, so an RTT sample is kernel TX to kernel RX and leaves out the sender
# loop's own delay in reading the reply (host jitter was most of the RTT noise on BMv2)
_TS_REPORT = (1 << 4) | (1 << 11) | (1 << 3)
#: the ancillary data asking for one packet's TX timestamp (SOF_TIMESTAMPING_TX_SOFTWARE)
TX_STAMP = [(socket.SOL_SOCKET, SO_TIMESTAMPING, struct.pack("i", 1 << 1))]
_MAX_TIMED = 256  # timed packets a flow keeps awaiting their stamp (as Flow.times_next)


def kernel_time(anc: list[tuple[int, int, bytes]], t0: float) -> float | None:
    """The kernel's software timestamp in ``anc`` (seconds after monotonic ``t0``)."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data, 0)  # ts[0]: software
            if sec or nsec:
                offset_ns = time.time_ns() - time.monotonic_ns()
                return (sec * 10**9 + nsec - offset_ns) / 1e9 - t0
    return None


class TxStamps:
    """The PSNs of each flow's timed packets awaiting their TX timestamp."""

    def __init__(self) -> None:
        self._q: dict[int, deque[int]] = {}

    def enable(self, fid: int, sock: socket.socket) -> bool:
        """Ask for timestamps on flow ``fid``'s socket; False (logged) if refused."""
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TS_REPORT)
        except OSError as exc:
            log.warning("no TX timestamps (%s): RTT samples from probes only", exc)
            return False
        self._q[fid] = deque(maxlen=_MAX_TIMED)
        return True

    def on(self, fid: int) -> bool:
        """Whether flow ``fid``'s socket reports timestamps."""
        return fid in self._q

    def sent(self, fid: int, psn: int) -> None:
        """Timed packet ``psn`` of flow ``fid`` went on the socket with :data:`TX_STAMP`."""
        self._q[fid].append(psn)

    def drain(self, flow: Flow, sock: socket.socket, t0: float) -> None:
        """Read the stamps (in send order) off the error queue into ``flow.departed``."""
        q = self._q.get(flow.id)
        if q is None:
            return
        for _ in range(_MAX_TIMED):
            try:
                _d, anc, _fl, _a = sock.recvmsg(1, 512, socket.MSG_ERRQUEUE)
            except OSError:  # (BlockingIOError, InterruptedError: nothing more)
                return
            t_mono = kernel_time(anc, t0)
            if q and t_mono is not None:
                flow.departed(q.popleft(), t_mono)


@dataclass
class _Probing:
    next_t: float  # the interval's clock: no probe before this
    quiet_since: float  # the flow's start or its latest ACK RTT sample
    samples: int  # Flow.ack_rtt_samples when last looked at


class ProbeSchedule:
    """When each flow sends its next RTT probe (see the module docstring)."""

    def __init__(self, interval_s: float, quiet_s: float, max_pps: float = 0.0) -> None:
        if not (interval_s > 0 and quiet_s >= 0 and math.isfinite(quiet_s)):
            raise ConfigError(f"probe interval {interval_s} must be > 0, quiet {quiet_s} >= 0")
        if not (max_pps >= 0 and math.isfinite(max_pps)):
            raise ConfigError(f"probe rate cap {max_pps} must be >= 0 probes/s (0: none)")
        self.interval_s, self.quiet_s, self.max_pps = interval_s, quiet_s, max_pps
        self._flows: dict[int, _Probing] = {}

    def interval(self) -> float:
        """A probed flow's period now: ``interval_s``, or longer so that all flows
        together stay within ``max_pps``."""
        if not self.max_pps:
            return self.interval_s
        return max(self.interval_s, len(self._flows) / self.max_pps)

    def add(self, fid: int, t: float) -> None:
        """Flow ``fid`` started at ``t``."""
        self._flows[fid] = _Probing(t, t, 0)

    def due(self, fid: int, t: float, ack_samples: int) -> bool:
        """Whether flow ``fid`` probes now (then counted as sent), given its ACK RTT
        samples so far (``Flow.ack_rtt_samples``; a new one restarts the quiet time)."""
        p = self._flows[fid]
        if ack_samples != p.samples:
            p.samples, p.quiet_since = ack_samples, t
        if t < self.next_t(fid):
            return False
        p.next_t = t + self.interval()
        return True

    def next_t(self, fid: int) -> float:
        """When flow ``fid`` probes next unless an ACK RTT sample comes first."""
        p = self._flows[fid]
        return max(p.next_t, p.quiet_since + self.quiet_s) if self.quiet_s else p.next_t

    def remove(self, fid: int) -> None:
        self._flows.pop(fid, None)


def default_probe_quiet_s(cc: str) -> float | None:
    """``SenderConfig.probe_quiet_s`` when none is given, by the flows' CC (None: the
    sender's default, probes only for flows without a recent ACK RTT sample).  RL-CC
    decides on the RTT, and with ACK samples alone (fewer for a slower flow, so a slow
    flow decides on older ones) its 4 -> 1 BMv2 incast lost fairness: Jain 0.83-0.89 in
    3 of 5 runs of tests/test_e2e_hostcc.py::test_incast_fair_shares[rlcc] against
    0.90-0.99 with a probe every interval (3 runs): RL-CC senders probe every interval."""
    return 0.0 if cc.partition(":")[0] == "rlcc" else None
