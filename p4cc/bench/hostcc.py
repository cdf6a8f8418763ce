"""``p4cc bench hostcc``: pacing accuracy, rate-change delay, CPU cost, CC decisions.

The pacing cases need root: they build two network namespaces (``p4cch-bench-a/b``)
joined by a veth pair, pace a flow with HTB in one and time the arrivals in the other
(no BMv2).  Without root they yield one skip record naming why.  The CC decision cases
come from ``p4cc.bench.hostcc_cc.cases()`` when that module is installed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from p4cc.hostcc import wire
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.pacing_config import enter_netns
from p4cc.hostcc.sender import Sender, SenderConfig

NS_A, NS_B = "p4cch-bench-a", "p4cch-bench-b"
DEV_A, DEV_B = "p4cchbencha", "p4cchbenchb"
IP_A, IP_B = "10.78.0.1", "10.78.0.2"


class StepRate:
    """Bench harness controller: ``r1`` before ``t_step`` (sender time), ``r2`` after."""

    name = "bench-step"

    def __init__(self, r1: float, r2: float | None = None, t_step: float = float("inf")):
        self.r1, self.r2, self.t_step = r1, r2 if r2 is not None else r1, t_step

    def on_cnp(self, t: float) -> None: ...
    def on_rtt_sample(self, t: float, rtt_s: float,
                      max_qdepth_pkts: int | None = None) -> None: ...
    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...
    def on_nack(self, t: float) -> None: ...

    def rate_bps(self, t: float) -> float:
        return self.r1 if t < self.t_step else self.r2

    def trace(self, t: float) -> dict[str, float]:
        return {}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _net_up() -> None:
    _net_down()
    _ip("netns", "add", NS_A)
    _ip("netns", "add", NS_B)
    _ip("-n", NS_A, "link", "add", DEV_A, "type", "veth", "peer", "name", DEV_B, "netns", NS_B)
    for ns, dev, addr in ((NS_A, DEV_A, IP_A), (NS_B, DEV_B, IP_B)):
        _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
        _ip("-n", ns, "link", "set", dev, "up")


def _net_down() -> None:
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class _Sink:
    """A UDP socket in NS_B recording arrival times (monotonic) and datagram sizes."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, int]] = []
        self._stop = threading.Event()
        ready = threading.Event()

        def run() -> None:
            enter_netns(NS_B)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((IP_B, wire.ROCE_PORT))
            s.settimeout(0.05)
            ready.set()
            while not self._stop.is_set():
                try:
                    buf = s.recv(4096)
                except TimeoutError:
                    continue
                if buf and buf[0] == wire.OP_DATA:
                    self.arrivals.append((time.monotonic(), len(buf)))
            s.close()

        self._th = threading.Thread(target=run, daemon=True)
        self._th.start()
        ready.wait(5.0)

    def stop(self) -> None:
        self._stop.set()
        self._th.join(2.0)


def _frame_bits(n: int) -> float:
    return (n + wire.IP_UDP_LEN + wire.ETH_LEN) * 8.0


def _run(ctl: StepRate, seconds: float) -> tuple[Sender, _Sink, float]:
    sink = _Sink()
    tx = Sender([FlowSpec(IP_B, 10**9, cc="bench")], lambda _s: ctl,
                SenderConfig(dev=DEV_A, netns=NS_A, probe_interval_s=1.0)).start()
    try:
        tx.wait(seconds)
    finally:
        tx.stop()
        sink.stop()
    return tx, sink, tx.t0


def pacing_case(rate: float, seconds: float) -> dict[str, Any]:
    tx, sink, _t0 = _run(StepRate(rate), seconds)
    arr = [a for a in sink.arrivals if a[0] - sink.arrivals[0][0] > 0.5]
    span = arr[-1][0] - arr[0][0]
    bits = sum(_frame_bits(n) for _t, n in arr[1:])
    measured = bits / span
    mbps = rate / 1e6
    return {"case": "pacing_error", "rate_mbps": mbps, "measured_mbps": measured / 1e6,
            "error_pct": 100 * (measured - rate) / rate, "window_s": round(span, 3),
            "sender_cpu_s": tx.cpu_s,
            "cpu_s_per_mbit": tx.cpu_s / (seconds * mbps)}


def step_case(r1: float, r2: float, t_step: float = 1.0) -> dict[str, Any]:
    tx, sink, t0 = _run(StepRate(r1, r2, t_step), t_step + 1.5)
    when = t0 + t_step
    gap = _frame_bits(sink.arrivals[-1][1]) / r2 if sink.arrivals else 0.0
    after = [t for t, _n in sink.arrivals if t >= when]
    delay = None
    k = 8
    for i in range(len(after) - k):
        mean_gap = (after[i + k] - after[i]) / k
        if abs(mean_gap - gap) / gap < 0.1:
            delay = after[i] - when
            break
    return {"case": "rate_change_delay", "from_mbps": r1 / 1e6, "to_mbps": r2 / 1e6,
            "delay_ms": None if delay is None else 1e3 * delay,
            "netlink_apply_ms": 1e3 * tx.pacer_stats.get("max_apply_s", 0.0)}


def rate_change_case(batch_tc: bool, flows: int = 20, rounds: int = 20) -> dict[str, Any]:
    """CPU of one HTB rate change through pyroute2 or through the pacer's ``tc -batch``
    child (its CPU included), in the calibration's namespace pair."""
    from p4cc.bench.calibrate_hosts import netns_pair, rate_change_us

    with netns_pair():
        us = rate_change_us(flows, rounds, batch_tc=batch_tc)
    return {"case": "rate_change_cpu", "path": "tc-batch" if batch_tc else "pyroute2",
            "cpu_us_per_change": round(us, 1), "classes": flows, "rounds": rounds}


def run(argv: Sequence[str]) -> Iterator[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="p4cc bench hostcc")
    ap.add_argument("--seconds", type=float, default=3.0, help="per pacing case")
    ap.add_argument("--rates-mbps", default="1,5,20", help="pacing cases")
    ap.add_argument("--skip-pacing", action="store_true")
    args = ap.parse_args(list(argv))
    if args.skip_pacing:
        pass
    elif os.geteuid() != 0 or shutil.which("ip") is None:
        why = "not root" if os.geteuid() != 0 else "iproute2 `ip` missing"
        yield {"case": "pacing", "skipped": f"needs root, network namespaces and veth ({why})"}
    else:
        try:
            _net_up()
            for r in args.rates_mbps.split(","):
                yield pacing_case(float(r) * 1e6, args.seconds)
            yield step_case(2e6, 10e6)
            yield step_case(10e6, 2e6)
        finally:
            _net_down()
        for batch in (False, True):
            yield rate_change_case(batch)
    try:
        bench_cc = importlib.import_module("p4cc.bench.hostcc_cc")
    except ModuleNotFoundError:
        yield {"case": "cc_decisions", "skipped": "p4cc.bench.hostcc_cc not installed"}
        return
    yield from bench_cc.cases()
