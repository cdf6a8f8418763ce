"""Draw docs/figures/overview.svg: how a packet, a telemetry record, a threshold and a CNP
travel through p4cc (docs/overview.md).

    .venv/bin/python docs/figures/overview.py [--out docs/figures/overview.svg]

Every module, table, register and counter named in the picture is a real one:
tests/test_docs_commands.py checks the ``p4cc/...py`` and ``p4src/...p4`` paths exist and
that the P4 names are in the compiled program's P4Info, so the picture cannot drift from
the code unnoticed.  Text stays text in the SVG (``svg.fonttype: none``) so it can be
searched and checked.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

OUT = Path(__file__).with_name("overview.svg")

#: path colours (also used by docs/overview.md's legend)
PACKET, TELEMETRY, THRESHOLD, CNP, INT = "#1f5fbf", "#1b8a3a", "#d9730d", "#c62828", "#7b3fa0"


def box(ax: Axes, x: float, y: float, w: float, h: float, title: str, body: str = "",
        face: str = "#ffffff", edge: str = "#444444", size: float = 7.2) -> None:
    """A rounded box with a bold title line and a smaller body."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.25,rounding_size=0.8",
                                fc=face, ec=edge, lw=1.0))
    ax.text(x + 0.6, y + h - 0.6, title, ha="left", va="top", fontsize=size + 0.6,
            fontweight="bold")
    if body:
        ax.text(x + 0.6, y + h - 2.6, body, ha="left", va="top", fontsize=size,
                linespacing=1.25)


def arrow(ax: Axes, a: tuple[float, float], b: tuple[float, float], color: str,
          style: str = "-", rad: float = 0.0, lw: float = 2.0) -> None:
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=14, color=color,
                                 lw=lw, linestyle=style,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=1, shrinkB=1))


def badge(ax: Axes, x: float, y: float, n: str, color: str) -> None:
    ax.text(x, y, n, ha="center", va="center", fontsize=9, fontweight="bold", color="white",
            bbox={"boxstyle": "circle,pad=0.25", "fc": color, "ec": color})


def control_plane(ax: Axes) -> None:
    ax.add_patch(Rectangle((0.5, 34.6), 99, 27, fc="#f4f6fb", ec="#9aa5c0", lw=1))
    ax.text(1.2, 61.2, "Control plane: one ControlLoop per switch in the run's "
            "FabricSession (p4cc/experiment/session.py), every Δt = interval_s",
            fontsize=8.5, va="top", fontweight="bold", color="#33405e")
    box(ax, 1.5, 46, 20.5, 9.5, "p4cc/experiment/store.py",
        "RunWriter -> runs/<name>/<variant>/\n"
        "telemetry.csv, agent.csv, int.csv\n"
        "-> p4cc report (p4cc/analysis)")
    box(ax, 25.5, 46, 24.5, 9.5, "p4cc/controlplane/telemetry.py",
        "TelemetryPoller.poll():\n"
        "counters over P4Runtime (p4runtime.py),\n"
        "registers over Thrift (thrift.py):\n"
        "register_read_all, then register_reset")
    box(ax, 53, 46, 19, 9.5, "p4cc/controlplane/records.py",
        "PortTelemetry per port per Δt:\n"
        "qlen_avg_bytes, qlen_max_bytes,\n"
        "tx_bps, tx_marked_bps, drops_pkts,\n"
        "incast_degree, active_flows, ecn")
    box(ax, 75, 46, 24, 9.5, "p4cc/controlplane/loop.py",
        "ControlLoop.step(): agent.act(obs)\n"
        "-> {port: EcnConfig}, changed ports only\n"
        "agents/static.py: secn0..2, vendor, hold,\n"
        "register_agent() · learned.py: acc, pet")
    box(ax, 1.5, 36, 20.5, 6.5, "p4cc/controlplane/int_collector.py",
        "INT reports: PacketIn from CPU\nport 510, decoded (p4cc/packets)", size=6.9)
    box(ax, 60, 36, 39, 6.5, "p4cc/controlplane/switch.py -> p4runtime.py",
        "SwitchControl.validated(), once: ecn.py EcnConfig.validate (0 < Kmin <= Kmax\n"
        "<= buffer, 0 < Pmax <= 1); bytes -> packets, Pmax -> round(Pmax*65535);\n"
        "write the ecn_config entry: INSERT the first time, MODIFY after", size=6.9)
    # record path inside the control plane: poller -> record -> agent, and to the store
    arrow(ax, (50.3, 51), (52.7, 51), TELEMETRY)
    arrow(ax, (72.3, 51), (74.7, 51), TELEMETRY)
    arrow(ax, (60, 55.8), (12, 55.8), TELEMETRY, rad=0.12, lw=1.5)
    badge(ax, 51.5, 53.3, "2", TELEMETRY)
    # threshold path: decision -> validation and write
    arrow(ax, (90, 45.7), (90, 42.8), THRESHOLD)
    badge(ax, 92, 44.2, "3", THRESHOLD)


