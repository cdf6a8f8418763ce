"""Bulk TCP rows on the wire (root): ``iperf3 -M tcp_mss(F)`` across a veth pair with the
fabric's offloads off puts data frames of F bytes on the link, the packet size the
links' packet rates assume (p4cc.traffic.iperf.TCP_WIRE_OVERHEAD)."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import time

import pytest

from p4cc.bench.calibrate_hosts import (
    DEV_RECV,
    DEV_SEND,
    IP_RECV,
    IP_SEND,
    NS_RECV,
    NS_SEND,
    netns_pair,
)
from p4cc.topo.hosts import offload_cmd
from p4cc.traffic.iperf import iperf3_client_argv, tcp_mss

pytestmark = [pytest.mark.root]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "iperf3", "tcpdump", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


@pytest.mark.parametrize("frame", [1000, 500])
def test_data_frames_are_the_packet_size(frame: int) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    procs: list[subprocess.Popen[bytes]] = []
    with netns_pair():  # the calibration rig's two namespaces and veth (removed on exit)
        try:
            for ns, dev in ((NS_SEND, DEV_SEND), (NS_RECV, DEV_RECV)):
                subprocess.run(["ip", "netns", "exec", ns, *offload_cmd(dev)], check=True,
                               capture_output=True, timeout=30)
            procs.append(subprocess.Popen(["ip", "netns", "exec", NS_RECV, "iperf3", "-s",
                                           "-1", "-p", "5979"], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            dump = subprocess.Popen(["ip", "netns", "exec", NS_RECV, "tcpdump", "-l", "-i",
                                     DEV_RECV, "-nn", "-e", "-c", "300",
                                     f"tcp and src host {IP_SEND}"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            procs.append(dump)
            assert dump.stderr is not None
            deadline = time.monotonic() + 10
            while b"listening on" not in dump.stderr.readline():  # tcpdump is capturing
                assert time.monotonic() < deadline and dump.poll() is None
            argv = iperf3_client_argv(IP_RECV, 1.0, 5979, mss=tcp_mss(frame))
            subprocess.run(["ip", "netns", "exec", NS_SEND, *argv, "-b", "5M"], check=True,
                           capture_output=True, timeout=30)
            out, _ = dump.communicate(timeout=15)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=10)
    sizes = collections.Counter(int(m) for m in re.findall(rb"length (\d+):", out))
    data = {size: n for size, n in sizes.items() if size > 100}  # not SYNs and ACKs
    assert max(data) == frame, sizes
    assert data[frame] >= 0.9 * sum(data.values()), sizes
