"""``p4cc cli``: Mininet's CLI on a fabric whose FabricSession runs (p4cc.experiment.session)
with an agent per switch and a host CC for the workloads, plus p4cc's commands
(p4cc.experiment.clicmds): telemetry, top, thresholds, ecn, agents, agent, int, workload,
incast, jobs, stop, shell, iperf.

The CLI publishes its state for ``p4cc top`` and ``p4cc shell`` (p4cc.experiment.clistate:
``runs/cli/<time>/`` with session.json, telemetry.csv, int.csv, jobs/).  Leaving it stops
the workloads by PID and then every process still inside a host, found by the host's
network namespace (p4cc.experiment.hostns), before the fabric goes down.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from p4cc.errors import ConfigError, P4ccError
from p4cc.experiment.cliparse import (  # noqa: F401  (re-exported)
    format_telemetry,
    parse_ecn_args,
    parse_telemetry_args,
)

if TYPE_CHECKING:
    from p4cc.experiment.clicmds import TestbedCommands
    from p4cc.topo.build import Fabric

log = logging.getLogger(__name__)

#: accepted ``--interval`` range (s): below 10 ms a poll of every port does not fit in an
#: interval on BMv2 (docs/emulation.md, controlloop bench); above a minute nothing is seen
CLI_INTERVAL_S = (0.01, 60.0)
#: host CC of the CLI's workloads unless ``--cc`` says otherwise
DEFAULT_CC = "dcqcn"


def check_cli_args(agent: str | None, cc: str, interval_s: float) -> None:
    """ConfigError for a bad agent, host CC or interval (before root or a fabric)."""
    from p4cc.controlplane.agents.static import agent_names
    from p4cc.hostcc.cc import host_cc_kind

    lo, hi = CLI_INTERVAL_S
    if not lo <= interval_s <= hi:
        raise ConfigError(f"poll interval {interval_s} s must be in [{lo:g}, {hi:g}]")
    if agent is not None and agent.partition(":")[0].lower() not in agent_names():
        raise ConfigError(f"unknown agent {agent!r}; choose one of {agent_names()}")
    host_cc_kind(cc)


def host_shells(fabric: Fabric) -> dict[str, int]:
    """host name -> PID of its Mininet shell (the process holding its namespace)."""
    return {h.name: int(fabric.host(h.name).pid) for h in fabric.topo.hosts}


def run_cli(topo_text: str, scale: str = "testbed", interval_s: float = 0.5,
            agent: str | None = None, cc: str = DEFAULT_CC, out: Path | None = None) -> None:
    """Mininet's CLI on a fabric with its session running and ``agent`` (None: the loops
    only poll) on every switch."""
    from p4cc.experiment.clicmds import CliContext, TestbedCommands
    from p4cc.experiment.clistate import CLI_RUNS, TelemetryCsv, write_session
    from p4cc.experiment.doctor import resolve_backend
    from p4cc.experiment.session import FabricSession, SessionConfig
    from p4cc.scale import get_scale
    from p4cc.topo.build import Fabric
    from p4cc.topo.spec import parse_topo

    check_cli_args(agent, cc, interval_s)
    resolve_backend("bmv2", "the CLI")
    sc = get_scale(scale)
    topo = parse_topo(topo_text, sc)
    state_dir = out or CLI_RUNS / time.strftime("%Y%m%d-%H%M%S")
    state_dir.mkdir(parents=True, exist_ok=True)
    sink = TelemetryCsv(state_dir / "telemetry.csv")
    try:
        with Fabric(topo) as fabric:
            try:
                with FabricSession.for_fabric(
                        fabric, SessionConfig(interval_s=interval_s, agent=agent,
                                              history=False),
                        on_telemetry=sink) as session:
                    write_session(state_dir, topo=topo_text, scale=scale,
                                  agent=agent or "hold", cc=cc, interval_s=interval_s,
                                  pkt_bytes=sc.pkt_bytes, endpoints=fabric.endpoints())
                    cmds = TestbedCommands(session, topo, CliContext(topo_text, scale, cc,
                                                                     state_dir),
                                           fabric=fabric, log=log.info)
                    try:
                        make_cli(fabric, cmds)
                    finally:
                        cmds.close()
                # `agent s1 acc:online`: the fine-tuned weights go beside the telemetry
                session.agents.finish(state_dir, log.info)
            finally:
                stop_host_processes(fabric)
    finally:
        sink.close()


def stop_host_processes(fabric: Fabric) -> None:
    """End whatever still runs inside the fabric's hosts (by namespace, by PID)."""
    from p4cc.experiment.hostns import sweep

    if fabric.net is None:
        return
    try:
        result = sweep(host_shells(fabric))
    except Exception as exc:  # never stop the fabric's teardown
        log.warning("stopping processes in the hosts: %s", exc)
        return
    print(f"p4cc: {result.describe()}", flush=True)


