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

Pause time per queue and per host NIC is accumulated for the run's record.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from p4cc.errors import ConfigError
from p4cc.sim.fabric import Fabric

#: ACC §5.1: the NIC vendor's default PFC setting, alpha = 1/8 (11.1 % of the buffer).
DEFAULT_ALPHA = 0.125

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def check_alpha(alpha: float) -> float:
    """The dynamic-threshold factor, or a ConfigError naming the accepted range."""
    if not (isinstance(alpha, (int, float)) and 0 < alpha <= 16):
        raise ConfigError(f"PFC alpha must be a number in (0, 16] (ACC §5.1 default "
                          f"{DEFAULT_ALPHA}), got {alpha!r}")
    return float(alpha)


class Pfc:
    """Ingress accounting and pause decisions for one fabric.

    Ingress ids: ``0 .. L`` are the queues (the link each one serves is the ingress of
    the switch at its far end; ``L`` is the engine's padding queue), ``L + 1 + k`` is
    host ``k``'s link.  (ingress, egress) pairs get compact ids; pair 0 is "none".
    """

    def __init__(self, fabric: Fabric, alpha: float = DEFAULT_ALPHA) -> None:
        self.alpha = check_alpha(alpha)
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
