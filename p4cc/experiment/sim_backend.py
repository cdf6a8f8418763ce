"""``SimBackend``: p4cc.experiment.backend.Backend played on the simulator.

The same spec, schedule, link events and agents as the BMv2 backend: one agent per
switch gets that switch's PortTelemetry every ``spec.interval_s`` and returns EcnConfig
writes, validated and applied to the simulated queues (an agent that raises keeps the
last valid settings, as on BMv2).  Results go through the RunSink as the run goes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from p4cc.analysis.runs import FLOW_RECORD_COLUMNS
from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment import chameleon, chameleon_sim
from p4cc.experiment.agents import RunAgents
from p4cc.experiment.runner import raise_if_terminated
from p4cc.experiment.spec import OUTPUTS
from p4cc.sim.cc import sim_cc, sim_host_cc_names
from p4cc.sim.config import SimConfig, refuse_unsupported
from p4cc.sim.engine import Engine

log = logging.getLogger(__name__)

#: host_cc values the simulator models (``name`` or ``name:variant``).
SIM_HOST_CC = sim_host_cc_names()  # the host CC kinds the simulator models


def check_spec(spec: Any) -> None:
    """Raise ConfigError naming each feature of ``spec`` the simulator cannot honour."""
    host_cc = str(getattr(spec, "host_cc", "dcqcn"))
    if host_cc.partition(":")[0] not in SIM_HOST_CC:
        raise ConfigError(f"host_cc {host_cc!r} needs the bmv2 backend (real kernel "
                          f"transport); the sim backend models only {list(SIM_HOST_CC)}")
    outputs = tuple(getattr(spec, "outputs", ()))
    if "int" in outputs and outputs != tuple(OUTPUTS):
        raise ConfigError("output 'int' (INT-MD reports) needs the bmv2 backend; the sim "
                          "backend cannot honour it: remove 'int' from outputs")
    refuse_unsupported(dict(getattr(spec, "options", {}) or {}))


class SimBackend:
    name = "sim"

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config

    def check(self, spec: Any) -> None:
        check_spec(spec)
        spec.topo()  # topology errors surface before the run

    def run(self, spec: Any, schedule: pd.DataFrame, link_events: pd.DataFrame,
            agent_name: str, sink: Any, progress: Any) -> None:
        self.check(spec)
        topo = spec.topo()
        cc, cc_params = sim_cc(str(spec.host_cc))
        base = self.config or SimConfig()
        pfc_alpha = getattr(spec, "pfc_alpha", None)  # (specs may be duck-typed)
        cfg = SimConfig(**{**base.to_dict(), "cc": cc, "seed": int(sink.seed),
                           "telemetry_interval_s": float(spec.interval_s),
                           "pfc": pfc_alpha is not None,
                           "pfc_alpha": pfc_alpha or base.pfc_alpha,
                           "pfc_buffer": getattr(spec, "pfc_buffer", base.pfc_buffer),
                           "pfc_pool_bytes": getattr(spec, "pfc_pool_bytes",
                                                     base.pfc_pool_bytes),
                           "cc_params": cc_params})
        # CHAMELEON: one controller for the fabric (None for per-switch agents)
        fabric = chameleon_sim.for_sim(agent_name, topo, sink, float(spec.interval_s))
        run_agents = RunAgents(seed=int(sink.seed))  # acc:online: fine-tuned in the run
        with chameleon.links(fabric):
            agents: dict[str, Agent] = {sw.name: run_agents.make(agent_name, topo.scale)
                                        for sw in topo.switches}
        eng_box: list[Engine] = []

        def on_interval(t: float, recs: list[PortTelemetry]) -> None:
            sink.telemetry(recs)
            by_sw: dict[str, dict[int, PortTelemetry]] = {}
            for r in recs:
                by_sw.setdefault(r.switch, {})[r.port] = r
            if fabric is not None:  # hosts' parameters now; the proxies' thresholds below
                fabric.on_interval(eng_box[0], t, recs)
            for sw, obs in by_sw.items():
                _apply(eng_box[0], sw, agents[sw], obs, sink)
            if cfg.host_traces:
                tr = eng_box[0].host_traces()
                eng_box[0].traces.clear()
                if len(tr):
                    sink.hostcc(tr.to_dict("records"))
            progress(t)
            raise_if_terminated()  # a SIGTERM lost while numba compiled (runner._PENDING)

        eng = Engine(topo, schedule, cfg, link_events=_events(link_events),
                     on_interval=on_interval)
        eng_box.append(eng)
        for sw, agent in agents.items():
            ports = {p: eng.fabric.ecn[(sw, p)] for (s, p) in eng.fabric.keys if s == sw}
            agent.reset(ports)
            _apply(eng, sw, agent, {}, sink)
        sink.log(f"sim backend: dt={eng.dt:g}s interval={eng.interval:g}s cc={cfg.cc} "
                 f"cc_params={cfg.cc_params} cnp_interval={eng.cnp_interval:g}s")
        # CHAMELEON's end=1 ends the run once its tuner has stopped (a tuning run)
        eng.run(float(spec.duration_s), stop=fabric.ended if fabric is not None else None)
        sink.flows(flow_rows(eng))
        if eng.pfc is not None:
            _pfc_record(eng, sink)
        run_agents.finish(sink.path, sink.log)


def _pfc_record(eng: Engine, sink: Any) -> None:
    """pfc.csv: seconds each switch port and host NIC was paused (p4cc.sim.pfc), and a
    log line with the totals."""
    assert eng.pfc is not None
    queues, nics = eng.pfc.pause_seconds(eng.dt)
    fab = eng.fabric
    rows = [{"kind": "switch", "node": sw, "port": port, "paused_s": float(v)}
            for (sw, port), v in zip(fab.keys, queues, strict=True)]
    rows += [{"kind": "host", "node": h, "port": 0, "paused_s": float(v)}
             for h, v in zip(fab.hosts, nics, strict=True)]
    pd.DataFrame(rows).to_csv(Path(sink.path) / "pfc.csv", index=False)
    model = (f"shared pool of {eng.pfc.pool:.6g} B per switch" if eng.pfc.pool is not None
             else "per-queue buffers")
    sink.log(f"pfc: alpha={eng.pfc.alpha:g}, {model}; switch ports paused {queues.sum():.6g} s in "
             f"all ({np.count_nonzero(queues)} of {len(queues)} ports), host NICs "
             f"{nics.sum():.6g} s ({np.count_nonzero(nics)} of {len(nics)} hosts); per port "
             f"in pfc.csv")


def _events(ev: pd.DataFrame | None) -> pd.DataFrame | None:
    if ev is None or len(ev) == 0:
        return None
    return ev


def _apply(eng: Engine, sw: str, agent: Agent, obs: Mapping[int, PortTelemetry],
           sink: Any) -> None:
    try:
        todo = dict(agent.act(obs))
        for port, setting in todo.items():
            if not isinstance(setting, EcnConfig):
                raise ConfigError(f"agent {agent.name} returned {setting!r} for port {port}")
            setting.validate(int(eng.fabric.buffer_bytes[eng.fabric.port((sw, port))]))
    except Exception as exc:  # fail-safe (any agent bug): keep the last valid thresholds
        sink.log(f"agent {agent.name} on {sw} failed ({type(exc).__name__}: {exc}); "
                 f"keeping its last settings")
        return
    for port, setting in todo.items():
        eng.set_ecn((sw, port), setting)
    if todo:
        sink.table("agent", [{"t_s": eng.t, "switch": sw, "port": p, "kmin_bytes": s.kmin_bytes,
                              "kmax_bytes": s.kmax_bytes, "pmax": s.pmax}
                             for p, s in todo.items()])


def flow_rows(eng: Engine) -> list[dict[str, Any]]:
    """Flow records (FLOW_RECORD_COLUMNS) of the flows that started.  The engine counts
    delivered payload as ``bytes_delivered`` and the wire bytes it sent again as
    ``retx_bytes``, so ``bytes_rx`` = bytes_delivered and ``retransmissions`` = the packets
    of ``pkt_bytes`` sent again: under go-back-N that is the lost packets plus the ones
    behind them that were resent, as the BMv2 backend counts it (resent bytes / payload,
    p4cc.experiment.bmv2.collect); with ``selective`` recovery it equals the drops."""
    df = eng.flow_records()
    df = df[np.isfinite(df["start_s"])]
    resent = np.round(df["retx_bytes"].to_numpy(np.float64) / eng.flows.pkt_bytes)
    out = df.assign(bytes_rx=df["bytes_delivered"].round().astype(np.int64),
                    retransmissions=resent.astype(np.int64))[list(FLOW_RECORD_COLUMNS)]
    return [{str(k): v for k, v in row.items()} for row in out.to_dict("records")]