#: p4cc's commands: CLI name -> (TestbedCommands method, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "telemetry": ("telemetry", "telemetry <switch> <port>: the port's latest record"),
    "top": ("top", "top: every port's latest record (live view: `p4cc top` elsewhere)"),
    "thresholds": ("thresholds", "thresholds [switch ...]: the ECN setting per port"),
    "ecn": ("ecn", "ecn <switch> <port> <kmin_bytes> <kmax_bytes> <pmax>: set thresholds"),
    "agents": ("agents", "agents: the agent in charge of each switch"),
    "agent": ("agent", "agent [switch] <name>: swap the agent (of one switch or all)"),
    "int": ("int_", "int <src> <dst>: INT on that flow; its latest hop records"),
    "workload": ("workload", "workload <websearch|datamining|...> <load> [seconds]"),
    "incast": ("incast", "incast <src1,src2,...> <dst> [flow size]: one flow per sender"),
    "jobs": ("list_jobs", "jobs: the workloads started here"),
    "stop": ("stop", "stop <job id>|all: stop workloads (by PID)"),
    "shell": ("shell", "shell <switch>: how to attach p4runtime-shell to a switch"),
    "iperf": ("iperf_hint", "iperf: an iperf3 command line with the scale's packet size"),
}


def _command(name: str, method: str, text: str) -> Any:
    def do(self: Any, line: str) -> None:
        try:
            fn = getattr(self.p4cc, method)
            out = fn(line) if method != "iperf_hint" else fn()
            if out:
                print(out)
            self.p4cc.session.check()  # a control loop that died is said at once
        except P4ccError as exc:
            print(f"error: {exc}")

    do.__doc__ = text
    do.__name__ = f"do_{name}"
    return do


def banner(fabric: Fabric, cmds: TestbedCommands) -> str:
    ports = ", ".join(f"{s.name}:{list(s.ports)}" for s in fabric.topo.switches)
    return ("p4cc: fabric up, control plane running (agents: "
            + "; ".join(cmds.agents().splitlines()) + f"; host CC {cmds.ctx.cc})\n"
            "p4cc commands (help <command>): " + ", ".join(COMMANDS) + "\n"
            f"switch ports: {ports}\n"
            f"state (for `p4cc top` in another terminal): {cmds.ctx.state_dir}\n"
            "iperf3 by hand:\n" + cmds.iperf_hint())


def make_cli(fabric: Fabric, cmds: TestbedCommands) -> None:
    """Run Mininet's CLI with p4cc's commands (returns when the user exits it)."""
    from mininet.cli import CLI
    from mininet.log import setLogLevel

    setLogLevel("output")  # the CLI prints command output at this level
    logging.getLogger("mininet").propagate = False  # Mininet has its own handler
    attrs: dict[str, Any] = {"prompt": "p4cc> ", "p4cc": cmds}
    for name, (method, text) in COMMANDS.items():
        attrs[f"do_{name}"] = _command(name, method, text)
    cli_cls = type("P4ccCLI", (CLI,), attrs)

    fabric.check()
    print(banner(fabric, cmds), flush=True)
    cli_cls(fabric.net)  # runs the command loop until the user exits
