"""How a flow's packets leave the host (a mixin of p4cc.hostcc.sender.Sender).

Three paths: HTB paces the flow (``_send_paced``: a few ms of packets kept in its
class); the flow is slower than the pacer's floor (``_send_user`` with ``queued``: the
sender's own schedule, one packet at a time through the class; p4cc.hostcc.pacing says
why); no device at all (``_send_user``: the schedule alone).
"""

from __future__ import annotations

import fcntl
import socket
import struct

from p4cc.hostcc import wire
from p4cc.hostcc.flow import Flow
from p4cc.hostcc.pacing import HtbPacer
from p4cc.hostcc.rtt_samples import TX_STAMP, TxStamps
from p4cc.hostcc.sender_config import SenderConfig

SIOCOUTQ = 0x5411  # bytes held by an unsent/untransmitted socket queue (linux/sockios.h)


class SendPaths:
    """The send methods of a Sender; it provides these attributes."""

    cfg: SenderConfig
    icmp_errors: int
    _stamps: TxStamps
    _pacer: HtbPacer | None
    _backlogged: int  # flows with data that HTB paces, counted each pass

    def _send(self, sock: socket.socket, buf: bytes,
              cmsg: list[tuple[int, int, bytes]] | None = None) -> bool:
        try:
            if cmsg:
                sock.sendmsg([buf], cmsg)
            else:
                sock.send(buf)
            return True
        except BlockingIOError:
            return False
        except ConnectionRefusedError:
            self.icmp_errors += 1
            return False

    def _send_probe(self, sock: socket.socket, buf: bytes) -> bool:
        """An RTT probe: through the pacer's control class, past the flow's queued data
        (HtbPacer.control)."""
        if self._pacer is None:
            return self._send(sock, buf)
        with self._pacer.control(sock):
            return self._send(sock, buf)

    def _refill_wait(self, rate: float) -> float:
        """How long a flow whose HTB class is full waits for room: half a packet time at
        the rate the class drains, within 0.2-5 ms.  That rate is the flow's own, or less
        when the flows with data share the host's NIC (the pacer's link class): about the
        NIC's rate divided among them.  (Waking at the flow's own rate while 16 flows
        shared a NIC made the sender pass over every flow once per packet time of the NIC
        -- ~0.4 CPU-s/s per host in a storage run (docs/hostcc.md).)"""
        drain = rate
        link = self._pacer.cfg.link_rate_bps if self._pacer is not None else None
        if link is not None and self._backlogged > 1:
            drain = min(rate, link / self._backlogged)
        gap = (self.cfg.pkt_bytes + wire.ETH_LEN) * 8.0 / drain
        return min(max(gap / 2, 2e-4), 5e-3)

    def _send_paced(self, flow: Flow, sock: socket.socket, t: float, rate: float) -> bool:
        """Keep a few ms of packets queued in the flow's HTB class; False when full."""
        cfg = self.cfg
        # skb truesize is ~2.3x a 1000-B datagram; 2.5x errs on the generous side
        pkts = rate * cfg.host_queue_s / (8.0 * cfg.pkt_bytes)
        limit = max(cfg.host_queue_bytes, int(2.5 * cfg.pkt_bytes * pkts))
        for _ in range(64):
            if not flow.has_data():
                return True
            if self._outq(sock) >= limit:
                return False
            if not self._send_queued(flow, sock, t):
                return False
        return True

    @staticmethod
    def _outq(sock: socket.socket) -> int:
        """Bytes (skb truesize) of this socket still in the host's queues (SIOCOUTQ)."""
        out: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), SIOCOUTQ, b"\0\0\0\0"))[0]
        return out

    def _send_queued(self, flow: Flow, sock: socket.socket, t: float) -> int:
        """Hand the flow's next datagram to its HTB class; its length (0: not sent).  A
        timed packet (an RTT sample) asks the kernel for its software TX timestamp,
        taken when it leaves the qdisc for the device (:class:`TxStamps`)."""
        buf = flow.next_datagram(t)
        stamp = flow.times_next() and self._stamps.on(flow.id)
        if not self._send(sock, buf, TX_STAMP if stamp else None):
            return 0
        if stamp:
            self._stamps.sent(flow.id, flow.snd_nxt)
        flow.sent(t, len(buf), departs_now=False, stamped=stamp)
        return len(buf)

    def _send_user(self, flow: Flow, sock: socket.socket, st: dict[str, float], rate: float,
                   t: float, queued: bool = False) -> float:
        """Userspace pacing: send what is due, return when the next packet is.  A rate
        increase shortens the wait already scheduled (at RL-CC's floor, 400 b/s on the
        testbed, the gap between packets is 20 s: the flow would sit it out).  With
        ``queued`` the packets go through the flow's HTB class (a rate below the pacer's
        floor), one at a time."""
        paced = st.get("user_bps", rate)
        if rate > paced and st["next_send"] > t:
            st["next_send"] = t + (st["next_send"] - t) * paced / rate
        st["user_bps"] = rate
        for _ in range(64):
            if not flow.has_data() or t < st["next_send"]:
                break
            if queued:
                if self._outq(sock) >= self.cfg.host_queue_bytes:
                    return t + 2e-3  # the class still holds earlier packets
                size = self._send_queued(flow, sock, t)
                if not size:
                    break
            else:
                buf = flow.next_datagram(t)
                if not self._send(sock, buf):
                    break
                flow.sent(t, len(buf))
                size = len(buf)
            gap = (size + wire.IP_UDP_LEN + wire.ETH_LEN) * 8.0 / rate
            st["next_send"] = max(st["next_send"] + gap, t - 2 * gap)
        return st["next_send"] if flow.has_data() else t + 0.005
