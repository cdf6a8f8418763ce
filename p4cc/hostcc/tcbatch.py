"""HTB class creation and changes through one long-lived ``tc -force -batch -`` process.

The pacer creates a class for every flow and changes its rate at every DCQCN rate
change.  Through pyroute2 each ``add-class``/``change-class`` cost ~0.7 ms of CPU,
nearly all of it in Python building the message (HTB's two 256-entry rate tables;
``p4cc bench calibrate``: ``host_rate_change_us``), and it held the GIL the sending
thread needs.  Here the pacer writes one line per command to a ``tc`` process that reads
commands from its stdin (tc(8), ``-batch``; ``-force`` goes on after a failed command),
so tc's C code builds the message.  The process is started from the pacer's thread, so
it runs in that thread's network namespace.

A rate change is sent, not acknowledged: tc reports a failure on its stderr, which a
reader thread logs and counts (:attr:`TcBatch.errors`).  A class creation must be
acknowledged (a flow's first packet must find its class: unclassified traffic is not
shaped), and tc answers nothing on success, so :meth:`TcBatch.sync` sends a marker
command that always fails (``qdisc show`` of a device name with a ``/``, which no Linux
interface can have) and returns a :class:`TcAck`.  tc runs its input in order and
reports a failure as ``Command failed -:N`` (N = the input line), on stderr, which is
unbuffered and read here through the same pipe as stdout; so once the marker's line is
reported, every earlier command has run, and the failures of the earlier lines the ack
watches have been read (with tc's reason, the line printed before).
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import threading
from typing import IO

from p4cc.errors import P4ccError

log = logging.getLogger(__name__)

#: how long ``close`` waits for tc to finish the commands it was given
CLOSE_TIMEOUT_S = 5.0
#: the sync marker: a command that fails at once and changes nothing (no interface name
#: holds a "/": Linux dev_valid_name)
SYNC_LINE = "qdisc show dev p4cc/sync\n"
#: tc's report of a failed input line (tc/tc.c batch(): "Command failed %s:%d")
_FAILED = re.compile(r"^Command failed .*:(\d+)$")


def handle(h: int) -> str:
    """tc's spelling of a 32-bit class handle (major:minor, hex)."""
    return f"{h >> 16:x}:{h & 0xFFFF:x}"


def change_line(dev: str, parent: int, classid: int, rate_bps: float, ceil_bps: float,
                burst: int, mtu: int, quantum: int | None = None, verb: str = "change"
                ) -> str:
    """One ``class change`` (or ``verb``: ``add``) command for an HTB class, as the
    pacer's pyroute2 call (rates in bit/s, burst = cburst, mtu and quantum in bytes)."""
    if verb not in ("change", "add"):
        raise ValueError(f"tc class verb {verb!r}: change or add")
    line = (f"class {verb} dev {dev} parent {handle(parent)} classid {handle(classid)} "
            f"htb rate {max(1, int(rate_bps))}bit ceil {max(1, int(ceil_bps))}bit "
            f"burst {burst} cburst {burst} mtu {mtu}")
    if quantum is not None:
        line += f" quantum {quantum}"
    return line + "\n"


class TcAck:
    """What tc made of the lines a :meth:`TcBatch.sync` watches, once it has run them."""

    def __init__(self, lines: tuple[int, ...]) -> None:
        self.lines = lines
        self.failures: list[str] = []  # tc's reason for each watched line that failed
        self.dead = ""  # why tc ended before the marker (set with the event)
        self._done = threading.Event()

    def wait(self, timeout: float) -> list[str]:
        """Block until tc has run the watched lines; their failures (tc's reasons), or
        ``[]``.  Raises P4ccError if tc ended first or did not get there in time."""
        if not self._done.wait(timeout):
            raise P4ccError(f"tc -batch did not run its input within {timeout:g} s")
        if self.dead:
            raise P4ccError(f"tc -batch exited before it ran its input: {self.dead}")
        return list(self.failures)


class TcBatch:
    """A ``tc -force -batch -`` child; :meth:`send` writes commands, :meth:`sync` waits
    for them, :meth:`close` waits for it to finish them."""

    def __init__(self, tc: str | None = None) -> None:
        path = tc or shutil.which("tc")
        if path is None:
            raise P4ccError("no `tc` program on PATH (iproute2)")
        self.errors = 0
        self.last_error = ""
        self.sent = 0  # commands sent (sync markers not counted)
        self._line = 0  # input lines written: tc's line number of the last one
        self._lock = threading.Lock()
        self._watched: dict[int, TcAck] = {}  # watched line -> its ack
        self._markers: dict[int, TcAck] = {}  # marker line -> its ack
        # stderr into stdout: failures and their reasons in the order tc ran the lines
        self._proc = subprocess.Popen([path, "-force", "-batch", "-"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read_errors, name="p4cc-tc-errors",
                                        daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, line: str) -> int:
        """Hand tc one command (a line ending in a newline); its input line number."""
        n = self._write(line)
        self.sent += 1
        return n

    def sync(self, lines: tuple[int, ...] = ()) -> TcAck:
        """Send the marker; the returned ack completes once tc has run everything before
        it, with the failures of ``lines`` (line numbers from :meth:`send`)."""
        ack = TcAck(lines)
        with self._lock:
            for n in lines:
                self._watched[n] = ack
            self._markers[self._line + 1] = ack
        try:
            self._write(SYNC_LINE)
        except P4ccError:
            with self._lock:
                self._markers.pop(self._line + 1, None)
                for n in lines:
                    self._watched.pop(n, None)
            raise
        return ack

    def close(self) -> None:
        """End tc's input and wait for it to run what it was given (then kill it)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self._proc.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(CLOSE_TIMEOUT_S)

    def _write(self, line: str) -> int:
        if self._proc.stdin is None:
            raise P4ccError("tc -batch has no stdin")
        try:
            self._proc.stdin.write(line)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise P4ccError(f"tc -batch exited (code {self._proc.poll()}): "
                            f"{self.last_error or exc}") from exc
        self._line += 1
        return self._line

    def _read_errors(self) -> None:
        out: IO[str] | None = self._proc.stdout
        if out is not None:
            reason = ""
            for raw in out:
                text = raw.strip()
                failed = _FAILED.match(text)
                if failed is None:
                    reason = text or reason
                    continue
                self._failed(int(failed.group(1)), reason)
                reason = ""
        with self._lock:  # tc ended: nothing more will be run
            pending = set(self._markers.values())
            self._markers.clear()
            self._watched.clear()
        for ack in pending:
            ack.dead = f"code {self._proc.poll()}; {self.last_error or 'no message'}"
            ack._done.set()

    def _failed(self, n: int, reason: str) -> None:
        """tc reports input line ``n`` failed, for ``reason``."""
        with self._lock:
            marker = self._markers.pop(n, None)
            watcher = self._watched.pop(n, None)
            if marker is not None:
                for k in marker.lines:
                    self._watched.pop(k, None)
        if marker is not None:  # the marker always fails: everything before it has run
            marker._done.set()
            return
        self.errors += 1
        self.last_error = reason
        if watcher is not None:
            watcher.failures.append(reason or f"input line {n} failed")
        else:
            log.warning("HTB rate change failed (tc input line %d): %s", n, reason)
