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

from p4cc.topo.hosts import offload_cmd
from p4cc.traffic.iperf import iperf3_client_argv, tcp_mss

pytestmark = [pytest.mark.root]

NS_A, NS_B = f"p4mssA{os.getpid() % 10**5}", f"p4mssB{os.getpid() % 10**5}"
DEV_A, DEV_B = f"p4mss{os.getpid() % 10**5}a", f"p4mss{os.getpid() % 10**5}b"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "iperf3", "tcpdump", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


@pytest.mark.parametrize("frame", [1000, 500])
def test_data_frames_are_the_packet_size(frame: int) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for ns in (NS_A, NS_B):
            _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", DEV_A, "type", "veth", "peer", "name", DEV_B)
        for ns, dev, ip in ((NS_A, DEV_A, "10.78.0.1"), (NS_B, DEV_B, "10.78.0.2")):
            _run("ip", "link", "set", dev, "netns", ns)
            _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("ip", "netns", "exec", ns, *offload_cmd(dev))
        procs.append(subprocess.Popen(["ip", "netns", "exec", NS_B, "iperf3", "-s", "-1",
                                       "-p", "5979"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        dump = subprocess.Popen(["ip", "netns", "exec", NS_B, "tcpdump", "-l", "-i", DEV_B,
                                 "-nn", "-e", "-c", "300", "tcp and src host 10.78.0.1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(dump)
        assert dump.stderr is not None
        deadline = time.monotonic() + 10
        while b"listening on" not in dump.stderr.readline():  # tcpdump is capturing
            assert time.monotonic() < deadline and dump.poll() is None
        argv = iperf3_client_argv("10.78.0.2", 1.0, 5979, mss=tcp_mss(frame))
        subprocess.run(["ip", "netns", "exec", NS_A, *argv, "-b", "5M"], check=True,
                       capture_output=True, timeout=30)
        out, _ = dump.communicate(timeout=15)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    sizes = collections.Counter(int(m) for m in re.findall(rb"length (\d+):", out))
    data = {size: n for size, n in sizes.items() if size > 100}  # not SYNs and ACKs
    assert max(data) == frame, sizes
    assert data[frame] >= 0.9 * sum(data.values()), sizes
