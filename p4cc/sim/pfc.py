"""Priority flow control (PFC, IEEE 802.1Qbb) in the fluid engine (``SimConfig.pfc``).

The papers' fabrics are lossless: PFC is on at the NICs and the switches (ACC §5.1),
so a full buffer pauses the upstream port instead of dropping.  Without it, the
simulator's 90 % loads collapse into go-back-N retransmissions (docs/results.md).

The model, once per step, from the state at the start of the step (as the ECN marking
is):

* A switch accounts the bytes it holds by the link they arrived on (the ingress): the
  bytes of a flow at hop ``h`` arrived over the link served by its hop ``h - 1`` queue,
  or, at hop 0, over its source host's link.
* Ingress ``i`` is paused (XOFF) while, for some egress queue ``j`` of the switch, the
  bytes in ``j`` that came through ``i`` reach ``alpha x (buffer_j - depth_j)``: the
  dynamic threshold of shared-buffer switches (Choudhury & Hahne, ToN 1998) on the free
  space of ``j``.  ACC §5.1 gives the NIC vendor's default, ``alpha = 1/8``: "PFC is
  triggered when an ingress queue consumes more than 11.1 % of the free buffer" --
  ``alpha / (1 + alpha)`` of the buffer, the fixed point of ``T = alpha (B - T)`` for
  one ingress.  Our queues each have their own buffer (BMv2's per-queue limit), not one
  shared by the switch, so the free space is the egress queue's.
* A paused ingress stops its sender for the step: the upstream switch's egress queue
  serves nothing (every flow in it waits, also those bound elsewhere: PFC's
  head-of-line blocking, and the pause spreads upstream as that queue fills), or the
  host stops injecting.  XON is the same comparison failing at a later step (the fluid
  step replaces the XON hysteresis).
* The reaction takes one step: what the upstream port sent in the step before the
  pause still arrives (the headroom); drops stay possible if a buffer cannot hold it.

Which free space: ``buffer`` (SimConfig.pfc_buffer).

* ``"shared"`` (the default since session 26): each switch has one buffer pool shared
  by its queues, ``pool`` bytes (ACC §5.4: "Q_max = 10MB", the "allocated buffer in one
  service pool" of its testbed's switches, scaled with the BDP), and an ingress is
  paused while the bytes it holds in the switch, over all egress queues, reach
  ``alpha x (pool - bytes the switch holds)``: the vendor rule ACC §5.1 quotes, on the
  switch's free buffer.  A queue's own limit is then the pool (a lossless queue is not
  tail-dropped; the ingress threshold keeps the switch below its pool), so a queue can
  grow beyond the per-queue buffer of the lossy fabric before anyone pauses, as on a
  shared-buffer switch: at alpha 1/8 one ingress pauses at 11.1 % of a 10 MB pool
  (1.1 MB), far above the papers' ECN thresholds, so ECN, not PFC, holds the queues.
* ``"per-queue"`` (sessions 12-25): each egress queue has its own buffer (BMv2's
  per-queue limit, ``Scale.buffer_bytes``), and the bytes of one (ingress, egress)
  pair are compared with ``alpha x`` that queue's free space.  At the paper scale's
  1 MB per queue an ingress pauses at ~110 KB, inside the ECN thresholds' range: PFC
  then caps the queues before marking does, and at 80-90 % load the hosts spent
  20-31 % of the run paused (docs/results.md, "Session 25").

Pause time per queue and per host NIC is accumulated for the run's record.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.sim.fabric import Fabric

#: ACC §5.1: the NIC vendor's default PFC setting, alpha = 1/8 (11.1 % of the buffer).
DEFAULT_ALPHA = 0.125
#: ACC §5.4: "Q_max = 10MB" of allocated buffer in one service pool of the testbed's
#: switches (paper bytes; scaled with the BDP like the other byte quantities).
DEFAULT_POOL_BYTES = 10_000_000
#: SimConfig.pfc_buffer values: one pool per switch, or a buffer per egress queue.
PFC_BUFFERS = ("shared", "per-queue")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def check_alpha(alpha: float) -> float:
    """The dynamic-threshold factor, or a ConfigError naming the accepted range."""
    if not (isinstance(alpha, (int, float)) and 0 < alpha <= 16):
        raise ConfigError(f"PFC alpha must be a number in (0, 16] (ACC §5.1 default "
                          f"{DEFAULT_ALPHA}), got {alpha!r}")
    return float(alpha)


def check_buffer(buffer: object) -> str:
    """``buffer``, or a ConfigError naming the accepted values."""
    if buffer not in PFC_BUFFERS:
        raise ConfigError(f"PFC buffer must be one of {', '.join(PFC_BUFFERS)}, got "
                          f"{buffer!r}")
    return str(buffer)


def check_pool(pool_bytes: object) -> float:
    """``pool_bytes`` as a float, or a ConfigError naming what a pool size must be."""
    if not (isinstance(pool_bytes, (int, float)) and not isinstance(pool_bytes, bool)
            and math.isfinite(pool_bytes) and pool_bytes > 0):
        raise ConfigError(f"PFC pool_bytes must be a positive number of bytes (ACC §5.4: "
                          f"{DEFAULT_POOL_BYTES:,}), got {pool_bytes!r}")
    return float(pool_bytes)


class Pfc:
    """Ingress accounting and pause decisions for one fabric.

    Ingress ids: ``0 .. L`` are the queues (the link each one serves is the ingress of
    the switch at its far end; ``L`` is the engine's padding queue), ``L + 1 + k`` is
    host ``k``'s link.  (ingress, egress) pairs get compact ids; pair 0 is "none".
    """

    def __init__(self, fabric: Fabric, alpha: float = DEFAULT_ALPHA,
                 pool: float | None = None) -> None:
        """``pool``: bytes of each switch's shared buffer (the ``"shared"`` model), or
        None for a buffer per egress queue (``"per-queue"``)."""
        self.alpha = check_alpha(alpha)
        self.pool = pool
        L = fabric.n_ports
        self.L = L
        self.n_ing = L + 1 + len(fabric.hosts)
        by_switch: dict[str, list[int]] = {}
        for j, sw in enumerate(fabric.switch_names):
            by_switch.setdefault(sw, []).append(j)
        ingress: dict[str, list[int]] = {sw: [] for sw in by_switch}
        for j, (sw, port) in enumerate(fabric.keys):
            peer = fabric._peer[(sw, port)]
            if peer in ingress:  # queue j feeds switch ``peer``
                ingress[peer].append(j)
        for k, host in enumerate(fabric.hosts):
            ingress[fabric._host_switch[host]].append(L + 1 + k)
        # shared model: the switch of each queue and of each ingress (n_sw: none)
        names = list(by_switch)
        self.n_sw = len(names)
        self.queue_sw = np.full(L + 1, self.n_sw, dtype=np.int64)
        self.ing_sw = np.full(self.n_ing, self.n_sw, dtype=np.int64)
        for s, sw in enumerate(names):
            self.queue_sw[by_switch[sw]] = s
            self.ing_sw[ingress[sw]] = s
        pair_ing, pair_eg = [0], [L]
        lut = np.zeros(self.n_ing * (L + 1), dtype=np.int64)
        for sw, eg in by_switch.items():
            for i in ingress[sw]:
                for j in eg:
                    lut[i * (L + 1) + j] = len(pair_ing)
                    pair_ing.append(i)
                    pair_eg.append(j)
        self._lut = lut
        self.pair_ing = np.array(pair_ing, dtype=np.int64)
        self.pair_eg = np.array(pair_eg, dtype=np.int64)
        self.n_pairs = len(pair_ing)
        self.paused = np.zeros(self.n_ing, dtype=np.bool_)
        self.pause_steps = np.zeros(self.n_ing, dtype=np.int64)

    def pair_ids(self, path: IntArray, src_i: IntArray) -> IntArray:
        """The (ingress, egress) pair of every (slot, hop) of ``path``."""
        ing = np.empty_like(path)
        ing[:, 0] = self.L + 1 + src_i
        ing[:, 1:] = path[:, :-1]
        out: IntArray = self._lut[ing * (self.L + 1) + path]
        return out

    def decide(self, b: FloatArray, path: IntArray, src_i: IntArray,
               depth: npt.NDArray[np.number], buf: FloatArray) -> npt.NDArray[np.bool_]:
        """Which ingresses are paused this step (also kept in ``paused``), from the bytes
        ``b`` per (slot, hop) and each queue's ``depth`` at the start of the step."""
        pid = self.pair_ids(path, src_i)
        held = np.bincount(pid.ravel(), b.ravel(), self.n_pairs)
        if self.pool is not None:  # per ingress, over the switch's shared pool
            held[0] = 0.0
            by_ing = np.bincount(self.pair_ing, held, self.n_ing)
            used = np.bincount(self.queue_sw, depth[: self.L + 1], self.n_sw + 1)
            free_sw = np.maximum(self.pool - used, 0.0)
            self.paused = (by_ing > 0) & (by_ing >= self.alpha * free_sw[self.ing_sw])
        else:  # per (ingress, egress) pair, over the egress queue's own buffer
            eg = self.pair_eg
            free = np.maximum(buf[eg] - depth[eg], 0.0)
            over = (held > 0) & (held >= self.alpha * free)
            over[0] = False
            self.paused = np.bincount(self.pair_ing[over], minlength=self.n_ing) > 0
        self.pause_steps += self.paused
        return self.paused

    def serve(self, serve: FloatArray) -> FloatArray:
        """Bytes per step each queue may send now (0 where its link is paused)."""
        out: FloatArray = np.where(self.paused[: self.L + 1], 0.0, serve)
        return out

    def may_send(self, ok: npt.NDArray[np.bool_], src_i: IntArray) -> npt.NDArray[np.bool_]:
        """``ok`` without the flows whose source host's link is paused."""
        out: npt.NDArray[np.bool_] = ok & ~self.paused[self.L + 1 + src_i]
        return out

    def pause_seconds(self, dt: float) -> tuple[FloatArray, FloatArray]:
        """(per queue, per host) seconds paused so far."""
        s: FloatArray = self.pause_steps.astype(np.float64) * dt
        return s[: self.L], s[self.L + 1:]
