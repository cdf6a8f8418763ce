"""RTT samples from ACKs exclude the host's HTB queue (kernel TX timestamps; root, veth),
and a flow that gets them sends (almost) no RTT probes (p4cc.hostcc.rtt_samples).

Namespaces ``p4ccx-<pid>a`` / ``p4ccx-<pid>b`` joined by veth ``p4ccx<pid>a/b``: a flow
paced at 200 kb/s keeps ~3 packets (~120 ms) in its HTB class, so the time from the
socket to the ACK (srtt) is large while the controller's samples (ACK time - the
packet's software TX timestamp) are the veth round trip plus host jitter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from p4cc.hostcc.cc import FixedController
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for netns/veth/tc"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2 `ip`"),
]
TAG = os.getpid() % 100000
NS_A, NS_B, DEV_A, DEV_B = f"p4ccx-{TAG}a", f"p4ccx-{TAG}b", f"p4ccx{TAG}a", f"p4ccx{TAG}b"


class Rec:
    """Test-only fixed-rate controller recording RTT samples."""

    def __init__(self) -> None:
        self.rtts: list[float] = []

    def on_cnp(self, t: float) -> None: ...
    def on_bytes_sent(self, t: float, nbytes: int) -> None: ...
    def on_nack(self, t: float) -> None: ...

    def on_rtt_sample(self, t: float, rtt_s: float, q: int | None) -> None:
        self.rtts.append(rtt_s)

    def rate_bps(self, t: float) -> float:
        return 200e3

    def trace(self, t: float) -> dict[str, Any]:
        return {}


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def veth() -> Iterator[None]:
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    try:
        ip("netns", "add", NS_A)
        ip("netns", "add", NS_B)
        ip("-n", NS_A, "link", "add", DEV_A, "type", "veth", "peer", "name", DEV_B,
           "netns", NS_B)
        for ns, dev, addr in ((NS_A, DEV_A, "10.78.0.1"), (NS_B, DEV_B, "10.78.0.2")):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        yield
    finally:
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_ack_rtt_samples_exclude_the_host_queue(veth: None) -> None:
    ctl = Rec()
    rx = Receiver(ReceiverConfig(), netns=NS_B).start()
    try:
        tx = Sender([FlowSpec("10.78.0.2", 40_000)], lambda _s: ctl,
                    # 200 kb/s is below the HTB ceiling floor: max_token_debt_s=0 lets
                    # HTB pace (and queue) it, which is what this test is about
                    SenderConfig(dev=DEV_A, netns=NS_A, probe_interval_s=10.0,
                                 ack_interval_s=0.001, max_token_debt_s=0.0)).start()
        assert tx.wait(15.0)
        tx.stop()
    finally:
        rx.stop()
    [rec] = tx.records()
    assert rec["completed"] and rec["ack_rtt_samples"] >= 20, rec
    # 40 kB at 200 kb/s: HTB paced it (and queued ~3 packets, ~120 ms)
    assert rec["fct_s"] > 1.5, rec
    rtts = sorted(ctl.rtts)
    median = rtts[len(rtts) // 2]
    # the samples, and srtt (the RTO's), start at the packets' TX timestamps: they leave
    # out the ~120 ms in the host queue
    assert median < 0.01 and rec["srtt_s"] < 0.02, (rec["srtt_s"], rtts)
    assert rec["timeouts"] == 0, rec


def test_throttled_mouse_does_not_time_out_in_the_host_queue(veth: None) -> None:
    """A 4-packet mouse paced at 100 kb/s by HTB: its last packet leaves ~0.3 s after
    it went into the HTB class (HTB lets the first burst through at once), far beyond
    the 20 ms RTO floor.  The RTO counts from
    the TX timestamp, so no timeout fires and nothing is sent twice (counting from the
    hand-off it timed out and resent the mouse)."""
    rx = Receiver(ReceiverConfig(), netns=NS_B).start()
    try:
        tx = Sender([FlowSpec("10.78.0.2", 4_000)], lambda _s: FixedController(100e3),
                    SenderConfig(dev=DEV_A, netns=NS_A, probe_interval_s=10.0,
                                 rto_s=0.02, rto_max_s=1.0, max_token_debt_s=0.0)).start()
        assert tx.wait(15.0)
        tx.stop()
    finally:
        rx.stop()
    [rec] = tx.records()
    assert rec["completed"] and rec["fct_s"] > 0.1, rec  # > 5 RTO floors
    assert rec["timeouts"] == 0 and rec["retx_bytes"] == 0, rec


@pytest.mark.parametrize("quiet", [None, 0.0])
def test_htb_flow_with_ack_samples_is_not_probed(veth: None, quiet: float | None) -> None:
    """400 kB at 4 Mb/s (0.8 s) with an ACK asked every 2 ms: no probes needed (quiet
    None); with the skip off (0) a probe every 8 ms."""
    rx = Receiver(ReceiverConfig(), netns=NS_B).start()
    try:
        tx = Sender([FlowSpec("10.78.0.2", 400_000)], lambda _s: FixedController(4e6),
                    SenderConfig(dev=DEV_A, netns=NS_A, probe_interval_s=8e-3,
                                 probe_quiet_s=quiet, ack_interval_s=2e-3)).start()
        assert tx.wait(15.0)
        tx.stop()
    finally:
        rx.stop()
    [rec] = tx.records()
    assert rec["completed"] and rec["ack_rtt_samples"] >= 100, rec
    if quiet is None:
        assert rec["probes"] <= 2, rec
    else:
        assert rec["probes"] >= 0.5 * rec["fct_s"] / 8e-3, rec
