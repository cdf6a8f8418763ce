"""Glue between a BMv2 run and its fidelity verdict (p4cc.experiment.bmv2.fidelity).

``sampler`` builds the process sampler over the fabric's switches; ``judge`` turns
what the run kept (telemetry, poll timings, process samples, the senders' traces) and
what it configured (port rates, packet size, Δt, NIC rates) into a Verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.experiment.bmv2 import fidelity as fid
from p4cc.experiment.bmv2.fidelity_host import read_starts
from p4cc.experiment.bmv2.procmon import SwitchSampler
from p4cc.experiment.bmv2.records import RecordQueues
from p4cc.experiment.session import FabricSession
from p4cc.experiment.spec import ExperimentSpec
from p4cc.topo.spec import TopoSpec

#: process samples per second (cheap: a few /proc and /sys reads per switch)
SAMPLE_PERIOD_S = 0.25


def sampler(fabric: Any, session: FabricSession, now: Callable[[], float],
            sink: Callable[[list[dict[str, Any]]], None]) -> SwitchSampler:
    switches = {name: (int(fabric.bmv2(name).pid),
                       [f"{name}-eth{p}" for p in ctl.ports])
                for name, ctl in session.controls.items()}
    return SwitchSampler(switches, now, sink, SAMPLE_PERIOD_S)


def facts(spec: ExperimentSpec, topo: TopoSpec, session: FabricSession) -> fid.RunFacts:
    from p4cc.hostcc.wire import frame_payload_bytes

    pkt = int(topo.scale.pkt_bytes)
    rates = {(name, p): float(ctl.port_rate_bps(p))
             for name, ctl in session.controls.items() for p in ctl.ports}
    nic = {h.name: float(topo.link_at(h.name, 0).rate_bps) for h in topo.hosts}
    return fid.RunFacts(rates, pkt, float(spec.interval_s), nic,
                        pkt / frame_payload_bytes(pkt), float(topo.scale.base_rtt_s))


def judge(spec: ExperimentSpec, topo: TopoSpec, session: FabricSession,
          records: RecordQueues, hosts_dir: Path, senders: Sequence[str],
          tol: fid.Tolerances | None = None) -> fid.Verdict:
    tele = pd.DataFrame(records.kept_telemetry)
    polls = pd.DataFrame(records.kept_polls)
    cpu = pd.DataFrame(records.kept_cpu)
    from p4cc.hostcc.wire import frame_payload_bytes

    payload = frame_payload_bytes(topo.scale.pkt_bytes)
    traces = fid.read_traces(hosts_dir, senders, payload)
    starts = read_starts(hosts_dir, senders)
    return fid.evaluate(facts(spec, topo, session), tele, cpu, polls, traces, tol, starts)
