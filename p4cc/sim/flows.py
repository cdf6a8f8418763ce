"""The flow schedule as arrays, the admission queue, and per-flow result records.

Schedule columns are p4cc.traffic.workloads.SCHEDULE_COLUMNS (``flow_id, start_s, src,
dst, size_bytes, cls, tag, after, stop_s``); ``size_bytes`` 0 is a bulk flow that runs
until ``stop_s``; ``after`` >= 0 holds a flow until that flow completes.

Sizes are payload bytes, as for the host transport (p4cc.hostcc): on the wire a flow is
its payload plus ``HEADER_BYTES`` per packet of ``pkt_bytes`` (the header count the
slowdown of p4cc.analysis.metrics uses), and ``bytes_delivered`` is reported in payload.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pandas as pd

from p4cc.errors import ConfigError
from p4cc.hostcc.wire import DATA_FRAME_OVERHEAD_BYTES as HEADER_BYTES
from p4cc.sim.fabric import Fabric

#: Columns of the engine's per-flow records (one row per scheduled flow); the sim backend
#: turns them into the run store's p4cc.analysis.runs.FLOW_RECORD_COLUMNS.
ENGINE_FLOW_COLUMNS = ["flow_id", "src", "dst", "size_bytes", "cls", "tag", "start_s",
                       "end_s", "fct_s", "bytes_delivered", "drops_pkts", "retx_bytes",
                       "cnps", "completed", "base_rtt_s"]


class FlowTable:
    """Static attributes of every scheduled flow, indexed by row (0..F-1)."""

    def __init__(self, schedule: pd.DataFrame, fabric: Fabric) -> None:
        need = {"start_s", "src", "dst", "size_bytes"}
        missing = need - set(schedule.columns)
        if missing:
            raise ConfigError(f"flow schedule lacks columns {sorted(missing)}; build it with "
                              "p4cc.traffic.workloads")
        df = schedule.reset_index(drop=True)
        n = len(df)
        self.n = n
        self.pkt_bytes = fabric.scale.pkt_bytes
        self.flow_id = (df["flow_id"].to_numpy(np.int64) if "flow_id" in df
                        else np.arange(n, dtype=np.int64))
        self.start = df["start_s"].to_numpy(np.float64)
        self.src = [str(s) for s in df["src"]]
        self.dst = [str(s) for s in df["dst"]]
        for h in set(self.src) | set(self.dst):
            if h not in fabric.host_index:
                raise ConfigError(f"flow schedule names host {h!r}, which topology "
                                  f"{fabric.spec.name!r} does not have")
        if any(s == d for s, d in zip(self.src, self.dst, strict=True)):
            raise ConfigError("flow schedule has a flow from a host to itself")
        self.src_i = np.array([fabric.host_index[s] for s in self.src], dtype=np.int64)
        self.dst_i = np.array([fabric.host_index[s] for s in self.dst], dtype=np.int64)
        size = df["size_bytes"].to_numpy(np.float64)
        if np.any(size < 0) or not np.all(np.isfinite(self.start)):
            raise ConfigError("flow schedule has a negative size or a non-finite start time")
        self.stop = (df["stop_s"].to_numpy(np.float64) if "stop_s" in df
                     else np.full(n, np.nan))
        self.stop_at = np.where(np.isnan(self.stop), np.inf, self.stop)
        # the flow's part of the CNP-draw hash (engine: splitmix64 of id, step and seed)
        self.hbase = np.zeros(n, dtype=np.uint64)
        self.bulk = size == 0
        self.size = np.where(self.bulk, np.inf, size)
        payload = self.pkt_bytes - HEADER_BYTES
        if payload <= 0:
            raise ConfigError(f"packet size {self.pkt_bytes} B leaves no payload after "
                              f"{HEADER_BYTES} B of headers; use a larger scale.pkt_bytes")
        # bytes on the wire: payload + headers of ceil(size / payload) packets (>= 1)
        self.wire = self.size + np.maximum(1, np.ceil(size / payload)) * HEADER_BYTES
        self.payload_frac = np.where(self.bulk, payload / self.pkt_bytes,
                                     size / np.where(self.bulk, 1.0, self.wire))
        self.cls = list(df["cls"]) if "cls" in df else ["flow"] * n
        self.tag = list(df["tag"]) if "tag" in df else [""] * n
        after = df["after"].to_numpy(np.int64) if "after" in df else np.full(n, -1)
        row_of = {int(f): i for i, f in enumerate(self.flow_id)}
        self.waiting: dict[int, list[int]] = {}  # row -> rows waiting for it
        self._heap: list[tuple[float, int]] = []
        for i in range(n):
            if after[i] >= 0:
                if int(after[i]) not in row_of:
                    raise ConfigError(f"flow {self.flow_id[i]} waits for unknown flow "
                                      f"{after[i]}")
                self.waiting.setdefault(row_of[int(after[i])], []).append(i)
            else:
                self._heap.append((float(self.start[i]), i))
        heapq.heapify(self._heap)
        # results
        self.end = np.full(n, np.nan)
        self.delivered = np.zeros(n)
        self.drops = np.zeros(n)
        self.retx = np.zeros(n)
        self.cnps = np.zeros(n, dtype=np.int64)
        self.begun = np.full(n, np.nan)
        self.ready = self.start.copy()  # start time, or later when released by ``after``
        self.base_rtt = np.full(n, np.nan)  # unloaded RTT of the path taken (s)

    def due(self, t: float) -> list[int]:
        """Rows whose (effective) start time is before ``t``, in start order."""
        out = []
        while self._heap and self._heap[0][0] < t:
            out.append(heapq.heappop(self._heap)[1])
        return out

    def release(self, row: int, t: float) -> None:
        """``row`` completed at ``t``: flows waiting for it become startable."""
        for w in self.waiting.pop(row, []):
            self.ready[w] = max(float(self.start[w]), t)
            heapq.heappush(self._heap, (float(self.ready[w]), w))

    def next_start(self) -> float:
        return self._heap[0][0] if self._heap else np.inf

    def pending(self) -> int:
        return len(self._heap) + sum(len(v) for v in self.waiting.values())

    def records(self) -> pd.DataFrame:
        completed = np.isfinite(self.end) & (self.delivered >= np.where(
            self.bulk, 0, self.wire * (1 - 1e-9)) - 1e-6)
        payload = np.where(completed & ~self.bulk, self.size,
                           self.delivered * self.payload_frac)
        rows: dict[str, Any] = {
            "flow_id": self.flow_id, "src": self.src, "dst": self.dst,
            "size_bytes": np.where(self.bulk, 0, self.size).astype(np.int64),
            "cls": self.cls, "tag": self.tag, "start_s": self.begun, "end_s": self.end,
            "fct_s": self.end - self.begun, "bytes_delivered": payload,
            "drops_pkts": np.round(self.drops / self.pkt_bytes).astype(np.int64),
            "retx_bytes": self.retx, "cnps": self.cnps, "completed": completed,
            "base_rtt_s": self.base_rtt,
        }
        return pd.DataFrame(rows, columns=ENGINE_FLOW_COLUMNS)
