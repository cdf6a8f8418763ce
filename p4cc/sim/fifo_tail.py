"""FIFO completion of the fluid queues' tails (``SimConfig.queue_tail = "fifo"``).

The kernel (p4cc.sim.kernel) serves a queue's departures to its flows in proportion to
their bytes in it: processor sharing, the fluid stand-in for FIFO.  It moves the right
number of bytes, but a flow's *last* bytes never leave a queue that stays busy: every
step takes the same fraction of them, so what is left decays geometrically, with the
queue's drain time (depth / rate) as the time constant.  A flow completes when it has
delivered its size to 1 ppb (p4cc.sim.engine), ~ln(10⁹) ≈ 21 drain times after its
bytes would have left a FIFO.  Found in session 11: on the default experiment's
schedule a 2.9 KB mouse had 99.99 % of its bytes delivered 0.17 s after its start and
completed 0.62 s after it; BMv2's FIFO queues finished it in 10 ms.

The correction tracks, per queue, the cumulative bytes that arrived (kept, after
drops) and that departed, and per (flow, hop) the arrival count after the flow's
latest arrival at that queue (its *tag*).  A FIFO has sent every byte that arrived
before the tag once the departures reach the tag.  So when a flow has injected all its
bytes (``remaining`` 0) and a queue's departures have passed the flow's tag there, the
flow's bytes still held at that hop are released: to the next hop's arrivals, or
delivered at the last hop.  Only the geometric tail is moved; the bytes a queue serves
per step and every other flow's share are the kernel's.  The released bytes are
counted as sent by that queue (``tx``) and as departed from it (``dq``; until session 18
they were not, so the per-queue clock fell behind by every released tail and stayed
behind once the queue emptied: late in a run a mouse left ~21 drain times late again).
A slot's tag is set by every arrival at a hop, so bytes held at a hop always have the tag
of their own flow (a finished or rerouted slot holds no bytes).

A released tail is service on top of the step's: the kernel has already sent a full
step's bytes, some of them other flows' bytes that a FIFO would have sent after the
tail.  Those cannot be taken back, so the queue *owes* the tail's bytes and pays them
from its next steps' service (``charge``) before it sends anything else: over any
window a queue then sends at most its rate times the window plus one step's releases,
and its depth follows a FIFO's (any work-conserving queue's) again once the debt is
paid.  Until session 21 nothing was owed: in bursts of finishing mice a port sent up
to 21 % above its rate in a 0.25 s interval (the default experiment, seed 6, leaf2's
port toward h4: 6.06 Mb/s on a 5 Mb/s link), its queue stayed lower than BMv2's, and
the departures clock that releases tails ran ahead of the link.
"""

from __future__ import annotations

# ``eng`` (Any) is the Engine, which imports this module; make lint's acyclic-siblings
# contract forbids importing it back, even under TYPE_CHECKING.
from typing import Any

import numpy as np

#: Tolerance of "departures have reached the tag", relative to the tag (float sums).
REL_TOL = 1e-12


class FifoTail:
    """The per-queue counters and per-(slot, hop) tags of one engine."""

    def __init__(self, n_queues: int) -> None:
        self.aq = np.zeros(n_queues)  # kept bytes that arrived at each queue so far
        self.dq = np.zeros(n_queues)  # bytes each queue sent so far
        self.tag = np.zeros((0, 0))  # (cap, H): aq after the slot's latest arrival
        self._inflow = np.zeros((0, 0))
        #: bytes each queue released as tails and has not yet paid back from its service
        self.owed = np.zeros(n_queues)
        self._owing = False

    def charge(self, serve: np.ndarray) -> np.ndarray:
        """The bytes each queue may send this step: ``serve`` less what it still owes
        for tails it released early (paid first, also while its depth is 0: a FIFO would
        still be sending the bytes the kernel sent ahead of the tail)."""
        if not self._owing:
            return serve
        paid = np.minimum(self.owed, serve)
        self.owed -= paid
        self._owing = bool(np.count_nonzero(self.owed))
        out: np.ndarray = serve - paid
        return out

    def _fit(self, shape: tuple[int, int]) -> None:
        """Grow the (slot, hop) arrays with the engine's pool (new rows: tag 0)."""
        if self.tag.shape == shape:
            return
        tag = np.zeros(shape)
        r, c = min(shape[0], self.tag.shape[0]), min(shape[1], self.tag.shape[1])
        tag[:r, :c] = self.tag[:r, :c]
        self.tag, self._inflow = tag, np.zeros(shape)

    def after_step(self, eng: Any, send: np.ndarray, old_dep: np.ndarray, dep: np.ndarray,
                   q: np.ndarray, q_new: np.ndarray, dep_q: np.ndarray) -> bool:
        """Update the counters and tags with the step the kernel just made and release
        the tails that a FIFO would have sent.  ``send``: bytes injected per slot;
        ``old_dep``: the previous step's departures (this step's arrivals at hops ≥ 1);
        ``dep``: this step's departures (next step's arrivals; changed in place);
        ``q``, ``q_new``, ``dep_q``: per-queue depth before and after, bytes sent.
        Returns whether a released tail completed a flow's delivery."""
        path = eng.path
        self._fit(path.shape)
        self.aq += q_new - q + dep_q  # arrivals that were kept (not dropped)
        self.dq += dep_q
        inflow = self._inflow
        inflow[:, 0] = send
        inflow[:, 1:] = old_dep[:, :-1]
        np.copyto(self.tag, self.aq[path], where=inflow > 0)
        tail = eng.active & (eng.remaining <= 0.0)
        if not np.count_nonzero(tail):
            return False
        idx = tail.nonzero()[0]
        held = eng.b[idx]
        tg = self.tag[idx]
        due = (held > 0.0) & (self.dq[path[idx]] >= tg - REL_TOL * tg)
        if not np.count_nonzero(due):
            return False
        k, h = due.nonzero()
        s = idx[k]
        x = held[k, h]
        eng.b[s, h] = 0.0
        np.add.at(eng.counters.tx, path[s, h], x)
        # and as departed from it: the next step's depth no longer holds them, so its
        # arrivals (q_new - q + dep_q) count them once more; without this aq - dq kept
        # every tail ever released, and each later tag waited for those bytes again
        np.add.at(self.dq, path[s, h], x)
        np.add.at(self.owed, path[s, h], x)  # and paid back from the next steps' service
        self._owing = True
        last = h == eng.last_hop[s]
        # a slot appears once per hop, so each (s, h) and each last-hop s is unique
        dep[s[~last], h[~last]] += x[~last]
        eng.delivered[s[last]] += x[last]
        done = s[last]
        return bool(np.count_nonzero(eng.delivered[done] >= eng.thr[done]))
