"""Whole-packet losses of a flow's last bytes (``SimConfig.tail_loss = "packet"``).

The kernel (p4cc.sim.kernel) drops a full queue's excess as a fluid: every flow that
arrives loses the same fraction of its arrivals, however few bytes it brought.  For a
flow that is still sending this is the expected loss.  For a flow that has injected
all its bytes it makes a chain that never ends: go-back-N resends what its receiver
misses (p4cc.sim.gobackn), the resend loses the same fraction again at the same queue,
its NAK comes back one queueing delay later, and so on, each round a factor ``1 - f``
(the fraction the queue drops) closer to the flow's size and never there.  A flow
completes at 1 ppb of its size (p4cc.sim.engine), so the chain lasts ~ln(10⁹) / ln(1/f)
rounds of a full queue's drain time.  Found in session 29: at lossy WebSearch 70 %
(examples/acc_pet_websearch.yaml, seed 10) the port toward h1 dropped half its
arrivals and kept 1 MB (328 µs a round); a 5.7 KB mouse went through 35 NAK rounds,
its missing bytes halving in each, 18 of them for less than one byte, and completed at
11.2 ms with 99.9 % delivered at 2.4 ms.  The slowest mice of that run all ended so.
A packet fabric resends whole packets, each dropped or not: resending one packet into
a queue that drops a fraction f of its arrivals takes 1 / (1 - f) rounds on average.
(``queue_tail = "fifo"`` (p4cc.sim.fifo_tail) does not help here: it releases bytes a
queue holds, and these bytes were dropped.)

The rule: a flow that has nothing left to inject and lost bytes in this step lost a
packet with the probability that one of the packets it brought to the dropping queues
was dropped, ``1 - (1 - f)^n`` with ``f`` its dropped fraction and ``n`` its arrivals
there in packets (at least one: a resent sliver is a whole packet on the wire).  The
draw comes from a hash of (seed, flow id, step), as the NP's CNP draw
(p4cc.sim.kernel.uniform), on a stream of its own.  When no packet is lost the flow's
dropped bytes go back into the queues that dropped them (the queue holds up to that
many bytes over its buffer for a step; the next step's tail drop takes them from the
arrivals then), and the step's drop counters, the FIFO-tail counters and the marking
history count them as kept.  A queue takes back at most what it sends in the next step
(less any bytes over its buffer already): the kernel charges a step's drops to that
step's arrivals, so no more may be due than arrive.  The flows whose bytes do not fit
keep their loss, and with PFC (a paused queue sends nothing) every loss stands.  Flows
still sending, and bulk flows, keep the fluid drop.
"""

from __future__ import annotations

# ``eng`` (Any) is the Engine, which imports this module; make lint's acyclic-siblings
# contract forbids importing it back, even under TYPE_CHECKING.
from typing import Any

import numpy as np

from p4cc.sim.kernel import TINY, uniform

#: SimConfig.tail_loss values
TAIL_LOSSES = ("packet", "fluid")
#: Mixed into each flow's hash base so the loss draw is a stream apart from the CNP draw.
SALT = np.uint64(0xA0761D6478BD642F)


def step_inflow(send: np.ndarray, arrived: np.ndarray) -> np.ndarray:
    """Bytes each (slot, hop) brought to its queue this step: the injection at hop 0,
    the hop before's last departures (``arrived``) further on."""
    inflow = np.empty_like(arrived)
    inflow[:, 0] = send
    inflow[:, 1:] = arrived[:, :-1]
    return inflow


def drop_fraction(inflow: np.ndarray, path: np.ndarray, q: np.ndarray, dep_q: np.ndarray,
                  buf: np.ndarray) -> np.ndarray:
    """The fraction of its arrivals each queue dropped this step, with the kernel's
    arithmetic (``q``: depth at the start of the step, ``dep_q``: bytes it sent)."""
    arrivals = np.bincount(path.ravel(), inflow.ravel(), len(q))
    drops = np.maximum(q + arrivals - dep_q - buf, 0.0)
    out: np.ndarray = drops / np.maximum(arrivals, TINY)
    return out


