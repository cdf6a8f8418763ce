"""Go-back-N loss recovery in the fluid engine (``SimConfig.loss_recovery="go-back-n"``).

RoCE's transport, p4cc's hosts (p4cc.hostcc: receiver.py, flow.py) and the ns-3 RDMA
model the HPCC/ACC evaluations used all recover a loss by going back N: the receiver
drops every packet after a gap and answers with a NAK carrying its expected PSN; the
sender rewinds to that PSN and sends everything after it again.  A loss therefore costs
the flow all the bytes it sent between the lost packet and the NAK's arrival -- about
one RTT of its rate plus the queue ahead -- and those bytes still cross the fabric,
taking link capacity, before the receiver throws them away.  Selective resending of the
lost bytes alone (``"selective"``, the engine's model before this) makes losses far
cheaper, so a setting that overflows buffers looks better on the simulator than on BMv2
(docs/simulator.md, "Loss recovery").

The fluid form, per flow slot (arrays of the engine, see p4cc.sim.slots.FRESH):

* ``gbn_epsn``: the receiver's expected byte when a gap opened (NaN: no gap pending).
  At the step a flow first loses bytes it is ``delivered`` plus the flow's bytes that
  are past the drop's queue (the fullest on its path) and not already doomed: they are
  taken as in order, what is upstream as behind the gap.  Losses while a gap is pending
  draw no second NAK (the receiver repeats the NAK for the same ePSN; the sender
  ignores NAKs triggered by packets sent before its rewind).
* at the NAK (one feedback delay later, when selective resending would add the lost
  bytes back): the sender rewinds, ``remaining = size - ePSN``; bytes that reached the
  receiver beyond ePSN are discarded (``delivered`` is cut to ePSN) and the flow's bytes
  still in the fabric beyond ePSN become ``junk``;
* ``junk`` bytes are delivered and discarded first (FIFO: they are ahead of the resent
  bytes); a drop of junk bytes is no new loss;
* the loss notice arrives when the flow's next bytes reach the receiver: after the
  queues on its path (p4cc.sim.engine), not one base RTT after the drop;
* a flow left with nothing in flight, nothing to send and bytes missing (the ePSN was
  taken too far ahead) times out at the next telemetry interval and goes back to what
  its receiver has (``timeouts``).
"""

from __future__ import annotations

import numpy as np

from p4cc.errors import ConfigError

LOSS_RECOVERY = ("go-back-n", "selective")


def check_mode(mode: str) -> str:
    if mode not in LOSS_RECOVERY:
        raise ConfigError(f"SimConfig.loss_recovery must be one of {', '.join(LOSS_RECOVERY)}, "
                          f"got {mode!r}")
    return mode


def in_flight(b: np.ndarray, prev_dep: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Bytes of flows ``idx`` in the fabric: queued at a hop or between two hops."""
    out: np.ndarray = b[idx].sum(axis=1) + prev_dep[idx].sum(axis=1)
    return out


def ahead_of_drop(b: np.ndarray, prev_dep: np.ndarray, path: np.ndarray,
                  fill: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Bytes of flows ``idx`` in the fabric past the queue where they lost bytes: the
    fullest queue on each one's path (``fill``: depth / buffer per queue; the engine
    sums a flow's losses over its hops, so the hop is inferred), queued there or
    downstream, or in transit from there on.  What is upstream is behind the drop."""
    f = fill[path[idx]]
    hop = f.argmax(axis=1)
    past = np.arange(path.shape[1])[None, :] >= hop[:, None]
    out: np.ndarray = ((b[idx] + prev_dep[idx]) * past).sum(axis=1)
    return out


def on_losses(idx: np.ndarray, lost_f: np.ndarray, junk: np.ndarray, epsn: np.ndarray,
              delivered: np.ndarray, flight: np.ndarray) -> np.ndarray:
    """Flows ``idx`` lost ``lost_f[idx]`` bytes this step (``flight``: their bytes in
    the fabric ahead of the drop after it, :func:`ahead_of_drop`).  Drops of junk use
    it up first; a real loss opens a gap where none is pending.  Returns the slots
    whose loss draws a NAK (a subset of idx)."""
    j = np.minimum(junk[idx], lost_f[idx])
    junk[idx] -= j
    real = lost_f[idx] - j > 0
    ahead = delivered[idx] + np.maximum(flight - junk[idx], 0.0)
    new = real & np.isnan(epsn[idx])
    opened = idx[new]
    epsn[opened] = ahead[new]
    # a later loss in the same gap (bytes that were upstream of the first drop) can only
    # move the expected byte back
    again = idx[real & ~new]
    epsn[again] = np.minimum(epsn[again], ahead[real & ~new])
    return opened


def timeouts(active: np.ndarray, remaining: np.ndarray, epsn: np.ndarray,
             junk: np.ndarray, flight: np.ndarray, delivered: np.ndarray,
             size: np.ndarray, thr: np.ndarray, retx: np.ndarray) -> int:
    """The sender's retransmission timeout: a flow that has sent everything, has nothing
    in flight and no NAK coming, but whose receiver still misses bytes (the fluid ePSN
    was taken too far ahead: bytes behind the first drop were lost later), goes back to
    what the receiver has.  p4cc.hostcc.flow rewinds the same way after one RTO.
    Returns the number of flows rewound."""
    stuck = (active & (remaining <= 0) & np.isnan(epsn) & (junk <= 1e-9) & (flight <= 1e-9)
             & (delivered < thr))
    idx = stuck.nonzero()[0]
    if len(idx):
        again = size[idx] - delivered[idx]
        remaining[idx] = again
        retx[idx] += again
    return len(idx)


def on_naks(idx: np.ndarray, epsn: np.ndarray, delivered: np.ndarray, junk: np.ndarray,
            remaining: np.ndarray, size: np.ndarray, retx: np.ndarray, flight: np.ndarray,
            lost: np.ndarray) -> None:
    """The NAKs for flows ``idx`` (each with a pending gap; ``lost``: the bytes the loss
    that opened it dropped) reach their senders, whose bytes in the fabric are
    ``flight``: rewind and discard (see the module docstring).  ``retx`` counts what the
    rewind sends again: from ePSN to where the sender was (for bulk flows, which have no
    end, the lost bytes plus what arrived or is in flight beyond ePSN)."""
    g = epsn[idx]
    good_ahead = np.maximum(g - delivered[idx], 0.0)  # bytes before ePSN still to arrive
    beyond = np.maximum(delivered[idx] - g, 0.0)  # arrived out of order: discarded
    delivered[idx] -= beyond
    junk[idx] = np.maximum(flight - good_ahead, 0.0)
    finite = np.isfinite(size[idx])
    pos = np.zeros(len(idx))  # where the sender was (finite flows)
    pos[finite] = size[idx][finite] - remaining[idx][finite]
    retx[idx] += np.where(finite, np.maximum(pos - g, 0.0), lost + beyond + junk[idx])
    remaining[idx] = np.maximum(size[idx] - g, 0.0)  # (inf for bulk flows)
    epsn[idx] = np.nan


def discard(junk: np.ndarray, delivered: np.ndarray, before: np.ndarray) -> bool:
    """The receivers drop what arrived this step up to each flow's junk (``before``: the
    delivered bytes before the step).  Returns whether any junk is left."""
    got = delivered - before
    take = np.minimum(junk, np.maximum(got, 0.0))
    delivered -= take
    junk -= take
    return bool(np.count_nonzero(junk > 1e-9))