def fabric(ax: Axes) -> None:
    ax.add_patch(Rectangle((0.5, 9.6), 99, 24.4, fc="none", ec="#888888", lw=1.2,
                           linestyle=(0, (5, 4))))
    ax.text(1.2, 33.5, "Emulated fabric (--backend bmv2): Mininet hosts, BMv2 "
            "simple_switch_grpc running p4src/p4cc.p4 (p4cc/data/p4/p4cc.json). "
            "The simulator replaces everything in this dashed box.",
            fontsize=8.5, va="top", fontweight="bold", color="#444444")
    box(ax, 1.5, 12, 16, 19, "h1: p4cc host send",
        "hostcc/sender.py, flow.py:\n"
        "UDP 4791, BTH (RoCEv2 style),\n"
        "ECT(0) on every data packet\n\n"
        "CNP -> flow.py: ctl.on_cnp(t)\n"
        "-> cc.py DcqcnController\n"
        "-> dcqcn.py DcqcnFlows:\n"
        "   Rc = Rc(1 - α/2), α update\n"
        "-> pacing.py: the flow's HTB\n"
        "   class rate, over netlink", face="#fdf7f2")
    box(ax, 20.5, 13, 7.5, 7, "leaf1", "BMv2\ndevice 1", face="#eef3fb")
    box(ax, 31, 13, 7.5, 7, "spine1", "BMv2\ndevice 3", face="#eef3fb")
    ax.add_patch(FancyBboxPatch((41.5, 11.6), 40, 19.6, boxstyle="round,pad=0.25",
                                fc="#eef3fb", ec=PACKET, lw=1.3))
    ax.text(81, 12.4, "leaf2 (device 2):\np4cc.p4 on the\npacket's way to h4",
            fontsize=7.6, fontweight="bold", va="bottom", ha="right", color=PACKET)
    box(ax, 42.5, 22.3, 15, 6.9, "telemetry.p4 registers",
        "q_enq_sum, q_enq_cnt, q_enq_max,\nq_sojourn_sum, incast_bits, flow_bits,\n"
        "elephant_bits, flow_bytes_r0/_r1", size=6.4)
    box(ax, 59.5, 22.3, 10.5, 6.9, "counters · int.p4",
        "port_tx, port_marked;\nINT hop push; int_sink:\nclone session 100 ->\n"
        "CPU port 510", size=6.4)
    box(ax, 71.5, 22.3, 9.7, 6.9, "ecn.p4",
        "ecn_config:\nset_ecn(kmin,\nkmax, pmax)\nRED -> CE", size=6.4)
    box(ax, 42.5, 12.6, 13, 6.9, "Ingress",
        "forwarding.p4: ipv4_lpm,\necmp_nhop; int_source.p4:\n"
        "int_watchlist; port_offered", size=6.4)
    box(ax, 58, 12.6, 12, 6.9, "Egress queue",
        "enq_qdepth in packets;\nrate (packets/s) and\ndepth set over Thrift",
        size=6.4)
    box(ax, 84, 12, 15, 19, "h4: p4cc host recv",
        "hostcc/receiver.py:\n"
        "reads the TOS byte\n(IP_RECVTOS)\n\n"
        "CE seen -> at most one\n"
        "CNP per flow per CNP\n"
        "interval: BTH opcode\n"
        "0x81 (hostcc/wire.py);\n"
        "ACK / NAK per flow", face="#fdf7f2")
    # (1) the data packet
    y = 16.2
    arrow(ax, (17.8, y), (20.3, y), PACKET)
    arrow(ax, (28.3, y), (30.8, y), PACKET)
    arrow(ax, (38.8, y), (42.3, y), PACKET)
    arrow(ax, (55.8, y), (57.8, y), PACKET)
    arrow(ax, (70.3, y), (73.5, 22.1), PACKET)
    arrow(ax, (81.5, 25.5), (83.8, 25.5), PACKET)
    badge(ax, 19, 18.4, "1", PACKET)
    # (2) registers (Thrift) and counters (P4Runtime) up to the poller
    arrow(ax, (50, 29.5), (36, 45.7), TELEMETRY)
    arrow(ax, (63, 29.5), (42, 45.7), TELEMETRY)
    # INT report to the collector
    arrow(ax, (61, 29.5), (22.3, 39), INT, style="--", rad=0.1, lw=1.4)
    # (3) the threshold write into ecn_config
    arrow(ax, (76.4, 35.7), (76.4, 29.5), THRESHOLD)
    # (4) CNP back to the sender
    ax.plot([91.5, 91.5, 9.5], [11.7, 10.4, 10.4], color=CNP, lw=2, linestyle="--")
    arrow(ax, (9.5, 10.4), (9.5, 11.8), CNP)
    badge(ax, 19, 11.6, "4", CNP)
    ax.text(21, 11.3, "CNP / ACK back: h4 -> leaf2 -> spine -> leaf1 -> h1", fontsize=7,
            color=CNP, va="center")


