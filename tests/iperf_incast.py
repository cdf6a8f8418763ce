"""Test helper: a fixed-rate iperf3 UDP incast in a running Fabric (tests/test_topo_fabric.py).

``p4cc incast`` itself is a spec run with fixed-rate p4cc senders
(p4cc.experiment.incast); this launcher drives a live fabric with iperf3 (UDP, ECT(0))
so a test can change settings while traffic flows.  Started and stopped by PID.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from p4cc.constants import ECN_ECT0
from p4cc.errors import ToolMissingError
from p4cc.experiment.bmv2.hosts import wait_listening
from p4cc.experiment.incast import iperf3_app_rate
from p4cc.topo.build import Fabric

IPERF_BASE_PORT = 5201
SERVER_TIMEOUT_S = 10.0


class Incast:
    """iperf3 UDP flows h1..h(N-1) -> hN with ECT(0)."""

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
        ports = [IPERF_BASE_PORT + i for i in range(len(self.senders))]
        for port in ports:
            self.procs.append(rx.popen(["iperf3", "-s", "-1", "-p", str(port)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_listening(rx, self.receiver, ports, SERVER_TIMEOUT_S)
        for port, name in zip(ports, self.senders, strict=True):
            cmd = ["iperf3", "-c", dst_ip, "-p", str(port), "-u",
                   "-b", str(int(iperf3_app_rate(self.rate_bps, self.payload))),
                   "-l", str(self.payload), "--tos", str(ECN_ECT0), "-t", f"{self.duration_s:g}"]
            self.procs.append(self.fabric.host(name).popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

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
