"""The engine's flow pool: per-slot arrays, grown on demand; the admission, routing
(rerouting on link events) and completion of flows; link-event parsing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from p4cc.errors import ConfigError
from p4cc.scale import Scale
from p4cc.sim.cc import CcHook
from p4cc.sim.config import SimConfig
from p4cc.sim.fabric import Fabric
from p4cc.sim.flows import FlowTable
from p4cc.sim.kernel import scratch
from p4cc.sim.telemetry import PortCounters

#: Per-slot float values of a fresh flow (reset together at admission).
FRESH = (("delivered", 0.0), ("sent", 0.0), ("lost", 0.0), ("retx", 0.0),
         ("last_cnp", -np.inf), ("rtt_last", np.nan),
         # go-back-N (p4cc.sim.gobackn): ePSN of a pending gap, bytes to be discarded
         ("gbn_epsn", np.nan), ("junk", 0.0))


class SlotPool:
    """Arrays with one entry per slot of the flow pool (rows of (slot, hop) for paths),
    and the admission, routing and completion of flows (the engine steps them)."""

    config: SimConfig
    scale: Scale
    fabric: Fabric
    flows: FlowTable
    counters: PortCounters
    cc: CcHook
    dt: float
    elephant_bytes: int
    _has_stop: bool
    _serve: np.ndarray  # bytes each queue sends per step
    _dep_q: np.ndarray  # bytes each queue sent in the last step
    _q_new: np.ndarray  # each queue's depth after the last step
    H: int  # hop columns
    L: int  # index of the dummy queue
    D: int  # CNP / loss ring length (steps)
    Dr: int  # RTT-answer ring length (steps)
    _probes: bool  # RTT probes are taken
    t: float
    cap: int
    free: list[int]
    row: np.ndarray
    active: np.ndarray
    dsteps: np.ndarray
    last_hop: np.ndarray
    src_i: np.ndarray
    hbase: np.ndarray
    gen: np.ndarray
    rpath: np.ndarray  # reverse path (receiver to sender: the ACKs' queues)
    fb_gen: np.ndarray  # slot generation of each RTT answer in fb_rtt
    cnps: np.ndarray
    stalled: np.ndarray
    path: np.ndarray
    b: np.ndarray  # bytes of each flow queued at each hop
    prev_dep: np.ndarray  # bytes that left each hop last step (next hop's arrivals)
    prev_mout: np.ndarray  # their marked fraction
    seen: np.ndarray  # flow had bytes toward the hop's queue this interval
    fb_cnp: np.ndarray
    fb_lost: np.ndarray
    fb_rtt: np.ndarray
    fb_int: np.ndarray  # INT: path-max queue depth (packets) of each RTT answer
    _int: bool  # RTT answers carry INT (the CC hook asks for it)
    remaining: np.ndarray  # bytes still to inject (lost bytes come back here)
    delivered: np.ndarray  # bytes delivered to the receiver
    size: np.ndarray  # bytes on the wire (payload + per-packet headers)
    thr: np.ndarray  # delivered bytes that complete the flow (inf: free slot, bulk flow)
    ok: np.ndarray  # active and routed (may send)
    line: np.ndarray  # host line rate
    rtt0: np.ndarray  # unloaded RTT of the path
    fwd: np.ndarray  # lumped one-way propagation after the last queue
    last_cnp: np.ndarray
    next_probe: np.ndarray
    rtt_last: np.ndarray  # latest RTT sample at the sender (NaN before the first)
    sent: np.ndarray
    stop: np.ndarray
    lost: np.ndarray
    retx: np.ndarray
    gbn_epsn: np.ndarray  # receiver's expected byte at a pending gap (NaN: none)
    junk: np.ndarray  # bytes in flight that the receiver will discard (go-back-N)
    _grp: np.ndarray
    _fresh: np.ndarray
    _ar: np.ndarray
    _f8: np.ndarray
    _out: tuple[np.ndarray, ...]
    _partial: tuple[np.ndarray, np.ndarray] | None  # slots admitted inside the step, time left

    def _alloc(self, cap: int) -> None:
        old, H, D = self.cap, self.H, self.D

        def grow(a: np.ndarray | None, fill: float | int | bool, shape: tuple[int, ...],
                 dtype: type = np.float64) -> np.ndarray:
            new: np.ndarray = np.full(shape, fill, dtype=dtype)
            if a is not None:
                new[:old] = a
            return new

        g = self.__dict__.get
        self.row = grow(g("row"), -1, (cap,), np.int64)
        self.active = grow(g("active"), False, (cap,), np.bool_)
        self.ok = grow(g("ok"), False, (cap,), np.bool_)
        for nm, fill in (("remaining", 0.0), ("size", 0.0), ("thr", np.inf),
                         ("line", self.scale.link_rate_bps), ("rtt0", self.scale.base_rtt_s),
                         ("fwd", 0.0), ("next_probe", 0.0), ("stop", np.inf)):
            setattr(self, nm, grow(g(nm), fill, (cap,)))
        # per-slot values a new flow starts from, in one (k, cap) block so admission
        # resets them with one assignment; the attributes are row views of the block
        fresh = np.array([v for _, v in FRESH])
        grp = np.repeat(fresh[:, None], cap, axis=1)
        if old:
            grp[:, :old] = self._grp[:, :old]
        self._grp, self._fresh = grp, fresh[:, None]
        for i, (nm, _) in enumerate(FRESH):
            setattr(self, nm, grp[i])
        self.dsteps = grow(g("dsteps"), 1, (cap,), np.int64)
        self.last_hop = grow(g("last_hop"), 0, (cap,), np.int64)
        self.src_i = grow(g("src_i"), 0, (cap,), np.int64)
        self.hbase = grow(g("hbase"), 0, (cap,), np.uint64)  # CNP-draw hash of the flow id
        self.gen = grow(g("gen"), 0, (cap,), np.int64)  # admissions into the slot so far
        self.cnps = grow(g("cnps"), 0, (cap,), np.int64)
        self.stalled = grow(g("stalled"), False, (cap,), np.bool_)
        # (cap, H) arrays, one row per slot
        def grow2(a: np.ndarray | None, fill: float | int, dtype: type) -> np.ndarray:
            new: np.ndarray = np.full((cap, H), fill, dtype=dtype)
            if a is not None:
                new[:old] = a
            return new
        self.path = grow2(g("path"), self.fabric.n_ports, np.int64)
        self.rpath = grow2(g("rpath"), self.fabric.n_ports, np.int64)
        self.b = grow2(g("b"), 0.0, np.float64)
        self.prev_dep = grow2(g("prev_dep"), 0.0, np.float64)
        self.prev_mout = grow2(g("prev_mout"), 0.0, np.float64)
        self.seen = grow2(g("seen"), False, np.bool_)
        def grow_fb(a: np.ndarray | None, fill: float | bool, dtype: type) -> np.ndarray:
            new: np.ndarray = np.full((D, cap), fill, dtype=dtype)
            if a is not None:
                new[:, :old] = a
            return new
        self.fb_cnp = grow_fb(g("fb_cnp"), False, np.bool_)
        # loss notices wait for the queues behind the drop too: the RTT ring's length
        fl = g("fb_lost")
        self.fb_lost = np.zeros((self.Dr, cap))
        if fl is not None:
            self.fb_lost[:, :old] = fl
        rt, rg = g("fb_rtt"), g("fb_gen")
        rows = self.Dr if self._probes else 1  # (the RTT ring is only read with probes)
        self.fb_rtt = np.full((rows, cap), np.nan)
        self.fb_gen = np.zeros((rows, cap), dtype=np.int64)
        if rt is not None:
            self.fb_rtt[:, :old] = rt
            self.fb_gen[:, :old] = rg
        ri = g("fb_int")  # INT max queue depth (packets) of each RTT answer, if asked for
        self.fb_int = np.zeros((rows if self._int else 1, cap))
        if ri is not None and ri.shape[0] == self.fb_int.shape[0]:
            self.fb_int[:, :old] = ri
        self.free.extend(range(cap - 1, old - 1, -1))
        self.cap = cap
        self.cc.grow(cap, self.t)
        self._ar = np.arange(cap)
        self._buffers()

    def _buffers(self) -> None:
        """Per-step scratch arrays and indices that depend on (cap, H)."""
        self._f8 = np.full(self.cap, self.dt / 8.0)  # seconds each slot sends this step / 8
        self._out = scratch(self.cap, self.H, self.L + 1)  # queue_step's outputs

    # -- completion ------------------------------------------------------------------
    def _finish(self, t0: float, done: np.ndarray) -> None:
        act = self.active
        done = done & act
        if self._has_stop:
            stop_now = act & (self.stop <= self.t) & (self.remaining > 0)
            self.remaining[stop_now] = 0.0
            done |= act & (self.remaining <= 0) & (self.stop <= self.t) & (
                self.b.sum(axis=1) + self.prev_dep.sum(axis=1) <= 1e-9)
        if not done.any():
            return
        idx = done.nonzero()[0]
        rows = self.row[idx]
        fl = self.flows
        end = self._final_ack(t0, idx, rows)
        fl.end[rows] = end
        delivered, lost, retx = self.delivered, self.lost, self.retx
        for s, row in zip(idx.tolist(), rows.tolist(), strict=True):  # (scalar writes:
            fl.delivered[row] = delivered[s]  # usually one or two flows finish at once)
            fl.drops[row] = lost[s]
            fl.retx[row] = retx[s]
            fl.cnps[row] = self.cnps[s]
        seen = self.seen[idx]
        if seen.any():
            k = seen.nonzero()
            self.counters.pairs.append(np.column_stack([
                self.path[idx][k], self.src_i[idx][k[0]], rows[k[0]],
                (self.sent[idx][k[0]] >= self.elephant_bytes).astype(np.int64)]))
        for s in idx.tolist():
            self.active[s] = self.ok[s] = False
            self.thr[s] = np.inf
            self.row[s] = -1
            self.path[s] = self.L
            self.b[s] = self.prev_dep[s] = 0.0
            self.remaining[s] = 0.0
        self.cc.reset_slots(idx, self.t, self.line[idx])  # idle CC state, no timers
        self.free.extend(int(i) for i in idx[::-1])
        for row, e in zip(rows.tolist(), end.tolist(), strict=True):
            fl.release(row, e)

    def _final_ack(self, t0: float, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """When the final ACK of flows ``idx``, whose last byte left its last queue in
        the step from ``t0``, reaches the sender.

        The last byte leaves at ``t0 + dt·(busy fraction of that queue in the step)``
        (the fluid queue sends at its rate from the start of the step), never before the
        flow could have been serialised at line rate through its hops; it reaches the
        receiver after the lumped forward delay, and the ACK comes back after half the
        path RTT plus the queueing delay now on the reverse path (ACKs take no queue
        space in the model).  A lone flow of S wire bytes: FCT = S·8/rate + RTT.
        """
        fl, fab = self.flows, self.fabric
        lastq = self.path[idx, self.last_hop[idx]]
        t_tx = t0 + self.dt * np.minimum(self._dep_q[lastq] / self._serve[lastq], 1.0)
        size = self.size[idx]
        finite = np.isfinite(size)
        if finite.any():
            least = (fl.begun[rows] + self.last_hop[idx] * self.dt
                     + np.where(finite, size, 0.0) * 8.0 / self.line[idx])
            t_tx = np.where(finite, np.maximum(t_tx, least), t_tx)
        back = (self._q_new / fab.rate_bps * 8.0)[self.rpath[idx]].sum(axis=1)
        return t_tx + self.fwd[idx] + self.rtt0[idx] / 2 + back

    # -- admission and routing -------------------------------------------------------
    def _route(self, s: int, row: int) -> None:
        fl, fab = self.flows, self.fabric
        p = fab.path(fl.src[row], fl.dst[row], int(fl.flow_id[row]))
        rp = fab.path(fl.dst[row], fl.src[row], int(fl.flow_id[row]), reply=True) or []
        self.path[s] = self.rpath[s] = self.L
        if len(rp) > self.H:
            self._widen(min(len(rp), self.config.max_hops))
        self.rpath[s, :len(rp[:self.H])] = rp[:self.H]
        if p is None:
            self.stalled[s] = True
            self.ok[s] = False
            self.last_hop[s] = 0
            return
        if len(p) > self.H:
            if len(p) > self.config.max_hops:
                raise ConfigError(f"a path of {len(p)} queues exceeds SimConfig.max_hops="
                                  f"{self.config.max_hops}; raise it")
            self._widen(len(p))
        self.stalled[s] = False
        self.ok[s] = True
        self.path[s, :len(p)] = p
        self.last_hop[s] = len(p) - 1
        prop = fab.path_delay_s(fl.src[row], fl.dst[row], p)
        rtt = self.scale.base_rtt_s + 2 * prop
        self.rtt0[s] = rtt
        # the hop pipeline already delays data (len(p)-1) steps; the rest is lumped
        self.dsteps[s] = min(self.D - 1, max(1, round(rtt / self.dt) - (len(p) - 1)))
        self.fwd[s] = max(0.0, rtt / 2 - (len(p) - 1) * self.dt)

    def _admit(self, t_end: float) -> None:
        rows = self.flows.due(t_end)
        if not rows:
            return
        if len(rows) > len(self.free):
            self._alloc(max(2 * self.cap, self.cap + len(rows)))
        fl, t, free, fresh = self.flows, self.t, self.free, self._fresh[:, 0]
        slots, late, left = [], [], []
        # one flow at a time with scalar writes: admissions are usually one or two flows,
        # for which per-slot element writes are far cheaper than fancy-index scatters
        for row in rows:
            s = free.pop()
            slots.append(s)
            wire = fl.wire[row]
            self.row[s] = row
            self.active[s] = True
            self.size[s] = self.remaining[s] = wire
            # complete within float rounding (sums of many fluid steps): 1 ppb of the size
            self.thr[s] = wire * (1 - 1e-9) - 1e-6
            self._grp[:, s] = fresh  # p4cc.sim.slots.FRESH: delivered, sent, ...
            self.next_probe[s] = t
            self.cnps[s] = 0
            self.stop[s] = fl.stop_at[row]
            self.src_i[s] = fl.src_i[row]
            self.hbase[s] = fl.hbase[row]
            self.gen[s] += 1  # RTT answers in flight for the slot's last flow are void
            self.b[s] = self.prev_dep[s] = self.prev_mout[s] = 0.0
            self.seen[s] = False
            self.fb_cnp[:, s] = False
            self.fb_lost[:, s] = 0.0
            self._route(s, row)
            begun = max(fl.ready[row], t)
            fl.begun[row] = begun
            fl.base_rtt[row] = self.rtt0[s]
            if begun > t:  # started inside this step: send for the rest of it only
                late.append(s)
                left.append((t + self.dt) - begun)
        if late:
            self._partial = (np.array(late, dtype=np.int64), np.array(left))
        ix = np.array(slots, dtype=np.int64)
        self.cc.reset_slots(ix, t, self.line[ix])

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Fail/restore a link now; flows whose path changes are rerouted (their bytes
        in the fabric are sent again), flows with no path stall until one comes back."""
        self.fabric.set_link(a, b, up)
        for s in np.flatnonzero(self.active):
            old = self.path[s].copy()
            self._route(int(s), int(self.row[s]))
            if not np.array_equal(old, self.path[s]):
                inflight = float(self.b[s].sum() + self.prev_dep[s].sum())
                # (junk is already counted in remaining: the rewind sends it again)
                self.remaining[s] += max(0.0, inflight - self.junk[s])
                self.junk[s] = 0.0
                self.retx[s] += inflight
                self.b[s] = self.prev_dep[s] = self.prev_mout[s] = 0.0

    def _widen(self, h: int) -> None:
        """More hop columns (a reroute made a path longer than any before)."""
        extra = h - self.H
        for nm, fill in (("path", self.L), ("rpath", self.L), ("b", 0.0), ("prev_dep", 0.0),
                         ("prev_mout", 0.0), ("seen", False)):
            a = getattr(self, nm)
            setattr(self, nm, np.concatenate([a, np.full((self.cap, extra), fill,
                                                         dtype=a.dtype)], axis=1))
        self.H = h
        self._buffers()

    def _parse_events(self, ev: pd.DataFrame | None) -> list[tuple[float, str, str, bool]]:
        if ev is None or len(ev) == 0:
            return []
        for col in ("t_s", "a", "b"):
            if col not in ev:
                raise ConfigError(f"link events need columns t_s, a, b and up (or action); "
                                  f"missing {col!r}")
        if "up" in ev:
            ups = [bool(u) for u in ev["up"]]
        elif "action" in ev:
            ups = [str(a).lower() == "up" for a in ev["action"]]
        else:
            raise ConfigError("link events need an 'up' (bool) or 'action' (up/down) column")
        out = sorted(zip(ev["t_s"].astype(float), ev["a"].astype(str), ev["b"].astype(str),
                         ups, strict=True))
        for _, a, b, _ in out:
            self.fabric.set_link(a, b, True)  # validates the pair now
        return out

