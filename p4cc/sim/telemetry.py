"""Per-port interval accumulators -> PortTelemetry, the same record BMv2's poller emits."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from p4cc.controlplane.records import PortTelemetry
from p4cc.sim.fabric import Fabric

FloatArray = npt.NDArray[np.floating]  # bincount results are typed loosely
_FIELDS = tuple(f.name for f in dataclasses.fields(PortTelemetry))


class PortCounters:
    """Sums over the steps of one interval, one entry per queue (+ the dummy queue),
    added by the engine's queue kernel (p4cc.sim.kernel)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.n = fabric.n_ports + 1
        self.t_start = 0.0
        self.clear(0.0)
        # cumulative byte counters, so packet counts are whole packets over a run
        self._cum_tx = np.zeros(self.n)
        self._cum_txm = np.zeros(self.n)
        self._cum_drop = np.zeros(self.n)
        self._pk_tx = np.zeros(self.n, dtype=np.int64)
        self._pk_txm = np.zeros(self.n, dtype=np.int64)
        self._pk_drop = np.zeros(self.n, dtype=np.int64)

    def clear(self, t: float) -> None:
        self.t_start = t
        self.tx = np.zeros(self.n)
        self.txm = np.zeros(self.n)
        self.drops = np.zeros(self.n)
        self.arr = np.zeros(self.n)  # bytes offered
        self.q_arr = np.zeros(self.n)  # sum of depth seen x bytes offered
        self.qmax = np.zeros(self.n)
        # (queue, src host, flow, elephant) seen this interval, from flows that left
        self.pairs: list[npt.NDArray[np.int64]] = []

    def records(self, t: float, seen: npt.NDArray[np.int64]) -> list[PortTelemetry]:
        """Close the interval at ``t``; ``seen`` rows: (queue, src, flow id, elephant)."""
        fab = self.fabric
        pkt = fab.scale.pkt_bytes
        interval = max(t - self.t_start, 1e-12)
        pk = {}
        for name, cum, inc in (("tx", self._cum_tx, self.tx), ("txm", self._cum_txm, self.txm),
                               ("drop", self._cum_drop, self.drops)):
            before = np.floor(cum / pkt + 1e-9).astype(np.int64)
            cum += inc
            pk[name] = np.floor(cum / pkt + 1e-9).astype(np.int64) - before
        allseen = np.concatenate([seen, *self.pairs]) if self.pairs else seen
        flows = np.zeros(self.n, dtype=np.int64)
        srcs = np.zeros(self.n, dtype=np.int64)
        eleph = np.zeros(self.n, dtype=np.int64)
        if len(allseen):
            qcol = allseen[:, 0]
            big = int(allseen[:, 1:3].max()) + 1  # 1-D keys: np.unique(axis=0) is slow
            _, first = np.unique(qcol * big + allseen[:, 2], return_index=True)
            flows = np.bincount(qcol[first], minlength=self.n)
            eleph = np.bincount(qcol[first], weights=allseen[first, 3],
                                minlength=self.n).astype(np.int64)
            us = np.unique(qcol * big + allseen[:, 1])
            srcs = np.bincount(us // big, minlength=self.n)
        with np.errstate(invalid="ignore", divide="ignore"):
            qavg = np.where(self.arr > 0, self.q_arr / self.arr, 0.0)
            # byte-weighted depth / rate: the queue's rate is fixed over the interval
            soj = qavg / fab.rate_bps * 8
        n = fab.n_ports
        tx_bps = self.tx[:n] * 8 / interval
        # one record per port: built from its field values directly (the frozen
        # dataclass's per-field __init__ is most of the cost of an interval otherwise;
        # PortTelemetry has no __post_init__, so the objects are identical)
        cols = zip(fab.switch_names, fab.port_numbers, (t,) * n, (interval,) * n,
                   qavg[:n].tolist(), self.qmax[:n].tolist(), tx_bps.tolist(),
                   (self.txm[:n] * 8 / interval).tolist(), pk["tx"][:n].tolist(),
                   pk["txm"][:n].tolist(), pk["drop"][:n].tolist(),
                   [fab.ecn[k] for k in fab.keys], srcs[:n].tolist(), flows[:n].tolist(),
                   eleph[:n].tolist(), soj[:n].tolist(), (tx_bps / fab.rate_bps[:n]).tolist(),
                   (0.0,) * n,  # counter_interval_s: the simulator counts on the interval
                   strict=True)
        new, names = object.__new__, _FIELDS
        out = []
        for vals in cols:
            rec = new(PortTelemetry)
            rec.__dict__.update(zip(names, vals, strict=True))
            out.append(rec)
        self.clear(t)
        return out
