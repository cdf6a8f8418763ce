"""Sender: runs flows over UDP sockets, one socket (source port) per flow.

One loop drives every flow (in the sender's thread, or ``step`` by step in a caller's
loop): it starts flows at their scheduled time, reads replies, sends data at the
controller's rate and RTT probes to the flows without recent ACK RTT samples
(p4cc.hostcc.rtt_samples.ProbeSchedule), and writes trace rows.
Pacing is either an HTB class per flow (``dev`` set: the qdisc holds the socket's
packets until it transmits them; the sender keeps at most ``host_queue_bytes`` queued
per flow, read with ``SIOCOUTQ``, and ``SO_SNDBUF`` is bounded, so sends back-pressure
while probes always find room in the socket) or, without a device, a userspace send
schedule (tests, unprivileged use); a flow slower than the pacer's floor uses that
schedule through its class (p4cc.hostcc.send_paths). The controller's rate is the frame
rate on the wire (Ethernet header included, as HTB counts it). With HTB, packets timed
for an RTT sample carry a request for the kernel's software TX timestamp (read off the
socket's error queue in send order: p4cc.hostcc.rtt_samples.TxStamps), so the RTT the
controller gets from their ACKs excludes the wait in the flow's HTB class.
A flow's socket, controller and HTB class are set up before it starts
(p4cc.hostcc.sender_setup).
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from p4cc.errors import ConfigError
from p4cc.hostcc import wire
from p4cc.hostcc.chain import FlowChain
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.pacing import HtbPacer
from p4cc.hostcc.pacing_config import PacerConfig, enter_netns
from p4cc.hostcc.rtt_samples import ProbeSchedule, TxStamps, kernel_time
from p4cc.hostcc.sched import StartBoost
from p4cc.hostcc.send_paths import SendPaths
from p4cc.hostcc.sender_config import SenderConfig
from p4cc.hostcc.sender_setup import ControllerFactory, FlowSetUp, SetUp
from p4cc.hostcc.sender_setup import prepared_key as _key
from p4cc.hostcc.trace import FCT_FIELDS, TRACE_FIELDS, RecordWriter

log = logging.getLogger(__name__)


class Sender(SendPaths, FlowSetUp):
    """Run ``specs``; ``wait`` for completion, ``records`` for the FCT records.

    ``start`` runs the flows in a thread of its own.  A caller with its own event loop
    (p4cc.hostcc.hostloop: a host's sender and receiver on one thread) calls ``open``,
    then ``step`` until it returns None, selecting on ``readers`` until the time ``step``
    returned, and ``close`` at the end."""

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
        self.passes = 0  # calls of step
        self.icmp_errors = 0
        #: scheduled flows whose ECMP source port was taken (sent from any port instead)
        self.sport_fallbacks = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="p4cc-send", daemon=True)
        self._pacer: HtbPacer | None = None
        self._records: list[dict[str, Any]] = []
        self._fct_written: set[int] = set()
        self._stamps = TxStamps()  # timed packets awaiting their TX timestamp, per flow
        quiet = cfg.probe_interval_s if cfg.probe_quiet_s is None else cfg.probe_quiet_s
        self.probe_schedule = ProbeSchedule(cfg.probe_interval_s, quiet, cfg.probe_max_pps)
        self.chain = FlowChain(self.specs, cfg.completions)  # when each flow starts
        # the loop's state (open/step/close)
        self._traces: RecordWriter | None = None
        self._fcts: RecordWriter | None = None
        self._active: list[tuple[Flow, socket.socket, dict[str, float]]] = []
        self._next_trace = 0.0
        self._backlogged = 0  # flows with data paced by HTB, counted each pass
        self._srtt: dict[str, float] = {}  # latest srtt per destination: seeds new flows' RTO
        self._cpu0 = 0.0
        self._closed = False
        # flows with a start time, in start order; each is set up (socket, controller, HTB
        # class) prepare_ahead_s before it, so that the set-up does not delay its start
        self._timed = [s for s in self.specs if s.after < 0]
        self._prep_next = 0
        self._prepared: dict[tuple[str, int], SetUp] = {}
        self._next_fid = 1
        #: real-time priority for the wait before a flow's start (cfg.start_rt_prio)
        self.boost = StartBoost(cfg.start_rt_prio)

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
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        else:  # driven by a caller's loop (open/step)
            self.close()

    @property
    def done(self) -> bool:
        return self._done.is_set()

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
        try:
            self.open()
            ready: list[socket.socket] | None = None
            while not self._stop.is_set():
                wake = self.step(ready)
                if wake is None:
                    break
                rset = self.readers()
                dt = wake - time.monotonic()
                ready = []
                if rset:
                    ready = select.select(rset, [], [], max(0.0, dt))[0]
                elif dt > 0:
                    self._stop.wait(dt)
        except BaseException as exc:
            self.error = exc
            log.error("sender failed: %s", exc)
        finally:
            self.close()

    # -- the loop, in steps ----------------------------------------------------------
    def open(self) -> Sender:
        """Set up in the calling thread (netns, record files, HTB qdisc) and start the
        clock: flow start times count from here, or from ``cfg.t0_epoch``.  ``close``
        undoes it (also on error)."""
        if self.cfg.netns:
            enter_netns(self.cfg.netns)
        if self.out_dir:
            self._traces = RecordWriter(self.out_dir / "trace.csv", TRACE_FIELDS)
            self._fcts = RecordWriter(self.out_dir / "fct.csv", FCT_FIELDS, flush_every=1)
        if self.cfg.dev:
            debt = self.cfg.max_token_debt_s
            floor = (self.cfg.pkt_bytes + wire.ETH_LEN) * 8.0 / debt if debt > 0 else 0.0
            self._pacer = HtbPacer(PacerConfig(dev=self.cfg.dev, netns=self.cfg.netns,
                                               link_rate_bps=self.cfg.link_rate_bps,
                                               ceil_floor_bps=floor))
            self._pacer.start()
            self.boost.also(self._pacer.thread_id)  # flows wait for its classes
        self._cpu0 = time.thread_time()
        self.t0, self.t0_epoch = time.monotonic(), time.time()
        if self.cfg.t0_epoch is not None:  # the run's t0, before or after this instant
            self.t0 -= self.t0_epoch - self.cfg.t0_epoch
            self.t0_epoch = self.cfg.t0_epoch
        return self

    def readers(self) -> list[socket.socket]:
        """The sockets of the running flows: a reply on one is a reason to ``step``; and
        the chain's wake-up socket while flows wait for another sender's."""
        socks = [s for _f, s, _st in self._active]
        if self.chain.wake_socket is not None and self.chain.any_waiting():
            socks.append(self.chain.wake_socket)
        return socks

    def close(self) -> None:
        """Tear down the pacing, write the FCT records of the flows not written yet,
        close files and sockets; ``wait`` returns from now on.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.cpu_s = time.thread_time() - self._cpu0 if self._cpu0 else 0.0
        self._end_boost()
        try:
            if self._pacer is not None:
                self._pacer.close()
        finally:
            recs = self.records()
            with self._lock:
                self._records = recs
            if self._fcts is not None:
                self._fcts.write_all(r for r in recs if r["flow_id"] not in self._fct_written)
                self._fcts.close()
            if self._traces is not None:
                self._traces.close()
            for _f, s in self.flows:
                s.close()
            for _fid, s, _ctl, _wait in self._prepared.values():  # set up, never started
                s.close()
            self._prepared.clear()
            self.chain.close()
            self._done.set()

    def step(self, ready: Collection[socket.socket] | None = None) -> float | None:
        """One pass: start the flows now due, read the replies on the sockets in
        ``ready`` (those a select found readable; None: every flow's), send what the
        rates allow, write trace rows and finished flows' FCT records.  Returns the
        monotonic time of the next pass (sooner if a socket in ``readers`` becomes
        readable); None once every flow is done."""
        cfg, chain, active = self.cfg, self.chain, self._active
        self.passes += 1
        t = time.monotonic() - self.t0
        self._start_due(t)
        self._prepare(t)
        if not active and chain.exhausted():
            return None
        wake = min(t + 0.005, chain.next_start())
        self._backlogged = sum(1 for f, _s, st in active if f.has_data() and not st.get("gated"))
        for flow, sock, st in active:  # an empty socket costs two failed reads: skip it
            wake = min(wake, self._serve(flow, sock, st, ready is None or sock in ready))
            if flow.done and not st.get("released"):  # release its waiters at once
                st["released"] = 1.0
                end = flow.end_t if flow.end_t is not None else time.monotonic() - self.t0
                chain.completed(flow.spec, end)
        t = time.monotonic() - self.t0
        if t >= self._next_trace:
            self._next_trace = t + cfg.trace_interval_s
            if self._traces is not None:
                for flow, _s, st in active:
                    self._traces.write(self._trace_row(flow, t, st["rate"]))
        wake = min(wake, self._next_trace)
        for flow, _s, _st in active:
            if flow.srtt_s is not None:
                self._srtt[flow.spec.dst] = flow.srtt_s
        for item in [a for a in active if a[0].done]:
            active.remove(item)
            self.probe_schedule.remove(item[0].id)
            rec = item[0].record(item[1].getsockname()[1], self.t0_epoch)
            rec["ref"] = item[0].spec.ref
            if self._fcts is not None:
                self._fcts.write(rec)
                self._fct_written.add(rec["flow_id"])
        t = time.monotonic() - self.t0
        if chain.next_start() <= t:  # released by this pass's completions: start them now
            wake = min(wake, self._start_released(t))
        if not active and chain.exhausted():  # done now: not one pass later
            return None
        wake = min(wake, chain.next_start())
        # real-time from start_rt_lead_s before a flow's start until it started, and
        # (chain_rt) while a chained flow set up ahead may be released any moment
        self.boost.set(chain.next_start() <= max(wake, t + cfg.start_rt_lead_s)
                       or (cfg.chain_rt and chain.standing()))
        return self.t0 + wake

    def _start_released(self, t: float) -> float:
        """Start the flows this pass's completions released and send their first
        packets, in this pass: the next one may come only after the switches had the CPU
        (BMv2 storage, session 24: a chained flow started 1.5 ms after its predecessor's
        last ACK at the median when it waited for the next pass; 1.0 ms in the same pass,
        0.6 ms with the sender boosted while the flow stood by, SenderConfig.chain_rt)."""
        n, wake = len(self._active), float("inf")
        self._start_due(t)
        for flow, sock, st in self._active[n:]:
            wake = min(wake, self._serve(flow, sock, st, False))
        return wake

    def _end_boost(self) -> None:
        self.boost.set(False)
        if self.boost.error is not None:
            log.warning("sender: no real-time priority before flow starts: %s",
                        self.boost.error)
        elif self.boost.boosts:
            log.info("sender: real-time priority before %d flow starts", self.boost.boosts)

    def _start_due(self, t: float) -> None:
        cfg = self.cfg
        for spec in self.chain.due(t):
            prepared = self._prepared.pop(_key(spec), None)
            fid, sock, ctl, class_made = prepared if prepared is not None else self._set_up(spec, t)
            try:
                class_made()  # (at once, unless the pacer's thread is still on it)
                if self._pacer is not None:
                    self._pacer.classify(sock)  # its packets into its class
            except BaseException:
                sock.close()
                raise
            ack_iv = cfg.ack_interval_s
            if ack_iv is None:  # what the controller asks for (RL-CC: RTT samples)
                ack_iv = getattr(ctl, "ack_interval_s", None)
            flow = Flow(fid, spec, ctl, cfg.pkt_bytes, cfg.rto_s,
                        cfg.ack_every, rto_max_s=cfg.rto_max_s,
                        srtt_s=self._srtt.get(spec.dst), rtt_window=cfg.rtt_window,
                        ack_interval_s=ack_iv, pad=cfg.pad_data)
            rate = flow.ctl.rate_bps(t)
            if prepared is not None and self._pacer is not None:  # (free if unchanged)
                self._pacer.set_rate(sock.getsockname()[1], rate)
            with self._lock:
                self.flows.append((flow, sock))
            self.probe_schedule.add(fid, t)
            self._active.append((flow, sock, {"next_send": t, "rate": rate}))

    def _serve(self, flow: Flow, sock: socket.socket, st: dict[str, float], drain: bool
               ) -> float:
        """Read one flow's replies (``drain``), probe, follow its rate, send; when it
        next needs a pass (run clock)."""
        if drain:
            self._drain(flow, sock)
        t = time.monotonic() - self.t0
        if self.probe_schedule.due(flow.id, t, flow.ack_rtt_samples):
            flow.probes += 1
            self._send_probe(sock, wire.encode_probe(flow.id, flow.probes, time.time_ns()))
        wake = self.probe_schedule.next_t(flow.id)
        rate = max(flow.ctl.rate_bps(t), 1.0)
        if self._pacer is not None and abs(rate - st["rate"]) > 1e-3 * st["rate"]:
            self._pacer.set_rate(sock.getsockname()[1], rate)
            st["rate"] = rate
        flow.check_timeout(t)
        if not flow.has_data():
            return min(wake, flow.timeout_at())
        if self._pacer is None:
            return min(wake, self._send_user(flow, sock, st, rate, t))
        if rate < self._pacer.floor_bps:  # HTB holds the floor; the rate is kept here
            if not st.get("gated"):
                st["gated"], st["next_send"] = 1.0, t
            return min(wake, self._send_user(flow, sock, st, rate, t, queued=True))
        st["gated"] = 0.0
        if not self._send_paced(flow, sock, t, rate):
            wake = min(wake, t + self._refill_wait(rate))
        return wake

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

    def _drain(self, flow: Flow, sock: socket.socket) -> None:
        self._stamps.drain(flow, sock, self.t0)
        stamped = self._stamps.on(flow.id)
        for _ in range(256):
            try:
                buf, anc, _fl, _a = sock.recvmsg(2048, 512 if stamped else 0)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                self.icmp_errors += 1
                continue
            now = time.monotonic() - self.t0
            rx = kernel_time(anc, self.t0)  # the reply's kernel RX time, if stamped
            flow.on_datagram(buf, now if rx is None else min(now, rx), time.time_ns())
