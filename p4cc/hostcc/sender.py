"""Sender: runs flows over UDP sockets, one socket (source port) per flow.

One thread drives every flow: it starts flows at their scheduled time, reads replies,
sends data at the controller's rate and RTT probes every ``probe_interval_s``, and
writes trace rows.  Pacing is either an HTB class per flow (``dev`` set: the qdisc
holds the socket's packets until it transmits them; the sender keeps at most
``host_queue_bytes`` queued per flow, read with ``SIOCOUTQ``, and ``SO_SNDBUF`` is
bounded, so sends back-pressure while probes always find room in the socket) or,
without a device, a userspace send schedule (tests, unprivileged use).  The
controller's rate is the frame rate on the wire (Ethernet header included, as HTB
counts it).  With HTB, packets timed for an RTT sample carry a request for the kernel's
software TX timestamp (read off the socket's error queue in send order), so the RTT
the controller gets from their ACKs excludes the wait in the flow's HTB class.
"""

from __future__ import annotations

import fcntl
import logging
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4cc.constants import ECN_ECT0
from p4cc.errors import ConfigError
from p4cc.hostcc import wire
from p4cc.hostcc.chain import FlowChain
from p4cc.hostcc.flow import Flow, FlowSpec, RateController
from p4cc.hostcc.pacing import HtbPacer, PacerConfig, enter_netns
from p4cc.hostcc.trace import FCT_FIELDS, TRACE_FIELDS, RecordWriter

log = logging.getLogger(__name__)

SIOCOUTQ = 0x5411  # bytes held by an unsent/untransmitted socket queue (linux/sockios.h)
ControllerFactory = Callable[[FlowSpec], RateController]
# Software TX timestamps (linux/net_tstamp.h, Documentation/networking/timestamping.rst):
# report software stamps without payload on the socket; generate one per timed packet
SO_TIMESTAMPING = 37
# SOF_TIMESTAMPING_SOFTWARE | OPT_TSONLY | RX_SOFTWARE: replies carry their kernel
# arrival time too, so an RTT sample is kernel TX to kernel RX and leaves out the sender
# loop's own delay in reading the reply (host jitter was most of the RTT noise on BMv2)
_TS_REPORT = (1 << 4) | (1 << 11) | (1 << 3)
_TX_STAMP = [(socket.SOL_SOCKET, SO_TIMESTAMPING, struct.pack("i", 1 << 1))]  # TX_SOFTWARE


@dataclass(frozen=True)
class SenderConfig:
    """How a sender runs its flows (times in seconds)."""

    pkt_bytes: int = field(
        default=1000,
        metadata={"help": "IPv4 datagram size of data; the frame on the wire is 14 B more "
                  "(runners: Scale.pkt_bytes - 14, api.datagram_bytes)"})
    dev: str | None = field(default=None, metadata={"help": "pace with HTB on this device"})
    netns: str | None = field(default=None, metadata={"help": "named netns to run in"})
    sport_base: int = field(default=0, metadata={"help": "flow i uses sport_base+i (0: any)"})
    sndbuf_bytes: int = field(default=65536, metadata={"help": "SO_SNDBUF with HTB pacing"})
    host_queue_bytes: int = field(
        default=8192,
        metadata={"help": "min bytes (skb truesize, SIOCOUTQ; ~2.3 KB per 1000-B packet) a "
                  "flow keeps queued in its HTB class; the rest of SO_SNDBUF stays free "
                  "for probes"},
    )
    host_queue_s: float = field(
        default=5e-3, metadata={"help": "...or this much time at the flow's rate, if more"})
    probe_interval_s: float = field(default=8e-3, metadata={"help": "RTT probe period"})
    rtt_window: int = field(
        default=1,
        metadata={"help": "the controller gets the median of the last N probe RTTs "
                  "(1: each raw sample, the RL-CC definition)"})
    rto_s: float = field(default=50e-3, metadata={"help": "go-back-N timeout floor"})
    rto_max_s: float = field(
        default=0.5, metadata={"help": "RTO cap (RTO = min(max(2·srtt, rto_s)·2^k, this))"})
    link_rate_bps: float | None = field(
        default=None, metadata={"help": "with dev: cap the flows' sum at the host link rate"})
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

    def __post_init__(self) -> None:
        if self.pkt_bytes <= wire.data_overhead() or self.pkt_bytes > 9000:
            raise ConfigError(f"pkt_bytes must be in {wire.data_overhead() + 1}..9000")
        if not 1 <= self.rtt_window <= 64:
            raise ConfigError(f"rtt_window={self.rtt_window} must be in 1..64")
        if self.ack_interval_s is not None and not self.ack_interval_s >= 0:
            raise ConfigError(f"ack_interval_s={self.ack_interval_s} must be >= 0 (0: off)")
        for name in ("probe_interval_s", "rto_s", "rto_max_s", "trace_interval_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0")


