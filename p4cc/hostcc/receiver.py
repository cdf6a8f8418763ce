"""Receiver: the DCQCN notification point and go-back-N responder.

:class:`ReceiverCore` is the pure state machine (datagram in, replies out), tested
in-process; :class:`Receiver` runs it on a UDP socket bound to port 4791 and reads each
datagram's TOS byte with ``IP_RECVTOS`` (ancillary data of ``recvmsg``), so ECN and the
INT-summary DSCP come from the socket API, not from sniffing.

Per flow (sender address, sender port, dest QP):
* in-order data advances the expected PSN (ePSN); an ACK goes back when the sender set
  AckReq and when the flow is complete (``COMPLETE`` flag, which ends the flow);
* a PSN beyond ePSN is dropped and answered with a NAK carrying ePSN (RoCE go-back-N:
  the sender rewinds to ePSN): at once for a new ePSN, then repeated for the same ePSN
  after ``nack_interval_s``·2^k (k = repeats so far, capped at ``nack_max_interval_s``).
  Everything in flight behind a drop arrives out of order; with a fixed 2 ms repeat and
  an 80 ms RTT (a full BMv2 queue) each drop drew ~40 NAKs, which cost reverse-path
  packet slots and made the sender rewind again and again (on BMv2, 68 % of the bytes
  a workload sent were retransmissions);
* a CE-marked packet triggers a CNP unless one went to the flow less than
  ``cnp_interval_s`` ago (DCQCN NP; 50 µs in the paper's code, REFERENCE §2, scaled by
  ``Scale.time``);
* a probe is answered at once, echoing its timestamp plus the INT max queue depth.
"""

from __future__ import annotations

import logging
import random
import select
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from p4cc.constants import ECN_CE, ECN_MASK
from p4cc.errors import ConfigError
from p4cc.hostcc import wire
from p4cc.hostcc.rx_state import RxCounters, RxFlow
from p4cc.scale import Scale

log = logging.getLogger(__name__)

IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
IP_TOS = getattr(socket, "IP_TOS", 1)
#: DCQCN NP minimum time between CNPs per flow (REFERENCE §2): 50 µs in the DCQCN
#: paper's code; 4 µs is NVIDIA's MIN_TIME_BETWEEN_CNPS, the interval that goes with the
#: hpcc-ns3 RP timers (α 1 µs, decrease check 4 µs).  p4cc uses NVIDIA's by default: with
#: 50 µs, α decays between CNPs and a 4->1 incast queue sits above Kmax (simulator,
#: testbed scale, VENDOR setting: 66 kB and drops vs 13.6 kB inside the 3-27 kB band).
PAPER_CNP_INTERVAL_S = 50e-6
NVIDIA_CNP_INTERVAL_S = 4e-6
DEFAULT_CNP_INTERVAL_S = NVIDIA_CNP_INTERVAL_S

Addr = tuple[str, int]


