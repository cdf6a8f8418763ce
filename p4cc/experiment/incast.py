"""``p4cc testbed`` and ``p4cc cli``: the fabric, its control plane and a first experiment.

The experiment: the default star topology, hosts h1..h(N-1) send to hN (incast) with
UDP flows marked ECT(0) (iperf3 ``--tos 2``) whose total rate overloads the bottleneck
(the switch port toward hN) by ``load`` x its link rate; one static ECN setting after
another (SECN1, then SECN2: p4cc.controlplane.ecn), telemetry polled every interval;
a per-port summary per setting is printed and saved under ``runs/<name>/``.
Without BMv2, ``--backend auto`` runs the same incast on the simulator (p4cc.sim).
"""

from __future__ import annotations

import json
import logging
import platform
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError, SwitchError, ToolMissingError
from p4cc.experiment.doctor import resolve_backend as doctor_resolve_backend
from p4cc.experiment.session import FabricControl
from p4cc.scale import Scale, get_scale
from p4cc.topo.build import Fabric, FabricOptions
from p4cc.topo.spec import TopoSpec, parse_topo

log = logging.getLogger(__name__)

IPERF_BASE_PORT = 5201
ECT0_TOS = 2  # IPv4 ECN field 0b10 = ECT(0) (RFC 3168 §5)
HEADERS_BYTES = 14 + 20 + 8  # Ethernet + IPv4 + UDP


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
    traffic: str = "iperf3"  # iperf3 (fixed-rate UDP, ECT(0)) | dcqcn | rlcc (p4cc host)
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


