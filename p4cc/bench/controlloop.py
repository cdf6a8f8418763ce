"""Benchmark: control-loop cost for one 8-port switch (goal: <= 5 ms per interval).

Starts one ``simple_switch_grpc`` without interfaces (no root needed: counters, registers,
tables and queue settings exist without attached ports), pushes p4cc's pipeline and
settings for the 8-host star, then runs control-loop steps in which an agent alternates
two settings on all 8 ports, so every step polls all telemetry (3 counter reads over
P4Runtime, 7 register reads + resets over Thrift) and writes 8 thresholds (one Write).
Without BMv2 or the compiled program it yields one record saying why it was skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.loop import ControlLoop, LoopConfig
from p4cc.controlplane.records import PortTelemetry
from p4cc.controlplane.switch import SwitchControl
from p4cc.controlplane.telemetry import TelemetryPoller
from p4cc.paths import p4_artifacts
from p4cc.topo.bmv2 import Bmv2Process
from p4cc.topo.spec import SwitchSpec, TopoSpec, parse_topo

P4INFO, BMV2_JSON = p4_artifacts("p4cc")
CASE = "control_loop_8port"


class AlternatingAgent:
    """Writes one of two settings on every port each interval (worst case for writes)."""

    name = "alternating"

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = list(ports)
        self.settings = (EcnConfig(5_000, 20_000, 0.1), EcnConfig(6_000, 30_000, 0.2))
        self.k = 0

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self.k = 0

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        self.k += 1
        return dict.fromkeys(self.ports, self.settings[self.k % 2])


def skip_reason() -> str | None:
    if shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc (BMv2) not installed"
    if not (P4INFO.is_file() and BMV2_JSON.is_file()):
        return f"compiled program missing ({P4INFO.name}, {BMV2_JSON.name}); run `make p4`"
    return None


@contextlib.contextmanager
def connected_switch(spec: SwitchSpec, topo: TopoSpec) -> Iterator[SwitchControl]:
    """A ``simple_switch_grpc`` without interfaces (p4cc.topo.bmv2.Bmv2Process: ports
    picked free, ready when gRPC and Thrift answer, stopped by its PID) and a connected
    SwitchControl for ``spec``; closed and stopped on exit."""
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.controlplane.thrift import ThriftClient

    with Bmv2Process(spec.name, spec.device_id, {}) as sw:
        ctl = SwitchControl(
            spec, topo, P4INFO, BMV2_JSON,
            p4rt=P4RuntimeClient(sw.grpc_addr, spec.device_id, timeout_s=10.0),
            thrift=ThriftClient(f"127.0.0.1:{sw.thrift_port}", BMV2_JSON))
        try:
            ctl.connect()
            yield ctl
        finally:
            ctl.close()


def measure(steps: int = 200) -> dict[str, Any]:
    topo = parse_topo("star,hosts=8")
    spec = topo.switches[0]
    with connected_switch(spec, topo) as ctl:
        ctl.setup()
        poller = TelemetryPoller(spec.name, spec.ports, ctl.p4rt, ctl.thrift, topo.scale,
                                 {p: ctl.port_rate_bps(p) for p in spec.ports},
                                 lambda: ctl.ecn)
        loop = ControlLoop(ctl, poller, AlternatingAgent(spec.ports), LoopConfig(0.01))
        loop.start()
        poll, write, total = [], [], []
        for _ in range(steps):
            t = time.perf_counter()
            loop.step()
            total.append((time.perf_counter() - t) * 1e3)
            poll.append(loop.stats.poll_ms)
            write.append(loop.stats.write_ms)
        errors = loop.stats.switch_errors + loop.stats.invalid_decisions

    def p(xs: list[float], q: float) -> float:
        return round(statistics.quantiles(xs, n=100)[int(q) - 1], 3)

    return {"case": CASE, "ports": len(spec.ports), "steps": steps, "errors": errors,
            "poll_ms": round(statistics.median(poll), 3),
            "write_ms": round(statistics.median(write), 3),
            "total_ms": round(statistics.median(total), 3), "total_p99_ms": p(total, 99),
            "goal_ms": 5.0}


def cases(steps: int = 200) -> Iterator[dict[str, Any]]:
    reason = skip_reason()
    if reason is not None:
        yield {"case": CASE, "skipped": reason}
        return
    yield measure(steps)


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="p4cc bench controlloop")
    parser.add_argument("--steps", type=int, default=200, help="control-loop steps to time")
    args = parser.parse_args(list(argv))
    return cases(args.steps)