@dataclass(frozen=True)
class ReceiverConfig:
    """How a receiver answers (times in seconds)."""

    port: int = field(default=wire.ROCE_PORT, metadata={"help": "UDP port to listen on"})
    bind: str = field(default="0.0.0.0", metadata={"help": "address to bind"})
    cnp_interval_s: float = field(
        default=Scale().time(DEFAULT_CNP_INTERVAL_S),
        metadata={"help": "min time between CNPs per flow (NVIDIA 4 µs × Scale.time)"},
    )
    nack_interval_s: float = field(
        default=Scale().base_rtt_s, metadata={"help": "min time between NAKs per flow (~RTT)"}
    )
    nack_max_interval_s: float = field(
        default=64 * Scale().base_rtt_s,
        metadata={"help": "cap of the doubling repeat interval of NAKs for one ePSN"})
    drop_prob: float = field(
        default=0.0, metadata={"help": "TEST OPTION: drop this fraction of data packets"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the injected-loss generator"})
    rcvbuf: int = field(default=4 << 20, metadata={"help": "SO_RCVBUF bytes"})
    # Bounded state under bad input (docs/hostcc.md "Bounded state"): at most max_flows
    # flows; silent ones expire after flow_idle_s (records of those with data kept, up
    # to max_records); only a packet that could start a flow creates one: PSN below
    # max_new_psn (a lost PSN 0 still gets its NAK), 0 < QPN <= max_qpn (senders number
    # flows 1..n), 0 < message <= max_msg_bytes (WebSearch's largest is 30 MB)
    max_flows: int = 4096
    flow_idle_s: float = 30.0
    max_msg_bytes: int = 1 << 30
    max_new_psn: int = 4096
    max_qpn: int = 1 << 20
    max_records: int = 200_000

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ConfigError(
                f"receiver port must be in 0..65535 (0: any free port), got {self.port}")
        if self.cnp_interval_s < 0 or self.nack_interval_s < 0:
            raise ConfigError("cnp_interval_s and nack_interval_s must be >= 0")
        if not 0.0 <= self.drop_prob < 1.0:
            raise ConfigError(f"drop_prob must be in [0, 1), got {self.drop_prob}")
        if self.max_flows < 1 or self.flow_idle_s <= 0 or self.max_msg_bytes < 1:
            raise ConfigError("max_flows and max_msg_bytes must be >= 1, flow_idle_s > 0")


class ReceiverCore:
    """The receiver's state machine; ``handle`` returns the replies to send."""

    def __init__(self, cfg: ReceiverConfig) -> None:
        self.cfg = cfg
        self.flows: dict[tuple[str, int, int], RxFlow] = {}
        self.expired: list[dict[str, Any]] = []  # records of expired flows with data
        self.counters = RxCounters()
        self._rng = random.Random(cfg.seed)
        self._next_expiry = 0.0

    def handle(self, buf: bytes, tos: int, addr: Addr, now: float) -> list[bytes]:
        """Process one datagram (UDP payload) with its IP TOS byte; never raises."""
        self.counters.datagrams += 1
        if now >= self._next_expiry:
            self.expire(now)
        try:
            return self._handle(buf, tos, addr, now)
        except wire.WireError as exc:
            self.counters.malformed += 1
            log.debug("drop from %s: %s", addr, exc)
            return []

    def _handle(self, buf: bytes, tos: int, addr: Addr, now: float) -> list[bytes]:
        qdepth: int | None = None
        view: bytes | memoryview = buf
        if (tos >> 2) == wire.DSCP_INT_SUMMARY:
            summary, view = wire.strip_int_summary(buf)
            qdepth = summary.max_qdepth
        bth = wire.decode_bth(view)
        if bth.opcode == wire.OP_DATA:
            return self._data(view, bth, tos, addr, now, qdepth)
        if bth.opcode == wire.OP_PROBE:
            probe = wire.decode_probe(view)
            flow = self.flows.get((addr[0], addr[1], bth.qpn))
            if flow is not None:
                flow.probes += 1
                if qdepth is not None:
                    flow.max_qdepth = qdepth
                q = flow.max_qdepth if qdepth is None else qdepth
            else:
                q = qdepth
            return [
                wire.encode_probe(
                    bth.qpn, probe.seq, probe.t_send_ns, reply=True,
                    t_recv_ns=time.time_ns(), max_qdepth=q,
                )
            ]
        self.counters.unknown_opcode += 1
        return []

    def _data(
        self, view: bytes | memoryview, bth: wire.Bth, tos: int, addr: Addr, now: float,
        qdepth: int | None,
    ) -> list[bytes]:
        _flags, msg_len, plen = wire.decode_data(view)
        key = (addr[0], addr[1], bth.qpn)
        flow = self.flows.get(key)
        if flow is None:
            flow = self._new_flow(key, bth, msg_len, now)
            if flow is None:
                return []
        elif msg_len != flow.msg_len and flow.msg_len >= 0:
            self.counters.malformed += 1  # a flow's message length never changes
            return []
        if self.cfg.drop_prob and self._rng.random() < self.cfg.drop_prob:
            flow.injected_drops += 1
            return []
        out: list[bytes] = []
        flow.last_t = now
        flow.msg_len = msg_len
        if qdepth is not None:
            flow.max_qdepth = qdepth
        self.counters.data_bytes += plen
        if (tos & ECN_MASK) == ECN_CE:
            flow.ce_pkts += 1
            if now - flow.last_cnp_t >= self.cfg.cnp_interval_s:
                flow.last_cnp_t = now
                flow.cnps += 1
                self.counters.cnps_sent += 1
                out.append(wire.encode_cnp(bth.qpn))
        epsn = flow.epsn & wire.PSN_MASK
        if bth.psn == epsn and flow.complete_t is None:
            flow.epsn += 1
            flow.rx_pkts += 1
            flow.rx_bytes = min(flow.rx_bytes + plen, msg_len)  # not a padded tail
            done = flow.rx_bytes >= msg_len
            if done:
                flow.complete_t = now
            if bth.ackreq or done:
                out.append(self._ack(flow, complete=done))
        elif flow.complete_t is None and ((bth.psn - epsn) & wire.PSN_MASK) < (1 << 23):
            # ahead of ePSN: a gap. NAK at once for a new ePSN; repeats back off.
            flow.ooo_pkts += 1
            repeat = min(self.cfg.nack_interval_s * (1 << min(flow.nack_repeats, 30)),
                         max(self.cfg.nack_max_interval_s, self.cfg.nack_interval_s))
            if flow.nack_epsn != flow.epsn:
                flow.nack_repeats = 0
            elif now - flow.last_nack_t >= repeat:
                flow.nack_repeats += 1
            if flow.nack_epsn != flow.epsn or now - flow.last_nack_t >= repeat:
                flow.nack_epsn = flow.epsn
                flow.last_nack_t = now
                flow.nacks += 1
                out.append(self._ack(flow, nak=True))
        else:
            flow.dup_pkts += 1
            if bth.ackreq or flow.complete_t is not None:
                out.append(self._ack(flow, complete=flow.complete_t is not None))
        return out

    def _new_flow(self, key: tuple[str, int, int], bth: wire.Bth, msg_len: int,
                  now: float) -> RxFlow | None:
        """State for a flow this packet names, or None (counted) if it is implausible
        or there is no room: garbage must not grow the receiver or draw NAKs."""
        cfg = self.cfg
        if not (bth.psn < cfg.max_new_psn and 0 < bth.qpn <= cfg.max_qpn
                and 0 < msg_len <= cfg.max_msg_bytes):
            self.counters.refused_new += 1
            return None
        if len(self.flows) >= cfg.max_flows:
            self.expire(now, force=True)
            if len(self.flows) >= cfg.max_flows:
                self.counters.refused_full += 1
                return None
        flow = self.flows[key] = RxFlow(key[0], key[1], key[2], first_t=now)
        return flow

    def expire(self, now: float, force: bool = False) -> int:
        """Drop the state of flows idle for ``flow_idle_s`` (at most once a second
        unless ``force``); returns how many."""
        if not force and now < self._next_expiry:
            return 0
        self._next_expiry = now + 1.0
        idle = [k for k, f in self.flows.items()
                if now - max(f.last_t, f.first_t) >= self.cfg.flow_idle_s]
        for k in idle:
            f = self.flows.pop(k)
            self.counters.expired += 1
            if f.rx_bytes > 0:
                if len(self.expired) < self.cfg.max_records:
                    self.expired.append(f.record())
                else:
                    self.counters.records_dropped += 1
        return len(idle)

    def _ack(self, flow: RxFlow, *, nak: bool = False, complete: bool = False) -> bytes:
        flow.acks += 0 if nak else 1
        return wire.encode_ack(
            flow.qpn, flow.epsn, nak=nak, msn=1 if complete else 0, complete=complete,
            max_qdepth=flow.max_qdepth, rx_bytes=flow.rx_bytes,
        )

    def records(self) -> list[dict[str, Any]]:
        return self.expired + [f.record() for f in self.flows.values()]


def open_rx_socket(cfg: ReceiverConfig) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, cfg.rcvbuf)
    sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
    # what it sends are control packets (ACK, NAK, CNP, probe reply): DSCP 48, the
    # switches' control queue (p4src/include/forwarding.p4)
    sock.setsockopt(socket.IPPROTO_IP, IP_TOS, wire.TOS_CONTROL)
    try:
        sock.bind((cfg.bind, cfg.port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot bind UDP {cfg.bind}:{cfg.port} ({exc}); stop the other receiver or "
            "choose another --port"
        ) from exc
    sock.setblocking(False)
    return sock


def tos_from_ancillary(ancdata: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind in (IP_TOS, IP_RECVTOS) and data:
            return data[0]
    return 0


class Receiver:
    """A receiver on its own socket; ``stop()`` returns the flow records.

    ``start`` runs it in a thread of its own; ``open`` only binds the socket, for a
    caller's event loop that selects on ``sock`` and calls ``drain`` when it is readable
    (p4cc.hostcc.hostloop: a host's sender and receiver on one thread)."""

    def __init__(self, cfg: ReceiverConfig | None = None, netns: str | None = None) -> None:
        cfg = cfg or ReceiverConfig()
        self.cfg = cfg
        self.netns = netns
        self.core = ReceiverCore(cfg)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="p4cc-recv", daemon=True)
        self.sock: socket.socket | None = None

    def start(self, timeout_s: float = 5.0) -> Receiver:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise ConfigError("receiver thread did not start within the timeout")
        if self._error is not None:
            raise self._error
        return self

    def open(self) -> Receiver:
        """Bind the socket in the calling thread (entering ``netns`` first); no thread."""
        if self.netns:
            from p4cc.hostcc.pacing_config import enter_netns

            enter_netns(self.netns)
        self.sock = open_rx_socket(self.cfg)
        return self

    @property
    def threaded(self) -> bool:
        """Started with ``start`` (its own thread serves the socket)."""
        return self._thread.ident is not None

    def drain(self) -> None:
        """Handle what the socket holds (at most 256 datagrams); for ``open``'s loops."""
        if self.sock is not None:
            self._drain(self.sock)

    def _run(self) -> None:
        try:
            self.open()
        except BaseException as exc:  # handed to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        sock = self.sock
        assert sock is not None
        try:
            while not self._stop.is_set():
                r, _, _ = select.select([sock], [], [], 0.05)
                if r:
                    self._drain(sock)
        finally:
            sock.close()

    def _drain(self, sock: socket.socket) -> None:
        for _ in range(256):
            try:
                buf, anc, _flags, addr = sock.recvmsg(65535, 64)
            except BlockingIOError:
                return
            now = time.monotonic()
            with self.lock:
                replies = self.core.handle(buf, tos_from_ancillary(anc), addr, now)
            for reply in replies:
                try:
                    sock.sendto(reply, addr)
                except OSError:
                    self.core.counters.send_errors += 1

    def stop(self, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        elif self._thread.ident is None and self.sock is not None:
            self.sock.close()  # opened with open(): no thread closes it
        return self.records()

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.core.records()

    def counters(self) -> dict[str, int]:
        with self.lock:
            return asdict(self.core.counters)

    @property
    def port(self) -> int:
        sock = self.sock
        return sock.getsockname()[1] if sock and sock.fileno() >= 0 else self.cfg.port
