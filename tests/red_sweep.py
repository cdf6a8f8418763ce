"""Standing-queue sweeps on the one-switch BMv2 rig (tests/dataplane_rig.py; not a test
module).

Shared by tests/test_dataplane_marking.py and lab 1's ``make check``
(labs/lab1-ecn-marking/check.py), which measures the RED curve of a student's program
with the same machinery.  The queue of port ``port`` is slowed over Thrift and the
sender offers more, in cycles that sweep the depth from 0 to beyond Kmax and back; every
delivered packet carries the INT summary whose ``max_qdepth`` is, on one switch, the
``enq_qdepth`` the marking decision used.

The sender paces its frames from a raw socket (prebuilt, see ``dataplane_rig.frames``)
so that the offered rate, not the burst size, sets how fast the queue grows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from dataplane_rig import Delivered, Rig, frames

PORT = 2  # the rig's receiver port (dataplane_rig: port 2 on <prefix>2a)


def send_paced(rig: Rig, prebuilt: Sequence[bytes], pps: float) -> None:
    t0 = time.monotonic()
    for i, f in enumerate(prebuilt):
        due = t0 + i / pps
        while (now := time.monotonic()) < due:
            time.sleep(min(due - now, 0.002))
        rig.tx.send(f)


def drain(rig: Rig, expected: int, timeout_s: float = 30.0, quiet_s: float = 1.0) -> None:
    """Wait until ``expected`` deliveries arrived, or none for ``quiet_s`` (frames lost;
    long enough for BMv2 stalls on a loaded machine, so the queue is empty after)."""
    deadline = time.monotonic() + timeout_s
    last, last_t = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = rig.rx.count()
        if n >= expected:
            return
        if n != last:
            last, last_t = n, time.monotonic()
        elif time.monotonic() - last_t > quiet_s:
            return
        time.sleep(0.005)


def ours(got: list[Delivered], seq0: int, n: int) -> list[Delivered]:
    """Deliveries of this sweep (each sweep has its own sequence range)."""
    return [d for d in got if seq0 <= d.seq < seq0 + n]


def settle(rig: Rig) -> None:
    """Let anything still queued from an earlier sweep leave, then forget it."""
    drain(rig, 1 << 30, quiet_s=0.3)
    rig.rx.take()


def sweep(rig: Rig, n_total: int, cycle: int, pps_in: float, pps_out: float,
          tos_of: dict[int, int], dport: int, seq0: int = 0,
          port: int = PORT) -> list[Delivered]:
    """Cycles of ``cycle`` packets (UDP to ``dport``) offered at ``pps_in`` to a queue
    served at ``pps_out``; each cycle starts from an empty queue."""
    prebuilt = frames(range(seq0, seq0 + n_total), tos_of, dport)
    settle(rig)
    rig.thrift.set_queue_rate(pps_out, port)
    sent = 0
    try:
        while sent < n_total:
            k = min(cycle, n_total - sent)
            send_paced(rig, prebuilt[sent:sent + k], pps_in)
            sent += k
            drain(rig, sent)
    finally:
        rig.thrift.set_queue_rate(1_000_000, port)
    return ours(rig.rx.take(), seq0, n_total)
