"""Argument parsing and formatting of the ``p4cc cli`` commands ``telemetry`` and ``ecn``
(shared by p4cc.experiment.mncli and p4cc.experiment.clicmds)."""

from __future__ import annotations

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError


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