class Sender:
    """Run ``specs``; ``wait`` for completion, ``records`` for the FCT records."""

    def __init__(self, specs: Sequence[FlowSpec], make_ctl: ControllerFactory,
                 cfg: SenderConfig | None = None, out_dir: str | Path | None = None) -> None:
        cfg = cfg or SenderConfig()
        if not specs:
            raise ConfigError("no flows to send")
        self.cfg = cfg
        self.specs = sorted(specs, key=lambda s: s.start_s)
        self.make_ctl = make_ctl
        self.out_dir = Path(out_dir) if out_dir else None
        self.flows: list[tuple[Flow, socket.socket]] = []
        self.t0 = 0.0
        self.t0_epoch = 0.0
        self.cpu_s = 0.0
        self.icmp_errors = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="p4cc-send", daemon=True)
        self._pacer: HtbPacer | None = None
        self._records: list[dict[str, Any]] = []
        self._fct_written: set[int] = set()
        self._txq: dict[int, deque[int]] = {}  # flow id -> PSNs awaiting a TX timestamp
        self.chain = FlowChain(self.specs, cfg.completions)  # when each flow starts

    # -- control ---------------------------------------------------------------------
    def start(self) -> Sender:
        self._thread.start()
        return self

    def wait(self, timeout_s: float | None = None) -> bool:
        """True when every flow completed (or the sender stopped) within the timeout."""
        self._done.wait(timeout_s)
        if self.error is not None:
            raise self.error
        return self._done.is_set()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            if self._records:
                return list(self._records)
            recs = [f.record(s.getsockname()[1] if s.fileno() >= 0 else 0, self.t0_epoch)
                    for f, s in self.flows]
            for r, (f, _s) in zip(recs, self.flows, strict=True):
                r["ref"] = f.spec.ref
            # flows whose start time never came (deadline/stop) are reported too
            recs += [{"flow_id": None, "dst": sp.dst, "cc": sp.cc, "size": sp.size,
                      "sched_start_s": sp.start_s, "completed": False, "ref": sp.ref}
                     for sp in self.chain.not_started()]
            return recs

    @property
    def pacer_stats(self) -> dict[str, Any]:
        return dict(self._pacer.stats.__dict__) if self._pacer else {}

    # -- thread ----------------------------------------------------------------------
    def _main(self) -> None:
        traces = fcts = None
        try:
            if self.cfg.netns:
                enter_netns(self.cfg.netns)
            if self.out_dir:
                traces = RecordWriter(self.out_dir / "trace.csv", TRACE_FIELDS)
                fcts = RecordWriter(self.out_dir / "fct.csv", FCT_FIELDS, flush_every=1)
            if self.cfg.dev:
                self._pacer = HtbPacer(PacerConfig(dev=self.cfg.dev, netns=self.cfg.netns,
                                                   link_rate_bps=self.cfg.link_rate_bps))
                self._pacer.start()
            cpu0 = time.thread_time()
            self._loop(traces, fcts)
            self.cpu_s = time.thread_time() - cpu0
        except BaseException as exc:
            self.error = exc
            log.error("sender failed: %s", exc)
        finally:
            try:
                if self._pacer is not None:
                    self._pacer.close()
            finally:
                recs = self.records()
                with self._lock:
                    self._records = recs
                if fcts is not None:
                    fcts.write_all(r for r in recs if r["flow_id"] not in self._fct_written)
                    fcts.close()
                if traces is not None:
                    traces.close()
                for _f, s in self.flows:
                    s.close()
                self.chain.close()
                self._done.set()

    def _open(self, i: int, spec: FlowSpec) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            if self.cfg.ecn:
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_ECT0)
            if self.cfg.dev:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.cfg.sndbuf_bytes)
            s.bind(("0.0.0.0", self.cfg.sport_base + i if self.cfg.sport_base else 0))
            s.connect((spec.dst, spec.port))
        except OSError as exc:
            s.close()
            raise ConfigError(f"cannot open the socket of flow {i} to {spec.dst}:{spec.port}"
                              f" ({exc}); check --dst and the route") from exc
        s.setblocking(False)
        if self.cfg.dev:  # HTB holds the packets: time timed ones when they leave
            try:
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TS_REPORT)
                self._txq[i] = deque(maxlen=256)
            except OSError as exc:
                log.warning("no TX timestamps (%s): RTT samples from probes only", exc)
        return s

    def _loop(self, traces: RecordWriter | None, fcts: RecordWriter | None) -> None:
        cfg = self.cfg
        self.t0 = time.monotonic()
        self.t0_epoch = time.time()
        chain = self.chain
        active: list[tuple[Flow, socket.socket, dict[str, float]]] = []
        next_trace = 0.0
        srtt: dict[str, float] = {}  # latest srtt per destination: seeds new flows' RTO
        while not self._stop.is_set():
            t = time.monotonic() - self.t0
            for spec in chain.due(t):
                fid = len(self.flows) + 1
                ctl = self.make_ctl(spec)
                ack_iv = cfg.ack_interval_s
                if ack_iv is None:  # what the controller asks for (RL-CC: RTT samples)
                    ack_iv = getattr(ctl, "ack_interval_s", None)
                flow = Flow(fid, spec, ctl, cfg.pkt_bytes, cfg.rto_s,
                            cfg.ack_every, rto_max_s=cfg.rto_max_s, srtt_s=srtt.get(spec.dst),
                            rtt_window=cfg.rtt_window, ack_interval_s=ack_iv)
                sock = self._open(fid, spec)
                rate = flow.ctl.rate_bps(t)
                if self._pacer is not None:
                    self._pacer.add_flow(sock.getsockname()[1], rate)
                with self._lock:
                    self.flows.append((flow, sock))
                active.append((flow, sock, {"next_send": t, "next_probe": t, "rate": rate}))
            if not active and chain.exhausted():
                break
            wake = min(t + 0.005, chain.next_start())
            for flow, sock, st in active:
                self._drain(flow, sock)
                t = time.monotonic() - self.t0
                if t >= st["next_probe"]:
                    st["next_probe"] = t + cfg.probe_interval_s
                    flow.probes += 1
                    self._send(sock, wire.encode_probe(flow.id, flow.probes, time.time_ns()))
                wake = min(wake, st["next_probe"])
                rate = max(flow.ctl.rate_bps(t), 1.0)
                if self._pacer is not None and abs(rate - st["rate"]) > 1e-3 * st["rate"]:
                    self._pacer.set_rate(sock.getsockname()[1], rate)
                    st["rate"] = rate
                flow.check_timeout(t)
                if flow.has_data():
                    if self._pacer is not None:
                        if not self._send_paced(flow, sock, t, rate):
                            gap = (cfg.pkt_bytes + wire.ETH_LEN) * 8.0 / rate
                            wake = min(wake, t + min(max(gap / 2, 2e-4), 5e-3))
                    else:
                        wake = min(wake, self._send_user(flow, sock, st, rate, t))
                else:
                    wake = min(wake, flow.last_progress_t + flow.rto())
            if t >= next_trace:
                next_trace = t + cfg.trace_interval_s
                if traces is not None:
                    for flow, _s, st in active:
                        traces.write(self._trace_row(flow, t, st["rate"]))
            wake = min(wake, next_trace)
            for flow, _s, _st in active:
                if flow.srtt_s is not None:
                    srtt[flow.spec.dst] = flow.srtt_s
            for item in [a for a in active if a[0].done]:
                active.remove(item)
                rec = item[0].record(item[1].getsockname()[1], self.t0_epoch)
                rec["ref"] = item[0].spec.ref
                chain.completed(item[0].spec, time.monotonic() - self.t0)
                if fcts is not None:
                    fcts.write(rec)
                    self._fct_written.add(rec["flow_id"])
            t = time.monotonic() - self.t0
            rset = [s for _f, s, _st in active]
            if rset:
                select.select(rset, [], [], max(0.0, wake - t))
            elif wake > t:
                self._stop.wait(wake - t)

    def _trace_row(self, flow: Flow, t: float, rate: float) -> dict[str, Any]:
        row: dict[str, Any] = {
            "t": round(t, 6), "flow_id": flow.id, "rate_bps": rate, "rtt_s": flow.rtt_s,
            "max_qdepth": flow.max_qdepth, "cnps": flow.cnps, "nacks": flow.nacks,
            "bytes_sent": flow.bytes_sent, "snd_una": flow.snd_una, "snd_nxt": flow.snd_nxt,
            "rtt_ctl_s": flow.rtt_ctl_s, "srtt_s": flow.srtt_s,
        }
        for k, v in flow.ctl.trace(t).items():
            row.setdefault(k, v)
        return row

    def _drain_tx_times(self, flow: Flow, sock: socket.socket) -> None:
        """Read the TX timestamps of timed packets (in send order) off the error queue."""
        q = self._txq.get(flow.id)
        if q is None:
            return
        for _ in range(256):
            try:
                _d, anc, _fl, _a = sock.recvmsg(1, 512, socket.MSG_ERRQUEUE)
            except OSError:  # (BlockingIOError, InterruptedError: nothing more)
                return
            t_mono = self._stamp(anc)
            if q and t_mono is not None:
                flow.departed(q.popleft(), t_mono)

    def _drain(self, flow: Flow, sock: socket.socket) -> None:
        self._drain_tx_times(flow, sock)
        stamped = flow.id in self._txq
        for _ in range(256):
            try:
                buf, anc, _fl, _a = sock.recvmsg(2048, 512 if stamped else 0)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                self.icmp_errors += 1
                continue
            now = time.monotonic() - self.t0
            rx = self._stamp(anc)  # the reply's kernel RX time, if stamped
            flow.on_datagram(buf, now if rx is None else min(now, rx), time.time_ns())

    def _stamp(self, anc: list[tuple[int, int, bytes]]) -> float | None:
        """The kernel's software timestamp in ``anc`` on the sender's clock, if any."""
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
                sec, nsec = struct.unpack_from("qq", data, 0)  # ts[0]: software
                if sec or nsec:
                    offset_ns = time.time_ns() - time.monotonic_ns()
                    return (sec * 10**9 + nsec - offset_ns) / 1e9 - self.t0
        return None

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

    def _send_paced(self, flow: Flow, sock: socket.socket, t: float, rate: float) -> bool:
        """Keep a few ms of packets queued in the flow's HTB class; False when full.

        A timed packet (an RTT sample) asks the kernel for its software TX timestamp,
        taken when it leaves the qdisc for the device (:meth:`_drain_tx_times`)."""
        cfg = self.cfg
        # skb truesize is ~2.3x a 1000-B datagram; 2.5x errs on the generous side
        pkts = rate * cfg.host_queue_s / (8.0 * cfg.pkt_bytes)
        limit = max(cfg.host_queue_bytes, int(2.5 * cfg.pkt_bytes * pkts))
        for _ in range(64):
            if not flow.has_data():
                return True
            outq = struct.unpack("i", fcntl.ioctl(sock.fileno(), SIOCOUTQ, b"\0\0\0\0"))[0]
            if outq >= limit:
                return False
            buf = flow.next_datagram(t)
            stamp = flow.times_next() and flow.id in self._txq
            if not self._send(sock, buf, _TX_STAMP if stamp else None):
                return False
            if stamp:
                self._txq[flow.id].append(flow.snd_nxt)
            flow.sent(t, len(buf), departs_now=False)
        return True

    def _send_user(self, flow: Flow, sock: socket.socket, st: dict[str, float], rate: float,
                   t: float) -> float:
        """Userspace pacing: send what is due, return when the next packet is."""
        for _ in range(64):
            if not flow.has_data() or t < st["next_send"]:
                break
            buf = flow.next_datagram(t)
            if not self._send(sock, buf):
                break
            flow.sent(t, len(buf))
            gap = (len(buf) + wire.IP_UDP_LEN + wire.ETH_LEN) * 8.0 / rate
            st["next_send"] = max(st["next_send"] + gap, t - 2 * gap)
        return st["next_send"] if flow.has_data() else t + 0.005

