"""``p4cc host send/recv`` and the Python API on loopback (no root, userspace pacing)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from p4cc.cli import build_parser, main
from p4cc.hostcc import api
from p4cc.hostcc.receiver import ReceiverConfig
from p4cc.hostcc.sender import SenderConfig
from p4cc.hostcc.trace import read_records


def test_parser_has_host_commands() -> None:
    args = build_parser().parse_args(["host", "send", "--dst", "10.0.1.2", "--size", "1000",
                                      "--flows", "3", "--cc", "fixed:1e6"])
    assert args.flows == 3 and args.cc == "fixed:1e6"
    args = build_parser().parse_args(["host", "recv", "--port", "4792"])
    assert args.port == 4792


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["host", "send", "--size", "10"]) == 2
    assert "--dst" in capsys.readouterr().err
    assert main(["host", "send", "--schedule", str(tmp_path / "none.json")]) == 2
    assert "--schedule" in capsys.readouterr().err


def test_send_recv_processes_on_loopback(tmp_path: Path) -> None:
    pytest.importorskip("p4cc.hostcc.cc", reason="CC cores not installed")
    port = random.randrange(20000, 40000)
    rx = subprocess.Popen(
        [sys.executable, "-m", "p4cc", "host", "recv", "--bind", "127.0.0.1", "--port",
         str(port), "--until-flows", "2", "--out", str(tmp_path / "rx"), "--duration", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rx.stdout is not None
        assert "listening" in rx.stdout.readline()
        tx = subprocess.run(
            [sys.executable, "-m", "p4cc", "host", "send", "--dst", "127.0.0.1", "--port",
             str(port), "--size", "200000", "--flows", "2", "--cc", "fixed:20e6", "--out",
             str(tmp_path / "tx"), "--deadline", "30"],
            capture_output=True, text=True, timeout=60)
        assert tx.returncode == 0, tx.stderr
        recs = [json.loads(line) for line in tx.stdout.splitlines()]
        assert len(recs) == 2 and all(r["completed"] and r["fct_s"] > 0 for r in recs)
        _out, err = rx.communicate(timeout=30)
        assert rx.returncode == 0, err
    finally:
        if rx.poll() is None:
            rx.kill()
    fct = read_records(tmp_path / "tx" / "fct.csv")
    assert [r["completed"] for r in fct] == ["True", "True"]
    assert read_records(tmp_path / "tx" / "trace.csv")
    rxf = read_records(tmp_path / "rx" / "rx_flows.csv")
    assert sorted(int(r["rx_bytes"]) for r in rxf) == [200000, 200000]


def test_api_run_flows_with_dcqcn(tmp_path: Path) -> None:
    pytest.importorskip("p4cc.hostcc.cc", reason="CC cores not installed")
    rx = api.start_receiver(ReceiverConfig(bind="127.0.0.1", port=0))
    try:
        recs = api.run_flows([("127.0.0.1", 50_000, 0.0, "dcqcn", rx.port),
                              ("127.0.0.1", 30_000, 0.05, "fixed:5e6", rx.port)],
                             deadline_s=30.0, cfg=SenderConfig(), out_dir=tmp_path)
    finally:
        rxrecs = api.stop_receiver(rx, tmp_path)
    assert all(r["completed"] for r in recs)
    assert sorted(r["rx_bytes"] for r in rxrecs) == [30_000, 50_000]
    trace = read_records(tmp_path / "trace.csv")
    assert {"t", "rate_bps", "rtt_s"} <= set(trace[0])


def test_frame_size_is_the_scales_pkt_bytes() -> None:
    """Scale.pkt_bytes is the frame on the wire; the datagram is 14 B (Ethernet) less."""
    from p4cc.hostcc import wire
    from p4cc.scale import get_scale

    scale = get_scale("testbed")
    assert api.datagram_bytes(scale) + wire.ETH_LEN == scale.pkt_bytes


def test_nic_rate_needs_dev_and_is_passed_by_the_bmv2_wrapper(
        capsys: pytest.CaptureFixture[str]) -> None:
    from p4cc.experiment.bmv2.hosts import with_nic_rate

    assert main(["host", "send", "--dst", "127.0.0.1", "--size", "10",
                 "--nic-rate", "1e7"]) == 2
    assert "--dev" in capsys.readouterr().err
    args = build_parser().parse_args(
        with_nic_rate(["host", "send", "--dst", "10.0.1.2", "--size", "9", "--dev", "h1-eth0"],
                      1e7))
    assert args.nic_rate == 1e7 and args.rto_max == 0.0
    assert with_nic_rate(["host", "recv"], 1e7) == ["host", "recv"]
    assert with_nic_rate(["host", "send"], 0.0) == ["host", "send"]
