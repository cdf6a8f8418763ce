"""Marking by the depth at enqueue (SimConfig.mark_depth): the queue history the step
kernel (p4cc.sim.kernel, both forms) reads, and its reference form.

BMv2 marks a packet by the depth it found when it was enqueued (``enq_qdepth``), and
the mark reaches the receiver when the packet leaves, one queueing delay later.  A fluid
queue has no packets; per queue the engine keeps, for as many steps as the buffer takes
to drain, the depth at the start of each step and the cumulative bytes kept (arrivals
minus drops) through it, and marks a step's departures by the depth their head byte
found (docs/simulator.md "ECN marking").
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Cumulative byte counts closer than this are equal (float sums of fluid steps).
HALF_BYTE = 0.5
#: The engine's history holds at most this many (step, queue) cells per array (4 Mi x
#: 8 B = 32 MiB each); a buffer that takes longer to drain marks its oldest bytes by the
#: oldest row.
MARK_HISTORY_CELLS = 1 << 22


def marking_depth(q: FloatArray, hist_a: FloatArray, hist_q: FloatArray, acum: FloatArray,
                  qptr: npt.NDArray[np.int64], step: int) -> FloatArray:
    """The depth each queue's departures this step are marked by.

    With an empty history (``SimConfig.mark_depth == "departure"``): ``q``, the depth at
    the start of the step.  Otherwise the depth the queue's head byte found when it
    arrived, as BMv2 marks by ``enq_qdepth`` (FIFO: the marks of bytes that arrived at a
    deep queue leave with them, one queueing delay later).  Ring row ``k % n`` holds
    ``hist_q`` the depth at the start of step ``k`` and ``hist_a`` the cumulative kept
    arrivals (arrivals - drops) through step ``k``; ``acum`` is that sum through the last
    step.  The head byte is the first still queued: ``acum - q`` bytes arrived before it,
    so it arrived in the first step whose ``hist_a`` exceeds that; ``qptr`` only moves
    forward.  A head older than the ring (a paused or stalled port) uses the oldest row.
    The departures of a step all carry their head byte's depth (a step serves at most
    ``rate x dt`` bytes: one packet at testbed scale)."""
    n = hist_a.shape[0]
    if n == 0:
        return q
    hist_q[step % n] = q
    qm = q.copy()
    head = acum - q
    lo = step - n + 1
    for j in range(q.shape[0]):
        ptr = max(int(qptr[j]), lo)
        while ptr < step and hist_a[ptr % n, j] <= head[j] + HALF_BYTE:
            ptr += 1
        qptr[j] = ptr
        qm[j] = hist_q[ptr % n, j]
    return qm


def mark_history(rows: int, nq: int) -> tuple[FloatArray, FloatArray, FloatArray,
                                                npt.NDArray[np.int64]]:
    """marking_depth's state for ``nq`` queues: (hist_a, hist_q, acum, qptr); ``rows``
    0 marks by the depth at departure."""
    return (np.zeros((rows, nq)), np.zeros((rows, nq)), np.zeros(nq),
            np.zeros(nq, np.int64))
