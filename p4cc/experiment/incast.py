"""``p4cc incast``: one incast under one static ECN setting after another, as a spec run.

The experiment: hosts h1..h(N-1) of the topology send one long flow each to hN (incast)
from t = 0, so the bottleneck is the switch port toward hN; every setting (SECN1, then
SECN2: p4cc.controlplane.ecn) is one agent variant of the spec, and telemetry is
polled every interval.  ``--traffic iperf3`` (the default) means fixed-rate senders
(host CC ``fixed:<rate>``, on BMv2 and in the simulator alike) whose total frame rate is
``load`` x the bottleneck's link rate; ``dcqcn``/``rlcc`` are p4cc's reacting senders.
``incast_spec`` builds the ExperimentSpec; ``run_testbed`` runs it through
p4cc.experiment.runner.run_spec (which stores the resolved config, seeds and versions
with every run) and prints a per-port summary per setting from the stored telemetry
(also saved as ``summary.txt``/``summary.json`` beside the runs).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from p4cc.analysis.runs import open_run
from p4cc.constants import ETH_HEADER_BYTES, IPV4_HEADER_BYTES, UDP_HEADER_BYTES
from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment.backend import Backend, get_backend
from p4cc.experiment.doctor import resolve_backend as doctor_resolve_backend
from p4cc.experiment.runner import run_spec
from p4cc.experiment.spec import ExperimentSpec, parse_spec
from p4cc.scale import Scale, get_scale
from p4cc.topo.spec import TopoSpec, parse_topo

HEADERS_BYTES = ETH_HEADER_BYTES + IPV4_HEADER_BYTES + UDP_HEADER_BYTES
#: every flow lasts the run: twice what its host link could carry in ``duration_s``
FLOW_SIZE_FACTOR = 2
#: the spec's largest flow size (p4cc.experiment.spec: incast ``sizes``)
MAX_FLOW_BYTES = 10**10
#: the incast workload's window: only the burst at t = 0 (the next one, an exponential
#: gap of mean >= 2 x duration later, would need to fall inside it)
START_WINDOW_S = 1e-3


@dataclass(frozen=True)
class TestbedConfig:
    __test__ = False  # not a pytest class

    topo: str = "star,hosts=5"
    scale: str = "testbed"
    backend: str = "auto"  # auto | bmv2 | sim
    settings: tuple[str, ...] = ("SECN1", "SECN2")
    duration_s: float = 10.0
    interval_s: float = 0.5
    load: float = 1.5  # offered load at the bottleneck / its link rate (iperf3 traffic)
    traffic: str = "iperf3"  # iperf3 (fixed-rate senders at --load) | dcqcn | rlcc
    out_dir: Path | None = None
    bmv2_log: bool = False
    pcap: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> TestbedConfig:
        if self.backend not in ("auto", "bmv2", "sim"):
            raise ConfigError(f"backend {self.backend!r} must be auto, bmv2 or sim")
        if self.traffic not in ("iperf3", "dcqcn", "rlcc"):
            raise ConfigError(f"traffic {self.traffic!r} must be iperf3, dcqcn or rlcc")
        if not self.settings:
            raise ConfigError("give at least one ECN setting, e.g. --settings SECN1,SECN2")
        if not 0.5 <= self.duration_s <= 3600:
            raise ConfigError(f"duration {self.duration_s} s must be in [0.5, 3600]")
        if not 0.05 <= self.interval_s <= self.duration_s:
            raise ConfigError(f"interval {self.interval_s} s must be in [0.05, duration]")
        if not 0.1 <= self.load <= 10:
            raise ConfigError(f"load {self.load} must be in [0.1, 10] x the link rate")
        return self


def resolve_backend(requested: str) -> str:
    """p4cc.experiment.doctor.resolve_backend for this experiment."""
    return doctor_resolve_backend(requested, "the incast")


def iperf3_app_rate(wire_bps: float, payload_bytes: int) -> float:
    """iperf3's ``-b`` for ``wire_bps`` of frames (to drive the incast by hand with
    iperf3, e.g. in ``p4cc cli``): iperf3 paces UDP payload bits, so the Ethernet + IPv4
    + UDP headers (HEADERS_BYTES) of every datagram come on top."""
    return wire_bps * payload_bytes / (payload_bytes + HEADERS_BYTES)


def incast_plan(topo: TopoSpec, scale: Scale, load: float) -> tuple[str, list[str], float, int]:
    """(receiver, senders, per-sender frame rate b/s, UDP payload bytes) for ``load``."""
    receiver = topo.hosts[-1].name
    senders = [h.name for h in topo.hosts[:-1]]
    link = topo.link_at(receiver, 0)
    payload = max(16, scale.pkt_bytes - HEADERS_BYTES)
    return receiver, senders, load * link.rate_bps / len(senders), payload


def incast_spec(cfg: TestbedConfig, backend: str = "sim") -> ExperimentSpec:
    """The ExperimentSpec of ``cfg`` (``backend`` resolved: bmv2 or sim)."""
    cfg.validate()
    scale = get_scale(cfg.scale)
    topo = parse_topo(cfg.topo, scale)
    receiver, senders, rate, _payload = incast_plan(topo, scale, cfg.load)
    host_cc = f"fixed:{rate:g}" if cfg.traffic == "iperf3" else cfg.traffic
    size = min(MAX_FLOW_BYTES, math.ceil(
        FLOW_SIZE_FACTOR * topo.link_at(senders[0], 0).rate_bps * cfg.duration_s / 8))
    return parse_spec({
        "name": "incast", "backend": backend, "topology": cfg.topo, "scale": cfg.scale,
        "duration_s": cfg.duration_s, "seeds": [0], "interval_s": cfg.interval_s,
        "agents": [s.lower() for s in cfg.settings], "host_cc": host_cc,
        "workloads": [{"type": "incast", "tag": "incast", "load": 1.0,
                       "senders": [len(senders), len(senders)], "flows_per_sender": 1,
                       "sizes": [size], "receiver": receiver,
                       "windows": [[0.0, min(START_WINDOW_S, cfg.duration_s)]]}],
        "outputs": ["telemetry", "flows", "hostcc"],
        "description": f"p4cc incast: {', '.join(senders)} -> {receiver}, {host_cc}"},
        source="p4cc incast")


# -- summary ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PortSummary:
    setting: str
    switch: str
    port: int
    intervals: int
    qlen_avg_bytes: float
    qlen_max_bytes: float
    tx_mbps: float
    marked_mbps: float
    marked_frac: float
    drops_pkts: int


def summarize(setting: str, records: Iterable[PortTelemetry]) -> list[PortSummary]:
    """One line per port that sent anything, averaged over the intervals given."""
    by_port: dict[tuple[str, int], list[PortTelemetry]] = {}
    for r in records:
        by_port.setdefault(r.key, []).append(r)
    out = []
    for (sw, port), rs in sorted(by_port.items()):
        if sum(r.tx_pkts for r in rs) == 0:
            continue
        tx = sum(r.tx_bps for r in rs) / len(rs)
        marked = sum(r.tx_marked_bps for r in rs) / len(rs)
        tx_pkts = sum(r.tx_pkts for r in rs)
        out.append(PortSummary(
            setting, sw, port, len(rs),
            qlen_avg_bytes=sum(r.qlen_avg_bytes for r in rs) / len(rs),
            qlen_max_bytes=max(r.qlen_max_bytes for r in rs),
            tx_mbps=tx / 1e6, marked_mbps=marked / 1e6,
            marked_frac=sum(r.tx_marked_pkts for r in rs) / tx_pkts,
            drops_pkts=sum(r.drops_pkts for r in rs)))
    return out


def format_summary(rows: list[PortSummary], ecn: dict[str, EcnConfig]) -> str:
    head = (f"{'setting':<7} {'port':<9} {'q avg B':>9} {'q max B':>9} {'tx Mb/s':>8} "
            f"{'marked Mb/s':>11} {'marked %':>8} {'drops':>7}")
    lines = [head, "-" * len(head)]
    last = None
    for r in rows:
        if r.setting != last:
            lines.append(f"# {r.setting}: {ecn[r.setting].describe()}")
            last = r.setting
        lines.append(f"{r.setting:<7} {r.switch + ':' + str(r.port):<9} {r.qlen_avg_bytes:>9.0f} "
                     f"{r.qlen_max_bytes:>9.0f} {r.tx_mbps:>8.2f} {r.marked_mbps:>11.3f} "
                     f"{100 * r.marked_frac:>8.2f} {r.drops_pkts:>7}")
    return "\n".join(lines)


_FIELDS = [f.name for f in fields(PortTelemetry) if f.name != "ecn"]


def stored_records(telemetry: pd.DataFrame) -> list[PortTelemetry]:
    """A run's ``telemetry.csv`` (PortTelemetry.to_row columns) back as records."""
    out = []
    for row in telemetry.to_dict("records"):
        ecn = (None if pd.isna(row.get("kmin_bytes")) else
               EcnConfig(int(row["kmin_bytes"]), int(row["kmax_bytes"]), float(row["pmax"])))
        out.append(PortTelemetry(**{k: row[k] for k in _FIELDS}, ecn=ecn))
    return out