def simulator(ax: Axes) -> None:
    box(ax, 1.5, 0.6, 97.5, 6.6, "--backend sim: p4cc/sim replaces the dashed box "
        "(same spec, schedule, agents and PortTelemetry records)",
        "sim/engine.py: every queue, the same RED marking line (as a probability), drops, "
        "CNP delivery; sim/cc.py DcqcnHook steps the same hostcc/dcqcn.py DcqcnFlows; "
        "sim/telemetry.py: the same PortTelemetry.\n"
        "experiment/sim_backend.py: make_agent() per switch, act() every interval_s, "
        "EcnConfig.validate(), Engine.set_ecn(): no ControlLoop, no P4Runtime "
        "or Thrift.", face="#f3f3f3", edge="#777777", size=7.2)


def legend(ax: Axes) -> None:
    items = [("1  data packet", PACKET), ("2  telemetry record", TELEMETRY),
             ("3  threshold", THRESHOLD), ("4  CNP", CNP), ("INT report", INT)]
    x = 1.5
    for label, color in items:
        ax.plot([x, x + 2.5], [8.4, 8.4], color=color, lw=2.5)
        ax.text(x + 3, 8.4, label, fontsize=8, va="center")
        x += 14


def draw(out: Path = OUT) -> Path:
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "p4cc-overview",
                         "font.family": "DejaVu Sans"})
    fig = plt.figure(figsize=(16, 10))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 62)
    ax.axis("off")
    control_plane(ax)
    fabric(ax)
    simulator(ax)
    legend(ax)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="output file (.svg or .png)")
    print(draw(parser.parse_args().out))


if __name__ == "__main__":
    main()
