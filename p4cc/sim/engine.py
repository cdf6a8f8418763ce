"""The time-stepped fluid engine, vectorized over flows (slots) and queues.

One step of ``dt`` (docs/simulator.md has the full model):

1. admit flows whose start is due; apply link events (reroute, stall);
2. deliver feedback due now (CNPs, loss notices, RTT probe answers) to the CC hook;
3. each flow injects ``min(rate·dt, bytes left)`` into its first queue;
4. every queue, all at once: arrivals = injections (hop 0) and the previous step's
   departures of the hop before; ECN mark probability from the depth at the start of
   the step (EcnConfig semantics, depth in packets of ``pkt_bytes``); tail drop above
   the buffer; departures ``min(depth + arrivals, rate·dt)`` shared among flows in
   proportion to their bytes in the queue (fluid FIFO);
5. the last hop's departures are delivered; the receiver (NP) sends a CNP with
   probability 1-exp(-marked packets) at most once per CNP interval; it arrives at the
   sender one base RTT later, as do loss notices (lost bytes are sent again).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortKey, PortTelemetry
from p4cc.errors import ConfigError
from p4cc.sim.cc import CcHook, make_hook
from p4cc.sim.config import SimConfig
from p4cc.sim.fabric import Fabric
from p4cc.sim.flows import FlowTable
from p4cc.sim.slots import SlotPool
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
        self.flows = FlowTable(schedule, fab)
        self._has_stop = bool(np.isfinite(self.flows.stop).any() or self.flows.bulk.any())
        self.cc = cc or make_hook(cfg.cc, spec.scale, cfg.cc_params)
        self.dt = cfg.dt(spec.scale)
        self.interval = cfg.interval(spec.scale)
        self.cnp_interval = cfg.cnp_interval(spec.scale)
        self.probe_interval = cfg.probe_interval(spec.scale)
        self.elephant_bytes = cfg.elephant(spec.scale)
        self._seed_mix = np.uint64((cfg.seed * 0xD1B54A32D192ED03 + 1) % 2**64)
        self.on_interval = on_interval
        self.H = min(cfg.max_hops, fab.longest_path())
        self.L = fab.n_ports  # index of the dummy queue
        # upper bound of any path's propagation RTT (link delays are 0 in the built-ins)
        max_rtt = spec.scale.base_rtt_s + 2 * sum(lk.delay_s for lk in spec.links)
        self.D = math.ceil(max_rtt / self.dt) + 2
        # RTT answers can be late by every buffer on the longest path
        qmax = float(np.max(fab.buffer_bytes[:-1] * 8 / fab.rate_bps[:-1], initial=0.0))
        self.Dr = math.ceil((max_rtt + self.H * qmax) / self.dt) + 2
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

    # -- admission and routing -------------------------------------------------------
    def _route(self, s: int, row: int) -> None:
        fl, fab = self.flows, self.fabric
        p = fab.path(fl.src[row], fl.dst[row], int(fl.flow_id[row]))
        self.path[s] = self.L
        if p is None:
            self.stalled[s] = True
            self.last_hop[s] = 0
            return
        if len(p) > self.H:
            if len(p) > self.config.max_hops:
                raise ConfigError(f"a path of {len(p)} queues exceeds SimConfig.max_hops="
                                  f"{self.config.max_hops}; raise it")
            self._widen(len(p))
        self.stalled[s] = False
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
        fl = self.flows
        slots = np.array([self.free.pop() for _ in rows], dtype=np.int64)
        r = np.array(rows, dtype=np.int64)
        self.row[slots] = r
        self.active[slots] = True
        self.size[slots] = fl.size[r]
        self.remaining[slots] = fl.size[r]
        for nm, v in (("delivered", 0.0), ("sent", 0.0), ("lost", 0.0), ("retx", 0.0),
                      ("last_cnp", -np.inf), ("rtt_last", np.nan)):
            getattr(self, nm)[slots] = v
        self.next_probe[slots] = self.t
        self.cnps[slots] = 0
        self.stop[slots] = np.where(np.isnan(fl.stop[r]), np.inf, fl.stop[r])
        self.src_i[slots] = fl.src_i[r]
        self.b[slots] = self.prev_dep[slots] = self.prev_mout[slots] = 0.0
        self.seen[slots] = False
        self.fb_cnp[:, slots] = False
        self.fb_lost[:, slots] = 0.0
        self.fb_rtt[:, slots] = np.nan
        for s, row in zip(slots, rows, strict=True):
            self._route(int(s), row)
        fl.begun[r] = np.maximum(fl.start[r], self.t)
        self.cc.reset_slots(slots, self.t, self.line[slots])

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Fail/restore a link now; flows whose path changes are rerouted (their bytes
        in the fabric are sent again), flows with no path stall until one comes back."""
        self.fabric.set_link(a, b, up)
        for s in np.flatnonzero(self.active):
            old = self.path[s].copy()
            self._route(int(s), int(self.row[s]))
            if not np.array_equal(old, self.path[s]):
                inflight = float(self.b[s].sum() + self.prev_dep[s].sum())
                self.remaining[s] += inflight
                self.retx[s] += inflight
                self.b[s] = self.prev_dep[s] = self.prev_mout[s] = 0.0

    def set_ecn(self, key: PortKey, cfg: EcnConfig | None) -> None:
        self.fabric.set_ecn(key, cfg)

    # -- one step --------------------------------------------------------------------
    def step(self) -> None:
        dt, t0 = self.dt, self.t
        t1 = t0 + dt
        while self._link_events and self._link_events[0][0] < t1:
            _, a, b, up = self._link_events.pop(0)
            self.set_link(a, b, up)
        self._admit(t1)
        fab, cc, act = self.fabric, self.cc, self.active
        # 2. feedback due now
        r = self.steps % self.D
        cnp = self.fb_cnp[r]
        if cnp.any():
            cc.on_cnp(t0, cnp & act)
            cnp[:] = False
        lost = self.fb_lost[r]
        self.remaining += lost
        lost[:] = 0.0
        rr = self.fb_rtt[self.steps % self.Dr]
        back = ~np.isnan(rr)
        if back.any():
            self.rtt_last[back] = rr[back]
            rr[:] = np.nan
            cc.on_rtt(t0, back & act, self.rtt_last)
        # 3. inject
        rate = cc.rate(t0)
        send = np.minimum(rate * (dt / 8.0), self.remaining)
        blocked = ~act | self.stalled
        if self._has_stop:
            blocked |= self.stop <= t0
        send[blocked] = 0.0
        self.remaining -= send
        self.sent += send
        cc.on_sent(t0, send)
        # 4. queues
        path = self.path
        inflow = np.empty_like(self.b)
        inflow[:, 0] = send
        inflow[:, 1:] = self.prev_dep[:, :-1]
        pf = path.ravel()
        nq = self.L + 1
        arrivals = np.bincount(pf, inflow.ravel(), nq)
        q = np.bincount(pf, self.b.ravel(), nq)
        p = fab.mark_probability(q)
        serve = fab.rate_bps * (dt / 8.0)
        avail = q + arrivals
        dep_q = np.minimum(avail, serve)
        drops = np.maximum(avail - dep_q - fab.buffer_bytes, 0.0)
        kept = avail - drops
        fdrop = np.divide(drops, arrivals, out=np.zeros(nq), where=arrivals > 0)
        fdep = np.divide(dep_q, kept, out=np.zeros(nq), where=kept > 0)
        drop_fh = inflow * fdrop[path]
        tot = self.b + inflow - drop_fh
        dep = tot * fdep[path]
        self.b = tot - dep
        m_in = np.zeros_like(dep)
        m_in[:, 1:] = self.prev_mout[:, :-1]
        mout = 1.0 - (1.0 - m_in) * (1.0 - p[path])
        dep_m = dep * mout
        self.counters.add_step(q, kept - dep_q, arrivals, dep_q,
                               np.bincount(pf, dep_m.ravel(), nq), drops)
        self.seen |= inflow > 0
        # 5. delivery, CNPs, losses
        ar, lh = self._ar, self.last_hop
        got = dep[ar, lh]
        got_m = dep_m[ar, lh]
        dep[ar, lh] = 0.0
        self.prev_dep, self.prev_mout = dep, mout
        self.delivered += got
        when = (self.steps + self.dsteps) % self.D
        lam = got_m / self.scale.pkt_bytes
        fire = (lam > 0) & (t0 - self.last_cnp >= self.cnp_interval - 1e-12)
        if fire.any():
            fire &= self._uniform() < -np.expm1(-lam)
            self.last_cnp[fire] = t0
            self.cnps[fire] += 1
            self.fb_cnp[when[fire], fire.nonzero()[0]] = True
        lost_f = drop_fh.sum(axis=1)
        if drops.any():
            lf = lost_f > 0
            self.fb_lost[when[lf], lf.nonzero()[0]] += lost_f[lf]
            self.lost += lost_f
            self.retx += lost_f
        # RTT probes every probe interval (several may be in flight, like per-ACK RTT
        # samples): RTT = base RTT + queueing delay now on the path; the answer comes
        # back that RTT later
        due = act & (self.next_probe <= t0)
        if due.any():
            idx = due.nonzero()[0]
            qd = (q / fab.rate_bps * 8.0)[path[idx]].sum(axis=1)
            val = self.rtt0[idx] + qd
            k = np.minimum(np.rint(val / dt).astype(np.int64), self.Dr - 1)
            self.fb_rtt[(self.steps + k) % self.Dr, idx] = val
            self.next_probe[idx] = t0 + self.probe_interval
        self.t, self.steps = t1, self.steps + 1
        self._finish(t1)
        if t1 >= self._next_interval - 1e-12:
            self._close_interval(t1)

    def _uniform(self) -> np.ndarray:
        """A uniform draw per slot from (seed, flow id, step) alone, so a flow's draws do
        not depend on which other flows share the run (splitmix64 finaliser)."""
        fid = self.flows.flow_id[np.maximum(self.row, 0)].astype(np.uint64)
        z = (fid * np.uint64(0x9E3779B97F4A7C15) + np.uint64(self.steps)
             + self._seed_mix)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
        return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)

    def _finish(self, t1: float) -> None:
        act = self.active
        # complete within float rounding (sums of many fluid steps): 1 ppb of the size
        done = act & (self.delivered >= self.size * (1 - 1e-9) - 1e-6)
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
        fl.end[rows] = t1 + self.fwd[idx]
        fl.delivered[rows] = self.delivered[idx]
        fl.drops[rows] = self.lost[idx]
        fl.retx[rows] = self.retx[idx]
        fl.cnps[rows] = self.cnps[idx]
        seen = self.seen[idx]
        if seen.any():
            k = seen.nonzero()
            self.counters.pairs.append(np.column_stack([
                self.path[idx][k], self.src_i[idx][k[0]], rows[k[0]],
                (self.sent[idx][k[0]] >= self.elephant_bytes).astype(np.int64)]))
        self.active[idx] = False
        self.row[idx] = -1
        self.path[idx] = self.L
        self.b[idx] = self.prev_dep[idx] = 0.0
        self.remaining[idx] = 0.0
        self.cc.reset_slots(idx, self.t, self.line[idx])  # idle CC state, no timers
        self.free.extend(int(i) for i in idx[::-1])
        for row, i in zip(rows, idx, strict=True):
            fl.release(int(row), t1 + float(self.fwd[i]))

    def _close_interval(self, t1: float) -> None:
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
    def run(self, until_s: float) -> None:
        """Step until ``until_s`` (simulated seconds)."""
        n = round((until_s - self.t) / self.dt)
        for _ in range(max(0, n)):
            self.step()

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
