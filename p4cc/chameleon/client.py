"""The reporter end of the monitor: hosts and switch control planes.

:class:`ReportBuilder` is the layered monitor of one reporter without I/O: ``sample``
every short period, ``due``/``report`` every long period (p4cc.chameleon.stats).
:class:`MonitorClient` is the connection (hello, reports, settings back; reconnects
with backoff, never raises into its caller's data path).  :class:`ReporterThread` runs
both for a host process: samples by deadline every short period, uploads every long one,
and hands each ``settings`` message to ``on_settings`` (a refusal goes back as ``nack``).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Callable

from p4cc.chameleon.server import parse_address
from p4cc.chameleon.stats import Periods, Window
from p4cc.chameleon.wire import MAX_LINE, Message, ProtocolError, decode, encode
from p4cc.errors import P4ccError

log = logging.getLogger(__name__)

Sample = dict[str, float | None]
SettingsHandler = Callable[[Message], None]


class ReportBuilder:
    """Samples of one reporter between uploads."""

    def __init__(self, rid: str, periods: Periods) -> None:
        self.id, self.periods = rid, periods
        self.window = Window()
        self.next_upload: float | None = None

    def sample(self, t: float, values: Sample) -> None:
        if self.next_upload is None:
            self.next_upload = t + self.periods.long_s
        self.window.add(t, values)

    def due(self, t: float) -> bool:
        return self.next_upload is not None and t >= self.next_upload - 1e-12

    def report(self, t: float) -> Message:
        """The filtered statistics since the last upload (and start a new window)."""
        self.next_upload = t + self.periods.long_s
        return Message("report", self.id, t=t, metrics=self.window.flush())


class MonitorClient:
    """A connection to the controller; ``send`` and ``poll`` never raise on I/O errors
    (the reporter reconnects with exponential backoff on the next call)."""

    def __init__(self, address: str, rid: str, role: str, on_settings: SettingsHandler,
                 timeout_s: float = 1.0, max_backoff_s: float = 5.0) -> None:
        self.family, self.sockaddr = parse_address(address)
        self.id, self.role, self.on_settings = rid, role, on_settings
        self.timeout_s, self.max_backoff_s = timeout_s, max_backoff_s
        self.sock: socket.socket | None = None
        self._rbuf = bytearray()
        self._backoff = 0.05
        self._next_try = 0.0
        self.sent = self.received = self.errors = self.refused = 0
        self.last_error = ""

    def _connect(self) -> bool:
        if self.sock is not None:
            return True
        now = time.monotonic()
        if now < self._next_try:
            return False
        s = socket.socket(self.family, socket.SOCK_STREAM)
        s.settimeout(self.timeout_s)
        try:
            s.connect(self.sockaddr)
            s.sendall(encode(Message("hello", self.id, role=self.role)))
        except OSError as exc:
            s.close()
            self._fail(f"connect: {exc}")
            return False
        self.sock, self._backoff = s, 0.05
        return True

    def _fail(self, why: str) -> None:
        self.errors += 1
        self.last_error = why
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self._next_try = time.monotonic() + self._backoff
        self._backoff = min(2 * self._backoff, self.max_backoff_s)
        log.debug("monitor client %s: %s", self.id, why)

    def send(self, msg: Message) -> bool:
        if not self._connect():
            return False
        assert self.sock is not None
        try:
            self.sock.sendall(encode(msg))
        except OSError as exc:
            self._fail(f"send: {exc}")
            return False
        self.sent += 1
        return True

    def poll(self, timeout_s: float = 0.0) -> int:
        """Read what the controller sent (waiting up to ``timeout_s``); settings go to
        ``on_settings``.  Returns the number of messages handled."""
        if not self._connect():
            return 0
        assert self.sock is not None
        n = 0
        try:
            r, _, _ = select.select([self.sock], [], [], timeout_s)
            while r:
                data = self.sock.recv(65536)
                if not data:
                    self._fail("the controller closed the connection")
                    return n
                self._rbuf += data
                r, _, _ = select.select([self.sock], [], [], 0)
        except OSError as exc:
            self._fail(f"recv: {exc}")
            return n
        while (i := self._rbuf.find(b"\n")) >= 0:
            line = bytes(self._rbuf[:i])
            del self._rbuf[:i + 1]
            n += 1
            self._dispatch(line)
        if len(self._rbuf) > MAX_LINE:
            self._fail("an over-long line from the controller")
        return n

    def _dispatch(self, line: bytes) -> None:
        try:
            msg = decode(line)
        except ProtocolError as exc:
            self.errors += 1
            self.last_error = str(exc)
            return
        self.received += 1
        if msg.type == "error":
            self.last_error = msg.error
            log.warning("monitor: the controller refused a message of %s: %s", self.id,
                        msg.error)
        elif msg.type == "settings":
            try:
                self.on_settings(msg)
            except P4ccError as exc:  # refused: tell the controller, keep running
                self.refused += 1
                self.last_error = str(exc)
                self.send(Message("nack", self.id, error=str(exc)))

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


class ReporterThread:
    """Sample every short period, upload every long period, apply settings as they come."""

    def __init__(self, client: MonitorClient, sample: Callable[[float], Sample],
                 periods: Periods, clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.sample_fn, self.periods, self.clock = client, sample, periods, clock
        self.builder = ReportBuilder(client.id, periods)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"p4cc-report-{client.id}",
                                        daemon=True)

    def start(self) -> ReporterThread:
        self.client.poll(0.0)  # connect (and say hello) now if the controller is there
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.client.close()

    def _run(self) -> None:
        t0 = self.clock()
        k = 0
        while not self._stop.is_set():
            now = self.clock()
            try:
                self.builder.sample(now, self.sample_fn(now))
            except Exception as exc:  # a sampling bug must not stop the host process
                log.error("monitor %s: sampling failed: %s", self.client.id, exc)
            if self.builder.due(now):
                self.client.send(self.builder.report(now))
            k += 1
            deadline = t0 + k * self.periods.short_s  # by deadline: no drift
            while not self._stop.is_set() and (left := deadline - self.clock()) > 0:
                self.client.poll(min(left, 0.05))
                if self.client.sock is None:  # not connected: wait, retry after backoff
                    self._stop.wait(min(left, 0.05))
