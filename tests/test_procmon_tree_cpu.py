"""p4cc.experiment.bmv2.procmon.tree_cpu_seconds: a host process's CPU with its live
children's (the pacer's ``tc -batch`` does its netlink work) and its ended ones'."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from p4cc.experiment.bmv2.procmon import cpu_seconds, tree_cpu_seconds

# a parent that starts a child burning ~0.4 s of CPU, waits for it only when told, idles
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass\\n"
    "time.sleep(30)"])
print(child.pid, flush=True)
sys.stdin.readline()
child.kill(); child.wait()
print("reaped", flush=True)
time.sleep(30)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_tree_cpu_counts_live_and_ended_children() -> None:
    p = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        child = int(p.stdout.readline())
        end = time.monotonic() + 20.0
        while cpu_seconds(child) < 0.35 and time.monotonic() < end:
            time.sleep(0.02)  # poll interval of the child's CPU condition
        own = cpu_seconds(p.pid)
        live = tree_cpu_seconds(p.pid)
        assert live - own >= 0.35, (own, live)  # the live child's CPU is in the tree's
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "reaped"
        assert tree_cpu_seconds(p.pid) - cpu_seconds(p.pid) >= 0.35  # now as ended child's
    finally:
        p.kill()
        p.wait()


def test_tree_cpu_of_a_missing_process_raises() -> None:
    with pytest.raises(OSError):
        tree_cpu_seconds(2**22 + 12345)
