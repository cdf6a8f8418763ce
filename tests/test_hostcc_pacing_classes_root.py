"""How the HTB pacer's flow classes are made and found (root, no BMv2): packets find
their class by the socket's priority (no filter per flow), probes the control class,
classes are created through the acknowledged ``tc -batch`` child, and a class tc refuses,
or a tc that ends before it ran the class's line or never answers, is handled
(p4cc.hostcc.pacing)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hostcc_pacing_root import Net, start_pair, wait_for

from p4cc.errors import P4ccError
from p4cc.hostcc import pacing, tcbatch
from p4cc.hostcc.pacing import HtbPacer, PacerConfig

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for netns/veth/tc"),
    pytest.mark.skipif(shutil.which("tc") is None, reason="needs iproute2 `tc`"),
]

TC = shutil.which("tc") or "tc"


@pytest.fixture(name="net")
def fresh_net() -> Iterator[Net]:
    """The sender/receiver namespace pair of test_hostcc_pacing_root."""
    with Net.fresh() as n:
        yield n


def tc_show(net: Net, *what: str) -> str:
    return subprocess.run(["ip", "netns", "exec", net.a, TC, "-s", *what, "show", "dev",
                           net.va], capture_output=True, text=True, check=True).stdout


def sent_pkts(stats: str, classid: str) -> int:
    """Packets ``tc -s class show`` says class ``classid`` sent."""
    for block in stats.split("class htb ")[1:]:
        if block.startswith(f"{classid} "):
            found = re.search(r"Sent \d+ bytes (\d+) pkt", block)
            return int(found.group(1)) if found else -1
    return -1


@pytest.mark.parametrize("link", [None, 5e6])
def test_flows_and_probes_find_their_classes_without_a_filter_per_flow(
        net: Net, link: float | None) -> None:
    rx, tx = start_pair(net, [2e6, 1e6], 400_000, link_rate_bps=link)
    try:
        assert wait_for(lambda: len(tx.flows) == 2
                        and all(f.probes >= 30 for f, _ in tx.flows), 10.0)
        assert tx._pacer is not None and tx._pacer.stats.batch  # made through tc
        probes = sum(f.probes for f, _ in tx.flows)  # sent before the stats are read
        classes, filters = tc_show(net, "class"), tc_show(net, "filter")
    finally:
        tx.stop()
        rx.stop()
    # the two flows' classes carried their data; the control class at least the probes
    assert sent_pkts(classes, "cc:100") > 20 and sent_pkts(classes, "cc:101") > 10, classes
    assert sent_pkts(classes, "cc:1") >= probes, (probes, classes)
    # one u32 rule: the control class's (probes from sockets without a class); none per flow
    assert filters.count("flowid") == 1 and "flowid cc:1" in filters, filters


def test_a_class_tc_refuses_is_a_clear_error(net: Net) -> None:
    p = HtbPacer(PacerConfig(dev=net.va, netns=net.a)).start()
    try:
        subprocess.run(["ip", "netns", "exec", net.a, TC, "class", "add", "dev", net.va,
                        "parent", "cc:", "classid", "cc:100", "htb", "rate", "1mbit"],
                       check=True)  # the first flow's class id, taken behind its back
        with pytest.raises(P4ccError, match=r"tc could not create the pacing class cc:100 "
                           r"of UDP source port 30000: RTNETLINK answers: File exists"):
            p.add_flow(30000, 1e6)
        assert p.add_flow(30001, 1e6) == 0xCC0101  # the next flow is not held up
    finally:
        p.close()


def test_a_tc_that_ends_before_the_class_is_replaced_by_netlink(
        net: Net, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``tc`` that reads the class's line and ends: the flow's class is made through
    pyroute2 (and so are later classes), at the rate asked for."""
    fake = tmp_path / "tc"
    fake.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.readline()\nsys.exit(1)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    p = HtbPacer(PacerConfig(dev=net.va, netns=net.a)).start()
    try:
        assert p.stats.batch
        assert p.add_flow(30000, 3e6) == 0xCC0100
        assert p.add_flow(30001, 2e6) == 0xCC0101
        classes = tc_show(net, "class")
        assert not p.stats.batch
    finally:
        p.close()
    assert re.search(r"class htb cc:100 .*ceil 3Mbit", classes), classes
    assert re.search(r"class htb cc:101 .*ceil 2Mbit", classes), classes


def test_a_tc_that_never_answers_is_killed_and_replaced_by_netlink(
        net: Net, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``tc`` that stays alive and never runs its input (nor ends at its EOF): after
    the ack's timeout the flow's class is made through pyroute2 at the asked rate, and
    the hung child is killed, not left behind."""
    fake = tmp_path / "tc"
    # as `tc -batch` it hangs; any other use (the test's own `tc qdisc show`) is tc's
    fake.write_text(f"#!{sys.executable}\nimport os, sys, time\n"
                    "if '-batch' not in sys.argv:\n"
                    f"    os.execv({TC!r}, [{TC!r}, *sys.argv[1:]])\n"
                    "sys.stdin.readline()\ntime.sleep(600)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    # the ack is given up after CALL_TIMEOUT_S; killing tc then takes CLOSE_TIMEOUT_S
    monkeypatch.setattr(pacing, "CALL_TIMEOUT_S", 3.0)
    monkeypatch.setattr(tcbatch, "CLOSE_TIMEOUT_S", 1.0)
    p = HtbPacer(PacerConfig(dev=net.va, netns=net.a)).start()
    try:
        assert p.stats.batch and p._tc is not None
        child = p._tc._proc
        assert p.add_flow(30000, 3e6) == 0xCC0100
        assert not p.stats.batch
        assert child.poll() is not None  # killed and reaped
        assert p.add_flow(30001, 2e6) == 0xCC0101  # later classes: pyroute2 at once
        classes = tc_show(net, "class")
    finally:
        p.close()
    assert re.search(r"class htb cc:100 .*ceil 3Mbit", classes), classes
    assert re.search(r"class htb cc:101 .*ceil 2Mbit", classes), classes


def test_without_tc_batch_classes_are_made_through_netlink(net: Net) -> None:
    """``batch_tc=False``: the flow's class is made through pyroute2 (no ack to wait
    for) at the rate asked for."""
    p = HtbPacer(PacerConfig(dev=net.va, netns=net.a, batch_tc=False)).start()
    try:
        assert not p.stats.batch and p._tc is None
        assert p.add_flow(30000, 2e6) == 0xCC0100
        classes = tc_show(net, "class")
    finally:
        p.close()
    assert re.search(r"class htb cc:100 .*ceil 2Mbit", classes), classes
