"""One host's sender and receiver on one thread: ``p4cc host run``.

A BMv2 run used to start two Python processes per host (``p4cc host recv`` and
``p4cc host send``), each with its own interpreter and threads; on two cores they
competed with the switches for CPU.  :class:`HostLoop` drives a
:class:`~p4cc.hostcc.sender.Sender` (``open``/``step``/``close``) and a
:class:`~p4cc.hostcc.receiver.Receiver` opened without a thread (``open``/``drain``)
from one loop in the calling thread: one ``select`` over the receiver's socket and the
sender's flow sockets, woken by a datagram or by the time the sender's next pass is due.
The records are the same files as those of the two processes (``fct.csv`` and
``trace.csv`` of the sender, ``rx_flows.csv`` of the receiver).
"""

from __future__ import annotations

import logging
import math
import select
import socket
import threading
import time
from dataclasses import dataclass, field

from p4cc.errors import ConfigError
from p4cc.hostcc.receiver import Receiver
from p4cc.hostcc.sender import Sender

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostLoopConfig:
    """When the loop ends (times in seconds)."""

    tx_deadline_s: float = field(
        default=math.inf, metadata={"help": "stop the sender this long after it opened"})
    duration_s: float = field(
        default=0.0, metadata={"help": "end the loop after this long (0: never)"})
    until_flows: int = field(
        default=0, metadata={"help": "end once the receiver completed this many flows and "
                             "the sender is done (0: never)"})
    idle_s: float = field(
        default=0.05, metadata={"help": "longest wait in one select (how soon a stop or "
                                "a duration is noticed when nothing arrives)"})

    def __post_init__(self) -> None:
        if self.duration_s < 0 or self.until_flows < 0 or not self.idle_s > 0:
            raise ConfigError("duration_s and until_flows must be >= 0, idle_s > 0")


@dataclass
class HostLoopResult:
    """How the loop ended."""

    sender: str = "none"  # none | done | deadline | stopped
    reason: str = ""  # stop | duration | until_flows | sender_done
    passes: int = 0  # loop iterations (one select each)
    cpu_s: float = 0.0  # CPU time of the calling thread in the loop


def completed_flows(rx: Receiver) -> int:
    """Flows the receiver saw complete (expired ones included)."""
    with rx.lock:
        core = rx.core
        return (sum(f.complete_t is not None for f in core.flows.values())
                + sum(r.get("complete_t") is not None for r in core.expired))


class HostLoop:
    """Run ``sender`` (opened here) and ``receiver`` (already opened by the caller, so
    it listens before the sender's t0) until ``stop`` is set or ``cfg`` ends the loop.
    A receiver started with its own thread (``Receiver.start``) is left to it; the loop
    then only keeps the process alive for it after the sender is done.

    The sender is closed when its flows are done (its records written at once) or at
    the end; the receiver is left open: the caller stops it and writes its records."""

    def __init__(self, sender: Sender | None, receiver: Receiver | None,
                 cfg: HostLoopConfig | None = None, stop: threading.Event | None = None
                 ) -> None:
        if sender is None and receiver is None:
            raise ConfigError("a host loop needs a sender, a receiver or both")
        if receiver is not None and receiver.sock is None:
            raise ConfigError("open (or start) the receiver before the host loop")
        self.sender, self.receiver = sender, receiver
        self.cfg = cfg or HostLoopConfig()
        self.stop = stop or threading.Event()
        self.result = HostLoopResult()

    def run(self) -> HostLoopResult:
        res, cfg, tx, rx = self.result, self.cfg, self.sender, self.receiver
        cpu0 = time.thread_time()
        start = time.monotonic()
        end = start + cfg.duration_s if cfg.duration_s else math.inf
        next_count = start
        tx_end = tx_due = math.inf
        tx_ready: list[socket.socket] | None = None  # flow sockets found readable
        try:
            if tx is not None:
                tx.open()
                res.sender = "running"
                tx_end = time.monotonic() + cfg.tx_deadline_s
                tx_due = time.monotonic()
            while True:
                now = time.monotonic()
                if self.stop.is_set():
                    res.reason = "stop"
                    break
                if now >= end:
                    res.reason = "duration"
                    break
                # the sender's pass only when it is due or a reply woke it: a datagram
                # for the receiver costs the receiver's work alone
                if tx is not None and res.sender == "running" and (now >= tx_due or tx_ready):
                    nxt = tx.step(tx_ready) if now < tx_end else None
                    tx_due = math.inf if nxt is None else nxt
                    if nxt is None:
                        res.sender = "done" if now < tx_end else "deadline"
                        tx.close()  # writes its records now; the receiver may go on
                if rx is None and res.sender != "running":
                    res.reason = "sender_done"
                    break
                if cfg.until_flows and rx is not None and res.sender != "running" \
                        and now >= next_count:
                    next_count = now + cfg.idle_s  # counting walks every flow: not often
                    if completed_flows(rx) >= cfg.until_flows:
                        res.reason = "until_flows"
                        break
                res.passes += 1
                socks = tx.readers() if tx is not None and res.sender == "running" else []
                tx_ready = self._wait(socks, min(now + cfg.idle_s, tx_due, end))
        finally:
            if tx is not None and res.sender == "running":
                res.sender = "stopped"
            if tx is not None:
                tx.close()
            res.cpu_s = time.thread_time() - cpu0
        return res

    def _wait(self, socks: list[socket.socket], until: float) -> list[socket.socket]:
        """Sleep until ``until`` or a datagram on ``socks`` (the sender's) or on the
        receiver's socket; serve the receiver if its socket is readable.  Returns the
        sender's sockets that are readable."""
        timeout = max(0.0, until - time.monotonic())
        rx = self.receiver
        if rx is None or rx.sock is None or rx.threaded:  # (a thread serves it)
            if not socks:
                self.stop.wait(timeout)
                return []
            return list(select.select(socks, [], [], timeout)[0])
        ready, _w, _x = select.select([*socks, rx.sock], [], [], timeout)
        if rx.sock in ready:
            rx.drain()
            ready.remove(rx.sock)
        return list(ready)
