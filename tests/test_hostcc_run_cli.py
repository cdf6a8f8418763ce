"""``p4cc host run`` (a host's receiver and sender in one process) on loopback, no root;
and the BMv2 wrapper's gate for it."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from p4cc.cli import build_parser, main
from p4cc.experiment.bmv2 import hosts as bmv2_hosts
from p4cc.hostcc.trace import read_records

pytest.importorskip("p4cc.hostcc.cc", reason="CC cores not installed")


def _run(*args: str) -> list[str]:
    return [sys.executable, "-m", "p4cc", "host", "run", "--bind", "127.0.0.1", *args]


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def test_parser_run_has_both_roles() -> None:
    args = build_parser().parse_args(["host", "run", "--dst", "10.0.0.2", "--size", "9",
                                      "--listen-port", "4792", "--recv-out", "r",
                                      "--out", "s", "--cc", "fixed:1e6"])
    assert (args.listen_port, args.port, args.recv_out, args.out) == (4792, 4791, "r", "s")
    assert not args.no_recv and args.deadline == 300.0


def test_run_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["host", "run", "--no-recv"]) == 2
    assert "nothing to run" in capsys.readouterr().err
    assert main(["host", "run", "--dst", "127.0.0.1", "--size", "10", "--cc", "nosuch",
                 "--no-recv"]) == 2
    assert main(["host", "run", "--dst", "127.0.0.1", "--size", "10", "--nic-rate",
                 "1e7"]) == 2
    assert "--dev" in capsys.readouterr().err


def test_two_hosts_one_process_each(tmp_path: Path) -> None:
    """Two ``host run`` processes send to each other; each writes the files of a
    ``host send`` and a ``host recv``, and is one process with one Python thread."""
    pa, pb = random.sample(range(20000, 40000), 2)
    common = ["--size", "150000", "--flows", "2", "--stagger", "0.05", "--until-flows", "2",
              "--duration", "30"]
    a = subprocess.Popen(_run("--listen-port", str(pa), "--dst", "127.0.0.1", "--port",
                              str(pb), "--cc", "dcqcn", "--out", str(tmp_path / "a"),
                              *common), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    b: subprocess.Popen[str] | None = None
    try:
        assert a.stdout is not None
        assert json.loads(a.stdout.readline())["listening"] == pa
        b = subprocess.Popen(_run("--listen-port", str(pb), "--dst", "127.0.0.1", "--port",
                                  str(pa), "--cc", "fixed:20e6", "--out",
                                  str(tmp_path / "b" / "send"), "--recv-out",
                                  str(tmp_path / "b" / "recv"), *common),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threads = []
        while b.poll() is None and a.poll() is None:
            threads.append(_threads(b.pid))
            time.sleep(0.02)  # poll interval of the sampling
        out_b, err_b = b.communicate(timeout=60)
        _out_a, err_a = a.communicate(timeout=60)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    recs_b = [json.loads(x) for x in out_b.splitlines()[1:]]  # after {"listening": ..}
    assert [r["role"] for r in recs_b] == ["send", "send", "recv", "recv"]
    assert all(r["completed"] for r in recs_b if r["role"] == "send")
    # files: a's in one directory (--recv-out defaults to --out), b's split like the backend
    for send, recv in ((tmp_path / "a", tmp_path / "a"),
                       (tmp_path / "b" / "send", tmp_path / "b" / "recv")):
        assert [r["completed"] for r in read_records(send / "fct.csv")] == ["True", "True"]
        assert read_records(send / "trace.csv")
        rx = read_records(recv / "rx_flows.csv")
        assert sorted(int(r["rx_bytes"]) for r in rx) == [150000, 150000]
        assert json.loads((recv / "rx_counters.json").read_text())["datagrams"] > 0
    # one interpreter: no sender or receiver thread (native library threads aside, the
    # old pair of processes had 4 tasks each)
    if threads:
        assert max(threads) <= 3, threads


def test_run_receives_from_the_old_send_command(tmp_path: Path) -> None:
    """``host run`` without flows is a receiver; ``host send`` still talks to it."""
    port = random.randrange(20000, 40000)
    rx = subprocess.Popen(_run("--listen-port", str(port), "--until-flows", "1",
                               "--duration", "30", "--out", str(tmp_path)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rx.stdout is not None and "listening" in rx.stdout.readline()
        tx = subprocess.run([sys.executable, "-m", "p4cc", "host", "send", "--dst",
                             "127.0.0.1", "--port", str(port), "--size", "50000", "--cc",
                             "fixed:20e6", "--deadline", "30"],
                            capture_output=True, text=True, timeout=60)
        assert tx.returncode == 0, tx.stderr
        out, err = rx.communicate(timeout=30)
    finally:
        if rx.poll() is None:
            rx.kill()
    assert rx.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["rx_bytes"] == 50000
    assert not (tmp_path / "fct.csv").exists()  # no sender
    assert len(read_records(tmp_path / "rx_flows.csv")) == 1


def test_sigterm_writes_records_and_exits_0_when_the_flows_are_done(tmp_path: Path) -> None:
    port = random.randrange(20000, 40000)
    p = subprocess.Popen(_run("--listen-port", str(port), "--dst", "127.0.0.1", "--port",
                              str(port), "--size", "20000", "--cc", "fixed:20e6", "--out",
                              str(tmp_path)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until its own flow has arrived
            rows = (read_records(tmp_path / "fct.csv")
                    if (tmp_path / "fct.csv").is_file() else [])
            if rows and rows[0]["completed"] == "True":
                break
            time.sleep(0.05)  # poll interval of the condition
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert read_records(tmp_path / "rx_flows.csv")[0]["rx_bytes"] == "20000"


def test_wrapper_gate_runs_after_the_receiver_listens(tmp_path: Path) -> None:
    """Through the BMv2 wrapper, ``host run`` creates the ready file only once it
    listens, and a stop while it waits for the go file ends it at once (130)."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    port = random.randrange(20000, 40000)
    p = subprocess.Popen([sys.executable, "-m", "p4cc.experiment.bmv2.hosts", "--ready",
                          str(ready), "--go", str(go), "--", "host", "run", "--bind",
                          "127.0.0.1", "--listen-port", str(port), "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.is_file() and time.monotonic() < deadline:
            assert p.poll() is None, p.communicate()
            time.sleep(0.02)  # poll interval of the readiness condition
        assert ready.is_file()
        ss = subprocess.run(["ss", "-lun"], capture_output=True, text=True).stdout
        assert f"127.0.0.1:{port}" in ss
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert (tmp_path / "rx_flows.csv").is_file()


def test_wrapper_passes_nic_rate_to_run_only_when_it_paces() -> None:
    run = ["host", "run", "--dst", "10.0.1.2", "--size", "9", "--dev", "h1-eth0"]
    args = build_parser().parse_args(bmv2_hosts.with_nic_rate(run, 1e7))
    assert args.nic_rate == 1e7
    assert bmv2_hosts.with_nic_rate(["host", "run", "--no-recv"], 1e7) == \
        ["host", "run", "--no-recv"]
