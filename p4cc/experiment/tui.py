"""A terminal view of every port of a running fabric (``p4cc top``, the CLI's ``top``).

Built on rich (Live + Table): ``port_table(records)`` is the one renderer, usable
without a fabric or root (tests render it from a list of PortTelemetry); ``run_top``
refreshes it from the CLI's telemetry.csv (p4cc.experiment.clistate explains why a
file).
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from p4cc.controlplane.records import PortTelemetry
from p4cc.experiment.clistate import CliSession, TelemetryTail, find_session

#: width of the queue bar, in characters
BAR_CHARS = 12
#: narrowest text rendering (the table's natural width with every column)
MIN_WIDTH = 150
#: records older than this many poll intervals are shown dimmed (the loop lags)
STALE_INTERVALS = 4


def _bar(fraction: float) -> Text:
    fraction = min(1.0, max(0.0, fraction))
    full = round(fraction * BAR_CHARS)
    style = "green" if fraction < 0.5 else "yellow" if fraction < 0.8 else "red"
    return Text("█" * full + "·" * (BAR_CHARS - full), style=style)


def port_table(records: Iterable[PortTelemetry], title: str = "p4cc ports",
               buffer_bytes: float | None = None, pkt_bytes: int | None = None) -> Table:
    """One row per (switch, port): ECN setting, queue (avg/max, a bar against
    ``buffer_bytes``), tx rate and utilisation, marks, drops, flows.  A port whose
    newest record is STALE_INTERVALS intervals behind the newest of all is dimmed."""
    table = Table(title=title, expand=False, header_style="bold")
    for name, justify in (("port", "left"), ("ECN kmin/kmax/pmax", "left"),
                          ("queue avg B", "right"), ("max B", "right"), ("queue", "left"),
                          ("tx Mb/s", "right"), ("util %", "right"), ("marked %", "right"),
                          ("drops", "right"), ("flows", "right"), ("senders", "right"),
                          ("t s", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    latest = {r.key: r for r in records}
    newest = max((r.t_s for r in latest.values()), default=0.0)
    for (_sw, _port), r in sorted(latest.items()):
        ecn = (f"{r.ecn.kmin_bytes}/{r.ecn.kmax_bytes}/{r.ecn.pmax:g}" if r.ecn
               else "off")
        marked = 100.0 * r.tx_marked_pkts / r.tx_pkts if r.tx_pkts else 0.0
        scale = buffer_bytes or max(1.0, max(x.qlen_max_bytes for x in latest.values()))
        qavg = f"{r.qlen_avg_bytes:,.0f}"
        if pkt_bytes:
            qavg += f" ({r.qlen_avg_bytes / pkt_bytes:.1f}p)"
        stale = newest - r.t_s > STALE_INTERVALS * r.interval_s
        table.add_row(
            f"{r.switch}:{r.port}", ecn, qavg, f"{r.qlen_max_bytes:,.0f}",
            _bar(r.qlen_avg_bytes / scale), f"{r.tx_bps / 1e6:.2f}",
            f"{100 * r.utilization:.0f}", f"{marked:.1f}",
            Text(str(r.drops_pkts), style="bold red" if r.drops_pkts else ""),
            str(r.active_flows), str(r.incast_degree), f"{r.t_s:.1f}",
            style="dim" if stale else None)
    if not latest:
        table.caption = "no telemetry yet (wait one poll interval)"
    return table


def render_text(records: Iterable[PortTelemetry], width: int | None = None,
                **kw: object) -> str:
    """The table as plain text (the CLI's one-shot ``top``, tests); ``width`` defaults to
    the terminal's, at least MIN_WIDTH."""
    import shutil

    width = width or max(MIN_WIDTH, shutil.get_terminal_size((MIN_WIDTH, 24)).columns)
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    console.print(port_table(records, **kw))  # type: ignore[arg-type]
    return buf.getvalue()


def _view(session: CliSession, tail: TelemetryTail, buffer_bytes: float | None) -> Group:
    state = "running" if session.running() else "[red]CLI exited[/red]"
    head = Text.from_markup(
        f"[bold]{session.topo}[/bold]  agent {session.agent}  CC {session.cc}  "
        f"poll {session.interval_s:g} s  ({state}; {session.directory})")
    return Group(head, port_table(tail.latest.values(), buffer_bytes=buffer_bytes,
                                  pkt_bytes=session.pkt_bytes))


def run_top(directory: Path | None = None, refresh_s: float = 0.5,
            once: bool = False) -> int:
    """Refresh the view of the running CLI's ports until Ctrl-C or the CLI exits."""
    from p4cc.scale import get_scale

    session = find_session(directory)
    buffer_bytes = float(get_scale(session.scale).buffer_bytes)
    tail = TelemetryTail(session.telemetry_csv)
    tail.poll()
    console = Console()
    if once:
        console.print(_view(session, tail, buffer_bytes))
        return 0
    try:
        with Live(_view(session, tail, buffer_bytes), console=console,
                  refresh_per_second=max(1.0, 1 / refresh_s), screen=False) as live:
            while session.running():
                time.sleep(refresh_s)  # the view's refresh period
                tail.poll()
                live.update(_view(session, tail, buffer_bytes))
            live.update(_view(session, tail, buffer_bytes))
    except KeyboardInterrupt:
        pass
    return 0
