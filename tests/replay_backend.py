"""``ReplayBackend``: a deterministic stand-in backend for tests of the runner and report.

Not a backend a spec can name: tests pass an instance to ``run_spec``.

It measures nothing.  It walks the run in steps of ``spec.interval_s``, writes a
synthetic ``PortTelemetry`` for every switch port and, for each flow that completes in
the step, a flow record whose FCT is the ideal FCT times a factor derived from the agent
name (so variants differ reproducibly).  ``fail_at_s`` makes it raise ``fail_with`` when
the run reaches that time, to test interrupted runs.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.runs import FLOW_RECORD_COLUMNS
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment.backend import Progress, RunSink
from p4cc.experiment.spec import ExperimentSpec


def _unit(text: str) -> float:
    """A deterministic number in [0, 1) from a string."""
    return (zlib.crc32(text.encode()) % 10_000) / 10_000.0


class ReplayBackend:
    name = "replay"

    def __init__(self, fail_at_s: float | None = None,
                 fail_with: type[BaseException] = RuntimeError) -> None:
        self.fail_at_s = fail_at_s
        self.fail_with = fail_with

    def check(self, spec: ExperimentSpec) -> None:
        if spec.scale_obj.pkt_bytes <= 100:
            raise ConfigError("backend replay: scale.pkt_bytes must exceed 100")

    def _flows(self, spec: ExperimentSpec, schedule: pd.DataFrame,
               agent: str) -> pd.DataFrame:
        scale = spec.scale_obj
        factor = 1.0 + 2.0 * _unit(agent)
        size = schedule["size_bytes"].to_numpy(float)
        dur = np.where(schedule["cls"] == "bulk",
                       schedule["stop_s"].fillna(spec.duration_s) - schedule["start_s"],
                       scale.base_rtt_s + size * 8.0 / scale.link_rate_bps)
        jitter = 1.0 + (schedule["flow_id"].to_numpy() % 7) / 7.0
        fct = dur * np.where(schedule["cls"] == "bulk", 1.0, factor * jitter)
        start = schedule["start_s"].to_numpy(float)
        end = start + fct
        bytes_rx = np.where(schedule["cls"] == "bulk", scale.link_rate_bps / 8 * fct, size)
        return pd.DataFrame({
            "flow_id": schedule["flow_id"], "src": schedule["src"], "dst": schedule["dst"],
            "size_bytes": schedule["size_bytes"], "cls": schedule["cls"],
            "tag": schedule["tag"], "start_s": start, "end_s": end, "fct_s": fct,
            "bytes_rx": bytes_rx.astype(np.int64),
            "retransmissions": (schedule["flow_id"].to_numpy() % 3 == 0).astype(int),
            "completed": end <= spec.duration_s, "base_rtt_s": scale.base_rtt_s, "cnps": 0,
        })[list(FLOW_RECORD_COLUMNS)]

    def run(self, spec: ExperimentSpec, schedule: pd.DataFrame, link_events: pd.DataFrame,
            agent_name: str, sink: RunSink, progress: Progress) -> None:
        topo = spec.topo()
        scale = spec.scale_obj
        flows = self._flows(spec, schedule, agent_name).sort_values("end_s")
        ends = flows["end_s"].to_numpy()
        try:
            ecn: EcnConfig | None = static_setting(agent_name.partition(":")[0], scale)
        except ConfigError:
            ecn = static_setting("SECN1", scale)
        k = _unit(agent_name)
        n_steps = max(1, math.ceil(spec.duration_s / spec.interval_s - 1e-9))
        done = 0
        sink.log(f"replay: {len(flows)} flows, {n_steps} intervals")
        for step in range(1, n_steps + 1):
            t = min(spec.duration_s, step * spec.interval_s)
            if self.fail_at_s is not None and t >= self.fail_at_s:
                raise self.fail_with(f"replay backend told to fail at {self.fail_at_s} s")
            recs = []
            for sw in topo.switches:
                for port in sw.ports:
                    phase = _unit(f"{sw.name}:{port}")
                    q = scale.buffer_bytes * 0.2 * (1 + math.sin(step * 0.7 + 6 * phase)) * (
                        0.5 + k)
                    util = 0.5 + 0.4 * math.sin(step * 0.3 + phase)
                    tx = util * scale.link_rate_bps
                    pkts = int(tx * spec.interval_s / 8 / scale.pkt_bytes)
                    marked = int(pkts * min(1.0, q / scale.buffer_bytes))
                    recs.append(PortTelemetry(
                        switch=sw.name, port=port, t_s=t, interval_s=spec.interval_s,
                        qlen_avg_bytes=q, qlen_max_bytes=min(scale.buffer_bytes, 2 * q),
                        tx_bps=tx, tx_marked_bps=tx * marked / max(1, pkts), tx_pkts=pkts,
                        tx_marked_pkts=marked, drops_pkts=int(q > 0.7 * scale.buffer_bytes),
                        ecn=ecn, incast_degree=1 + step % 4, active_flows=2 + step % 5,
                        elephant_flows=step % 2, sojourn_avg_s=q * 8 / scale.link_rate_bps,
                        utilization=util))
            sink.telemetry(recs)
            upto = int(np.searchsorted(ends, t, side="right"))
            if upto > done:
                sink.flows(_records(flows.iloc[done:upto]))
                done = upto
            progress(t)
        if done < len(flows):  # flows still running at the end: not completed
            sink.flows(_records(flows.iloc[done:]))


def _records(df: pd.DataFrame) -> list[Mapping[str, Any]]:
    out = df.copy()
    unfinished = ~out["completed"].to_numpy(bool)
    out.loc[unfinished, ["end_s", "fct_s"]] = np.nan
    return out.to_dict("records")  # type: ignore[return-value]
