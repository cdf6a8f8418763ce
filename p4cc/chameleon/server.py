"""The controller end of the monitor: one listener, many reporters, never stalled by one.

:class:`MonitorState` is the bookkeeping (pure: lines in, reporters' latest statistics
out, expiry by deadline); :class:`MonitorServer` runs it on a socket in one thread with
non-blocking I/O (``selectors``): a reporter that sends garbage gets an ``error`` line
and is counted; one that stops reporting is dropped ``expiry_s`` after its last message
(its connection closed); one that stops reading gets its connection closed when its
unsent settings exceed :data:`MAX_BACKLOG` -- nothing a reporter does can block the
controller.  Addresses: ``unix:<path>`` (or a path) or ``tcp:<host>:<port>``
(docs/chameleon.md says why the BMv2 fabric uses a Unix socket).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4cc.chameleon.wire import MAX_LINE, Message, ProtocolError, decode, encode
from p4cc.errors import ConfigError

log = logging.getLogger(__name__)

#: unsent bytes after which a reporter that does not read is disconnected
MAX_BACKLOG = 1 << 20


@dataclass
class Reporter:
    id: str
    role: str
    last_seen: float
    t: float = 0.0  # its clock at its last report
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    reports: int = 0


@dataclass
class MonitorCounters:
    lines: int = 0
    reports: int = 0
    garbage: int = 0
    expired: int = 0
    nacks: int = 0
    dropped_slow: int = 0
    last_error: str = ""


class MonitorState:
    """Reporters by id, their latest statistics, expiry; thread-safe."""

    def __init__(self, expiry_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not expiry_s > 0:
            raise ConfigError(f"monitor expiry must be > 0 s, got {expiry_s}")
        self.expiry_s, self.clock = float(expiry_s), clock
        self.reporters: dict[str, Reporter] = {}
        self.counters = MonitorCounters()
        self.nacks: list[Message] = []
        self.lock = threading.Lock()

    def handle_line(self, line: bytes | str, hello_id: str | None = None) -> Message:
        """Take one line; returns the message or raises ProtocolError (counted)."""
        now = self.clock()
        with self.lock:
            self.counters.lines += 1
            try:
                msg = decode(line)
                if msg.type in ("settings", "error"):
                    raise ProtocolError(f"a reporter may not send {msg.type!r} messages")
            except ProtocolError as exc:
                self.counters.garbage += 1
                self.counters.last_error = str(exc)
                raise
            rep = self.reporters.get(msg.id)
            if msg.type == "hello":
                self.reporters[msg.id] = Reporter(msg.id, msg.role, now)
            elif rep is None:
                # a report before hello (or after expiry): a reporter of unknown role
                rep = self.reporters[msg.id] = Reporter(msg.id, "", now)
            if msg.type == "report":
                rep = self.reporters[msg.id]
                rep.last_seen, rep.t, rep.metrics = now, msg.t, msg.metrics
                rep.reports += 1
                self.counters.reports += 1
            elif msg.type == "nack":
                self.reporters[msg.id].last_seen = now
                self.counters.nacks += 1
                self.nacks.append(msg)
            return msg

    def expire(self) -> list[str]:
        """Drop reporters silent for longer than ``expiry_s``; returns their ids."""
        now = self.clock()
        with self.lock:
            gone = [r for r, rep in self.reporters.items()
                    if now - rep.last_seen > self.expiry_s]
            for r in gone:
                del self.reporters[r]
            self.counters.expired += len(gone)
        return gone

    def live(self, role: str | None = None) -> dict[str, Reporter]:
        """The reporters not expired (after expiring), optionally of one role."""
        self.expire()
        with self.lock:
            return {r: rep for r, rep in self.reporters.items()
                    if role is None or rep.role == role}


@dataclass
class _Conn:
    sock: socket.socket
    rbuf: bytearray = field(default_factory=bytearray)
    wbuf: bytearray = field(default_factory=bytearray)
    id: str | None = None


def parse_address(address: str) -> tuple[int, str | tuple[str, int]]:
    """``unix:<path>`` / a path, or ``tcp:<host>:<port>`` -> (family, sockaddr)."""
    if address.startswith("tcp:"):
        host, _, port = address[4:].rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"monitor address {address!r}: expected tcp:<host>:<port>")
        return socket.AF_INET, (host, int(port))
    path = address[5:] if address.startswith("unix:") else address
    if not path or len(path.encode()) > 100:
        raise ConfigError(f"monitor socket path {path!r} must be 1-100 bytes (AF_UNIX limit)")
    return socket.AF_UNIX, path


class MonitorServer:
    """:class:`MonitorState` on a listening socket, served by one thread."""

    def __init__(self, address: str, expiry_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.state = MonitorState(expiry_s, clock)
        self.family, self.sockaddr = parse_address(address)
        self._sel = selectors.DefaultSelector()
        self._conns: dict[int, _Conn] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name="p4cc-monitor", daemon=True)
        self.listener: socket.socket | None = None
        #: called on every hello: a message to answer it with (None: nothing), e.g. the
        #: settings in force for a reporter that connects after they were broadcast
        self.welcome: Callable[[], Message | None] | None = None

    @property
    def address(self) -> str:
        if self.family == socket.AF_UNIX:
            return f"unix:{self.sockaddr}"
        assert self.listener is not None
        host, port = self.listener.getsockname()[:2]
        return f"tcp:{host}:{port}"

    def start(self) -> MonitorServer:
        lst = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            if self.family == socket.AF_UNIX:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(str(self.sockaddr))
            else:
                lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lst.bind(self.sockaddr)
            if self.family == socket.AF_UNIX:  # host processes may run as another user
                os.chmod(str(self.sockaddr), 0o666)
            lst.listen(64)
        except OSError as exc:
            lst.close()
            raise ConfigError(f"cannot listen on monitor address {self.sockaddr!r}: {exc}") \
                from exc
        lst.setblocking(False)
        self.listener = lst
        self._sel.register(lst, selectors.EVENT_READ, "listen")
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(5.0)
        for c in list(self._conns.values()):
            c.sock.close()
        self._conns.clear()
        if self.listener is not None:
            self.listener.close()
            if self.family == socket.AF_UNIX:
                with contextlib.suppress(OSError):
                    os.unlink(str(self.sockaddr))
        self._wake_r.close()
        self._wake_w.close()
        self._sel.close()

    def __enter__(self) -> MonitorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def broadcast(self, msg: Message, role: str | None = None) -> int:
        """Queue ``msg`` to every connected reporter (of ``role``); returns how many."""
        line = encode(msg)
        live = self.state.live(role)
        n = 0
        with self._lock:
            for c in self._conns.values():
                if c.id is not None and c.id in live:
                    c.wbuf += line
                    n += 1
        self._wake()
        return n

    # -- the thread --------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            for key, ev in self._sel.select(timeout=min(0.1, self.state.expiry_s / 4)):
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                else:
                    c = self._conns.get(key.fd)
                    if c is not None and ev & selectors.EVENT_READ:
                        self._read(c)
            self._flush()
            for rid in self.state.expire():
                log.warning("monitor: reporter %s went silent; dropped", rid)
                self._close_id(rid)

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        c = _Conn(sock)
        self._conns[sock.fileno()] = c
        self._sel.register(sock, selectors.EVENT_READ, "conn")

    def _close(self, c: _Conn) -> None:
        with self._lock:
            self._conns.pop(c.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(c.sock)
        c.sock.close()

    def _close_id(self, rid: str) -> None:
        for c in [c for c in self._conns.values() if c.id == rid]:
            self._close(c)

    def _read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(c)
            return
        c.rbuf += data
        while True:
            i = c.rbuf.find(b"\n")
            if i < 0:
                break
            line = bytes(c.rbuf[:i])
            del c.rbuf[:i + 1]
            try:
                msg = self.state.handle_line(line)
                c.id = msg.id
                hello = self.welcome() if msg.type == "hello" and self.welcome else None
                if hello is not None:  # the settings in force, for a late reporter
                    with self._lock:
                        c.wbuf += encode(hello)
            except ProtocolError as exc:
                log.warning("monitor: refused a line: %s", exc)
                with self._lock:
                    c.wbuf += encode(Message("error", c.id or "?", error=str(exc)))
        if len(c.rbuf) > MAX_LINE:  # no newline within a line's limit: not our protocol
            with self.state.lock:
                self.state.counters.garbage += 1
                self.state.counters.last_error = f"a line longer than {MAX_LINE} B"
            self._close(c)

    def _flush(self) -> None:
        with self._lock:
            conns = [c for c in self._conns.values() if c.wbuf]
        for c in conns:
            with self._lock:
                try:
                    sent = c.sock.send(c.wbuf)
                    del c.wbuf[:sent]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    c.wbuf.clear()
                big = len(c.wbuf) > MAX_BACKLOG
            if big:
                self.state.counters.dropped_slow += 1
                self._close(c)
