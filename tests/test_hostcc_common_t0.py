"""Every sender of a run counts flow start times from the run's t0 (SenderConfig.t0_epoch),
not from when it finished setting up: on the default experiment's BMv2 runs of session
11 the three incast senders' clocks started 7 and 24 ms apart, so their "simultaneous"
flows went one after another (docs/emulation.md)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fixed_cc import Fixed

from p4cc.experiment.bmv2 import hosts as bmv2_hosts
from p4cc.hostcc.flow import FlowSpec
from p4cc.hostcc.receiver import Receiver, ReceiverConfig
from p4cc.hostcc.sender import Sender, SenderConfig
from p4cc.hostcc.trace import read_records


def _fixed(_spec: FlowSpec) -> Any:
    return Fixed(1e8)  # (a stand-in controller: fixed_cc's, not a RateController type)


def _send_one(t0_epoch: float | None, start_s: float) -> dict[str, float]:
    rx = Receiver(ReceiverConfig(bind="127.0.0.1", port=0)).start()
    try:
        tx = Sender([FlowSpec("127.0.0.1", 3000, start_s=start_s, port=rx.port)],
                    _fixed, SenderConfig(pkt_bytes=1000, t0_epoch=t0_epoch))
        tx.start()
        assert tx.wait(10.0)
        tx.stop()
    finally:
        rx.stop()
    rec: dict[str, float] = tx.records()[0]
    return rec


def test_a_sender_that_opens_late_counts_from_the_common_t0() -> None:
    """t0 was 0.3 s ago: a flow due at 0.1 s starts at once, 0.3 s or more into the run,
    and its Unix start time is t0 + start_s."""
    t0 = time.time() - 0.3
    rec = _send_one(t0, 0.1)
    assert rec["completed"] and rec["sched_start_s"] == 0.1
    assert 0.3 <= rec["start_s"] < 2.0
    assert rec["start_epoch"] == pytest.approx(t0 + rec["start_s"], abs=1e-6)


def test_a_sender_that_opens_early_waits_for_its_flows_time() -> None:
    """t0 is 0.2 s ahead: a flow due at 0 starts when t0 comes, not when the sender
    opened."""
    t0 = time.time() + 0.2
    rec = _send_one(t0, 0.0)
    assert rec["completed"] and 0.0 <= rec["start_s"] < 0.1
    assert rec["start_epoch"] >= t0 - 1e-3


def test_without_t0_the_clock_starts_when_the_sender_opens() -> None:
    before = time.time()
    rec = _send_one(None, 0.0)
    assert 0.0 <= rec["start_s"] < 0.5 and rec["start_epoch"] >= before


def test_the_wrapper_gate_hands_t0_to_host_run(tmp_path: Path) -> None:
    """``host run`` through the BMv2 wrapper, its go file's t0 0.4 s in the past (a host
    that was slow to get there): its flow's Unix start is t0 + start_s, i.e. it counted
    from the go file's t0, not from when it opened."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    t0 = time.time() - 0.4
    bmv2_hosts.write_go(go, t0)
    port = random.randrange(20000, 40000)
    p = subprocess.run([sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
                        str(ready), "--go", str(go), "--", "host", "run", "--bind",
                        "127.0.0.1", "--listen-port", str(port), "--dst", "127.0.0.1",
                        "--port", str(port), "--size", "3000", "--cc", "fixed:20e6",
                        "--until-flows", "1", "--duration", "30", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rec = read_records(tmp_path / "fct.csv")[0]
    assert rec["completed"] == "True" and float(rec["start_s"]) >= 0.4
    assert float(rec["start_epoch"]) - float(rec["start_s"]) == pytest.approx(t0, abs=1e-3)


def test_the_wrapper_gate_hands_t0_to_host_send(tmp_path: Path) -> None:
    """The default BMv2 layout runs ``host send`` apart from the receiver (a
    receive-only ``host run``): its flows count from the go file's t0 too."""
    port = random.randrange(20000, 40000)
    rx = subprocess.Popen([sys.executable, "-m", "p4cc", "host", "run", "--bind", "127.0.0.1",
                           "--listen-port", str(port), "--until-flows", "1", "--duration",
                           "30", "--out", str(tmp_path / "rx")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rx.stdout is not None and "listening" in rx.stdout.readline()
        go = tmp_path / "go"
        t0 = time.time() - 0.4
        bmv2_hosts.write_go(go, t0)
        tx = subprocess.run([sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
                             str(tmp_path / "ready"), "--go", str(go), "--", "host", "send",
                             "--dst", "127.0.0.1", "--port", str(port), "--size", "3000",
                             "--cc", "fixed:20e6", "--deadline", "30", "--out",
                             str(tmp_path / "tx")], capture_output=True, text=True, timeout=60)
        assert tx.returncode == 0, tx.stderr
        rx.communicate(timeout=30)
    finally:
        if rx.poll() is None:
            rx.kill()
    rec = read_records(tmp_path / "tx" / "fct.csv")[0]
    assert rec["completed"] == "True" and float(rec["start_s"]) >= 0.4
    assert float(rec["start_epoch"]) - float(rec["start_s"]) == pytest.approx(t0, abs=1e-3)


def test_the_gate_lets_a_host_set_up_before_t0(tmp_path: Path) -> None:
    """The wrapper leaves the gate SETUP_LEAD_S before t0 (its sender then opens, builds
    its HTB qdisc and its first flows' classes before they are due: when it left at t0,
    the first flows of the default experiment's senders started 30-76 ms late), and
    hands over t0 itself."""
    go, ready = tmp_path / "go", tmp_path / "ready"
    t0 = time.time() + 0.6
    bmv2_hosts.write_go(go, t0)
    got = bmv2_hosts.wait_for_go(ready, go, lead_s=0.4)
    left = time.time()
    assert got == t0 and ready.is_file()
    assert t0 - 0.4 - 1e-3 <= left < t0  # left at t0 - lead, before t0