# -- the experiment --------------------------------------------------------------------
def _backend(name: str, cfg: TestbedConfig) -> Backend:
    if name == "bmv2":
        from p4cc.experiment.bmv2.backend import Bmv2Backend

        return Bmv2Backend(bmv2_log=cfg.bmv2_log, pcap=cfg.pcap)
    return get_backend(name)


def run_testbed(cfg: TestbedConfig) -> list[PortSummary]:
    """Run the incast spec of ``cfg``; print and save the per-port summary."""
    cfg.validate()
    backend = resolve_backend(cfg.backend)
    spec = incast_spec(cfg, backend)
    settings = {name.upper(): static_setting(name, spec.scale_obj) for name in cfg.settings}
    out = cfg.out_dir or Path("runs") / time.strftime("testbed-%Y%m%d-%H%M%S")
    print(f"== incast on {backend}: {spec.description}, {cfg.duration_s:g} s per setting; "
          + "; ".join(f"{k}: {v.describe()}" for k, v in settings.items()), flush=True)
    runs = run_spec(spec, backend=_backend(backend, cfg), out=out)
    rows: list[PortSummary] = []
    for name, path in zip(settings, runs, strict=True):
        records = stored_records(open_run(path).telemetry)
        # the first interval is the ramp-up (flows starting)
        rows += summarize(name, [r for r in records if r.t_s > cfg.interval_s + 1e-9])
    text = format_summary(rows, settings)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    print(f"results in {out}")
    return rows
