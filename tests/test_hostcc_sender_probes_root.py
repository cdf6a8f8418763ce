"""With HTB pacing, ACK RTT samples need the kernel's TX timestamps; a flow that gets
them sends (almost) no RTT probes (root, veth between two namespaces)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

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
NS_A, NS_B, DEV_A, DEV_B = f"p4ccp-{TAG}a", f"p4ccp-{TAG}b", f"p4ccp{TAG}a", f"p4ccp{TAG}b"


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
        for ns, dev, addr in ((NS_A, DEV_A, "10.79.0.1"), (NS_B, DEV_B, "10.79.0.2")):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        yield
    finally:
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.parametrize("quiet", [None, 0.0])
def test_htb_flow_with_ack_samples_is_not_probed(veth: None, quiet: float | None) -> None:
    """400 kB at 4 Mb/s (0.8 s) with an ACK asked every 2 ms: no probes needed (quiet
    None); with the skip off (0) a probe every 8 ms."""
    rx = Receiver(ReceiverConfig(), netns=NS_B).start()
    try:
        tx = Sender([FlowSpec("10.79.0.2", 400_000)], lambda _s: FixedController(4e6),
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
