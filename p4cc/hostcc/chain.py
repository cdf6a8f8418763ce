"""When a sender's flows start: at their start time, or when another flow completes.

A FlowSpec with ``after >= 0`` starts when the flow whose ``ref`` is ``after`` has
completed (and not before its own ``start_s``), as the simulator plays a schedule's
``after`` column (p4cc.sim.flows: ready = max(start, completion)).  The flow it waits
for may belong to another host's sender: every sender appends the ``ref`` of each flow
it completes to one shared *completions* file (one line each; O_APPEND writes of a line
are atomic) and the senders with waiting flows read what the others appended.  A flow
released after its ``stop_s`` is not started (the workload has ended).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from p4cc.hostcc.flow import FlowSpec


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
        self._released: list[tuple[float, int]] = []  # chained, released, not yet due
        self.started: set[int] = set()
        self.skipped = 0  # released after their stop_s
        self._done: set[int] = set()
        self._path = Path(completions) if completions else None
        self._fd: int | None = None  # reads (its own offset: what we have seen)
        self._wfd: int | None = None  # appends (an O_APPEND write moves its offset)
        self._buf = b""
        if self._path is not None:
            self._wfd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            self._fd = os.open(self._path, os.O_RDONLY)

    def close(self) -> None:
        for fd in (self._fd, self._wfd):
            if fd is not None:
                os.close(fd)
        self._fd = self._wfd = None

    @property
    def waiting(self) -> int:
        return sum(len(v) for v in self._waiting.values())

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
        if self._fd is None or not self._waiting:
            return
        while True:
            chunk = os.read(self._fd, 65536)  # the fd's offset is where we stopped
            if not chunk:
                break
            self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if line.strip():
                self._release(int(line), t)

    def due(self, t: float) -> list[FlowSpec]:
        """The flows to start now, their ``start_s`` set to when they became due."""
        self._read_others(t)
        out = []
        while self._heap and self._heap[0][0] <= t:
            ready, i = heapq.heappop(self._heap)
            spec = self.specs[i]
            if ready > spec.stop_s:
                self.skipped += 1
                continue
            self.started.add(i)
            out.append(spec if ready == spec.start_s else replace(spec, start_s=ready))
        return out

    def completed(self, spec: FlowSpec, t: float) -> None:
        """``spec`` completed at ``t``: release who waits for it, here and elsewhere."""
        if spec.ref < 0:
            return
        if self._wfd is not None:
            os.write(self._wfd, f"{spec.ref}\n".encode())
        self._release(spec.ref, t)

    def standing_by(self, t: float, ahead_s: float) -> list[FlowSpec]:
        """Chained flows to set up ahead, each handed out once: those released (the flow
        they waited for has completed) whose start is within ``ahead_s`` of ``t``, and
        those still waiting that may be released any moment -- the flow each waits for
        is this sender's own and has started, and its own ``start_s`` is within
        ``ahead_s`` of ``t``.  The sender sets them up ahead (socket, controller, HTB
        class) as it does scheduled flows, so a start does not wait for the set-up (a
        closed-loop all-to-all on BMv2 started its chained flows 2.5 ms late at the
        median, 10 % of them more than one base RTT).  Flows still waiting for another
        sender's flow are not: when that starts cannot be seen from here."""
        out = []
        while self._released and self._released[0][0] <= t + ahead_s:
            _ready, i = heapq.heappop(self._released)
            if i not in self._standby and i not in self.started:
                self._standby.add(i)
                out.append(self.specs[i])
        for ref, waiters in self._waiting.items():
            j = self._index.get(ref)
            if j is None or j not in self.started:
                continue
            for i in waiters:
                if i not in self._standby and self.specs[i].start_s <= t + ahead_s:
                    self._standby.add(i)
                    out.append(self.specs[i])
        return out

    def not_started(self) -> list[FlowSpec]:
        return [s for i, s in enumerate(self.specs) if i not in self.started]