# -- traffic ---------------------------------------------------------------------------
class Incast:
    """iperf3 UDP flows h1..h(N-1) -> hN with ECT(0), started and stopped by PID."""

    def __init__(self, fabric: Fabric, receiver: str, senders: list[str], rate_bps: float,
                 payload_bytes: int, duration_s: float) -> None:
        if shutil.which("iperf3") is None:
            raise ToolMissingError("iperf3 not found: `apt-get install iperf3` (or make setup)")
        self.fabric, self.receiver, self.senders = fabric, receiver, senders
        self.rate_bps, self.payload, self.duration_s = rate_bps, payload_bytes, duration_s
        self.procs: list[Any] = []

    def start(self) -> None:
        rx = self.fabric.host(self.receiver)
        dst_ip = self.fabric.topo.host(self.receiver).ip
        for i, _ in enumerate(self.senders):
            self.procs.append(rx.popen(["iperf3", "-s", "-1", "-p", str(IPERF_BASE_PORT + i)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait_servers(rx, len(self.senders))
        for i, name in enumerate(self.senders):
            cmd = ["iperf3", "-c", dst_ip, "-p", str(IPERF_BASE_PORT + i), "-u",
                   "-b", str(int(iperf3_app_rate(self.rate_bps, self.payload))),
                   "-l", str(self.payload),
                   "--tos", str(ECT0_TOS), "-t", f"{self.duration_s:g}"]
            log.debug("%s: %s", name, shlex.join(cmd))
            self.procs.append(self.fabric.host(name).popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def _wait_servers(self, rx: Any, count: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = rx.cmd("ss -ltn")
            ports = {IPERF_BASE_PORT + i for i in range(count)}
            if all(f":{p} " in out for p in ports):
                return
            time.sleep(0.05)  # poll interval of the readiness condition
        raise SwitchError(f"iperf3 servers on {self.receiver} did not listen on ports "
                          f"{IPERF_BASE_PORT}..{IPERF_BASE_PORT + count - 1} within "
                          f"{timeout_s:g} s; is another iperf3 using them?")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=3)
        self.procs.clear()


class HostccIncast(Incast):
    """p4cc's own senders (``p4cc host send --cc dcqcn|rlcc``) -> ``p4cc host recv``:
    long flows that react to the switch's marks through CNPs (p4cc.hostcc)."""

    def __init__(self, fabric: Fabric, receiver: str, senders: list[str], cc: str,
                 duration_s: float, out_dir: Path) -> None:
        self.fabric, self.receiver, self.senders = fabric, receiver, senders
        self.cc, self.duration_s, self.out_dir = cc, duration_s, out_dir
        self.procs = []

    def start(self) -> None:
        import sys

        topo = self.fabric.topo
        py = [sys.executable, "-m", "p4cc", "host"]
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._spawn(self.receiver, [*py, "recv", "--scale", topo.scale.name,
                                    "--out", str(self.out_dir / "recv")])
        # long enough to last the phase at the full line rate
        size = int(topo.scale.link_rate_bps * self.duration_s / 8) * 2
        dst = topo.host(self.receiver).ip
        for name in self.senders:
            self._spawn(name, [*py, "send", "--dst", dst, "--size", str(size), "--cc", self.cc,
                               "--scale", topo.scale.name, "--deadline",
                               f"{self.duration_s + 5:g}", "--out", str(self.out_dir / name)])

    def _spawn(self, host: str, cmd: list[str]) -> None:
        """Run ``cmd`` in ``host``'s namespace; its output goes to <out_dir>/<host>.log."""
        with open(self.out_dir / f"{host}.log", "w") as log_file:
            self.procs.append(self.fabric.host(host).popen(cmd, stdout=log_file,
                                                           stderr=subprocess.STDOUT))


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


# -- the experiment --------------------------------------------------------------------
def _versions() -> dict[str, str]:
    from p4cc.experiment.doctor import run_checks
    from p4cc.experiment.store import software_versions

    # git commit/dirty and library versions as every `p4cc run` directory has them
    v = {k: str(x) for k, x in software_versions().items() if x is not None}
    v.update({"python": platform.python_version(), "kernel": platform.release()})
    for c in run_checks():
        if c.name in ("simple_switch_grpc", "p4c", "iperf3") and c.ok:
            v[c.name] = c.detail
    return v


def iperf3_app_rate(wire_bps: float, payload_bytes: int) -> float:
    """iperf3's ``-b`` for ``wire_bps`` of frames: iperf3 paces UDP payload bits, so the
    Ethernet + IPv4 + UDP headers (HEADERS_BYTES) of every datagram come on top."""
    return wire_bps * payload_bytes / (payload_bytes + HEADERS_BYTES)


def incast_plan(topo: TopoSpec, scale: Scale, load: float) -> tuple[str, list[str], float, int]:
    """(receiver, senders, per-sender rate b/s, UDP payload bytes) for ``load``."""
    receiver = topo.hosts[-1].name
    senders = [h.name for h in topo.hosts[:-1]]
    link = topo.link_at(receiver, 0)
    payload = max(16, scale.pkt_bytes - HEADERS_BYTES)
    return receiver, senders, load * link.rate_bps / len(senders), payload


def run_testbed(cfg: TestbedConfig) -> list[PortSummary]:
    cfg.validate()
    scale = get_scale(cfg.scale)
    topo = parse_topo(cfg.topo, scale)
    settings = {name.upper(): static_setting(name, scale) for name in cfg.settings}
    backend = resolve_backend(cfg.backend)
    out = cfg.out_dir or Path("runs") / time.strftime("testbed-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    receiver, senders, rate, payload = incast_plan(topo, scale, cfg.load)
    (out / "config.json").write_text(json.dumps({
        "config": {**asdict(cfg), "out_dir": str(out)}, "backend": backend,
        "scale": scale.to_dict(),
        "topology": topo.describe(), "settings": {k: asdict(v) for k, v in settings.items()},
        "incast": {"receiver": receiver, "senders": senders, "rate_bps_each": rate,
                   "udp_payload_bytes": payload}, "versions": _versions(),
    }, indent=2, default=str))
    if backend == "sim":
        rows = _run_sim(topo, cfg, settings, senders, receiver, out)
    else:
        rows = _run_bmv2(topo, cfg, settings, senders, receiver, rate, payload, out)
    text = format_summary(rows, settings)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    print(f"results in {out}")
    return rows


def _run_bmv2(topo: TopoSpec, cfg: TestbedConfig, settings: dict[str, EcnConfig],
              senders: list[str], receiver: str, rate: float, payload: int,
              out: Path) -> list[PortSummary]:
    rows: list[PortSummary] = []
    opts = FabricOptions(out_dir=out / "switches", bmv2_log=cfg.bmv2_log, pcap=cfg.pcap)
    with Fabric(topo, opts) as fabric, FabricControl(fabric, cfg.interval_s) as ctl:
        with open(out / "telemetry.jsonl", "w") as tel:
            for name, ecn in settings.items():
                how = (f"iperf3 UDP ECT(0) at {rate / 1e6:.2f} Mb/s each" if cfg.traffic == "iperf3"
                       else f"p4cc host senders, {cfg.traffic}")
                print(f"== {name}: {ecn.describe()}; incast {', '.join(senders)} -> {receiver}"
                      f", {how}, {cfg.duration_s:g} s", flush=True)
                ctl.set_ecn_all(ecn)
                records = _run_phase(fabric, ctl, cfg, receiver, senders, rate, payload,
                                     out / "hosts" / name)
                for r in records:
                    tel.write(json.dumps({"setting": name, **r.to_row()}) + "\n")
                rows += summarize(name, records)
    return rows


def _run_sim(topo: TopoSpec, cfg: TestbedConfig, settings: dict[str, EcnConfig],
             senders: list[str], receiver: str, out: Path) -> list[PortSummary]:
    """The same incast on the simulator, one fresh run per setting.  Its senders are
    the simulator's DCQCN hosts (long-lived flows starting at line rate), not fixed-rate
    UDP, so ``load`` is not used and marks slow the senders down."""
    import pandas as pd

    from p4cc.sim import Engine, SimConfig

    schedule = pd.DataFrame({"start_s": 0.0, "src": senders, "dst": receiver,
                             "size_bytes": 0, "stop_s": cfg.duration_s})
    rows: list[PortSummary] = []
    with open(out / "telemetry.jsonl", "w") as tel:
        for name, ecn in settings.items():
            print(f"== {name}: {ecn.describe()}; simulated incast {', '.join(senders)} -> "
                  f"{receiver}, DCQCN senders, {cfg.duration_s:g} s", flush=True)
            sim_cfg = SimConfig(telemetry_interval_s=cfg.interval_s, cc="dcqcn",
                                host_traces=False)
            # the simulator's seed and settings, saved with the run (reproducibility)
            (out / f"sim_config_{name}.json").write_text(
                json.dumps(asdict(sim_cfg), indent=2, default=str))
            eng = Engine(topo, schedule, sim_cfg, ecn=ecn)
            eng.run(cfg.duration_s)
            records = [r for r in eng.telemetry if r.t_s > cfg.interval_s + 1e-9]
            for r in records:
                tel.write(json.dumps({"setting": name, **r.to_row()}) + "\n")
            rows += summarize(name, records)
    return rows


def _run_phase(fabric: Fabric, ctl: FabricControl, cfg: TestbedConfig, receiver: str,
               senders: list[str], rate: float, payload: int,
               host_out: Path) -> list[PortTelemetry]:
    """Traffic for ``duration_s``; the records of the intervals after the first."""
    incast: Incast
    if cfg.traffic == "iperf3":
        incast = Incast(fabric, receiver, senders, rate, payload, cfg.duration_s)
    else:
        incast = HostccIncast(fabric, receiver, senders, cfg.traffic, cfg.duration_s, host_out)
    try:
        incast.start()
        t0 = ctl.now()
        end = time.monotonic() + cfg.duration_s
        while time.monotonic() < end:  # the experiment's duration, checking health
            fabric.check()
            ctl.check()
            time.sleep(min(cfg.interval_s, max(0.0, end - time.monotonic())))
        t1 = ctl.now()
    finally:
        incast.stop()
    return [r for r in ctl.records_between(t0 + cfg.interval_s, t1)]


def run_cli(topo_text: str, scale: str = "testbed", interval_s: float = 0.5) -> None:
    """Mininet's CLI on a fabric with the control plane running."""
    from p4cc.experiment.mncli import make_cli

    resolve_backend("bmv2")
    topo = parse_topo(topo_text, get_scale(scale))
    with Fabric(topo) as fabric, FabricControl(fabric, interval_s) as ctl:
        make_cli(fabric, ctl)