def packet_lost(lost: np.ndarray, brought: np.ndarray, pkt: float, u: np.ndarray) -> np.ndarray:
    """Whether a flow that lost ``lost`` of the ``brought`` bytes it took to dropping
    queues lost a packet, for uniform draws ``u``: ``u < 1 - (1 - f)^max(1, brought/pkt)``."""
    f = np.clip(lost / np.maximum(brought, TINY), 0.0, 1.0)
    n = np.maximum(brought / pkt, 1.0)
    out: np.ndarray = u < -np.expm1(n * np.log1p(-np.minimum(f, 1.0 - 2.0**-53)))
    return out


def spare_tails(eng: Any, send: np.ndarray, arrived: np.ndarray, q: np.ndarray,
                q_new: np.ndarray, dep_q: np.ndarray, lost_f: np.ndarray) -> bool:
    """Draw the losses of flows with nothing left to inject (module docstring); give
    back the bytes of those that lost no packet.  Changes ``eng.b``, ``lost_f``,
    ``q_new`` and the engine's counters in place; returns whether any loss stands."""
    idx = ((lost_f > 0) & (eng.remaining <= 0) & np.isfinite(eng.size)).nonzero()[0]
    if not len(idx):
        return True
    path = eng.path
    inflow = step_inflow(send, arrived)
    fdrop = drop_fraction(inflow, path, q, dep_q, eng.fabric.buffer_bytes)
    fh = fdrop[path[idx]]
    brought = (inflow[idx] * (fh > 0)).sum(axis=1)
    u = uniform(eng.hbase[idx] ^ SALT, eng.steps)
    spare = ~packet_lost(lost_f[idx], brought, eng._pkt, u)
    if np.count_nonzero(spare):
        s, back = _fitting(eng, idx[spare], inflow[idx[spare]] * fh[spare], q_new)
        if len(s):
            _give_back(eng, s, back, q_new)
            lost_f[s] = 0.0
    return bool(np.count_nonzero(lost_f))


def room(eng: Any, q_new: np.ndarray) -> np.ndarray:
    """Bytes each queue can hold over its buffer now and still drop no more than
    arrives in the next step (the kernel charges drops to arrivals): what it will send
    then, less what it owes for released tails and what it holds over the buffer
    already.  Zero with PFC: a paused queue sends nothing."""
    if eng.pfc is not None:
        return np.zeros_like(q_new)
    serve = eng._serve - (eng._fifo.owed if eng._fifo is not None else 0.0)
    out: np.ndarray = np.maximum(serve - np.maximum(q_new - eng.fabric.buffer_bytes, 0.0), 0.0)
    return out


def _fitting(eng: Any, s: np.ndarray, back: np.ndarray,
             q_new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slots of ``s`` whose bytes ``back`` fit (:func:`room`); the losses of the
    others stand (all those that gave back to a queue without room for them all)."""
    per_q = np.bincount(eng.path[s].ravel(), back.ravel(), len(q_new))
    over = per_q > room(eng, q_new)
    if not np.count_nonzero(over):
        return s, back
    fits = ~(over[eng.path[s]] & (back > 0)).any(axis=1)
    return s[fits], back[fits]


def _give_back(eng: Any, s: np.ndarray, back: np.ndarray, q_new: np.ndarray) -> None:
    """Slots ``s`` keep the bytes ``back`` (per hop) their queues dropped this step."""
    eng.b[s] += back
    per_q = np.bincount(eng.path[s].ravel(), back.ravel(), len(q_new))
    q_new += per_q
    eng.counters.drops -= per_q
    hist_a, _, acum, _ = eng._marks
    acum += per_q  # kept arrivals of this step (the marking depth's history)
    if hist_a.shape[0]:
        hist_a[eng.steps % hist_a.shape[0]] += per_q
    fifo = eng._fifo
    if fifo is not None:  # kept arrivals, and each slot's tag after its arrival
        fifo.aq += per_q
        tag = fifo.tag[s]
        np.copyto(tag, fifo.aq[eng.path[s]], where=back > 0)
        fifo.tag[s] = tag
