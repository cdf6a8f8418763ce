"""HTB class changes through one long-lived ``tc -force -batch -`` process.

The pacer changes a flow class's rate at every DCQCN rate change.  Through pyroute2
each ``change-class`` cost ~0.7 ms of CPU, nearly all of it in Python building the
message (HTB's two 256-entry rate tables; ``p4cc bench calibrate``:
``host_rate_change_us``), and it held the GIL the sending thread needs.  Here the pacer
writes one line per change to a ``tc`` process that reads commands from its stdin
(tc(8), ``-batch``; ``-force`` goes on after a failed command), so tc's C code builds
the message.  The process is started from the pacer's thread, so it runs in that
thread's network namespace.

A change is sent, not acknowledged: tc reports a failure on its stderr, which a reader
thread logs and counts (:attr:`TcBatch.errors`).  The classes are created and removed
by pyroute2 as before (synchronous, with errors as exceptions), so a change always
follows the creation of its class.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
from typing import IO

from p4cc.errors import P4ccError

log = logging.getLogger(__name__)

#: how long ``close`` waits for tc to finish the commands it was given
CLOSE_TIMEOUT_S = 5.0


def handle(h: int) -> str:
    """tc's spelling of a 32-bit class handle (major:minor, hex)."""
    return f"{h >> 16:x}:{h & 0xFFFF:x}"


def change_line(dev: str, parent: int, classid: int, rate_bps: float, ceil_bps: float,
                burst: int, mtu: int, quantum: int | None = None) -> str:
    """One ``class change`` command for an HTB class, as the pacer's pyroute2 call
    (rates in bit/s, burst = cburst, mtu and quantum in bytes)."""
    line = (f"class change dev {dev} parent {handle(parent)} classid {handle(classid)} "
            f"htb rate {max(1, int(rate_bps))}bit ceil {max(1, int(ceil_bps))}bit "
            f"burst {burst} cburst {burst} mtu {mtu}")
    if quantum is not None:
        line += f" quantum {quantum}"
    return line + "\n"


class TcBatch:
    """A ``tc -force -batch -`` child; :meth:`send` writes commands, :meth:`close` waits
    for it to finish them."""

    def __init__(self, tc: str | None = None) -> None:
        path = tc or shutil.which("tc")
        if path is None:
            raise P4ccError("no `tc` program on PATH (iproute2)")
        self.errors = 0
        self.last_error = ""
        self.sent = 0
        self._proc = subprocess.Popen([path, "-force", "-batch", "-"], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read_errors, name="p4cc-tc-errors",
                                        daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, line: str) -> None:
        """Hand tc one command (a line ending in a newline)."""
        stdin = self._stdin()
        try:
            stdin.write(line)
            stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise P4ccError(f"tc -batch exited (code {self._proc.poll()}): "
                            f"{self.last_error or exc}") from exc
        self.sent += 1

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

    def _stdin(self) -> IO[str]:
        if self._proc.stdin is None:
            raise P4ccError("tc -batch has no stdin")
        return self._proc.stdin

    def _read_errors(self) -> None:
        err = self._proc.stderr
        if err is None:
            return
        for line in err:
            text = line.strip()
            if not text:
                continue
            # tc prints the error, then "Command failed -:N" naming the input line
            if text.startswith("Command failed"):
                self.errors += 1
                log.warning("HTB rate change failed (%s): %s", text, self.last_error)
            else:
                self.last_error = text
