"""When a sender's flows start: at their start time, or when another flow completes.

A FlowSpec with ``after >= 0`` starts when the flow whose ``ref`` is ``after`` has
completed (and not before its own ``start_s``), as the simulator plays a schedule's
``after`` column (p4cc.sim.flows: ready = max(start, completion)).  The flow it waits
for may belong to another host's sender: every sender appends to one shared
*completions* file (one line per event; O_APPEND writes of a line are atomic)

* ``REF T`` when flow ``REF`` completed, ``T`` on the run clock (the senders share it:
  their t0 is the run's), so a flow released by another host's completion is due at
  that completion, as in the simulator, and a late start shows in its ``start_s``;
* ``s REF`` when flow ``REF`` started, so that the sender of the flow waiting for it
  sets that flow up ahead (socket, controller, HTB class) as it does for its own chains.

The senders with waiting flows read what the others appended.  Each sender also binds
a Unix datagram socket in ``<completions>.wake/`` and every append sends one byte to
the others' sockets: a sender waiting in ``select`` reads the file at once, not at its
next timed pass (up to 5 ms later).  (Path sockets, not abstract ones: each host has
its own network namespace, and abstract Unix sockets belong to one.)  A socket's path
must fit ``sun_path`` (107 bytes); under a deeper run directory (a sweep's point folders
make one) the sockets are bound and addressed as ``/proc/self/fd/<fd>/<name>``, ``<fd>``
an open descriptor of the folder, which Linux resolves to the same folder.  Until session
35 such senders had no wake-up socket, noticed a chained flow at their next pass, and
started 5-8 % of a storage run's flows more than one RTT late (the run unfaithful).  A
flow released after its ``stop_s`` is not started (the workload has ended).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from p4cc.hostcc.flow import FlowSpec

log = logging.getLogger(__name__)

_CHAINS = itertools.count()  # wake-up sockets of this process (tests run several)
#: longest path a Unix socket can bind (sun_path is 108 bytes with its NUL)
_SUN_PATH_MAX = 107


class FlowChain:
    def __init__(self, specs: Sequence[FlowSpec], completions: str | Path | None = None
                 ) -> None:
        self.specs = list(specs)
        self._heap: list[tuple[float, int]] = []
        self._waiting: dict[int, list[int]] = {}
        for i, s in enumerate(self.specs):
            if s.after >= 0:
                self._waiting.setdefault(s.after, []).append(i)
            else:
                self._heap.append((s.start_s, i))
        heapq.heapify(self._heap)
        self._local = {s.ref for s in self.specs if s.ref >= 0}
        self._index = {s.ref: i for i, s in enumerate(self.specs) if s.ref >= 0}
        self._standby: set[int] = set()  # waiting flows handed out by standing_by
        self._standing: set[int] = set()  # ...of those, the ones not started (or skipped)
        self._released: list[tuple[float, int]] = []  # chained, released, not yet due
        self.started: set[int] = set()
        self.skipped = 0  # released after their stop_s
        self._done: set[int] = set()
        #: refs that started (here or at another sender) and that flows here wait for:
        #: what ``standing_by`` looks at (not every waiting flow, at every pass)
        self._armed: set[int] = set()
        self._path = Path(completions) if completions else None
        self._fd: int | None = None  # reads (its own offset: what we have seen)
        self._wfd: int | None = None  # appends (an O_APPEND write moves its offset)
        self._buf = b""
        #: this sender's wake-up socket (readable when another sender appended)
        self.wake_socket: socket.socket | None = None
        self._wake_path: Path | None = None
        self._wake_dirfd: int | None = None  # the folder, when its path is too long
        if self._path is not None:
            self._wfd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            self._fd = os.open(self._path, os.O_RDONLY)
            self._bind_wake(self._path.with_name(self._path.name + ".wake"))

    def _bind_wake(self, folder: Path) -> None:
        path = folder / f"{os.getpid()}.{next(_CHAINS)}"
        folder.mkdir(exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by an earlier process with this pid
        if len(os.fsencode(path)) > _SUN_PATH_MAX:
            self._wake_dirfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.bind(self._address(path))
        except OSError as exc:
            s.close()
            if self._wake_dirfd is None:
                raise
            os.close(self._wake_dirfd)  # e.g. no /proc: poll, as before session 35
            self._wake_dirfd = None
            log.warning("chain: cannot bind a wake-up socket in %s (%s); chained flows are "
                        "noticed at the sender's next pass (<= 5 ms)", folder, exc)
            with contextlib.suppress(OSError):
                folder.rmdir()
            return
        s.setblocking(False)
        self.wake_socket, self._wake_path = s, path

    def _address(self, path: Path) -> str:
        """The name to bind or send to for ``path`` in the wake-up folder: the path
        itself, or ``/proc/self/fd/<fd>/<name>`` when the path is too long for a socket."""
        if self._wake_dirfd is None:
            return os.fsdecode(path)
        return f"/proc/self/fd/{self._wake_dirfd}/{os.fsdecode(path.name)}"

    def close(self) -> None:
        for fd in (self._fd, self._wfd):
            if fd is not None:
                os.close(fd)
        self._fd = self._wfd = None
        if self.wake_socket is not None:
            self.wake_socket.close()
            self.wake_socket = None
        if self._wake_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._wake_path.unlink()
            with contextlib.suppress(OSError):  # the last sender out removes the folder
                self._wake_path.parent.rmdir()
            self._wake_path = None
        if self._wake_dirfd is not None:
            os.close(self._wake_dirfd)
            self._wake_dirfd = None

    def _append(self, line: str) -> None:
        """Append one line to the completions file and wake the other senders."""
        if self._wfd is None:
            return
        os.write(self._wfd, line.encode())
        if self._wake_path is None or self.wake_socket is None:
            return
        for peer in self._wake_path.parent.iterdir():
            if peer == self._wake_path:
                continue
            try:  # a wake-up only: a full, vanished or odd peer has nothing to lose
                self.wake_socket.sendto(b"!", self._address(peer))
            except OSError:
                pass

    @property
    def waiting(self) -> int:
        return sum(len(v) for v in self._waiting.values())

    def any_waiting(self) -> bool:
        """Whether a flow still waits for another to complete (cheaper than ``waiting``)."""
        return bool(self._waiting)

    def next_start(self) -> float:
        return self._heap[0][0] if self._heap else float("inf")

    def exhausted(self) -> bool:
        """Nothing left that could ever start: waiting flows count while one of this
        sender's flows, or (with a completions file) another sender's, may still
        complete what they wait for."""
        if self._heap:
            return False
        if not self._waiting or self._fd is not None:
            return not self._waiting
        return not any(ref in self._local for ref in self._waiting)

    def _release(self, ref: int, t: float) -> None:
        if ref in self._done:
            return
        self._done.add(ref)
        for i in self._waiting.pop(ref, []):
            ready = max(self.specs[i].start_s, t)
            heapq.heappush(self._heap, (ready, i))
            if i not in self._standby:
                heapq.heappush(self._released, (ready, i))

    def _read_others(self, t: float) -> None:
        if self.wake_socket is not None:
            with contextlib.suppress(BlockingIOError):
                while self.wake_socket.recv(64):
                    pass
        if self._fd is None or not self._waiting:
            return
        while True:
            chunk = os.read(self._fd, 65536)  # the fd's offset is where we stopped
            if not chunk:
                break
            self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            parts = line.split()
            if len(parts) == 2 and parts[0] == b"s":
                self._arm(int(parts[1]))
            elif len(parts) == 2:  # completed at a time on the run clock, not later than now
                self._release(int(parts[0]), min(float(parts[1]), t))
            elif len(parts) == 1:
                self._release(int(parts[0]), t)

    def due(self, t: float) -> list[FlowSpec]:
        """The flows to start now, their ``start_s`` set to when they became due."""
        self._read_others(t)
        out = []
        while self._heap and self._heap[0][0] <= t:
            ready, i = heapq.heappop(self._heap)
            spec = self.specs[i]
            self._standing.discard(i)
            if ready > spec.stop_s:
                self.skipped += 1
                continue
            self.started.add(i)
            self._arm(spec.ref)
            if spec.ref >= 0:  # (another sender may wait for it too)
                self._append(f"s {spec.ref}\n")
            out.append(spec if ready == spec.start_s else replace(spec, start_s=ready))
        return out

    def completed(self, spec: FlowSpec, t: float) -> None:
        """``spec`` completed at ``t`` (run clock: when its last ACK arrived): release
        who waits for it, here and elsewhere, as due at ``t``."""
        if spec.ref < 0:
            return
        self._append(f"{spec.ref} {t:.6f}\n")
        self._release(spec.ref, t)

    def standing_by(self, t: float, ahead_s: float) -> list[FlowSpec]:
        """Chained flows to set up ahead, each handed out once: those released (the flow
        they waited for has completed) whose start is within ``ahead_s`` of ``t``, and
        those still waiting that may be released any moment -- the flow each waits for
        has started (this sender's, or another's whose start is in the completions file),
        and its own ``start_s`` is within ``ahead_s`` of ``t``.  The sender sets them up
        ahead (socket, controller, HTB class) as it does scheduled flows, so a start
        does not wait for the set-up (a closed-loop all-to-all on BMv2 started its
        chained flows 2.5 ms late at the median, 10 % of them more than one base RTT)."""
        out = []
        while self._released and self._released[0][0] <= t + ahead_s:
            _ready, i = heapq.heappop(self._released)
            if i not in self._standby and i not in self.started:
                self._standby.add(i)
                self._standing.add(i)
                out.append(self.specs[i])
        for ref in list(self._armed):
            later = False  # a waiter whose own start is beyond the lead
            for i in self._waiting.get(ref, []):
                if i in self._standby:
                    continue
                if self.specs[i].start_s <= t + ahead_s:
                    self._standby.add(i)
                    self._standing.add(i)
                    out.append(self.specs[i])
                else:
                    later = True
            if not later:
                self._armed.discard(ref)
        return out

    def standing(self) -> bool:
        """Whether a flow handed out by ``standing_by`` has not started yet: it starts
        the moment the flow it waits for completes, which may be any moment."""
        return bool(self._standing)

    def _arm(self, ref: int) -> None:
        """Flow ``ref`` started: the flows here waiting for it may be set up ahead."""
        if ref >= 0 and ref in self._waiting:
            self._armed.add(ref)

    def not_started(self) -> list[FlowSpec]:
        return [s for i, s in enumerate(self.specs) if i not in self.started]
