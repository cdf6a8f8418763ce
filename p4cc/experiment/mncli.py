"""``p4cc cli``: Mininet's CLI on a fabric whose FabricSession runs (p4cc.experiment.session),
with two p4cc commands: ``telemetry <switch> <port>`` (the latest record the switch's
control loop produced) and ``ecn <switch> <port> <kmin_bytes> <kmax_bytes> <pmax>``
(written through that loop)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError, P4ccError

if TYPE_CHECKING:
    from p4cc.experiment.session import FabricSession
    from p4cc.topo.build import Fabric

#: accepted ``--interval`` range (s): below 10 ms a poll of every port does not fit in an
#: interval on BMv2 (docs/emulation.md, controlloop bench); above a minute nothing is seen
CLI_INTERVAL_S = (0.01, 60.0)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ConfigError(f"port {text!r} is not an integer") from None
    return port


def parse_telemetry_args(line: str) -> tuple[str, int]:
    words = line.split()
    if len(words) != 2:
        raise ConfigError("usage: telemetry <switch> <port>")
    return words[0], _port(words[1])


def parse_ecn_args(line: str) -> tuple[str, int, EcnConfig]:
    """``s1 5 5000 20000 0.1`` -> ("s1", 5, EcnConfig(5000, 20000, 0.1)) (not yet validated
    against the buffer: the switch control does that before writing)."""
    words = line.split()
    if len(words) != 5:
        raise ConfigError("usage: ecn <switch> <port> <kmin_bytes> <kmax_bytes> <pmax>")
    switch, port = words[0], _port(words[1])
    try:
        kmin, kmax = int(words[2]), int(words[3])
    except ValueError:
        raise ConfigError(f"kmin/kmax {words[2]!r} {words[3]!r} must be integer bytes") from None
    try:
        pmax = float(words[4])
    except ValueError:
        raise ConfigError(f"pmax {words[4]!r} must be a number in (0, 1]") from None
    return switch, port, EcnConfig(kmin, kmax, pmax)


def format_telemetry(rec: PortTelemetry | None, switch: str, port: int) -> str:
    if rec is None:
        return f"{switch}:{port}: no telemetry yet (wait one poll interval)"
    ecn = rec.ecn.describe() if rec.ecn else "marking off"
    return (f"{switch}:{port} t={rec.t_s:.2f}s over {rec.interval_s:.2f}s  {ecn}\n"
            f"  queue avg {rec.qlen_avg_bytes:.0f} B  max {rec.qlen_max_bytes:.0f} B  "
            f"sojourn {rec.sojourn_avg_s * 1e3:.2f} ms\n"
            f"  tx {rec.tx_bps / 1e6:.3f} Mb/s ({rec.tx_pkts} pkts, util "
            f"{100 * rec.utilization:.1f} %)  marked {rec.tx_marked_bps / 1e6:.3f} Mb/s "
            f"({rec.tx_marked_pkts} pkts)  drops {rec.drops_pkts}\n"
            f"  senders {rec.incast_degree}  flows {rec.active_flows}  "
            f"elephants {rec.elephant_flows}")


def run_cli(topo_text: str, scale: str = "testbed", interval_s: float = 0.5) -> None:
    """Mininet's CLI on a fabric with its session running (no agent: the loops poll)."""
    from p4cc.experiment.doctor import resolve_backend
    from p4cc.experiment.session import FabricSession, SessionConfig
    from p4cc.scale import get_scale
    from p4cc.topo.build import Fabric
    from p4cc.topo.spec import parse_topo

    lo, hi = CLI_INTERVAL_S
    if not lo <= interval_s <= hi:
        raise ConfigError(f"poll interval {interval_s} s must be in [{lo:g}, {hi:g}]")
    resolve_backend("bmv2", "the CLI")
    topo = parse_topo(topo_text, get_scale(scale))
    with Fabric(topo) as fabric, FabricSession.for_fabric(
            fabric, SessionConfig(interval_s=interval_s)) as session:
        make_cli(fabric, session)


def make_cli(fabric: Fabric, ctl: FabricSession) -> None:
    """Run Mininet's CLI (returns when the user exits it)."""
    from mininet.cli import CLI
    from mininet.log import setLogLevel

    setLogLevel("output")  # the CLI prints command output at this level
    logging.getLogger("mininet").propagate = False  # Mininet has its own handler

    class P4ccCLI(CLI):
        prompt = "p4cc> "

        def do_telemetry(self, line: str) -> None:
            """telemetry <switch> <port>: the port's latest PortTelemetry record."""
            try:
                switch, port = parse_telemetry_args(line)
                print(format_telemetry(ctl.latest(switch, port), switch, port))
            except P4ccError as exc:
                print(f"error: {exc}")

        def do_ecn(self, line: str) -> None:
            """ecn <switch> <port> <kmin_bytes> <kmax_bytes> <pmax>: set marking thresholds."""
            try:
                switch, port, cfg = parse_ecn_args(line)
                ctl.set_ecn(switch, port, cfg)
                print(f"{switch}:{port}: {cfg.describe()}")
            except P4ccError as exc:
                print(f"error: {exc}")

    fabric.check()
    print("p4cc: fabric up with the control plane running; extra commands:\n"
          "  telemetry <switch> <port>\n"
          "  ecn <switch> <port> <kmin_bytes> <kmax_bytes> <pmax>\n"
          f"switch ports: {', '.join(f'{s.name}:{list(s.ports)}' for s in fabric.topo.switches)}",
          flush=True)
    P4ccCLI(fabric.net)
