"""The time-stepped fluid engine, vectorized over flows (slots) and queues.

One step of ``dt`` (docs/simulator.md has the full model):

1. admit flows whose start is due; apply link events (reroute, stall) (p4cc.sim.slots);
2. deliver feedback due now (CNPs, loss notices, RTT probe answers) to the CC hook;
3. each flow injects ``min(rate·dt, bytes left)`` into its first queue;
4. every queue, all at once: arrivals = injections (hop 0) and the previous step's
   departures of the hop before; ECN mark probability from the depth the departing
   bytes found when they arrived (FIFO, as BMv2 marks by enq_qdepth; SimConfig.mark_depth
   "departure": the depth at the start of the step) (EcnConfig semantics, depth in
   packets of ``pkt_bytes``); tail drop above
   the buffer; departures ``min(depth + arrivals, rate·dt)`` shared among flows in
   proportion to their bytes in the queue (fluid FIFO; a flow's last bytes leave when a
   FIFO would have sent them: p4cc.sim.fifo_tail);
5. the last hop's departures are delivered; the receiver (NP) sends a CNP with
   probability 1-exp(-marked packets) at most once per CNP interval; it arrives at the
   sender one base RTT later.  A loss notice (NAK) arrives after the queues now on the
   flow's path and one base RTT; the sender goes back N (resends everything after the
   first lost byte; p4cc.sim.gobackn) or, with ``loss_recovery="selective"``, resends
   the lost bytes only; with ``pfc`` on, a switch pauses the links that feed a queue
   it is filling instead (p4cc.sim.pfc: the paused port sends nothing in step 3-4);
6. a flow whose last byte was delivered completes when the final ACK is back at the
   sender (as p4cc.hostcc and the papers time FCTs).

Speed: a step is a fixed number of numpy calls whatever the number of flows; work that
is usually empty (losses, feedback rows, admissions, the CNP draw) is skipped by cheap
guards that leave the arithmetic of the step unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortKey, PortTelemetry
from p4cc.errors import ConfigError
from p4cc.sim.cc import CcHook, make_hook
from p4cc.sim.config import SimConfig
from p4cc.sim.enqmark import MARK_HISTORY_CELLS, mark_history
from p4cc.sim.fabric import Fabric
from p4cc.sim.fifo_tail import FifoTail
from p4cc.sim.flows import FlowTable
from p4cc.sim.gobackn import (
    ahead_of_drop,
    discard,
    in_flight,
    on_losses,
    on_naks,
    timeouts,
)
from p4cc.sim.kernel import fabric_step, warm_up
from p4cc.sim.pfc import Pfc
from p4cc.sim.slots import SlotPool
from p4cc.sim.tail_loss import spare_tails
from p4cc.sim.telemetry import PortCounters
from p4cc.topo.spec import TopoSpec

IntervalHook = Callable[[float, list[PortTelemetry]], None]


class Engine(SlotPool):
    """The simulator: ``step()`` advances ``dt``; results via ``flow_records()``,
    ``telemetry`` / ``telemetry_frame()`` and ``host_traces()``."""

    def __init__(self, spec: TopoSpec, schedule: pd.DataFrame, config: SimConfig | None = None,
                 *, cc: CcHook | None = None,
                 ecn: EcnConfig | Mapping[PortKey, EcnConfig | None] | None = None,
                 link_events: pd.DataFrame | None = None,
                 on_interval: IntervalHook | None = None) -> None:
        self.config = cfg = config or SimConfig()
        self.scale = spec.scale
        self.fabric = fab = Fabric(spec)
        pool = self._pool(cfg)
        if pool is not None:  # a lossless queue is bounded by its switch's pool (p4cc.sim.pfc)
            fab.buffer_bytes[:-1] = np.maximum(fab.buffer_bytes[:-1], pool)
        self.flows = FlowTable(schedule, fab)
        self._has_stop = bool(np.isfinite(self.flows.stop).any() or self.flows.bulk.any())
        self.cc = cc or make_hook(cfg.cc, spec.scale, cfg.cc_params)
        self.dt = cfg.dt(spec.scale)
        self.interval = cfg.interval(spec.scale)
        self.cnp_interval = cfg.cnp_interval(spec.scale)
        self.probe_interval = cfg.probe_interval(spec.scale)
        self.elephant_bytes = cfg.elephant(spec.scale)
        self._seed_mix = np.uint64((cfg.seed * 0xD1B54A32D192ED03 + 1) % 2**64)
        self.flows.hbase = (self.flows.flow_id.astype(np.uint64)
                            * np.uint64(0x9E3779B97F4A7C15) + self._seed_mix)
        self.on_interval = on_interval
        self.H = min(cfg.max_hops, fab.longest_path())
        self.L = fab.n_ports  # index of the dummy queue
        # upper bound of any path's propagation RTT (link delays are 0 in the built-ins)
        max_rtt = spec.scale.base_rtt_s + 2 * sum(lk.delay_s for lk in spec.links)
        self.D = math.ceil(max_rtt / self.dt) + 2
        # RTT answers can be late by every buffer on the longest path
        qmax = float(np.max(fab.buffer_bytes[:-1] * 8 / fab.rate_bps[:-1], initial=0.0))
        self.Dr = math.ceil((max_rtt + self.H * qmax) / self.dt) + 2
        self._dt8 = self.dt / 8.0
        self._serve = fab.rate_bps * (self.dt / 8.0)  # bytes a queue sends per step
        # the marking depth's history: as many steps as the longest queue takes to drain,
        # at most MARK_HISTORY_CELLS in all (longer residences use the oldest row)
        rows = 0
        if cfg.mark_depth == "enqueue":
            drain = fab.buffer_bytes[:-1] / np.maximum(self._serve[:-1], 1e-300)
            rows = min(math.ceil(float(np.max(drain, initial=0.0))) + 2,
                       max(2, MARK_HISTORY_CELLS // (fab.n_ports + 1)))
        self._marks = mark_history(rows, fab.n_ports + 1)
        self._pkt = float(spec.scale.pkt_bytes)
        self._inv_pkt = 1.0 / self._pkt
        warm_up()  # the compiled queue kernel, before the first step
        self._cnp_gap = self.cnp_interval - 1e-12
        # flags: a feedback ring row may hold something (guards; exact values in fb_*)
        self._n_cnp = np.zeros(self.D, dtype=np.bool_)
        self._n_lost = np.zeros(self.Dr, dtype=np.bool_)
        self._gbn = cfg.loss_recovery == "go-back-n"
        self._fifo = FifoTail(fab.n_ports + 1) if cfg.queue_tail == "fifo" else None
        self._packet_tails = cfg.tail_loss == "packet"
        self.pfc = Pfc(fab, cfg.pfc_alpha, pool) if cfg.pfc else None
        self._junk = False  # some flow has bytes in flight its receiver will discard
        self._n_rtt = np.zeros(self.Dr, dtype=np.bool_)
        self._partial: tuple[np.ndarray, np.ndarray] | None = None
        # RTT samples nobody reads (a CC without delay, no host traces) are not taken
        self._probes = (cfg.rtt_probes if cfg.rtt_probes is not None
                        else cfg.host_traces or bool(getattr(self.cc, "uses_rtt", True)))
        # INT: each RTT answer also carries the path's largest queue (packets) at probe time,
        # for a hook that asks for it (RL-CC's queue-length variant, NVIDIA RL-CC eq. 6)
        self._int = self._probes and bool(getattr(self.cc, "uses_int", False))
        self._int_hook: Any = self.cc if self._int else None  # on_rtt(t, mask, rtt, depth)
        self._dep_q = np.zeros(fab.n_ports + 1)
        self._q_new = np.zeros(fab.n_ports + 1)
        self._out: tuple[np.ndarray, ...] = ()
        self.t = 0.0
        self.steps = 0
        self.cap = 0
        self.free: list[int] = []
        self._alloc(64)
        self.counters = PortCounters(fab)
        self.telemetry: list[PortTelemetry] = []
        self.traces: list[pd.DataFrame] = []
        self._next_interval = self.interval
        self._link_events = self._parse_events(link_events)
        if isinstance(ecn, EcnConfig):
            for key in fab.keys:
                fab.set_ecn(key, ecn)
        elif ecn is not None:
            for key, setting in ecn.items():
                fab.set_ecn(key, setting)

    # -- settings (admission and routing of flows: p4cc.sim.slots) -------------------
    def _pool(self, cfg: SimConfig) -> float | None:
        """Bytes of each switch's shared buffer with PFC's ``shared`` model, else None."""
        if not cfg.pfc or cfg.pfc_buffer != "shared":
            return None
        return float(self.scale.bytes(cfg.pfc_pool_bytes))

    def set_ecn(self, key: PortKey, cfg: EcnConfig | None) -> None:
        self.fabric.set_ecn(key, cfg)

    def set_cnp_interval(self, interval_s: float) -> None:
        """The receivers' (NP) minimum time between CNPs per flow, from now on."""
        if not (math.isfinite(interval_s) and interval_s > 0):
            raise ConfigError(f"CNP interval must be a positive number, got {interval_s!r}")
        self.cnp_interval = float(interval_s)
        self._cnp_gap = self.cnp_interval - 1e-12

    # -- one step --------------------------------------------------------------------
    def step(self) -> None:
        dt, t0 = self.dt, self.t
        t1 = t0 + dt
        while self._link_events and self._link_events[0][0] < t1:
            _, a, b, up = self._link_events.pop(0)
            self.set_link(a, b, up)
        heap = self.flows._heap
        if heap and heap[0][0] < t1:
            self._admit(t1)
        fab, cc, act, steps = self.fabric, self.cc, self.active, self.steps
        # 2. feedback due now
        r = steps % self.D
        if self._n_cnp[r]:
            cnp = self.fb_cnp[r]
            if np.count_nonzero(cnp):
                cc.on_cnp(t0, cnp & act)
                cnp[:] = False
            self._n_cnp[r] = False
        rl = steps % self.Dr
        if self._n_lost[rl]:
            lost = self.fb_lost[rl]
            if self._gbn:
                idx = ((lost > 0) & act).nonzero()[0]
                on_naks(idx, self.gbn_epsn, self.delivered, self.junk, self.remaining,
                        self.size, self.retx, in_flight(self.b, self.prev_dep, idx),
                        lost[idx])
                self._junk = True
            else:
                self.remaining += lost
            cc.on_nack(t0, (lost > 0) & act)  # loss notices: the hosts' NAKs
            lost[:] = 0.0
            self._n_lost[rl] = False
        k = steps % self.Dr
        if self._n_rtt[k]:
            rr = self.fb_rtt[k]
            back = ~np.isnan(rr)
            back &= self.fb_gen[k] == self.gen
            if np.count_nonzero(back):
                self.rtt_last[back] = rr[back]
                if self._int:
                    self._int_hook.on_rtt(t0, back & act, self.rtt_last, self.fb_int[k])
                else:
                    cc.on_rtt(t0, back & act, self.rtt_last)
            rr[:] = np.nan
            self._n_rtt[k] = False
        # 3. inject, 4. queues, 5. delivery (p4cc.sim.kernel: compiled with numba)
        rate = cc.rate(t0)
        f8 = self._f8
        part = self._partial
        if part is not None:  # flows that started inside the step send for the rest of it
            f8[part[0]] = part[1] / 8.0
            self._partial = None
        c = self.counters
        send, dep, mout, q, q_new, dep_q, got_m, lost_f = out = self._out
        before = self.delivered.copy() if self._junk else None
        ok, serve = self.ok, self._serve
        if self.pfc is not None:  # paused links send nothing this step (p4cc.sim.pfc)
            depth = np.bincount(self.path.ravel(), self.b.ravel(), self.L + 1)
            self.pfc.decide(self.b, self.path, self.src_i, depth, fab.buffer_bytes)
            ok, serve = self.pfc.may_send(ok, self.src_i), self.pfc.serve(serve)
        if self._fifo is not None:  # less what each queue owes for tails released early
            serve = self._fifo.charge(serve)
        # (and the NP's CNP draw on the marked bytes delivered)
        dropped, n_done, _ = fabric_step(
            rate, f8, self.remaining, self.sent, ok, self.stop, t0, self.thr, self.b,
            self.prev_dep, self.prev_mout, self.path, self.last_hop, fab.kmin_pkts,
            fab.kmax_pkts, fab._slope, self._inv_pkt, serve, fab.buffer_bytes, c.tx,
            c.txm, c.drops, c.arr, c.q_arr, c.qmax, self.seen, self.delivered, *out,
            *self._marks, self.last_cnp, self.cnps, self.hbase, steps, self._cnp_gap, self._pkt,
            self.dsteps, self.fb_cnp, self._n_cnp)
        # double buffers: this step's departures are the next step's arrivals
        self._out = (send, self.prev_dep, self.prev_mout, q, q_new, dep_q, got_m, lost_f)
        if part is not None:
            f8[part[0]] = self._dt8
        cc.on_sent(t0, send)
        self._dep_q, self._q_new = dep_q, q_new
        self.prev_dep, self.prev_mout = dep, mout
        # last bytes out when a FIFO would have sent them (_out[1]: this step's arrivals)
        if self._fifo is not None and self._fifo.after_step(
                self, send, self._out[1], dep, q, q_new, dep_q):
            n_done = 1
        # losses
        if before is not None:  # go-back-N: receivers drop what follows a gap
            self._junk = discard(self.junk, self.delivered, before)
        if dropped and self._packet_tails:  # a sent flow's last bytes: whole packets
            dropped = spare_tails(self, send, self._out[1], q, q_new, dep_q, lost_f)
        if dropped:
            idx = (lost_f > 0).nonzero()[0]
            self.lost += lost_f
            if self._gbn:
                fill = q_new / fab.buffer_bytes
                idx = on_losses(idx, lost_f, self.junk, self.gbn_epsn, self.delivered,
                                ahead_of_drop(self.b, self.prev_dep, self.path, fill, idx))
            else:
                self.retx += lost_f
            # the receiver sees the gap when the flow's next bytes arrive: after the
            # queues now on the path (the drop's queue is full), then the reverse path
            qd = np.add.reduce((q_new / fab.rate_bps * 8.0)[self.path[idx]], axis=1)
            late = self.dsteps[idx] + np.rint(qd / dt).astype(np.int64)
            when = (steps + np.minimum(late, self.Dr - 1)) % self.Dr
            self.fb_lost[when, idx] += lost_f[idx]
            self._n_lost[when] = True
        # RTT probes every probe interval (several may be in flight, like per-ACK RTT
        # samples): RTT = base RTT + queueing delay now on the path; the answer comes
        # back that RTT later
        due = act & (self.next_probe <= t0) if self._probes else None
        if due is not None and np.count_nonzero(due):
            idx = due.nonzero()[0]
            qd = np.add.reduce((q / fab.rate_bps * 8.0)[self.path[idx]], axis=1)
            val = self.rtt0[idx] + qd
            kk = np.minimum(np.rint(val / dt).astype(np.int64), self.Dr - 1)
            ring = (steps + kk) % self.Dr
            self.fb_rtt[ring, idx] = val
            self.fb_gen[ring, idx] = self.gen[idx]
            if self._int:  # (the padding queue never holds bytes)
                self.fb_int[ring, idx] = q[self.path[idx]].max(axis=1) * self._inv_pkt
            self._n_rtt[ring] = True
            self.next_probe[idx] = t0 + self.probe_interval
        self.t, self.steps = t1, steps + 1
        if self._has_stop or n_done:
            self._finish(t0, self.delivered >= self.thr)
        if t1 >= self._next_interval - 1e-12:
            self._close_interval(t1)

    def _close_interval(self, t1: float) -> None:
        if self._gbn:
            timeouts(self.active, self.remaining, self.gbn_epsn, self.junk,
                     self.b.sum(axis=1) + self.prev_dep.sum(axis=1), self.delivered,
                     self.size, self.thr, self.retx)
        k = self.seen.nonzero()
        seen = np.column_stack([self.path[k], self.src_i[k[0]], self.row[k[0]],
                                (self.sent[k[0]] >= self.elephant_bytes).astype(np.int64)])
        seen = seen[seen[:, 0] < self.L]
        recs = self.counters.records(t1, seen)
        self.seen[:] = False
        self.telemetry.extend(recs)
        if self.config.host_traces:
            self._trace(t1)
        self._next_interval += self.interval
        if self.on_interval is not None:
            self.on_interval(t1, recs)

    def _trace(self, t1: float) -> None:
        idx = self.active.nonzero()[0]
        if not len(idx):
            return
        rows = self.row[idx]
        rate = self.cc.rate(self.t)[idx]
        self.traces.append(pd.DataFrame({
            "t_s": t1, "host": [self.flows.src[r] for r in rows],
            "flow_id": self.flows.flow_id[rows], "rate_bps": rate,
            "rtt_s": self.rtt_last[idx], "cnps": self.cnps[idx],
            "bytes_delivered": self.delivered[idx]}))

    # -- running ---------------------------------------------------------------------
    def run(self, until_s: float, stop: Callable[[], bool] | None = None) -> None:
        """Step until ``until_s`` (simulated seconds), or sooner once ``stop()`` is true
        after a step (CHAMELEON's ``end=1``: its tuner has stopped)."""
        n = round((until_s - self.t) / self.dt)
        for _ in range(max(0, n)):
            self.step()
            if stop is not None and stop():
                return

    def run_to_completion(self, limit_s: float) -> bool:
        """Step until every scheduled flow is done or ``limit_s``; True if all done."""
        while self.t < limit_s:
            if not self.active.any() and self.flows.pending() == 0:
                return True
            if not self.active.any():  # idle: jump to the next start, event or interval
                nxt = min(self.flows.next_start(), self._next_interval, limit_s,
                          self._link_events[0][0] if self._link_events else np.inf)
                if nxt - self.t > self.dt:
                    self.t = nxt - self.dt
            self.step()
        return not self.active.any() and self.flows.pending() == 0

    def flow_records(self) -> pd.DataFrame:
        fl = self.flows
        idx = self.active.nonzero()[0]
        rows = self.row[idx]
        fl.delivered[rows] = self.delivered[idx]
        fl.drops[rows] = self.lost[idx]
        fl.retx[rows] = self.retx[idx]
        fl.cnps[rows] = self.cnps[idx]
        return fl.records()

    def telemetry_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_row() for r in self.telemetry])

    def host_traces(self) -> pd.DataFrame:
        return pd.concat(self.traces, ignore_index=True) if self.traces else pd.DataFrame(
            columns=["t_s", "host", "flow_id", "rate_bps", "rtt_s", "cnps", "bytes_delivered"])
